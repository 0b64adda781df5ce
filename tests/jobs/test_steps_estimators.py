"""Job steps that fit the estimators: what a job stores is what the estimator computes, the
steps' block sizes are ``dkernel._budget``'s, and former parameter values stay accepted."""

import numpy as np
import pytest
from sklearn.datasets import load_wine
from sklearn.metrics import adjusted_rand_score
from sklearn.preprocessing import StandardScaler

import dkernel
from dkernel.jobs.prepare import prepare_job
from dkernel.jobs.runner import run_job
from dkernel.jobs.spec import validate_spec
from dkernel.kernels import aliases
from dkernel.storage import open_results


def _spec(method, params, data=None, name="t"):
    return validate_spec(
        {
            "name": name,
            "seed": 0,
            "data": data or {"reader": "sklearn", "name": "wine", "standardize": True},
            "method": method,
            "params": params,
            "output": "unused.zarr",
        }
    )


@pytest.mark.parametrize("covariance_type", ["diag", "full"])
def test_pck_job_stores_what_the_estimator_fits(tmp_path, client, covariance_type):
    params = {
        "n_clusters": 3,
        "n_estimators": 3,
        "max_components": 4,
        "covariance_type": covariance_type,
        "n_init": 5,
        "store_features": True,
    }
    spec = _spec("pck-spectral", params)
    tree = open_results(run_job(spec, output=tmp_path / "p.zarr", client=client, progress=False))
    _, data = prepare_job(spec)
    pck = dkernel.ProbabilisticClusterKernel(
        n_estimators=3, max_components=4, covariance_type=covariance_type, random_state=0
    )
    est = dkernel.PCKSpectralClustering(3, pck=pck, n_init=5, random_state=0).fit(data.X)
    np.testing.assert_array_equal(tree["labels"]["labels"].values, est.labels_)
    np.testing.assert_array_equal(tree["embedding"]["embedding"].values, est.embedding_)
    np.testing.assert_array_equal(tree["gmm"]["mean_entropy"].values.ravel(), est.model_entropy_)
    np.testing.assert_array_equal(tree["features"]["features"].values, est.pck_.transform(data.X))
    # every model's parameters, NaN-padded to max_components components
    gmm, ens = tree["gmm"], est.pck_.ensemble_
    second = "variances" if covariance_type == "diag" else "covariances"
    offsets = ens.offsets
    for m, (q, g) in enumerate(zip(est.pck_.model_inits_, est.pck_.model_components_, strict=True)):
        if covariance_type == "diag":
            expected = ens.variances[offsets[m] : offsets[m + 1]]
        else:
            expected = ens.models[m][1]
        stored = gmm[second].sel(init=q, n_components=g).values[:g]
        np.testing.assert_array_equal(stored, expected)
        assert np.isnan(gmm[second].sel(init=q, n_components=g).values[g:]).all()


@pytest.mark.parametrize("store_projection", [False, True])
def test_kppr_job_scores_in_its_dtype_as_the_estimator(tmp_path, client, store_projection):
    params = {
        "kernel": "rbf",
        "dtype": "float32",
        "max_samples": 60,
        "seeds": {"global": None, "row_0": 0},
        "top_k": 5,
        "store_projection": store_projection,
        "evaluate_max_samples": 0,
    }
    spec = _spec("kppr", params)
    tree = open_results(run_job(spec, output=tmp_path / "k.zarr", client=client, progress=False))
    score = tree["ranking"]["score"].values
    assert score.dtype == np.float32 and score.shape == (178, 2)
    assert ("projection" in tree["ranking"]) is store_projection
    # the global seed's scores are positive and the in-sample ones sum to about 1 (Prop. 4)
    in_sample = tree["ranking"]["in_sample"].values
    assert in_sample.sum() == 60 and np.all(score[:, 0] > 0)
    np.testing.assert_allclose(score[in_sample, 0].sum(), 1.0, rtol=1e-3)


def test_jrc_job_stores_the_estimators_cluster_ranking(tmp_path, client):
    params = {"n_clusters": 3, "n_components": 3, "top_k": 4, "n_init": 3}
    spec = _spec("jrc", params)
    tree = open_results(run_job(spec, output=tmp_path / "j.zarr", client=client, progress=False))
    _, data = prepare_job(spec)
    jrc = dkernel.JointRankingClustering(
        n_clusters=3, n_components=3, n_init=3, random_state=0
    ).fit(np.asarray(data.X, dtype=np.float64))
    names, scores, top = jrc.cluster_ranking(4)
    assert list(tree["ranking"]["seed"].values) == names
    np.testing.assert_array_equal(tree["ranking"]["score"].values, scores)
    np.testing.assert_array_equal(tree["ranking"]["cluster_top_index"].values, top)


