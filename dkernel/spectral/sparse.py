"""Exact normalized spectral embedding on a sparse self-tuning k-NN graph, with out-of-sample
extension.

Every training point is joined to its ``graph_neighbors`` nearest neighbours with the local scaling
weight ``exp(-d² / (σ_i σ_j))`` (σ = distance to the ``n_neighbors``-th neighbour, Zelnik-Manor &
Perona 2005 [ZelnikManor2005]); the graph is symmetrised and the leading eigenvectors of
``D^{-1/2} W D^{-1/2}`` are found by a sparse Lanczos solver (NJW embedding, [Ng2002]). Weights
beyond a few σ are negligible, so cutting the kernel at ``graph_neighbors`` ≈ 3 k loses almost
nothing and keeps memory at O(n · graph_neighbors). Each point's own weight, 1 in the kernel, is
at most the weight of its other edges (:func:`_bounded_self_loops`): a far outlier is then no
component of its own that takes one of the k clusters.

A new point x gets the Nyström / Bengio et al. (2004) [Bengio2004] extension restricted to its
neighbours: ``z(x) = Σ_j w_j u_j / (λ √(d_x d_j))`` with ``w_j`` its local-scaling weights to its
nearest training points and ``d_x = Σ_j w_j``. A training point queried again finds itself (with its
own weight in the graph) among the same neighbours, so ``transform`` on training points reproduces the embedding up to the
edges that the symmetrisation added.

Rows with missing entries (NaN) are compared by the expected squared distance
``E‖x − y‖² = ‖x̃ − ỹ‖² + r_x + r_y`` (:mod:`dkernel.kernels.missing`, found by the tree of
``dkernel.graphs.knn.MissingValueIndex``, never n × n): the graph and the widths are those of
these distances, and a new point with NaN is compared with the training rows' model. A
training row with NaN queried again is a new draw of its missing entries, so it does not find
itself at distance 0.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any, NamedTuple

import dask.array as da
import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components
from scipy.sparse.linalg import ArpackError, ArpackNoConvergence, eigsh, lobpcg
from sklearn.neighbors import NearestNeighbors

from dkernel._random import derive_rng
from dkernel._validation import as_numpy
from dkernel.errors import InvalidInputError, NumericalWarning, warn_caller
from dkernel.graphs.knn import (
    MissingValueIndex,
    build_index,
    knn_search,
    rows_of_points,
    training_neighbors,
)
from dkernel.kernels.adaptive import (
    fill_zero_scales,
    kth_distinct_distance,
    local_scaling_weights,
    tie_inclusive_neighbors,
)
from dkernel.kernels.widths import DEFAULT_LOCAL_SCALING_NEIGHBORS
from dkernel.linalg.components import single_linkage_links
from dkernel.linalg.eigen import LANCZOS_MAX_RESTARTS, deflated, dense_eigh, fix_signs
from dkernel.rows import DistinctRows

_DENSE_EIGEN_MAX = 2500
#: Restart probability of the 'green' coordinates (0.05-0.3 gave the same mean ARI within 0.003
#: in benchmarks/bench_defaults.py; 0.15 is the personalized-PageRank convention).
GREEN_ALPHA = 0.15
_SPARE_VECTORS = 4
#: Neighbours kept per point by SpectralClustering's exact path. With
#: :data:`ONE_SIDED_WEIGHT`, 8 gave the best mean ARI on the 23 sets of
#: ``benchmarks/bench_defaults.py`` (0.822; 7: 0.804, 10: 0.809) and kept two moons with three
#: noise features above 0.95 at 2 000 points (0.982, 0.955, 0.970 on three draws).
GRAPH_NEIGHBORS = 8
#: Weight factor of an edge only one end point lists (see ``fit_sparse_embedding``). The
#: symmetrised k-NN graph (1.0) joined the two moons through the three noise features
#: (ARI 0.78 at 2 000 points) and split the spiral, flame and path-based sets; the mutual
#: graph alone (0) cut off small groups (wine 0.44); 0.05 kept both (mean ARI 0.822 against
#: 0.741 on the 23 sets, 0.1: 0.812, 0.15: 0.789).
ONE_SIDED_WEIGHT = 0.05
#: Largest Davis-Kahan bound ``|M v - λ v| / (λ_k - λ_{k+1})`` on the sine of the angle between
#: the kept vectors and the true leading eigenspace accepted before warning. At 1 the bound
#: says nothing: the kept vectors may mix in the next eigenvector (3 rings at 10^5 points:
#: bound 28, ARI 0.68); 2·10^4-point moons and rings gave 0.3 and 0.8 with ARI 1.
SUBSPACE_ANGLE_TOL = 1.0


def default_graph_neighbors(n_neighbors: int) -> int:
    """Neighbours kept per point: 3 k (at ≥ 3 σ the weight is below e⁻⁹), at least 15."""
    return max(15, 3 * int(n_neighbors))


@dataclass
class SparseSpectralModel:
    """What out-of-sample extension needs: the index of the distinct training points, their
    multiplicities, σ, degrees, neighbour radii and eigenvector rows."""

    index: NearestNeighbors | MissingValueIndex
    sigma: np.ndarray
    degrees: np.ndarray
    vectors: np.ndarray
    eigenvalues: np.ndarray
    spectrum: np.ndarray
    n_neighbors: int
    graph_neighbors: int
    coordinates: str = "njw"
    counts: np.ndarray | None = None
    radius: np.ndarray | None = None
    one_sided_weight: float = 1.0
    self_loops: np.ndarray | None = None

    def coordinates_of(self, U: np.ndarray, degrees: np.ndarray) -> np.ndarray:
        """Clustering coordinates from eigenvector rows ``U`` of points with ``degrees``.

        'njw': ``U`` itself (row-normalised later). 'green': the random-walk eigenvectors
        ``U / sqrt(d)`` weighted by ``1 / sqrt(1 + β - λ)``, β = α / (1 - α) with the restart
        probability α = :data:`GREEN_ALPHA` — the truncated Green's-function (personalized
        PageRank) embedding, whose inner products approximate the PageRank kernel.
        """
        if self.coordinates == "njw":
            return U
        beta = GREEN_ALPHA / (1.0 - GREEN_ALPHA)
        walk = _divide_or_zero(U, np.sqrt(degrees)[:, None])
        return walk / np.sqrt(1.0 + beta - self.eigenvalues)[None, :]

    def _embed_block(self, block: np.ndarray) -> np.ndarray:
        if not isinstance(self.index, MissingValueIndex) and np.isnan(block).any():
            raise InvalidInputError(
                "New rows hold NaN, but the graph was built on complete rows, so it has no "
                "missing-value model to take the expected distances with; impute them, or fit on "
                "data with NaN."
            )
        g = self.graph_neighbors
        if isinstance(self.index, MissingValueIndex):
            dist, ind = knn_search(self.index, block, g)
            listed = None
        else:  # the training lists' rule: ties with the last neighbour are kept
            dist, ind, listed = tie_inclusive_neighbors(
                lambda rows, count: knn_search(self.index, block[rows], count),
                block.shape[0],
                g,
                self.vectors.shape[0],
            )
        sigma_x = kth_distinct_distance(dist[:, :g], self.n_neighbors)
        # a copy of a training point takes its scale, as in training
        sigma_x = np.where(sigma_x > 0, sigma_x, self.sigma[ind[:, 0]])
        w = local_scaling_weights(dist, sigma_x, self.sigma[ind])
        if self.radius is not None and self.one_sided_weight != 1.0:
            # the training graph's rule: x's edge to a point that would not list x among its
            # own nearest is one-sided
            w = np.where(dist <= self.radius[ind], w, self.one_sided_weight * w)
        if self.self_loops is not None:
            # a copy of a training point is joined to it as the point is to itself
            w = np.where(dist == 0.0, self.self_loops[ind], w)
        if listed is not None:
            w = np.where(listed, w, 0.0)
        if self.counts is not None:
            w = w * self.counts[ind]
        d_x = w.sum(axis=1)
        scaled = _divide_or_zero(w, np.sqrt(self.degrees[ind]))
        Z = np.einsum("ng,ngc->nc", scaled, self.vectors[ind])
        U = _divide_or_zero(Z, np.sqrt(d_x)[:, None]) / self.eigenvalues[None, :]
        return self.coordinates_of(U, d_x)

    def transform(self, X: Any) -> Any:
        """Embedding of new points (lazy for Dask input)."""
        if isinstance(X, da.Array):
            X = X.rechunk({1: -1})
            k = self.vectors.shape[1]
            return X.map_blocks(
                self._embed_block,
                chunks=(X.chunks[0], (k,)),
                dtype=np.float64,
                meta=np.empty((0, 0), dtype=np.float64),
            )
        return self._embed_block(np.asarray(X, dtype=np.float64))


def _divide_or_zero(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a / b`` (broadcast), and 0 where ``b`` is 0: a point no kernel weight reaches (a far
    outlier, degree 0) sits at the origin of the embedding, as it does in its eigenvectors."""
    out = np.zeros(np.broadcast_shapes(a.shape, b.shape))
    return np.divide(a, b, out=out, where=b > 0)


