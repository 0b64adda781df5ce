"""Kernel registry: names, parameters, user callables and the blocked writer."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics.pairwise import cosine_similarity

from dkernel.errors import InvalidInputError
from dkernel.graphs.blocked import blocked_kernel
from dkernel.kernels.cosine import cosine_block
from dkernel.kernels.registry import Kernel, available_kernels, make_kernel


def _naive_rbf(X, Y, sigma):
    out = np.empty((len(X), len(Y)))
    for i in range(len(X)):
        for j in range(len(Y)):
            out[i, j] = np.exp(-np.sum((X[i] - Y[j]) ** 2) / (2 * sigma**2))
    return out


def test_available_names():
    assert {"rbf", "local_scaling", "knn", "landmark", "cosine", "pck", "precomputed"} <= set(
        available_kernels()
    )


def test_unknown_name_lists_valid_ones():
    with pytest.raises(
        InvalidInputError,
        match="Valid kernels: additive_chi2, chi2, cosine, knn, knn_mean, landmark, laplacian, linear, "
        "local_scaling, pck, poly, polynomial, precomputed, rbf, sigmoid",
    ):
        make_kernel("gaussian")


def test_unknown_parameter_is_named():
    with pytest.raises(InvalidInputError, match="bandwidth"):
        make_kernel("rbf", sigma=1.0, bandwidth=2)


def test_rbf_against_naive(rng):
    X, Y = rng.normal(size=(7, 3)), rng.normal(size=(5, 3))
    k = make_kernel("rbf", sigma=0.8)
    np.testing.assert_allclose(k(X, Y), _naive_rbf(X, Y, 0.8), rtol=1e-12)
    assert k.params == {"sigma": 0.8}


def test_rbf_rule_of_thumb_needs_data_and_uses_fraction(rng):
    X = rng.normal(size=(50, 2))
    with pytest.raises(InvalidInputError, match="rule of"):
        make_kernel("rbf")
    k1 = make_kernel("rbf", X, sigma_fraction=0.2)
    k2 = make_kernel("rbf", X, sigma_fraction=0.4)
    assert k2.params["sigma"] == pytest.approx(2 * k1.params["sigma"])
    with pytest.raises(InvalidInputError, match="sigma"):
        make_kernel("rbf", sigma=-1.0)


def test_cosine_matches_sklearn(rng):
    X, Y = rng.normal(size=(6, 4)), rng.normal(size=(3, 4))
    X[0] = 0
    np.testing.assert_allclose(make_kernel("cosine")(X, Y), cosine_similarity(X, Y), atol=1e-12)
    np.testing.assert_allclose(cosine_block(X[1:2], X[1:2]), [[1.0]])


@pytest.mark.parametrize(
    ("kernel", "pairwise"), [("precomputed", True), ("rbf", False), (cosine_block, False)]
)
def test_pairwise_tag_follows_the_kernel(kernel, pairwise):
    from dkernel import KernelKMeans, NystromEmbedding, SpectralClustering

    for estimator in (KernelKMeans, NystromEmbedding, SpectralClustering):
        assert estimator(kernel=kernel).__sklearn_tags__().input_tags.pairwise is pairwise


def test_precomputed_takes_columns(rng):
    X = rng.normal(size=(9, 2))
    K = _naive_rbf(X, X, 1.0)
    k = make_kernel("precomputed", K)
    idx = np.array([1, 4, 7])
    np.testing.assert_array_equal(k.cross(K[2:5], k.landmark_data(K, idx)), K[2:5][:, idx])
    with pytest.raises(InvalidInputError, match="square"):
        make_kernel("precomputed", K[:4])


def test_user_callable_with_explicit_signature(rng):
    def linear(X, Y):
        return X @ Y.T

    X = rng.normal(size=(5, 2))
    k = make_kernel(linear)
    assert k.name == "callable" and k.params == {"function": "linear"}
    np.testing.assert_allclose(k(X), X @ X.T)


def test_user_callable_bad_signature_and_shape(rng):
    with pytest.raises(InvalidInputError, match="two required positional"):
        make_kernel(lambda X: X)
    with pytest.raises(InvalidInputError, match="must return"):
        make_kernel(lambda X, Y: X)(rng.normal(size=(3, 2)), rng.normal(size=(4, 2)))
    with pytest.raises(InvalidInputError, match="partial"):
        make_kernel(lambda X, Y: X @ Y.T, sigma=1.0)


def test_pck_wraps_a_fitted_model(rng):
    class FakePCK:
        def transform(self, X):
            G = np.abs(np.asarray(X))
            return G / G.sum(axis=1, keepdims=True)

    X = rng.normal(size=(6, 3))
    k = make_kernel("pck", model=FakePCK())
    G = FakePCK().transform(X)
    np.testing.assert_allclose(k(X, X[:2]), G @ G[:2].T)
    with pytest.raises(InvalidInputError, match="ProbabilisticClusterKernel"):
        make_kernel("pck")


def test_registry_feeds_the_blocked_writer(rng):
    X = rng.normal(size=(23, 3))
    for name, params in [("rbf", {"sigma": 1.3}), ("cosine", {})]:
        k = make_kernel(name, **params)
        K = blocked_kernel(k.block, X, block_rows=7).compute()
        np.testing.assert_allclose(K, k(X), atol=1e-12)
    assert isinstance(make_kernel(k), Kernel)


def test_pck_kernel_with_a_fitted_model_gives_exact_nystrom_kpca():
    from sklearn.datasets import load_iris

    from dkernel.gmm.pck import ProbabilisticClusterKernel
    from dkernel.linalg.eigen import fix_signs
    from dkernel.spectral.dense import kpca_embedding
    from dkernel.spectral.nystrom import NystromEmbedding

    X = load_iris().data
    pck = ProbabilisticClusterKernel(
        n_estimators=2, max_components=4, random_state=0, dtype="float64"
    ).fit(X)
    G = np.asarray(pck.transform(X))
    k = make_kernel("pck", model=pck)
    np.testing.assert_allclose(k(X[:5], X[:7]), G[:5] @ G[:7].T, atol=1e-12)
    est = NystromEmbedding(2, kernel="pck", kernel_params={"model": pck}, n_landmarks=150)
    Z = est.fit_transform(X)
    ref = kpca_embedding(G @ G.T, 2).embedding
    np.testing.assert_allclose(fix_signs(Z), fix_signs(ref), atol=1e-6)
