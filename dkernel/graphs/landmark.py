"""The landmark bipartite graph: every point joined to its few nearest landmarks.

Numeric layer: NumPy on in-memory arrays, no Dask, no I/O.

U-SPEC (Huang et al., TKDE 2020 [Huang2020]) and LSC-K (Cai & Chen 2015 [Cai2015]) represent N
points by a sparse N × p bipartite graph to p landmarks (k-means centres of a subsample) instead of
an N × N k-NN graph: each point is linked to its ``n_neighbors`` nearest landmarks only, so locality
is kept (a point never links across a gap wider than its landmarks' spacing) while the eigenproblem
shrinks to p × p (:mod:`dkernel.spectral.bipartite`). Memory O(N K) for the graph, O(p²) for the
small problem.

Weights are self-tuning on both sides (the local scaling of Zelnik-Manor & Perona 2005
[ZelnikManor2005]): point x and landmark j are joined by ``exp(-d²(x, l_j) / (σ_x σ_j))``, where
``σ_x`` is x's distance to its K-th nearest landmark and ``σ_j`` landmark j's distance to its K-th
nearest other landmark. On moons, circles, rings and 10-D blobs from 2·10⁴ to 10⁶ points this and
U-SPEC's one global width (the mean K-NN landmark distance) both gave ARI 1.000, but the global
width left the sparse blob of varied-density blobs in pieces (ARI 0.000 at 2·10⁴; 0.938 with local
scaling) and split anisotropic blobs (0.000 against 0.981); point-only scaling gave 0.906 on
anisotropic blobs at 2·10⁵ against 0.981.

The search is exact: distances to every landmark by one float32 GEMM per block of rows, the K
smallest picked, then their distances recomputed in float64 from coordinate differences (the
float32 screen picked the same landmarks for 99.99 % of the entries at 10⁶ points). A point's
links depend only on its own coordinates, never on its block.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from dkernel.errors import InvalidInputError
from dkernel.linalg.copies import RowCopies

#: Landmarks of the bipartite graph, and landmarks per point (U-SPEC's p and K).
DEFAULT_N_LANDMARKS = 1000
DEFAULT_LANDMARK_NEIGHBORS = 5
#: Subsample whose k-means centres are the landmarks: this many points per landmark.
SAMPLE_PER_LANDMARK = 10
#: A landmark k-means centre is kept only where it gathers this many sample points: a centre
#: of one point is an isolated point. Five far outliers among 2·10⁴ points held landmarks of
#: their own, which formed a weakly attached piece of the graph and took two of three clusters
#: of ``SpectralClustering`` (ARI 0.000; 1.000 without those landmarks, where every point links
#: to landmarks of the clusters). The synthetic families at 2·10⁴ and 2·10⁵ points moved by at
#: most 0.004 ARI.
MIN_LANDMARK_POINTS = 2
#: ... and only where its nearest other centre is at most this many times the median
#: nearest-centre distance: 1 % of uniform noise around three blobs of 2·10⁴ points gave
#: centres of two or three noise points each, far from everything, which still took one of
#: ``SpectralClustering``'s three clusters (ARI 0.571; 1.000 without them). No centre of the
#: synthetic families at 2·10⁴ and 2·10⁵ points is that isolated (the same labels), nor of
#: samson and statlog (jasper: SpectralClustering 0.661 -> 0.663, KDC 0.615 -> 0.616).
ISOLATED_LANDMARK_FACTOR = 10.0
#: Lloyd steps of the landmark k-means: the landmarks need to cover the data, not converge.
LANDMARK_KMEANS_ITER = 20
#: Rows per distance block: a (rows, p) float32 block, 16 MiB at p = 1000.
SEARCH_ROWS = 4096
#: A row's largest log link weight is raised to at least this: a point far from every
#: landmark (all of its weights below e^-700 would underflow to 0) keeps its shares, and adds
#: next to nothing to the landmark sums.
MIN_LOG_WEIGHT = -700.0


def default_landmark_count(n_samples: int) -> int:
    """U-SPEC's p = 1 000 landmarks, or every point of a smaller set."""
    return min(int(n_samples), DEFAULT_N_LANDMARKS)


