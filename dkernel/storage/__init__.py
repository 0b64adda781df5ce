"""The results store (the only code that knows the Zarr layout).

:mod:`dkernel.storage.store` writes and opens stores, :mod:`dkernel.storage.layout` builds the
dataset of every group, :mod:`dkernel.storage.query` answers ranking queries from a store.
"""

from dkernel.storage.query import seed_scores, top_k
from dkernel.storage.store import ResultsStore, describe_store, open_results, recorded_path

__all__ = [
    "ResultsStore",
    "describe_store",
    "open_results",
    "recorded_path",
    "seed_scores",
    "top_k",
]
