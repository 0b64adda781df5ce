"""Nyström embeddings: exactness with all landmarks, convergence in m, out-of-sample."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import make_blobs

from dkernel.errors import InvalidInputError
from dkernel.kernels.rbf import rbf_block
from dkernel.kernels.registry import make_kernel
from dkernel.linalg.eigen import fix_signs
from dkernel.spectral.dense import keca_embedding, kpca_embedding
from dkernel.spectral.normalized import normalized_embedding
from dkernel.spectral.nystrom import NystromEmbedding, nystrom_basis, select_landmarks
from dkernel.testing import as_kind

SIGMA = 1.0


@pytest.fixture(scope="module")
def data():
    X = np.random.default_rng(0).normal(size=(160, 3))
    return X, rbf_block(X, X, SIGMA)


def _exact(K, embedding, k):
    if embedding == "kpca":
        return kpca_embedding(K, k).embedding
    if embedding == "uncentered":
        return kpca_embedding(K, k, centered=False).embedding
    if embedding == "keca":
        return keca_embedding(K, k).embedding
    return normalized_embedding(K, k).eigenvectors


EMBEDDINGS = ["kpca", "uncentered", "keca", "normalized"]


@pytest.mark.parametrize("embedding", EMBEDDINGS)
def test_all_landmarks_equals_exact(data, embedding, array_kind):
    X, K = data
    est = NystromEmbedding(4, embedding=embedding, sigma=SIGMA, n_landmarks=10_000)
    Z = est.fit_transform(as_kind(X, array_kind))
    Z = np.asarray(Z.compute() if hasattr(Z, "compute") else Z)
    np.testing.assert_allclose(fix_signs(Z), fix_signs(_exact(K, embedding, 4)), atol=1e-6)
    assert est.landmark_indices_.size == X.shape[0]


def test_keca_selection_and_criterion_match_dense(data):
    X, K = data
    est = NystromEmbedding(4, embedding="keca", sigma=SIGMA, n_landmarks=160).fit(X)
    ref = keca_embedding(K, 4)
    np.testing.assert_array_equal(est.component_indices_, ref.indices)
    np.testing.assert_allclose(est.criterion_, ref.criterion, rtol=1e-8)
    np.testing.assert_allclose(est.eigenvalues_, ref.eigenvalues, rtol=1e-8)


def _subspace_error(Z, R):
    """Distance between the column spaces (projection difference), sign/rotation free."""
    Q1, _ = np.linalg.qr(Z)
    Q2, _ = np.linalg.qr(R)
    return np.linalg.norm(Q1 @ Q1.T - Q2 @ Q2.T, 2)


@pytest.mark.parametrize(
    ("embedding", "landmarks"), [("kpca", "uniform"), ("normalized", "kmeans++")]
)
def test_error_falls_as_landmarks_grow(data, embedding, landmarks):
    X, K = data
    R = _exact(K, embedding, 3)
    errors = []
    for m in (12, 40, 140):
        errs = [
            _subspace_error(
                NystromEmbedding(
                    3,
                    embedding=embedding,
                    sigma=SIGMA,
                    n_landmarks=m,
                    landmarks=landmarks,
                    random_state=seed,
                ).fit_transform(X),
                R,
            )
            for seed in range(2)
        ]
        errors.append(np.mean(errs))
    assert errors[0] > errors[1] > errors[2]
    assert errors[2] < 0.05


@pytest.mark.parametrize("embedding", EMBEDDINGS)
def test_transform_of_training_points_equals_in_sample(data, embedding, array_kind):
    X, _ = data
    est = NystromEmbedding(3, embedding=embedding, sigma=SIGMA, n_landmarks=50, random_state=1)
    Xk = as_kind(X, array_kind)
    Z = est.fit_transform(Xk)
    Zt = est.transform(Xk[10:60])
    if array_kind == "dask":
        assert hasattr(Zt, "dask")  # lazy, chunk by chunk
        Z, Zt = Z.compute(), Zt.compute()
    np.testing.assert_allclose(Zt, Z[10:60], atol=1e-12)


def test_numpy_and_dask_fits_agree(data, client):
    X, _ = data
    a = NystromEmbedding(3, embedding="normalized", n_landmarks=40, random_state=3).fit(X)
    b = NystromEmbedding(3, embedding="normalized", n_landmarks=40, random_state=3)
    b.fit(as_kind(X, "dask", chunk_rows=50))  # runs on the distributed client
    np.testing.assert_array_equal(a.landmark_indices_, b.landmark_indices_)
    np.testing.assert_allclose(a.embedding_, b.embedding_.compute(), atol=1e-10)
    assert a.eigengap_hint_ == b.eigengap_hint_


def test_out_of_sample_for_new_points_matches_exact_extension(data):
    """With all landmarks, transform(new) is the classical KPCA projection k(x)ᵀ E Λ^{-1/2}."""
    X, K = data
    est = NystromEmbedding(3, embedding="uncentered", sigma=SIGMA, n_landmarks=160).fit(X)
    Xn = np.random.default_rng(9).normal(size=(5, 3))
    ref = kpca_embedding(K, 3, centered=False)
    proj = rbf_block(Xn, X, SIGMA) @ ref.eigenvectors / np.sqrt(ref.eigenvalues)
    Zn = est.transform(Xn)
    signs = np.sign(np.sum(fix_signs(est.embedding_) * est.embedding_, axis=0))
    np.testing.assert_allclose(
        Zn * signs,
        proj * np.sign(np.sum(ref.embedding * fix_signs(ref.embedding), axis=0)),
        atol=1e-8,
    )


def test_precomputed_kernel_matches_rbf(data):
    X, K = data
    a = NystromEmbedding(3, sigma=SIGMA, n_landmarks=60, landmarks="uniform", random_state=2).fit(X)
    b = NystromEmbedding(
        3, kernel="precomputed", n_landmarks=60, landmarks="uniform", random_state=2
    ).fit(K)
    np.testing.assert_allclose(a.embedding_, b.embedding_, atol=1e-10)
    np.testing.assert_allclose(a.transform(X[:7]), b.transform(K[:7]), atol=1e-10)


def test_callable_and_cosine_kernels(data):
    X, _ = data
    est = NystromEmbedding(2, kernel=lambda A, B: (A @ B.T + 1.0) ** 2, n_landmarks=80).fit(X)
    assert est.embedding_.shape == (160, 2)
    with pytest.raises(InvalidInputError, match="positive degrees"):
        NystromEmbedding(2, embedding="normalized", kernel="cosine", n_landmarks=160).fit(
            X - X.mean(axis=0)
        )


def test_landmark_selection(data):
    X, _ = data
    k = make_kernel("rbf", sigma=SIGMA)
    for method in ("uniform", "kmeans++"):
        a = select_landmarks(X, 30, k, method=method, seed=5)
        b = select_landmarks(X, 30, k, method=method, seed=5)
        np.testing.assert_array_equal(a, b)
        assert np.unique(a).size == 30 and a.max() < 160
    np.testing.assert_array_equal(select_landmarks(X, 500, k), np.arange(160))


def test_kmeanspp_landmarks_approximate_better_than_uniform():
    X, _ = make_blobs(
        600,
        centers=[[0, 0], [6, 0], [0, 6], [6, 6], [12, 12]],
        cluster_std=[2, 1, 1, 0.5, 0.3],
        random_state=0,
    )
    k = make_kernel("rbf", sigma=1.0)
    K = k(X)

    def trace_error(method, seed):
        idx = select_landmarks(X, 20, k, method=method, seed=seed)
        P = K[:, idx] @ nystrom_basis(K[np.ix_(idx, idx)])
        return np.trace(K) - np.sum(P**2)  # trace(K - K_nystrom) >= 0

    uniform = np.mean([trace_error("uniform", s) for s in range(5)])
    kpp = np.mean([trace_error("kmeans++", s) for s in range(5)])
    assert 0 < kpp < 0.95 * uniform


def test_nystrom_basis_pseudo_inverse(data):
    _, K = data
    W0 = nystrom_basis(K[:50, :50])
    np.testing.assert_allclose(
        K[:, :50] @ W0 @ W0.T @ K[:50],
        K[:, :50] @ np.linalg.pinv(K[:50, :50], rcond=1e-10) @ K[:50],
        atol=1e-6,
    )


def test_parameter_errors(data):
    X, _ = data
    with pytest.raises(InvalidInputError, match="'embedding'"):
        NystromEmbedding(embedding="laplacian").fit(X)
    with pytest.raises(InvalidInputError, match="n_landmarks"):
        NystromEmbedding(5, n_landmarks=3).fit(X)
    with pytest.raises(InvalidInputError, match="features"):
        NystromEmbedding(2, n_landmarks=20).fit(X).transform(X[:, :2])


@pytest.mark.parametrize("embedding", ["kpca", "normalized"])
def test_feature_map_svd_solver_agrees(data, embedding):
    """The Nyström map fed to the explicit-feature-map SVD solver gives the same embedding."""
    from dkernel.spectral.feature_map import feature_map_kpca, feature_map_normalized

    X, _ = data
    est = NystromEmbedding(3, embedding=embedding, sigma=SIGMA, n_landmarks=50, random_state=0)
    Z = est.fit_transform(X)
    Phi = est.feature_map(X)
    np.testing.assert_allclose(Phi @ Phi.T, (Phi @ Phi.T).T, atol=1e-12)
    if embedding == "kpca":
        ref = feature_map_kpca(Phi, 3, solver="exact").embedding
    else:
        ref = feature_map_normalized(Phi, 3, solver="exact").eigenvectors
    np.testing.assert_allclose(fix_signs(Z), fix_signs(ref), atol=1e-6)
    Phid = est.feature_map(as_kind(X, "dask"))
    np.testing.assert_allclose(Phid.compute(), Phi, atol=1e-12)


def test_landmark_degree_estimate(data, array_kind):
    X, K = data
    exact = NystromEmbedding(
        3, embedding="normalized", degrees="landmarks", sigma=SIGMA, n_landmarks=10_000
    ).fit(X)
    np.testing.assert_allclose(
        fix_signs(exact.embedding_), fix_signs(_exact(K, "normalized", 3)), atol=1e-6
    )
    est = NystromEmbedding(
        3,
        embedding="normalized",
        degrees="landmarks",
        sigma=SIGMA,
        n_landmarks=40,
        landmarks="uniform",
        random_state=0,
    )
    Z = est.fit_transform(as_kind(X, array_kind))
    Z = np.asarray(Z.compute() if hasattr(Z, "compute") else Z)
    np.testing.assert_allclose(est.transform(X[:20]), Z[:20], atol=1e-12)
    d = est.model_.degrees(X)
    np.testing.assert_allclose(d, 160 / 40 * K[:, est.landmark_indices_].sum(axis=1), rtol=1e-12)
    with pytest.raises(InvalidInputError, match="'degrees'"):
        NystromEmbedding(2, degrees="exact").fit(X)
