"""The results store (the only code that knows the Zarr layout)."""

from dkernel.storage.store import ResultsStore, describe_store, open_results, recorded_path

__all__ = ["ResultsStore", "describe_store", "open_results", "recorded_path"]
