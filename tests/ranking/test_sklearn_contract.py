"""KPPR and JRC in scikit-learn: pickling and GridSearchCV (the common checks run in
tests/test_estimator_checks.py)."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from sklearn.datasets import make_blobs
from sklearn.metrics import adjusted_rand_score, make_scorer
from sklearn.model_selection import GridSearchCV, KFold
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from dkernel.ranking import JointRankingClustering, KernelPersonalizedPageRank


@pytest.fixture
def blobs():
    return make_blobs(n_samples=150, centers=3, cluster_std=0.6, random_state=0)


@pytest.mark.parametrize("kernel", ["rbf", "knn_mean", "local_scaling", "pck", "precomputed"])
def test_fitted_kppr_pickles(blobs, kernel):
    X, _ = blobs
    X_fit, X_new = X[::2], X[1::2]
    if kernel == "precomputed":  # the Gram matrix to fit, kernel rows to scoring
        K = np.exp(-((X[:, None, :] - X_fit[None, :, :]) ** 2).sum(axis=-1) / 2.0)
        X_fit, X_new = K[::2], K[1::2]
    model = KernelPersonalizedPageRank(kernel=kernel, random_state=0).fit(X_fit)
    again = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(again.score_samples(X_new, 3), model.score_samples(X_new, 3))
    np.testing.assert_array_equal(again.project(X_new), model.project(X_new))
    np.testing.assert_array_equal(again.rank(3), model.rank(3))


def test_grid_search_over_pipeline(blobs):
    X, y = blobs
    grid = {"jointrankingclustering__n_neighbors": [5, 10]}
    search = GridSearchCV(
        make_pipeline(StandardScaler(), JointRankingClustering(random_state=0)),
        grid,
        scoring=make_scorer(adjusted_rand_score),
        cv=KFold(2, shuffle=True, random_state=0),
        error_score="raise",
    ).fit(X, y)
    assert set(search.best_params_) == set(grid)
    assert search.best_score_ > 0.9
