"""The Nyström landmark stage, ``fit_nystrom_landmarks`` (issue 33, item 2): what
``NystromEmbedding.fit`` and any other Nyström estimator start from."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import make_blobs

from dkernel.kernels.nystrom import fit_nystrom_landmarks
from dkernel.kernels.registry import make_kernel
from dkernel.spectral.nystrom import NystromEmbedding


@pytest.fixture(scope="module")
def X():
    return make_blobs(300, centers=3, n_features=3, random_state=2)[0]


def _rbf(A, B, sigma):
    return np.exp(-((A[:, None] - B[None, :]) ** 2).sum(-1) / (2 * sigma**2))


def test_features_give_the_nystrom_approximation(X):
    kernel = make_kernel("rbf", X, sigma=1.5)
    stage = fit_nystrom_landmarks(X, kernel, 40, method="uniform", random_state=0)
    idx = stage.indices
    Phi = _rbf(X, X[idx], 1.5) @ stage.basis
    K_nm = _rbf(X, X[idx], 1.5)
    expected = K_nm @ np.linalg.pinv(K_nm[idx]) @ K_nm.T  # the slow obvious formula
    np.testing.assert_allclose(Phi @ Phi.T, expected, atol=1e-8)
    np.testing.assert_array_equal(stage.reference, X[idx])


def test_every_point_a_landmark_is_the_exact_kernel(X):
    kernel = make_kernel("rbf", X, sigma=2.0)
    stage = fit_nystrom_landmarks(X[:120], kernel, 500, random_state=0)
    np.testing.assert_array_equal(stage.indices, np.arange(120))
    Phi = _rbf(X[:120], X[:120], 2.0) @ stage.basis
    np.testing.assert_allclose(Phi @ Phi.T, _rbf(X[:120], X[:120], 2.0), atol=1e-7)


def test_precomputed_and_adaptive_kernels(X):
    K = _rbf(X, X, 1.0)
    stage = fit_nystrom_landmarks(K, make_kernel("precomputed", K), 30, random_state=1)
    assert stage.reference.dtype == np.int64
    np.testing.assert_array_equal(stage.reference, stage.indices)
    adaptive = make_kernel("local_scaling", X, scale_neighbors=7)
    stage = fit_nystrom_landmarks(X, adaptive, 50, random_state=1)
    assert stage.kernel.params["reference"] == "landmarks"
    assert stage.kernel.params["n_reference"] == 50


def test_nystrom_embedding_uses_the_stage(X):
    est = NystromEmbedding(3, n_landmarks=60, random_state=4).fit(X)
    stage = fit_nystrom_landmarks(X, est._make_kernel(X, 4), 60, random_state=4)
    np.testing.assert_array_equal(est.landmark_indices_, stage.indices)
    np.testing.assert_array_equal(est.model_.W0, stage.basis)