def _affinity(
    dist: np.ndarray,
    ind: np.ndarray,
    n_neighbors: int,
    *,
    one_sided_weight: float,
    listed: np.ndarray | None = None,
    list_size: int | None = None,
) -> tuple[sp.csr_matrix, np.ndarray]:
    """The self-tuning graph of neighbour lists (each row's own point first): an edge both
    end points list keeps its weight, an edge only one lists is scaled by
    ``one_sided_weight`` (both ends give an edge the same self-tuning weight). ``listed``
    marks the entries of lists extended through ties beyond their first ``list_size``
    (:func:`dkernel.kernels.adaptive.tie_inclusive_neighbors`); the scales are those of the
    first ``list_size`` columns (default: all)."""
    n = dist.shape[0]
    width = dist.shape[1] if list_size is None else int(list_size)
    sigma = fill_zero_scales(kth_distinct_distance(dist[:, :width], n_neighbors), width)
    w = local_scaling_weights(dist, sigma, sigma[ind])
    if listed is not None:
        w = np.where(listed, w, 0.0)
    rows = np.repeat(np.arange(n), ind.shape[1])
    W = sp.csr_matrix((w.ravel(), (rows, ind.ravel())), shape=(n, n))
    W.eliminate_zeros()
    either = W.maximum(W.T).tocsr()
    if one_sided_weight == 1.0:
        return either, sigma
    both = W.minimum(W.T).tocsr()
    return (both + one_sided_weight * (either - both)).tocsr(), sigma


