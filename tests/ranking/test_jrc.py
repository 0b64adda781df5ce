"""Joint ranking and clustering (Løkse 2014, Alg. 8–10 [Lokse2014])."""

from __future__ import annotations

import numpy as np
import pytest

from dkernel.errors import InvalidInputError
from dkernel.kernels import rbf_block
from dkernel.metrics import clustering_accuracy
from dkernel.ranking import JointRankingClustering, jrc_embedding, ppr_exact, seed_vector


def test_full_embedding_gives_exact_ppr(iris, iris_kernel):
    K = iris_kernel
    for alpha in (0.15, 0.1):
        Z, values, d = jrc_embedding(K, alpha)
        assert np.all(np.diff(values) >= -1e-12)
        for seed in (4, [1, 90, 140]):
            s = seed_vector(seed, K.shape[0])
            jrc_pi = d * (Z @ (Z.T @ s)) / d.sum()
            assert np.max(np.abs(jrc_pi - ppr_exact(K, s, alpha))) < 1e-8


def test_embedding_against_explicit_inverse(iris_kernel):
    """Z Z^T = β Vol L_β^{-1}, L_β = βD + D - K ([Lokse2014], Eq. 8.10), for all eigenvectors."""
    K = iris_kernel[:60, :60]
    beta = 0.15 / 0.85
    Z, _, d = jrc_embedding(K, 0.15)
    L = beta * np.diag(d) + np.diag(d) - K
    np.testing.assert_allclose(Z @ Z.T, beta * d.sum() * np.linalg.inv(L), rtol=1e-8, atol=1e-10)


def test_cluster_seed_is_centroid_projection():
    """JRC-EMBED-PCK on three blobs ([Lokse2014], Example 8.2.1): clusters found, seed ⇔ centroid.

    (With an RBF the unnormalized L_β puts low-degree points on the axes, [Lokse2014], Fig. 10.9.)
    """
    from sklearn.datasets import make_blobs

    from dkernel.gmm.pck import ProbabilisticClusterKernel

    X, y = make_blobs(300, centers=3, cluster_std=1.0, random_state=0)
    pck = ProbabilisticClusterKernel(n_estimators=5, max_components=6, random_state=0)
    jrc = JointRankingClustering(  # the paper's Alg. 8 embedding, pinned
        kernel=pck, embedding="laplacian", n_components=3, n_clusters=3, n_init=10, random_state=0
    ).fit(X)
    assert jrc.embedding_.shape == (300, 3)
    assert clustering_accuracy(y, jrc.labels_) > 0.8
    for c in range(3):
        by_seed = jrc.rank(cluster=c)
        by_centroid = jrc.degrees_ * (jrc.embedding_ @ jrc.cluster_centers_[c]) / jrc.volume_
        np.testing.assert_allclose(by_seed, by_centroid, rtol=1e-6, atol=1e-12)
        top = jrc.top_k_per_cluster(5, cluster=c)
        assert set(top) == {0, 1, 2}
        for lab, idx in top.items():
            assert np.all(jrc.labels_[idx] == lab) and len(idx) == 5
            assert np.all(np.diff(by_seed[idx]) <= 0)
    # cluster seeds rank their own cluster first
    for c in range(3):
        top = np.argsort(-jrc.rank(cluster=c))[:20]
        assert np.mean(jrc.labels_[top] == c) > 0.9
    assert jrc.rank().shape == (300,)


def test_jrc_precomputed_and_validation(iris):
    X, _ = iris
    K = rbf_block(X, X, 0.8)
    a = JointRankingClustering(kernel="precomputed", n_init=3, random_state=1).fit(K)
    b = JointRankingClustering(kernel="rbf", sigma=0.8, n_init=3, random_state=1).fit(X)
    np.testing.assert_allclose(np.abs(a.embedding_), np.abs(b.embedding_), rtol=1e-8)
    with pytest.raises(InvalidInputError, match="n_clusters"):
        JointRankingClustering(n_clusters=200).fit(X)
    with pytest.raises(InvalidInputError, match="alpha"):
        JointRankingClustering(alpha=1.5).fit(X)


def test_n_clusters_is_the_first_argument_as_on_every_clusterer(iris):
    X, _ = iris
    jrc = JointRankingClustering(2, n_init=3, random_state=0).fit(X)
    assert jrc.n_clusters_ == 2 and np.unique(jrc.labels_).size == 2
    # a kernel where it used to go names the fix
    with pytest.raises(InvalidInputError, match=r"kernel='rbf'"):
        JointRankingClustering("rbf").fit(X)


