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


@pytest.mark.parametrize("approximation", ["exact", "bipartite", "nystrom"])
def test_the_two_halves_of_fit_with_a_stored_embedding_equal_fit(blobs, tmp_path, approximation):
    """What the spectral-clustering job does: the embedding (lazy), written to a store; the
    centres from the stored embedding; its labels, chunk by chunk: the same as ``fit``."""
    import dask.array as da

    X, _ = blobs
    params = dict(approximation=approximation, n_landmarks=60, kmeans_max_samples=500)
    Xd = as_kind(X, "dask", chunk_rows=250)
    fitted = SpectralClustering(3, random_state=2, **params).fit(Xd)
    halves = SpectralClustering(3, random_state=np.random.default_rng(7), **params)
    reference = SpectralClustering(3, random_state=np.random.default_rng(7), **params).fit(Xd)
    Z, seed = halves._fit_embedding_only(Xd)
    assert not hasattr(halves, "labels_") and not hasattr(halves, "cluster_centers_")
    da.to_zarr(da.asarray(Z).rechunk((250, -1)), str(tmp_path / "z.zarr"))
    stored = da.from_zarr(str(tmp_path / "z.zarr"))
    halves._fit_centers(stored, seed)
    labels = halves._assign(stored)
    assert hasattr(labels, "dask")  # lazy: each stored chunk labelled where it is
    np.testing.assert_array_equal(labels.compute(), reference.labels_)
    np.testing.assert_array_equal(halves.cluster_centers_, reference.cluster_centers_)
    assert clustering_scores(fitted.labels_, labels.compute())["ari"] == 1.0
    with pytest.raises(InvalidInputError):  # the parameters are validated as by fit
        SpectralClustering(0)._fit_embedding_only(Xd)


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


def test_kmeans_max_samples_is_used_for_large_n(blobs):
    X, y = blobs
    sc = SpectralClustering(3, n_landmarks=40, kmeans_max_samples=100, random_state=0).fit(X)
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


@pytest.mark.parametrize("approximation", ["exact", "bipartite", "nystrom"])
def test_auto_n_clusters_finds_separated_blobs(approximation):
    X, y = make_blobs(1500, centers=4, cluster_std=0.5, center_box=(-20, 20), random_state=3)
    params = {"n_landmarks": 200} if approximation != "exact" else {}
    sc = SpectralClustering("auto", approximation=approximation, random_state=0, **params).fit(X)
    assert sc.n_clusters_ == 4
    order = sc.model_order_
    assert order.rule == "timescale-gap" and order.n_clusters == 4
    # the evidence: every candidate's score from the recorded spectrum, by a plain loop
    lam = order.details["spectrum"]
    assert np.all(np.diff(lam) <= 1e-12)
    top = int(sc.n_clusters_candidates_[-1])
    assert sc.n_clusters_candidates_[0] == 2 and top == lam.size - 1
    eps = 0.003 * max(1 - lam[top] / lam[0], 0)
    for k, score in zip(sc.n_clusters_candidates_, sc.n_clusters_scores_, strict=True):
        ratio = (max(1 - lam[k] / lam[0], 0) + eps) / (max(1 - lam[k - 1] / lam[0], 0) + eps)
        assert score == pytest.approx(np.log(ratio), rel=1e-9, abs=1e-12)
    assert clustering_scores(y, sc.labels_)["ari"] == pytest.approx(1.0)
    assert sc.cluster_centers_.shape[0] == 4 and sc.predict(X[:7]).max() < 4
    # the chosen k is then fitted as if it had been given
    fixed = SpectralClustering(4, approximation=approximation, random_state=0, **params).fit(X)
    assert fixed.n_clusters_ == 4
    np.testing.assert_array_equal(fixed.labels_, sc.labels_)


def test_a_search_over_scale_neighbors_alone_never_fails():
    """graph_neighbors (the graph's size) follows the widths' rank scale_neighbors up: a grid
    over scale_neighbors = 20 runs."""
    from sklearn.model_selection import GridSearchCV

    X, y = make_blobs(300, centers=3, random_state=0)
    gs = GridSearchCV(
        SpectralClustering(3, random_state=0),
        {"scale_neighbors": [5, 20, 40]},
        scoring="adjusted_rand_score",
        cv=2,
        error_score="raise",
    ).fit(X, y)
    assert gs.best_params_["scale_neighbors"] in (5, 20, 40)
    sc = SpectralClustering(3, scale_neighbors=20, random_state=0).fit(X)
    assert sc.graph_model_.graph_neighbors == 21  # max(10, 20) neighbours + the point itself
