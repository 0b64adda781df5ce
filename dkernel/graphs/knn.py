"""k-nearest-neighbour search chunk by chunk: a fitted scikit-learn index queried per row block.

The index (a :class:`sklearn.neighbors.NearestNeighbors` on the training points) travels to each
task once; every row chunk of the query array is searched independently, so memory per task is
O(chunk · k) plus the index, and the result is the (n, k) neighbour lists, never n × n.
"""

from __future__ import annotations

from typing import Any

import dask.array as da
import numpy as np
from sklearn.neighbors import NearestNeighbors


def build_index(X: np.ndarray) -> NearestNeighbors:
    """A neighbour index on the training points (k-d / ball tree in low dimension, brute
    force above, as scikit-learn's ``algorithm='auto'`` chooses)."""
    return NearestNeighbors().fit(np.asarray(X, dtype=np.float64))


def _query_block(block: np.ndarray, index: NearestNeighbors, n_neighbors: int) -> np.ndarray:
    dist, ind = index.kneighbors(
        np.asarray(block, dtype=np.float64), n_neighbors=n_neighbors, return_distance=True
    )
    return np.concatenate([dist, ind.astype(np.float64)], axis=1)


def knn_search(
    index: NearestNeighbors, X: Any, n_neighbors: int
) -> tuple[np.ndarray, np.ndarray] | tuple[da.Array, da.Array]:
    """Distances and indices of each row's ``n_neighbors`` nearest training points.

    NumPy input gives NumPy arrays; Dask input gives lazy (n, k) arrays, one task per row chunk.
    """
    k = int(n_neighbors)
    if isinstance(X, da.Array):
        X = X.rechunk({1: -1})
        both = X.map_blocks(
            _query_block,
            index,
            k,
            chunks=(X.chunks[0], (2 * k,)),
            dtype=np.float64,
            meta=np.empty((0, 0), dtype=np.float64),
        )
        return both[:, :k], both[:, k:].astype(np.int64)
    both = _query_block(np.asarray(X), index, k)
    return both[:, :k], both[:, k:].astype(np.int64)