#: Least weight, relative to the lighter side's volume, of an edge that joins two components
#: (:func:`join_components`): the eigenvalue such an edge moves off 1 is about this, which a
#: dense eigensolver (rounding ~1e-15) tells apart from the exact 1 of the pieces wanted.
JOIN_WEIGHT_FLOOR = 1e-6


def join_components(
    W: sp.csr_matrix,
    points: np.ndarray,
    index: NearestNeighbors | MissingValueIndex,
    sigma: np.ndarray,
    mass: np.ndarray,
    pieces: int,
) -> sp.csr_matrix:
    """W with its connected components joined, by single linkage on their closest points
    (:func:`dkernel.linalg.components.single_linkage_links`), into ``pieces``; unchanged when
    it has at most that many. A point with no edge but its self-loop and no copies (a far
    outlier) is not counted: its self-loop is bounded to 0 and it stays out of the
    eigenvectors.

    Each joining edge weighs its self-tuning weight ``exp(-d² / (σ_i σ_j))``, at least
    :data:`JOIN_WEIGHT_FLOOR` times the lighter component's volume (its degrees times its
    multiplicities), at most 1: where the kernel's weight underflows, the pieces joined
    still separate from the ones wanted in the spectrum.
    """
    off_diagonal = (W - sp.diags(W.diagonal())).tocsr()
    off_diagonal.eliminate_zeros()
    # a point with no edge but its self-loop and no copies is left out (its self-loop is
    # bounded to 0 and it stays out of the eigenvectors, as without joining)
    linked = np.flatnonzero((np.diff(off_diagonal.indptr) > 0) | (mass != 1.0))
    _, labels = connected_components(W, directed=False)
    _, labels = np.unique(labels[linked], return_inverse=True)
    labels = labels.ravel()
    count = int(labels.max()) + 1 if linked.size else 0
    if count <= pieces:
        return W
    if isinstance(index, MissingValueIndex):
        features, extra = index.fill(points[linked])
    else:
        features, extra = points[linked], None
    a, b, d2 = single_linkage_links(features, labels, pieces, extra)
    volume = np.bincount(labels, weights=(W @ mass)[linked] * mass[linked], minlength=count)
    floor = JOIN_WEIGHT_FLOOR * np.minimum(volume[labels[a]], volume[labels[b]])
    i, j = linked[a], linked[b]
    w = np.minimum(np.maximum(np.exp(-d2 / (sigma[i] * sigma[j])), floor), 1.0)
    n = W.shape[0]
    joins = sp.csr_matrix((np.r_[w, w], (np.r_[i, j], np.r_[j, i])), shape=(n, n))
    return (W + joins).tocsr()


