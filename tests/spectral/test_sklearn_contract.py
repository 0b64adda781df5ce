"""The scikit-learn contract of the spectral estimators (issue 16, item 1).

Pickle round trips of fitted models, model selection in a pipeline, ``set_output``, feature names,
``predict`` only where it means something, and Dask input kept lazy. The common checks (the
default construction and the clustering / Nyström variants) run in
tests/test_estimator_checks.py.
"""

from __future__ import annotations

import functools
import pickle

import dask.array as da
import numpy as np
import pytest
from sklearn.datasets import make_blobs
from sklearn.exceptions import NotFittedError as SklearnNotFittedError
from sklearn.metrics import adjusted_rand_score, make_scorer
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler

from dkernel import KECA, KernelPCAEmbedding, NystromEmbedding, SpectralClustering
from dkernel.errors import InvalidInputError, NotFittedError
from dkernel.testing import raise_if_dask_computes


@pytest.fixture(scope="module")
def blobs():
    X, y = make_blobs(120, centers=3, n_features=4, cluster_std=0.6, random_state=0)
    return X, y


def _sqeuclidean_kernel(X, Y):
    """A module-level user kernel (pickles by reference)."""
    d2 = (X**2).sum(1)[:, None] - 2 * X @ Y.T + (Y**2).sum(1)[None, :]
    return np.exp(-np.maximum(d2, 0) / 8.0)


def _scaled_rbf(X, Y, *, width):
    d2 = (X**2).sum(1)[:, None] - 2 * X @ Y.T + (Y**2).sum(1)[None, :]
    return np.exp(-np.maximum(d2, 0) / width)


@pytest.mark.parametrize(
    "make",
    [
        lambda: SpectralClustering(3, random_state=0),  # exact sparse k-NN path
        lambda: SpectralClustering(3, n_landmarks=40, random_state=0),  # Nyström path
        lambda: SpectralClustering(3, kernel="knn", n_landmarks=40, random_state=0),
        lambda: KernelPCAEmbedding(n_clusters=3, random_state=0),
        lambda: KECA(n_clusters=3, random_state=0),
    ],
)
def test_pickled_clusterer_predicts_the_same(blobs, make):
    X, _ = blobs
    model = make().fit(X[:90])
    clone = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(clone.predict(X[90:]), model.predict(X[90:]))
    np.testing.assert_array_equal(clone.transform(X[90:]), model.transform(X[90:]))
    np.testing.assert_array_equal(clone.labels_, model.labels_)


@pytest.mark.parametrize(
    "params",
    [
        {},
        {"embedding": "normalized", "kernel": "local_scaling"},
        {"embedding": "keca", "kernel": "cosine"},
        {"kernel": _sqeuclidean_kernel},
        {"kernel": functools.partial(_scaled_rbf, width=4.0)},
    ],
)
def test_pickled_nystrom_transforms_the_same(blobs, params):
    X, _ = blobs
    model = NystromEmbedding(3, n_landmarks=30, random_state=0, **params).fit(X[:90])
    clone = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(clone.transform(X[90:]), model.transform(X[90:]))


def test_pickled_precomputed_nystrom_transforms_the_same(blobs):
    X, _ = blobs
    K = _sqeuclidean_kernel(X, X[:90])
    model = NystromEmbedding(3, kernel="precomputed", n_landmarks=30, random_state=0)
    model.fit(K[:90])
    assert model.__sklearn_tags__().input_tags.pairwise
    clone = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(clone.transform(K[90:]), model.transform(K[90:]))


def test_pickled_pck_kernel_nystrom_transforms_the_same(blobs):
    from dkernel import ProbabilisticClusterKernel

    X, _ = blobs
    pck = ProbabilisticClusterKernel(n_estimators=3, max_components=4, random_state=0).fit(X)
    model = NystromEmbedding(
        3, kernel="pck", kernel_params={"model": pck}, n_landmarks=30, random_state=0
    ).fit(X[:90])
    clone = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(clone.transform(X[90:]), model.transform(X[90:]))


def test_a_local_user_kernel_fails_to_pickle_like_the_function(blobs):
    X, _ = blobs

    def local_kernel(A, B):
        return _sqeuclidean_kernel(A, B)

    model = NystromEmbedding(2, kernel=local_kernel, n_landmarks=20).fit(X)
    with pytest.raises((pickle.PicklingError, AttributeError), match="local"):
        pickle.dumps(model)


