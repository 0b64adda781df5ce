"""Dense spectral embeddings of an in-memory kernel matrix (NumPy only).

KPCA (Schölkopf et al. 1998 [Scholkopf1998]; PCKID: Løkse 2020, Paper I, Eq. 5 [Lokse2020]): center
K, take the top eigenpairs, ``Z = E Λ^{1/2}``. Uncentered KPCA skips the centering. KECA (Jenssen
2010 [Jenssen2010]; Agersborg 2012, ch. 4 [Agersborg2012]): eigenpairs of the *uncentered* K ordered
by the Rényi-entropy contribution ``ψ_j = λ_j (e_j^T 1)^2``; keep the top ``n_components``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dkernel.linalg.eigen import dense_eigh


@dataclass(frozen=True)
class DenseEmbedding:
    """Result of a dense spectral embedding.

    Attributes
    ----------
    embedding : ndarray (n, k)
        ``E Λ^{1/2}`` of the selected eigenpairs, in selection order.
    eigenvalues : ndarray (k,)
    eigenvectors : ndarray (n, k)
    criterion : ndarray (k,)
        The ordering criterion of the selected pairs (λ for KPCA, ψ for KECA).
    indices : ndarray (k,)
        Rank of each selected pair among all eigenvalues in descending order (0 = largest).
    """

    embedding: np.ndarray
    eigenvalues: np.ndarray
    eigenvectors: np.ndarray
    criterion: np.ndarray
    indices: np.ndarray


def center_kernel(K: np.ndarray) -> np.ndarray:
    """``H K H`` with ``H = I - 11^T/n`` (a new array)."""
    col = K.mean(axis=0)
    row = K.mean(axis=1)
    return K - col[None, :] - row[:, None] + K.mean()


def kpca_embedding(K: np.ndarray, n_components: int, *, centered: bool = True) -> DenseEmbedding:
    """Kernel PCA embedding ``Z = E_k Λ_k^{1/2}`` of a dense kernel matrix.

    Notes
    -----
    O(n^2) memory; O(n^2) per Lanczos product from ``LANCZOS_MIN_ROWS`` rows, else O(n^3).
    """
    Kc = center_kernel(K) if centered else np.asarray(K, dtype=np.float64)
    values, vectors = dense_eigh(Kc, n_components, iterative=True)
    return DenseEmbedding(
        embedding=vectors * np.sqrt(values)[None, :],
        eigenvalues=values,
        eigenvectors=vectors,
        criterion=values,
        indices=np.arange(values.size),
    )


def keca_embedding(
    K: np.ndarray,
    n_components: int,
    *,
    n_candidates: int | None = None,
) -> DenseEmbedding:
    """Kernel entropy component analysis of an uncentered kernel matrix.

    Parameters
    ----------
    K : ndarray (n, n)
        Uncentered, PSD kernel matrix.
    n_components : int
        Number of axes kept (those with the largest entropy contribution ψ).
    n_candidates : int, optional
        Search ψ among only the leading eigenpairs. By default the axes are those of the
        whole spectrum, found from as few leading pairs as prove it
        (``entropy_candidates``).

    Notes
    -----
    ψ_j = λ_j (e_j^T 1)^2 is the contribution of axis j to the Rényi quadratic entropy
    estimate V = 1^T K 1 / n^2 ([Agersborg2012], Eq. 4.5 and 4.6).
    """
    K = np.asarray(K, dtype=np.float64)
    if n_candidates is None:
        values, vectors = entropy_candidates(K, int(n_components))
    else:
        values, vectors = dense_eigh(K, n_candidates)
    return keca_of_pairs(values, vectors, n_components)


def keca_of_pairs(values: np.ndarray, vectors: np.ndarray, n_components: int) -> DenseEmbedding:
    """The KECA axes among leading eigenpairs of an uncentered kernel (those of
    ``entropy_candidates``, or a fixed number): the ``n_components`` of largest ψ."""
    psi = values * (vectors.sum(axis=0) ** 2)
    order = np.argsort(-psi, kind="stable")[:n_components]
    vals, vecs = values[order], vectors[:, order]
    return DenseEmbedding(
        embedding=vecs * np.sqrt(vals)[None, :],
        eigenvalues=vals,
        eigenvectors=vecs,
        criterion=psi[order],
        indices=order,
    )


def entropy_candidates(
    K: np.ndarray, n_components: int, *, start: tuple[np.ndarray, np.ndarray] | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Leading eigenpairs of K, enough that no other can hold one of the top ψ.

    ``start``: leading pairs of K already computed (for another ``n_components``), returned
    as they are when they suffice (the test below), else the solve starts past them.

    Over all pairs ``Σ_j ψ_j = 1^T K 1``, and ``ψ_j <= n λ_j`` (``(e_j^T 1)^2 <= n``). Once
    the m leading pairs leave the others less than the ``n_components``-th largest ψ among
    them, ``min(n λ_m, 1^T K 1 - Σ_{j<=m} ψ_j)``, no other pair can enter the top: the axes
    are those a search of the whole spectrum finds. m grows fourfold until that holds (all n
    at worst). Smooth kernels need a few dozen pairs (at most 68 over the 23 sets of
    ``bench_defaults.py``), a fraction of the cost of all of them.
    """
    n = K.shape[0]
    total = float(K.sum())
    m = min(n, max(64, 8 * n_components))
    known = start if start is not None and start[0].size >= n_components else None
    while True:
        if known is not None:
            (values, vectors), known = known, None
            m = values.size
        else:
            values, vectors = dense_eigh(K, m, iterative=True)
        if m == n:
            return values, vectors
        psi = values * vectors.sum(axis=0) ** 2
        kth = np.sort(psi)[::-1][n_components - 1]  # m >= n_components here
        # the pairs not computed may have round-off-level negative ψ, which the sum hides
        rest = total - float(psi.sum()) + 1e-9 * (abs(total) + n * float(values[0]))
        if min(n * float(values[-1]), rest) < kth:
            return values, vectors
        m = min(n, max(4 * m, 8 * n_components))
