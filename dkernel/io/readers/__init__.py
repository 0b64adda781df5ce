"""Built-in data readers, one module per kind of data (tables, images).

:data:`dkernel.io.registry.READERS` imports every module of this package on its first lookup,
and each registers its readers: a new reader is a new module here (or a ``register_reader``
call in one), with no list of modules to edit. The modules import no Dask or scikit-learn at
import time; what a reader needs is imported when it loads.
"""

from dkernel._lazy import attach

__getattr__, __dir__, __all__ = attach(
    __name__, {"tables": ["SKLEARN_DATASETS", "load_csv", "load_npy", "load_sklearn"]}
)
