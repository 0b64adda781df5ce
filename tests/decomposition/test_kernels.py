"""Row-normalised density kernels ([SzymkowiakHave2006], Eq. 4, 15, 16) against slow, obvious
code."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import sparse
from scipy.sparse.csgraph import connected_components
from sklearn.metrics import adjusted_rand_score

from dkernel import KernelDecompositionClustering
from dkernel.decomposition.kernels import (
    density_log_kernel,
    join_components,
    knn_log_kernel,
    knn_to_csr,
    row_normalize_log,
)
from dkernel.errors import InvalidInputError


def _gauss_ref(x, y, h):
    d = x.size
    return (2 * np.pi) ** (-d / 2) * h ** (-d) * np.exp(-np.sum((x - y) ** 2) / (2 * h**2))


def test_gaussian_density_kernel_matches_eq15(rng):
    X, Y = rng.normal(size=(7, 3)), rng.normal(size=(5, 3))
    logK = density_log_kernel(X, Y, kernel="rbf", sigma=0.7)
    ref = np.array([[_gauss_ref(x, y, 0.7) for y in Y] for x in X])
    np.testing.assert_allclose(np.exp(logK), ref, rtol=1e-10)


def test_gaussian_density_kernel_integrates_to_one():
    h = 0.3
    grid = np.linspace(-3, 3, 601)
    G = np.stack(np.meshgrid(grid, grid), -1).reshape(-1, 2)
    K = np.exp(density_log_kernel(G, np.array([[0.2, -0.1]]), sigma=h))
    assert abs(K.sum() * (grid[1] - grid[0]) ** 2 - 1.0) < 1e-6


def test_cosine_kernel_matches_eq16(rng):
    X, Y = rng.random((6, 4)), rng.random((3, 4))
    logK = density_log_kernel(X, Y, kernel="cosine")
    ref = np.array([[x @ y / np.linalg.norm(x) / np.linalg.norm(y) for y in Y] for x in X])
    np.testing.assert_allclose(np.exp(logK), ref, rtol=1e-12)


def test_cosine_rejects_empty_rows():
    with pytest.raises(InvalidInputError, match="all zero"):
        density_log_kernel(np.zeros((2, 3)), np.ones((2, 3)), kernel="cosine")


def test_row_normalisation_is_eq4_and_stable(rng):
    X = rng.random((20, 2))
    Kc, log_norm = row_normalize_log(density_log_kernel(X, X, sigma=0.2))
    K = np.array([[_gauss_ref(a, b, 0.2) for b in X] for a in X])
    np.testing.assert_allclose(Kc, K / K.sum(1, keepdims=True), rtol=1e-10)
    np.testing.assert_allclose(log_norm, np.log(K.sum(1)), rtol=1e-10)
    # a width at which every exp() underflows in float64 still gives a proper softmax
    Z = np.array([[5.0, 5.0]])
    Kz, lz = row_normalize_log(density_log_kernel(Z, X, sigma=1e-3))
    assert np.all(np.isfinite(Kz)) and abs(Kz.sum() - 1) < 1e-12 and np.isfinite(lz).all()
    assert np.argmax(Kz) == np.argmin(((X - Z) ** 2).sum(1))


def test_knn_kernel_matches_brute_force(rng):
    X, Q = rng.random((40, 2)), rng.random((9, 2))
    ind, logK = knn_log_kernel(Q, X, sigma=0.1, n_neighbors=5)
    full = density_log_kernel(Q, X, sigma=0.1)
    ref_ind = np.argsort(-full, axis=1)[:, :5]
    np.testing.assert_array_equal(ind, ref_ind)
    np.testing.assert_allclose(logK, np.take_along_axis(full, ref_ind, 1), rtol=1e-10)
    M, log_norm = knn_to_csr(ind, logK, 40)
    np.testing.assert_allclose(np.asarray(M.sum(1)).ravel(), 1.0)
    assert M.nnz == 9 * 5
    # a training point is its own nearest neighbour
    ind_tr, _ = knn_log_kernel(X, X, sigma=0.1, n_neighbors=3)
    np.testing.assert_array_equal(ind_tr[:, 0], np.arange(40))


def test_knn_cosine_matches_brute_force(rng):
    X, Q = rng.random((30, 5)), rng.random((4, 5))
    ind, logK = knn_log_kernel(Q, X, kernel="cosine", n_neighbors=4)
    full = density_log_kernel(Q, X, kernel="cosine")
    np.testing.assert_array_equal(ind, np.argsort(-full, axis=1)[:, :4])
    np.testing.assert_allclose(logK, np.take_along_axis(full, ind, 1), atol=1e-12)


def _one_feature_groups(n: int = 3000, seed: int = 0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 4, n)
    return (8.0 * y + rng.normal(size=n))[:, None], y


def test_more_components_than_clusters_are_joined_by_single_linkage():
    """Four groups of one feature, 8 standard deviations apart: the 7-NN graph falls into 16
    components, and which of them shared a cluster was the initialisation's arbitrary basis
    (ARI 0.29; k-means 1.0)."""
    X, y = _one_feature_groups()
    est = KernelDecompositionClustering(4, random_state=0)
    Kcheck, log_norm, Xn = est.training_kernel(X)
    assert connected_components(Kcheck, directed=False)[0] > 4
    est.fit(X)
    assert adjusted_rand_score(y, est.labels_) == 1.0
    np.testing.assert_array_equal(est.predict(X), est.labels_)


def test_joined_kernel_stays_row_stochastic_with_its_log_row_sums():
    X, _ = _one_feature_groups(600, seed=2)
    est = KernelDecompositionClustering(4, random_state=0)
    Kcheck, log_norm, Xn = est.training_kernel(X)
    count = connected_components(Kcheck, directed=False)[0]
    assert count > 4
    joined, joined_norm = join_components(Kcheck, log_norm, Xn, est._index, 4)
    assert connected_components(joined, directed=False)[0] == 4
    np.testing.assert_allclose(np.asarray(joined.sum(axis=1)).ravel(), 1.0)
    # the un-normalised kernel gains only the joining entries
    before = sparse.diags(np.exp(log_norm)) @ Kcheck
    after = sparse.diags(np.exp(joined_norm)) @ joined
    added = (after - before).tocoo()
    rounding = 1e-12 * np.abs(before.data).max()
    changed = np.abs(added.data) > rounding
    assert changed.sum() == 2 * (count - 4)  # one edge per join, both ways
    assert (added.data[changed] > 0).all()
    same, _ = join_components(Kcheck, log_norm, Xn, est._index, count)
    assert same is Kcheck
