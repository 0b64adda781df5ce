"""Numeric kernels of Gaussian mean shift and MSSC (NumPy/SciPy only, no Dask, no I/O).

Sources (section and equation numbers of Agersborg 2012 [Agersborg2012]): §2.4 (Eq. 2.57 mean shift
step, blurring variant), Eq. 5.1 (Silverman's rule, :func:`dkernel.kernels.silverman_thesis`),
Eq. 5.3/5.4 (Cauchy–Schwarz partition affinity), §6.1.2 ("adaptive thresholding": end points are
grouped relative to how far the vectors moved) and §7.1 (seeds from a pre-partition, density from a
sample, new points run mean shift against the stored density).

All functions work on in-memory blocks and bound their temporaries to ``block_rows`` rows
times the density size, so memory is O(block_rows · n_density), never O(N²).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components
from scipy.spatial import cKDTree
from scipy.special import logsumexp

from dkernel._budget import (
    CACHE_BLOCK_BYTES,
    REDUCED_BLOCK_BYTES,
    rows_for_budget,
)
from dkernel.errors import InvalidInputError
from dkernel.linalg.elementwise import exp_flushed
from dkernel.linalg.threads import map_on_cores


def _block_rows(n_density: int, itemsize: int) -> int:
    """Rows of a temporary kernel block (rows × density points × itemsize)."""
    return rows_for_budget(CACHE_BLOCK_BYTES, n_density, itemsize, low=16, high=65536)


def _sq_norms(A: np.ndarray) -> np.ndarray:
    return np.einsum("ij,ij->i", A, A)


def _centred(points: np.ndarray, density: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Points and density (float64) centred on the density's mean, and that mean: squared norms
    stay small beside the distances (float32 blocks, and the GEMM form of the distances)."""
    D = np.asarray(density, dtype=np.float64)
    centre = D.mean(axis=0)
    return np.asarray(points, dtype=np.float64) - centre, D - centre, centre


def gaussian_shift(
    points: np.ndarray,
    density: np.ndarray,
    bandwidth: float,
    weights: np.ndarray | None = None,
    *,
    dtype: type = np.float64,
) -> np.ndarray:
    """One Gaussian mean-shift step (Eq. 2.57): weighted mean of ``density`` around each point.

    ``m(x) = Σ_i w_i x_i exp(-||x - x_i||² / 2h²) / Σ_i w_i exp(-||x - x_i||² / 2h²)``,
    evaluated in log space (each row is shifted by its largest log-weight), so points far from
    every density point still move to a finite place instead of dividing 0 by 0.

    Parameters
    ----------
    points : ndarray (n, d)
    density : ndarray (m, d)
    bandwidth : float
    weights : ndarray (m,), optional
        Non-negative weights of the density points (counts of a pre-partition).
    dtype : numpy dtype
        Working precision of the kernel block (float32 halves memory and time).

    Returns
    -------
    ndarray (n, d), float64

    Notes
    -----
    O(n m d) time; temporaries bounded to ``CACHE_BLOCK_BYTES`` per block of rows. The
    log-weight of density point i at x is ``2γ x·x_i − γ||x_i||² + log w_i`` up to the term
    ``−γ||x||²``, which is the same for every i and cancels in the row's normalisation; so one
    GEMM gives each block's log-weights, and one more (against ``[x_i, 1]``) the weighted sums
    and their normaliser. Points and density are centred on the density's mean first, so the
    squared norms stay small beside the distances in float32.
    """
    P, D, centre = _centred(points, density)
    out = np.empty(P.shape, dtype=np.float64)
    gamma = 0.5 / float(bandwidth) ** 2
    bias = gamma * _sq_norms(D)
    if weights is not None:
        with np.errstate(divide="ignore"):
            bias = bias - np.log(np.asarray(weights, dtype=np.float64))
    # the log-weights as one GEMM of [x, 1] with [2γx_i, -bias_i]: no pass for the bias
    scaled = np.hstack([2.0 * gamma * D, -bias[:, None]]).astype(dtype)
    ones = np.hstack([D, np.ones((D.shape[0], 1))]).astype(dtype)
    d = D.shape[1]
    step = _block_rows(D.shape[0], np.dtype(dtype).itemsize)
    block = np.ones((min(step, P.shape[0]), d + 1), dtype=dtype)
    for start in range(0, P.shape[0], step):
        rows = min(step, P.shape[0] - start)
        block[:rows, :d] = P[start : start + rows]
        G = block[:rows] @ scaled.T
        G -= G.max(axis=1, keepdims=True)
        exp_flushed(G)
        sums = (G @ ones).astype(np.float64)
        out[start : start + step] = sums[:, :d] / sums[:, d:] + centre
    return out


