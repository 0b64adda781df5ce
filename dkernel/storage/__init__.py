"""The results store (the only code that knows the Zarr layout).

:mod:`dkernel.storage.store` writes stores and :mod:`dkernel.storage.reader` opens them,
:mod:`dkernel.storage.layout` builds the dataset of every group, :mod:`dkernel.storage.query`
answers ranking queries from a store.
The names below are imported on first use (``dkernel._lazy``): the store's light modules
(side files, leases, path checks) load without xarray and Zarr.
"""

from dkernel._lazy import attach

__getattr__, __dir__, __all__ = attach(
    __name__,
    {
        "query": ["read_model_order", "seed_scores", "top_k"],
        "store": ["ResultsStore", "describe_store", "open_results", "recorded_path"],
    },
)
