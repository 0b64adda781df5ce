"""Regularised kernel canonical correlation analysis ([MLSlides2012], slides 12-16).

Numeric layer: NumPy/SciPy on in-memory arrays, no Dask.

Kernel CCA looks for ``f = Φ_x wx`` and ``g = Φ_y wy`` of maximal correlation. With centered
features and covariances ``C = Φᵀ Φ / n``, the regularised problem is

    ``max wxᵀ Cxy wy``  subject to  ``wxᵀ (Cxx + κ I) wx = wyᵀ (Cyy + κ I) wy = 1``,

whose dual (``wx = Φ_xᵀ α``) is Hardoon, Szedmak & Shawe-Taylor's (2004) regularised
generalized eigenproblem with constraints ``αᵀ (Kx² + n κ Kx) α = 1``: Bach & Jordan's
``(Kx + nκ/2 I)²`` (slide 15) without its ``(nκ/2)² I`` term, which only bounds the part of
α in the null space of ``Kx``. The solution is a whitened SVD: with
``Tx = Vx (Ex + κ)^{-1/2}`` from ``Cxx = Vx Ex Vxᵀ`` (and ``Ty``), the singular values of
``Txᵀ Cxy Ty`` are the regularised canonical correlations and its singular vectors give
``wx = Tx p``, ``wy = Ty q``.

Every view is an explicit centered feature map, so one solver serves both regimes:

* exact (small N): the kernel PCA coordinates of the centered training kernel,
  ``Φ = U Λ^{1/2}`` (:func:`kernel_pca_features`); out of sample ``φ(x) = Λ^{-1/2} Uᵀ k_c(x)``
  with the centered kernel row ``k_c``, and ``z(x) = k_c(x)ᵀ α`` with the dual coefficients
  ``α = U Λ^{-1/2} w``;
* Nyström (large N): ``φ(x) = W0ᵀ k(L, x)`` minus its training mean, whose covariances
  accumulate chunk by chunk (:func:`moments`).

With a linear kernel and κ → 0 this is linear CCA.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from dkernel.kmeans.features import features, sub_block_rows
from dkernel.linalg.eigen import dense_eigh, leading_eigenpairs

#: Feature directions with covariance below this share of the largest are dropped.
RTOL = 1e-10


@dataclass(frozen=True)
class CenteredKernelFeatures:
    """``φ(x) = Λ^{-1/2} Uᵀ k_c(x)``: kernel PCA coordinates of the centered training kernel.

    Attributes
    ----------
    kernel : Kernel
    reference : ndarray
        The training points as ``kernel.cross`` takes them.
    col_mean : ndarray (n_train,)
        Column means of the training kernel.
    total_mean : float
        Mean of the training kernel.
    projection : ndarray (n_train, r)
        ``U Λ^{-1/2}``.
    """

    kernel: Any
    reference: np.ndarray
    col_mean: np.ndarray
    total_mean: float
    projection: np.ndarray

    @property
    def n_features(self) -> int:
        return int(self.projection.shape[1])

    def centered_rows(self, X: Any) -> np.ndarray:
        """``k_c(x) = k(x, X) - mean_j k(x, x_j) - col_mean + total_mean`` (n, n_train)."""
        Kx = np.asarray(self.kernel.cross(np.asarray(X), self.reference), dtype=np.float64)
        return Kx - Kx.mean(axis=1, keepdims=True) - self.col_mean[None, :] + self.total_mean

    def transform(self, X: Any) -> np.ndarray:
        """``φ(X)`` (n, r), row block by row block."""
        X = np.asarray(X)
        out = np.empty((X.shape[0], self.n_features))
        rows = sub_block_rows(self.projection.shape[0])
        for r0 in range(0, X.shape[0], rows):
            out[r0 : r0 + rows] = self.centered_rows(X[r0 : r0 + rows]) @ self.projection
        return out


@dataclass(frozen=True)
class CenteredFeatures:
    """An explicit feature map minus its training mean: ``φ(x) - μ``."""

    feature_map: Any
    mean: np.ndarray

    @property
    def n_features(self) -> int:
        return int(self.mean.size)

    def transform(self, X: Any) -> np.ndarray:
        Phi = features(self.feature_map, X)
        Phi = Phi.toarray() if hasattr(Phi, "toarray") else Phi
        return Phi - self.mean[None, :]


def kernel_pca_features(
    kernel: Any, reference: np.ndarray, K: np.ndarray
) -> tuple[CenteredKernelFeatures, np.ndarray]:
    """The exact feature map of a training kernel ``K`` and the training features ``U Λ^{1/2}``.

    Eigenvalues of the centered kernel below ``RTOL · λ_max`` are dropped.

    Notes
    -----
    O(n³) time (a dense eigen-solve), O(n²) memory.
    """
    K = np.asarray(K, dtype=np.float64)
    col = K.mean(axis=0)
    total = float(col.mean())
    Kc = K - col[None, :] - col[:, None] + total
    lam, U = leading_eigenpairs(
        *dense_eigh(0.5 * (Kc + Kc.T), clip=True),
        rtol=RTOL,
        degenerate="The centered kernel of a view has no positive eigenvalue: every point "
        "looks the same to the kernel (constant data, or a kernel too narrow or too wide).",
    )
    model = CenteredKernelFeatures(kernel, reference, col, total, U / np.sqrt(lam)[None, :])
    return model, U * np.sqrt(lam)[None, :]


@dataclass(frozen=True)
class Moments:
    """Sums over the rows of two feature maps: n, ``Σφx``, ``Σφy``, ``Σφxφxᵀ``, ``Σφyφyᵀ``,
    ``Σφxφyᵀ``."""

    n: int
    sx: np.ndarray
    sy: np.ndarray
    xx: np.ndarray
    yy: np.ndarray
    xy: np.ndarray

    def __add__(self, other: Moments) -> Moments:
        return Moments(
            self.n + other.n,
            self.sx + other.sx,
            self.sy + other.sy,
            self.xx + other.xx,
            self.yy + other.yy,
            self.xy + other.xy,
        )

    def covariances(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``Cxx, Cyy, Cxy`` (divided by n) and the means ``μx, μy``."""
        mx, my = self.sx / self.n, self.sy / self.n
        Cxx = self.xx / self.n - np.outer(mx, mx)
        Cyy = self.yy / self.n - np.outer(my, my)
        Cxy = self.xy / self.n - np.outer(mx, my)
        return 0.5 * (Cxx + Cxx.T), 0.5 * (Cyy + Cyy.T), Cxy, mx, my