def _bounded_self_loops(W: sp.csr_matrix, mass: np.ndarray) -> tuple[sp.csr_matrix, np.ndarray]:
    """W with every row's self-loop bounded by the weight of its other edges.

    A point far from all others keeps a self-loop of weight 1 while its edges weigh next to
    nothing, so it is a component of its own and takes one of the leading eigenvectors: a
    cluster of one point (one outlier in a table of 1 000 rows cost ``SpectralClustering`` one
    of its k clusters). Bounded by the rest of its degree, its share of its own degree is at
    most 1/2. In the graph of all rows a row's copies are its neighbours with weight 1, so only
    points without copies can be bounded: the distinct point's weight to itself becomes
    ``min(1, Σ_j≠i w_ij c_j)`` where ``c_i = 1`` (``c`` the multiplicities, ``mass``).
    Returns the graph and the self weights (which a copy of the point met later takes).
    """
    diagonal = W.diagonal()
    off = W @ mass - diagonal * mass
    loops = np.where(mass == 1.0, np.minimum(diagonal, off), diagonal)
    return (W + sp.diags(loops - diagonal)).tocsr(), loops


#: The sparse eigen-solver's warning: the fix for SpectralClustering's exact graph.
BIPARTITE_FIX = "Use approximation='bipartite' (the default above 5 000 points) for large sets."


class LeadingEigenpairs(NamedTuple):
    """The leading eigenpairs of a symmetric matrix, descending
    (:func:`sparse_leading_eigenpairs`)."""

    values: np.ndarray
    """(m,), m >= k: the k wanted and any more found (every copy of a degenerate 1)."""
    vectors: np.ndarray
    """(n, m), the eigenvectors of ``values``."""
    spectrum: np.ndarray
    """``values`` and the next eigenvalues known: a dense solve's (up to 51 in all), or an
    estimate of the next one (:func:`_next_eigenvalue`)."""


def sparse_leading_eigenpairs(
    M: sp.csr_matrix,
    k: int,
    seed: int | None,
    *,
    perron: np.ndarray | None = None,
    fix: str = BIPARTITE_FIX,
) -> LeadingEigenpairs:
    """At least the ``k`` leading eigenpairs of the symmetric sparse ``M``, descending, with a
    ``NumericalWarning`` naming ``fix`` when they are not separated from the next.

    ``perron``: a positive vector ``p`` with ``M p = p`` (``√d`` for ``D^{-1/2} W D^{-1/2}``).
    The eigenvalue 1 then has one eigenvector per connected component of the graph, ``p`` on
    that component; when there are at least ``k`` components, those are the pairs, exact,
    and no solver runs (the eigenvalues of well-separated groups crowd at 1, where Lanczos is
    at its slowest: two moons of 5·10⁴ points took 7 500 matrix products for 6 pairs).

    Lanczos is asked for the ``k`` pairs alone and the next eigenvalue is estimated apart: a
    pair more converges only as fast as its own gap, small in the bulk of the spectrum
    (five overlapping blobs of 2·10⁵ points: 5 pairs 6.3 s, 9 pairs 39.9 s, the sixth
    eigenvalue's estimate 0.9 s). When that fails, ``k + 4`` pairs, then the block solver.
    Lanczos stops at the relative residual ``LANCZOS_TOL``; only when the pairs then fail the
    gap check are they solved again to working precision.
    """
    n = M.shape[0]
    if n <= _DENSE_EIGEN_MAX:
        # only the leading pairs (and a spectrum of 51 for n_clusters="auto"): a subset solver is
        # three times faster than all n at n = 2 000
        block = min(n - 1, k + _SPARE_VECTORS)
        values, vectors = dense_eigh(M.toarray(), max(block, min(n, 51)), clip=False)
        return LeadingEigenpairs(values[:block], vectors[:, :block], values)
    exact = _component_pairs(M, perron, seed) if perron is not None else None
    if exact is not None and exact.shape[1] > k:
        warn_caller(
            f"The {n}-point graph falls into {exact.shape[1]} separate components, more than "
            f"the {k} leading eigenvectors wanted: all of them have the eigenvalue 1, so "
            "which components share a cluster is arbitrary. Ask for at least as many "
            "clusters as components, or join them with more graph neighbours.",
            NumericalWarning,
        )
        ones = np.ones(exact.shape[1])
        return LeadingEigenpairs(ones, exact, ones)
    if exact is not None and exact.shape[1] == k:
        # exact pairs: no residual to bound, and the rest of the spectrum is below 1
        ones = np.ones(k)
        return LeadingEigenpairs(ones, exact, ones)
    components = exact.shape[1] if exact is not None else None
    for tol in (LANCZOS_TOL, 0.0):
        values, vectors, following, by_lanczos = _solved_pairs(M, k, seed, components, tol)
        residual = np.linalg.norm(M @ vectors - vectors * values, axis=0)
        if not following.size and k < n:
            needed = residual.max() / SUBSPACE_ANGLE_TOL
            following = np.array([_next_eigenvalue(M, values, vectors, seed, needed)])
        gap = values[-1] - following[0] if following.size else np.inf
        bound = residual.max() / gap if gap > 0 else np.inf
        if bound <= SUBSPACE_ANGLE_TOL or not by_lanczos:
            break
    if bound > SUBSPACE_ANGLE_TOL:
        warn_caller(
            f"The sparse eigensolver did not separate the {k} leading eigenvectors of the "
            f"{n}-point graph from the next (residual {residual.max():.1e}, eigengap "
            f"{gap:.1e}): the embedding may mix them and split or merge clusters. {fix}",
            NumericalWarning,
        )
    return LeadingEigenpairs(values, vectors, np.concatenate([values, following]))


