"""Built-in job methods; importing this package registers them."""

from dkernel.jobs.steps import (
    jrc,  # noqa: E402,F401
    kppr,  # noqa: E402,F401
    mssc,  # noqa: E402,F401
    pck_spectral,  # noqa: F401
    rbf_spectral,  # noqa: F401
    spectral_clustering,  # noqa: F401
)
from dkernel.jobs.steps import kernel_decomposition  # noqa: E402,F401
