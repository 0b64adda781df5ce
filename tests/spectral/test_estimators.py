import dask
import dask.array as da
import numpy as np
import pytest
from sklearn.datasets import load_wine
from sklearn.decomposition import KernelPCA
from sklearn.preprocessing import StandardScaler

from dkernel.errors import InvalidInputError, NotFittedError, ResourceLimitError
from dkernel.metrics import clustering_accuracy
from dkernel.spectral import KECA, KernelPCAEmbedding
from dkernel.testing import as_kind


@pytest.fixture(scope="module")
def wine():
    X, y = load_wine(return_X_y=True)
    return StandardScaler().fit_transform(X), y


def _assert_equal_up_to_sign(A, B, atol):
    signs = np.sign(np.sum(A * B, axis=0))
    np.testing.assert_allclose(A * signs, B, atol=atol)


def test_kpca_embedding_equals_sklearn_kernelpca_up_to_sign(wine, array_kind):
    X, _ = wine
    ours = KernelPCAEmbedding(n_components=4, sigma=2.5, block_rows=50)
    Z = ours.fit_transform(as_kind(X, array_kind, 50))
    ref = KernelPCA(n_components=4, kernel="rbf", gamma=0.5 / 2.5**2).fit_transform(X)
    _assert_equal_up_to_sign(Z, ref, 1e-8)


def test_kpca_same_result_threaded_and_distributed(wine, client):
    X, _ = wine
    Xd = da.from_array(X, chunks=(40, -1))
    with dask.config.set(scheduler="threads"):
        threaded = KernelPCAEmbedding(n_components=3, block_rows=40).fit(Xd).embedding_
    distributed = KernelPCAEmbedding(n_components=3, block_rows=40).fit(Xd).embedding_
    np.testing.assert_allclose(threaded, distributed, atol=1e-12)


def test_default_rule_of_thumb_clusters_wine(wine):
    X, y = wine
    model = KernelPCAEmbedding(n_components=3, n_clusters=3, random_state=0).fit(X)
    assert clustering_accuracy(y, model.labels_) >= 0.90


def test_transform_of_training_points_equals_embedding(wine, array_kind):
    X, _ = wine
    for model in (KernelPCAEmbedding(n_components=3), KECA(n_components=3)):
        model.fit(X)
        Z = model.transform(as_kind(X, array_kind, 60))
        if array_kind == "dask":
            assert isinstance(Z, da.Array)
            Z = Z.compute()
        np.testing.assert_allclose(Z, model.embedding_, atol=1e-8)


def test_predict_new_points_reproduces_training_labels(wine, array_kind):
    X, _ = wine
    model = KECA(n_components=3, n_clusters=3, random_state=0).fit(X)
    pred = model.predict(as_kind(X, array_kind, 60))
    pred = pred.compute() if array_kind == "dask" else pred
    np.testing.assert_array_equal(pred, model.labels_)


def test_keca_orders_by_entropy_contribution(wine):
    X, _ = wine
    model = KECA(n_components=3, sigma=1.0).fit(X)
    K = np.exp(-((X[:, None] - X[None]) ** 2).sum(-1) / 2.0)
    w, V = np.linalg.eigh(K)
    psi = w * V.sum(axis=0) ** 2
    np.testing.assert_allclose(model.criterion_, np.sort(psi)[::-1][:3], rtol=1e-8)


def test_errors_are_specific(wine):
    X, _ = wine
    with pytest.raises(InvalidInputError, match="'n_components' parameter of KernelPCAEmbedding"):
        KernelPCAEmbedding(n_components=0).fit(X)
    for cls in (KernelPCAEmbedding, KECA):  # n_components follows n_clusters: name the one given
        with pytest.raises(InvalidInputError, match=f"'n_clusters' parameter of {cls.__name__}"):
            cls(n_clusters=10).fit(X[:8])
    with pytest.raises(InvalidInputError, match=r"must be a float in the range \(0.0, inf\)"):
        KernelPCAEmbedding(sigma=-1.0).fit(X)
    with pytest.raises(InvalidInputError, match="Expected 2D array"):
        KernelPCAEmbedding().fit(X[:, 0])
    with pytest.raises(InvalidInputError, match="missing values"):  # rbf takes them
        KernelPCAEmbedding(kernel="linear").fit(np.where(X > 2, np.nan, X))
    with pytest.raises(NotFittedError, match="not fitted"):
        KernelPCAEmbedding().transform(X)
    exact = {"max_memory": "100kB", "approximation": "exact"}
    for model, embedding in [
        (KernelPCAEmbedding(**exact), "kpca"),
        (KernelPCAEmbedding(centered=False, **exact), "uncentered"),
        (KECA(**exact), "keca"),
    ]:  # the error names the Nyström path and the landmark estimator of the same embedding
        with pytest.raises(
            ResourceLimitError,
            match=rf"approximation='nystrom'.*NystromEmbedding\(embedding='{embedding}'\)",
        ):
            model.fit(X)


