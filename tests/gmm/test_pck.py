"""ProbabilisticClusterKernel: the estimator, the Dask ensemble graph, bad input."""

from __future__ import annotations

import warnings

import dask.array as da
import numpy as np
import pytest

from dkernel.errors import (
    DKernelWarning,
    InvalidInputError,
    NotFittedError,
    NumericalWarning,
    ResourceLimitError,
    VarianceFloorWarning,
)
from dkernel.gmm.pck import ProbabilisticClusterKernel, feature_map_degrees
from dkernel.testing import as_kind, assert_equal_up_to_row_blocking


def _blobs(n=240, p=4, missing=0.0, seed=0):
    rng = np.random.default_rng(seed)
    centers = rng.normal(scale=4.0, size=(3, p))
    y = rng.integers(0, 3, n)
    X = centers[y] + rng.normal(size=(n, p))
    if missing:
        mask = rng.random((n, p)) < missing
        mask[np.arange(n), rng.integers(0, p, n)] = False
        X[mask] = np.nan
    return X, y


SMALL = dict(n_estimators=3, max_components=5, n_iter=5, random_state=0)


def test_feature_map_kernel_and_degrees(array_kind):
    X, _ = _blobs(missing=0.3)
    pck = ProbabilisticClusterKernel(**SMALL).fit(as_kind(X, array_kind))
    F = 3 * sum(range(2, 6))
    assert pck.n_features_out_ == F and pck.normalizer_ == 12.0
    G = pck.transform(as_kind(X, array_kind))
    assert G.shape == (X.shape[0], F)
    G = np.asarray(G)
    assert G.dtype == np.float32
    # each model's posteriors sum to one, so every row of Γ has squared-sum structure Z·(1/Z)
    sums = np.add.reduceat(G * np.sqrt(12.0), pck.ensemble_.offsets[:-1], axis=1)
    np.testing.assert_allclose(sums, 1.0, atol=1e-5)
    K = np.asarray(pck.kernel())
    np.testing.assert_allclose(K, G @ G.T, rtol=1e-5, atol=1e-6)
    assert np.all(K.diagonal() <= 1 + 1e-5) and K.diagonal().mean() > 0.5
    np.testing.assert_allclose(pck.degrees_, K.astype(np.float64).sum(axis=1), rtol=1e-4)
    np.testing.assert_allclose(
        feature_map_degrees(da.from_array(G, chunks=(50, F))),
        K.astype(np.float64).sum(axis=1),
        rtol=1e-4,
    )
    assert pck.get_feature_names_out()[:2].tolist() == ["pck_q0_g2_k0", "pck_q0_g2_k1"]


def test_dask_transform_is_lazy_and_matches_numpy():
    X, _ = _blobs(missing=0.2)
    pck = ProbabilisticClusterKernel(**SMALL).fit(X)
    lazy = pck.transform(da.from_array(X, chunks=(50, 4)))
    assert isinstance(lazy, da.Array)
    assert_equal_up_to_row_blocking(lazy.compute(), pck.transform(X))
    np.testing.assert_array_equal(lazy.compute(), lazy.compute())  # same blocking: same bits
    Kd = pck.kernel(da.from_array(X[:30], chunks=(10, 4)), X[30:60])
    assert isinstance(Kd, da.Array) and Kd.shape == (30, 30)
    np.testing.assert_allclose(Kd.compute(), pck.kernel(X[:30], X[30:60]), rtol=2e-5)


