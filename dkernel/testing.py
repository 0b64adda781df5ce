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


def assert_equal_up_to_row_blocking(actual: Any, desired: Any) -> None:
    """Equal up to the rounding that a different row blocking of a float32 GEMM gives.

    OpenBLAS computes a row with different micro-kernels depending on where the row falls in
    the call (edge tiles, the split between its threads), so the same float32 product taken
    in 50-row Dask chunks and in one NumPy call can differ in the last bits (seen on AVX2
    machines, not on AVX-512 ones). The same blocking on the same machine is bit-identical;
    compare different blockings with this.
    """
    actual, desired = np.asarray(actual), np.asarray(desired)
    assert actual.shape == desired.shape and actual.dtype == desired.dtype
    scale = float(np.max(np.abs(desired))) if desired.size else 0.0
    np.testing.assert_allclose(actual, desired, rtol=1e-5, atol=1e-5 * scale)
