"""The Nyström landmark stage: landmarks of a data set and the landmark-side map of a kernel.

With m landmarks ``L`` and ``K_mm = U Λ Uᵀ`` (eigenvalues below ``rtol · λ_max`` dropped), every
point gets the explicit features ``φ(x) = W0ᵀ k(L, x)``, ``W0 = U Λ^{-1/2}``, whose Gram matrix
is the Nyström approximation ``K̃ = K_nm K_mm⁺ K_mn`` (Williams & Seeger 2001 [Williams2001]).

What every landmark-based estimator shares lives here: the kernel's parameters as such an
estimator resolves them (:func:`landmark_kernel_params`), the landmark stage
(:func:`fit_nystrom_landmarks`), the feature map it gives (:class:`NystromFeatureMap`) and the
choice between it and a kernel's own finite map (:func:`explicit_feature_map`).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any

import numpy as np

from dkernel.graphs.bipartite import select_landmarks
from dkernel.kernels.registry import ADAPTIVE_KERNELS, KERNELS, Kernel, with_landmark_reference
from dkernel.kmeans.features import sub_block_rows
from dkernel.linalg.eigen import dense_eigh, leading_eigenpairs
from dkernel.linalg.threads import map_on_cores


def nystrom_basis(K_mm: np.ndarray, *, rtol: float = 1e-10) -> np.ndarray:
    """``W0 = U_r Λ_r^{-1/2}`` from the landmark kernel, dropping eigenvalues below rtol·λ_max.

    ``φ(x) = W0ᵀ k_m(x)``; ``Φ Φᵀ = K_nm K_mm⁺ K_mn``.

    Notes
    -----
    O(m^3) time, O(m^2) memory.
    """
    values, vectors = leading_eigenpairs(
        *dense_eigh(np.asarray(K_mm, dtype=np.float64), clip=False),
        rtol=rtol,
        degenerate="The landmark kernel matrix has no positive eigenvalue; the kernel is "
        "degenerate on these landmarks (all points equal?). Check the data or the kernel "
        "parameters.",
    )
    return vectors / np.sqrt(values)[None, :]


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


@dataclass(frozen=True)
class NystromFeatureMap:
    """``φ(x) = W0ᵀ k(L, x)``: the Nyström features of one kernel.

    Its Gram matrix is the Nyström approximation ``K_nm K_mm⁺ K_mn``, which is ``K`` itself on
    the training points when every training point is a landmark. It holds only the kernel, the
    landmarks and the basis, so it pickles and travels to Dask workers.

    Attributes
    ----------
    kernel : Kernel
        Anything with ``cross(X, landmarks) -> (n, m)`` (a
        :class:`~dkernel.kernels.registry.Kernel`).
    landmarks : ndarray
        The landmarks as ``kernel.cross`` takes them (points, or column indices for a
        precomputed kernel).
    basis : ndarray (m, r)
        ``W0 = U Λ^{-1/2}`` of the landmark kernel.
    """

    kernel: Any
    landmarks: np.ndarray
    basis: np.ndarray

    @property
    def n_features(self) -> int:
        """r, the rank kept."""
        return int(self.basis.shape[1])

    def transform(self, X: Any) -> np.ndarray:
        """``Φ = K(X, L) W0`` (n, r), in sub-blocks of about 32 MiB spread over the cores."""
        X = np.asarray(X)
        out = np.empty((X.shape[0], self.n_features))
        rows = sub_block_rows(self.basis.shape[0])

        def fill(r0: int) -> None:
            block = self.kernel.cross(X[r0 : r0 + rows], self.landmarks)
            out[r0 : r0 + rows] = np.asarray(block, dtype=np.float64) @ self.basis

        map_on_cores(fill, list(range(0, X.shape[0], rows)))
        return out


def landmark_kernel_params(
    kernel: Any,
    params: dict | None,
    *,
    seed: int | None,
    sigma_fraction: float,
    sigma: float | None = None,
) -> dict:
    """The parameters an estimator passes to ``make_kernel(kernel, X, **params)``.

    Those given win; an ``'rbf'`` kernel then gets the estimator's ``sigma`` and
    ``sigma_fraction``, and a registered kernel whose factory draws a sample gets ``seed``
    (0 when None), so that a fit is reproducible under one ``random_state``.

    Parameters
    ----------
    kernel : str or callable
        The estimator's ``kernel``.
    params : dict, optional
        The estimator's ``kernel_params``.
    seed : int, optional
    sigma_fraction : float
        Fraction of the median distance for the RBF rule of thumb.
    sigma : float, optional
        RBF width; the rule of thumb when None.

    Returns
    -------
    dict
    """
    out = dict(params or {})
    if isinstance(kernel, str) and kernel == "rbf":
        out.setdefault("sigma", sigma)
        out.setdefault("sigma_fraction", sigma_fraction)
    if isinstance(kernel, str) and kernel in KERNELS:
        if "seed" in inspect.signature(KERNELS.lookup(kernel).factory).parameters:
            out.setdefault("seed", seed if seed is not None else 0)
    return out


def explicit_feature_map(
    X: Any,
    kernel: Kernel,
    n_landmarks: int,
    *,
    method: str = "kmeans++",
    random_state: int | None = 0,
) -> tuple[Kernel, Any, np.ndarray | None]:
    """An explicit feature map of ``kernel`` on the training rows ``X``.

    The kernel's own finite map when it has one (the ``landmark`` kernel's), else its
    :class:`NystromFeatureMap` on ``n_landmarks`` landmarks (:func:`fit_nystrom_landmarks`).

    Parameters
    ----------
    X : ndarray or dask array (n, d)
    kernel : Kernel
    n_landmarks : int
    method : {'kmeans++', 'uniform'}
    random_state : int, optional

    Returns
    -------
    kernel : Kernel
        The kernel the map evaluates (the adaptive kernels' radii measured among the
        landmarks).
    feature_map : object
        With ``n_features`` and ``transform`` (or ``sparse_features``).
    landmark_indices : ndarray of int64 or None
        The training rows used as landmarks; None for a kernel's own map.
    """
    if kernel.feature_map is not None:
        return kernel, kernel.feature_map, None
    stage = fit_nystrom_landmarks(X, kernel, n_landmarks, method=method, random_state=random_state)
    return (
        stage.kernel,
        NystromFeatureMap(stage.kernel, stage.reference, stage.basis),
        stage.indices,
    )
