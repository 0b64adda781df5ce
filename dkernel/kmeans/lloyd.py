"""Kernel k-means: Lloyd's iterations in the feature space of a kernel ([MLSlides2012],
slides 34-38), on the Gram matrix or on an explicit feature map.

Numeric layer: NumPy/SciPy on in-memory arrays, no Dask.

Kernel k-means minimises ``J = Σ_i ||φ(x_i) - m_c(i)||²`` where ``m_c`` is the mean of the
images of cluster c. The centres are never formed: the squared distance of a point to a centre
is (slide 35)

    ``||φ(x) - m_c||² = k(x, x) - 2/|c| Σ_{j∈c} k(x, x_j) + 1/|c|² Σ_{j,l∈c} k(x_j, x_l)``.

Two spaces give the inner products ``G_ic = φ(x_i)·m_c`` and ``||m_c||²`` that this needs:

* :class:`GramSpace`: the kernel matrix ``K`` (exact, O(n²) memory). ``G = K H D⁻¹`` with H the
  one-hot labels; after the first step only the points that changed cluster update the
  unnormalised sums ``S = K H`` (``S += K[:, moved] ΔH``), so a late Lloyd step costs
  O(n · moved · k) instead of O(n² k);
* :class:`FeatureSpace`: explicit features ``Φ`` (a Nyström or landmark feature map, dense or
  CSR): centres are the means ``M = D⁻¹ Hᵀ Φ`` and ``G = Φ Mᵀ``, which is ordinary k-means in
  that space.

Both give the same numbers when ``Φ Φᵀ = K``, and :func:`lloyd` and :func:`kmeans_plusplus`
run on either, drawing the same random numbers, so kernel k-means on a Nyström map with every
point a landmark *is* exact kernel k-means (same labels and objective up to rounding).

The objective is the trace relaxation that kernel PCA solves: ``J = tr K - tr(Yᵀ K Y)`` with
``Y = H D^{-1/2}`` orthonormal (slide 73), so the top eigenvectors of the centered kernel are the
relaxed solution; :func:`kpca_labels` reads labels out of them (k-means on the KPCA embedding),
a start that Lloyd's iterations then refine. :func:`information_criteria` scores a clustering
by AIC and BIC (slide 87).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import LinearOperator, eigsh

from dkernel.errors import InvalidInputError
from dkernel.kmeans.features import centered_gram, features, squared_norms, sub_block_rows
from dkernel.linalg.eigen import dense_eigh
from dkernel.linalg.kmeans import euclidean_kmeans
from dkernel.linalg.threads import map_on_cores

#: How the first centres are chosen.
INITS = ("k-means++", "kpca")
#: Below this many points the KPCA read-out uses a dense eigen-solve (Lanczos above).
DENSE_EIGEN_MAX = 1000
#: Share of the points that may change cluster for the incremental Gram update to pay off.
INCREMENTAL_SHARE = 0.25


def _one_hot(labels: np.ndarray, k: int) -> sp.csr_matrix:
    """H (n, k) as CSR."""
    n = labels.size
    return sp.csr_matrix((np.ones(n), (np.arange(n), labels)), shape=(n, k))


def symmetrize(K: np.ndarray, block: int = 1024) -> np.ndarray:
    """``K ← (K + Kᵀ) / 2`` in place, block by block (no n × n temporary); returns ``K``.

    A kernel evaluated in row blocks can differ from its transpose in the last bits; the
    Gram space reads rows where the formulas need columns.
    """
    n = K.shape[0]
    for a in range(0, n, block):
        for c in range(a, n, block):
            mean = 0.5 * (K[a : a + block, c : c + block] + K[c : c + block, a : a + block].T)
            K[a : a + block, c : c + block] = mean
            K[c : c + block, a : a + block] = mean.T
    return K


class GramSpace:
    """Points given by their symmetric kernel matrix ``K`` (n, n); ``K`` is read, never written.

    Rows of ``K`` stand for its columns (contiguous reads): pass a symmetric matrix
    (:func:`symmetrize`).
    """

    def __init__(self, K: np.ndarray) -> None:
        self.K = K
        self.n = int(K.shape[0])
        self.sq_norms = np.array(np.diagonal(K), dtype=np.float64)
        self._labels: np.ndarray | None = None
        self._S: np.ndarray | None = None

    def point_sq_dist(self, idx: np.ndarray) -> np.ndarray:
        """``||φ_j - φ_i||²`` (len(idx), n) for the points ``idx``."""
        idx = np.asarray(idx)
        d = self.sq_norms[idx][:, None] + self.sq_norms[None, :] - 2.0 * self.K[idx]
        return np.maximum(d, 0.0)

    def inner(self, labels: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``G = φ·m`` (n, k), ``||m||²`` (k,) and the sizes of the clusters of ``labels``."""
        old = self._labels
        moved = None if old is None else np.flatnonzero(old != labels)
        stale = self._S is None or self._S.shape[1] != k
        if moved is None or stale or moved.size > INCREMENTAL_SHARE * self.n:
            # Hᵀ K: each cluster's rows summed, n² additions instead of an n² k product
            S = np.asarray(_one_hot(labels, k).T @ self.K).T
        else:
            S = self._S
            if moved.size:
                delta = np.zeros((moved.size, k))
                delta[np.arange(moved.size), labels[moved]] = 1.0
                delta[np.arange(moved.size), old[moved]] -= 1.0
                S = S + self.K[moved].T @ delta
        self._labels, self._S = labels.copy(), S
        sizes = np.bincount(labels, minlength=k).astype(np.float64)
        within = np.bincount(labels, weights=S[np.arange(self.n), labels], minlength=k)
        with np.errstate(divide="ignore", invalid="ignore"):
            return S / sizes[None, :], within / sizes**2, sizes

    def total_variance(self) -> float:
        """``Σ_i ||φ_i - φ̄||² / n``: the mean squared norm about the mean."""
        return float(self.sq_norms.mean() - self.K.mean())

    def effective_dimension(self) -> float:
        """Participation ratio ``(Σλ)² / Σλ²`` of the centered kernel's eigenvalues."""
        K, n = self.K, self.n
        row = K.sum(axis=1)
        total = float(row.sum())
        trace = float(self.sq_norms.sum()) - total / n
        fro2 = float(np.einsum("ij,ij->", K, K)) - 2.0 * float(row @ row) / n + total**2 / n**2
        return _participation(trace, fro2)

    def kpca(self, k: int, rng: np.random.Generator) -> np.ndarray:
        """The top-k kernel PCA embedding ``E Λ^{1/2}`` of the centered kernel (n, k)."""
        K, n = self.K, self.n
        col = K.mean(axis=0)
        mean = float(col.mean())
        if n <= DENSE_EIGEN_MAX or k >= n - 1:
            Kc = K - col[None, :] - col[:, None] + mean
            values, vectors = dense_eigh(0.5 * (Kc + Kc.T), min(k, n), clip=True)
        else:

            def matvec(v: np.ndarray) -> np.ndarray:
                v = np.ravel(v)
                return K @ v - col * v.sum() - (col @ v) + mean * v.sum()

            op = LinearOperator((n, n), matvec=matvec, dtype=np.float64)
            values, vectors = eigsh(op, k=k, which="LA", v0=rng.standard_normal(n))
            order = np.argsort(-values)
            values, vectors = np.maximum(values[order], 0.0), vectors[:, order]
        return vectors * np.sqrt(values)[None, :]


