"""The scikit-learn contract of ProbabilisticClusterKernel (issue 16, item 1): pickling, tags,
``set_output``, feature names and Dask input. The common checks (the default construction,
whose G is capped on their small tables, and the dtype / covariance / missingness / projection
variants) run in tests/test_estimator_checks.py.
"""

from __future__ import annotations

import pickle

import dask.array as da
import numpy as np
import pytest
from sklearn.datasets import make_blobs

from dkernel import ProbabilisticClusterKernel
from dkernel.testing import raise_if_dask_computes


@pytest.fixture(scope="module")
def blobs_with_nan():
    X, _ = make_blobs(150, centers=3, n_features=4, random_state=0)
    X[np.random.default_rng(0).random(X.shape) < 0.1] = np.nan
    return X


def test_pickled_model_transforms_the_same(blobs_with_nan):
    X = blobs_with_nan
    model = ProbabilisticClusterKernel(n_estimators=4, max_components=5, random_state=0).fit(X)
    clone = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(clone.transform(X), model.transform(X))
    np.testing.assert_array_equal(clone.degrees_, model.degrees_)


def test_tags():
    tags = ProbabilisticClusterKernel().__sklearn_tags__()
    assert tags.input_tags.allow_nan
    assert tags.transformer_tags.preserves_dtype == ["float32"]
    tags64 = ProbabilisticClusterKernel(dtype="float64").__sklearn_tags__()
    assert tags64.transformer_tags.preserves_dtype == ["float64"]


def test_set_output_and_feature_names(blobs_with_nan):
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame(blobs_with_nan, columns=list("abcd"))
    model = ProbabilisticClusterKernel(n_estimators=2, max_components=3, random_state=0)
    out = model.set_output(transform="pandas").fit_transform(df)
    np.testing.assert_array_equal(model.feature_names_in_, list("abcd"))
    assert isinstance(out, pd.DataFrame)
    assert list(out.columns) == list(model.get_feature_names_out())
    assert out.shape == (150, 2 * (2 + 3))


def test_dask_transform_stays_lazy(blobs_with_nan):
    X = blobs_with_nan
    model = ProbabilisticClusterKernel(n_estimators=2, max_components=3, random_state=0).fit(X)
    Xd = da.from_array(X, chunks=(50, 4))
    with raise_if_dask_computes():
        G = model.transform(Xd)
    # float32 GEMMs on 50-row chunks round differently from one 150-row block
    np.testing.assert_allclose(G.compute(), model.transform(X), rtol=1e-4, atol=1e-5)


def test_keyword_only_after_n_estimators():
    with pytest.raises(TypeError):
        ProbabilisticClusterKernel(3, 4)
