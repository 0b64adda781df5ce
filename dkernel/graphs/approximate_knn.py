"""Approximate k-nearest-neighbour search for large point sets: an inverted file of k-means
cells, each searched by dense BLAS blocks.

Numeric layer: NumPy on in-memory arrays, no Dask, no I/O.

Why: an exact k-d-tree search of 10^6 points in 10 intrinsic dimensions takes more than 20
CPU-minutes (the tree prunes little in 10-D: 22 CPU s at 10^5, 78 at 2·10^5), and a
brute-force search is O(N^2). Here the training points are split into cells (k-means on a
random subsample, every point in its nearest centre's cell) and each query is searched in the
``n_probe`` cells whose centres are nearest to it. The queries are grouped by probed cell, so
the distances are one GEMM per cell and block of queries (float32, on coordinates centred at
the cell's centre, so that ``|q|^2 - 2 q.y + |y|^2`` does not lose small distances to
cancellation); each cell's ``k`` nearest per query are kept, the ``k`` nearest of those over
the probed cells selected, and their distances recomputed in float64 from the coordinate
differences (the value the exact search reports). A point of the index is therefore its own
first neighbour, at distance exactly 0 (its own cell is always probed).

Design, from the recall of the 8-NN graph (the k-NN kernel's search size at its defaults)
against brute force on 2 000 query rows (``benchmarks/bench_approximate_knn.py``; results in
``benchmarks/results/decomposition_scale.md``):

* Probing per query, not per cell: searching every query of a cell in the cells nearest to
  that cell's centre found only 78 % (blobs) and 77 % (uniform cube) of the neighbours at
  2·10^5 points with 16 of 447 cells probed, against 99.5 % and 99.1 % when each query
  probes the 16 cells nearest to itself. Refining the per-cell graph by neighbours of
  neighbours gained 1-2 points only (the misses are correlated).
* ``cell_size`` (``DEFAULT_CELL_SIZE``, so ``N / 512`` cells) and ``n_probe``
  (``DEFAULT_N_PROBE``): at 2·10^5 points 99.5 % (10-D blobs), 99.99 % (moons), 99.1 %
  (uniform cube) and 99.9 % (27-D image patches, 1.5·10^5); at 10^6 98.1 % (blobs). Recall
  falls slowly with N at a fixed setting (blobs, 256 x 16: 99.2 % at 10^5, 98.4 % at 2·10^5,
  96.3 % at 10^6), so a much larger N may need more probes. At the same number of
  candidates (``n_probe cell_size``) smaller cells probed more often find more, but the probe
  selection costs O(N / cell_size) per query and the k-means O((N / cell_size)^2): at 10^6,
  512 x 16 found 98.1 % against 96.3 % for 256 x 16 and 98.7 % for 256 x 24, whose index
  took 22 CPU s against 5.5.
* Cost per query: O((N / cell_size + n_probe cell_size) p) flops; memory O(N p) for two
  cell-sorted copies of the points (float64 and centred float32) and O(QUERY_BATCH n_probe k)
  for the candidate lists of a batch.
* k-means: ``KMEANS_SAMPLES_PER_CELL`` random points per cell, at most
  ``KMEANS_ITER`` Lloyd steps from distinct random points: the cells only need to be
  compact, not a converged clustering.

Deterministic: every random choice comes from ``random_state``; a query's result depends only
on its probed cells, never on its batch, the blocks or the number of threads (BLAS runs on one
thread per worker thread and every task writes its own rows).

Limits: many exact duplicates (more than a cell's worth of identical rows) end up in one large
cell, whose search costs O(its size) per query probing it; recall has not been measured on
count data (the cosine kernel's unit rows).
"""

from __future__ import annotations

import numpy as np

from dkernel._budget import SWEEP_BLOCK_BYTES, rows_for_budget
from dkernel.errors import InvalidInputError
from dkernel.linalg.threads import map_on_cores

#: Cells searched per query (the nearest by centre distance), and mean points per cell.
DEFAULT_N_PROBE = 16
DEFAULT_CELL_SIZE = 512
#: k-means sample per cell, and Lloyd iterations, of the partition.
KMEANS_SAMPLES_PER_CELL = 32
KMEANS_ITER = 15
#: Queries searched together (their candidate lists: QUERY_BATCH n_probe k entries), and
#: rows per task of the final merge.
QUERY_BATCH = 2**15
MERGE_ROWS = 2048
#: A query's probes are its nearest centres among PROBE_POOL n_probe cells near its own.
PROBE_POOL = 4


