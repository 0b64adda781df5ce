"""JRC and KPPR with the adaptive kernels: brute-force references, out-of-sample consistency,
the JRC defaults (no degenerate clusters), determinism and bad parameters."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.datasets import make_blobs, make_circles, make_moons
from sklearn.metrics import adjusted_rand_score
from sklearn.neighbors import kneighbors_graph
from sklearn.preprocessing import StandardScaler

from dkernel.errors import DegenerateClusteringWarning, InvalidInputError
from dkernel.kernels.registry import neighbor_parameter
from dkernel.ranking import (
    DegenerateClusterWarning,
    JointRankingClustering,
    KernelPersonalizedPageRank,
    jrc_normalized_embedding,
    ppr_exact,
    seed_vector,
)

ADAPTIVE = ("knn_mean", "knn", "local_scaling")
K_NEIGHBORS = 5


def brute_radius(X_new, X_ref, k):
    """Distance to the k-th nearest reference point that is not the point itself (loops)."""
    out = np.empty(len(X_new))
    for i, x in enumerate(X_new):
        dist = sorted(float(np.linalg.norm(x - r)) for r in X_ref if np.linalg.norm(x - r) > 0)
        out[i] = dist[k - 1]
    return out


def brute_kernel(name, A, B, X_fit, k):
    """κ(a, b) pair by pair, radii from the training points (the kernels' definitions)."""
    ra, rb = brute_radius(A, X_fit, k), brute_radius(B, X_fit, k)
    K = np.empty((len(A), len(B)))
    for i, a in enumerate(A):
        for j, b in enumerate(B):
            d = float(np.linalg.norm(a - b))
            near_a, near_b = d <= ra[i] * (1 + 1e-12), d <= rb[j] * (1 + 1e-12)
            if name == "knn":
                K[i, j] = float(near_a or near_b)
            elif name == "knn_mean":
                K[i, j] = 0.5 * near_a + 0.5 * near_b
            else:
                K[i, j] = np.exp(-(d**2) / (ra[i] * rb[j]))
    return K


@pytest.fixture(scope="module")
def small():
    rng = np.random.default_rng(7)
    X = np.concatenate([rng.normal(c, 0.4, size=(20, 3)) for c in (0.0, 2.5, 5.0)])
    Y = rng.normal(2.5, 1.5, size=(8, 3))
    return X, Y


@pytest.fixture(scope="module")
def blobs():
    X, y = make_blobs(300, centers=3, cluster_std=0.6, random_state=3)
    return StandardScaler().fit_transform(X), y


def neighbors(name):
    """K_NEIGHBORS as the adaptive kernel's parameter: the k-NN graphs' size n_neighbors, the
    self-tuning widths' rank scale_neighbors of local_scaling."""
    return {neighbor_parameter(name): K_NEIGHBORS}


# -- brute-force references ---------------------------------------------------------------
@pytest.mark.parametrize("name", ADAPTIVE)
def test_kernel_rows_match_brute_force(small, name):
    X, Y = small
    kppr = KernelPersonalizedPageRank(kernel=name, **neighbors(name)).fit(X)
    K_ref = brute_kernel(name, X, X, X, K_NEIGHBORS)
    np.testing.assert_allclose(kppr.kernel_.gram(), K_ref, rtol=0, atol=1e-10)
    np.testing.assert_allclose(
        kppr.kernel_.cross(Y), brute_kernel(name, Y, X, X, K_NEIGHBORS), rtol=0, atol=1e-10
    )
    assert kppr.kernel_params_["kernel"] == name
    assert kppr.kernel_params_[neighbor_parameter(name)] == K_NEIGHBORS


def test_knn_mean_is_sklearn_nearest_neighbors_affinity(blobs):
    X, _ = blobs
    jrc = JointRankingClustering(n_clusters=3, random_state=0).fit(X)
    A = kneighbors_graph(X, 10 + 1, include_self=True).toarray()
    np.testing.assert_array_equal(jrc.kernel_.gram(), 0.5 * (A + A.T))


@pytest.mark.parametrize("name", ADAPTIVE)
def test_kppr_all_components_equal_exact_ppr(small, name):
    X, _ = small
    K_ref = brute_kernel(name, X, X, X, K_NEIGHBORS)
    kppr = KernelPersonalizedPageRank(kernel=name, **neighbors(name), min_eigenvalue=None).fit(X)
    for seed in (3, [0, 25, 59], None):
        exact = ppr_exact(K_ref, seed_vector(seed, X.shape[0]), 0.1)
        assert np.max(np.abs(kppr.rank(seed) - exact)) < 1e-10


@pytest.mark.parametrize("name", ADAPTIVE)
@pytest.mark.parametrize("embedding", ["normalized", "laplacian"])
@pytest.mark.filterwarnings("ignore::dkernel.ranking.DegenerateClusterWarning")  # k-means in 60-D
def test_jrc_full_embedding_equals_exact_ppr(small, name, embedding):
    """With every eigenpair, both truncations give Z Z^T = β Vol L_β^{-1}: rank is the PPR."""
    X, _ = small
    n = X.shape[0]
    K_ref = brute_kernel(name, X, X, X, K_NEIGHBORS)
    jrc = JointRankingClustering(
        kernel=name,
        **neighbors(name),
        embedding=embedding,
        n_components=n,
        n_clusters=3,
        random_state=0,
    ).fit(X)
    for seed in (3, [0, 25, 59]):
        exact = ppr_exact(K_ref, seed_vector(seed, n), 0.15)
        assert np.max(np.abs(jrc.rank(seed) - exact)) < 1e-10
    Z, values, U, d = jrc_normalized_embedding(K_ref, 0.15)
    np.testing.assert_allclose(Z[:, 0], 1.0, atol=1e-10)  # the trivial eigenvector
    np.testing.assert_allclose(K_ref @ U, d[:, None] * U * values[None, :], atol=1e-10)


@pytest.mark.parametrize("name", ADAPTIVE)
@pytest.mark.parametrize("embedding", ["normalized", "laplacian"])
def test_jrc_out_of_sample_matches_nystrom_reference(small, name, embedding):
    X, Y = small
    if embedding == "laplacian":  # its Nyström denominator (1+β) d̂(x) − λ needs d̂(x) not tiny
        Y = X[::7] + np.random.default_rng(3).normal(0, 0.2, size=X[::7].shape)
    jrc = JointRankingClustering(
        kernel=name, **neighbors(name), embedding=embedding, n_clusters=3, random_state=0
    ).fit(X)
    Ky = brute_kernel(name, Y, X, X, K_NEIGHBORS)
    dh = Ky.sum(axis=1)
    lam, V, beta, vol = jrc.eigenvalues_, jrc.eigenvectors_, jrc.beta_, jrc.volume_
    if embedding == "normalized":
        ref = (Ky @ V) / (dh[:, None] * lam) / np.sqrt(1 + beta - lam) * np.sqrt(beta * vol)
    else:
        ref = (Ky @ V) / ((1 + beta) * dh[:, None] - lam) / np.sqrt(lam) * np.sqrt(beta * vol)
    np.testing.assert_allclose(jrc.transform(Y), ref, rtol=1e-10, atol=1e-10)
    m = jrc.embedding_.T @ seed_vector([1, 30], X.shape[0])
    np.testing.assert_allclose(jrc.score_samples(Y, [1, 30]), dh * (ref @ m) / vol, atol=1e-12)


# the narrow RBF model on 20 points may isolate one of them; the refusal is what counts here
@pytest.mark.filterwarnings("ignore::dkernel.ranking.DegenerateClusterWarning")
def test_laplacian_out_of_sample_refuses_isolated_points(small):
    X, Y = small
    jrc = JointRankingClustering(
        kernel="local_scaling", scale_neighbors=K_NEIGHBORS, embedding="laplacian", random_state=0
    ).fit(X)
    with pytest.raises(InvalidInputError, match="embedding='normalized'"):
        jrc.transform(Y)
    far = JointRankingClustering(kernel="rbf", sigma=0.05, n_clusters=2, random_state=0).fit(X[:20])
    with pytest.raises(InvalidInputError, match="zero affinity"):
        far.predict(X[:20] + 100.0)


# -- out-of-sample consistency ------------------------------------------------------------
@pytest.mark.parametrize("name", ADAPTIVE + ("rbf",))
@pytest.mark.parametrize("embedding", ["normalized", "laplacian"])
# the Laplacian truncation may isolate a point (tested below); consistency is what counts here
@pytest.mark.filterwarnings("ignore::dkernel.ranking.DegenerateClusterWarning")
def test_jrc_training_points_as_new_points(blobs, name, embedding):
    X, _ = blobs
    jrc = JointRankingClustering(
        kernel=name, embedding=embedding, n_clusters=3, random_state=0
    ).fit(X)
    Z = jrc.transform(X)
    scale = np.abs(jrc.embedding_).max()
    np.testing.assert_allclose(Z, jrc.embedding_, rtol=0, atol=1e-10 * scale)
    np.testing.assert_array_equal(jrc.predict(X), jrc.labels_)
    for c in range(3):
        ref = jrc.rank(cluster=c)
        np.testing.assert_allclose(
            jrc.score_samples(X, cluster=c), ref, rtol=0, atol=1e-10 * np.abs(ref).max()
        )


@pytest.mark.parametrize("name", ADAPTIVE)
def test_kppr_training_points_as_new_points(blobs, name):
    """Thm. 1 with the adaptive kernels: in-sample points scored out of sample get π̂."""
    X, y = blobs
    kppr = KernelPersonalizedPageRank(kernel=name).fit(X[::2])
    for seed in (5, None, [1, 2, 3]):
        np.testing.assert_allclose(kppr.score_samples(X[::2], seed), kppr.rank(seed), atol=1e-12)
        Zp = kppr.project(X[::2])
        np.testing.assert_allclose(Zp @ kppr.seed_weights(seed), kppr.rank(seed), atol=1e-12)
    # new points rank by their own class
    scores = kppr.score_samples(X[1::2], cluster=0, labels=y[::2])
    assert np.mean(y[1::2][np.argsort(-scores)[:30]] == 0) > 0.9


# -- defaults ------------------------------------------------------------------------------
def test_defaults_on_separated_blobs_have_no_degenerate_clusters():
    X, y = make_blobs(600, centers=3, cluster_std=0.5, random_state=0)
    X = StandardScaler().fit_transform(X)
    jrc = JointRankingClustering(n_clusters=3, random_state=0).fit(X)
    assert jrc.cluster_sizes_.min() > 150
    assert adjusted_rand_score(y, jrc.labels_) > 0.99
    # the paper's RBF + Alg. 8 setting isolates single points, and says how to fix it
    paper = JointRankingClustering(
        kernel="rbf", embedding="laplacian", n_components=3, n_clusters=3, random_state=0
    )
    with pytest.warns(DegenerateClusterWarning, match="embedding='normalized'"):
        paper.fit(X)
    assert paper.cluster_sizes_.min() <= 1
    # one filter on the family (MeanShift's many modes too) silences it
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.simplefilter("ignore", DegenerateClusteringWarning)
        paper.fit(X)


def test_a_cluster_of_a_few_points_is_named_not_only_a_singleton():
    """A fragment the graph cut off (3 of two moons' 5·10⁴ points took one of two clusters)
    says nothing about the data: a cluster of at most 1 % of an even share warns."""
    X, _ = make_blobs(600, centers=2, cluster_std=0.5, random_state=0)
    jrc = JointRankingClustering(n_clusters=2, random_state=0).fit(X)
    jrc.cluster_sizes_ = np.array([1997, 3])
    with pytest.warns(DegenerateClusterWarning, match="at most 10 points"):
        jrc._warn_degenerate()
    jrc.cluster_sizes_ = np.array([1989, 11])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        jrc._warn_degenerate()


def _rings(n, seed=0):
    rng = np.random.default_rng(seed)
    c = np.arange(n) % 3
    r = 1 + c + rng.normal(0, 0.1, n)
    t = rng.uniform(0, 2 * np.pi, n)
    return np.c_[r * np.cos(t), r * np.sin(t)], c


@pytest.mark.parametrize(
    "make",
    [
        lambda: make_moons(600, noise=0.07, random_state=0),
        lambda: make_circles(600, factor=0.5, noise=0.05, random_state=0),
        lambda: _rings(600),
    ],
    ids=["moons", "circles", "rings"],
)
def test_defaults_on_non_convex_shapes(make):
    X, y = make()
    X = StandardScaler().fit_transform(X)
    k = len(np.unique(y))
    jrc = JointRankingClustering(n_clusters=k, random_state=0).fit(X)
    assert adjusted_rand_score(y, jrc.labels_) >= 0.95
    assert jrc.embedding_.shape == (600, k)


def test_determinism(blobs):
    X, _ = blobs
    a = JointRankingClustering(n_clusters=3, random_state=4).fit(X)
    b = JointRankingClustering(n_clusters=3, random_state=4).fit(X)
    np.testing.assert_array_equal(a.labels_, b.labels_)
    np.testing.assert_array_equal(a.embedding_, b.embedding_)
    np.testing.assert_array_equal(a.transform(X[:7] + 0.01), b.transform(X[:7] + 0.01))
    k1 = KernelPersonalizedPageRank(kernel="local_scaling", random_state=2).fit(X)
    k2 = KernelPersonalizedPageRank(kernel="local_scaling", random_state=2).fit(X)
    np.testing.assert_array_equal(k1.score_samples(X[:9], 3), k2.score_samples(X[:9], 3))


# -- bad parameters -------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"n_neighbors": 0}, "n_neighbors"),
        ({"n_neighbors": True}, "n_neighbors"),
        ({"n_neighbors": 300}, "n_neighbors.*< n_samples"),
        ({"embedding": "spectral"}, "embedding"),
        ({"kernel": "gauss"}, "knn_mean"),
        ({"kernel_params": {"width": 2}}, "kernel_params"),
        ({"kernel": "rbf", "kernel_params": {"n_reference": 50}}, "kernel_params"),
        ({"sigma": 1.0}, "sigma"),
        ({"sigma": float("nan"), "kernel": "rbf"}, "sigma"),
        ({"n_components": 0}, "n_components"),
    ],
)
def test_jrc_bad_parameters(blobs, params, match):
    X, _ = blobs
    with pytest.raises(InvalidInputError, match=match):
        JointRankingClustering(n_clusters=3, **params).fit(X)