@pytest.mark.parametrize(
    ("embedding", "estimator"), [("keca", "KECA"), ("kpca", "KernelPCAEmbedding")]
)
def test_rbf_spectral_job_chooses_the_width_as_the_estimator_and_stores_the_evidence(
    tmp_path, client, embedding, estimator
):
    """The job leaves the dimension to the estimator (KECA's 'auto' compares k and 2k axes)
    and stores what 'auto' chose and compared."""
    spec = _spec("rbf-spectral", {"n_clusters": 3, "embedding": embedding})
    tree = open_results(run_job(spec, output=tmp_path / "r.zarr", client=client, progress=False))
    _, data = prepare_job(spec)
    est = getattr(dkernel, estimator)(n_clusters=3, random_state=0)
    est.fit(np.asarray(data.X, dtype=np.float64))
    np.testing.assert_array_equal(tree["labels"]["labels"].values, est.labels_)
    attrs = tree["embedding"].attrs
    assert tree["embedding"]["embedding"].shape == (178, est.n_components_)
    assert attrs["sigma_fraction"] == est.sigma_fraction_
    np.testing.assert_allclose(attrs["sigma_fraction_scores"], est.sigma_fraction_scores_)
    assert attrs["sigma_fraction_candidates"] == est.sigma_fraction_candidates_.tolist()
    dims = getattr(est, "n_components_candidates_", None)
    assert attrs.get("n_components_candidates") == (None if dims is None else dims.tolist())


def test_rbf_spectral_job_above_the_width_sample_stores_the_verified_scores(
    tmp_path, client, monkeypatch
):
    """Above the width sample 'auto' fits its choice on every row to verify it; the job
    adopts that fit (the estimator's labels) and stores the verified scores (null: not
    fitted on every row)."""
    from dkernel.kernels import width_selection

    monkeypatch.setattr(width_selection, "WIDTH_SAMPLE", 100)
    spec = _spec("rbf-spectral", {"n_clusters": 3, "embedding": "keca"})
    tree = open_results(run_job(spec, output=tmp_path / "r.zarr", client=client, progress=False))
    _, data = prepare_job(spec)
    est = dkernel.KECA(n_clusters=3, random_state=0).fit(np.asarray(data.X, dtype=np.float64))
    np.testing.assert_array_equal(tree["labels"]["labels"].values, est.labels_)
    stored = tree["embedding"].attrs["sigma_fraction_verified_scores"]
    expected = est.sigma_fraction_verified_scores_
    assert [v is None for v in stored] == np.isnan(expected).tolist()
    np.testing.assert_allclose(
        [v for v in stored if v is not None], expected[np.isfinite(expected)]
    )


@pytest.fixture
def fresh_warnings(monkeypatch):
    """Forget which former names this process was warned about (the warning is once)."""
    monkeypatch.setattr(aliases, "_WARNED", set())


def test_rbf_spectral_former_embedding_name_warns_and_gives_the_same_result(
    tmp_path, client, fresh_warnings
):
    params = {"n_clusters": 3, "store_kernel": False}
    new = run_job(
        _spec("rbf-spectral", {**params, "embedding": "uncentered"}),
        output=tmp_path / "new.zarr",
        client=client,
        progress=False,
    )
    with pytest.warns(FutureWarning, match="embedding='kpca-uncentered'.*'uncentered'"):
        old = run_job(
            _spec("rbf-spectral", {**params, "embedding": "kpca-uncentered"}),
            output=tmp_path / "old.zarr",
            client=client,
            progress=False,
        )
    a, b = open_results(new), open_results(old)
    assert a["embedding"].attrs["method"] == b["embedding"].attrs["method"] == "uncentered"
    np.testing.assert_array_equal(
        a["embedding"]["embedding"].values, b["embedding"]["embedding"].values
    )
    np.testing.assert_array_equal(a["labels"]["labels"].values, b["labels"]["labels"].values)
    kpca = open_results(
        run_job(
            _spec("rbf-spectral", {**params, "embedding": "kpca"}),
            output=tmp_path / "kpca.zarr",
            client=client,
            progress=False,
        )
    )
    # centred and uncentered KPCA are different embeddings
    assert not np.allclose(
        np.abs(kpca["embedding"]["eigenvalues"].values),
        np.abs(a["embedding"]["eigenvalues"].values),
    )


