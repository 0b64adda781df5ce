"""KernelDecompositionClustering: posteriors, out-of-sample consistency, Dask input, errors."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
from sklearn.base import clone
from sklearn.datasets import make_blobs
from sklearn.exceptions import ConvergenceWarning

from dkernel.decomposition import KernelDecompositionClustering
from dkernel.errors import InvalidInputError, NotFittedError, ResourceLimitError
from dkernel.metrics import clustering_accuracy
from dkernel.testing import as_kind

#: The paper's model ([SzymkowiakHave2006]): the dense Gaussian density kernel, not the
#: self-tuning default.
PAPER = {"kernel": "rbf", "n_neighbors": None}


@pytest.fixture(scope="module")
def blobs():
    X, y = make_blobs(
        n_samples=240, centers=[[0, 0], [3, 0], [0, 3]], cluster_std=0.4, random_state=0
    )
    X = (X - X.min(0)) / (X.max(0) - X.min(0))
    return X, y


@pytest.mark.parametrize("n_neighbors", [None, 15])
def test_posteriors_sum_to_one_and_oos_of_training_points_equal_in_sample(
    blobs, array_kind, n_neighbors
):
    X, y = blobs
    model = KernelDecompositionClustering(
        3, kernel="rbf", sigma=0.05, n_neighbors=n_neighbors, random_state=0
    )
    model.fit(as_kind(X, array_kind, chunk_rows=70))
    assert clustering_accuracy(y, model.labels_) == 1.0
    P_in = model.posteriors_
    assert (P_in >= 0).all()
    np.testing.assert_allclose(P_in.sum(1), 1.0, atol=1e-12)
    P_out = model.predict_proba(as_kind(X, array_kind, chunk_rows=70))
    if array_kind == "dask":
        assert isinstance(P_out, da.Array)
        P_out = P_out.compute()
    np.testing.assert_allclose(P_out, P_in, atol=1e-6)
    np.testing.assert_allclose(P_out.sum(1), 1.0, atol=1e-12)
    # the factor H (P(c | x_n)) agrees with the Eq. 9 posteriors on separated clusters
    assert np.mean(model.H_.argmax(0) == model.labels_) == 1.0
    np.testing.assert_allclose(model.W_.sum(0), 1.0, atol=1e-10)
    np.testing.assert_allclose(model.priors_.sum(), 1.0)


def test_new_points_posteriors_crisp_and_score(blobs):
    X, y = blobs
    model = KernelDecompositionClustering(3, **PAPER, sigma=0.05, random_state=0).fit(X)
    Z, yz = make_blobs(
        n_samples=90, centers=[[0, 0], [3, 0], [0, 3]], cluster_std=0.3, random_state=1
    )
    X_raw = make_blobs(
        n_samples=240, centers=[[0, 0], [3, 0], [0, 3]], cluster_std=0.4, random_state=0
    )[0]
    Z = (Z - X_raw.min(0)) / (X_raw.max(0) - X_raw.min(0))
    P = model.predict_proba(Z)
    assert clustering_accuracy(yz, model.predict(Z)) == 1.0
    assert P.max(1).mean() > 0.95
    s = model.score_samples(Z)
    assert s.shape == (90,) and np.isfinite(s).all()
    assert model.score(Z) == pytest.approx(s.mean())
    assert model.generalization_error(Z) == pytest.approx(-s.mean())
    sd = model.score_samples(da.from_array(Z, chunks=(40, 2)))
    np.testing.assert_allclose(sd.compute(), s, rtol=1e-12)


def test_too_wide_or_narrow_width_lowers_heldout_likelihood(blobs):
    X, _ = blobs
    tr, va = X[::2], X[1::2]
    scores = [
        KernelDecompositionClustering(3, **PAPER, sigma=h, random_state=0).fit(tr).score(va)
        for h in (0.003, 0.04, 0.6)
    ]
    assert scores[1] > scores[0] and scores[1] > scores[2]


def test_cosine_kernel_on_count_data(rng):
    topics = np.array([[5, 5, 0, 0, 0, 0], [0, 0, 5, 5, 0, 0], [0, 0, 0, 0, 5, 5]], float)
    y = np.repeat([0, 1, 2], 30)
    X = rng.poisson(topics[y] + 0.2)
    X[X.sum(1) == 0, 0] = 1
    model = KernelDecompositionClustering(3, kernel="cosine", n_neighbors=20, random_state=0).fit(X)
    assert clustering_accuracy(y, model.labels_) > 0.95
    assert np.isfinite(model.score(X))
    with pytest.raises(InvalidInputError, match="non-negative"):
        KernelDecompositionClustering(3, kernel="cosine").fit(X - 1.0)


def test_fit_predict_clone_and_determinism(blobs):
    X, _ = blobs
    a = KernelDecompositionClustering(3, **PAPER, sigma=0.05, random_state=3)
    la = a.fit_predict(X)
    b = clone(a).fit(X)
    np.testing.assert_array_equal(la, b.labels_)
    np.testing.assert_array_equal(a.H_, b.H_)


def test_gaussian_default_sigma_is_silverman(blobs):
    X, _ = blobs
    model = KernelDecompositionClustering(3, **PAPER, random_state=0).fit(X)
    n, p = X.shape
    s = np.mean(np.std(X, axis=0, ddof=1))
    assert model.sigma_ == pytest.approx((4 / (p + 2)) ** (1 / (p + 4)) * n ** (-1 / 6) * s)


def test_errors(blobs):
    X, _ = blobs
    with pytest.raises(NotFittedError):
        KernelDecompositionClustering(3).predict(X)
    with pytest.raises(InvalidInputError, match="n_clusters"):
        KernelDecompositionClustering(0).fit(X)
    with pytest.raises(InvalidInputError, match="sigma"):
        KernelDecompositionClustering(2, kernel="rbf", sigma=-1.0).fit(X)
    with pytest.raises(InvalidInputError, match="kernel"):
        KernelDecompositionClustering(2, kernel="knn").fit(X)
    with pytest.raises(InvalidInputError, match="loss"):
        KernelDecompositionClustering(2, loss="l1").fit(X)
    with pytest.raises(InvalidInputError, match="NaN"):
        # the default k-NN kernel takes NaN (expected distances); the paper's dense one does not
        KernelDecompositionClustering(2, **PAPER).fit(np.where(X > 0.9, np.nan, X))
    with pytest.raises(InvalidInputError, match="infinite"):
        KernelDecompositionClustering(2).fit(np.where(X > 0.9, np.inf, X))
    with pytest.raises(ResourceLimitError, match="n_neighbors"):
        KernelDecompositionClustering(2, **PAPER, max_memory="1MB").fit(X)
    model = KernelDecompositionClustering(2, **PAPER, sigma=0.1).fit(X)
    with pytest.raises(InvalidInputError, match="features"):
        model.predict(np.ones((3, 5)))


def test_fewer_clusters_than_asked_warn_at_the_callers_line():
    X = np.repeat(np.random.default_rng(0).normal(size=(5, 3)), 200, axis=0)  # 5 distinct rows
    with pytest.warns(
        ConvergenceWarning, match=r"\(1\) found smaller than n_clusters \(3\)"
    ) as seen:
        est = KernelDecompositionClustering(n_clusters=3, random_state=0).fit(X)
    assert np.unique(est.labels_).size == 1
    assert seen[0].filename == __file__
