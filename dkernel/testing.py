"""Helpers for testing code built on dkernel (and dkernel's own tests)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import numpy as np


def as_kind(X: np.ndarray, kind: str, chunk_rows: int = 97) -> Any:
    """X as a NumPy array (``kind='numpy'``) or a Dask array chunked along rows ('dask')."""
    if kind == "numpy":
        return X
    import dask.array as da

    return da.from_array(X, chunks=(chunk_rows, X.shape[1]) if X.ndim == 2 else chunk_rows)


class _CountingScheduler:
    def __init__(self, max_computes: int) -> None:
        self.total_computes = 0
        self.max_computes = max_computes

    def __call__(self, dsk: Any, keys: Any, **kwargs: Any) -> Any:
        import dask

        self.total_computes += 1
        if self.total_computes > self.max_computes:
            raise RuntimeError(
                f"Too many computes. Total: {self.total_computes} > max: {self.max_computes}."
            )
        return dask.get(dsk, keys, **kwargs)


@contextlib.contextmanager
def raise_if_dask_computes(max_computes: int = 0) -> Iterator[_CountingScheduler]:
    """Fail when code inside the block computes Dask collections more than ``max_computes`` times."""
    import dask

    scheduler = _CountingScheduler(max_computes)
    with dask.config.set(scheduler=scheduler):
        yield scheduler
