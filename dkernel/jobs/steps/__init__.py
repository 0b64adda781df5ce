"""Built-in job methods; importing this package registers them."""

from dkernel.jobs.steps import rbf_spectral  # noqa: F401
from dkernel.jobs.steps import kppr  # noqa: E402,F401
from dkernel.jobs.steps import jrc  # noqa: E402,F401
from dkernel.jobs.steps import mssc  # noqa: E402,F401
