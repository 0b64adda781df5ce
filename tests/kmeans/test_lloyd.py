"""Kernel k-means numerics against slow, obvious references: Lloyd on the Gram matrix written
as loops over cluster members, the objective of slide 34, AIC/BIC from the Gaussian log-pdf."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.cluster import KMeans
from sklearn.datasets import make_blobs
from sklearn.metrics import adjusted_rand_score

from dkernel.errors import InvalidInputError
from dkernel.kernels.rbf import rbf_block
from dkernel.kmeans.lloyd import (
    FeatureSpace,
    GramSpace,
    best_of,
    information_criteria,
    kernel_kmeans,
    kmeans_plusplus,
    kpca_labels,
    lloyd,
    objective,
)


def naive_distances(K: np.ndarray, labels: np.ndarray, k: int) -> np.ndarray:
    """``||φ_i - m_c||²`` by the formula of slide 35, one point and one cluster at a time."""
    n = K.shape[0]
    d = np.full((n, k), np.inf)
    for c in range(k):
        members = np.flatnonzero(labels == c)
        if members.size == 0:
            continue
        within = sum(K[a, b] for a in members for b in members) / members.size**2
        for i in range(n):
            d[i, c] = K[i, i] - 2 * sum(K[i, j] for j in members) / members.size + within
    return d


def naive_lloyd(K: np.ndarray, labels: np.ndarray, k: int, max_iter: int = 100) -> np.ndarray:
    """Slide 36: assign to the nearest centre in feature space until nothing changes."""
    labels = labels.copy()
    for _ in range(max_iter):
        new = np.argmin(naive_distances(K, labels, k), axis=1)
        if np.array_equal(new, labels):
            break
        labels = new
    return labels


def naive_objective(K: np.ndarray, labels: np.ndarray) -> float:
    cost = 0.0
    for i in range(K.shape[0]):
        members = np.flatnonzero(labels == labels[i])
        cost += K[i, i] - 2 * K[i, members].mean() + K[np.ix_(members, members)].mean()
    return cost


@pytest.fixture(scope="module")
def blobs():
    X, y = make_blobs(60, centers=[[0, 0], [3, 0], [0, 3]], cluster_std=0.9, random_state=2)
    return X, y, rbf_block(X, X, 1.5)


def test_lloyd_matches_the_naive_loop(blobs):
    X, _, K = blobs
    start = np.random.default_rng(0).integers(0, 3, K.shape[0])
    result = lloyd(GramSpace(K), start, 3, tol=0.0)
    expected = naive_lloyd(K, start, 3)
    assert result.converged
    np.testing.assert_array_equal(result.labels, expected)
    np.testing.assert_array_equal(result.centre_labels, expected)
    assert result.inertia == pytest.approx(naive_objective(K, expected), rel=1e-10)
    assert objective(GramSpace(K), expected, 3) == pytest.approx(result.inertia, rel=1e-10)


def test_incremental_sums_equal_a_fresh_computation(blobs):
    _, _, K = blobs
    space = GramSpace(K)
    rng = np.random.default_rng(1)
    labels = rng.integers(0, 4, K.shape[0])
    space.inner(labels, 4)
    for _ in range(3):  # a few points move each time: the incremental path
        labels = labels.copy()
        labels[rng.choice(labels.size, 5, replace=False)] = rng.integers(0, 4, 5)
        G, cc, sizes = space.inner(labels, 4)
        G0, cc0, sizes0 = GramSpace(K).inner(labels, 4)
        np.testing.assert_allclose(G, G0, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(cc, cc0, rtol=1e-12)
        np.testing.assert_array_equal(sizes, sizes0)
    d = K.diagonal()[:, None] - 2 * G + cc[None, :]
    np.testing.assert_allclose(d, naive_distances(K, labels, 4), rtol=1e-10, atol=1e-12)


def test_feature_space_is_the_gram_space_of_its_features():
    Phi = np.random.default_rng(3).normal(size=(80, 5))
    gram, feat = GramSpace(Phi @ Phi.T), FeatureSpace(Phi)
    np.testing.assert_allclose(feat.point_sq_dist([3, 7]), gram.point_sq_dist([3, 7]), atol=1e-10)
    seeds = kmeans_plusplus(gram, 4, np.random.default_rng(5))
    np.testing.assert_array_equal(kmeans_plusplus(feat, 4, np.random.default_rng(5)), seeds)
    a = best_of(gram, 4, n_init=3, rng=np.random.default_rng(7), tol=0.0)
    b = best_of(feat, 4, n_init=3, rng=np.random.default_rng(7), tol=0.0)
    np.testing.assert_array_equal(a.labels, b.labels)
    assert a.inertia == pytest.approx(b.inertia, rel=1e-10)
    # a sparse feature matrix gives the same
    c = best_of(FeatureSpace(sp.csr_matrix(Phi)), 4, n_init=3, rng=np.random.default_rng(7), tol=0)
    np.testing.assert_array_equal(c.labels, a.labels)
    assert gram.effective_dimension() == pytest.approx(feat.effective_dimension(), rel=1e-10)


def test_kmeans_plusplus_draws_distinct_far_apart_seeds():
    X = np.r_[np.zeros((20, 2)), np.full((20, 2), 10.0), np.c_[np.full(20, 10.0), np.zeros(20)]]
    X += np.random.default_rng(0).normal(scale=0.01, size=X.shape)
    seeds = kmeans_plusplus(FeatureSpace(X), 3, np.random.default_rng(0))
    assert sorted(np.unique(seeds // 20)) == [0, 1, 2]


def test_linear_kernel_reaches_the_kmeans_optimum():
    X, y = make_blobs(150, centers=[[0, 0], [8, 0], [0, 8]], random_state=1)
    labels, cost = kernel_kmeans(X @ X.T, 3, random_state=0)
    assert adjusted_rand_score(y, labels) == 1.0
    assert cost == pytest.approx(KMeans(3, n_init=10, random_state=0).fit(X).inertia_, rel=1e-9)
    assert cost == pytest.approx(naive_objective(X @ X.T, labels), rel=1e-9)


def test_empty_cluster_takes_the_farthest_point():
    K = np.eye(4)
    # cluster 2 starts empty: one point is moved to it
    result = lloyd(GramSpace(K), np.array([0, 0, 1, 1]), 3, tol=0.0)
    assert set(result.labels) == {0, 1, 2}


def test_kpca_readout_recovers_blobs():
    X, y = make_blobs(200, centers=[[0, 0], [6, 0], [0, 6]], random_state=0)
    for space in (GramSpace(X @ X.T), FeatureSpace(X)):
        labels = kpca_labels(space, 3, np.random.default_rng(0))
        assert adjusted_rand_score(y, labels) == 1.0
    result = best_of(GramSpace(X @ X.T), 3, init="kpca", n_init=1, rng=np.random.default_rng(0))
    assert adjusted_rand_score(y, result.labels) == 1.0
    with pytest.raises(InvalidInputError, match="init"):
        best_of(FeatureSpace(X), 3, init="random", rng=np.random.default_rng(0))


def test_information_criteria_equal_the_gaussian_log_likelihood():
    rng = np.random.default_rng(0)
    X = np.r_[rng.normal(0, 1, (30, 2)), rng.normal(5, 1, (50, 2))]
    labels = np.repeat([0, 1], [30, 50])
    centres = np.array([X[labels == c].mean(axis=0) for c in (0, 1)])
    inertia = float(((X - centres[labels]) ** 2).sum())
    n, d = X.shape
    var = inertia / (n * d)
    log_l = sum(
        np.log(np.mean(labels == labels[i]))
        - 0.5 * d * np.log(2 * np.pi * var)
        - ((X[i] - centres[labels[i]]) ** 2).sum() / (2 * var)
        for i in range(n)
    )
    params = (2 - 1) + 2 * d + 1
    crit = information_criteria(inertia, np.bincount(labels), n, d)
    assert crit.log_likelihood == pytest.approx(log_l, rel=1e-12)
    assert crit.n_parameters == params
    assert crit.aic == pytest.approx(-2 * log_l + 2 * params, rel=1e-12)
    assert crit.bic == pytest.approx(-2 * log_l + params * np.log(n), rel=1e-12)


def test_function_twin_checks_n_clusters():
    with pytest.raises(InvalidInputError, match="'n_clusters' parameter of kernel_kmeans"):
        kernel_kmeans(np.eye(3), 4)
    with pytest.raises(InvalidInputError, match="n_clusters"):
        kernel_kmeans(np.eye(3), True)
