"""MeanShift and MSSC in scikit-learn: pickling, GridSearchCV, Dask input, feature names and errors
(the common checks run in tests/test_estimator_checks.py)."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from sklearn.datasets import make_blobs
from sklearn.metrics import adjusted_rand_score, make_scorer
from sklearn.model_selection import GridSearchCV, KFold
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from dkernel.meanshift import MSSC, MeanShift


@pytest.fixture
def blobs():
    return make_blobs(n_samples=150, centers=3, cluster_std=0.6, random_state=0)


def test_fitted_mssc_pickles(blobs):
    X, _ = blobs
    model = MSSC(3, n_init=5, random_state=0).fit(X)
    again = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(again.predict(X), model.predict(X))
    np.testing.assert_array_equal(again.predict_partition(X), model.predict_partition(X))
    np.testing.assert_array_equal(again.labels_, model.labels_)


@pytest.mark.parametrize(
    ("estimator", "grid"),
    [
        (MeanShift(), {"meanshift__bandwidth_factor": [0.5, 1.0]}),
        (MSSC(3, n_init=5, random_state=0), {"mssc__sigma_fraction": [0.3, 0.5]}),
    ],
    ids=["MeanShift", "MSSC"],
)
def test_grid_search_over_pipeline(blobs, estimator, grid):
    X, y = blobs
    search = GridSearchCV(
        make_pipeline(StandardScaler(), estimator),
        grid,
        scoring=make_scorer(adjusted_rand_score),
        cv=KFold(2, shuffle=True, random_state=0),
        error_score="raise",
    ).fit(X, y)
    assert set(search.best_params_) == set(grid)
    assert search.best_score_ > 0.9


def test_dask_input_is_checked_from_metadata(blobs):
    da = pytest.importorskip("dask.array")
    from dkernel.testing import raise_if_dask_computes

    X, _ = blobs
    model = MSSC(3, n_init=5, random_state=0).fit(X)
    Xd = da.from_array(X, chunks=(50, 2))
    with raise_if_dask_computes():
        labels = model.predict(Xd)
    assert isinstance(labels, da.Array)
    np.testing.assert_array_equal(labels.compute(), model.predict(X))
    with pytest.raises(ValueError, match="X has 3 features, but MSSC is expecting 2"):
        model.predict(da.from_array(np.ones((4, 3)), chunks=(2, 3)))
    assert MeanShift().fit(Xd).n_features_in_ == 2


def test_feature_names_from_a_dataframe(blobs):
    pd = pytest.importorskip("pandas")
    X, _ = blobs
    frame = pd.DataFrame(X, columns=["red", "nir"])
    model = MeanShift().fit(frame)
    np.testing.assert_array_equal(model.feature_names_in_, ["red", "nir"])
    np.testing.assert_array_equal(model.predict(frame), model.labels_)


@pytest.mark.parametrize("estimator", [MeanShift(), MSSC()], ids=["MeanShift", "MSSC"])
def test_errors_are_both_dkernels_and_scikit_learns(blobs, estimator):
    from sklearn.exceptions import NotFittedError as SklearnNotFittedError
    from sklearn.utils._param_validation import InvalidParameterError

    from dkernel.errors import InvalidInputError, NotFittedError

    X, _ = blobs
    with pytest.raises(SklearnNotFittedError) as info:
        estimator.predict(X)
    assert isinstance(info.value, NotFittedError)
    with pytest.raises(InvalidParameterError, match="'tol' parameter of") as info:
        estimator.set_params(tol=-1.0).fit(X)
    assert isinstance(info.value, InvalidInputError)
    with pytest.raises(ValueError, match="Invalid parameter 'bin_seeding'"):
        estimator.set_params(bin_seeding=True)
    with pytest.raises(ValueError, match="Complex data not supported"):
        estimator.set_params(tol=1e-3).fit(X + 1j)