#: Relative residual ``|M v - λ v| / |λ|`` at which Lanczos stops (ARPACK's ``tol``) before the
#: gap check; when the check fails the pairs are solved again to working precision (``tol`` 0).
#: Clustering needs the leading eigenspace, not its last digits: five blobs of 2·10⁵ points, with
#: a quarter of their entries missing, whose leading eigenvalues crowd within 10⁻³ of 1, took
#: 16.5 s at working precision and 8.3 s at 1e-8 for the same labels (complete: 7.0 and 4.8 s).
LANCZOS_TOL = 1e-8


def _solved_pairs(
    M: sp.csr_matrix, k: int, seed: int | None, components: int | None, tol: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray, bool]:
    """The ``k`` leading pairs, descending, any further eigenvalues the solver found, and
    whether Lanczos found them (to ``tol``): Lanczos for the k pairs alone, then with spare
    vectors, then the block solver (LOBPCG, its own tolerance)."""
    n = M.shape[0]
    found = _lanczos_pairs(M, min(n - 1, k), seed, components, K_PAIRS_RESTARTS, tol)
    block = min(n - 1, k + _SPARE_VECTORS)
    if found is None and block > k:
        # a k-th eigenvalue crowded by the next converges faster with spare vectors (the
        # hpc counts: 4 pairs in 600 restarts, 8 in 1.3 s)
        found = _lanczos_pairs(M, block, seed, components, None, tol)
    by_lanczos = found is not None
    if found is None:
        found = _block_pairs(M, block, seed)
    order = np.argsort(-found[0], kind="stable")
    values, vectors = found[0][order], found[1][:, order]
    return values[:k], vectors[:, :k], values[k:], by_lanczos


#: Relative accuracy of the next eigenvalue's first estimate (ARPACK's ``tol``): Lanczos reaches
#: it in a few dozen products where working precision of an eigenvalue inside the bulk took
#: 195 s (the blobs above, whose estimate was 2e-4 low). When that estimate cannot tell whether
#: the gap is wide enough, it is refined from its own vector at the accuracy that can, then at
#: ``tol`` 0, each for at most ``NEXT_EIGENVALUE_RESTARTS`` restarts (about 2 000 matrix
#: products, fewer than the 4 spare pairs cost above), enough to see an exactly repeated k-th
#: eigenvalue (a cycle's).
NEXT_EIGENVALUE_TOL = 1e-3
NEXT_EIGENVALUE_RESTARTS = 100


def _next_eigenvalue(
    M: sp.csr_matrix,
    values: np.ndarray,
    vectors: np.ndarray,
    seed: int | None,
    needed_gap: float,
) -> float:
    """The largest eigenvalue of ``M`` after the pairs found, accurate enough to tell whether
    it is more than ``needed_gap`` below the k-th (``values[-1]``).

    A Ritz value ``θ`` of ``M`` with the pairs deflated (:func:`_next_ritz_pair`) is below the
    eigenvalue, and with residual ``ρ`` an eigenvalue lies in ``[θ, θ + ρ]``: a gap wider than
    ``needed_gap`` even at ``θ + ρ``, or narrower already at ``θ``, is decided. Otherwise the
    pair is refined from its vector to the accuracy that decides it (a quarter of the gap over
    ``needed_gap``), then, if still undecided, to working precision. On the five overlapping
    blobs of 2·10⁵ points with a quarter of their entries missing, whose leading eigenvalues
    crowd within 10⁻³ of 1, the gap of 7·10⁻⁵ against the pairs' residuals of 3·10⁻¹⁵ took
    21 s at working precision; the decision needs far less."""
    top = values[-1]
    theta, vector, rho = _next_ritz_pair(M, values, vectors, seed, NEXT_EIGENVALUE_TOL)
    deciding = max(0.0, (top - theta - needed_gap) / (4.0 * abs(theta)))
    for tol in (deciding, 0.0):
        narrow, wide = top - theta <= needed_gap, top - (theta + rho) > needed_gap
        if narrow or wide or vector is None:
            break
        found = _next_ritz_pair(
            M, values, vectors, seed, tol, NEXT_EIGENVALUE_RESTARTS, start=vector
        )
        if found[0] >= theta:  # both are below the eigenvalue: the larger is nearer
            theta, vector, rho = found
    return theta


