"""Joining a graph's connected components at their nearest points, by single linkage.

A k-NN graph of data of low intrinsic dimension falls apart wherever the density dips: four
well-separated groups of one feature, 3 000 points, gave five to nine components (a tail of a
group beyond a gap wider than its neighbours' distances). Asked for fewer clusters than
components, a spectral method has no answer: every component is an eigenvector of eigenvalue 1,
so which components share a cluster is arbitrary. Single linkage gives the answer a user
expects: the closest components (by their closest points) share a cluster first.

Distances are Euclidean between the rows of ``features``, plus ``extra_i + extra_j`` when given
(the expected squared distance of rows with missing entries, :mod:`dkernel.graphs.knn`). The
cost is one pass over all pairs of points in row blocks, O(m² p) time and O(block · m)
memory: it runs only when a graph has more components than the clusters wanted, on the exact
paths' graphs (at most a few thousand distinct points).
"""

from __future__ import annotations

import numpy as np
from scipy.sparse.csgraph import minimum_spanning_tree

from dkernel._budget import SCRATCH_BLOCK_BYTES


def _squared_distances(
    features: np.ndarray, extra: np.ndarray, rows: np.ndarray, cols: np.ndarray
) -> np.ndarray:
    """``‖f_i − f_j‖² + e_i + e_j`` for i in ``rows``, j in ``cols``, clipped at 0."""
    a, b = features[rows], features[cols]
    d2 = (a * a).sum(axis=1)[:, None] + (b * b).sum(axis=1)[None, :] - 2.0 * (a @ b.T)
    d2 += extra[rows][:, None] + extra[cols][None, :]
    return np.maximum(d2, 0.0)


def _block_rows(m: int) -> int:
    return max(1, int(SCRATCH_BLOCK_BYTES // (8 * max(m, 1))))


def component_distances(
    features: np.ndarray, labels: np.ndarray, extra: np.ndarray | None = None
) -> np.ndarray:
    """``D[a, b]``: the least squared distance between a point of component ``a`` and one of
    ``b`` (the diagonal is 0), for components numbered ``0 .. labels.max()``."""
    features = np.asarray(features, dtype=np.float64)
    labels = np.asarray(labels)
    m = features.shape[0]
    extra = np.zeros(m) if extra is None else np.asarray(extra, dtype=np.float64)
    count = int(labels.max()) + 1
    order = np.argsort(labels, kind="stable")
    starts = np.flatnonzero(np.r_[True, np.diff(labels[order]) != 0])
    D = np.full((count, count), np.inf)
    step = _block_rows(m)
    for s in range(0, m, step):
        rows = np.arange(s, min(s + step, m))
        per_component = np.minimum.reduceat(
            _squared_distances(features, extra, rows, order), starts, axis=1
        )
        np.minimum.at(D, labels[rows], per_component)
    np.fill_diagonal(D, 0.0)
    return D


def _closest_pair(
    features: np.ndarray, extra: np.ndarray, a: np.ndarray, b: np.ndarray
) -> tuple[int, int, float]:
    """The closest point of ``b`` to a point of ``a`` (indices of ``features``) and their
    squared distance."""
    best = (int(a[0]), int(b[0]), np.inf)
    step = _block_rows(b.size)
    for s in range(0, a.size, step):
        rows = a[s : s + step]
        d2 = _squared_distances(features, extra, rows, b)
        i, j = np.unravel_index(int(np.argmin(d2)), d2.shape)
        if d2[i, j] < best[2]:
            best = (int(rows[i]), int(b[j]), float(d2[i, j]))
    return best


def single_linkage_links(
    features: np.ndarray,
    labels: np.ndarray,
    n_groups: int,
    extra: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The point pairs that join a graph's components into ``n_groups`` pieces by single
    linkage: the ``count − n_groups`` shortest edges of the minimum spanning tree of the
    components' least distances, each as its closest pair of points. Returns their ends
    ``i``, ``j`` (int arrays) and squared distances, empty when there are at most
    ``n_groups`` components.

    Parameters
    ----------
    features : ndarray (m, p)
        The graph's points (rows with missing entries at their conditional means).
    labels : ndarray (m,)
        Each point's component, ``0 .. count − 1`` (``scipy.sparse.csgraph.connected_components``).
    n_groups : int
        Pieces wanted, at least 1.
    extra : ndarray (m,), optional
        Added to a pair's squared distance at both ends (the variance of a row's missing entries).
    """
    labels = np.asarray(labels)
    count = int(labels.max()) + 1
    if count <= max(int(n_groups), 1):
        return np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0)
    features = np.asarray(features, dtype=np.float64)
    extra = np.zeros(features.shape[0]) if extra is None else np.asarray(extra, np.float64)
    D = component_distances(features, labels, extra)
    # a zero off the diagonal (two components at distance 0) would read as "no edge"
    off = ~np.eye(count, dtype=bool)
    D[off] = np.maximum(D[off], np.finfo(np.float64).tiny)
    tree = minimum_spanning_tree(D).tocoo()
    # ties broken by the components' numbers, so the joins do not depend on the sort
    order = np.lexsort((tree.col, tree.row, tree.data))[: count - max(int(n_groups), 1)]
    members = [np.flatnonzero(labels == c) for c in range(count)]
    pairs = [
        _closest_pair(features, extra, members[tree.row[e]], members[tree.col[e]]) for e in order
    ]
    i, j, d2 = (np.array(column) for column in zip(*pairs, strict=True))
    return i.astype(np.int64), j.astype(np.int64), d2.astype(np.float64)
