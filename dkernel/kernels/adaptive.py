"""Adaptive affinities: local scaling (self-tuning) and the symmetric k-nearest-neighbour graph.

Both are built on one quantity, the *neighbour radius* of a point: its distance to the k-th
nearest point of a fixed reference set R (a uniform sample of the training data, or all of it),
not counting reference points that coincide with it. Because the radius is a function of the
point alone, each kernel is an ordinary function κ(x, y), and a new point is scored exactly like
a training point: out-of-sample extension needs no special case.

- Local scaling: ``κ(x, y) = exp(-||x - y||² / (σ_x σ_y))`` with σ the radius.
- k-NN graph: ``κ(x, y) = 1`` when y lies within x's radius or x within y's, else 0 — the
  symmetric ("or") k-nearest-neighbour graph with self-loops when R is the whole training set.

When R is a sample of ``m`` of the ``n`` training points, the k-th neighbour in the data is
estimated by the ``round(k m / n)``-th neighbour in R (at least the first), which keeps the
density quantile and bounds the cost at O(n m p) instead of O(n² p).

NumPy only: no Dask, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dkernel._budget import SCRATCH_BLOCK_BYTES, rows_for_budget
from dkernel.errors import InvalidInputError
from dkernel.linalg.copies import repeated_rows
from dkernel.linalg.elementwise import exp_flushed


def squared_distances(X: np.ndarray, Y: np.ndarray, *, dtype: Any = np.float64) -> np.ndarray:
    """``||x - y||²`` for every row pair (one GEMM), clipped at 0 against round-off."""
    dtype = np.dtype(dtype)
    X = np.asarray(X, dtype=dtype)
    Y = np.asarray(Y, dtype=dtype)
    D = X @ Y.T
    D *= dtype.type(-2.0)
    D += np.einsum("ij,ij->i", X, X)[:, None]
    D += np.einsum("ij,ij->i", Y, Y)[None, :]
    np.maximum(D, 0, out=D)
    return D


def _coincidence_tolerance(X: np.ndarray, R: np.ndarray) -> np.ndarray:
    xx = np.einsum("ij,ij->i", X, X)[:, None]
    rr = np.einsum("ij,ij->i", R, R)[None, :]
    return _tolerance_of(xx + rr)


def _tolerance_of(norm_sums: np.ndarray) -> np.ndarray:
    # GEMM-based squared distances carry an absolute error ~ eps (|x|² + |r|²); below this a
    # reference point counts as the point itself (or an exact duplicate of it).
    return 1e-10 * norm_sums + 1e-300


def listed_squared_distances(
    X: np.ndarray,
    R: np.ndarray,
    norms: tuple[np.ndarray, np.ndarray],
    rows: np.ndarray,
    columns: np.ndarray,
) -> np.ndarray:
    """``|x_i|² + |r_j|² − 2 x_i·r_j`` (clipped at 0) of the listed pairs: row ``rows[a]`` of
    ``X`` against rows ``columns[a, :]`` of ``R`` (``norms`` the rows' ``|x|²`` and ``|r|²``),
    the same formula as the dense blocks' :func:`squared_distances`."""
    D = norms[0][rows, None] + norms[1][columns]
    D -= 2.0 * np.einsum("ip,ikp->ik", X[rows], R[columns])
    return np.maximum(D, 0.0, out=D)


def neighbor_radius(
    X: Any,
    reference: Any,
    n_neighbors: int,
    *,
    copies: tuple[np.ndarray, np.ndarray] | None = None,
) -> np.ndarray:
    """Distance from each row of X to its ``n_neighbors``-th nearest row of ``reference``.

    Reference rows that coincide with the point (its own copy when X is part of the reference,
    or exact duplicates) are not counted, so a training point's radius is the distance to its
    k-th *other* neighbour. When fewer than k distinct reference rows exist the farthest one is
    used.

    Parameters
    ----------
    X : ndarray (n, p)
    reference : ndarray (m, p)
    n_neighbors : int
        k >= 1.
    copies : (ndarray (n, q), ndarray (m, q)), optional
        Rows that coincide exactly where a point and a reference row are copies, when the
        distances between ``X`` and ``reference`` do not vanish between copies (expected
        distances of rows with missing entries: ``dkernel.kernels.missing``).

    Returns
    -------
    ndarray (n,)
        Radii (0 only when every reference row coincides with the point).

    Notes
    -----
    O(n m p) time in GEMMs; O(rows · m) scratch memory, processed in row blocks.
    """
    X = np.asarray(X, dtype=np.float64)
    R = np.asarray(reference, dtype=np.float64)
    k = int(n_neighbors)
    m = R.shape[0]
    out = np.empty(X.shape[0], dtype=np.float64)
    rows = rows_for_budget(SCRATCH_BLOCK_BYTES, m, 8)  # float64 distances to R
    for r0 in range(0, X.shape[0], rows):
        Xb = X[r0 : r0 + rows]
        D = squared_distances(Xb, R)
        if copies is None:
            coincide = D <= _coincidence_tolerance(Xb, R)
        else:
            Cb, CR = copies[0][r0 : r0 + rows], copies[1]
            coincide = squared_distances(Cb, CR) <= _coincidence_tolerance(Cb, CR)
        D[coincide] = np.inf
        distinct = m - coincide.sum(axis=1)
        kk = np.clip(np.minimum(k, distinct), 1, None) - 1
        if np.all(kk == k - 1) and k <= m:
            kth = np.partition(D, k - 1, axis=1)[:, k - 1] if k > 1 else D.min(axis=1)
        else:
            D.sort(axis=1)
            kth = D[np.arange(D.shape[0]), kk]
        kth[~np.isfinite(kth)] = 0.0
        out[r0 : r0 + rows] = np.sqrt(kth)
    return out


#: Reference sets of at least this many rows find the neighbour radii through a
#: nearest-neighbour index (:func:`indexed_neighbor_radius`) instead of all distances.
INDEX_MIN_REFERENCE = 10_000


def indexed_neighbor_radius(
    X: np.ndarray,
    reference: np.ndarray,
    n_neighbors: int,
    index: Any,
    *,
    copies: tuple[np.ndarray, np.ndarray] | None = None,
) -> np.ndarray:
    """:func:`neighbor_radius` through ``index``, a scikit-learn ``NearestNeighbors`` fitted on
    ``reference``: O(n k log m) instead of O(n m) distances, for a reference of all the
    training rows.

    The index lists each row's nearest reference rows, more of them (doubling) until ``n_neighbors``
    of the listed ones do not coincide with the row; the k-th of those is taken with the same
    distances (``|x|² + |r|² − 2 x·r``) and coincidence test as :func:`neighbor_radius`, so
    both give the same radii.
    """
    return _indexed_search(X, reference, n_neighbors, index, copies=copies)[0]


#: Reference rows listed per row by the radius search's first pass beyond ``n_neighbors``: the
#: point itself and one more, so that a row's list also shows its radius closed (its farthest
#: listed row beyond it), and the sparse k-NN graph (``dkernel.ranking.sparse_graph``) can start
#: from these lists instead of searching again.
FIRST_PASS_EXTRA = 2


def _indexed_search(
    X: np.ndarray,
    reference: np.ndarray,
    n_neighbors: int,
    index: Any,
    *,
    copies: tuple[np.ndarray, np.ndarray] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`indexed_neighbor_radius`'s radii and its first pass's lists: each row's
    ``min(m, n_neighbors + FIRST_PASS_EXTRA)`` nearest reference rows, nearest first.

    Copies of a row have its radius and its lists: they are searched once. A row with c
    copies in the reference lists past them, c + k rows, so integer-valued data searched
    every copy (three rounded 4-D blobs, 6·10⁴ rows, 453 distinct: 24 s of a 28 s fit).
    """
    X = np.asarray(X, dtype=np.float64)
    repeated = repeated_rows(X) if copies is None else None
    if repeated is not None:
        radii, lists = _indexed_search(X[repeated.first], reference, n_neighbors, index)
        return radii[repeated.inverse], lists[repeated.inverse]
    R = np.asarray(reference, dtype=np.float64)
    k, m = int(n_neighbors), R.shape[0]
    norms = np.einsum("ij,ij->i", X, X), np.einsum("ij,ij->i", R, R)
    CX, CR = (X, R) if copies is None else copies
    copy_norms = (
        norms if copies is None else (np.einsum("ij,ij->i", CX, CX), np.einsum("ij,ij->i", CR, CR))
    )
    out = np.zeros(X.shape[0], dtype=np.float64)
    pending = np.arange(X.shape[0])
    width = min(m, k + FIRST_PASS_EXTRA)
    first: list[np.ndarray] = []  # the first pass's lists, every row's in order
    first_pass = True
    while pending.size:
        step = rows_for_budget(SCRATCH_BLOCK_BYTES, width * (X.shape[1] + 2), 8)
        unfinished = []
        for r0 in range(0, pending.size, step):
            rows = pending[r0 : r0 + step]
            _, columns = index.kneighbors(X[rows], n_neighbors=width)
            if first_pass:
                first.append(columns.astype(_list_dtype(m), copy=False))
            D = listed_squared_distances(X, R, norms, rows, columns)
            C = D if copies is None else listed_squared_distances(CX, CR, copy_norms, rows, columns)
            coincide = C <= _tolerance_of(copy_norms[0][rows, None] + copy_norms[1][columns])
            D[coincide] = np.inf
            distinct = width - coincide.sum(axis=1)
            done = (distinct >= k) | (width == m)
            D.sort(axis=1)
            kk = np.clip(np.minimum(k, distinct), 1, None) - 1
            kth = D[np.arange(rows.size), kk]
            kth[~np.isfinite(kth)] = 0.0
            out[rows[done]] = np.sqrt(kth[done])
            unfinished.append(rows[~done])
        pending = np.concatenate(unfinished)
        width = min(m, 2 * width)
        first_pass = False
    empty = np.zeros((0, min(m, k + FIRST_PASS_EXTRA)), _list_dtype(m))
    lists = np.concatenate(first) if first else empty
    return out, lists


def _list_dtype(m: int) -> type:
    return np.int32 if m < 2**31 else np.int64


def radii_among(
    X: np.ndarray,
    reference: np.ndarray,
    n_neighbors: int,
    index: Any,
    *,
    copies: tuple[np.ndarray, np.ndarray] | None = None,
) -> tuple[np.ndarray, Any, np.ndarray | None]:
    """The neighbour radii of ``X`` among ``reference`` (:func:`neighbor_radius`), through a
    nearest-neighbour index when the reference has at least ``INDEX_MIN_REFERENCE`` rows;
    returns the radii, that index (``index`` when given, built here otherwise; None for a
    smaller reference), for the radius blocks to keep, and the index's first lists of nearest
    reference rows per row of ``X`` (``_indexed_search``; None without an index)."""
    if reference.shape[0] < INDEX_MIN_REFERENCE:
        return neighbor_radius(X, reference, n_neighbors, copies=copies), None, None
    if index is None:
        from sklearn.neighbors import NearestNeighbors

        index = NearestNeighbors().fit(np.asarray(reference, dtype=np.float64))
    radii, lists = _indexed_search(X, reference, n_neighbors, index, copies=copies)
    return radii, index, lists


def reference_neighbors(n_neighbors: int, n_reference: int, n_train: int) -> int:
    """The neighbour rank in a reference sample of ``n_reference`` of ``n_train`` points that
    matches rank ``n_neighbors`` in the whole data (same density quantile, at least 1)."""
    if n_reference >= n_train:
        return int(n_neighbors)
    return max(1, int(round(n_neighbors * n_reference / n_train)))


def local_scaling_block(
    X: np.ndarray,
    Y: np.ndarray,
    sigma_x: np.ndarray,
    sigma_y: np.ndarray,
    *,
    dtype: Any = np.float64,
) -> np.ndarray:
    """``exp(-||x - y||² / (σ_x σ_y))`` for every row pair ([ZelnikManor2005])."""
    dtype = np.dtype(dtype)
    G = squared_distances(X, Y, dtype=dtype)
    G /= np.asarray(sigma_x, dtype=dtype)[:, None]
    G /= np.asarray(sigma_y, dtype=dtype)[None, :]
    np.negative(G, out=G)
    return exp_flushed(G)


def local_scaling_log_kernel(
    dist: np.ndarray, sigma_q: np.ndarray, sigma_t: np.ndarray
) -> np.ndarray:
    """``log K = -d² / (σ_q σ_t)`` from distances: ``dist`` (n_q, g) with per-row ``sigma_q``
    (n_q,) and per-entry ``sigma_t`` (n_q, g), or (n_t,) against a dense block.

    The log form of :func:`local_scaling_block` (no underflow far from every point).
    """
    D = np.asarray(dist, dtype=np.float64) ** 2
    D /= np.asarray(sigma_q, dtype=np.float64)[:, None]
    D /= sigma_t if np.ndim(sigma_t) == 2 else np.asarray(sigma_t)[None, :]
    return -D


#: Relative slack of "within the radius" on squared distances: a neighbour exactly at the
#: radius is kept despite round-off (the dense blocks and ``dkernel.ranking.sparse_graph``).
RADIUS_SLACK = 1e-9


def _within_radii(
    D: np.ndarray, radius_x: np.ndarray, radius_y: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``[y within x's radius]`` and ``[x within y's radius]`` from squared distances ``D``."""
    within_x = D <= np.asarray(radius_x, dtype=np.float64)[:, None] ** 2 * (1 + RADIUS_SLACK)
    within_y = D <= np.asarray(radius_y, dtype=np.float64)[None, :] ** 2 * (1 + RADIUS_SLACK)
    return within_x, within_y


def knn_block(
    X: np.ndarray,
    Y: np.ndarray,
    radius_x: np.ndarray,
    radius_y: np.ndarray,
    *,
    dtype: Any = np.float64,
) -> np.ndarray:
    """1 where y is within x's neighbour radius or x within y's, else 0 (symmetric k-NN graph)."""
    within_x, within_y = _within_radii(squared_distances(X, Y), radius_x, radius_y)
    within_x |= within_y
    return within_x.astype(dtype)


def knn_mean_block(
    X: np.ndarray,
    Y: np.ndarray,
    radius_x: np.ndarray,
    radius_y: np.ndarray,
    *,
    dtype: Any = np.float64,
) -> np.ndarray:
    """½ [y within x's radius] + ½ [x within y's]: 1 between mutual neighbours, ½ one way —
    scikit-learn's k-NN affinity ``½ (A + Aᵀ)`` on the training points."""
    within_x, within_y = _within_radii(squared_distances(X, Y), radius_x, radius_y)
    out = within_x.astype(dtype)
    out += within_y
    out *= 0.5
    return out


_BLOCKS = {"local_scaling": local_scaling_block, "knn": knn_block, "knn_mean": knn_mean_block}


@dataclass(frozen=True)
class NeighborLists:
    """The radius search's first lists: row i of ``rows`` and its ``lists[i]``, its nearest
    reference rows (nearest first, ``min(m, k + FIRST_PASS_EXTRA)`` of them) in ``index``, the
    reference's nearest-neighbour index that listed them."""

    rows: Any
    lists: np.ndarray
    index: Any

    @classmethod
    def of_reference(
        cls, rows: Any, reference: Any, lists: np.ndarray | None, index: Any
    ) -> NeighborLists | None:
        """The lists kept by a radius block: only those of its reference rows themselves (the
        training rows a sparse graph is built on), when an index listed them."""
        return cls(rows, lists, index) if lists is not None and rows is reference else None

    def for_rows(self, rows: Any) -> NeighborLists | None:
        """These lists when they are those of ``rows`` (the same object), else None."""
        return self if self.rows is rows else None


@dataclass
class RadiusKernelBlock:
    """A picklable ``block(A, B, dtype=...)`` for the radius-based kernels.

    Holds the reference set and its neighbour rank; caches the radii of the last ``B`` it saw
    (the landmarks, in Nyström passes), so that repeated blocks against the same landmarks
    compute their radii once. Distances are computed on rows shifted by ``center`` (the
    reference rows' mean): they do not change, but the GEMM's round-off, which grows with the
    rows' norms, stays at the scale of the data's spread (coordinates with a large offset,
    metres of a map projection, had every point "coincide" with its neighbours).
    """

    kind: str
    reference: np.ndarray
    n_neighbors: int
    center: np.ndarray | None = None
    _cache: tuple = field(default=(None, None), repr=False, compare=False)
    _index: Any = field(default=None, repr=False, compare=False)
    _lists: NeighborLists | None = field(default=None, repr=False, compare=False)
    _reference_c: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.center is None:
            self.center = np.asarray(self.reference, dtype=np.float64).mean(axis=0)
        self._reference_c = self._centred(self.reference)

    def _centred(self, A: Any) -> np.ndarray:
        return np.asarray(A, dtype=np.float64) - self.center

    def _reference_centred(self) -> np.ndarray:
        return self._reference_c

    def sides(self, A: Any) -> tuple[np.ndarray, np.ndarray]:
        """Rows ``(left, right)`` whose squared distances (``left`` against ``right``) are the
        kernel's: here both are the rows shifted by ``center``."""
        centred = self._centred(A)
        return centred, centred

    def radius(self, A: Any) -> np.ndarray:
        """Neighbour radius of each row of A among the reference rows."""
        last, radii = self._cache
        if A is last:
            return radii
        radii, lists = self._search(A)
        self._cache = (A, radii)
        self._lists = NeighborLists.of_reference(A, self.reference, lists, self._index)
        return radii

    def _radius(self, A: Any) -> np.ndarray:
        return self._search(A)[0]

    def _search(self, A: Any) -> tuple[np.ndarray, np.ndarray | None]:
        R = self._reference_centred()
        radii, self._index, lists = radii_among(self._centred(A), R, self.n_neighbors, self._index)
        return radii, lists

    def take_neighbor_lists(self, A: Any) -> NeighborLists | None:
        """The lists of nearest reference rows that measured A's radii (:class:`NeighborLists`),
        when A is the reference rows and an index measured them; else None. Handed over once:
        the block does not keep them."""
        held, self._lists = self._lists, None
        return held.for_rows(A) if held is not None else None

    def _radii(self, A: Any, B: Any) -> tuple[np.ndarray, np.ndarray]:
        rb = self.radius(B)
        if A is B:
            return rb, rb
        return self._radius(A), rb

    def log_block(self, A: Any, B: Any) -> np.ndarray:
        """``log κ(A, B) = -||a - b||² / (σ_a σ_b)`` in float64 (local scaling only)."""
        if self.kind != "local_scaling":
            raise InvalidInputError(
                f"the {self.kind} kernel is 0 or 1 (or 1/2); it has no log form, only "
                "local_scaling does."
            )
        ra, rb = self._radii(A, B)
        D = squared_distances(self._centred(A), self._centred(B))
        D /= ra[:, None]
        D /= rb[None, :]
        np.negative(D, out=D)
        return D

    def __call__(self, A: Any, B: Any, *, dtype: Any = np.float64) -> np.ndarray:
        if B is self.reference and A is not B:
            return self._against_reference(A, dtype)
        ra, rb = self._radii(A, B)
        Ac = self._centred(A)
        Bc = Ac if A is B else self._centred(B)
        return _BLOCKS[self.kind](Ac, Bc, ra, rb, dtype=dtype)

    def _against_reference(self, A: Any, dtype: Any) -> np.ndarray:
        # B is the reference set itself (Nyström landmarks): one distance block gives both the
        # kernel and A's radii.
        Ac, Rc = self._centred(A), self._reference_centred()
        D = squared_distances(Ac, Rc)
        scratch = np.where(D <= _coincidence_tolerance(Ac, Rc), np.inf, D)
        k = min(self.n_neighbors, Rc.shape[0])
        kth = scratch.min(axis=1) if k == 1 else np.partition(scratch, k - 1, axis=1)[:, k - 1]
        if not np.all(np.isfinite(kth)):
            return self(A, self.reference.copy(), dtype=dtype)
        ra, rb = np.sqrt(kth), self.radius(self.reference)
        if self.kind != "local_scaling":
            return _BLOCKS[self.kind](Ac, Rc, ra, rb, dtype=dtype)
        D /= ra[:, None]
        D /= rb[None, :]
        np.negative(D, out=D)
        exp_flushed(D)
        return D.astype(dtype, copy=False)

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_cache"] = (None, None)
        state["_index"] = None
        state["_lists"] = None
        return state


def kth_distinct_distance(distances: np.ndarray, n_neighbors: int) -> np.ndarray:
    """Per row of sorted neighbour distances, the ``n_neighbors``-th one that is not ~0.

    ``distances`` (n, g) holds each point's distances to its g nearest training points in
    increasing order, its own copy (distance 0) included when it is a training point. Zero
    distances are skipped, as in :func:`neighbor_radius`; the last column is used when fewer
    than k non-zero distances are present.
    """
    D = np.asarray(distances, dtype=np.float64)
    scale = np.maximum(D[:, -1:], 1e-300)
    distinct = D > 1e-5 * scale
    rank = np.cumsum(distinct, axis=1)
    hit = distinct & (rank == int(n_neighbors))
    col = np.where(hit.any(axis=1), hit.argmax(axis=1), D.shape[1] - 1)
    return D[np.arange(D.shape[0]), col]


def local_scaling_weights(
    distances: np.ndarray, sigma_rows: np.ndarray, sigma_neighbors: np.ndarray
) -> np.ndarray:
    """``exp(-d² / (σ_i σ_j))`` on neighbour lists: ``distances`` and ``sigma_neighbors`` are
    (n, g) (the σ of each listed neighbour), ``sigma_rows`` is (n,)."""
    D = np.asarray(distances, dtype=np.float64)
    return np.exp(-(D**2) / (np.asarray(sigma_rows)[:, None] * np.asarray(sigma_neighbors)))


def fill_zero_scales(sigma: np.ndarray, n_listed: int) -> np.ndarray:
    """Scales of points whose listed neighbours all coincide with them (duplicated rows, as in
    integer-valued tables) are 0; they get the median scale of the others, which only matters
    for their few edges to distinct points (duplicates are joined with weight 1 whatever σ)."""
    zero = ~(sigma > 0)
    if zero.all() and n_listed <= 1:  # a list of the point alone: one distinct row
        raise InvalidInputError(
            "all rows are identical: there is nothing to cluster; remove the duplicates."
        )
    if zero.all():
        raise InvalidInputError(
            f"every point coincides with its {n_listed} nearest neighbours: all rows are "
            f"identical, or each row has at least {n_listed - 1} exact copies, so the neighbour "
            "graph would join only copies and no local scale exists; drop the repeated rows "
            "(np.unique(X, axis=0)) or use more neighbours than a row has copies."
        )
    if zero.any():
        sigma = sigma.copy()
        sigma[zero] = np.median(sigma[~zero])
    return sigma


#: Most neighbours a list is extended to when its last ones tie (see
#: :func:`tie_inclusive_neighbors`), as a multiple of its length (and at least 64).
TIE_LIST_FACTOR = 4


def tie_inclusive_neighbors(
    search: Any,
    n_rows: int,
    k: int,
    n_points: int,
    first: tuple[np.ndarray, np.ndarray] | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Each row's ``k`` nearest points and every further one at the same distance as its
    k-th: ``search(rows, count) -> (dist, ind)`` is the neighbour search (``first``: its
    answer for every row with at least ``k + 1`` neighbours, when already at hand).

    Integer-valued and binary data tie: a point of 12 binary features has 12 others at
    Hamming distance 1, and a list of 8 chose 8 of them by index order, which made a k-NN
    graph arbitrary (``SpectralClustering`` 0.16 where k-means scores 0.57 on three groups
    of 12 binary features; 0.53 with the ties kept). Rows whose k-th and (k+1)-th distances
    are equal are searched again with up to :data:`TIE_LIST_FACTOR` × k neighbours (at least
    64) and keep those within the k-th distance. Returns ``(dist, ind, listed)``, as wide as
    the longest list, the entries past a row's list marked False in ``listed`` (their
    distance that of the row's k-th, their index its nearest point's); ``listed`` is None
    when no list tied (then ``dist`` and ``ind`` are the plain k nearest).
    """
    wide = min(k + 1, n_points)
    dist, ind = first if first is not None else search(np.arange(n_rows), wide)
    if wide <= k or dist.shape[1] <= k:
        return dist[:, :k], ind[:, :k], None
    boundary = dist[:, k - 1]
    tied = np.flatnonzero(dist[:, k] <= boundary * (1 + 1e-12))
    if tied.size == 0:
        return dist[:, :k], ind[:, :k], None
    cap = min(n_points, max(TIE_LIST_FACTOR * k, 64))
    more_d, more_i = search(tied, cap)
    within = more_d <= boundary[tied, None] * (1 + 1e-12)
    width = max(k, int(within.sum(axis=1).max()))
    out_d = np.repeat(boundary[:, None], width, axis=1)
    out_i = np.repeat(ind[:, :1], width, axis=1).astype(np.int64)
    out_d[:, :k], out_i[:, :k] = dist[:, :k], ind[:, :k]
    out_d[tied], out_i[tied] = more_d[:, :width], more_i[:, :width]
    listed = np.zeros((n_rows, width), dtype=bool)
    listed[:, :k] = True
    listed[tied] = within[:, :width]
    out_d = np.where(listed, out_d, boundary[:, None])
    return out_d, out_i, listed