def _next_ritz_pair(
    M: sp.csr_matrix,
    values: np.ndarray,
    vectors: np.ndarray,
    seed: int | None,
    tol: float,
    restarts: int | None = None,
    *,
    start: np.ndarray | None = None,
) -> tuple[float, np.ndarray | None, float]:
    """The largest Ritz pair of ``M`` with the pairs found deflated, ``M − V Λ Vᵀ`` (whose
    eigenvalue for ``V``'s columns is 0), to ARPACK's relative ``tol`` (0: working precision) in
    at most ``restarts`` (``LANCZOS_MAX_RESTARTS`` by default), from ``start`` (a seeded random
    vector by default): ``(θ, u, ‖M' u − θ u‖)``. ARPACK's best when it does not converge;
    ``(-inf, None, inf)`` when it has none."""
    operator = deflated(M, values, vectors)
    if start is None:
        start = derive_rng(seed, "sparse-spectral-next").standard_normal(M.shape[0])
    try:
        found, U = eigsh(
            operator,
            k=1,
            which="LA",
            v0=start,
            ncv=min(M.shape[0], 20),
            tol=tol,
            maxiter=restarts or LANCZOS_MAX_RESTARTS,
        )
    except ArpackNoConvergence as stopped:
        found, U = stopped.eigenvalues, stopped.eigenvectors
    except ArpackError:
        found, U = np.empty(0), None
    if not found.size:
        return -np.inf, None, np.inf
    best = int(np.argmax(found))
    theta, u = float(found[best]), U[:, best]
    return theta, u, float(np.linalg.norm(operator @ u - theta * u))


def _component_pairs(M: sp.csr_matrix, perron: np.ndarray, seed: int | None) -> np.ndarray:
    """Orthonormal eigenvectors of the eigenvalue 1: ``perron`` on each connected component.

    With more components than one, the eigenspace has no preferred basis; the component
    indicators would give the rows of every component beyond the first k a zero embedding,
    so a seeded rotation of them is returned, as a solver's random start would give.
    """
    count, component = connected_components(M, directed=False)
    n = M.shape[0]
    E = np.zeros((n, count))
    E[np.arange(n), component] = perron
    norms = np.linalg.norm(E, axis=0)
    # a point of degree 0 (a far outlier, its self-loop bounded away) is a component of its
    # own whose row of M is 0: eigenvalue 0, not 1
    E = E[:, norms > 0] / norms[norms > 0]
    count = E.shape[1]
    if count == 1:
        return E
    rotation = derive_rng(seed, "sparse-spectral-components").standard_normal((count, count))
    return E @ np.linalg.qr(rotation)[0]


#: Restarts allowed to Lanczos for the k pairs alone before k + 4 are asked: the k pairs took
#: 11 to 57 restarts on the ten 3 000-row sets of ``bench_realdata.py`` (seeds 0, 1) and 17 on
#: the blobs above; the hpc counts, whose eigenvalues crowd at 1, 600 (then the spare pairs
#: converge faster).
K_PAIRS_RESTARTS = 100
#: Lanczos basis size of the sparse solver: 40 vectors (ARPACK's default is 2 k + 1, at least
#: 20) halved the matrix products for two moons of 5·10⁴ points (7 552 → 3 805) and saved a
#: fifth on four blobs of 10⁵ (642 → 507).
LANCZOS_BASIS = 40


