"""The registry's ``landmark`` kernel: the point-side graph ``B D_Y⁻¹ Bᵀ`` of the landmark
bipartite graph, against a brute-force reference, and in the estimators that take registry
kernels (Nyström KPCA / KECA, KPPR, JRC)."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
from sklearn.datasets import make_moons
from sklearn.metrics import adjusted_rand_score

from dkernel import JointRankingClustering, KernelPersonalizedPageRank
from dkernel.errors import InvalidInputError
from dkernel.kernels.registry import make_kernel
from dkernel.linalg.eigen import fix_signs
from dkernel.spectral.dense import kpca_embedding
from dkernel.spectral.nystrom import NystromEmbedding


def _brute_force_links(X, landmarks, scales, k):
    """B (n, p): each point's k nearest landmarks by a full sort, local-scaling weights."""
    B = np.zeros((len(X), len(landmarks)))
    for i, x in enumerate(X):
        d2 = ((landmarks - x) ** 2).sum(axis=1)
        nearest = np.argsort(d2, kind="stable")[:k]
        sigma_x = np.sqrt(d2[nearest[-1]])
        B[i, nearest] = np.exp(-d2[nearest] / (sigma_x * scales[nearest]))
    return B


@pytest.fixture(scope="module")
def blobs():
    rng = np.random.default_rng(3)
    centres = np.array([[0.0, 0.0], [4.0, 0.0], [0.0, 4.0]])
    return np.concatenate([c + rng.normal(size=(200, 2)) for c in centres])


def test_landmark_kernel_equals_brute_force_bipartite_graph(blobs):
    k = make_kernel("landmark", blobs, n_landmarks=40, n_neighbors=4, seed=1)
    graph = k.feature_map.graph
    B = _brute_force_links(blobs, graph.landmarks, graph.scales, 4)
    d = B.sum(axis=0)
    reference = (B / np.where(d > 0, d, np.inf)) @ B.T
    np.testing.assert_allclose(k(blobs), reference, rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(k.feature_map.degrees, d, rtol=1e-10)
    # the point-side degrees are the link weights' row sums (Transfer Cut's W_X 1 = B 1)
    np.testing.assert_allclose(k(blobs).sum(axis=1), B.sum(axis=1), rtol=1e-10)
    assert k.params == {"n_landmarks": 40, "n_neighbors": 4}
    assert k.nonnegative


def test_landmark_kernel_of_new_points_and_of_dask_input(blobs):
    k = make_kernel("landmark", blobs, n_landmarks=40, seed=0)
    new = blobs[:7] + 0.01
    np.testing.assert_allclose(
        k(new, blobs), k.feature_map.transform(new) @ k.feature_map.transform(blobs).T
    )
    chunked = make_kernel("landmark", da.from_array(blobs, chunks=150), n_landmarks=40, seed=0)
    np.testing.assert_array_equal(
        chunked.feature_map.graph.landmarks, k.feature_map.graph.landmarks
    )
    np.testing.assert_allclose(chunked(blobs[:50]), k(blobs[:50]), rtol=1e-12)


def test_landmark_kernel_default_landmarks_and_bad_sizes(blobs):
    assert make_kernel("landmark", blobs[:300]).params["n_landmarks"] == 300
    with pytest.raises(InvalidInputError, match=r"must be < n_landmarks \(5\)"):
        make_kernel("landmark", blobs, n_landmarks=5, n_neighbors=5)
    with pytest.raises(InvalidInputError, match=r"n_landmarks \(700\) must be <="):
        make_kernel("landmark", blobs, n_landmarks=700)
    with pytest.raises(InvalidInputError, match="pass the training data X"):
        make_kernel("landmark")
    with pytest.raises(InvalidInputError, match="'n_neighbors' parameter of the landmark"):
        make_kernel("landmark", blobs, n_neighbors=0)


def test_nystrom_kpca_of_the_landmark_kernel_is_exact_with_every_point(blobs):
    k = make_kernel("landmark", blobs, n_landmarks=30, seed=0)
    G = k.feature_map.transform(blobs)
    est = NystromEmbedding(
        2, kernel="landmark", kernel_params={"n_landmarks": 30}, n_landmarks=len(blobs)
    )
    Z = est.fit_transform(blobs)
    ref = kpca_embedding(G @ G.T, 2).embedding
    np.testing.assert_allclose(fix_signs(Z), fix_signs(ref), atol=1e-6)


def test_ranking_estimators_take_the_landmark_kernel():
    X, y = make_moons(1500, noise=0.07, random_state=0)
    X = (X - X.mean(axis=0)) / X.std(axis=0)
    jrc = JointRankingClustering(n_clusters=2, kernel="landmark", random_state=0).fit(X)
    assert jrc.kernel_params_ == {"kernel": "landmark", "n_landmarks": 1000, "n_neighbors": 5}
    assert adjusted_rand_score(y, jrc.labels_) > 0.95
    np.testing.assert_array_equal(jrc.predict(X), jrc.labels_)
    kppr = KernelPersonalizedPageRank(
        kernel="landmark", kernel_params={"n_landmarks": 200}, min_eigenvalue=None
    ).fit(X)
    assert kppr.kernel_.is_feature_map
    assert kppr.kernel_params_["n_landmarks"] == 200
    # a training point scored as a new point gets its in-sample score: κ is a fixed function
    np.testing.assert_allclose(
        kppr.score_samples(X[:50], [3, 4]), kppr.rank([3, 4])[:50], atol=1e-12
    )
    with pytest.raises(InvalidInputError, match="unknown kernel_params"):
        KernelPersonalizedPageRank(kernel="landmark", kernel_params={"sigma": 1.0}).fit(X)
