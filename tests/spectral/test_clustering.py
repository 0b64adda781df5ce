"""dkernel.SpectralClustering: fit / fit_predict / predict / transform on NumPy and Dask."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.datasets import make_blobs, make_moons

from dkernel.errors import InvalidInputError, NotFittedError
from dkernel.metrics import clustering_scores
from dkernel.spectral.clustering import SpectralClustering
from dkernel.testing import as_kind


@pytest.fixture(scope="module")
def blobs():
    return make_blobs(900, centers=[[0, 0], [6, 0], [0, 6]], random_state=0)


@pytest.mark.parametrize("embedding", ["normalized", "kpca", "keca"])
def test_fit_predict_on_numpy_and_dask(blobs, embedding, array_kind):
    X, y = blobs
    sc = SpectralClustering(3, embedding=embedding, n_landmarks=60, random_state=0)
    labels = sc.fit_predict(as_kind(X, array_kind, chunk_rows=250))
    assert isinstance(labels, np.ndarray) and labels.shape == (900,)
    assert clustering_scores(y, labels)["ari"] > 0.95
    pred = sc.predict(as_kind(X[:100], array_kind))
    if array_kind == "dask":
        assert hasattr(pred, "dask")
        pred = pred.compute()
    np.testing.assert_array_equal(pred, labels[:100])


def test_numpy_and_dask_give_the_same_labels(blobs):
    X, _ = blobs
    a = SpectralClustering(3, n_landmarks=50, random_state=4).fit(X)
    b = SpectralClustering(3, n_landmarks=50, random_state=4).fit(as_kind(X, "dask", 200))
    np.testing.assert_array_equal(a.labels_, b.labels_)


def test_predicts_new_points(blobs):
    X, y = blobs
    sc = SpectralClustering(3, kernel="rbf", n_landmarks=80, random_state=0).fit(X[:600])
    pred = sc.predict(X[600:])
    assert clustering_scores(y[600:], pred)["ari"] > 0.95
    assert sc.transform(X[600:]).shape == (300, 3)
    assert sc.eigengap_hint_ == 3
    assert sc.sigma_ > 0


def test_non_convex_moons():
    X, y = make_moons(600, noise=0.05, random_state=0)
    sc = SpectralClustering(2, sigma=0.1, n_landmarks=200, random_state=0).fit(X)
    assert clustering_scores(y, sc.labels_)["ari"] > 0.95


def test_kmeans_sample_is_used_for_large_n(blobs):
    X, y = blobs
    sc = SpectralClustering(3, n_landmarks=40, kmeans_sample=100, random_state=0).fit(X)
    assert clustering_scores(y, sc.labels_)["ari"] > 0.95


def test_precomputed_kernel(blobs):
    X, y = blobs
    from dkernel.kernels.rbf import rbf_block

    a = SpectralClustering(3, sigma=1.5, n_landmarks=50, landmarks="uniform", random_state=1)
    b = clone(a).set_params(kernel="precomputed", sigma=None)
    la = a.fit_predict(X)
    lb = b.fit_predict(rbf_block(X, X, 1.5))
    np.testing.assert_array_equal(la, lb)


def test_deterministic_given_seed(blobs):
    X, _ = blobs
    a = SpectralClustering(3, n_landmarks=30, random_state=7).fit(X)
    b = SpectralClustering(3, n_landmarks=30, random_state=7).fit(X)
    np.testing.assert_array_equal(a.landmark_indices_, b.landmark_indices_)
    np.testing.assert_array_equal(a.labels_, b.labels_)


def test_errors(blobs):
    X, _ = blobs
    with pytest.raises(NotFittedError):
        SpectralClustering(3).predict(X)
    with pytest.raises(InvalidInputError, match="'n_clusters'"):
        SpectralClustering(0).fit(X)
    with pytest.raises(InvalidInputError, match="n_samples"):
        SpectralClustering(1000).fit(X)
    with pytest.raises(InvalidInputError, match="'assign'"):
        SpectralClustering(3, assign="gmm").fit(X)
    with pytest.raises(InvalidInputError, match="unknown kernel"):
        SpectralClustering(3, kernel="laplace").fit(X)