def moments(Px: np.ndarray, Py: np.ndarray) -> Moments:
    """The :class:`Moments` of one block of paired features."""
    Px = np.asarray(Px, dtype=np.float64)
    Py = np.asarray(Py, dtype=np.float64)
    PxT, PyT = np.ascontiguousarray(Px.T), np.ascontiguousarray(Py.T)
    return Moments(int(Px.shape[0]), Px.sum(axis=0), Py.sum(axis=0), PxT @ Px, PyT @ Py, PxT @ Py)


def _whitener(C: np.ndarray, regularization: float) -> np.ndarray:
    """``T = V (E + κ)^{-1/2}`` over the directions of ``C`` above ``RTOL · max``."""
    values, vectors = leading_eigenpairs(
        *dense_eigh(C, clip=True),
        rtol=RTOL,
        degenerate="A view has no variance in its feature space (constant data, or a "
        "degenerate kernel); kernel CCA needs both views to vary.",
    )
    return vectors / np.sqrt(values + regularization)[None, :]


@dataclass(frozen=True)
class CCASolution:
    """Weights in the two feature spaces and the correlations.

    Attributes
    ----------
    x_weights, y_weights : ndarray (r, k)
        Scaled so that the training variates have unit variance.
    regularized_correlations : ndarray (k,)
        The singular values: ``wxᵀ Cxy wy`` under the regularised constraints.
    correlations : ndarray (k,)
        The correlations of the training variates.
    """

    x_weights: np.ndarray
    y_weights: np.ndarray
    regularized_correlations: np.ndarray
    correlations: np.ndarray


def regularized_cca(
    Cxx: np.ndarray,
    Cyy: np.ndarray,
    Cxy: np.ndarray,
    n_components: int,
    regularization: float,
) -> CCASolution:
    """Solve ``max wxᵀ Cxy wy`` s.t. ``wᵀ (C + κ I) w = 1`` for the leading ``n_components`` pairs.

    Pairs beyond the number of feature directions of the smaller view (a binary Y has one)
    have zero weights, zero variates and correlation 0.

    Notes
    -----
    O(r³) for the eigen-solves and the SVD of the r × s cross-covariance.
    """
    Tx = _whitener(Cxx, regularization)
    Ty = _whitener(Cyy, regularization)
    k = min(int(n_components), Tx.shape[1], Ty.shape[1])
    P, s, Qt = np.linalg.svd(Tx.T @ Cxy @ Ty, full_matrices=False)
    P, Q, s = P[:, :k], Qt[:k].T, s[:k]
    # the largest entry of each x direction positive; y follows, keeping the correlation > 0
    signs = np.sign(P[np.argmax(np.abs(P), axis=0), np.arange(k)])
    signs[signs == 0] = 1.0
    Wx, Wy = Tx @ (P * signs), Ty @ (Q * signs)
    var_x = np.einsum("ij,ij->j", Wx, Cxx @ Wx)
    var_y = np.einsum("ij,ij->j", Wy, Cyy @ Wy)
    Wx = Wx / np.sqrt(np.maximum(var_x, 1e-300))[None, :]
    Wy = Wy / np.sqrt(np.maximum(var_y, 1e-300))[None, :]
    corr = np.einsum("ij,ij->j", Wx, Cxy @ Wy)
    pad = int(n_components) - k
    return CCASolution(
        np.pad(Wx, ((0, 0), (0, pad))),
        np.pad(Wy, ((0, 0), (0, pad))),
        np.pad(s, (0, pad)),
        np.pad(corr, (0, pad)),
    )
