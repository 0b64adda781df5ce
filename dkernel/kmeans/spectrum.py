"""The normalized kernel spectrum of ``KernelKMeans(n_clusters='auto')`` for a precomputed
kernel (no coordinates for a k-NN graph): NumPy/SciPy only."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from dkernel.errors import InvalidInputError
from dkernel.kmeans.lloyd import FeatureSpace, GramSpace


def normalized_kernel_spectrum(space: GramSpace | FeatureSpace, n_values: int) -> np.ndarray:
    """The ``n_values`` leading eigenvalues (descending) of ``D^-1/2 K D^-1/2``, ``D`` the row
    sums of the kernel: of the kernel matrix (dense below 1 000 rows, Lanczos on the implicit
    product beyond: no second n × n matrix), or for features Φ the Gram ``Bᵀ B`` of
    ``B = D^-1/2 Φ`` (r × r, never n × n)."""
    from scipy.linalg import eigh
    from scipy.sparse.linalg import LinearOperator, eigsh

    gram = isinstance(space, GramSpace)
    if gram:
        K = space.K
        d = K.sum(axis=1)
    else:
        Phi = space.Phi
        d = np.asarray(Phi @ np.asarray(Phi.sum(axis=0)).ravel()).ravel()
    if not np.all(d > 0):
        raise InvalidInputError(
            f"{int(np.sum(~(d > 0)))} rows of the kernel do not sum to a positive value; "
            "n_clusters='auto' compares k on the spectrum of D^-1/2 K D^-1/2, which needs "
            "positive row sums. Pass a sequence of n_clusters to choose k by the criterion."
        )
    s = 1.0 / np.sqrt(d)
    if gram:
        n = int(K.shape[0])
        k = min(int(n_values), n)
        if n <= 1000 or k >= n - 1:
            A = K * s[:, None] * s[None, :]
            values = eigh(A, eigvals_only=True, subset_by_index=[n - k, n - 1])
        else:

            def matvec(v: np.ndarray) -> np.ndarray:
                return s * (K @ (s * np.ravel(v)))

            op = LinearOperator((n, n), matvec=matvec, dtype=np.float64)
            v0 = np.full(n, 1.0 / np.sqrt(n))
            values = eigsh(op, k=k, which="LA", return_eigenvectors=False, v0=v0)
    else:
        B = sp.diags(s) @ Phi if sp.issparse(Phi) else Phi * s[:, None]
        G = B.T @ B
        G = G.toarray() if sp.issparse(G) else np.asarray(G)
        r = G.shape[0]
        k = min(int(n_values), r)
        values = eigh(0.5 * (G + G.T), eigvals_only=True, subset_by_index=[r - k, r - 1])
    return np.sort(values)[::-1]
