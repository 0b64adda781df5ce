"""The Nyström landmark stage: landmarks of a data set and the landmark-side map of a kernel.

With m landmarks ``L`` and ``K_mm = U Λ Uᵀ`` (eigenvalues below ``rtol · λ_max`` dropped), every
point gets the explicit features ``φ(x) = W0ᵀ k(L, x)``, ``W0 = U Λ^{-1/2}``, whose Gram matrix
is the Nyström approximation ``K̃ = K_nm K_mm⁺ K_mn`` (Williams & Seeger 2001 [Williams2001]).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from dkernel.errors import InvalidInputError
from dkernel.graphs.bipartite import select_landmarks
from dkernel.kernels.registry import ADAPTIVE_KERNELS, Kernel, with_landmark_reference
from dkernel.linalg.eigen import dense_eigh


def nystrom_basis(K_mm: np.ndarray, *, rtol: float = 1e-10) -> np.ndarray:
    """``W0 = U_r Λ_r^{-1/2}`` from the landmark kernel, dropping eigenvalues below rtol·λ_max.

    ``φ(x) = W0ᵀ k_m(x)``; ``Φ Φᵀ = K_nm K_mm⁺ K_mn``.

    Notes
    -----
    O(m^3) time, O(m^2) memory.
    """
    values, vectors = dense_eigh(np.asarray(K_mm, dtype=np.float64), clip=False)
    top = float(values[0]) if values.size else 0.0
    if not top > 0:
        raise InvalidInputError(
            "The landmark kernel matrix has no positive eigenvalue; the kernel is degenerate "
            "on these landmarks (all points equal?). Check the data or the kernel parameters."
        )
    keep = values > rtol * top
    return vectors[:, keep] / np.sqrt(values[keep])[None, :]


@dataclass(frozen=True)
class NystromLandmarks:
    """The landmark side of a Nyström approximation.

    Attributes
    ----------
    kernel : Kernel
        The kernel, with its neighbour radii measured among the landmarks for the adaptive
        kernels (:func:`~dkernel.kernels.registry.with_landmark_reference`) when the
        landmarks are not every training point.
    indices : ndarray of int64 (m,)
        The training rows that are landmarks, sorted.
    reference : ndarray
        What ``kernel.cross`` takes as landmarks: their coordinates, or their indices for a
        precomputed kernel.
    basis : ndarray (m, r)
        ``W0`` (:func:`nystrom_basis`): ``φ(x) = W0ᵀ k(L, x)``.
    """

    kernel: Kernel
    indices: np.ndarray
    reference: np.ndarray
    basis: np.ndarray


def fit_nystrom_landmarks(
    X: Any,
    kernel: Kernel,
    n_landmarks: int,
    *,
    method: str = "kmeans++",
    random_state: int | None = 0,
    rtol: float = 1e-10,
) -> NystromLandmarks:
    """Choose ``n_landmarks`` training rows of ``X`` and fit the Nyström basis of ``kernel``.

    Parameters
    ----------
    X : ndarray or dask array (n, d)
        Training data (the square kernel matrix for a precomputed kernel).
    kernel : Kernel
    n_landmarks : int
        m; every row (in order) when m >= n, which makes the approximation exact on the
        training points.
    method : {'kmeans++', 'uniform'}
        See :func:`dkernel.graphs.bipartite.select_landmarks`.
    random_state : int, optional
    rtol : float
        Landmark-kernel eigenvalues below ``rtol · λ_max`` are dropped (pseudo-inverse).

    Returns
    -------
    NystromLandmarks
    """
    n = int(X.shape[0])
    chosen = select_landmarks(
        X,
        n_landmarks,
        method=method,
        random_state=random_state,
        precomputed=kernel.precomputed,
    )
    idx = np.asarray(chosen.indices, dtype=np.int64)
    X_land = chosen.points
    L = idx if kernel.precomputed else np.asarray(X_land, dtype=np.float64)
    if idx.size < n and kernel.name in ADAPTIVE_KERNELS:
        kernel = with_landmark_reference(kernel, L, n)
        X_land = L
    K_mm = kernel.cross(X_land, L)
    K_mm = 0.5 * (K_mm + K_mm.T)
    return NystromLandmarks(kernel, idx, L, nystrom_basis(K_mm, rtol=rtol))