def test_spectral_clustering_former_n_neighbors_warns_and_gives_the_same_store(
    tmp_path, client, fresh_warnings
):
    """``n_neighbors``, the former name of the self-tuning widths' rank ``scale_neighbors``
    (issue 53: ``n_neighbors`` is a k-NN graph's size), still runs: the same arrays."""
    params = {"n_clusters": 3, "approximation": "exact"}
    new = run_job(
        _spec("spectral-clustering", {**params, "scale_neighbors": 9}),
        output=tmp_path / "new.zarr",
        client=client,
        progress=False,
    )
    with pytest.warns(FutureWarning, match="n_neighbors is deprecated.*scale_neighbors=9"):
        old = run_job(
            _spec("spectral-clustering", {**params, "n_neighbors": 9}),
            output=tmp_path / "old.zarr",
            client=client,
            progress=False,
        )
    a, b = open_results(new), open_results(old)
    assert a["embedding"].attrs["scale_neighbors"] == b["embedding"].attrs["scale_neighbors"] == 9
    for group, name in (("embedding", "embedding"), ("labels", "labels")):
        np.testing.assert_array_equal(a[group][name].values, b[group][name].values)


def test_kernel_decomposition_job_resolves_the_former_kernel_name(fresh_warnings):
    from dkernel.jobs.steps import kernel_decomposition

    with pytest.warns(FutureWarning, match="kernel='gaussian'.*'rbf'"):
        assert kernel_decomposition._kernel({"kernel": "gaussian"}) == "rbf"
    assert kernel_decomposition._kernel({"kernel": "local_scaling"}) == "local_scaling"