def test_sparse_transform_drops_small_posteriors(monkeypatch):
    X, _ = _blobs(missing=0.2)
    pck = ProbabilisticClusterKernel(**SMALL).fit(X)
    import dkernel.gmm.graph as graph

    monkeypatch.setattr(graph, "rows_for_budget", lambda *a, **k: 70)  # several row blocks
    monkeypatch.setattr(graph, "POSTERIOR_BLOCK_ROWS", 35)  # of several sub-blocks each
    G = pck.transform(X)
    S = pck.transform(X, sparse_threshold=1e-4)
    assert S.format == "csr" and S.shape == G.shape and S.dtype == G.dtype
    np.testing.assert_array_equal(S.toarray(), np.where(G >= 1e-4, G, 0))
    assert S.nnz < 0.5 * G.size  # nearly one-hot per model
    w = np.random.default_rng(0).random(G.shape[1]).astype(np.float32)
    np.testing.assert_allclose(S @ w, G @ w, rtol=0, atol=1e-4 * np.abs(w).sum())
    with pytest.raises(InvalidInputError, match="NumPy input"):
        pck.transform(da.from_array(X, chunks=(50, 4)), sparse_threshold=1e-4)
    with pytest.raises(InvalidInputError, match="sparse_threshold"):
        pck.transform(X, sparse_threshold=-1.0)


def test_dask_fit_matches_numpy_fit():
    X, _ = _blobs(missing=0.2)
    a = ProbabilisticClusterKernel(**SMALL).fit(X)
    b = ProbabilisticClusterKernel(**SMALL).fit(da.from_array(X, chunks=(70, 4)))
    np.testing.assert_allclose(a.transform(X), b.transform(X), atol=1e-4)


def test_out_of_sample_other_missingness_pattern():
    X, _ = _blobs(missing=0.0, seed=1)
    pck = ProbabilisticClusterKernel(**SMALL).fit(X[:200])
    Xn = X[200:].copy()
    Xn[::2, 0] = np.nan
    Xn[1::3, 2:] = np.nan
    G = pck.transform(Xn)
    assert np.all(np.isfinite(G))
    Xn[0] = np.nan
    with pytest.warns(NumericalWarning, match="no observed value"):
        G = pck.transform(Xn)
    np.testing.assert_allclose(G[0] * np.sqrt(pck.normalizer_), pck.ensemble_.weights, atol=1e-6)


def test_clusters_recovered():
    from sklearn.cluster import KMeans

    from dkernel.metrics import clustering_accuracy
    from dkernel.spectral.dense import kpca_embedding

    X, y = _blobs(n=300, missing=0.3, seed=3)
    pck = ProbabilisticClusterKernel(n_estimators=5, max_components=8, random_state=1).fit(X)
    emb = kpca_embedding(pck.kernel().astype(np.float64), 3).embedding
    labels = KMeans(3, n_init=10, random_state=0).fit_predict(emb)
    assert clustering_accuracy(y, labels) > 0.9


def test_full_covariance_variant():
    X, _ = _blobs(n=150, p=3, missing=0.2)
    pck = ProbabilisticClusterKernel(
        n_estimators=2, max_components=4, covariance_type="full", random_state=0, dtype="float64"
    ).fit(X)
    G = pck.transform(X)
    assert G.shape == (150, 2 * (2 + 3 + 4)) and G.dtype == np.float64
    sums = np.add.reduceat(G * np.sqrt(pck.normalizer_), pck.ensemble_.offsets[:-1], axis=1)
    np.testing.assert_allclose(sums, 1.0, atol=1e-10)


@pytest.mark.parametrize("missingness", ["ignorable", "informative"])
def test_deterministic_across_runs_and_on_a_cluster(client, monkeypatch, missingness):
    """Bit-identical Γ across runs on the 2-worker cluster and across runs in-process; the
    two agree up to the rounding of a different row blocking (NumPy and Dask input). The 1/2/4-worker comparison runs in benchmarks/bench_pck_scaling.py (cluster
    start-up is too slow for the test budget on 2 cores)."""
    X, _ = _blobs(n=300, missing=0.3, seed=4)
    params = dict(
        n_estimators=4, max_components=6, n_iter=4, random_state=7, missingness=missingness
    )
    from distributed import Client

    assert Client.current() is client
    on_cluster = ProbabilisticClusterKernel(**params).fit(X)
    got = on_cluster.transform(da.from_array(X, chunks=(64, 4))).compute()
    rerun = ProbabilisticClusterKernel(**params).fit(X)
    assert np.array_equal(rerun.transform(da.from_array(X, chunks=(64, 4))).compute(), got)
    from_dask = ProbabilisticClusterKernel(**params).fit(da.from_array(X, chunks=(64, 4)))
    import dkernel.gmm.pck as mod

    monkeypatch.setattr(mod, "active_client", lambda: None)  # fit in this process
    ref = ProbabilisticClusterKernel(**params).fit(X).transform(X)
    again = ProbabilisticClusterKernel(**params).fit(X).transform(X)
    assert np.array_equal(ref, again)
    assert_equal_up_to_row_blocking(got, ref)
    np.testing.assert_allclose(from_dask.transform(X), ref, atol=1e-4)
    other = ProbabilisticClusterKernel(**{**params, "random_state": 8}).fit(X).transform(X)
    assert not np.array_equal(ref, other)


