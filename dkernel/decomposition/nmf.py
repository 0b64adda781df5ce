"""Aggregate Markov model: stochastic NMF / PLSA of the row-normalised kernel (Szymkowiak-Have
et al. 2006 [SzymkowiakHave2006]; PLSA: Hofmann 1999 [Hofmann1999]; updates: Lee & Seung 2001
[Lee2001]).

Numeric layer: NumPy/SciPy on in-memory arrays (dense or CSR), no Dask, no I/O.

Notation. ``Kcheck`` is the row-normalised kernel, ``Kcheck[j, n] = P(x_n | x_j)`` (Eq. 4);
the paper's matrix ``G = Kcheck.T`` is factored as ``G ~ W H`` (Eq. 6) with

* ``W`` (n, C): ``W[i, c] = P(x_i | c)``, every column sums to 1;
* ``H`` (C, n): ``H[c, j] = P(c | x_j)``, every column sums to 1.

Two objectives are offered. ``'euclidean'``: the squared error of Eq. 7 with Lee-Seung's
Euclidean multiplicative updates (the paper's choice), rescaled every iteration so that the
columns of ``W`` sum to 1 (this leaves ``WH`` and the objective unchanged) and with ``H``
projected onto the simplex at the end. ``'kl'``: the PLSA / aggregate-Markov likelihood
``sum_ij G_ij log (WH)_ij`` maximised by EM, i.e. Lee-Seung's generalised-KL updates, which keep
both stochastic constraints exactly and decrease the divergence monotonically.

Caveat for model selection: every PLSA EM step preserves the marginal
``m_l = sum_c P(x_l | c) P(c) = mean_j Kcheck[j, l]`` (the M-step reproduces the data
marginal), so with ``'kl'`` the out-of-sample likelihood of Eq. 14,
``p(z) = sum_l K(z, x_l) m_l``, does not depend on ``C`` and cannot select it; the
squared-error factorisation has no such invariance, which is why it is the default.
It has a weaker one, which is the paper's appendix argument: if ``W`` is the unconstrained
least-squares solution given ``H`` (columns of ``H`` summing to 1), then ``W H 1`` is ``G``
projected onto the row space of ``H``, which contains ``1``, so ``m`` is again the data
marginal. Eq. 14 therefore ties for every ``C`` whose posteriors are crisp (``C`` up to the
number of well separated clusters) and changes only where ``W >= 0`` is active, i.e. where a
cluster is split and the posteriors become soft. On data where every split falls in an
empty gap (a thin structure sampled more sparsely than the kernel width) all ``C`` tie.

The default, ``'kl-euclidean'``, uses each for what it is good at: restarts are fitted by PLSA
EM and compared by likelihood (on the ring data the correct partition has a ~10 % better
KL objective than a wrong one, but a squared error within 0.01 % of it, so Eq. 7 alone cannot
tell restarts apart), and the most likely one is then refined by the Eq. 7 updates, which
makes Eq. 14 depend on C.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial

import numpy as np
from scipy import sparse
from scipy.sparse.csgraph import connected_components
from scipy.sparse.linalg import eigsh
from scipy.special import xlogy
from threadpoolctl import threadpool_limits

from dkernel._random import derive_rng, derive_seed
from dkernel.errors import InvalidInputError
from dkernel.linalg import dense_eigh, euclidean_kmeans
from dkernel.linalg.kmeans import normalize_rows

LOSSES = ("kl-euclidean", "euclidean", "kl")
EIGEN_SOLVERS = ("auto", "shift-invert", "subspace")
#: Largest k-NN graph whose embedding ``solver='auto'`` computes by shift-invert (every set of
#: ``benchmarks/bench_defaults.py`` is below it, so those results are the shift-invert ones).
SHIFT_INVERT_MAX_N = 5_000
#: Rows beyond which the k-means of the initialisation is fitted on a random subset of rows.
KMEANS_MAX_N = 50_000
#: Connected components of a sparse kernel with fewer rows than this share of ``n / C`` do not
#: seed a cluster (:func:`seeding_rows`). The smallest true cluster that is a component of its
#: own in the benchmarks is Compound's 16 of 399 points (0.24 of n / C); the components this
#: excludes are cliques of identical rows (biopsy: 8 of 699, 0.02) and the fringe of count data.
SMALL_COMPONENT_SHARE = 0.1
_TINY = 1e-300


@dataclass
class AggregateMarkovFit:
    """Result of :func:`fit_aggregate_markov`.

    Attributes
    ----------
    W : ndarray (n, C)
        ``P(x_i | c)``; columns sum to 1.
    H : ndarray (C, n)
        ``P(c | x_j)``; columns sum to 1.
    objective : float
        Final objective (KL divergence ``sum G log(G / WH)`` for ``'kl'``, squared error of
        Eq. 7 otherwise); lower is better.
    n_iter : int
        Iterations run by the best restart.
    objectives : list of float
        Objective of every restart (KL for ``'kl'`` and ``'kl-euclidean'``, which picks the
        restart by likelihood before refining; restart 0 is the plain eigenvector start).
    spectrum : ndarray or None
        Eigenvalues (descending) of the normalised affinity whose eigenvectors started the
        factorisation; None when the embedding was passed in.
    """

    W: np.ndarray
    H: np.ndarray
    objective: float
    n_iter: int
    objectives: list[float] = field(default_factory=list)
    spectrum: np.ndarray | None = None


# ----------------------------------------------------------------------------- initialisation
def spectral_embedding(
    Kcheck: np.ndarray | sparse.spmatrix,
    log_norm: np.ndarray,
    n_components: int,
    *,
    seed: int | None = 0,
    solver: str = "auto",
    return_eigenvalues: bool = False,
    copies: np.ndarray | None = None,
) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """Leading eigenvectors of the normalised symmetric affinity ``D^{-1/2} W D^{-1/2}``.

    Dense kernels: ``W = (K + K^T) / 2 = K`` with the un-normalised kernel
    ``K = diag(exp(log_norm)) Kcheck`` (up to one constant factor). Sparse (k-NN) kernels:
    ``W`` is the symmetrised 0/1 connectivity of the k-NN graph (as scikit-learn's
    ``affinity='nearest_neighbors'``). ``D = diag(W 1)``, so the eigenvalues lie in [-1, 1]
    (Ng, Jordan & Weiss 2002 [Ng2002]).

    Parameters
    ----------
    solver : {'auto', 'shift-invert', 'subspace'}
        Sparse kernels only. ``'shift-invert'``: Lanczos on ``(S - sigma I)^-1`` with
        ``sigma`` just above 1 (one sparse LU). ``'subspace'``: ``deflated_eigenvectors``,
        the eigenvalue-1 space (one vector per connected component) exactly, the rest by a
        fixed number of subspace-iteration steps. ``'auto'``: shift-invert up to
        ``SHIFT_INVERT_MAX_N`` points, subspace iteration above.
    return_eigenvalues : bool
        Also return the eigenvalues (descending; the Rayleigh quotients of the vectors with
        subspace iteration), the spectrum of ``n_clusters='auto'``.
    copies : ndarray (n,), optional
        Sparse kernels only: the rows each point stands for (the distinct rows of a set with
        repeated rows). The graph is then that of all rows, every copy of a point joined to
        every copy of its neighbours, restricted to vectors equal on copies:
        ``diag(√(c/d)) W diag(√(c/d))`` with ``d = W c``.

    Returns
    -------
    ndarray of shape (n, n_components), rows scaled to unit norm; with
    ``return_eigenvalues``, ``(eigenvalues, embedding)``.

    Notes
    -----
    Dense: O(n^2) memory, O(n^2 k) time with the subset eigen-solver. Sparse, shift-invert
    (as scikit-learn's spectral embedding): the eigenvalues near 1 of a k-NN graph are tightly
    clustered and shift-invert separates them best, but the LU of a k-NN graph in more than
    two or three dimensions fills in almost completely (10-D blobs: 59 s and 2 GiB at
    N = 2·10^4, super-linear beyond). Subspace iteration: O(nnz + n k) memory, a fixed
    O((nnz + n k) k) per step.
    """
    n = Kcheck.shape[0]
    scale = np.exp(log_norm - np.max(log_norm))
    if sparse.issparse(Kcheck):
        # k-NN graph: the symmetrised *connectivity* graph. With the kernel weights, points
        # far from their neighbours are nearly disconnected and take the leading
        # eigenvectors for themselves (seen at N = 10^5), useless for initialisation.
        K = Kcheck.copy()
        K.data = np.ones_like(K.data)
        W = ((K + K.T) * 0.5).tocsr()
        if copies is None:
            d = np.maximum(np.asarray(W.sum(axis=1)).ravel(), _TINY)
            r, degree = sparse.diags(1.0 / np.sqrt(d)), d
        else:  # the graph of all rows on vectors equal on copies (as dkernel.spectral.sparse)
            mass = np.asarray(copies, dtype=np.float64)
            d = np.maximum(W @ mass, _TINY)
            r, degree = sparse.diags(np.sqrt(mass / d)), d * mass
        k = min(int(n_components), n - 1)
        if solver not in EIGEN_SOLVERS:
            raise InvalidInputError(f"solver must be one of {EIGEN_SOLVERS}; got {solver!r}.")
        if solver == "shift-invert" or (solver == "auto" and n <= SHIFT_INVERT_MAX_N):
            S = (r @ W @ r).tocsc()
            v0 = derive_rng(seed, "decomposition", "eigsh-v0").standard_normal(n)
            vals, U = eigsh(S, k=k, sigma=1.0 + 1e-3, which="LM", v0=v0, tol=1e-8)
            order = np.argsort(vals)[::-1]
            vals, U = vals[order], U[:, order]
        else:
            S = (r @ W @ r).tocsr()
            U = deflated_eigenvectors(S, degree, k, seed=seed)
            vals = np.einsum("ij,ij->j", U, S @ U) if return_eigenvalues else None
    else:
        if copies is not None:
            raise InvalidInputError("spectral_embedding takes copies with a sparse kernel only.")
        K = scale[:, None] * np.asarray(Kcheck)
        W = (K + K.T) * 0.5
        d = np.maximum(W.sum(axis=1), _TINY)
        r = 1.0 / np.sqrt(d)
        S = r[:, None] * W * r[None, :]
        vals, U = dense_eigh(S, min(int(n_components), n), clip=False)
    if return_eigenvalues:
        return np.asarray(vals, dtype=np.float64), normalize_rows(U)
    return normalize_rows(U)


def deflated_eigenvectors(
    S: sparse.csr_matrix,
    degree: np.ndarray,
    k: int,
    *,
    seed: int | None = 0,
    n_iter: int = 40,
    oversample: int = 10,
) -> np.ndarray:
    """Leading ``k`` eigenvectors of ``S = D^{-1/2} W D^{-1/2}`` (symmetric, spectrum in [-1, 1]),
    exact for eigenvalue 1 and approximate (block subspace iteration) below it.

    Eigenvalue 1 has one eigenvector per connected component of the graph ``W``,
    ``sqrt(degree)`` restricted to that component: these are written down directly (largest
    components first, ties by first point). The others are approximated in their orthogonal
    complement by ``n_iter`` steps of subspace iteration with ``T = (I + S) / 2`` (spectrum in
    [0, 1], so the negative end of ``S`` dies out) on ``k - n_components + oversample`` random
    vectors, then a Rayleigh-Ritz step. Below 1 a k-NN graph of blobs has dozens of almost
    equal eigenvalues (the slow modes inside each blob) which Lanczos spends most of its time
    separating (20 vectors of 10-D blobs at N = 10^5: 19 s at ``tol=1e-2``, 78 s at 1e-4); the
    initialisation only needs their span, which a fixed number of steps gives at a fixed cost.

    Returns
    -------
    ndarray (n, k), Ritz values in descending order (column signs arbitrary).

    Notes
    -----
    O(nnz) for the components, then ``n_iter`` sparse products O(nnz m) and QR steps
    O(n m^2) with ``m = k + oversample``; memory O(nnz + n m). No factorisation, so no
    fill-in.
    """
    n = S.shape[0]
    n_comp, comp = connected_components(S, directed=False)
    sizes = np.bincount(comp, minlength=n_comp)
    first = np.full(n_comp, n)
    np.minimum.at(first, comp, np.arange(n))
    order = np.lexsort((first, -sizes))[: min(n_comp, k)]
    slot = np.full(n_comp, -1)
    slot[order] = np.arange(order.size)
    Q = np.zeros((n, order.size))
    keep = slot[comp] >= 0
    Q[np.flatnonzero(keep), slot[comp[keep]]] = np.sqrt(degree[keep])
    Q /= np.linalg.norm(Q, axis=0, keepdims=True)
    rest = k - order.size
    if rest == 0:
        return Q
    m = min(rest + int(oversample), n - order.size)

    def orthonormal(Y: np.ndarray) -> np.ndarray:
        Y = Y - Q @ (Q.T @ Y)  # stay in the complement of the eigenvalue-1 space
        return Y @ np.linalg.inv(np.linalg.cholesky(Y.T @ Y).T)  # Cholesky QR (tall, thin Y)

    # Thin (m <= a few dozen columns) products: BLAS threads only add contention here.
    with threadpool_limits(limits=1, user_api="blas"):
        Y = orthonormal(derive_rng(seed, "decomposition", "subspace").standard_normal((n, m)))
        for it in range(int(n_iter)):
            Y = 0.5 * (Y + S @ Y)
            if it % 8 == 7 or it == n_iter - 1:  # the columns drift together slowly: T <= 1
                Y = orthonormal(Y)
        vals, V = np.linalg.eigh(Y.T @ (S @ Y))
        U = Y @ V[:, np.argsort(vals)[::-1][:rest]]
    return np.hstack([Q, U])


def _conditionals_from_posteriors(Kcheck, A: np.ndarray, copies=None) -> np.ndarray:
    """``B[c, i] ~ sum_j c_j A[j, c] Kcheck[j, i]``, rows normalised: P(x_i | c) implied by A
    (``c`` the rows each row of Kcheck stands for, 1 by default)."""
    A = _weighted(A, copies)
    B = np.asarray((Kcheck.T @ A).T) if sparse.issparse(Kcheck) else A.T @ Kcheck
    B = np.maximum(B, 0.0) + _TINY
    return B / B.sum(axis=1, keepdims=True)


def merge_by_flow(Kcheck, labels: np.ndarray, n_groups: int, copies=None) -> np.ndarray:
    """Greedily merge the parts of a partition along the random walk ``Kcheck``.

    The score of a pair of groups is the mean probability of a one-step jump from one into
    the other, in both directions, ``F_ab / n_a + F_ba / n_b`` with
    ``F_ab = sum_{i in a, j in b} Kcheck[i, j]``; the best pair is merged until ``n_groups``
    remain. Parts along a thin manifold (arcs of a ring) join their neighbours first. With
    ``copies`` each row stands for that many rows (in the flows and the sizes).

    Notes
    -----
    O(nnz) for the part-to-part flow matrix, then O(M^3) for M parts.
    """
    M = int(labels.max()) + 1
    E = np.zeros((labels.size, M))
    E[np.arange(labels.size), labels] = 1.0
    F = _weighted(E, copies).T @ np.asarray(Kcheck @ E)  # sum_{i in a, j in b} Kcheck[i, j]
    sizes = np.bincount(labels, weights=copies, minlength=M).astype(np.float64)
    group = np.arange(M)
    alive = list(range(M))
    while len(alive) > n_groups:
        sub = F[np.ix_(alive, alive)]
        sz = sizes[alive]
        score = sub / sz[:, None] + sub.T / sz[None, :]
        np.fill_diagonal(score, -np.inf)
        a, b = np.unravel_index(int(np.argmax(score)), score.shape)
        ga, gb = alive[a], alive[b]
        F[ga, :] += F[gb, :]
        F[:, ga] += F[:, gb]
        sizes[ga] += sizes[gb]
        group[group == gb] = ga
        alive.remove(gb)
    _, out = np.unique(group[labels], return_inverse=True)
    return out


def _embedding_kmeans(
    Z: np.ndarray, n_parts: int, *, seed: int | None, restart: int, copies=None
) -> np.ndarray:
    """k-means labels of the embedding rows (best of 3 k-means++ starts).

    Above ``KMEANS_MAX_N`` rows the centres are fitted on ``KMEANS_MAX_N`` rows drawn at random
    (a function of ``(seed, restart)``) and every row takes its nearest centre: the centres of
    at most a few dozen parts are as well determined by 5·10^4 rows as by 10^6, and the fit
    costs a tenth.
    """
    rs = derive_seed(seed, "decomposition", "kmeans", restart)
    n = Z.shape[0]
    if n <= KMEANS_MAX_N:
        return euclidean_kmeans(Z, n_parts, n_init=3, random_state=rs, sample_weight=copies)[0]
    rows = np.sort(
        derive_rng(seed, "decomposition", "kmeans-rows", restart).choice(
            n, KMEANS_MAX_N, replace=False
        )
    )
    weights = None if copies is None else copies[rows]
    _, centres, _ = euclidean_kmeans(
        Z[rows], n_parts, n_init=3, random_state=rs, sample_weight=weights
    )
    labels = np.empty(n, dtype=np.int64)
    sq = np.einsum("ij,ij->i", centres, centres)
    for s in range(0, n, 65_536):  # nearest centre, blockwise: ||z||^2 is the same for all
        labels[s : s + 65_536] = np.argmin(sq[None, :] - 2.0 * Z[s : s + 65_536] @ centres.T, 1)
    return labels


def seeding_rows(Kcheck, n_components: int, copies=None) -> np.ndarray | None:
    """Rows in the components of ``Kcheck``'s graph large enough to seed a cluster, or None
    when that is every row.

    A component is a closed set of rows of the random walk, so its indicator is an eigenvector
    of eigenvalue 1 and k-means on the leading eigenvectors makes it a cluster; merging parts
    by their flow (:func:`merge_by_flow`) merges a part with no flow to the rest last, so it
    stays a cluster too (sizes count ``copies``). For a component of a handful of rows (``k + 1`` identical rows form a
    closed clique of the k-NN graph) every restart then spends a cluster on it. Those rows
    start with uniform posteriors instead and the factorisation places them. Dense kernels
    are one component (a Gaussian is positive everywhere).
    """
    if not sparse.issparse(Kcheck):
        return None
    n_comp, comp = connected_components(Kcheck, directed=False)
    if n_comp == 1:
        return None
    sizes = np.bincount(comp, weights=copies)
    n = float(sizes.sum())
    small = sizes < SMALL_COMPONENT_SHARE * n / max(int(n_components), 1)
    keep = ~small[comp]
    if not small.any() or np.count_nonzero(keep) <= int(n_components):
        return None
    return keep


def initial_factors(
    Kcheck,
    embedding: np.ndarray,
    n_components: int,
    *,
    restart: int,
    seed: int | None,
    smoothing: float = 0.1,
    copies: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Stochastic starting factors from the eigenvector embedding.

    Restart 0 is the classical start: k-means into C clusters on the row-normalised leading
    C eigenvectors. Restart ``r >= 1`` over-segments: k-means into ``M = (r + 2) C`` parts on
    the leading M eigenvectors, merged down to C clusters by :func:`merge_by_flow` (when
    eigenvalues near 1 are nearly degenerate, e.g. long thin clusters whose slow internal
    modes compete with the between-cluster ones, the C leading vectors need not span the
    cluster indicators, but more vectors cut the data into parts that do not straddle
    clusters). The hard assignment gives ``A = P(c | x_j)`` smoothed towards uniform (weight
    ``smoothing``; later restarts also add uniform noise derived from ``(seed, restart)``) and
    ``B = P(x_i | c)``, the mixture of kernel rows of each cluster. ``copies``: the rows each
    row of Kcheck stands for (weights of the k-means, the flows and the mixtures).

    Returns
    -------
    A : ndarray (n, C), rows sum to 1.
    B : ndarray (C, n), rows sum to 1.
    """
    n = embedding.shape[0]
    C = int(n_components)
    if C == 1:
        A = np.ones((n, 1))
    else:
        M = C if restart == 0 else min((restart + 2) * C, n - 1, embedding.shape[1])
        Z = normalize_rows(embedding[:, :M])
        labels = _embedding_kmeans(Z, max(M, C), seed=seed, restart=restart, copies=copies)
        if M > C:
            labels = merge_by_flow(Kcheck, labels, C, copies)
        A = np.full((n, C), smoothing / C)
        A[np.arange(n), labels] += 1.0 - smoothing
        if restart > 0:
            noise = derive_rng(seed, "decomposition", "noise", restart).random((n, C))
            A = A + smoothing * noise
        A /= A.sum(axis=1, keepdims=True)
    return A, _conditionals_from_posteriors(Kcheck, A, copies)


# ----------------------------------------------------------------------------- updates
def _weighted(A: np.ndarray, copies) -> np.ndarray:
    """Rows of A times the rows each stands for (A itself without copies)."""
    return A if copies is None else A * np.asarray(copies, dtype=np.float64)[:, None]


def _stored_copies(Kcheck, copies) -> np.ndarray | float:
    """The copies of the row of each stored entry of Kcheck (1.0 without copies)."""
    if copies is None:
        return 1.0
    if sparse.issparse(Kcheck):
        return np.repeat(np.asarray(copies, dtype=np.float64), np.diff(Kcheck.indptr))
    return np.asarray(copies, dtype=np.float64)[:, None]


def _product_at(Kcheck, A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """``(A B)`` at the stored entries of a sparse ``Kcheck`` (or in full when dense)."""
    if sparse.issparse(Kcheck):
        rows = np.repeat(np.arange(Kcheck.shape[0]), np.diff(Kcheck.indptr))
        At = np.ascontiguousarray(A.T)
        out = np.zeros(rows.size)
        for c in range(At.shape[0]):  # 1-D gathers: several times faster than (nnz, C) ones
            out += At[c].take(rows) * B[c].take(Kcheck.indices)
        return out
    return A @ B


def kl_objective(
    Kcheck, A: np.ndarray, B: np.ndarray, *, entropy: float | None = None, copies=None
) -> float:
    """``sum_j c_j sum_i Kcheck[j, i] log(Kcheck[j, i] / (A B)[j, i])`` over the non-zero
    entries of Kcheck (>= 0); ``c_j`` the rows row j stands for (1 without ``copies``).

    ``entropy``: ``sum Kcheck log Kcheck`` (:func:`kernel_entropy`) when the caller evaluates
    the objective often for one kernel, as :func:`factorize` does; computed here otherwise.
    """
    P = np.maximum(_product_at(Kcheck, A, B), _TINY)
    G = _stored(Kcheck) * _stored_copies(Kcheck, copies)
    constant = kernel_entropy(Kcheck, copies) if entropy is None else entropy
    return float(constant - np.sum(xlogy(G, P)))


def kernel_entropy(Kcheck, copies=None) -> np.floating:
    """``sum Kcheck log Kcheck`` over the stored entries (rows times their ``copies``): the
    constant term of the KL objective."""
    G = _stored(Kcheck)
    return np.sum(xlogy(G, G) * _stored_copies(Kcheck, copies))


def _stored(Kcheck) -> np.ndarray:
    return Kcheck.data if sparse.issparse(Kcheck) else np.asarray(Kcheck)


def truncate_kernel(Kcheck: np.ndarray, *, threshold: float = 1e-14, max_density: float = 0.05):
    """A dense row-normalised kernel as CSR when most entries are negligible.

    Entries below ``threshold`` (the rows sum to 1, so this is an absolute probability) are
    dropped and the rows renormalised; the factorisation objective changes by at most about
    ``n * threshold`` per row. Narrow Gaussian kernels are mostly such entries, which makes
    every multiplicative update O(nnz C) instead of O(n^2 C). Returns the input unchanged when
    more than ``max_density`` of the entries would be kept.
    """
    if sparse.issparse(Kcheck):
        return Kcheck
    keep = Kcheck >= threshold
    if keep.mean() > max_density:
        return Kcheck
    M = sparse.csr_matrix(np.where(keep, Kcheck, 0.0))
    row = np.asarray(M.sum(axis=1)).ravel()
    return sparse.diags(1.0 / row) @ M


def euclidean_objective(Kcheck, A: np.ndarray, B: np.ndarray, copies=None) -> float:
    """Squared error of Eq. 7, ``||Kcheck - A B||_F^2``, each row's error times its ``copies``
    (never forms ``A B`` for sparse input)."""
    if sparse.issparse(Kcheck):
        P = _product_at(Kcheck, A, B)
        G = Kcheck.data * _stored_copies(Kcheck, copies)
        gram = (A.T @ _weighted(A, copies)) * (B @ B.T)
        return float(np.dot(G, Kcheck.data) - 2 * float(np.dot(G, P)) + np.sum(gram))
    R = np.asarray(Kcheck) - A @ B
    return float(np.einsum("ij,ij->", _weighted(R, copies), R))


def _kl_step(Kcheck, A, B, copies=None):
    """One PLSA EM step (== Lee-Seung KL updates with the stochastic normalisation); each
    row's expected counts times its ``copies``."""
    P = np.maximum(_product_at(Kcheck, A, B), _TINY)
    if sparse.issparse(Kcheck):
        R = sparse.csr_matrix((Kcheck.data / P, Kcheck.indices, Kcheck.indptr), shape=Kcheck.shape)
        RB = np.asarray(R @ B.T)
        AR = np.asarray(R.T @ _weighted(A, copies)).T
    else:
        R = np.asarray(Kcheck) / P
        RB = R @ B.T
        AR = _weighted(A, copies).T @ R
    A_new = A * RB
    B_new = B * AR
    A_new /= np.maximum(A_new.sum(axis=1, keepdims=True), _TINY)
    B_new /= np.maximum(B_new.sum(axis=1, keepdims=True), _TINY)
    return A_new, B_new


def _simplex_multiplicative(X, pos, neg):
    """Multiplicative step for ``X`` with rows on the simplex, gradient ``pos - neg``.

    ``X <- X * (neg + <X, pos>) / (pos + <X, neg>)`` row-wise (the Lagrange multiplier of the
    row-sum constraint split into both terms, which keeps the step non-negative and has the
    KKT points of the constrained problem as fixed points), then rows renormalised.
    """
    a = np.einsum("ij,ij->i", X, pos)[:, None]
    b = np.einsum("ij,ij->i", X, neg)[:, None]
    X = X * (neg + a) / np.maximum(pos + b, _TINY)
    return X / np.maximum(X.sum(axis=1, keepdims=True), _TINY)


def _euclidean_step(Kcheck, A, B, copies=None):
    """Multiplicative updates of the squared error (Eq. 7) under both stochastic constraints,
    each row's error times its ``copies``."""
    KB = np.asarray(Kcheck @ B.T)  # negative part of the gradient in A
    A = _simplex_multiplicative(A, A @ (B @ B.T), KB)
    Aw = _weighted(A, copies)
    KtA = np.asarray(Kcheck.T @ Aw) if sparse.issparse(Kcheck) else (Aw.T @ Kcheck).T
    B = _simplex_multiplicative(B.T.T, (A.T @ Aw) @ B, KtA.T)
    return A, B


def factorize(
    Kcheck,
    A0: np.ndarray,
    B0: np.ndarray,
    *,
    loss: str = "kl",
    max_iter: int = 300,
    tol: float = 1e-6,
    check_every: int = 10,
    copies: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, float, int]:
    """Multiplicative updates from ``(A0, B0)`` until the relative objective change < ``tol``.

    The objective is evaluated every ``check_every`` iterations (it costs as much as an
    update); the stopping test compares it with the previous evaluation.

    Parameters
    ----------
    Kcheck : ndarray or CSR matrix of shape (n, n)
        Row-normalised kernel (rows sum to 1).
    A0 : ndarray (n, C)
        ``P(c | x_j)`` (= H^T), rows sum to 1.
    B0 : ndarray (C, n)
        ``P(x_i | c)`` (= W^T), rows sum to 1.
    copies : ndarray (n,), optional
        The rows each row of Kcheck stands for (the distinct rows of a set with repeated
        rows, their columns already folded into the first): the objective is that of all
        rows.

    Returns
    -------
    A, B, objective, n_iter

    Notes
    -----
    Each iteration costs O(n^2 C) dense or O(nnz C) sparse, memory the same order as
    ``Kcheck`` plus O(n C).
    """
    if loss not in ("kl", "euclidean"):
        raise InvalidInputError(f"factorize's loss must be 'kl' or 'euclidean'; got {loss!r}.")
    step = partial(_kl_step if loss == "kl" else _euclidean_step, copies=copies)
    if loss == "kl":
        objective = partial(kl_objective, entropy=kernel_entropy(Kcheck, copies), copies=copies)
    else:
        objective = partial(euclidean_objective, copies=copies)
    A, B = A0.astype(np.float64, copy=True), B0.astype(np.float64, copy=True)
    prev = objective(Kcheck, A, B)
    n_iter = 0
    while n_iter < max_iter:
        n_iter += 1
        A, B = step(Kcheck, A, B)
        if n_iter % check_every and n_iter < max_iter:
            continue
        cur = objective(Kcheck, A, B)
        if abs(prev - cur) <= tol * max(abs(cur), 1e-12):
            prev = cur
            break
        prev = cur
    if loss == "euclidean":  # project P(c|x) onto the simplex (rows of A sum to 1)
        A = np.maximum(A, 0.0)
        A /= np.maximum(A.sum(axis=1, keepdims=True), _TINY)
        prev = objective(Kcheck, A, B)
    return A, B, float(prev), n_iter


def fit_aggregate_markov(
    Kcheck,
    log_norm: np.ndarray,
    n_components: int,
    *,
    loss: str = "kl",
    n_init: int = 3,
    max_iter: int = 300,
    tol: float = 1e-6,
    seed: int | None = 0,
    embedding: np.ndarray | None = None,
    truncate: bool = True,
    copies: np.ndarray | None = None,
) -> AggregateMarkovFit:
    """Factor ``Kcheck^T ~ W H`` from eigenvector initialisations; keep the best restart.

    Parameters
    ----------
    Kcheck : ndarray or CSR matrix (n, n)
        Row-normalised training kernel.
    log_norm : ndarray (n,)
        Log row sums of the un-normalised kernel (for the eigenvector initialisation).
    n_components : int
        Number of clusters C.
    loss : {'kl-euclidean', 'euclidean', 'kl'}
        ``'kl'``: PLSA EM only. ``'euclidean'``: Eq. 7 only. ``'kl-euclidean'``: every restart
        is fitted by PLSA EM and the best by likelihood is refined with the Eq. 7 updates
        (module docstring: the likelihood separates good and bad restarts, the squared error
        hardly does, but only the squared error makes Eq. 14 depend on C).
    n_init : int
        Restarts; restart 0 is the plain eigenvector/k-means start, restart r uses
        ``(r + 2) C`` eigenvectors, over-segmentation and merging (:func:`initial_factors`).
    embedding : ndarray (n, >= C (n_init + 1)), optional
        Precomputed :func:`spectral_embedding` (reuse it across C in model selection).
    truncate : bool
        Factor a dense kernel as CSR without its entries below 1e-14
        (:func:`truncate_kernel`) when that keeps under 5 % of them.
    copies : ndarray (n,), optional
        Sparse kernels: the rows each row of Kcheck stands for (:func:`factorize`); the fit
        is that of all rows, on the distinct ones.

    Returns
    -------
    AggregateMarkovFit

    Notes
    -----
    Cost: one eigen-decomposition (O(n^2 C) dense, Lanczos for sparse) plus
    ``n_init * n_iter`` updates of O(n^2 C) (dense) or O(nnz C) (sparse) each.
    """
    C = int(n_components)
    if C < 1 or C > Kcheck.shape[0]:
        raise InvalidInputError(
            f"n_components must be an int in [1, n_samples={Kcheck.shape[0]}]; got {C}."
        )
    n_restarts = max(1, int(n_init)) if C > 1 else 1
    Kfac = truncate_kernel(Kcheck) if truncate else Kcheck
    seeds = seeding_rows(Kcheck, C, copies) if C > 1 else None
    seed_copies = copies if copies is None or seeds is None else copies[seeds]
    Kseed = Kfac if seeds is None else Kfac[seeds][:, seeds]
    want = min(C * (n_restarts + 1), Kseed.shape[0] - 1)
    spectrum = None
    if seeds is not None and embedding is not None:
        # the seeding rows of a passed-in embedding, without the vectors of the small
        # components (zero on those rows)
        embedding = embedding[seeds]
        norms = np.linalg.norm(embedding, axis=0)
        embedding = embedding[:, norms > 1e-8 * max(float(norms.max()), _TINY)]
    if embedding is None or embedding.shape[1] < min(C, want):
        if C > 1:
            spectrum, embedding = spectral_embedding(
                Kcheck if seeds is None else Kseed,
                log_norm if seeds is None else log_norm[seeds],
                want,
                seed=seed,
                return_eigenvalues=True,
                copies=seed_copies,
            )
        else:
            embedding = np.ones((Kcheck.shape[0], 1))
    best = None
    objectives = []
    if loss not in LOSSES:
        raise InvalidInputError(f"loss must be one of {LOSSES}; got {loss!r}.")
    first = "kl" if loss == "kl-euclidean" else loss
    for r in range(n_restarts):
        A0, B0 = initial_factors(Kseed, embedding, C, restart=r, seed=seed, copies=seed_copies)
        if seeds is not None:
            A_full = np.full((Kcheck.shape[0], C), 1.0 / C)
            A_full[seeds] = A0
            A0, B0 = A_full, _conditionals_from_posteriors(Kfac, A_full, copies)
        A, B, obj, it = factorize(
            Kfac, A0, B0, loss=first, max_iter=max_iter, tol=tol, copies=copies
        )
        objectives.append(obj)
        if best is None or obj < best[2]:
            best = (A, B, obj, it)
    A, B, obj, it = best
    if loss == "kl-euclidean":  # refine the most likely restart under the squared error (Eq. 7)
        A, B, obj, it2 = factorize(
            Kfac, A, B, loss="euclidean", max_iter=max_iter, tol=tol, copies=copies
        )
        it += it2
    return AggregateMarkovFit(
        W=B.T.copy(),
        H=A.T.copy(),
        objective=obj,
        n_iter=it,
        objectives=objectives,
        spectrum=spectrum,
    )
