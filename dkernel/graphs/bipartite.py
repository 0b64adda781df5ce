"""Landmarks of a whole data set, and the landmark bipartite graph: its landmarks from a
sample, and the landmark-side sums ``W_Y = Bᵀ D_X⁻¹ B`` and ``D_Y = Bᵀ 1`` accumulated chunk by
chunk.

:func:`select_landmarks` is the one landmark stage of every landmark-based estimator: training
rows by k-means++ seeding or uniformly (the Nyström landmarks, whose landmark-side map is
``dkernel.kernels.nystrom.fit_nystrom_landmarks``), or k-means centres of a sample (the
bipartite graph's, :func:`sample_landmark_graph`). Both the spectral
(:mod:`dkernel.spectral.bipartite`) and the kernel-decomposition
(:mod:`dkernel.decomposition.landmark`) large-N paths start here. Dask chunks are tasks whose
partial sums are added pairwise in a fixed order, so the result depends on the chunks, never
on the workers; NumPy input is cut into blocks spread over the cores.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import dask
import dask.array as da
import numpy as np
from sklearn.cluster import kmeans_plusplus

from dkernel._random import derive_rng
from dkernel.errors import InvalidInputError
from dkernel.graphs.landmark import (
    SAMPLE_PER_LANDMARK,
    LandmarkFeatureMap,
    LandmarkGraph,
    check_landmark_sizes,
    kmeans_landmarks,
    landmark_graph,
)
from dkernel.linalg.threads import map_on_cores
from dkernel.rows import chunk_tasks, take_rows, tree_sum

#: Rows per task of the passes over NumPy input (the Dask input keeps its own chunks).
SUM_ROWS = 65_536


#: How :func:`select_landmarks` picks landmarks: training rows by k-means++ seeding or
#: uniformly (Nyström), or the k-means centres of a uniform sample (the bipartite graph).
LANDMARK_METHODS = ("kmeans++", "uniform", "kmeans")


@dataclass(frozen=True)
class Landmarks:
    """The landmarks of a data set.

    Attributes
    ----------
    points : ndarray (m, d)
        Their coordinates: the rows of ``X`` at ``indices`` (kernel rows for a precomputed
        kernel), or the k-means centres.
    indices : ndarray of int64 (m,) or None
        The training rows they are, sorted; None for k-means centres (no training row).
    """

    points: np.ndarray
    indices: np.ndarray | None

    @property
    def n_landmarks(self) -> int:
        return int(self.points.shape[0])


def select_landmarks(
    X: Any,
    n_landmarks: int,
    *,
    method: str = "kmeans++",
    random_state: int | None = 0,
    precomputed: bool = False,
    pool_size: int | None = None,
) -> Landmarks:
    """The landmark stage of every landmark-based estimator: ``n_landmarks`` landmarks of ``X``.

    Parameters
    ----------
    X : ndarray or dask array (n, d)
        Training data (for a precomputed kernel: the square kernel matrix, one row per point).
    n_landmarks : int
        m. With ``'kmeans++'`` or ``'uniform'``, every row (in order) when m >= n.
    method : {'kmeans++', 'uniform', 'kmeans'}
        ``'uniform'``: a uniform sample of rows without replacement. ``'kmeans++'``: k-means++
        seeding (D² sampling, scikit-learn's greedy variant) on a uniform pool of
        ``pool_size`` rows (default ``max(10 m, 5000)``), which spreads the landmarks over the
        data; for a precomputed kernel the D² distance is the kernel-induced
        ``k(x,x) + k(c,c) - 2 k(x,c)``. ``'kmeans'``: the centres of a few Lloyd steps
        (``dkernel.graphs.landmark.kmeans_landmarks``) on a uniform sample of
        ``SAMPLE_PER_LANDMARK · m`` rows; they are no training rows (``indices`` is None).
    random_state : int, optional
        Seed; each method draws from its own stream derived from it.
    precomputed : bool
        ``X`` is a precomputed kernel matrix (``'kmeans++'``: kernel-induced distances;
        ``'kmeans'`` is refused).
    pool_size : int, optional
        Pool of the k-means++ seeding.

    Returns
    -------
    Landmarks
        Their coordinates and, for training rows, their indices; rows of a Dask ``X`` are
        gathered chunk by chunk (``dkernel.rows.take_rows``).

    Raises
    ------
    InvalidInputError
        An unknown method, ``'kmeans'`` on a precomputed kernel, or a k-means sample with NaN
        or infinite values.

    Notes
    -----
    k-means++: O(pool · m) kernel evaluations (distances), O(pool · d) memory. k-means:
    O(10 m² d) per Lloyd step on the sample.
    """
    if method not in LANDMARK_METHODS:
        raise InvalidInputError(
            f"Unknown landmark method {method!r}; choose one of {list(LANDMARK_METHODS)}."
        )
    n = int(X.shape[0])
    m = int(n_landmarks)
    if method == "kmeans":
        if precomputed:
            raise InvalidInputError(
                "k-means landmarks are centres in input space; a precomputed kernel has none. "
                "Use method='kmeans++' or 'uniform'."
            )
        rng = derive_rng(random_state, "landmark-graph-sample")
        rows = np.sort(rng.choice(n, min(n, SAMPLE_PER_LANDMARK * m), replace=False))
        sample = take_rows(X, rows, np.float64)
        if not np.all(np.isfinite(sample)):
            raise InvalidInputError(
                "The landmark graph needs finite values; X has NaN or infinite entries. Impute "
                "or drop those rows first, or (NaN only) fit on the exact k-NN graph path, "
                "approximation='exact', which models missing values."
            )
        return Landmarks(kmeans_landmarks(sample, m, int(rng.integers(2**31 - 1))), None)
    idx = _landmark_rows(X, n, m, method, random_state, precomputed, pool_size)
    return Landmarks(take_rows(X, idx), idx)


def _fill_missing(P: np.ndarray) -> np.ndarray:
    """``P`` with NaN (missing values, of a kernel that models them: pck) replaced by the column
    means of the observed entries (0 where none is), for the D² seeding only: the landmarks
    stay training rows, NaN and all, for the kernel."""
    missing = np.isnan(P)
    if not missing.any():
        return P
    observed = ~missing
    means = np.where(observed, P, 0.0).sum(axis=0) / np.maximum(observed.sum(axis=0), 1)
    return np.where(missing, means[None, :], P)


def _landmark_rows(
    X: Any,
    n: int,
    m: int,
    method: str,
    seed: int | None,
    precomputed: bool,
    pool_size: int | None,
) -> np.ndarray:
    """Sorted training rows chosen as landmarks (``'kmeans++'`` or ``'uniform'``)."""
    if m >= n:
        return np.arange(n)
    rng = derive_rng(seed, "landmarks", method)
    if method == "uniform":
        return np.sort(rng.choice(n, size=m, replace=False))
    pool_n = min(n, int(pool_size or max(10 * m, 5000)))
    pool = np.sort(rng.choice(n, size=pool_n, replace=False)) if pool_n < n else np.arange(n)
    P = take_rows(X, pool)
    if not precomputed:
        # Euclidean D² sampling in input space (scikit-learn's k-means++ seeding)
        _, chosen = kmeans_plusplus(
            _fill_missing(np.asarray(P, dtype=np.float64)),
            m,
            random_state=int(rng.integers(2**31 - 1)),
        )
        return np.sort(pool[np.asarray(chosen)])
    # precomputed: D² sampling with the kernel-induced distance k(x,x) + k(c,c) - 2 k(x,c)
    diag = P[np.arange(pool_n), pool]
    first = int(rng.integers(pool_n))
    chosen = [first]
    d2 = np.maximum(diag + diag[first] - 2 * P[:, pool[first]], 0)
    d2[first] = 0
    while len(chosen) < m:
        total = d2.sum()
        if total > 0:
            nxt = int(rng.choice(pool_n, p=d2 / total))
        else:  # every remaining point coincides with a landmark: fill uniformly
            rest = np.setdiff1d(np.arange(pool_n), chosen)
            nxt = int(rng.choice(rest))
        chosen.append(nxt)
        d2 = np.minimum(d2, np.maximum(diag + diag[nxt] - 2 * P[:, pool[nxt]], 0))
        d2[nxt] = 0
    return np.sort(pool[np.asarray(chosen)])


def sample_landmark_graph(
    X: Any, n_landmarks: int, n_neighbors: int, seed: int | None
) -> LandmarkGraph:
    """The landmark graph of ``X``: k-means landmarks of a uniform sample of ``10 p`` rows
    (:func:`select_landmarks` with ``method='kmeans'``) and their self-tuning widths.

    The sample's rows are taken chunk by chunk from a Dask array (``dkernel.rows.take_rows``).
    Checks the sizes first (:func:`~dkernel.graphs.landmark.check_landmark_sizes`).
    """
    n, p = int(X.shape[0]), int(n_landmarks)
    check_landmark_sizes(n, p, int(n_neighbors))
    return landmark_graph(
        select_landmarks(X, p, method="kmeans", random_state=seed).points, n_neighbors
    )


#: One chunk's share of the landmark-side sums, or the sum of several: the nonzero entries of
#: ``W_Y`` (sorted flat indices into the p × p matrix, and their values) and ``D_Y`` (p,).
SparseSums = tuple[np.ndarray, np.ndarray, np.ndarray]


def sparse_landmark_sums(graph: LandmarkGraph, X: np.ndarray) -> SparseSums:
    """This block's share of ``W_Y = Bᵀ D_X⁻¹ B`` as its nonzero entries, and of ``D_Y``.

    A row links to K landmarks, so a block of r rows touches at most r K² of the p² entries of
    ``W_Y``; kept sparse, a chunk's share is what its rows link (a few hundred KiB at p = 1 000)
    instead of 8 MB of float64, on its worker and on the way up the sum tree. Each entry is
    accumulated in the order of the rows, as a dense ``bincount`` of the pairs would."""
    p = graph.n_landmarks
    indices, weights = graph.links(X)
    share = weights / weights.sum(axis=1, keepdims=True)
    pairs = (indices[:, :, None] * p + indices[:, None, :]).ravel()
    products = (weights[:, :, None] * share[:, None, :]).ravel()
    entries, inverse = np.unique(pairs, return_inverse=True)
    values = np.bincount(inverse.ravel(), weights=products, minlength=entries.size)
    d = np.bincount(indices.ravel(), weights=weights.ravel(), minlength=p)
    return entries, values, d


def dense_sums(sums: SparseSums, p: int) -> tuple[np.ndarray, np.ndarray]:
    """``(W_Y (p, p), D_Y (p,))`` of :data:`SparseSums`."""
    entries, values, d = sums
    W = np.zeros(p * p)
    W[entries] = values
    return W.reshape(p, p), d


def landmark_sums(graph: LandmarkGraph, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """This block's share of ``W_Y = Bᵀ D_X⁻¹ B`` (p × p) and of ``D_Y`` (p)."""
    return dense_sums(sparse_landmark_sums(graph, X), graph.n_landmarks)


def _sums_of_block(X: np.ndarray, graph: LandmarkGraph) -> SparseSums:
    return sparse_landmark_sums(graph, X)


def _add(a: SparseSums, b: SparseSums) -> SparseSums:
    """``a + b`` entry by entry: each sum is the one a dense ``W_a + W_b`` makes (an entry
    absent from one side adds an exact zero), so the total is the dense tree's, bit for bit."""
    entries = np.union1d(a[0], b[0])
    values = np.zeros(entries.size)
    values[np.searchsorted(entries, a[0])] += a[1]
    values[np.searchsorted(entries, b[0])] += b[1]
    return entries, values, a[2] + b[2]


def row_blocks(n: int, rows: int) -> list[slice]:
    return [slice(s, min(s + rows, n)) for s in range(0, n, rows)]


def accumulate_landmark_sums(graph: LandmarkGraph, X: Any) -> tuple[np.ndarray, np.ndarray]:
    """``(W_Y, D_Y)`` over every row of ``X``: Dask chunks as tasks, NumPy blocks on the cores;
    the partial sums are sparse (``sparse_landmark_sums``) and added in a fixed order."""
    if isinstance(X, da.Array):
        parts = chunk_tasks(X, _sums_of_block, range(X.numblocks[0]), shared=(graph,))
        return dense_sums(dask.compute(tree_sum(parts, _add))[0], graph.n_landmarks)
    X = np.asarray(X, dtype=np.float64)
    parts = map_on_cores(lambda s: sparse_landmark_sums(graph, X[s]), row_blocks(len(X), SUM_ROWS))
    total = parts[0]
    for part in parts[1:]:
        total = _add(total, part)
    return dense_sums(total, graph.n_landmarks)


def fit_landmark_features(
    X: Any, n_landmarks: int, n_neighbors: int, seed: int | None
) -> LandmarkFeatureMap:
    """The landmark graph of ``X`` (:func:`sample_landmark_graph`) and its landmark degrees
    over every row of ``X``: the feature map of the landmark kernel."""
    graph = sample_landmark_graph(X, n_landmarks, n_neighbors, seed)
    _, degrees = accumulate_landmark_sums(graph, X)
    return LandmarkFeatureMap(graph, degrees)