@pytest.mark.parametrize(
    "est",
    [
        SpectralClustering(random_state=0),
        KernelPCAEmbedding(n_clusters=2, random_state=0),
        KECA(n_clusters=2, random_state=0),
    ],
    ids=["SpectralClustering", "KernelPCAEmbedding", "KECA"],
)
def test_grid_search_over_a_pipeline(blobs, est):
    X, y = blobs
    pipe = Pipeline([("scale", StandardScaler()), ("est", est)])
    search = GridSearchCV(
        pipe,
        {"est__n_clusters": [2, 3]},
        scoring=make_scorer(adjusted_rand_score),
        cv=3,
    ).fit(X, y)
    assert search.best_params_ == {"est__n_clusters": 3}
    assert search.best_score_ > 0.9


def test_predict_exists_only_with_n_clusters():
    assert not hasattr(KernelPCAEmbedding(), "predict")
    assert not hasattr(KernelPCAEmbedding(), "fit_predict")
    assert not hasattr(KECA(), "predict")
    assert hasattr(KernelPCAEmbedding(n_clusters=3), "predict")
    assert hasattr(KECA(n_clusters=3), "fit_predict")


@pytest.mark.parametrize(
    "est, prefix",
    [
        (NystromEmbedding(2, n_landmarks=30), "nystromembedding"),
        (KernelPCAEmbedding(2), "kernelpcaembedding"),
        (KECA(2), "keca"),
        (SpectralClustering(2, random_state=0), "spectralclustering"),
    ],
)
def test_set_output_and_feature_names(blobs, est, prefix):
    pd = pytest.importorskip("pandas")
    X, _ = blobs
    df = pd.DataFrame(X, columns=["a", "b", "c", "d"])
    est.set_output(transform="pandas").fit(df)
    np.testing.assert_array_equal(est.feature_names_in_, ["a", "b", "c", "d"])
    out = est.transform(df)
    assert isinstance(out, pd.DataFrame)
    assert list(out.columns) == [f"{prefix}0", f"{prefix}1"]
    with pytest.warns(UserWarning, match="feature names"):
        est.transform(X)


@pytest.mark.parametrize("est", [NystromEmbedding(), KernelPCAEmbedding(), SpectralClustering()])
def test_unfitted_and_wrong_input(blobs, est):
    X, _ = blobs
    with pytest.raises(SklearnNotFittedError):
        est.transform(X)
    with pytest.raises(NotFittedError):
        est.transform(X)
    with pytest.raises(InvalidInputError, match="Complex data not supported"):
        est.fit(X + 1j)
    with pytest.raises(InvalidInputError, match="expecting 4 features"):
        est.fit(X).transform(X[:, :3])


def test_dask_input_stays_lazy(blobs):
    X, _ = blobs
    Xd = da.from_array(X, chunks=(40, 4))
    model = NystromEmbedding(2, n_landmarks=30, random_state=0).fit(X)
    with raise_if_dask_computes():
        Z = model.transform(Xd)
    assert isinstance(Z, da.Array)
    np.testing.assert_allclose(Z.compute(), model.transform(X), rtol=1e-12, atol=1e-12)
    with pytest.raises(InvalidInputError, match="expecting 4 features"):
        model.transform(Xd[:, :3])
    sc = SpectralClustering(3, n_landmarks=30, random_state=0).fit(X)
    with raise_if_dask_computes():
        labels = sc.predict(Xd)
    assert isinstance(labels, da.Array)
    np.testing.assert_array_equal(labels.compute(), sc.predict(X))


@pytest.mark.parametrize(
    "est",
    [
        SpectralClustering(n_clusters=0),
        NystromEmbedding(embedding="laplacian"),
        KernelPCAEmbedding(kernel=3),
        KECA(sigma=-1.0),
    ],
)
def test_parameter_errors_are_both_dkernel_and_sklearn_errors(blobs, est):
    from sklearn.utils._param_validation import InvalidParameterError

    X, _ = blobs
    with pytest.raises(InvalidInputError, match=f"parameter of {type(est).__name__} must be"):
        est.fit(X)
    with pytest.raises(InvalidParameterError):
        est.fit(X)
