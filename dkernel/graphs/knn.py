"""k-nearest-neighbour search chunk by chunk: a fitted scikit-learn index queried per row block.

The index (a :class:`sklearn.neighbors.NearestNeighbors` on the training points) travels to each
task once; every row chunk of the query array is searched independently, so memory per task is
O(chunk · k) plus the index, and the result is the (n, k) neighbour lists, never n × n.

Training points with missing entries (NaN) get a :class:`MissingValueIndex`: neighbours by the
expected squared distance ``E‖x − y‖² = ‖x̃ − ỹ‖² + r_x + r_y`` of
:mod:`dkernel.kernels.missing` (``x̃`` the mean-imputed row, ``r_x`` the variance of the
columns ``x`` misses), found by an ordinary tree: the training rows are indexed as
``[ỹ, √r_y]`` and a query as ``[q̃, 0]``, so the tree's squared distance is
``‖q̃ − ỹ‖² + r_y`` and adding ``r_q`` (the same for every candidate) gives the expectation
exactly, in the same order. No n × n matrix is formed. A training point is at distance 0 from
itself (:func:`training_neighbors` lists it first), a new point at the expected distance from
every training point, with the training rows' missing-value model.
"""

from __future__ import annotations

from typing import Any

import dask.array as da
import numpy as np
from sklearn.neighbors import NearestNeighbors


class MissingValueIndex:
    """Nearest training points by the expected squared distance, for training data with NaN.

    The call pattern of :class:`sklearn.neighbors.NearestNeighbors` (``fit``, ``kneighbors``,
    ``n_features_in_``, ``n_samples_fit_``); distances are ``sqrt(E‖q − y‖²)`` with the training
    rows' missing-value model (:class:`dkernel.kernels.missing.MissingValueModel`), whatever
    the query's own missing entries. ``kneighbors`` treats every query as a new point (a training row queried
    again is at ``sqrt(2 r)`` from itself, two independent draws of its missing entries); for
    the training graph use :func:`training_neighbors`.

    Parameters
    ----------
    algorithm : str
        scikit-learn's ``algorithm`` for the tree on the augmented rows.

    Attributes
    ----------
    model_ : dkernel.kernels.missing.MissingValueModel
        What the missing entries are expected to be, fitted to the training rows.
    extra_ : ndarray (n_train,)
        Each training row's ``r``, the total variance of its missing entries given the others.
    """

    def __init__(self, algorithm: str = "auto") -> None:
        self.algorithm = algorithm

    def fit(self, X: np.ndarray) -> MissingValueIndex:
        from dkernel.kernels.missing_model import MissingValueModel, warn_of_empty_rows

        X = np.asarray(X, dtype=np.float64)
        warn_of_empty_rows(X)
        self.model_ = MissingValueModel.fit(X)
        filled, self.extra_ = self.fill(X)
        augmented = np.concatenate([filled, np.sqrt(self.extra_)[:, None]], axis=1)
        self._tree = NearestNeighbors(algorithm=self.algorithm).fit(augmented)
        self.n_features_in_ = int(X.shape[1])
        self.n_samples_fit_ = int(X.shape[0])
        return self

    def fill(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Rows filled with their conditional means and each row's ``r`` (the training rows'
        model, :meth:`dkernel.kernels.missing.MissingValueModel.fill`)."""
        return self.model_.fill(X)

    def kneighbors(self, X: np.ndarray, n_neighbors: int, return_distance: bool = True) -> Any:
        """The ``n_neighbors`` training points of least expected distance to each row of X,
        nearest first (distances are square roots of the expectations)."""
        filled, extra = self.fill(X)
        query = np.concatenate([filled, np.zeros((filled.shape[0], 1))], axis=1)
        dist, ind = self._tree.kneighbors(query, n_neighbors=int(n_neighbors))
        if not return_distance:
            return ind
        return np.sqrt(dist * dist + extra[:, None]), ind


def build_index(X: np.ndarray) -> NearestNeighbors | MissingValueIndex:
    """A neighbour index on the training points (k-d / ball tree in low dimension, brute
    force above, as scikit-learn's ``algorithm='auto'`` chooses); a
    :class:`MissingValueIndex` (expected distances) when X has NaN."""
    X = np.asarray(X, dtype=np.float64)
    if np.isnan(X).any():
        return MissingValueIndex().fit(X)
    return NearestNeighbors().fit(X)


def training_neighbors(
    index: Any, X: np.ndarray, n_neighbors: int
) -> tuple[np.ndarray, np.ndarray]:
    """Each training point's ``n_neighbors`` nearest training points, itself first at distance
    0 (``X`` the rows ``index`` was fitted on, in the same order).

    For an ordinary index this is ``index.kneighbors(X)``, where each point finds itself first
    (but for exact duplicates, which are interchangeable). A :class:`MissingValueIndex` puts a
    row with missing entries at ``sqrt(2 r)`` from itself (or beyond its neighbours); here it
    is moved to the front at 0 and the others follow by expected distance.

    Notes
    -----
    One query of ``n_neighbors`` per row; O(n k) memory.
    """
    k = int(n_neighbors)
    X = np.asarray(X, dtype=np.float64)
    if not isinstance(index, MissingValueIndex):
        dist, ind = index.kneighbors(X, n_neighbors=k, return_distance=True)
        return dist, ind.astype(np.int64)
    n = X.shape[0]
    dist, ind = index.kneighbors(X, n_neighbors=k, return_distance=True)
    own = np.arange(n)[:, None]
    is_self = ind == own
    # keep the k - 1 nearest others: drop the point itself where listed, else the farthest
    drop = np.where(is_self.any(axis=1), np.argmax(is_self, axis=1), k - 1)
    keep = np.ones((n, k), dtype=bool)
    keep[np.arange(n), drop] = False
    others_d = dist[keep].reshape(n, k - 1)
    others_i = ind[keep].reshape(n, k - 1)
    dist = np.concatenate([np.zeros((n, 1)), others_d], axis=1)
    ind = np.concatenate([own, others_i], axis=1)
    return dist, ind.astype(np.int64)


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


def rows_of_points(X: Any, index: Any, values: np.ndarray) -> Any:
    """Each row of X (a copy of an indexed point: its nearest, at distance 0) with its
    point's row of ``values``; lazily, chunk by chunk, for Dask input."""
    if isinstance(X, da.Array):
        X = X.rechunk({1: -1})
        return X.map_blocks(
            _point_rows,
            index,
            values,
            chunks=(X.chunks[0], (values.shape[1],)),
            dtype=np.float64,
            meta=np.empty((0, 0), dtype=np.float64),
        )
    return _point_rows(np.asarray(X, dtype=np.float64), index, values)


def _point_rows(block: np.ndarray, index: Any, values: np.ndarray) -> np.ndarray:
    _, ind = knn_search(index, np.asarray(block, dtype=np.float64), 1)
    return values[ind[:, 0]]
