"""Explicit feature maps ``φ`` with ``k(x, y) ≈ φ(x)·φ(y)``, evaluated block by block.

Numeric layer: NumPy/SciPy on in-memory blocks, no Dask. Two kinds of map run kernel k-means
and kernel CCA at large N as linear methods in feature space:

* the Nyström map ``φ(x) = W0ᵀ k(L, x)`` for m landmarks ``L`` and the basis ``W0``
  (:class:`~dkernel.kernels.nystrom.NystromFeatureMap`); its Gram matrix is the Nyström
  approximation ``K_nm K_mm⁺ K_mn``, which is ``K`` itself on the training points when every
  training point is a landmark;
* a kernel's own finite map (the ``landmark`` kernel's sparse features,
  ``dkernel.graphs.landmark.LandmarkFeatureMap``), exact for that kernel.

:func:`features` evaluates either (dense, or CSR for a sparse map). The objects hold only the
kernel, the landmarks and small matrices, so they pickle and travel to Dask workers.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

from dkernel._budget import SCRATCH_BLOCK_BYTES, rows_for_budget


def sub_block_rows(n_columns: int) -> int:
    """Rows of a (rows, ``n_columns``) float64 scratch block (about 32 MiB, at least 64)."""
    return rows_for_budget(SCRATCH_BLOCK_BYTES, n_columns, 8, low=64)


def features(feature_map: Any, X: Any) -> np.ndarray | sp.csr_matrix:
    """``φ(X)``: CSR when the map has ``sparse_features`` (the landmark kernel's), else dense."""
    if hasattr(feature_map, "sparse_features"):
        return sp.csr_matrix(feature_map.sparse_features(X), dtype=np.float64)
    return np.asarray(feature_map.transform(X), dtype=np.float64)


def n_features(feature_map: Any) -> int:
    """The dimension of ``φ``: ``n_features`` of the landmark map, else a fitted transformer's
    ``n_features_out_`` (a PCK's)."""
    if hasattr(feature_map, "n_features"):
        return int(feature_map.n_features)
    return int(feature_map.n_features_out_)


def squared_norms(Phi: np.ndarray | sp.spmatrix) -> np.ndarray:
    """``||φ_i||²`` of every row (dense or sparse)."""
    if sp.issparse(Phi):
        return np.asarray(Phi.multiply(Phi).sum(axis=1)).ravel()
    return np.einsum("ij,ij->i", Phi, Phi)


def centered_gram(Phi: np.ndarray | sp.spmatrix) -> tuple[np.ndarray, np.ndarray]:
    """``(Φ - 1μᵀ)ᵀ (Φ - 1μᵀ)`` (r, r) and the mean ``μ``, without centering ``Φ`` in memory."""
    n = Phi.shape[0]
    mu = np.asarray(Phi.mean(axis=0)).ravel()
    G = Phi.T @ Phi
    G = G.toarray() if sp.issparse(G) else np.asarray(G)
    C = G - n * np.outer(mu, mu)
    return 0.5 * (C + C.T), mu