# the adaptive kernels are not positive semi-definite in general: clipping is reported
@pytest.mark.filterwarnings("ignore::dkernel.errors.NumericalWarning")
@pytest.mark.parametrize("cls", [KernelPCAEmbedding, KECA])
@pytest.mark.parametrize("kernel", ["local_scaling", "knn"])
def test_adaptive_kernels_and_out_of_sample(cls, kernel):
    import pickle

    from sklearn.datasets import make_circles

    from dkernel.kernels.registry import make_kernel, neighbor_parameter

    X, _ = make_circles(300, factor=0.5, noise=0.05, random_state=0)
    est = cls(n_components=3, kernel=kernel, scale_neighbors=8).fit(X)
    K = make_kernel(kernel, X, **{neighbor_parameter(kernel): 8}, n_reference=None)(X)
    np.testing.assert_allclose(est.kernel_matrix(X).compute(), K, rtol=1e-12)
    np.testing.assert_allclose(np.abs(est.transform(X)), np.abs(est.embedding_), atol=1e-8)
    again = pickle.loads(pickle.dumps(est))
    np.testing.assert_allclose(again.transform(X[:5]), est.transform(X[:5]))


def test_rbf_models_pickle():
    import pickle

    X = np.random.default_rng(0).normal(size=(60, 3))
    est = KernelPCAEmbedding(n_components=2).fit(X)
    np.testing.assert_allclose(pickle.loads(pickle.dumps(est)).transform(X), est.transform(X))


def test_embedding_dimension_follows_the_number_of_clusters():
    X = np.random.default_rng(0).normal(size=(60, 3))
    # KPCA: two axes per cluster; KECA (without its 'auto' width): one
    for cls, per_cluster in ((KernelPCAEmbedding, 2), (KECA, 1)):
        assert cls().fit(X).n_components_ == 2
        clustered = cls(n_clusters=4, sigma_fraction=0.7, random_state=0).fit(X)
        dim = 4 * per_cluster
        assert clustered.n_components_ == dim and clustered.embedding_.shape == (60, dim)
        assert cls(n_components=3, n_clusters=4, random_state=0).fit(X).n_components_ == 3
    # never more axes than points, where 2k would exceed them
    few = KernelPCAEmbedding(n_clusters=4, sigma_fraction=0.7, random_state=0).fit(X[:6])
    assert few.n_components_ == 6 and few.labels_.shape == (6,)
    # KECA's sigma_fraction='auto' compares k and 2k entropy axes with its widths
    chosen = KECA(n_clusters=4, random_state=0).fit(X)
    assert chosen.n_components_ in (4, 8) and chosen.embedding_.shape == (60, chosen.n_components_)


@pytest.mark.parametrize(
    "make",
    [
        lambda **kw: KernelPCAEmbedding(**kw),
        lambda **kw: KernelPCAEmbedding(centered=False, **kw),
        lambda **kw: KECA(**kw),
    ],
)
def test_nystrom_path_with_every_point_a_landmark_is_the_exact_embedding(wine, make):
    """The Nyström path is NystromEmbedding's embedding with this kernel and width: with
    every point a landmark, the exact one (and its labels and out-of-sample formula)."""
    X, _ = wine
    exact = make(n_clusters=3, random_state=0).fit(X)
    landmarks = make(n_clusters=3, random_state=0, approximation="nystrom", n_landmarks=200)
    landmarks.fit(X)
    assert (exact.approximation_, landmarks.approximation_) == ("exact", "nystrom")
    assert landmarks.sigma_ == pytest.approx(exact.sigma_, rel=1e-12)
    np.testing.assert_allclose(landmarks.eigenvalues_, exact.eigenvalues_, rtol=1e-9)
    _assert_equal_up_to_sign(landmarks.embedding_, exact.embedding_, atol=1e-8)
    _assert_equal_up_to_sign(landmarks.transform(X[:20]), exact.transform(X[:20]), atol=1e-8)
    assert clustering_accuracy(exact.labels_, landmarks.labels_) == 1.0


def test_auto_takes_the_nystrom_path_above_the_memory_limit(wine):
    X, y = wine
    for cls in (KernelPCAEmbedding, KECA):
        model = cls(n_clusters=3, random_state=0, max_memory="100kB", n_landmarks=60).fit(X)
        assert model.approximation_ == "nystrom" and model.nystrom_.landmark_indices_.size == 60
        dim = model.n_components_  # KECA's 'auto' may choose 2k axes
        assert model.embedding_.shape == (178, dim) and model.X_fit_ is None
        assert model.transform(da.from_array(X, chunks=50)).compute().shape == (178, dim)
        np.testing.assert_array_equal(model.predict(X), model.labels_)
        assert cls(n_clusters=3).fit(X).approximation_ == "exact"