class FeatureSpace:
    """Points given by explicit features ``Φ`` (n, r), dense or CSR."""

    def __init__(self, Phi: np.ndarray | sp.spmatrix) -> None:
        self.Phi = sp.csr_matrix(Phi) if sp.issparse(Phi) else np.asarray(Phi, dtype=np.float64)
        self.n = int(Phi.shape[0])
        self.sq_norms = squared_norms(self.Phi)

    def point_sq_dist(self, idx: np.ndarray) -> np.ndarray:
        """``||φ_j - φ_i||²`` (len(idx), n) for the points ``idx``."""
        idx = np.asarray(idx)
        cross = self.Phi[idx] @ self.Phi.T
        cross = cross.toarray() if sp.issparse(cross) else cross
        d = self.sq_norms[idx][:, None] + self.sq_norms[None, :] - 2.0 * cross
        return np.maximum(d, 0.0)

    def centres(self, labels: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The means ``M`` (k, r) of the clusters of ``labels`` and the cluster sizes."""
        sizes = np.bincount(labels, minlength=k).astype(np.float64)
        sums = _one_hot(labels, k).T @ self.Phi
        sums = sums.toarray() if sp.issparse(sums) else np.asarray(sums)
        with np.errstate(divide="ignore", invalid="ignore"):
            return sums / sizes[:, None], sizes

    def inner(self, labels: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``G = φ·m`` (n, k), ``||m||²`` (k,) and the sizes of the clusters of ``labels``."""
        M, sizes = self.centres(labels, k)
        live = sizes > 0
        G = np.full((self.n, k), np.nan)
        G[:, live] = np.asarray(self.Phi @ M[live].T)
        cc = np.full(k, np.nan)
        cc[live] = np.einsum("ij,ij->i", M[live], M[live])
        return G, cc, sizes

    def total_variance(self) -> float:
        """``Σ_i ||φ_i - φ̄||² / n``."""
        mu = np.asarray(self.Phi.mean(axis=0)).ravel()
        return float(self.sq_norms.mean() - mu @ mu)

    def effective_dimension(self) -> float:
        """Participation ratio ``(Σλ)² / Σλ²`` of the centered feature covariance."""
        C, _ = centered_gram(self.Phi)
        return _participation(float(np.trace(C)), float(np.sum(C * C)))

    def kpca(self, k: int, rng: np.random.Generator) -> np.ndarray:
        """The top-k principal components of the centered features (n, k): kernel PCA of
        ``Φ Φᵀ``."""
        C, mu = centered_gram(self.Phi)
        _, V = dense_eigh(C, min(k, C.shape[0]), clip=True)
        return np.asarray(self.Phi @ V) - (mu @ V)[None, :]


def _participation(trace: float, fro2: float) -> float:
    """``(Σλ)² / Σλ²``, at least 1 (1 for a kernel without spread)."""
    if not (trace > 0 and fro2 > 0):
        return 1.0
    return max(1.0, trace**2 / fro2)


Space = GramSpace | FeatureSpace


def kmeans_plusplus(
    space: Space, k: int, rng: np.random.Generator, n_local_trials: int | None = None
) -> np.ndarray:
    """k-means++ seeds in feature space (greedy D² sampling, Arthur & Vassilvitskii 2007).

    Each new seed is the best of ``2 + ln k`` candidates drawn with probability proportional
    to the squared feature-space distance to the nearest seed (scikit-learn's variant).

    Returns
    -------
    ndarray of int64 (k,)
        Indices of the seed points.
    """
    n = space.n
    trials = n_local_trials or 2 + int(np.log(k))
    seeds = np.empty(k, dtype=np.int64)
    seeds[0] = rng.integers(n)
    closest = space.point_sq_dist(seeds[:1])[0]
    potential = float(closest.sum())
    for c in range(1, k):
        draws = rng.uniform(size=trials) * potential
        candidates = np.minimum(np.searchsorted(np.cumsum(closest), draws), n - 1)
        d = np.minimum(space.point_sq_dist(candidates), closest[None, :])
        potentials = d.sum(axis=1)
        best = int(np.argmin(potentials))
        seeds[c], closest, potential = candidates[best], d[best], float(potentials[best])
    return seeds


def _distances(sq: np.ndarray, G: np.ndarray, cc: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """``||φ_i - m_c||²`` (n, k); +inf for empty clusters."""
    d = sq[:, None] - 2.0 * G + cc[None, :]
    d[:, sizes == 0] = np.inf
    return d


def _fill_empty(labels: np.ndarray, dist: np.ndarray, k: int) -> np.ndarray:
    """Give every empty cluster the point farthest from its centre among clusters of > 1 point
    (scikit-learn's relocation), deterministically."""
    counts = np.bincount(labels, minlength=k)
    empty = np.flatnonzero(counts == 0)
    if empty.size == 0:
        return labels
    labels = labels.copy()
    own = dist[np.arange(labels.size), labels]
    order = iter(np.argsort(-own, kind="stable"))
    for c in empty:
        for i in order:
            if counts[labels[i]] > 1:
                counts[labels[i]] -= 1
                labels[i], counts[c] = c, 1
                break
    return labels


@dataclass(frozen=True)
class LloydResult:
    """One run of :func:`lloyd`.

    Attributes
    ----------
    labels : ndarray of int64 (n,)
        Each point's nearest centre (the final assignment step).
    centre_labels : ndarray of int64 (n,)
        The clustering whose means are the centres (equal to ``labels`` once converged).
    inertia : float
        ``Σ_i ||φ_i - m_labels(i)||²``.
    n_iter : int
        Assignment steps run.
    converged : bool
        No label changed in the last step.
    """

    labels: np.ndarray
    centre_labels: np.ndarray
    inertia: float
    n_iter: int
    converged: bool


def lloyd(
    space: Space, labels: np.ndarray, k: int, *, max_iter: int = 300, tol: float = 0.0
) -> LloydResult:
    """Lloyd's iterations from ``labels`` (slide 36): assign every point to the nearest centre
    in feature space, move the centres to the means, until no label changes, ``max_iter``
    steps, or the centres move by at most ``tol`` (squared shift summed over clusters, in the
    units of ``||φ||²``).

    Ties go to the centre of smallest index (slide 29). A centre left without points takes the
    point farthest from its own centre. After the loop one more assignment step makes
    ``labels`` the nearest centres of the returned model, as scikit-learn's ``KMeans`` does.
    """
    labels = np.asarray(labels, dtype=np.int64)
    n = labels.size
    rows = np.arange(n)
    G, cc, sizes = space.inner(labels, k)
    converged, n_iter = False, 0
    while n_iter < max_iter:
        n_iter += 1
        dist = _distances(space.sq_norms, G, cc, sizes)
        new = _fill_empty(np.argmin(dist, axis=1), dist, k)
        if np.array_equal(new, labels):
            converged = True
            break
        G_new, cc_new, sizes_new = space.inner(new, k)
        # ⟨m'_c, m_c⟩ is the mean of ⟨φ_i, m_c⟩ over the new members of c
        with np.errstate(divide="ignore", invalid="ignore"):
            cross = np.bincount(new, weights=G[rows, new], minlength=k) / sizes_new
        shift = np.where(sizes_new > 0, cc_new - 2.0 * cross + cc, 0.0)
        labels, G, cc, sizes = new, G_new, cc_new, sizes_new
        if np.all(np.isfinite(shift)) and float(shift.sum()) <= tol:
            break
    dist = _distances(space.sq_norms, G, cc, sizes)
    final = np.argmin(dist, axis=1).astype(np.int64)
    inertia = float(np.maximum(dist[rows, final], 0.0).sum())
    return LloydResult(final, labels, inertia, n_iter, converged)


def kpca_labels(space: Space, k: int, rng: np.random.Generator) -> np.ndarray:
    """Labels read out of the kernel PCA embedding (slides 70 and 103): Euclidean k-means
    (best of 10, k-means++) on the top-k components of the centered kernel."""
    if k == 1:
        return np.zeros(space.n, dtype=np.int64)
    Z = space.kpca(k, rng)
    labels, _, _ = euclidean_kmeans(Z, k, n_init=10, random_state=int(rng.integers(2**31 - 1)))
    return labels.astype(np.int64)


def best_of(
    space: Space,
    k: int,
    *,
    n_init: int = 10,
    init: str = "k-means++",
    max_iter: int = 300,
    tol: float = 1e-4,
    rng: np.random.Generator,
) -> LloydResult:
    """The lowest-inertia run of ``n_init`` Lloyd runs (ties: the first).

    ``init='kpca'`` starts the first run from :func:`kpca_labels`, the others from k-means++
    seeds; ``tol`` is relative to the total variance in feature space.
    """
    if init not in INITS:
        raise InvalidInputError(f"Unknown init {init!r}; choose one of {list(INITS)}.")
    tol_abs = float(tol) * max(space.total_variance(), 0.0)
    best: LloydResult | None = None
    for run in range(max(1, int(n_init))):
        if run == 0 and init == "kpca":
            start = kpca_labels(space, k, rng)
        else:
            seeds = kmeans_plusplus(space, k, rng)
            start = np.argmin(space.point_sq_dist(seeds), axis=0).astype(np.int64)
        result = lloyd(space, start, k, max_iter=max_iter, tol=tol_abs)
        if best is None or result.inertia < best.inertia:
            best = result
    assert best is not None
    return best


def objective(space: Space, labels: np.ndarray, k: int) -> float:
    """The kernel k-means objective ``J = Σ_i ||φ_i - mean of its cluster||²`` (slide 34)."""
    _, cc, sizes = space.inner(np.asarray(labels, dtype=np.int64), k)
    live = sizes > 0
    return float(space.sq_norms.sum() - np.sum(sizes[live] * cc[live]))


def kernel_kmeans(
    K: np.ndarray,
    n_clusters: int,
    *,
    init: str = "k-means++",
    n_init: int = 10,
    max_iter: int = 300,
    tol: float = 0.0,
    random_state: int | None = None,
) -> tuple[np.ndarray, float]:
    """Kernel k-means on a dense kernel matrix, best of ``n_init`` by cost.

    Minimises ``Σ_i ||φ(x_i) - m_{c(i)}||^2`` in the feature space of K, where
    ``||φ_i - m_c||^2 = K_ii - 2/|c| Σ_{j∈c} K_ij + 1/|c|^2 Σ_{j,l∈c} K_jl``; starts from
    k-means++ seeds drawn with the kernel-induced distance (or, with ``init='kpca'``, the
    first run from the kernel PCA read-out). The function twin of
    :class:`dkernel.KernelKMeans` (``solver='exact'``).

    Parameters
    ----------
    K : ndarray (n, n)
        Symmetric PSD kernel.
    n_clusters : int
    init : {'k-means++', 'kpca'}
    n_init : int
        Restarts; the lowest cost wins.
    max_iter : int
        Lloyd iterations per restart.
    tol : float
        Stop a run when the squared centre shift is at most ``tol`` × the total variance in
        feature space (0: when no label changes).
    random_state : int, optional

    Returns
    -------
    labels : ndarray (n,) of int64
        Consecutive from 0.
    cost : float
        The objective of ``labels``.

    Notes
    -----
    O(n^2 k) for the first Lloyd step of a run, O(n · moved · k) for the later ones; O(n^2)
    memory for K. For large n run k-means on a Nyström feature map instead (same objective
    for the approximated kernel): :class:`dkernel.KernelKMeans` with ``solver='nystrom'``.

    Examples
    --------
    >>> X = np.r_[np.zeros((3, 2)), np.ones((3, 2))]
    >>> labels, cost = kernel_kmeans(X @ X.T, 2, random_state=0)
    >>> len(set(labels[:3])), len(set(labels[3:])), labels[0] != labels[3], cost
    (1, 1, np.True_, 0.0)
    """
    K = np.asarray(K, dtype=np.float64)
    n = K.shape[0]
    if not (
        isinstance(n_clusters, int | np.integer)
        and not isinstance(n_clusters, bool)
        and 1 <= n_clusters <= n
    ):
        raise InvalidInputError(
            f"The 'n_clusters' parameter of kernel_kmeans must be an int in [1, {n}]. "
            f"Got {n_clusters!r} instead."
        )
    if not np.array_equal(K, K.T):
        K = symmetrize(K.copy())
    space = GramSpace(K)
    result = best_of(
        space,
        int(n_clusters),
        n_init=n_init,
        init=init,
        max_iter=max_iter,
        tol=tol,
        rng=np.random.default_rng(random_state),
    )
    _, labels = np.unique(result.labels, return_inverse=True)
    labels = labels.astype(np.int64)
    return labels, objective(space, labels, int(labels.max()) + 1)


# --------------------------------------------------------------------------------------------
# model selection


@dataclass(frozen=True)
class Criteria:
    """AIC and BIC of one clustering (slide 87), with what they are made of."""

    aic: float
    bic: float
    log_likelihood: float
    n_parameters: float


def information_criteria(
    inertia: float, sizes: np.ndarray, n_samples: int, dimension: float
) -> Criteria:
    """AIC ``= -2 ln L + 2B`` and BIC ``= -2 ln L + B ln M`` of a k-means clustering (slide 87).

    The likelihood is that of the clustering read as a mixture of spherical Gaussians with one
    shared variance in a feature space of ``dimension`` D (the hard-assignment likelihood of
    X-means, Pelleg & Moore 2000): mixing weights ``n_c / M``, variance
    ``σ² = inertia / (M D)``, so
    ``ln L = Σ_c n_c ln(n_c / M) - (M D / 2)(ln(2π σ²) + 1)``, with
    ``B = (K - 1) + K D + 1`` free parameters (weights, centres, variance).

    Parameters
    ----------
    inertia : float
        ``Σ_i ||φ_i - m_c(i)||²``.
    sizes : ndarray (K,)
        Points per cluster (empty clusters are not counted in K).
    n_samples : int
        M.
    dimension : float
        D; in a kernel's feature space the effective dimension of the data
        (:meth:`GramSpace.effective_dimension`).
    """
    sizes = np.asarray(sizes, dtype=np.float64)
    sizes = sizes[sizes > 0]
    m, d, k = float(n_samples), float(dimension), float(sizes.size)
    variance = max(float(inertia) / (m * d), np.finfo(np.float64).tiny)
    log_l = float(np.sum(sizes * np.log(sizes / m))) - 0.5 * m * d * (
        np.log(2 * np.pi * variance) + 1.0
    )
    b = (k - 1.0) + k * d + 1.0
    return Criteria(-2 * log_l + 2 * b, -2 * log_l + b * np.log(m), log_l, b)


# --------------------------------------------------------------------------------------------
# fitted models: distances of new points to the centres


def kernel_diagonal(kernel: Any, X: np.ndarray) -> np.ndarray:
    """``k(x, x)`` of every row, from small diagonal blocks (no n × n block)."""
    X = np.asarray(X)
    out = np.empty(X.shape[0])
    for r0 in range(0, X.shape[0], 256):
        Xs = X[r0 : r0 + 256]
        out[r0 : r0 + Xs.shape[0]] = np.diagonal(np.asarray(kernel.cross(Xs, Xs)))
    return out


def dense_kernel(kernel: Any, X: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """``K(X, reference)`` in float64, row blocks spread over the cores (a precomputed kernel:
    a copy of X)."""
    if kernel.precomputed:
        return np.array(X, dtype=np.float64)
    X = np.asarray(X)
    n_ref = int(np.shape(reference)[0])
    out = np.empty((X.shape[0], n_ref))
    rows = sub_block_rows(n_ref)

    def fill(r0: int) -> None:
        out[r0 : r0 + rows] = kernel.cross(X[r0 : r0 + rows], reference)

    map_on_cores(fill, list(range(0, X.shape[0], rows)))
    return out


@dataclass(frozen=True)
class GramCentres:
    """Centres given by the training points: ``m_c = Σ_j coef_jc φ(x_j)`` (exact solver).

    Attributes
    ----------
    kernel : Kernel
    reference : ndarray
        The training points as ``kernel.cross`` takes them.
    coef : ndarray (n_train, k)
        ``1/|c|`` on the members of c, 0 elsewhere.
    centre_sq_norms : ndarray (k,)
        ``||m_c||²``.
    """

    kernel: Any
    reference: np.ndarray
    coef: np.ndarray
    centre_sq_norms: np.ndarray

    def distances(self, X: Any, *, point_norms: bool = True) -> np.ndarray:
        """``||φ(x) - m_c||²`` (n, k); without ``k(x, x)`` when ``point_norms`` is False (the
        nearest centre does not depend on it)."""
        X = np.asarray(X)
        n_ref = int(self.coef.shape[0])
        out = np.empty((X.shape[0], self.coef.shape[1]))
        rows = sub_block_rows(n_ref)
        for r0 in range(0, X.shape[0], rows):
            Xb = X[r0 : r0 + rows]
            Kx = np.asarray(self.kernel.cross(Xb, self.reference), dtype=np.float64)
            d = self.centre_sq_norms[None, :] - 2.0 * (Kx @ self.coef)
            if point_norms:
                d += kernel_diagonal(self.kernel, Xb)[:, None]
            out[r0 : r0 + Xb.shape[0]] = d
        return out


@dataclass(frozen=True)
class FeatureCentres:
    """Centres ``M`` (k, r) in an explicit feature space (Nyström or landmark features)."""

    feature_map: Any
    centres: np.ndarray
    centre_sq_norms: np.ndarray

    def distances(self, X: Any, *, point_norms: bool = True) -> np.ndarray:
        """``||φ(x) - m_c||²`` (n, k) (without ``||φ(x)||²`` when ``point_norms`` is False)."""
        X = np.asarray(X)
        out = np.empty((X.shape[0], self.centres.shape[0]))
        rows = sub_block_rows(self.centres.shape[1])
        for r0 in range(0, X.shape[0], rows):
            Phi = features(self.feature_map, X[r0 : r0 + rows])
            d = self.centre_sq_norms[None, :] - 2.0 * np.asarray(Phi @ self.centres.T)
            if point_norms:
                d += squared_norms(Phi)[:, None]
            out[r0 : r0 + Phi.shape[0]] = d
        return out


def gram_centres(
    kernel: Any, reference: np.ndarray, space: GramSpace, centre_labels: np.ndarray, k: int
) -> GramCentres:
    """The :class:`GramCentres` of the clusters ``centre_labels`` of ``space``."""
    _, cc, sizes = space.inner(centre_labels, k)
    coef = _one_hot(centre_labels, k).toarray()
    with np.errstate(divide="ignore", invalid="ignore"):
        coef = np.where(sizes[None, :] > 0, coef / sizes[None, :], 0.0)
    return GramCentres(kernel, reference, coef, np.where(sizes > 0, cc, np.inf))


def feature_centres(
    feature_map: Any, space: FeatureSpace, centre_labels: np.ndarray, k: int
) -> FeatureCentres:
    """The :class:`FeatureCentres` of the clusters ``centre_labels`` of ``space``."""
    M, sizes = space.centres(centre_labels, k)
    M = np.where(sizes[:, None] > 0, M, 0.0)
    cc = np.where(sizes > 0, np.einsum("ij,ij->i", M, M), np.inf)
    return FeatureCentres(feature_map, M, cc)