def _lanczos_pairs(
    M: sp.csr_matrix,
    block: int,
    seed: int | None,
    components: int | None = None,
    restarts: int | None = None,
    tol: float = 0.0,
) -> tuple | None:
    """The ``block`` leading pairs by implicitly restarted Lanczos (ARPACK) to the relative
    residual ``tol`` (0: working precision), or None when it does not converge or misses a
    copy of the eigenvalue 1.

    Lanczos is about twenty times faster than the block solver here (5 000 points, 55 pairs:
    0.5 s against 12 s, the same eigenvalues to 1e-11), but a single start vector can miss
    copies of a degenerate eigenvalue, and eigenvalues crowded at 1 can keep it restarting
    (at most ``restarts`` times, ``LANCZOS_MAX_RESTARTS`` by default). The eigenvalue 1 has
    one copy per connected component of the graph (``components``, counted here unless
    given), so that count is checked; a miss falls back to the block solver.
    """
    v0 = derive_rng(seed, "sparse-spectral-lanczos").standard_normal(M.shape[0])
    basis = min(M.shape[0], max(2 * block + 1, LANCZOS_BASIS))
    try:
        values, vectors = eigsh(
            M,
            k=block,
            which="LA",
            v0=v0,
            ncv=basis,
            tol=tol,
            maxiter=restarts or LANCZOS_MAX_RESTARTS,
        )
    except (ArpackNoConvergence, ArpackError):
        return None
    if components is None:
        components = connected_components(M, directed=False)[0]
    if np.count_nonzero(values > 1.0 - 1e-8) < min(components, block):
        return None
    return values, vectors


def _block_pairs(M: sp.csr_matrix, block: int, seed: int | None) -> tuple:
    # Perfectly separated groups give a degenerate eigenvalue 1; a block solver (LOBPCG with a
    # few spare vectors) finds the whole eigenspace.
    X0 = derive_rng(seed, "sparse-spectral-start").standard_normal((M.shape[0], block))
    with warnings.catch_warnings():
        # LOBPCG's own warning fires whenever it stops short of tol=1e-6; whether the
        # vectors are good enough to cluster is checked by the caller, on the kept ones
        warnings.simplefilter("ignore", UserWarning)
        return lobpcg(M, X0, tol=1e-6, maxiter=300, largest=True)