def log_density(
    points: np.ndarray,
    density: np.ndarray,
    bandwidth: float,
    weights: np.ndarray | None = None,
) -> np.ndarray:
    """Log of the (unnormalised) Gaussian kernel density ``Σ_i w_i exp(−‖x − x_i‖² / 2h²)``.

    Parameters
    ----------
    points : ndarray (n, d)
    density : ndarray (m, d)
    bandwidth : float
    weights : ndarray (m,), optional

    Returns
    -------
    ndarray (n,)
        Finite wherever a density point has positive weight (log-sum-exp: no underflow far
        from the data or in many dimensions).

    Notes
    -----
    O(n m d) time, temporaries bounded to ``CACHE_BLOCK_BYTES`` per block of rows (as
    :func:`gaussian_shift`); :func:`dkernel.meanshift.persistence.merge_by_persistence` reads
    basins' peaks and passes from it.
    """
    P, D, _ = _centred(points, density)
    gamma = 0.5 / float(bandwidth) ** 2
    d_norms = _sq_norms(D)
    log_w = None
    if weights is not None:
        with np.errstate(divide="ignore"):
            log_w = np.log(np.asarray(weights, dtype=np.float64))
    out = np.empty(P.shape[0])
    step = _block_rows(D.shape[0], np.dtype(np.float64).itemsize)
    for start in range(0, P.shape[0], step):
        B = P[start : start + step]
        sq = _sq_norms(B)[:, None] - 2.0 * B @ D.T + d_norms[None, :]
        G = -gamma * np.maximum(sq, 0.0)
        if log_w is not None:
            G += log_w[None, :]
        out[start : start + step] = logsumexp(G, axis=1)
    return out


@dataclass
class MeanShiftPaths:
    """Result of :func:`mean_shift`.

    Attributes
    ----------
    ends : ndarray (n_seeds, d)
        Final positions of the mode-finding vectors.
    paths : ndarray (n_iter + 1, n_seeds, d) or None
        Positions after each iteration (row 0 = start); only with ``return_paths``.
    moves : ndarray (n_seeds,)
        Length of each seed's total move ``||end - start||``.
    last_step : ndarray (n_seeds,)
        Length of each seed's last step.
    n_iter : int
        Iterations run.
    converged : bool
        Every seed's last step was below ``tol · h``.
    density_end : ndarray (m, d)
        The density points at the end (moved by blurring; the input otherwise).
    """

    ends: np.ndarray
    paths: np.ndarray | None
    moves: np.ndarray
    last_step: np.ndarray
    n_iter: int
    converged: bool
    density_end: np.ndarray


