"""Dask arrays held on the job's workers (or in this process's memory without a cluster)."""

from __future__ import annotations

from typing import Any


def persist(X: Any, client: Any) -> Any:
    """``X`` persisted on ``client``'s cluster, or in this process's memory (``client`` None:
    Dask's configured scheduler computes it)."""
    if client is None:
        import dask

        return dask.persist(X)[0]
    return client.persist(X)


def with_own_keys(X: Any) -> Any:
    """``X`` (a Dask array) under keys of its own, for persisting.

    A reader's keys hash the file and its options, so two jobs on the same data share them; on
    one scheduler the client of the job before, releasing them as it closes, raced with this
    job's persist of the same keys (``FutureCancelledError: lost dependencies``).
    """
    import uuid

    import numpy as np

    return X.map_blocks(np.asarray, dtype=X.dtype, name=f"dkernel-{uuid.uuid4().hex}")