# ---- bad input ---------------------------------------------------------------------------
def test_all_nan_and_constant_columns_are_dropped_with_warning():
    X, _ = _blobs()
    X = np.column_stack([X, np.full(len(X), np.nan), np.full(len(X), 3.0)])
    with pytest.warns(NumericalWarning, match="1 all-NaN and 1 zero-variance"):
        pck = ProbabilisticClusterKernel(**SMALL).fit(X)
    assert pck.feature_mask_.tolist() == [True] * 4 + [False, False]
    assert pck.transform(X).shape[0] == len(X)


@pytest.mark.parametrize("scale", [1e-4, 1e-7])
def test_data_in_small_units_warn_that_reg_covar_is_too_wide(scale):
    """Three blobs scaled by 1e-4: reg_covar 1e-6 is wider than the data, and the kernel cannot
    separate them (ARI 0 at the default): a warning names the fix. Below a standard deviation
    of 1e-6 the columns used to be called constant and refused."""
    from sklearn.metrics import adjusted_rand_score

    from dkernel import PCKSpectralClustering

    rng = np.random.default_rng(0)
    y = np.repeat([0, 1, 2], 80)
    X = np.array([[0.0, 0.0], [3.0, 0.0], [0.0, 3.0]])[y] + rng.normal(0, 0.3, (240, 2))
    with pytest.warns(VarianceFloorWarning, match="reg_covar=1e-06 is .* Standardise X"):
        pck = ProbabilisticClusterKernel(**SMALL).fit(X * scale)
    assert pck.feature_mask_.all()
    # the fix the message names
    params = dict(n_clusters=3, random_state=0)
    scaled = PCKSpectralClustering(**params).fit(X).labels_
    with warnings.catch_warnings():
        warnings.simplefilter("error", NumericalWarning)
        pck = ProbabilisticClusterKernel(reg_covar=1e-6 * scale**2)
        small = PCKSpectralClustering(**params, pck=pck)
        small_labels = small.fit(X * scale).labels_
    assert adjusted_rand_score(y, scaled) > 0.9
    assert adjusted_rand_score(scaled, small_labels) > 0.9


def test_rows_without_values_are_left_out_with_warning():
    X, _ = _blobs()
    X[:5] = np.nan
    with pytest.warns(NumericalWarning, match="5 rows have no observed value"):
        ProbabilisticClusterKernel(**SMALL).fit(X)


@pytest.mark.parametrize(
    "X, match",
    [
        (np.array([[1.0, np.inf], [2.0, 3.0], [1.0, 1.0]]), "infinite"),
        (np.ones((1, 3)), r"1 sample\(s\) .* minimum of 2"),
        (np.ones((5, 0)), r"0 feature\(s\)"),
        (np.array([["a", "b"], ["c", "d"]]), "numeric"),
        (np.full((10, 2), np.nan), "no usable column"),
        (np.ones(5), "Expected 2D array"),
    ],
)
def test_bad_input_is_a_clear_error(X, match):
    with pytest.raises(InvalidInputError, match=match):
        ProbabilisticClusterKernel(**SMALL).fit(X)