def mean_shift(
    seeds: np.ndarray,
    density: np.ndarray,
    bandwidth: float,
    *,
    weights: np.ndarray | None = None,
    blurring: bool = False,
    max_iter: int = 300,
    tol: float = 1e-3,
    return_paths: bool = False,
    dtype: type = np.float64,
) -> MeanShiftPaths:
    """Run Gaussian mean shift from ``seeds`` on the density of ``density``.

    Non-blurring (Fukunaga & Hostetler 1975 [Fukunaga1975]; Cheng 1995 [Cheng1995]): the density
    points stay fixed and each seed climbs to a mode of the kernel density estimate; a seed stops
    once its step is below ``tol · h``. Blurring ([Agersborg2012], §2.4.2): every iteration also
    moves the density points themselves one step (the estimate is re-formed from the moved data),
    which contracts clusters in far fewer iterations; it stops when no point moved more than
    ``tol · h``.

    Parameters
    ----------
    seeds : ndarray (n, d)
        Starting points of the mode-finding vectors (often the density points themselves).
    density : ndarray (m, d)
        Points of the kernel density estimate.
    bandwidth : float
        Gaussian kernel width h.
    weights : ndarray (m,), optional
        Weights of the density points.
    blurring : bool
    max_iter : int
        Iteration cap.
    tol : float
        Convergence tolerance relative to h.
    return_paths : bool
        Keep every iterate (memory ``(n_iter+1) · n · d``).
    dtype : numpy dtype
        Precision of the kernel blocks.

    Returns
    -------
    MeanShiftPaths

    Notes
    -----
    O(n_iter · (n + m_blur) · m · d) time where m_blur = m for blurring, else 0; memory
    O(block · m) for kernels plus O(n_iter · n · d) with paths.
    """
    X = np.array(seeds, dtype=np.float64, copy=True)
    D = np.array(density, dtype=np.float64, copy=True)
    start = X.copy()
    h = float(bandwidth)
    active = np.ones(X.shape[0], dtype=bool)
    last = np.zeros(X.shape[0])
    paths = [X.copy()] if return_paths else None
    n_iter = 0
    converged = False
    for _ in range(max_iter):
        n_iter += 1
        if blurring:
            new_x = gaussian_shift(X, D, h, weights, dtype=dtype)
            new_d = gaussian_shift(D, D, h, weights, dtype=dtype)
            step = np.linalg.norm(new_x - X, axis=1)
            d_step = float(np.max(np.linalg.norm(new_d - D, axis=1), initial=0.0))
            X, D = new_x, new_d
            last = step
            if paths is not None:
                paths.append(X.copy())
            if max(float(step.max(initial=0.0)), d_step) < tol * h:
                converged = True
                break
        else:
            idx = np.flatnonzero(active)
            new = gaussian_shift(X[idx], D, h, weights, dtype=dtype)
            step = np.linalg.norm(new - X[idx], axis=1)
            X[idx] = new
            last[idx] = step
            active[idx[step < tol * h]] = False
            if paths is not None:
                paths.append(X.copy())
            if not active.any():
                converged = True
                break
    moves = np.linalg.norm(X - start, axis=1)
    return MeanShiftPaths(
        ends=X,
        paths=np.stack(paths) if paths is not None else None,
        moves=moves,
        last_step=last,
        n_iter=n_iter,
        converged=converged,
        density_end=D,
    )


def group_threshold(
    moves: np.ndarray, bandwidth: float, *, group_factor: float = 0.25, floor: float = 1e-3
) -> float:
    """Distance below which end points count as one mode ("adaptive thresholding").

    ``τ = clip(group_factor · median(moves), floor · h, h / 2)``: relative to how far the
    mode-finding vectors travelled ([Agersborg2012], §6.1.2, footnote 3), never below round-off of
    the convergence test and never as wide as the kernel (distinct modes of a Gaussian KDE
    are at least ~h apart).

    Notes
    -----
    O(n) time.
    """
    med = float(np.median(moves)) if len(moves) else 0.0
    return float(np.clip(group_factor * med, floor * bandwidth, 0.5 * bandwidth))


