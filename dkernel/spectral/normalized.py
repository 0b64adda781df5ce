"""Normalized (Ng, Jordan & Weiss 2002 [Ng2002]) spectral embedding and the eigengap hint.

NJW: eigenvectors of ``D^{-1/2} K D^{-1/2}`` (same eigenvalues as the random-walk matrix
``D^{-1} K``, whose eigenvectors are ``D^{-1/2} e``); rows of the top-k eigenvectors are normalized
to unit length and clustered with k-means. Eigenvalues of ``D^{-1} K`` close to 1 indicate the
number of well-separated clusters (Løkse 2014, §10.1 [Lokse2014]): :func:`eigengap_hint`. NumPy
only; dense, for N up to a few ×10⁴ (use :class:`dkernel.spectral.NystromEmbedding` beyond).
Kernel k-means is in ``dkernel.kmeans`` (``kernel_kmeans``, :class:`dkernel.KernelKMeans`).
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
