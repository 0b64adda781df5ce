"""Merging mean-shift basins by the height of the pass between them (topological persistence).

Mean shift ends each seed at a mode of the Gaussian kernel density estimate; a region of nearly
even density (a sky, a stretched class, a ridge) holds several shallow modes whose basins are
one group of the data. Following ToMATo (Chazal, Guibas, Oudot & Skraba 2013 [Chazal2013]) the
basins are joined by the density of the highest pass between them, read on a k-nearest-
neighbour graph of the seeds: a basin whose best pass into a basin of a higher mode is at least
``saddle_ratio`` × its own mode's density is not a separate mode of the density, and joins
that basin. The test is on ratios (log densities), so it does not depend on the density's scale.
The merging simplifies a partition of several groups; it never joins the last two: whether the
data hold one group or several is the pruning of small basins' question (``min_cluster_size``).
"""

from __future__ import annotations

import numpy as np
from scipy.spatial import cKDTree

from dkernel.meanshift.kernels import log_density, relabel_heaviest_first


def basin_passes(
    seeds: np.ndarray, labels: np.ndarray, seed_log_density: np.ndarray, n_neighbors: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The highest pass between every two touching basins.

    Two basins touch where a seed of one is among the ``n_neighbors`` nearest seeds of a seed
    of the other; the pass of that edge is the lower of its two seeds' log densities, and the
    pass between the basins the highest of their edges.

    Returns
    -------
    first, second : ndarray of int64 (p,)
        The basins of each touching pair, ``first < second``.
    log_height : ndarray (p,)
        The log density of their highest pass.
    """
    seeds = np.asarray(seeds, dtype=np.float64)
    labels = np.asarray(labels, dtype=np.int64)
    k = min(int(n_neighbors) + 1, seeds.shape[0])
    _, idx = cKDTree(seeds).query(seeds, k=k)
    a = np.repeat(np.arange(seeds.shape[0]), k - 1)
    b = np.asarray(idx)[:, 1:].ravel()
    cross = labels[a] != labels[b]
    a, b = a[cross], b[cross]
    first = np.minimum(labels[a], labels[b])
    second = np.maximum(labels[a], labels[b])
    height = np.minimum(seed_log_density[a], seed_log_density[b])
    if first.size == 0:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, np.zeros(0)
    # the highest edge of each pair: sort by pair, then by height, and keep each pair's last
    order = np.lexsort((height, second, first))
    first, second, height = first[order], second[order], height[order]
    last = np.ones(first.size, dtype=bool)
    last[:-1] = (first[1:] != first[:-1]) | (second[1:] != second[:-1])
    return first[last], second[last], height[last]


def merge_by_persistence(
    labels: np.ndarray,
    modes: np.ndarray,
    seeds: np.ndarray,
    density: np.ndarray,
    bandwidth: float,
    saddle_ratio: float,
    *,
    density_weights: np.ndarray | None = None,
    seed_weights: np.ndarray | None = None,
    n_neighbors: int,
) -> tuple[np.ndarray, np.ndarray]:
    """Join basins whose highest pass to a higher mode reaches ``saddle_ratio`` × their peak.

    Passes are taken from the highest down (ToMATo's order, [Chazal2013]); at each, the two
    groups it joins merge when the pass is at least ``saddle_ratio`` times the density at the
    lower of their two peaks, and the merged group keeps the higher peak; merging stops at two
    groups (one group is the pruning's answer, not the passes').

    Parameters
    ----------
    labels : ndarray (n,) int
        Basin of each seed (0 = heaviest).
    modes : ndarray (m, d)
    seeds : ndarray (n, d)
        Where the seeds started (the points of the basins).
    density : ndarray (q, d)
        The density sample mean shift climbed.
    bandwidth : float
    saddle_ratio : float
        In (0, 1]; 1 merges only basins with no dip between them.
    density_weights, seed_weights : ndarray, optional
    n_neighbors : int
        Seeds joined to each seed in the graph the passes are read on.

    Returns
    -------
    labels : ndarray (n,) int64
        Relabelled 0..m'-1, heaviest first (the merged weight counts); m' >= min(m, 2).
    modes : ndarray (m', d)
        The peak of each merged group.

    Notes
    -----
    O((n + m) q d) for the densities, O(n k log n) for the graph.
    """
    labels = np.asarray(labels, dtype=np.int64)
    m = modes.shape[0]
    if m < 2:
        return labels, modes
    peak = log_density(modes, density, bandwidth, density_weights)
    at_seed = log_density(seeds, density, bandwidth, density_weights)
    first, second, height = basin_passes(seeds, labels, at_seed, n_neighbors)
    parent = np.arange(m)

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = int(parent[i])
        return i

    log_ratio = float(np.log(saddle_ratio))
    groups = m
    for p in np.argsort(-height, kind="stable"):
        if groups <= 2:
            break
        i, j = root(int(first[p])), root(int(second[p]))
        if i == j or height[p] < log_ratio + min(peak[i], peak[j]):
            continue
        high, low = (i, j) if peak[i] >= peak[j] else (j, i)
        parent[low] = high
        groups -= 1
    roots = np.array([root(i) for i in range(m)])
    w = np.ones(labels.size) if seed_weights is None else np.asarray(seed_weights, np.float64)
    return relabel_heaviest_first(roots[labels], np.unique(roots), modes, w)