def test_inf_in_dask_input_is_an_error():
    X, _ = _blobs()
    X[3, 1] = np.inf
    with pytest.raises(InvalidInputError, match="infinite"):
        ProbabilisticClusterKernel(**SMALL).fit(da.from_array(X, chunks=(50, 4)))


def test_subsample_smaller_than_max_components_caps_them_with_a_warning():
    X, _ = _blobs(n=40)
    with pytest.warns(DKernelWarning, match=r"fewer than max_components=30: .* g = 2\.\.20"):
        model = ProbabilisticClusterKernel(max_components=30, max_samples=0.5, random_state=0).fit(
            X
        )
    assert model.max_components == 30 and model.max_components_ == 20
    assert model.normalizer_ == model.n_estimators * (20 - 1)
    assert set(model.model_components_) == set(range(2, 21))
    # the same ensemble as asking for G = 20 directly
    direct = ProbabilisticClusterKernel(max_components=20, max_samples=0.5, random_state=0).fit(X)
    assert direct.max_components_ == 20
    np.testing.assert_array_equal(model.transform(X), direct.transform(X))


def test_max_samples_is_a_count_or_a_fraction_as_in_scikit_learn():
    X, _ = _blobs(n=240)

    def kernel(max_samples):
        return ProbabilisticClusterKernel(**SMALL, max_samples=max_samples).fit(X).transform(X)

    half = kernel(0.5)
    np.testing.assert_array_equal(half, kernel(120))
    assert not np.array_equal(half, kernel(100))
    # a count above the rows trains on all of them, as the fraction 1.0
    np.testing.assert_array_equal(kernel(1.0), kernel(10_000))


def test_a_subsample_of_fewer_than_two_rows_is_an_error():
    X, _ = _blobs(n=40)
    with pytest.raises(InvalidInputError, match="smallest model .* needs at least 2"):
        ProbabilisticClusterKernel(max_samples=0.02).fit(X)


@pytest.mark.parametrize(
    "params, match",
    [
        ({"n_estimators": 0}, "'n_estimators'"),
        ({"max_components": 1}, "'max_components'"),
        ({"max_samples": 0.0}, "'max_samples'"),
        ({"max_samples": 1.5}, "'max_samples'"),
        ({"max_samples": 1}, "'max_samples'"),  # one row: a count, unlike 1.0
        ({"covariance_type": "tied"}, "'covariance_type'"),
        ({"dtype": "int8"}, "'dtype'"),
        ({"reg_covar": -1.0}, "'reg_covar'"),
        ({"missingness": "mnar"}, "'missingness'"),
        ({"missingness": "informative", "covariance_type": "full"}, "covariance_type='diag'"),
    ],
)
def test_bad_parameters(params, match):
    X, _ = _blobs()
    with pytest.raises(InvalidInputError, match=match):
        ProbabilisticClusterKernel(**{**SMALL, **params}).fit(X)


def test_not_fitted_and_wrong_width():
    X, _ = _blobs()
    with pytest.raises(NotFittedError):
        ProbabilisticClusterKernel().transform(X)
    pck = ProbabilisticClusterKernel(**SMALL).fit(X)
    with pytest.raises(InvalidInputError, match="expecting 4 features"):
        pck.transform(X[:, :3])


def test_dense_kernel_limit(monkeypatch):
    import dkernel.gmm.pck as mod

    X, _ = _blobs()
    pck = ProbabilisticClusterKernel(**SMALL).fit(X)
    monkeypatch.setattr(mod, "_DENSE_KERNEL_LIMIT", 1000)
    with pytest.raises(ResourceLimitError, match="transform"):
        pck.kernel()


def test_sklearn_params_roundtrip():
    from sklearn.base import clone

    pck = ProbabilisticClusterKernel(n_estimators=4, dtype="float64")
    assert clone(pck).get_params()["n_estimators"] == 4


def test_column_resolution():
    from dkernel.gmm.pck import column_resolution

    X = np.array([[1.0, 0.5, 2.0], [3.0, np.nan, 2.0], [2.0, 0.75, np.nan], [1.0, 1.5, 2.0]])
    np.testing.assert_array_equal(column_resolution(X), [1.0, 0.25, np.inf])


