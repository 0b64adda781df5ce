"""The missing-value model: EM's Gaussian and its conditional moments, against slow references."""

from __future__ import annotations

import numpy as np
import pytest

from dkernel.errors import InvalidInputError
from dkernel.kernels import missing_model as mm
from dkernel.kernels.missing_model import MissingValueModel, column_moments, model_rows

COV = np.array([[2.0, 1.2, 0.3, 0.0], [1.2, 1.5, 0.0, 0.4], [0.3, 0.0, 1.0, 0.5], [0, 0.4, 0.5, 1]])


def _correlated(rng, n, rate):
    X = rng.multivariate_normal([1.0, -2.0, 0.5, 3.0], COV, n)
    X[rng.random(X.shape) < rate] = np.nan
    return X


def _slow_fill(model, X):
    """Row by row, from the covariance's blocks (the code uses the precision's)."""
    p = model.mean.size
    S = model.covariance + mm.COVARIANCE_RIDGE * np.trace(model.covariance) / p * np.eye(p)
    filled, extra = X.copy(), np.zeros(len(X))
    for i, x in enumerate(X):
        M, O = np.flatnonzero(np.isnan(x)), np.flatnonzero(~np.isnan(x))
        if not M.size:
            continue
        gain = S[np.ix_(M, O)] @ np.linalg.inv(S[np.ix_(O, O)])
        filled[i, M] = model.mean[M] + gain @ (x[O] - model.mean[O])
        C = S[np.ix_(M, M)] - gain @ S[np.ix_(O, M)]
        extra[i] = np.trace(C)
    return filled, extra


def test_complete_rows_give_the_sample_moments(rng):
    X = rng.normal(size=(50, 4))
    model = MissingValueModel.fit(X)
    np.testing.assert_allclose(model.mean, X.mean(axis=0))
    np.testing.assert_allclose(model.covariance, np.cov(X.T, bias=True))
    filled, extra = model.fill(X)
    np.testing.assert_array_equal(filled, X)
    np.testing.assert_array_equal(extra, 0.0)


@pytest.mark.parametrize("rate", [0.1, 0.4])
def test_fill_is_the_conditional_mean_and_variance(rng, rate):
    model = MissingValueModel.fit(_correlated(rng, 300, rate))
    Q = _correlated(rng, 40, rate)
    Q[0] = np.nan  # nothing observed: the mean, the whole trace
    filled, extra = model.fill(Q)
    ref_filled, ref_extra = _slow_fill(model, Q)
    np.testing.assert_allclose(filled, ref_filled, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(extra, ref_extra, rtol=1e-9, atol=1e-12)


def test_em_recovers_the_covariance_that_column_moments_miss(rng):
    X = _correlated(rng, 4000, 0.3)
    model = MissingValueModel.fit(X)  # the first 2 000 rows
    assert np.abs(model.covariance - COV).max() < 0.25
    assert np.abs(model.mean - [1.0, -2.0, 0.5, 3.0]).max() < 0.1
    # a missing entry of a correlated column is predicted from the observed ones
    truth = rng.multivariate_normal([1.0, -2.0, 0.5, 3.0], COV, 2000)
    holed = truth.copy()
    holed[:, 0] = np.nan
    error_model = np.mean((model.fill(holed)[0][:, 0] - truth[:, 0]) ** 2)
    error_mean = np.mean((np.nanmean(X[:, 0]) - truth[:, 0]) ** 2)
    assert error_model < 0.6 * error_mean


def test_independent_columns_are_the_column_moments(rng):
    X = _correlated(rng, 60, 0.3)
    mean, var = column_moments(X)
    model = MissingValueModel(mean, var)
    filled, extra = model.fill(X)
    np.testing.assert_allclose(filled, np.where(np.isnan(X), mean, X))
    np.testing.assert_allclose(extra, np.isnan(X) @ var)
    np.testing.assert_array_equal(model.variances, var)
    wide = np.full((5, mm.FULL_COVARIANCE_MAX_COLUMNS + 1), 1.0)
    wide[::2, 0] = np.nan
    wide[1, 1] = 3.0
    assert MissingValueModel.fit(wide).independent
    holed = rng.normal(size=(20, mm.FULL_COVARIANCE_MAX_MISSING + 50))
    holed[:, : mm.FULL_COVARIANCE_MAX_MISSING + 1] = np.nan  # every row misses too many
    assert MissingValueModel.fit(holed).independent
    holed[:, : mm.FULL_COVARIANCE_MAX_MISSING + 1] = 0.5
    holed[::2, :10] = np.nan
    assert not MissingValueModel.fit(holed).independent


def test_model_rows_are_evenly_spaced_and_deterministic():
    np.testing.assert_array_equal(model_rows(10), np.arange(10))
    rows = model_rows(10 * mm.MISSING_MODEL_SAMPLE)
    assert rows.size == mm.MISSING_MODEL_SAMPLE and rows[0] == 0 and rows[-1] == 10 * rows.size - 1
    np.testing.assert_array_equal(rows, model_rows(10 * mm.MISSING_MODEL_SAMPLE))


def test_bad_shapes_are_refused(rng):
    model = MissingValueModel.fit(_correlated(rng, 30, 0.2))
    with pytest.raises(InvalidInputError, match="4 columns"):
        model.fill(np.zeros((2, 3)))
    with pytest.raises(InvalidInputError, match="covariance has shape"):
        MissingValueModel(np.zeros(3), np.eye(2))
    with pytest.raises(InvalidInputError, match="2-D"):
        MissingValueModel.fit(np.zeros(3))


def test_a_model_is_fitted_once_per_content_and_fills_are_fresh_copies(rng):
    import pickle

    X = _correlated(rng, 200, 0.3)
    model = MissingValueModel.fit(X)
    assert MissingValueModel.fit(X.copy()) is model  # the same rows: the same model
    other = X.copy()
    other[0, 0] = 123.0
    assert MissingValueModel.fit(other) is not model
    filled, extra = model.fill(X)
    filled += 1.0  # a caller changing its result in place does not change the next one
    again, _ = model.fill(X)
    np.testing.assert_array_equal(again, model._fill(X)[0])
    back = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(back.fill(X)[0], again)
    assert not back._fills or len(back._fills) == 1


@pytest.mark.parametrize(
    "estimator",
    [
        "SpectralClustering",
        "JointRankingClustering",
        "KernelDecompositionClustering",
        "KernelKMeans",
    ],
)
def test_rows_with_no_observed_value_are_warned_of_at_the_callers_line(rng, estimator):
    """A row with every entry missing is placed at the data's mean by every distance-based
    kernel and graph: the clusterers say so, naming the count, where the user called fit."""
    import warnings

    import dkernel
    from dkernel.errors import NumericalWarning

    X = _correlated(rng, 200, 0.2)
    X[[3, 50], :] = np.nan
    model = getattr(dkernel, estimator)(n_clusters=3, random_state=0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.fit(X)
    empty = [w for w in caught if "no observed value" in str(w.message)]
    assert empty, [str(w.message) for w in caught]
    assert all(w.category is NumericalWarning for w in empty)
    assert "2 of 200 rows have no observed value" in str(empty[0].message)
    assert empty[0].filename == __file__
    X[[3, 50], 0] = 0.0
    with warnings.catch_warnings():
        warnings.filterwarnings("error", "rows have no observed value")
        getattr(dkernel, estimator)(n_clusters=3, random_state=0).fit(X)