def fit_sparse_embedding(
    X: Any,
    n_components: int,
    *,
    n_neighbors: int = DEFAULT_LOCAL_SCALING_NEIGHBORS,
    graph_neighbors: int | None = None,
    seed: int | None = 0,
    coordinates: str = "njw",
    one_sided_weight: float = 1.0,
    distinct: DistinctRows | None = None,
    neighbors_name: str = "n_neighbors",
    max_pieces: int | None = None,
) -> tuple[Any, SparseSpectralModel]:
    """NJW embedding of the sparse self-tuning k-NN graph of X.

    Parameters
    ----------
    X : ndarray or dask array (n, p)
    n_components : int
    n_neighbors : int
        Rank of the neighbour whose distance is each point's scale σ.
    graph_neighbors : int, optional
        Neighbours kept per point (:func:`default_graph_neighbors` by default).
    seed : int, optional
        Start vectors of the block eigensolver (results are deterministic for a seed).
    coordinates : {'njw', 'green'}
        What the embedding holds (:meth:`SparseSpectralModel.coordinates_of`).
    one_sided_weight : float
        Weight factor, in (0, 1], of an edge only one of its end points lists among its
        ``graph_neighbors`` nearest (1: the symmetrised k-NN graph). Below 1 the graph leans
        towards the mutual k-NN graph, whose edges rarely cross between clusters through
        noise dimensions or hubs; new points follow the same rule.
    distinct : DistinctRows, optional
        X's distinct rows and their copies, counted beforehand
        (``dkernel.rows.few_distinct_rows``, which never holds X whole): the graph is
        built on them, and each row of X (lazily for Dask input) takes its own point's
        coordinates, found by a nearest-neighbour search at distance 0.
    neighbors_name : str
        The caller's name for ``n_neighbors`` in the error when X has too few distinct rows
        (``SpectralClustering``: ``scale_neighbors``).
    max_pieces : int, optional
        The clusters wanted: a graph of more connected components is joined by single linkage
        (:func:`join_components`) into this many, so that which components share a cluster
        is decided by their distance, not by the eigensolver's arbitrary basis.

    Returns
    -------
    embedding : ndarray or dask array (n, n_components)
        'njw': rows of ``D^{-1/2} W D^{-1/2}``'s leading eigenvectors (not yet
        row-normalised); 'green': the Green's-function coordinates.
    model : SparseSpectralModel

    Notes
    -----
    X may hold NaN (missing entries): neighbours and weights then come from the expected squared
    distances of ``dkernel.graphs.knn.MissingValueIndex``.
    Repeated rows (integer-valued tables) are one node of the graph with their multiplicity
    as its mass, so neighbour lists hold distinct points: the graph is that of all rows, where
    copies are joined with weight 1, restricted to vectors equal on copies (the leading
    eigenvectors are). Cost: the k-NN search (a tree in low dimension, O(n² p) brute force in
    high dimension, chunked), O(n g) memory for the graph, and Lanczos iterations of O(n g)
    each.
    """
    n = int(X.shape[0])
    if distinct is None:
        # the index needs every training point in memory anyway, so the training points' own
        # neighbours are searched there too (one read of a Dask input, no second pass)
        X_train = as_numpy(X, np.float64)
        points, inverse, counts = np.unique(
            X_train, axis=0, return_inverse=True, return_counts=True
        )
        inverse = inverse.ravel()
    else:
        points, counts, inverse = distinct.points, distinct.counts, None
    m = points.shape[0]
    if m < 2:
        raise InvalidInputError(
            "all rows identical: there is nothing to cluster; remove the duplicates."
        )
    g = int(graph_neighbors or default_graph_neighbors(n_neighbors))
    if n_neighbors > min(g, m - 1) and g >= n_neighbors:
        # fewer other distinct points than the width's rank (a table of a few values, many
        # copies): each point's width is its distance to the farthest, as graph_neighbors is
        # clamped to them too
        warn_caller(
            f"X has only {m} distinct rows (copies of a row are one point of the graph), so "
            f"{neighbors_name}={n_neighbors} is more than the {m - 1} other points: each "
            f"point's width is its distance to the farthest of them ({neighbors_name}="
            f"{m - 1}).",
            NumericalWarning,
        )
        n_neighbors = m - 1
    g = min(g, m - 1)
    if n_neighbors > g:
        raise InvalidInputError(
            f"{neighbors_name} ({n_neighbors}) must be <= the neighbours kept per point ({g}); "
            f"raise graph_neighbors or lower {neighbors_name}."
        )
    # rows with NaN: the expected squared distances (dkernel.graphs.knn.MissingValueIndex),
    # each point first in its own list at distance 0
    index = build_index(points)
    if isinstance(index, MissingValueIndex):  # expected distances do not tie
        dist, ind = training_neighbors(index, points, g + 1)
        listed = None
    else:
        dist, ind, listed = tie_inclusive_neighbors(
            lambda rows, count: training_neighbors(index, points[rows], count), m, g + 1, m
        )
    W, sigma = _affinity(
        dist, ind, n_neighbors, one_sided_weight=one_sided_weight, listed=listed, list_size=g + 1
    )
    mass = counts.astype(np.float64)
    if max_pieces is not None:
        W = join_components(W, points, index, sigma, mass, int(max_pieces))
    W, loops = _bounded_self_loops(W, mass)
    degrees = W @ mass
    # D^{-1/2} W D^{-1/2} of all rows, on vectors equal on copies, in the distinct points'
    # coordinates u = √c v: diag(√(c/d)) W diag(√(c/d))
    # a point too far for any kernel weight (a far outlier) has degree 0: it stays out of the
    # eigenvectors (its row of M is 0) instead of dividing by zero
    scale = np.sqrt(_divide_or_zero(mass, degrees))
    M = sp.diags(scale) @ W @ sp.diags(scale)
    k = int(n_components)
    pairs = sparse_leading_eigenpairs(M, k, seed, perron=np.sqrt(mass * degrees))
    spectrum = pairs.spectrum
    values, vectors = pairs.values[:k], pairs.vectors[:, :k]
    vectors = fix_signs(vectors)
    if np.any(values <= 0):
        raise InvalidInputError(
            "The sparse normalized embedding found non-positive eigenvalues among the kept "
            "components; use fewer components."
        )
    # each row's entry of the unit eigenvector of all rows
    rows = vectors / np.sqrt(mass)[:, None]
    model = SparseSpectralModel(
        index=index,
        sigma=sigma,
        degrees=degrees,
        vectors=rows,
        eigenvalues=values,
        spectrum=spectrum,
        n_neighbors=int(n_neighbors),
        graph_neighbors=g + 1,
        coordinates=coordinates,
        counts=counts if m < n else None,
        radius=dist[:, g].copy(),
        one_sided_weight=float(one_sided_weight),
        self_loops=loops,
    )
    embedding = model.coordinates_of(rows, degrees)
    if inverse is not None:
        return embedding[inverse], model
    return rows_of_points(X, index, embedding), model