def nearest_cells(
    X: np.ndarray,
    centres: np.ndarray,
    width: int = 1,
    *,
    block_rows: int = 1024,
    n_threads: int | None = None,
) -> np.ndarray:
    """The ``width`` nearest centres of every row of ``X`` (float64, fixed row blocks).

    Returns
    -------
    ndarray of int64 (n, width)
        Nearest first for ``width=1``; in no particular order otherwise.

    Notes
    -----
    O(n c p) time, O(block_rows c) memory per thread.
    """
    X = np.asarray(X, dtype=np.float64)
    width = min(int(width), centres.shape[0])
    cc = np.einsum("ij,ij->i", centres, centres)
    out = np.empty((X.shape[0], width), dtype=np.int64)
    scaled = -2.0 * centres.T

    def block(s: int) -> None:
        D = X[s : s + block_rows] @ scaled
        D += cc
        if width == 1:
            out[s : s + block_rows, 0] = np.argmin(D, axis=1)
        elif width == D.shape[1]:
            out[s : s + block_rows] = np.arange(width)
        else:
            out[s : s + block_rows] = np.argpartition(D, width - 1, axis=1)[:, :width]

    map_on_cores(block, range(0, X.shape[0], block_rows), n_threads)
    return out


def smallest_within(D: np.ndarray, bound: np.ndarray, width: int) -> np.ndarray:
    """Columns of the ``width`` smallest entries of each row of ``D`` (ascending; ties by
    column), given ``bound``, a value per row with at least ``width`` entries ``<=`` it.

    Only the entries within the bound are sorted: O(size of D) for the comparison, plus
    O(m log m) for the m entries within, against ~13 ns per entry for ``np.argpartition``
    on rows of a few thousand.
    """
    r, c = np.nonzero(D <= bound[:, None])
    o = np.lexsort((c, D[r, c], r))
    r, c = r[o], c[o]
    rank = np.arange(r.size) - np.searchsorted(r, r)
    keep = rank < width
    out = np.empty((D.shape[0], width), dtype=np.int64)
    out[r[keep], rank[keep]] = c[keep]
    return out


def kmeans_cells(
    X: np.ndarray,
    n_cells: int,
    rng: np.random.Generator,
    *,
    n_threads: int | None = None,
) -> np.ndarray:
    """Centres of ``n_cells`` cells: Lloyd's k-means on a random subsample of ``X``.

    Starts from distinct random points; an emptied cell keeps its previous centre.

    Returns
    -------
    ndarray (n_cells, p)
    """
    n = X.shape[0]
    m = min(n, n_cells * KMEANS_SAMPLES_PER_CELL)
    S = X[np.sort(rng.choice(n, m, replace=False))] if m < n else X
    centres = S[np.sort(rng.choice(S.shape[0], n_cells, replace=False))].copy()
    labels = None
    for _ in range(KMEANS_ITER):
        new = nearest_cells(S, centres, n_threads=n_threads)[:, 0]
        if labels is not None and np.array_equal(new, labels):
            break
        labels = new
        counts = np.bincount(labels, minlength=n_cells)
        full = counts > 0
        for j in range(S.shape[1]):
            sums = np.bincount(labels, weights=S[:, j], minlength=n_cells)
            centres[full, j] = sums[full] / counts[full]
    return centres