def check_landmark_sizes(n_samples: int, n_landmarks: int, n_neighbors: int) -> None:
    """Refuse ``n_landmarks > n_samples`` and ``n_neighbors >= n_landmarks`` with the fix."""
    if n_landmarks > n_samples:
        raise InvalidInputError(
            f"n_landmarks ({n_landmarks}) must be <= the number of samples ({n_samples}); "
            "use fewer landmarks."
        )
    if n_neighbors >= n_landmarks:
        raise InvalidInputError(
            f"landmark_neighbors ({n_neighbors}) must be < n_landmarks ({n_landmarks}): each "
            "point links to that many of the landmarks; lower landmark_neighbors or use more "
            "landmarks."
        )


def kmeans_landmarks(sample: np.ndarray, n_landmarks: int, seed: int) -> np.ndarray:
    """At most ``n_landmarks`` k-means centres of ``sample`` (scikit-learn's Lloyd, random
    starts): those that gather at least ``MIN_LANDMARK_POINTS`` sample points and are not
    isolated from the others (``ISOLATED_LANDMARK_FACTOR``), none repeated; every distinct row
    when there are no more of them than ``n_landmarks``.

    Random starts rather than k-means++: with p = 1000 centres the D² seeding costs more than
    the few Lloyd steps the landmarks need, and spreads no better once those steps have run.
    """
    from sklearn.cluster import KMeans

    sample = np.asarray(sample, dtype=np.float64)
    distinct = distinct_rows(sample)
    if n_landmarks >= distinct.shape[0]:
        return distinct
    km = KMeans(
        n_landmarks,
        init="random",
        n_init=1,
        max_iter=LANDMARK_KMEANS_ITER,
        random_state=seed,
    ).fit(sample)
    centres = np.asarray(km.cluster_centers_, dtype=np.float64)
    held = np.bincount(km.labels_, minlength=n_landmarks)
    if np.any(held >= MIN_LANDMARK_POINTS):
        centres = centres[held >= MIN_LANDMARK_POINTS]
    return distinct_rows(_without_isolated(centres))


def _without_isolated(centres: np.ndarray) -> np.ndarray:
    """``centres`` less those whose nearest other centre is more than
    ``ISOLATED_LANDMARK_FACTOR`` times the median such distance away."""
    if centres.shape[0] <= 2:
        return centres
    _, sq = nearest_landmarks(centres, centres, 1, exclude_self=True)
    gap = np.sqrt(sq[:, 0])
    keep = gap <= ISOLATED_LANDMARK_FACTOR * np.median(gap)
    return centres[keep] if keep.sum() > 2 else centres


def distinct_rows(A: np.ndarray) -> np.ndarray:
    """The distinct rows of ``A`` in the order of their first occurrence (``A`` itself, not a
    copy of it, when no row repeats).

    Landmarks are distinct: integer-valued data (survey answers, 8-bit pixels) repeat rows, and
    a point whose K nearest landmarks were copies of one landmark would link to that point of
    the lattice alone, leaving the graph in as many pieces as there are distinct values (ARI
    0.002 for ``SpectralClustering`` on three rounded 4-D blobs of 2·10⁴ points, where the
    unrounded blobs gave 0.874).
    """
    copies = RowCopies.of(A)
    return A if copies is None else A[copies.first]


