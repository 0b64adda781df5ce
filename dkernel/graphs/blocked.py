"""Dask graphs for blocked kernel matrices: one task per (row block, column block)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import dask.array as da
import numpy as np
from threadpoolctl import threadpool_limits

from dkernel._budget import KERNEL_BLOCK_BYTES, rows_for_budget
from dkernel.errors import InvalidInputError


def as_row_chunked(X: Any, block_rows: int) -> da.Array:
    """X as a Dask array with ``block_rows`` rows per chunk and one chunk along features."""
    if isinstance(X, da.Array):
        return X.rechunk({0: block_rows, 1: -1})
    return da.from_array(np.asarray(X), chunks=(block_rows, -1))


def blocked_kernel(
    block_fn: Callable[..., np.ndarray],
    X: Any,
    Y: Any = None,
    *,
    block_rows: int | None = None,
    dtype: Any = np.float64,
    **kwargs: Any,
) -> da.Array:
    """A lazy kernel matrix ``K[i, j] = k(x_i, y_j)`` with ``block_rows`` × ``block_rows`` chunks.

    Parameters
    ----------
    block_fn : callable
        ``block_fn(X_block, Y_block, **kwargs) -> ndarray`` (e.g. :func:`dkernel.kernels.rbf_block`).
    X, Y : array-like or dask.array.Array
        Row samples; ``Y`` defaults to ``X``.
    block_rows : int, optional
        Rows (and columns) per chunk; by default about 64 MiB per block.
    dtype : dtype
        Output dtype (passed to ``block_fn`` as ``dtype``).

    Notes
    -----
    Nothing is computed here; writing the result with ``to_zarr`` streams one block per task,
    so peak memory is a few blocks per worker.
    """
    dtype = np.dtype(dtype)
    n = int(X.shape[0])
    b = block_rows or rows_for_budget(KERNEL_BLOCK_BYTES, None, dtype.itemsize, high=n)
    Xd = as_row_chunked(X, b)
    Yd = Xd if Y is None else as_row_chunked(Y, b)
    if Xd.shape[1] != Yd.shape[1]:
        raise InvalidInputError(
            f"a kernel between rows of {Xd.shape[1]} and of {Yd.shape[1]} features: X and Y "
            "need the same columns."
        )
    # the features are one chunk in both, so the chunks already line up; aligning them
    # would only warn that an n × n matrix has more chunks than its n rows (it must)
    return da.blockwise(
        _apply_block,
        "ij",
        Xd,
        "ik",
        Yd,
        "jk",
        dtype=dtype,
        concatenate=True,
        align_arrays=False,
        block_fn=block_fn,
        out_dtype=dtype,
        kwargs=kwargs,
    )


def _apply_block(x, y, *, block_fn, out_dtype, kwargs):
    # blocks run in parallel (one per scheduler thread or worker): a multi-threaded BLAS
    # inside each would oversubscribe the cores
    with threadpool_limits(limits=1, user_api="blas"):
        return block_fn(x, y, dtype=out_dtype.type, **kwargs)