class CellIndex:
    """Approximate nearest-neighbour index: k-means cells searched by BLAS blocks.

    The same call pattern as :class:`sklearn.neighbors.NearestNeighbors` (``fit``,
    ``kneighbors``), Euclidean distance.

    Parameters
    ----------
    cell_size : int
        Mean training points per cell: ``n_cells = ceil(N / cell_size)``.
    n_probe : int
        Cells searched per query: the nearest to it by centre distance (more when these
        hold fewer than ``n_neighbors`` points). ``n_probe >= n_cells`` is an exact search.
    random_state : int or numpy Generator, optional
        Seeds the k-means subsample and starting centres.
    n_threads : int, optional
        Worker threads (default: the cores, or one inside a Dask worker; see
        ``dkernel.linalg.threads.map_on_cores``).

    Attributes
    ----------
    cluster_centers_ : ndarray (n_cells, p)
    cell_offsets_ : ndarray of int64 (n_cells + 1,)
        Cell ``c`` holds the training points ``order_[cell_offsets_[c]:cell_offsets_[c+1]]``.
    order_ : ndarray of int64 (n_samples,)
        Training indices sorted by cell.
    n_features_in_, n_samples_fit_ : int

    Notes
    -----
    Memory: a cell-sorted copy of the training points (float64) and one centred at each
    cell's centre (float32), O(N p), plus O(N) indices; a query batch adds
    O(QUERY_BATCH n_probe k).
    """

    def __init__(
        self,
        cell_size: int = DEFAULT_CELL_SIZE,
        n_probe: int = DEFAULT_N_PROBE,
        *,
        random_state: int | np.random.Generator | None = None,
        n_threads: int | None = None,
    ) -> None:
        self.cell_size = cell_size
        self.n_probe = n_probe
        self.random_state = random_state
        self.n_threads = n_threads

    def fit(self, X: np.ndarray) -> CellIndex:
        """Partition the training points ``X`` (n_samples, p) into cells."""
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2 or X.shape[0] < 1:
            raise InvalidInputError(f"CellIndex needs a non-empty 2-D array; got {X.shape}.")
        for name in ("cell_size", "n_probe"):
            if int(getattr(self, name)) < 1:
                raise InvalidInputError(
                    f"CellIndex: {name} must be >= 1; got {getattr(self, name)}."
                )
        n = X.shape[0]
        n_cells = -(-n // int(self.cell_size))
        rng = np.random.default_rng(self.random_state)
        centres = kmeans_cells(X, n_cells, rng, n_threads=self.n_threads)
        cell = nearest_cells(X, centres, n_threads=self.n_threads)[:, 0]
        self.order_ = np.argsort(cell, kind="stable")
        counts = np.bincount(cell, minlength=n_cells)
        self.cell_offsets_ = np.concatenate(([0], np.cumsum(counts)))
        self.cluster_centers_ = centres
        self._X = X[self.order_]
        self._Y = (self._X - centres[cell[self.order_]]).astype(np.float32)
        self._yy = np.einsum("ij,ij->i", self._Y, self._Y)
        self.n_features_in_ = int(X.shape[1])
        self.n_samples_fit_ = int(n)
        self.cell_neighbors_ = self._cell_neighbors(min(n_cells, PROBE_POOL * int(self.n_probe)))
        return self

    def _cell_neighbors(self, width: int) -> np.ndarray:
        """Each cell's ``width`` nearest cells by centre distance (itself included)."""
        C = self.cluster_centers_
        cc = np.einsum("ij,ij->i", C, C)
        out = np.empty((C.shape[0], width), dtype=np.int64)
        for s in range(0, C.shape[0], 1024):
            D = C[s : s + 1024] @ (-2.0 * C.T)
            D += cc
            D[np.arange(D.shape[0]), np.arange(s, s + D.shape[0])] = -np.inf  # itself first
            out[s : s + 1024] = (
                np.argpartition(D, width - 1, axis=1)[:, :width]
                if width < C.shape[0]
                else np.arange(width)
            )
        return out

    def probes(self, Q: np.ndarray, width: int) -> np.ndarray:
        """The ``width`` cells searched for each row of ``Q``: its nearest centres.

        Selected without ranking every centre (``np.argpartition`` over all ``N /
        cell_size`` centres cost as much as the search itself at N = 10^6): the
        ``width``-th nearest among the ``PROBE_POOL`` ``width`` cells nearest to the
        row's own cell bounds the ``width``-th nearest overall, so only the few centres
        within that bound are sorted. The result is the same set as
        ``nearest_cells`` (ties aside).
        """
        C = self.cluster_centers_
        if width >= C.shape[0]:
            return np.broadcast_to(np.arange(C.shape[0]), (Q.shape[0], C.shape[0]))
        if PROBE_POOL * width > self.cell_neighbors_.shape[1]:
            return nearest_cells(Q, C, width, n_threads=self.n_threads)
        cc = np.einsum("ij,ij->i", C, C)
        scaled = -2.0 * C.T
        out = np.empty((Q.shape[0], width), dtype=np.int64)

        def block(s: int) -> None:
            D = Q[s : s + 1024] @ scaled
            D += cc
            pool = self.cell_neighbors_[np.argmin(D, axis=1), : PROBE_POOL * width]
            bound = np.partition(np.take_along_axis(D, pool, axis=1), width - 1, axis=1)
            out[s : s + 1024] = smallest_within(D, bound[:, width - 1], width)

        map_on_cores(block, range(0, Q.shape[0], 1024), self.n_threads)
        return out

    def kneighbors(
        self, X: np.ndarray, n_neighbors: int, return_distance: bool = True
    ) -> tuple[np.ndarray, np.ndarray] | np.ndarray:
        """Approximate ``n_neighbors`` nearest training points of every row of ``X``.

        Returns
        -------
        dist : ndarray (n_query, n_neighbors)
            Euclidean distances, ascending (ties by training index).
        ind : ndarray of int64 (n_query, n_neighbors)
        """
        k = int(n_neighbors)
        if not 1 <= k <= self.n_samples_fit_:
            raise InvalidInputError(
                f"n_neighbors must be in [1, {self.n_samples_fit_}] (training points); got {k}."
            )
        Q = np.asarray(X, dtype=np.float64)
        dist = np.empty((Q.shape[0], k))
        ind = np.empty((Q.shape[0], k), dtype=np.int64)
        for s in range(0, Q.shape[0], QUERY_BATCH):
            rows = np.arange(s, min(s + QUERY_BATCH, Q.shape[0]))
            self._search(Q, rows, k, int(self.n_probe), dist, ind)
        return (dist, ind) if return_distance else ind

    def _search(
        self, Q: np.ndarray, rows: np.ndarray, k: int, width: int, dist: np.ndarray, ind: np.ndarray
    ) -> None:
        """Search ``Q[rows]`` in their ``width`` nearest cells; rows whose cells hold fewer
        than ``k`` points are searched again in twice as many."""
        probes = self.probes(Q[rows], width)
        width = probes.shape[1]
        short = np.diff(self.cell_offsets_)[probes].sum(axis=1) < k
        if np.any(short):
            self._search(Q, rows[short], k, 2 * width, dist, ind)
            rows, probes = rows[~short], probes[~short]
        n = rows.size
        if n == 0:
            return
        # every (query, probed cell) pair gets the cell's k nearest points as candidates
        cand_d = np.full((n * width, k), np.inf, dtype=np.float32)
        cand_p = np.zeros((n * width, k), dtype=np.int64)
        pairs = np.argsort(probes.ravel(), kind="stable")
        cells, starts = np.unique(probes.ravel()[pairs], return_index=True)
        bounds = np.append(starts, pairs.size)

        def cell_block(j: int) -> None:
            slots = pairs[bounds[j] : bounds[j + 1]]
            self._search_cell(Q[rows[slots // width]], int(cells[j]), k, slots, cand_d, cand_p)

        map_on_cores(cell_block, range(cells.size), self.n_threads)
        cand_d = cand_d.reshape(n, width * k)
        cand_p = cand_p.reshape(n, width * k)

        def merge(s: int) -> None:
            b = slice(s, s + MERGE_ROWS)
            sel = np.argpartition(cand_d[b], k - 1, axis=1)[:, :k]
            pos = np.take_along_axis(cand_p[b], sel, axis=1)
            diff = self._X[pos] - Q[rows[b], None, :]
            d = np.sqrt(np.einsum("ijk,ijk->ij", diff, diff))
            idx = self.order_[pos]
            o = np.lexsort((idx, d), axis=1)
            dist[rows[b]] = np.take_along_axis(d, o, axis=1)
            ind[rows[b]] = np.take_along_axis(idx, o, axis=1)

        map_on_cores(merge, range(0, n, MERGE_ROWS), self.n_threads)

    def _search_cell(
        self,
        Q: np.ndarray,
        cell: int,
        k: int,
        slots: np.ndarray,
        cand_d: np.ndarray,
        cand_p: np.ndarray,
    ) -> None:
        """The (up to) ``k`` nearest points of ``cell`` to each query row, written to the
        pair ``slots`` of the candidate arrays (float32 squared distances)."""
        lo, hi = int(self.cell_offsets_[cell]), int(self.cell_offsets_[cell + 1])
        if hi == lo:
            return
        Y, yy = self._Y[lo:hi], self._yy[lo:hi]
        centre = self.cluster_centers_[cell]
        kk = min(k, hi - lo)
        step = rows_for_budget(SWEEP_BLOCK_BYTES, hi - lo, 4)  # float32 distances
        for s in range(0, Q.shape[0], step):
            q = (Q[s : s + step] - centre).astype(np.float32)
            D = (-2.0 * q) @ Y.T
            D += yy
            if kk < hi - lo:
                part = np.argpartition(D, kk - 1, axis=1)[:, :kk]
                D = np.take_along_axis(D, part, axis=1)
            else:
                part = np.broadcast_to(np.arange(kk), D.shape)
            D += np.einsum("ij,ij->i", q, q)[:, None]
            cand_d[slots[s : s + step], :kk] = D
            cand_p[slots[s : s + step], :kk] = part + lo


def knn_recall(
    approx: np.ndarray,
    exact: np.ndarray,
    approx_dist: np.ndarray | None = None,
    exact_dist: np.ndarray | None = None,
) -> float:
    """Share of the exact k-NN lists found by an approximate search.

    Rows are compared as sets of indices; with the distances given, a found neighbour counts
    when it is no farther than the exact k-th neighbour (so that equally distant points,
    e.g. duplicates, count whichever of them is returned).

    Parameters
    ----------
    approx, exact : ndarray of int (n_query, k)
        Neighbour indices of the same queries.
    approx_dist, exact_dist : ndarray (n_query, k), optional
        Their distances, ascending per row.
    """
    approx = np.asarray(approx)
    exact = np.asarray(exact)
    if approx.shape != exact.shape:
        raise InvalidInputError(f"shapes differ: {approx.shape} and {exact.shape}.")
    if approx_dist is not None and exact_dist is not None:
        kth = np.asarray(exact_dist)[:, -1:]
        return float(np.mean(np.asarray(approx_dist) <= kth * (1 + 1e-12)))
    hits = sum(np.intersect1d(a, e).size for a, e in zip(approx, exact, strict=True))
    return hits / exact.size
