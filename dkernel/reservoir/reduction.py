"""The reduction between reservoir and readout ([Lokse2020], Paper V, "Proposed Architecture"): PCA, or kernel
PCA through dkernel's Nyström landmark stage.

Kernel PCA here is :class:`dkernel.NystromEmbedding`'s ``embedding='kpca'`` formula, built from
the same shared pieces (the landmark stage and feature map of ``dkernel.kernels.nystrom``, the
centred Gram matrix of ``dkernel.kmeans.features``, ``dkernel.linalg.eigen.dense_eigh``): the
layer rules keep one estimator family from importing another's estimators. With m landmarks
``L``, ``φ(h) = W0ᵀ k(L, h)`` and the eigenvectors ``V`` of the centred ``Σ (φ - μ)(φ - μ)ᵀ``,
``z(h) = Vᵀ (φ(h) - μ)``: the rows of ``E Λ^{1/2}`` ([Lokse2020], Paper V, Eq. 8) for the training states
and the Nyström out-of-sample formula (Eq. 9) for new ones, exact when every training state
is a landmark. ``tests/reservoir`` checks it against ``NystromEmbedding``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from sklearn.decomposition import PCA

from dkernel.kernels.nystrom import NystromFeatureMap, fit_nystrom_landmarks
from dkernel.kernels.registry import Kernel
from dkernel.kmeans.features import centered_gram
from dkernel.linalg.eigen import dense_eigh


@dataclass(frozen=True)
class LinearProjection:
    """PCA's map ``z(h) = (h - mean) @ components`` (components as columns)."""

    mean: np.ndarray
    components: np.ndarray

    def transform(self, H: np.ndarray) -> np.ndarray:
        return (np.asarray(H) - self.mean) @ self.components


@dataclass(frozen=True)
class NystromKPCA:
    """Kernel PCA's map ``z(h) = (φ(h) - mean) @ components`` with the Nyström features φ."""

    feature_map: NystromFeatureMap
    mean: np.ndarray
    components: np.ndarray
    eigenvalues: np.ndarray

    def transform(self, H: np.ndarray) -> np.ndarray:
        return (self.feature_map.transform(H) - self.mean) @ self.components


def fit_pca(H: np.ndarray, n_components: int, *, seed: int | None) -> LinearProjection:
    """PCA of the states (scikit-learn's, full SVD): the top ``n_components`` axes."""
    k = min(n_components, *H.shape)
    pca = PCA(n_components=k, svd_solver="full", random_state=seed).fit(H)
    return LinearProjection(pca.mean_, np.ascontiguousarray(pca.components_.T))


def fit_kpca(
    H: np.ndarray,
    n_components: int,
    kernel: Kernel,
    *,
    n_landmarks: int,
    landmarks: str,
    seed: int | None,
) -> NystromKPCA:
    """Nyström kernel PCA of the states: ``n_components`` (at most the rank found) axes."""
    stage = fit_nystrom_landmarks(H, kernel, n_landmarks, method=landmarks, random_state=seed)
    fmap = NystromFeatureMap(stage.kernel, stage.reference, stage.basis)
    C, mu = centered_gram(fmap.transform(H))
    values, vectors = dense_eigh(C, min(n_components, C.shape[0]), clip=True)
    return NystromKPCA(fmap, mu, np.ascontiguousarray(vectors), values)
