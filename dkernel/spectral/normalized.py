"""Normalized (Ng–Jordan–Weiss) spectral embedding, the eigengap hint and kernel k-means.

NJW: eigenvectors of ``D^{-1/2} K D^{-1/2}`` (same eigenvalues as the random-walk matrix
``D^{-1} K``, whose eigenvectors are ``D^{-1/2} e``); rows of the top-k eigenvectors are
normalized to unit length and clustered with k-means. Eigenvalues of ``D^{-1} K`` close to 1
indicate the number of well-separated clusters (seed 000 §10.1): :func:`eigengap_hint`.
NumPy only; dense, for N up to a few ×10⁴ (use :class:`dkernel.spectral.NystromEmbedding`
beyond).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dkernel.errors import InvalidInputError
from dkernel.linalg.eigen import dense_eigh
from dkernel.linalg.kmeans import normalize_rows


@dataclass(frozen=True)
class NormalizedEmbedding:
    """Result of :func:`normalized_embedding`.

    Attributes
    ----------
    eigenvectors : ndarray (n, k)
        Top eigenvectors of ``D^{-1/2} K D^{-1/2}`` (orthonormal, signs fixed).
    eigenvalues : ndarray (k,)
        Their eigenvalues (also those of ``D^{-1} K``), descending, at most 1.
    degrees : ndarray (n,)
        ``d = K 1``.
    """

    eigenvectors: np.ndarray
    eigenvalues: np.ndarray
    degrees: np.ndarray

    @property
    def random_walk_vectors(self) -> np.ndarray:
        """Right eigenvectors of ``D^{-1} K``: ``D^{-1/2} e``."""
        return self.eigenvectors / np.sqrt(self.degrees)[:, None]

    @property
    def njw(self) -> np.ndarray:
        """Row-normalized eigenvectors (the points NJW clusters)."""
        return normalize_rows(self.eigenvectors)


def check_degrees(degrees: np.ndarray, what: str = "kernel") -> None:
    """Raise when a degree is not strictly positive (normalization is undefined)."""
    bad = ~(degrees > 0)
    if bad.any():
        raise InvalidInputError(
            f"The normalized embedding needs positive degrees d = K 1, but {int(bad.sum())} of "
            f"{degrees.size} are <= 0 for this {what} (smallest {float(np.min(degrees)):.3g}). "
            "Use a non-negative kernel (rbf, pck) or the 'kpca' embedding."
        )


def normalized_embedding(K: np.ndarray, n_components: int) -> NormalizedEmbedding:
    """Top eigenpairs of the symmetric normalized kernel ``D^{-1/2} K D^{-1/2}``.

    Parameters
    ----------
    K : ndarray (n, n)
        Symmetric kernel with positive degrees.
    n_components : int
        Number of eigenpairs.

    Returns
    -------
    NormalizedEmbedding

    Notes
    -----
    O(n^3) time, O(n^2) memory (dense eigen-solve).
    """
    K = np.asarray(K, dtype=np.float64)
    d = K.sum(axis=1)
    check_degrees(d)
    s = 1.0 / np.sqrt(d)
    values, vectors = dense_eigh(K * s[:, None] * s[None, :], n_components)
    return NormalizedEmbedding(eigenvectors=vectors, eigenvalues=values, degrees=d)


def eigengap_hint(eigenvalues: np.ndarray, max_clusters: int | None = None) -> int:
    """Number of clusters suggested by the largest gap in descending eigenvalues.

    Returns ``argmax_k (λ_k - λ_{k+1})`` over ``k = 1..max_clusters`` (1-based): with k
    well-separated clusters the normalized kernel has k eigenvalues near 1 and a gap after them.

    Examples
    --------
    >>> eigengap_hint(np.array([1.0, 0.99, 0.98, 0.4, 0.3]))
    3
    """
    lam = np.sort(np.asarray(eigenvalues, dtype=np.float64))[::-1]
    if lam.size < 2:
        return 1
    top = lam.size - 1 if max_clusters is None else min(int(max_clusters), lam.size - 1)
    gaps = lam[:top] - lam[1 : top + 1]
    return int(np.argmax(gaps)) + 1


def _kernel_kmeans_pp(K: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    n = K.shape[0]
    diag = np.diagonal(K)
    first = int(rng.integers(n))
    chosen = [first]
    d2 = np.maximum(diag + diag[first] - 2 * K[:, first], 0)
    while len(chosen) < k:
        total = d2.sum()
        nxt = int(rng.choice(n, p=d2 / total)) if total > 0 else int(rng.integers(n))
        chosen.append(nxt)
        d2 = np.minimum(d2, np.maximum(diag + diag[nxt] - 2 * K[:, nxt], 0))
    return np.asarray(chosen)


def kernel_kmeans(
    K: np.ndarray,
    n_clusters: int,
    *,
    n_init: int = 10,
    max_iter: int = 100,
    random_state: int | None = None,
) -> tuple[np.ndarray, float]:
    """Kernel k-means on a dense kernel matrix, best of ``n_init`` by cost.

    Minimises ``Σ_i ||φ(x_i) - m_{c(i)}||^2`` in the feature space of K, where
    ``||φ_i - m_c||^2 = K_ii - 2/|c| Σ_{j∈c} K_ij + 1/|c|^2 Σ_{j,l∈c} K_jl``; starts from
    k-means++ seeds drawn with the kernel-induced distance.

    Parameters
    ----------
    K : ndarray (n, n)
        Symmetric PSD kernel.
    n_clusters : int
    n_init : int
        Restarts; the lowest cost wins.
    max_iter : int
        Lloyd iterations per restart.
    random_state : int, optional

    Returns
    -------
    labels : ndarray (n,) of int64
    cost : float

    Notes
    -----
    O(n^2 k) per iteration (one (n, n) × (n, k) product); O(n^2) memory for K. For large n
    run k-means on a Nyström feature map instead (same objective for the approximated kernel).
    """
    K = np.asarray(K, dtype=np.float64)
    n = K.shape[0]
    if not (isinstance(n_clusters, int | np.integer) and 1 <= n_clusters <= n):
        raise InvalidInputError(
            f"The 'n_clusters' parameter of kernel_kmeans must be an int in [1, {n}]. "
            f"Got {n_clusters!r} instead."
        )
    rng = np.random.default_rng(random_state)
    diag = np.diagonal(K)
    best_labels, best_cost = None, np.inf
    for _ in range(max(1, n_init)):
        seeds = _kernel_kmeans_pp(K, n_clusters, rng)
        dist = diag[:, None] + diag[seeds][None, :] - 2 * K[:, seeds]
        labels = np.argmin(dist, axis=1)
        for _ in range(max_iter):
            H = np.zeros((n, n_clusters))
            H[np.arange(n), labels] = 1.0
            sizes = H.sum(axis=0)
            live = sizes > 0
            KH = K @ H
            within = np.einsum("ic,ic->c", H, KH)
            with np.errstate(divide="ignore", invalid="ignore"):
                dist = diag[:, None] - 2 * KH / sizes + within / sizes**2
            dist[:, ~live] = np.inf
            new = np.argmin(dist, axis=1)
            if np.array_equal(new, labels):
                break
            labels = new
        cost = float(np.sum(dist[np.arange(n), labels]))
        if cost < best_cost - 1e-12:
            best_labels, best_cost = labels.copy(), cost
    _, best_labels = np.unique(best_labels, return_inverse=True)
    return best_labels.astype(np.int64), best_cost