def nearest_landmarks(
    X: np.ndarray, landmarks: np.ndarray, n_neighbors: int, *, exclude_self: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """The ``n_neighbors`` nearest landmarks of every row of ``X``, nearest first.

    Parameters
    ----------
    X : ndarray (n, d)
    landmarks : ndarray (p, d)
    n_neighbors : int
    exclude_self : bool
        ``X`` is ``landmarks``: skip each row's own landmark.

    Returns
    -------
    indices : ndarray of int64 (n, n_neighbors)
    sq_distances : ndarray of float64 (n, n_neighbors)
        Squared distances, computed in float64 from the coordinate differences.
    """
    X = np.asarray(X, dtype=np.float64)
    L = np.asarray(landmarks, dtype=np.float64)
    k = int(n_neighbors)
    n, p = X.shape[0], L.shape[0]
    # centre on the landmarks' mean so float32 keeps the small distances of far-off data
    centre = L.mean(axis=0)
    L32 = (L - centre).astype(np.float32)
    L_sq = (L32.astype(np.float64) ** 2).sum(axis=1).astype(np.float32)
    indices = np.empty((n, k), dtype=np.int64)
    sq = np.empty((n, k), dtype=np.float64)
    finite = bool(np.isfinite(X).all() and np.isfinite(L).all())
    for start in range(0, n, SEARCH_ROWS):
        Q = X[start : start + SEARCH_ROWS]
        Q32 = (Q - centre).astype(np.float32)
        D = L_sq[None, :] - 2.0 * (Q32 @ L32.T)  # |q|² is the same along a row
        if exclude_self:
            rows = np.arange(start, start + Q.shape[0])
            D[np.arange(Q.shape[0]), rows] = np.inf
        if k < p:
            cand = _smallest_columns(D, k, by_argmin=finite)
        else:
            cand = np.broadcast_to(np.arange(p), (Q.shape[0], p)).copy()
        d2 = ((Q[:, None, :] - L[cand]) ** 2).sum(axis=2)
        order = np.argsort(d2, axis=1, kind="stable")
        indices[start : start + Q.shape[0]] = np.take_along_axis(cand, order, axis=1)
        sq[start : start + Q.shape[0]] = np.take_along_axis(d2, order, axis=1)
    return indices, sq


#: Up to this many neighbours :func:`nearest_landmarks` finds them by repeated ``argmin``
#: (one vectorised pass over a row per neighbour) instead of ``argpartition``, which took
#: 22 ns per distance, 80 % of the landmark search at K = 3 of p = 1 000.
ARGMIN_NEIGHBORS = 8


def _smallest_columns(D: np.ndarray, k: int, *, by_argmin: bool) -> np.ndarray:
    """Column indices (any order) of the ``k`` smallest entries of each row of ``D``, which
    is overwritten. ``by_argmin`` (D without NaN): ``k`` passes of ``argmin``, each minimum
    then set to infinity, for ``k`` up to :data:`ARGMIN_NEIGHBORS`; the same columns as
    ``argpartition`` but where distances tie at the k-th."""
    if not by_argmin or k > ARGMIN_NEIGHBORS:
        return np.argpartition(D, k - 1, axis=1)[:, :k]
    rows = np.arange(D.shape[0])
    cand = np.empty((D.shape[0], k), dtype=np.int64)
    for j in range(k):
        cand[:, j] = D.argmin(axis=1)
        D[rows, cand[:, j]] = np.inf
    return cand


def _positive_scales(scale: np.ndarray) -> np.ndarray:
    """Zero widths (duplicates) become the smallest positive width, or 1 if there is none."""
    positive = scale[scale > 0]
    floor = float(positive.min()) if positive.size else 1.0
    return np.where(scale > 0, scale, floor)


def landmark_scales(landmarks: np.ndarray, n_neighbors: int) -> np.ndarray:
    """Each landmark's width: its distance to its ``n_neighbors``-th nearest other landmark."""
    k = min(int(n_neighbors), landmarks.shape[0] - 1)
    _, sq = nearest_landmarks(landmarks, landmarks, k, exclude_self=True)
    return _positive_scales(np.sqrt(sq[:, -1]))


@dataclass
class LandmarkGraph:
    """Landmarks, their widths and K: the rows of the bipartite graph of any point."""

    landmarks: np.ndarray
    scales: np.ndarray
    n_neighbors: int

    @property
    def n_landmarks(self) -> int:
        return int(self.landmarks.shape[0])

    def log_links(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Landmark indices (n, K) and log link weights ``-d² / (σ_x σ_j)`` (n, K)."""
        indices, sq = nearest_landmarks(X, self.landmarks, self.n_neighbors)
        sigma_x = _positive_scales(np.sqrt(sq[:, -1]))
        return indices, -sq / (sigma_x[:, None] * self.scales[indices])

    def links(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Landmark indices (n, K) and local-scaling weights (n, K) of the rows of ``X``.

        Every row has a positive weight (see ``MIN_LOG_WEIGHT``)."""
        indices, log_weights = self.log_links(X)
        lift = np.maximum(0.0, MIN_LOG_WEIGHT - log_weights.max(axis=1, keepdims=True))
        return indices, np.exp(log_weights + lift)


def landmark_graph(landmarks: np.ndarray, n_neighbors: int) -> LandmarkGraph:
    """The graph of given landmarks (p, d): their self-tuning widths and K = ``n_neighbors``."""
    landmarks = np.asarray(landmarks, dtype=np.float64)
    if int(n_neighbors) >= landmarks.shape[0]:
        raise InvalidInputError(
            f"The landmark graph links each point to its {int(n_neighbors)} nearest landmarks, "
            f"but only {landmarks.shape[0]} distinct rows could hold landmarks (isolated points "
            "hold none); lower landmark_neighbors, or cluster the distinct rows "
            "(np.unique(X, axis=0)) directly."
        )
    return LandmarkGraph(landmarks, landmark_scales(landmarks, n_neighbors), int(n_neighbors))


def fit_landmark_graph(
    sample: np.ndarray, n_landmarks: int, n_neighbors: int, seed: int
) -> LandmarkGraph:
    """Landmarks by k-means of ``sample`` and their self-tuning widths."""
    return landmark_graph(kmeans_landmarks(sample, n_landmarks, seed), n_neighbors)


@dataclass
class LandmarkFeatureMap:
    """The explicit features of the landmark graph's point affinity ``W_X = B D_Y⁻¹ Bᵀ``.

    ``γ(x) = b(x) / √D_Y``, with ``b(x)`` a point's K link weights (:meth:`LandmarkGraph.links`) and
    ``D_Y = Bᵀ 1`` the landmarks' degrees over the training data, so
    ``κ(x, y) = γ(x)·γ(y) = Σ_j b_j(x) b_j(y) / d_j``: two points are similar when they share
    landmarks, each shared landmark counting in proportion to how few points it gathers. This is the
    point-side graph of the transfer cut (Li et al., CVPR 2012 [Li2012]) that U-SPEC clusters; it is
    non-negative, positive semi-definite, of rank at most p, and its degrees ``κ(x, X) 1`` are the
    row sums of ``B``. A landmark no training point links to has no feature.
    """

    graph: LandmarkGraph
    degrees: np.ndarray

    @property
    def n_features(self) -> int:
        return self.graph.n_landmarks

    def sparse_features(self, X: Any) -> sp.csr_matrix:
        """``γ(X)`` as an (n, p) CSR matrix with K entries per row."""
        X = np.asarray(X, dtype=np.float64)
        indices, weights = self.graph.links(X)
        d = np.asarray(self.degrees, dtype=np.float64)
        inv_sqrt = np.zeros_like(d)
        np.divide(1.0, np.sqrt(d), out=inv_sqrt, where=d > 0)
        values = weights * inv_sqrt[indices]
        n, k = indices.shape
        indptr = np.arange(0, n * k + 1, k)
        return sp.csr_matrix((values.ravel(), indices.ravel(), indptr), shape=(n, self.n_features))

    def transform(self, X: Any) -> np.ndarray:
        """``γ(X)`` as a dense (n, p) array."""
        return self.sparse_features(X).toarray()


def landmark_kernel_block(
    A: Any, B: Any, *, features: LandmarkFeatureMap, dtype: Any = np.float64
) -> np.ndarray:
    """``κ(A, B) = γ(A) γ(B)ᵀ`` of a fitted :class:`LandmarkFeatureMap`, dense."""
    GA = features.sparse_features(A)
    GB = GA if B is A else features.sparse_features(B)
    return np.asarray((GA @ GB.T).toarray(), dtype=dtype)