@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"kernel": "knn", "n_neighbors": 0}, "n_neighbors"),
        ({"kernel": "local_scaling", "scale_neighbors": 300}, "scale_neighbors.*< n_samples"),
        ({"kernel": "local_scaling", "scale_neighbors": 0}, "scale_neighbors"),
        ({"kernel": "knn_mean", "sigma": 0.5}, "sigma"),
    ],
)
def test_kppr_bad_parameters(blobs, params, match):
    X, _ = blobs
    with pytest.raises(InvalidInputError, match=match):
        KernelPersonalizedPageRank(**params).fit(X)


def test_bad_data(blobs):
    X, _ = blobs
    bad = X.copy()
    bad[3, 1] = np.inf
    with pytest.raises(InvalidInputError):
        JointRankingClustering(n_clusters=3).fit(bad)
    bad[3, 1] = np.nan  # a missing value: the default knn_mean kernel takes expected distances
    assert JointRankingClustering(n_clusters=3, random_state=0).fit(bad).labels_.shape == (len(X),)
    with pytest.raises(InvalidInputError, match="NaN"):
        JointRankingClustering(n_clusters=3, kernel="linear").fit(bad)
    jrc = JointRankingClustering(n_clusters=3, random_state=0).fit(X)
    with pytest.raises(InvalidInputError, match="features"):
        jrc.predict(X[:, :1])