def _blobs(n=300, k=4, seed=0):
    from sklearn.datasets import make_blobs

    return make_blobs(n, centers=k, cluster_std=0.5, center_box=(-12, 12), random_state=seed)


@pytest.mark.parametrize(("k", "seed"), [(2, 2), (4, 4), (5, 6)])
def test_auto_finds_the_number_of_separated_blobs(k, seed):
    X, y = _blobs(k=k, seed=seed)  # centres >= 4 apart (10 σ)
    jrc = JointRankingClustering(n_clusters="auto", n_init=3, random_state=0).fit(X)
    assert jrc.n_clusters_ == k
    assert clustering_accuracy(y, jrc.labels_) > 0.99
    order = jrc.model_order_
    assert order.rule == "timescale-gap" and order.higher_is_better
    # max_clusters=None: candidate_range's 2 .. clip(round(sqrt 300), 10, 50) = 2 .. 17
    np.testing.assert_array_equal(jrc.n_clusters_candidates_, np.arange(2, 18))
    np.testing.assert_array_equal(order.candidates, jrc.n_clusters_candidates_)
    np.testing.assert_array_equal(jrc.n_clusters_scores_, order.scores)
    assert order.details["spectrum"].shape == (18,)
    # the chosen k's embedding and clustering
    assert jrc.embedding_.shape == (300, k) and jrc.cluster_centers_.shape == (k, k)
    assert jrc.cluster_sizes_.size == k and jrc.cluster_ranking(3)[1].shape == (300, 1 + k)


@pytest.mark.parametrize("embedding", ["normalized", "laplacian"])
def test_auto_spectrum_is_that_of_the_normalized_kernel(embedding):
    """The evidence of 'auto' against the dense eigenvalues of D^-1/2 K D^-1/2 (those of
    P = D^-1 K), whichever embedding runs; the embedding at the chosen k is the one an integer
    n_clusters gives."""
    from dkernel.model_order import timescale_gap_scores

    X, _ = _blobs(n=100, k=3, seed=1)
    K = rbf_block(X, X, 2.0)
    auto = JointRankingClustering(
        "auto", kernel="precomputed", max_clusters=6, embedding=embedding, random_state=0
    ).fit(K)
    d = K.sum(axis=1)
    P_sym = K / np.sqrt(np.outer(d, d))
    reference = np.sort(np.linalg.eigvalsh(P_sym))[::-1][:7]
    reference_P = np.sort(np.linalg.eigvals(K / d[:, None]).real)[::-1][:7]
    np.testing.assert_allclose(auto.model_order_.details["spectrum"], reference, atol=1e-10)
    np.testing.assert_allclose(reference_P, reference, atol=1e-10)
    np.testing.assert_array_equal(auto.n_clusters_candidates_, np.arange(2, 7))
    np.testing.assert_allclose(
        auto.n_clusters_scores_, timescale_gap_scores(reference, np.arange(2, 7)), atol=1e-6
    )
    assert auto.n_clusters_ == 3
    fixed = JointRankingClustering(
        3, kernel="precomputed", embedding=embedding, random_state=0
    ).fit(K)
    assert fixed.model_order_ is None and fixed.n_clusters_candidates_ is None
    assert fixed.n_clusters_scores_ is None and fixed.n_clusters_ == 3
    np.testing.assert_allclose(np.abs(auto.embedding_), np.abs(fixed.embedding_), atol=1e-8)
    np.testing.assert_allclose(auto.eigenvalues_, fixed.eigenvalues_, atol=1e-10)
    np.testing.assert_array_equal(auto.labels_, fixed.labels_)


def test_auto_keeps_an_explicit_n_components():
    X, _ = _blobs(n=150, k=3, seed=1)
    jrc = JointRankingClustering(n_clusters="auto", max_clusters=4, n_components=8).fit(X)
    assert jrc.n_clusters_ == 3 and jrc.embedding_.shape == (150, 8)


@pytest.mark.parametrize(
    ("params", "n", "match"),
    [
        ({"max_clusters": 1}, 50, "'max_clusters' parameter of JointRankingClustering"),
        ({"max_clusters": 2.5}, 50, "'max_clusters' parameter of JointRankingClustering"),
        ({"n_clusters": "many"}, 50, "'n_clusters' parameter of JointRankingClustering"),
        ({"n_neighbors": 1}, 2, "pass an integer n_clusters"),
        ({"n_components": 60}, 50, "'n_components' parameter"),
    ],
)
def test_bad_auto_parameters(params, n, match):
    X, _ = _blobs(n=n, k=2)
    with pytest.raises(InvalidInputError, match=match):
        JointRankingClustering(**({"n_clusters": "auto"} | params)).fit(X)