def group_modes(
    ends: np.ndarray, threshold: float, weights: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Group end points closer than ``threshold`` (single linkage) into modes.

    Parameters
    ----------
    ends : ndarray (n, d)
    threshold : float
    weights : ndarray (n,), optional
        Weights of the seeds, used for the mode positions (weighted mean) and the order of
        the groups (heaviest first).

    Returns
    -------
    labels : ndarray (n,) int64
        Group of each end point, 0 = heaviest group.
    modes : ndarray (n_groups, d)
        Weighted mean end point of each group.

    Notes
    -----
    O(n log n + pairs) with a k-d tree.
    """
    ends = np.asarray(ends, dtype=np.float64)
    n = ends.shape[0]
    w = np.ones(n) if weights is None else np.asarray(weights, dtype=np.float64)
    pairs = cKDTree(ends).query_pairs(threshold, output_type="ndarray")
    graph = coo_matrix((np.ones(len(pairs)), (pairs[:, 0], pairs[:, 1])), shape=(n, n))
    n_groups, raw = connected_components(graph, directed=False)
    mass = np.bincount(raw, weights=w, minlength=n_groups)
    first = np.full(n_groups, n, dtype=np.int64)
    np.minimum.at(first, raw, np.arange(n))
    order = np.lexsort((first, -mass))  # heaviest first, ties by first member
    relabel = np.empty(n_groups, dtype=np.int64)
    relabel[order] = np.arange(n_groups)
    labels = relabel[raw]
    sums = np.zeros((n_groups, ends.shape[1]))
    np.add.at(sums, labels, ends * w[:, None])
    msum = np.bincount(labels, weights=w, minlength=n_groups)
    modes = sums / np.where(msum > 0, msum, 1.0)[:, None]
    return labels, modes


def merge_small_modes(
    labels: np.ndarray, modes: np.ndarray, weights: np.ndarray | None, min_mass: float
) -> tuple[np.ndarray, np.ndarray]:
    """Join every mode whose basin weighs less than ``min_mass`` to the nearest heavier one.

    The pruning of small basins of attraction of Comaniciu & Meer (2002) [Comaniciu2002]: a
    mode reached by a seed or two is where a point in a sparse region stopped, not a density
    mode of the data; its seeds go to the nearest mode (Euclidean distance between modes) whose
    basin weighs at least ``min_mass``. The heaviest mode is always kept.

    Parameters
    ----------
    labels : ndarray (n,) int
        Mode of each seed, 0 = heaviest (as :func:`group_modes` returns them).
    modes : ndarray (m, d)
    weights : ndarray (n,), optional
        Seed weights (1 each when None).
    min_mass : float
        Basins lighter than this join another.

    Returns
    -------
    labels : ndarray (n,) int64
        Relabelled 0..m'-1, heaviest first.
    modes : ndarray (m', d)
        The kept modes, unmoved.

    Notes
    -----
    O(s · m' · d) for the s small modes against the m' kept ones.
    """
    labels = np.asarray(labels, dtype=np.int64)
    w = np.ones(labels.size) if weights is None else np.asarray(weights, dtype=np.float64)
    mass = np.bincount(labels, weights=w, minlength=modes.shape[0])
    kept = mass >= min_mass
    kept[np.argmax(mass)] = True
    if kept.all():
        return labels, modes
    kept_idx = np.flatnonzero(kept)
    small_idx = np.flatnonzero(~kept)
    target = np.empty(modes.shape[0], dtype=np.int64)
    target[kept_idx] = kept_idx
    target[small_idx] = kept_idx[
        nearest_centre(modes[small_idx], modes[kept_idx], dtype=np.float64)
    ]
    return relabel_heaviest_first(target[labels], kept_idx, modes, w)


def relabel_heaviest_first(
    merged: np.ndarray, kept: np.ndarray, modes: np.ndarray, weights: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Labels 0..k-1 for seeds merged into the ``kept`` modes, heaviest first.

    ``merged`` is each seed's kept mode (an index into ``modes``), ``kept`` the kept modes'
    indices in ascending order; the merged mass (``weights`` summed) orders them, ties by the
    kept mode's former rank. Returns the labels and the kept modes in that order.
    """
    mass = np.bincount(merged, weights=weights, minlength=modes.shape[0])[kept]
    order = kept[np.lexsort((kept, -mass))]
    relabel = np.full(modes.shape[0], -1, dtype=np.int64)
    relabel[order] = np.arange(order.size)
    return relabel[merged], modes[order]


def grid_seeds(
    X: np.ndarray, bin_size: float, *, min_count: int = 1
) -> tuple[np.ndarray, np.ndarray]:
    """Seeds from a grid: the mean of the points in each occupied bin of width ``bin_size``.

    Returns
    -------
    centres : ndarray (n_bins, d)
    counts : ndarray (n_bins,) int64

    Notes
    -----
    O(N d log N) (a sort of the bin keys); O(N d) memory.
    """
    X = np.asarray(X, dtype=np.float64)
    keys = np.floor(X / bin_size).astype(np.int64)
    _, inv, counts = np.unique(keys, axis=0, return_inverse=True, return_counts=True)
    inv = inv.ravel()
    sums = np.zeros((counts.size, X.shape[1]))
    np.add.at(sums, inv, X)
    keep = counts >= min_count
    if not keep.any():
        raise InvalidInputError(
            f"No grid bin holds min_count={min_count} points with bin size {bin_size}; lower "
            "min_count or enlarge the bins."
        )
    return sums[keep] / counts[keep, None], counts[keep].astype(np.int64)


def nearest_centre(X: np.ndarray, centres: np.ndarray, *, dtype: type = np.float32) -> np.ndarray:
    """Index of the nearest centre for each row (blocked GEMM, squared Euclidean).

    Notes
    -----
    O(N k d) time, O(block · k) memory.
    """
    X = np.asarray(X, dtype=dtype)
    C = np.asarray(centres, dtype=dtype)
    cc = _sq_norms(C)
    out = np.empty(X.shape[0], dtype=np.int64)
    step = _block_rows(C.shape[0], np.dtype(dtype).itemsize)
    for s in range(0, X.shape[0], step):
        G = X[s : s + step] @ C.T
        G *= -2
        G += cc[None, :]
        out[s : s + step] = np.argmin(G, axis=1)
    return out


def assign_to_modes(
    X: np.ndarray,
    density: np.ndarray,
    bandwidth: float,
    path_points: np.ndarray,
    path_labels: np.ndarray,
    *,
    weights: np.ndarray | None = None,
    path_radius: float = 0.2,
    max_iter: int = 300,
    tol: float = 1e-3,
    dtype: type = np.float32,
    tree: cKDTree | None = None,
) -> np.ndarray:
    """Run mean shift from each row of ``X`` against a stored density to a stored mode.

    Each point climbs the stored density (non-blurring steps, Eq. 2.57). It stops as soon as it
    comes within ``path_radius · h`` of a stored trajectory point (the paths of the fit's seeds,
    whose modes are known: the basin-of-attraction shortcut of Comaniciu & Meer 2002
    [Comaniciu2002]) or when its step falls below ``tol · h``; it then takes the label of the
    nearest stored trajectory point (the path ends are the modes). With ``path_radius = 0`` every
    point runs to convergence and takes the label of the nearest stored end point.

    Parameters
    ----------
    X : ndarray (n, d)
    density : ndarray (m, d)
    bandwidth : float
    path_points : ndarray (p, d)
        Stored trajectory points (including the end points = modes).
    path_labels : ndarray (p,) int
        Partition of each trajectory point.
    weights : ndarray (m,), optional
    path_radius : float
        Early-exit radius relative to h (0 disables the shortcut).
    max_iter, tol : see :func:`mean_shift`.
    dtype : numpy dtype
        Precision of the kernel blocks.
    tree : cKDTree, optional
        Prebuilt tree over ``path_points`` (reused across chunks).

    Returns
    -------
    ndarray (n,) int64

    Notes
    -----
    O(n · t · m · d) time with t the mean number of steps taken (a few with the shortcut);
    memory O(block · m).
    """
    X = np.asarray(X, dtype=np.float64)
    n = X.shape[0]
    labels = np.full(n, -1, dtype=np.int64)
    if n == 0:
        return labels
    path_labels = np.asarray(path_labels, dtype=np.int64)
    tree = tree if tree is not None else cKDTree(np.asarray(path_points, dtype=np.float64))
    h = float(bandwidth)
    radius = path_radius * h
    cur = X.copy()
    active = np.arange(n)
    for _ in range(max_iter):
        if radius > 0:
            dist, idx = tree.query(cur[active], k=1, distance_upper_bound=radius)
            hit = np.isfinite(dist)
            labels[active[hit]] = path_labels[idx[hit]]
            active = active[~hit]
            if active.size == 0:
                break
        new = gaussian_shift(cur[active], density, h, weights, dtype=dtype)
        step = np.linalg.norm(new - cur[active], axis=1)
        cur[active] = new
        done = step < tol * h
        if done.any():
            finished = active[done]
            _, idx = tree.query(cur[finished], k=1)
            labels[finished] = path_labels[idx]
            active = active[~done]
        if active.size == 0:
            break
    if active.size:
        _, idx = tree.query(cur[active], k=1)
        labels[active] = path_labels[idx]
    return labels


# ---------------------------------------------------------------------------------------
# Cauchy–Schwarz partition affinity (Eq. 5.3 / 5.4)
# ---------------------------------------------------------------------------------------


def cs_pair_sums(
    X: np.ndarray, labels: np.ndarray, n_partitions: int, bandwidth: float
) -> np.ndarray:
    """``S_ij = Σ_{k∈C_i} Σ_{l∈C_j} K(x_k, x_l)`` of one set of points with itself.

    The exact sums to ~1e-6 relative, at a sixth of the time of summing full kernel rows
    through sparse indicator matrices: the points are sorted by partition, the kernel is
    computed in float32 on the square blocks on and above the diagonal of a tiling (one GEMM
    each, the squared norms folded into it, on centred points so that those norms stay small
    beside the distances), and every block is summed partition by partition along both axes with
    ``np.add.reduceat`` on contiguous runs instead of multiplied by sparse indicator
    matrices; the block sums are added in float64. Rows with label < 0 are ignored.

    Equal rows of one partition are one point counted as many times (:func:`_merge_duplicates`):
    the pixels of an 8-bit image repeat their band values (the demo scene's 20 782-pixel
    affinity sample holds 13 214 distinct ones), and a kernel block costs the square of its
    points.

    Notes
    -----
    O(U² d / 2) time for U distinct (partition, row) pairs, O(b²) memory per thread for
    square blocks of b points; the blocks run on a thread pool, one per core (in turn inside
    a Dask worker).
    """
    labels = np.asarray(labels, dtype=np.int64)
    keep = labels >= 0
    order = np.argsort(labels[keep], kind="stable")
    Xs = np.asarray(X, dtype=np.float64)[keep][order]
    ls = labels[keep][order]
    Xs, ls, weights = _merge_duplicates(Xs, ls)
    Xs = Xs - Xs.mean(axis=0) if Xs.size else Xs
    out = np.zeros((n_partitions, n_partitions))
    n = ls.size
    if n == 0:
        return out
    side = rows_for_budget(REDUCED_BLOCK_BYTES, None, 4, low=16)
    edges = list(range(0, n, side)) + [n]
    runs = []  # (partitions, run starts relative to the block) of every block of rows
    for a, b in zip(edges[:-1], edges[1:], strict=True):
        block = ls[a:b]
        starts = np.flatnonzero(np.r_[True, block[1:] != block[:-1]])
        runs.append((block[starts], starts))

    # -||x - y||² / 2h² as one float32 GEMM of [2γx, -γ||x||², 1] with [y, 1, -γ||y||²]:
    # no passes over the block for the norms
    gamma = 0.5 / float(bandwidth) ** 2
    norms = -gamma * np.einsum("ij,ij->i", Xs, Xs)[:, None]
    ones = np.ones_like(norms)
    left = np.hstack([2.0 * gamma * Xs, norms, ones]).astype(np.float32)
    right = np.hstack([Xs, ones, norms]).astype(np.float32)

    def block_sums(pair: tuple[int, int]) -> np.ndarray:
        i, j = pair
        rows, cols = slice(edges[i], edges[i + 1]), slice(edges[j], edges[j + 1])
        Kb = exp_flushed(left[rows] @ right[cols].T, ceiling=0.0)
        if weights is not None:
            Kb *= weights[None, cols]
        sums = np.add.reduceat(Kb, runs[j][1], axis=1)
        if weights is not None:
            sums *= weights[rows, None]
        return np.add.reduceat(sums, runs[i][1], axis=0).astype(np.float64)

    pairs = [(i, j) for i in range(len(runs)) for j in range(i, len(runs))]
    # added in a fixed order: the sums do not depend on the number of threads
    for (i, j), sums in zip(pairs, map_on_cores(block_sums, pairs), strict=True):
        out[np.ix_(runs[i][0], runs[j][0])] += sums
        if j != i:
            out[np.ix_(runs[j][0], runs[i][0])] += sums.T
    return out


#: :func:`_merge_duplicates` merges when at most this fraction of the rows is distinct: the
#: kernel then shrinks by at least a fifth, more than the weighting pass costs.
MERGE_DISTINCT_FRACTION = 0.9


def _merge_duplicates(
    X: np.ndarray, labels: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Rows sorted by label with the equal (label, row) pairs merged: the distinct rows, still
    sorted by label, their labels and how often each occurs (float32: counts below 2^24 are
    exact). Unchanged, with no weights, when too few rows repeat
    (:data:`MERGE_DISTINCT_FRACTION`)."""
    if labels.size < 2:
        return X, labels, None
    keys = np.c_[labels.astype(np.float64), X]
    distinct, inverse, counts = np.unique(keys, axis=0, return_inverse=True, return_counts=True)
    if distinct.shape[0] > MERGE_DISTINCT_FRACTION * labels.size:
        return X, labels, None
    # np.unique orders by the first column, the label, so the partitions stay contiguous
    return distinct[:, 1:], distinct[:, 0].astype(np.int64), counts.astype(np.float32)


def cs_normalize(S: np.ndarray) -> np.ndarray:
    """``S_ij / sqrt(S_ii S_jj)`` (symmetrised; empty partitions give zero rows)."""
    S = 0.5 * (S + S.T)
    diag = np.sqrt(np.clip(np.diag(S), 0, None))
    inv = np.where(diag > 0, 1.0 / np.where(diag > 0, diag, 1.0), 0.0)
    A = S * inv[:, None] * inv[None, :]
    return A


def partition_affinity(S: np.ndarray, sizes: np.ndarray, normalization: str) -> np.ndarray:
    """The partition graph of the pair sums ``S``: 'cs' (:func:`cs_normalize`) or 'size',
    ``S_ij / sqrt(n_i n_j)`` with ``sizes`` the partitions' point counts (at least 1)."""
    if normalization == "cs":
        return cs_normalize(S)
    n = np.maximum(np.asarray(sizes, dtype=np.float64), 1)
    return S / np.sqrt(np.outer(n, n))


def rff_params(
    n_features: int, n_components: int, bandwidth: float, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Random Fourier features for the Gaussian kernel (Rahimi & Recht 2008 [Rahimi2008]).

    Returns ``W`` (d, D) with entries N(0, 1/h²) and phases ``b`` (D,) uniform on [0, 2π):
    ``φ(x) = sqrt(2/D) cos(xW + b)`` has ``E[φ(x)·φ(y)] = exp(-||x-y||²/2h²)``.
    """
    W = rng.standard_normal((n_features, n_components)) / float(bandwidth)
    b = rng.uniform(0.0, 2.0 * np.pi, n_components)
    return W, b


def rff_transform(X: np.ndarray, W: np.ndarray, b: np.ndarray, *, dtype: type = np.float32):
    """``φ(X) = sqrt(2/D) cos(XW + b)``; O(n d D) time, O(n D) memory."""
    Z = np.asarray(X, dtype=dtype) @ np.asarray(W, dtype=dtype)
    Z += np.asarray(b, dtype=dtype)[None, :]
    np.cos(Z, out=Z)
    Z *= np.sqrt(2.0 / W.shape[1])
    return Z


def partition_feature_sums(
    X: np.ndarray,
    labels: np.ndarray,
    n_partitions: int,
    W: np.ndarray,
    b: np.ndarray,
    *,
    weights: np.ndarray | None = None,
    dtype: type = np.float32,
) -> np.ndarray:
    """``S_i = Σ_{x∈C_i} w_x φ(x)`` for one block of points (rows with label < 0 ignored).

    Notes
    -----
    O(n d D) time, O(b D) memory per block of rows.
    """
    labels = np.asarray(labels, dtype=np.int64)
    keep = labels >= 0
    X = np.asarray(X)[keep]
    labels = labels[keep]
    w = None if weights is None else np.asarray(weights)[keep]
    out = np.zeros((n_partitions, W.shape[1]))
    step = _block_rows(max(W.shape[1], n_partitions), 4)
    for s in range(0, X.shape[0], step):
        Phi = rff_transform(X[s : s + step], W, b, dtype=dtype)
        lab = labels[s : s + step]
        # dense one-hot GEMM (float32) beats a sparse product for m up to a few thousand
        E = np.zeros((n_partitions, lab.size), dtype=Phi.dtype)
        E[lab, np.arange(lab.size)] = 1.0 if w is None else w[s : s + step]
        out += (E @ Phi).astype(np.float64)
    return out


def cs_affinity_from_sums(S: np.ndarray) -> np.ndarray:
    """Cauchy–Schwarz affinity from explicit feature sums: ``A = cos(S_i, S_j)`` (m × m).

    With ``S_i = Σ_{x∈C_i} φ(x)``, ``S_i·S_j = Σ_{k∈C_i,l∈C_j} K(x_k, x_l)``, so this equals
    Eq. 5.3 for an exact feature map and approximates it for random Fourier features. PSD by
    construction (a Gram matrix of unit vectors).
    """
    return cs_normalize(S @ S.T)
