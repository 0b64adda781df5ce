"""Rows of a NumPy or Dask array, taken without moving whole chunks."""

from __future__ import annotations

from typing import Any

import dask
import dask.array
import numpy as np


def take_rows(X: Any, idx: np.ndarray, dtype: Any = None) -> np.ndarray:
    """Rows ``idx`` of ``X`` (in the order given) as a NumPy array.

    For a Dask array only the row chunks holding some of the rows are computed, each giving
    its own rows in its own task, which drops the rest of the chunk at once: memory O(rows
    taken + one chunk per worker). Dask's own fancy indexing moves whole chunks through a
    shuffle and held ~50 chunks of an MSSC scene's features on one worker at 3 · 10⁷ pixels.
    """
    idx = np.asarray(idx, dtype=np.int64)
    if not (hasattr(X, "dask") and hasattr(X, "blocks")):
        return np.asarray(np.asarray(X)[idx], dtype=dtype)
    order = np.argsort(idx, kind="stable")
    wanted = idx[order]
    bounds = np.cumsum((0, *X.chunks[0]))
    cuts = np.searchsorted(wanted, bounds)
    needed = np.flatnonzero(np.diff(cuts))
    if needed.size == 0:
        return np.empty((0, *X.shape[1:]), dtype=dtype or X.dtype)
    # each task gets its own chunk's rows only: a closure over every chunk's rows would be
    # copied into every task, and kept by the workers until the pass ends
    if any(n > 1 for n in X.numblocks[1:]):
        X = X.rechunk({axis: -1 for axis in range(1, X.ndim)})
    blocks = X.to_delayed().reshape(X.numblocks[0], -1)[:, 0]
    pick = dask.delayed(_pick_rows, pure=True)
    parts = dask.compute(
        *[pick(blocks[i], wanted[cuts[i] : cuts[i + 1]] - bounds[i]) for i in needed]
    )
    out = np.empty((int(wanted.size), *X.shape[1:]), dtype=dtype or X.dtype)
    out[order] = np.concatenate(parts)
    return out


def _pick_rows(block: np.ndarray, rows: np.ndarray) -> np.ndarray:
    return block[rows]


def delayed_array(X: Any) -> Any:
    """A Dask array as one ``Delayed`` of the whole NumPy array (its blocks joined by
    ``np.block`` in the task), to pass to ``dask.delayed`` functions; anything else as it is.

    Handing the array itself to a delayed function gives the same task, but Dask wraps it in
    an expression that imports ``distributed`` (0.1–0.2 s on 2 CPUs) in a process that had
    no need of it.
    """
    if not isinstance(X, dask.array.Array):
        return X
    return dask.delayed(np.block, pure=True)(X.to_delayed().tolist())
