"""The ``kernel-kmeans`` job method: what it writes equals what ``KernelKMeans`` fits, K chosen
by 'auto' (the k-NN graph's timescale gap), the label map of an image reader, the early
refusals and the cost model's solver choice (the estimator's own)."""

from pathlib import Path

import numpy as np
import pytest
from sklearn.datasets import load_iris
from sklearn.metrics import adjusted_rand_score
from sklearn.preprocessing import StandardScaler

from dkernel import KernelKMeans
from dkernel.errors import InvalidInputError
from dkernel.io.data import LoadedData
from dkernel.jobs.registry import get_method
from dkernel.jobs.runner import run_job
from dkernel.jobs.spec import validate_spec
from dkernel.jobs.steps import kernel_kmeans as step
from dkernel.kernels.registry import make_kernel
from dkernel.storage import open_results

IRIS = {"reader": "sklearn", "name": "iris", "standardize": True}


def _run(tmp_path: Path, client, params: dict, data: dict = IRIS) -> Path:
    spec = validate_spec(
        {
            "name": "kk",
            "seed": 0,
            "data": data,
            "method": "kernel-kmeans",
            "params": params,
            "output": str(tmp_path / "kk.zarr"),
        }
    )
    return run_job(spec, output=tmp_path / "kk.zarr", client=client, progress=False)


def _iris() -> tuple[np.ndarray, np.ndarray]:
    X, y = load_iris(return_X_y=True)
    return StandardScaler().fit_transform(X), y


def test_nystrom_job_stores_what_the_estimator_fits(tmp_path, client):
    # Lloyd on a 100-row sample, the other rows assigned afterwards (the large-N path)
    params = {"n_clusters": 3, "solver": "nystrom", "n_landmarks": 40, "kmeans_max_samples": 100}
    tree = open_results(_run(tmp_path, client, params))
    X, y = _iris()
    est = KernelKMeans(**params, random_state=0).fit(X)
    labels = tree["labels"]
    np.testing.assert_array_equal(labels["labels"].values, est.labels_)
    np.testing.assert_allclose(labels["centers"].values, est.cluster_centers_, rtol=1e-10)
    assert labels.attrs["inertia"] == pytest.approx(est.inertia_, rel=1e-10)
    assert labels.attrs["solver"] == "nystrom" and labels.attrs["n_clusters"] == 3
    assert labels.attrs["cluster_sizes"] == np.bincount(est.labels_).tolist()
    # written chunk by chunk with each row's squared distance to its centre (the summary's
    # source, read back from the store)
    nearest = est.transform(X).min(axis=1) ** 2
    np.testing.assert_allclose(labels["distance"].values, nearest, rtol=1e-8, atol=1e-10)
    np.testing.assert_array_equal(tree["landmarks"]["index"].values, est.landmark_indices_)
    # the landmark kernel's leading eigenvalues, read back from the basis
    K_mm = est.kernel_.cross(X[est.landmark_indices_], X[est.landmark_indices_])
    top = np.linalg.eigvalsh(K_mm)[::-1][: tree["landmarks"]["spectrum"].size]
    np.testing.assert_allclose(tree["landmarks"]["spectrum"].values, top, rtol=1e-6)
    assert float(tree["metrics"]["ari"]) > 0.5


def test_model_selection_over_k_is_stored(tmp_path, client):
    # 'auto' chooses K by the k-NN graph's timescale gap, then fits that K alone
    params = {"n_clusters": "auto", "max_clusters": 4, "solver": "exact", "n_init": 3}
    tree = open_results(_run(tmp_path, client, params))
    attrs = tree["labels"].attrs
    assert attrs["n_clusters_candidates"] == [2, 3, 4]
    assert len(attrs["aic"]) == len(attrs["bic"]) == 1 and attrs["criterion"] == "bic"
    est = KernelKMeans(**params, random_state=0).fit(_iris()[0])
    assert attrs["n_clusters"] == est.n_clusters_
    np.testing.assert_allclose(attrs["bic"], est.bic_, rtol=1e-10)
    assert est.model_order_.rule == "timescale-gap" and "model_order" in tree.children
    assert "centers" not in open_results(_run(tmp_path / "b", client, params))["labels"]
    # a sequence of K is compared by the criterion
    seq = KernelKMeans([1, 2, 3, 4], solver="exact", n_init=3, random_state=0).fit(_iris()[0])
    assert seq.model_order_.rule == "bic" and seq.bic_.shape == (4,)
    assert seq.n_clusters_ == int(np.argmin(seq.bic_)) + 1