@pytest.mark.parametrize("n", [5, 999, 1000, 20_000, 10**7])
@pytest.mark.parametrize("landmarks", [1, 300, 1000, 5000])
def test_spectral_chunk_rows_are_the_former_rule(n, landmarks):
    """Block sizes decide the last bits of the results: the budget rule gives the rows the
    hand-written rule gave (about 64 MiB of float64 kernel rows, at least 1000)."""
    from dkernel.jobs.steps import spectral_clustering

    params = {"chunk_rows": None, "n_landmarks": landmarks, "approximation": "nystrom"}
    m = min(landmarks, n, spectral_clustering.DEFAULT_LANDMARKS)
    former = int(max(1000, min(n, 64 * 2**20 // (8 * max(m, 1)))))
    assert spectral_clustering._chunk_rows(params, n) == former
    assert spectral_clustering._chunk_rows({**params, "chunk_rows": 77}, n) == 77


def _wine_with_holes(tmp_path):
    X, y = load_wine(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    X[np.random.default_rng(0).random(X.shape) < 0.15] = np.nan
    path = tmp_path / "holes.csv"
    np.savetxt(path, X, delimiter=",", fmt="%.17g")  # NaN written as 'nan'
    return X, y, {"reader": "csv", "path": str(path)}


@pytest.mark.parametrize(
    ("method", "params", "estimator"),
    [
        ("spectral-clustering", {"n_clusters": 3}, "SpectralClustering"),
        ("rbf-spectral", {"n_clusters": 3, "embedding": "kpca"}, "KernelPCAEmbedding"),
        ("rbf-spectral", {"n_clusters": 3, "embedding": "keca"}, "KECA"),
    ],
)
def test_job_models_missing_values_as_the_estimator(tmp_path, client, method, params, estimator):
    """15 % of wine's entries missing: the job stores the labels the estimator fits on the
    same NaN (expected squared distances), where it refused them before."""
    X, y, data = _wine_with_holes(tmp_path)
    spec = _spec(method, params, data)
    tree = open_results(run_job(spec, output=tmp_path / "s.zarr", client=client, progress=False))
    est = getattr(dkernel, estimator)(n_clusters=3, random_state=0).fit(X)
    np.testing.assert_array_equal(tree["labels"]["labels"].values, est.labels_)
    assert adjusted_rand_score(y, est.labels_) > 0.6


def test_spectral_clustering_job_names_the_path_that_takes_missing_values(tmp_path):
    from dkernel.errors import InvalidInputError
    from dkernel.io.data import LoadedData
    from dkernel.jobs.registry import get_method

    X = np.random.default_rng(0).normal(size=(300, 3))
    X[4, 1] = np.nan
    method = get_method("spectral-clustering")
    exact = _spec("spectral-clustering", {"n_clusters": 2}).params
    method.check_data(exact, LoadedData(X))  # the exact path models them
    landmarks = _spec("spectral-clustering", {"n_clusters": 2, "approximation": "bipartite"})
    with pytest.raises(
        InvalidInputError,
        match=r"approximation: bipartite on 300 rows.*"
        r"approximation: exact.*kernel-kmeans or pck-spectral",
    ):
        method.check_data(landmarks.params, LoadedData(X))
    cosine = _spec("spectral-clustering", {"n_clusters": 2, "kernel": "cosine"})
    with pytest.raises(
        InvalidInputError,
        match=r"kernel: cosine does not handle missing values.*use kernel: local_scaling or knn or rbf,",
    ):
        method.check_data(cosine.params, LoadedData(np.abs(X)))


def test_kernel_decomposition_job_models_missing_values_as_the_estimator(tmp_path, client):
    X, y, data = _wine_with_holes(tmp_path)
    spec = _spec("kernel-decomposition", {"n_clusters": [3]}, data)
    tree = open_results(run_job(spec, output=tmp_path / "k.zarr", client=client, progress=False))
    lo, hi = np.nanmin(X, axis=0), np.nanmax(X, axis=0)  # the job's minmax scale
    est = dkernel.KernelDecompositionClustering(3, random_state=0).fit((X - lo) / (hi - lo))
    np.testing.assert_array_equal(tree["labels"]["labels"].values, est.labels_)
    assert adjusted_rand_score(y, est.labels_) > 0.6


def test_kernel_decomposition_job_names_the_path_that_takes_missing_values():
    from dkernel.errors import InvalidInputError
    from dkernel.io.data import LoadedData
    from dkernel.jobs.registry import get_method

    X = np.random.default_rng(0).normal(size=(300, 3))
    X[4, 1] = np.nan
    method = get_method("kernel-decomposition")
    method.check_data(_spec("kernel-decomposition", {"n_clusters": [2]}).params, LoadedData(X))
    for params, fix in [
        ({"approximation": "bipartite"}, "landmark path .*set params.approximation: exact"),
        ({"kernel": "rbf", "n_neighbors": [0]}, "set kernel: local_scaling"),
    ]:
        spec = _spec("kernel-decomposition", {"n_clusters": [2], **params})
        with pytest.raises(InvalidInputError, match=fix + ".*kernel-kmeans or pck-spectral"):
            method.check_data(spec.params, LoadedData(X))


def test_ranking_jobs_model_missing_values_with_their_default_kernel(tmp_path, client):
    X, y, data = _wine_with_holes(tmp_path)
    params = {"n_clusters": 3, "n_components": 3, "top_k": 4, "n_init": 3}
    spec = _spec("jrc", params, data)
    tree = open_results(run_job(spec, output=tmp_path / "j.zarr", client=client, progress=False))
    jrc = dkernel.JointRankingClustering(
        n_clusters=3, n_components=3, n_init=3, random_state=0
    ).fit(X)
    np.testing.assert_array_equal(tree["labels"]["labels"].values, jrc.labels_)
    assert adjusted_rand_score(y, jrc.labels_) > 0.6
    spec = _spec("kppr", {"max_samples": 100, "evaluate_max_samples": 0}, data)
    tree = open_results(run_job(spec, output=tmp_path / "k.zarr", client=client, progress=False))
    assert np.all(np.isfinite(tree["ranking"]["score"].values))


def test_ranking_jobs_name_the_kernels_that_take_missing_values(tmp_path):
    from dkernel.errors import InvalidInputError
    from dkernel.io.data import LoadedData
    from dkernel.jobs.registry import get_method

    X = np.abs(np.random.default_rng(0).normal(size=(100, 3)))
    X[4, 1] = np.nan
    for method, params in [("jrc", {"n_clusters": 2}), ("kppr", {})]:
        spec = _spec(method, {**params, "kernel": "cosine"})
        with pytest.raises(
            InvalidInputError,
            match=r"kernel: cosine .*1 NaN.*use kernel: .*knn_mean.* or pck, which model",
        ):
            get_method(method).check_data(spec.params, LoadedData(X))
