"""KernelDecompositionClustering's landmark bipartite path (approximation='bipartite')."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
from scipy.special import logsumexp
from sklearn.datasets import make_blobs, make_moons
from sklearn.metrics import adjusted_rand_score
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import parametrize_with_checks

from dkernel.decomposition import KernelDecompositionClustering
from dkernel.decomposition.estimator import EXACT_MAX_SAMPLES
from dkernel.decomposition.landmark import fit_landmark_markov, landmark_rows
from dkernel.errors import InvalidInputError
from dkernel.graphs.landmark import fit_landmark_graph

#: A small bipartite fit: 100 landmarks of 1 500 points.
SMALL = {"approximation": "bipartite", "n_landmarks": 100, "random_state": 0}


@pytest.fixture(scope="module")
def blobs():
    X, y = make_blobs(1500, centers=[[0, 0], [4, 0], [0, 4]], cluster_std=0.6, random_state=0)
    return X, y


@pytest.fixture(scope="module")
def small_model(blobs):
    return KernelDecompositionClustering(3, **SMALL).fit(blobs[0])


def test_defaults_hold_two_moons_at_2e4():
    # the exact 7-NN path split both moons here (ARI 0.003)
    X, y = make_moons(20_000, noise=0.07, random_state=0)
    X = StandardScaler().fit_transform(X)
    model = KernelDecompositionClustering(2, random_state=0).fit(X)
    assert model.approximation_ == "bipartite"
    assert adjusted_rand_score(y, model.labels_) > 0.99
    assert np.mean(model.predict(X) == model.labels_) >= 0.99
    p = model.W_.shape[0]  # at most 1000: centres of a single sample point are dropped
    assert 900 <= p <= 1000 and model.W_.shape == (p, 2) and model.H_.shape == (2, p)


def test_auto_picks_the_path(blobs):
    X, _ = blobs
    model = KernelDecompositionClustering(3)
    assert model._approximation(EXACT_MAX_SAMPLES) == "exact"
    assert model._approximation(EXACT_MAX_SAMPLES + 1) == "bipartite"
    assert model.set_params(kernel="rbf")._approximation(10**6) == "exact"
    assert model.set_params(kernel="local_scaling", n_neighbors=None)._approximation(10**6) == (
        "exact"
    )
    small = KernelDecompositionClustering(3, random_state=0).fit(X)
    assert small.approximation_ == "exact" and small.graph_model_ is None
    assert small.X_fit_.shape == X.shape
    # n_landmarks selects the landmark path whatever N
    assert KernelDecompositionClustering(3, n_landmarks=100).fit(X).approximation_ == "bipartite"


def test_posteriors_predict_and_scores(small_model, blobs):
    X, y = blobs
    model = small_model
    assert adjusted_rand_score(y, model.labels_) > 0.95
    P = model.posteriors_
    assert P.shape == (len(X), 3) and (P >= 0).all()
    np.testing.assert_allclose(P.sum(axis=1), 1.0)
    np.testing.assert_allclose(model.predict_proba(X), P, rtol=1e-12, atol=1e-14)
    np.testing.assert_array_equal(model.predict(X), model.labels_)
    np.testing.assert_allclose(model.priors_, P.mean(axis=0))
    np.testing.assert_allclose(model.W_.sum(axis=0), 1.0)
    np.testing.assert_allclose(model.H_.sum(axis=0), 1.0)
    assert model.sigma_.shape == (100,) and model.X_fit_ is None
    # held out: near the blob centres crisp, far off lower density
    Z = np.array([[0.0, 0.0], [4.0, 0.0], [0.0, 4.0]])
    Pz = model.predict_proba(Z)
    assert (Pz.max(axis=1) > 0.9).all() and len(set(Pz.argmax(axis=1))) == 3
    s = model.score_samples(np.vstack([Z, [[2.0, 2.0]]]))
    assert np.all(np.isfinite(s)) and s[:3].min() > s[3]
    assert np.isfinite(model.score(X))


def test_deterministic_and_dask_input_gives_the_same_labels(small_model, blobs):
    X, _ = blobs
    again = KernelDecompositionClustering(3, **SMALL).fit(X)
    np.testing.assert_array_equal(again.labels_, small_model.labels_)
    np.testing.assert_array_equal(again.H_, small_model.H_)
    Xd = da.from_array(X, chunks=(400, -1))
    lazy = KernelDecompositionClustering(3, **SMALL).fit(Xd)
    np.testing.assert_array_equal(lazy.labels_, small_model.labels_)
    np.testing.assert_allclose(lazy.posteriors_, small_model.posteriors_, rtol=1e-10, atol=1e-12)
    proba = lazy.predict_proba(Xd)
    assert isinstance(proba, da.Array)
    np.testing.assert_allclose(proba.compute(), small_model.posteriors_, rtol=1e-10, atol=1e-12)
    s = lazy.score_samples(Xd)
    assert isinstance(s, da.Array) and s.shape == (len(X),)
    np.testing.assert_allclose(s.compute(), small_model.score_samples(X), rtol=1e-10)
    assert lazy.score(Xd) == pytest.approx(small_model.score(X))


def test_rows_are_the_link_formula(small_model, blobs):
    X, _ = blobs
    graph, H = small_model.graph_model_, small_model.H_
    ind, w = graph.links(X[:50])
    share = w / w.sum(axis=1, keepdims=True)
    expected = np.einsum("nk,nkc->nc", share, H.T[ind])
    np.testing.assert_allclose(landmark_rows(X[:50], graph, H), expected, rtol=1e-10)
    m = small_model.W_ @ small_model.priors_
    ind2, logw = graph.log_links(X[:50])
    np.testing.assert_array_equal(ind2, ind)
    np.testing.assert_allclose(
        small_model.score_samples(X[:50]), logsumexp(logw + np.log(m)[ind], axis=1)
    )


def test_unlinked_landmarks_are_left_out(blobs):
    X, _ = blobs
    graph = fit_landmark_graph(X[:500], 40, 5, seed=0)
    ind, w = graph.links(X)
    p = graph.n_landmarks
    B = np.zeros((len(X), p))
    np.put_along_axis(B, ind, w, axis=1)
    B[:, 7] = 0.0  # nobody links to landmark 7
    W = B.T @ (B / B.sum(axis=1, keepdims=True))
    d = B.sum(axis=0)
    fit = fit_landmark_markov(W, d, 3, loss="kl-euclidean", n_init=2, max_iter=50, tol=1e-6, seed=0)
    assert fit.W.shape == (p, 3) and fit.H.shape == (3, p)
    np.testing.assert_allclose(fit.W[7], 0.0)
    np.testing.assert_allclose(fit.H[:, 7], 1 / 3)
    np.testing.assert_allclose(fit.H.sum(axis=0), 1.0)


@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"approximation": "bipartite", "n_landmarks": 2000}, "n_landmarks"),
        ({"n_landmarks": 10, "landmark_neighbors": 10}, "landmark_neighbors"),
        ({"approximation": "bipartite", "kernel": "rbf"}, "local_scaling"),
        ({"approximation": "bipartite", "n_neighbors": None}, "exact path"),
        ({"approximation": "exact", "n_landmarks": 50}, "n_landmarks"),
        ({"approximation": "bipartite", "sigma": 0.5}, "sigma"),
        ({"approximation": "bipartite", "n_landmarks": 2, "landmark_neighbors": 1}, "n_clusters"),
    ],
)
def test_bad_parameters(blobs, params, match):
    with pytest.raises(InvalidInputError, match=match):
        KernelDecompositionClustering(3, **params).fit(blobs[0])


def test_invalid_options_and_nan(blobs):
    X = blobs[0].copy()
    with pytest.raises(InvalidInputError):
        KernelDecompositionClustering(3, approximation="nystrom").fit(X)
    with pytest.raises(InvalidInputError):
        KernelDecompositionClustering(3, landmark_neighbors=0).fit(X)
    X[3, 1] = np.nan
    with pytest.raises(InvalidInputError, match="NaN"):
        KernelDecompositionClustering(3, **SMALL).fit(X)
    with pytest.raises(InvalidInputError, match="NaN"):
        KernelDecompositionClustering(3, **SMALL).fit(da.from_array(X, chunks=(400, -1)))


@parametrize_with_checks([KernelDecompositionClustering(approximation="bipartite", random_state=0)])
def test_sklearn_checks_on_the_landmark_path(estimator, check):
    check(estimator)