def test_integer_coded_columns_get_a_resolution_variance_floor(array_kind):
    # integer scores 1..10 (one attribute on a coarser grid of 2): each variance gets at least
    # Δ² added, so no component collapses onto one level of one column
    X, y = _blobs(n=300, p=4, missing=0.1, seed=3)
    Xq = np.round(X)
    Xq[:, 3] = 2 * np.round(X[:, 3] / 2)
    pck = ProbabilisticClusterKernel(**SMALL).fit(as_kind(Xq, array_kind))
    np.testing.assert_allclose(pck.variance_floor_, [1.0, 1.0, 1.0, 4.0])
    assert np.all(pck.ensemble_.variances >= pck.variance_floor_[None, :].astype(np.float32))
    # continuous data: reg_covar everywhere (unchanged behaviour)
    cont = ProbabilisticClusterKernel(**SMALL).fit(as_kind(X, array_kind))
    np.testing.assert_array_equal(cont.variance_floor_, 1e-6)


# ---- informative missingness ---------------------------------------------------------------
def test_informative_equals_ignorable_on_complete_training_data():
    X, _ = _blobs(n=200)
    # 'informative' is diagonal only ('auto' resolves to it); the same covariance for both
    ign = ProbabilisticClusterKernel(**SMALL, covariance_type="diag").fit(X)
    inf = ProbabilisticClusterKernel(**SMALL, missingness="informative").fit(X)
    assert inf.covariance_type_ == "diag"
    assert inf.missingness_model_ is None and inf.ensemble_.missing_probs is None
    Xn = X[:20].copy()
    Xn[::2, 1] = np.nan
    assert np.array_equal(ign.transform(Xn), inf.transform(Xn))


def test_informative_missingness_uses_a_saturated_sensor():
    """The NMAR Wine of [Lokse2020], Paper I, §4.3.6 (the largest 45 % of every column removed):
    with the pattern of missing values as evidence PCKID clusters far better than the ignorable
    model."""
    from sklearn.cluster import KMeans
    from sklearn.datasets import load_wine

    from dkernel.metrics import clustering_accuracy
    from dkernel.spectral.dense import kpca_embedding

    X, y = load_wine(return_X_y=True)
    top = np.argsort(-X, axis=0, kind="stable")[: int(0.45 * len(X))]
    X[top, np.arange(X.shape[1])] = np.nan
    X = (X - np.nanmean(X, 0)) / np.nanstd(X, 0)
    acc = {}
    for missingness in ("ignorable", "informative"):
        pck = ProbabilisticClusterKernel(
            n_estimators=10, max_components=10, random_state=0, missingness=missingness
        ).fit(X)
        assert (pck.missingness_model_ is None) == (missingness == "ignorable")
        emb = kpca_embedding(pck.kernel().astype(np.float64), 3).embedding
        acc[missingness] = clustering_accuracy(
            y, KMeans(3, n_init=20, random_state=0).fit_predict(emb)
        )
    assert acc["informative"] > 0.93
    assert acc["informative"] > acc["ignorable"] + 0.03


def test_transform_of_a_row_does_not_depend_on_its_batch():
    """Float32 log-joints of ~10³ carry ~10⁻⁴ of GEMM rounding; every sub-block is computed at
    the same shape, so a row's posteriors are bit-identical in any batch (scikit-learn's
    subset invariance, on any BLAS)."""
    from sklearn.datasets import make_blobs

    X, _ = make_blobs(
        n_samples=600, centers=[[0, 0, 0], [1, 1, 1]], n_features=3, cluster_std=0.1, random_state=0
    )
    X = X.astype(np.float32)
    pck = ProbabilisticClusterKernel(n_estimators=6, random_state=0).fit(X)
    full = pck.transform(X)
    for size in (1, 7, 100, 511, 513):
        for start in range(0, 600, 97 * size):
            np.testing.assert_array_equal(
                pck.transform(X[start : start + size]), full[start : start + size]
            )