def test_image_reader_gets_the_label_map(tmp_path, client):
    # four flat 3-band regions plus noise, (y, x, band)
    centres = np.array([[0.1, 0.2, 0.8], [0.8, 0.1, 0.2], [0.3, 0.9, 0.4], [0.9, 0.8, 0.9]])
    region = (np.arange(36)[:, None] >= 18) * 2 + (np.arange(40)[None] >= 20)
    img = centres[region] + np.random.default_rng(0).normal(scale=0.03, size=(36, 40, 3))
    np.save(tmp_path / "image.npy", img.astype(np.float32))
    data = {"reader": "npy-raster", "path": str(tmp_path / "image.npy")}
    params = {"n_clusters": 4, "write_geotiff": False, "write_png": False}
    tree = open_results(_run(tmp_path, client, params, data))
    label_map = tree["map"]["labels"].values
    assert label_map.shape == (36, 40)
    np.testing.assert_array_equal(label_map.ravel(), tree["labels"]["labels"].values)
    # four flat regions: one cluster each
    quadrants = [label_map[:18, :20], label_map[:18, 20:], label_map[18:, :20], label_map[18:, 20:]]
    assert sorted(np.unique(q).size for q in quadrants) == [1, 1, 1, 1]
    assert len({int(q[0, 0]) for q in quadrants}) == 4


def test_check_data_refuses_before_any_cluster():
    method = get_method("kernel-kmeans")
    params = validate_spec(
        {"name": "x", "data": IRIS, "method": "kernel-kmeans", "output": "x.zarr"}
    ).params
    X = np.ones((5, 2))
    with pytest.raises(InvalidInputError, match="larger than the number of samples"):
        method.check_data({**params, "n_clusters": 6}, LoadedData(X))
    X[1, 1] = np.inf
    with pytest.raises(InvalidInputError, match="infinite values"):
        method.check_data({**params, "n_clusters": 2}, LoadedData(X))
    X[1, 1] = np.nan  # a missing value: KernelKMeans models it, but not with every kernel
    method.check_data({**params, "n_clusters": 2}, LoadedData(X))
    with pytest.raises(
        InvalidInputError,
        match=r"kernel: cosine does not handle missing values \(1 NaN found\); use kernel: "
        r"rbf or local_scaling or knn or knn_mean,",
    ):
        method.check_data({**params, "n_clusters": 2, "kernel": "cosine"}, LoadedData(X))


@pytest.mark.parametrize("solver", ["exact", "nystrom"])
def test_missing_values_job_stores_what_the_estimator_fits(tmp_path, client, solver):
    X, y = _iris()
    X[np.random.default_rng(0).random(X.shape) < 0.15] = np.nan
    path = tmp_path / "holes.csv"
    np.savetxt(path, X, delimiter=",", fmt="%.17g")  # NaN written as 'nan'
    params = {"n_clusters": 3, "solver": solver, "n_landmarks": 40, "kmeans_max_samples": 100}
    tree = open_results(_run(tmp_path, client, params, {"reader": "csv", "path": str(path)}))
    est = KernelKMeans(**params, random_state=0).fit(X)
    np.testing.assert_array_equal(tree["labels"]["labels"].values, est.labels_)
    assert adjusted_rand_score(y, est.labels_) > 0.5


@pytest.mark.parametrize("n", [200, 3000, 6000, 20_000])
def test_cost_model_takes_the_estimators_solver(n):
    params = validate_spec(
        {"name": "x", "data": IRIS, "method": "kernel-kmeans", "output": "x.zarr"}
    ).params
    X = np.random.default_rng(0).normal(size=(50, 4))
    est = KernelKMeans(max_memory="100GiB")
    chosen = est._choose_solver(n, 4, make_kernel("rbf", X), params["n_clusters"])
    assert step._solver(params, n, 4) == chosen
    cost = step.estimate(params, n, 4)
    assert (cost.memory_bytes > 8.0 * n * n) == (chosen == "exact")
