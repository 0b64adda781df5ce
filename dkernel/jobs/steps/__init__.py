"""Built-in job methods; importing this package registers them."""

from dkernel.jobs.steps import (
    jrc,  # noqa: F401
    kernel_decomposition,  # noqa: F401
    kppr,  # noqa: F401
    mssc,  # noqa: F401
    pck_spectral,  # noqa: F401
    rbf_spectral,  # noqa: F401
    spectral_clustering,  # noqa: F401
)
