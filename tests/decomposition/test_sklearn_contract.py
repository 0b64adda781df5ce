"""KernelDecompositionClustering in scikit-learn: pickling and GridSearchCV (the common checks
run in tests/test_estimator_checks.py)."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from sklearn.datasets import make_blobs
from sklearn.metrics import adjusted_rand_score, make_scorer
from sklearn.model_selection import GridSearchCV, KFold
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from dkernel.decomposition import KernelDecompositionClustering


@pytest.fixture
def blobs():
    return make_blobs(n_samples=150, centers=3, cluster_std=0.6, random_state=0)


def test_fitted_model_pickles(blobs):
    X, _ = blobs
    model = KernelDecompositionClustering(3, random_state=0).fit(X)
    again = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(again.predict_proba(X), model.predict_proba(X))


@pytest.mark.parametrize(
    ("estimator", "grid", "scoring"),
    [
        (
            KernelDecompositionClustering(3, random_state=0),
            {"kerneldecompositionclustering__n_neighbors": [5, 7]},
            make_scorer(adjusted_rand_score),
        ),
        (  # the paper's model selection: held-out log-likelihood (the estimator's score)
            KernelDecompositionClustering(3, kernel="rbf", n_neighbors=None, random_state=0),
            {"kerneldecompositionclustering__sigma": [0.3, 0.6]},
            None,
        ),
    ],
    ids=["ari", "score"],
)
def test_grid_search_over_pipeline(blobs, estimator, grid, scoring):
    X, y = blobs
    search = GridSearchCV(
        make_pipeline(StandardScaler(), estimator),
        grid,
        scoring=scoring,
        cv=KFold(2, shuffle=True, random_state=0),
        error_score="raise",
    ).fit(X, y)
    assert set(search.best_params_) == set(grid)
    assert np.isfinite(search.best_score_)
    assert adjusted_rand_score(y, search.best_estimator_.predict(X)) > 0.9
