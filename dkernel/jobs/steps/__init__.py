"""Built-in job methods; importing this package registers them."""

from dkernel.jobs.steps import rbf_spectral  # noqa: F401
