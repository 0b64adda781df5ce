"""The kppr and jrc job methods end to end (small data), and the example specs validate."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import dkernel
from dkernel.errors import DKernelWarning, SpecError
from dkernel.jobs.runner import run_job
from dkernel.jobs.spec import load_spec, validate_spec
from dkernel.storage import open_results

REPO = Path(__file__).resolve().parents[2]


def _spec(method, params, output, data=None):
    return validate_spec(
        {
            "name": f"test-{method}",
            "data": data or {"reader": "sklearn", "name": "iris", "standardize": True},
            "method": method,
            "params": params,
            "output": str(output),
            "seed": 3,
        }
    )


def _run_kppr(params, output, client):
    return run_job(_spec("kppr", params, output), client=client, progress=False)


def test_kppr_job_caps_pck_components_at_the_subsample(tmp_path, client):
    # each GMM is fitted on half of the max_samples rows: G = 20 > 15 rows is capped at 15 with a
    # warning (it was refused before ProbabilisticClusterKernel capped it)
    params = {"kernel": "pck", "pck_max_components": 20, "pck_n_estimators": 2, "max_samples": 30}
    with pytest.warns(DKernelWarning, match=r"max_components=20: models with g = 2\.\.15"):
        out = _run_kppr(params, tmp_path / "k.zarr", client)
    assert open_results(out).attrs["status"] == "complete"


def test_kppr_job(tmp_path, client):
    params = {
        "max_samples": 60,
        "seeds": {"global": None, "row_5": 5, "rows": [10, 140], "setosa": {"class": 0}},
        "top_k": 15,
        "chunk_rows": 40,
    }
    out = _run_kppr(params, tmp_path / "k.zarr", client)
    tree = open_results(out)
    rk = tree["ranking"].to_dataset()
    assert rk["score"].shape == (150, 4)
    assert list(rk["seed"].values) == ["global", "row_5", "rows", "setosa"]
    assert int(rk["in_sample"].sum()) == 60
    top = dkernel.top_k(out, "setosa", 15)
    y = tree["input"].to_dataset()["labels_true"].values
    assert np.mean(y[top["index"].to_numpy()] == 0) > 0.9
    scores = rk["score"].sel(seed="setosa").values
    np.testing.assert_array_equal(top["index"].to_numpy(), np.argsort(-scores, kind="stable")[:15])
    metrics = tree["metrics"].attrs
    assert metrics["ndcg@10_setosa"] > 0.8
    emb = tree["embedding"].to_dataset()
    assert emb["fit_index"].shape == (60,)
    assert tree.attrs["status"] == "complete"


@pytest.mark.parametrize("kernel", ["rbf", "pck"])
def test_kppr_job_projection_ranks_new_seeds(tmp_path, client, kernel):
    """Stored score coordinates rank seeds chosen after the job, matching the job's scores."""
    params = {
        "kernel": kernel,
        "max_samples": 60,
        "seeds": {"rows": [10, 140], "setosa": {"class": 0}, "out": [3, 77, 120]},
        "top_k": 15,
        "chunk_rows": 40,
    }
    if kernel == "rbf":
        params["store_projection"] = True
    else:  # pck stores the projection by default
        params.update(pck_n_estimators=4, pck_max_components=5)
    out = _run_kppr(params, tmp_path / "k.zarr", client)
    tree = open_results(out)
    rk = tree["ranking"].to_dataset()
    k = int(tree["embedding"].to_dataset().sizes["component"])
    assert rk["projection"].shape == (150, k + 1)
    y = tree["input"].to_dataset()["labels_true"].values
    in_sample = rk["in_sample"].values
    assert not in_sample[[3, 77, 120]].all()  # the "out" seed has out-of-sample rows
    # every named seed, in sample, out of sample or mixed, is reproduced from the projection
    for name, rows in (
        ("rows", [10, 140]),
        ("setosa", np.flatnonzero(y == 0)),
        ("out", [3, 77, 120]),
    ):
        stored = rk["score"].sel(seed=name).values.astype(np.float64)
        again = dkernel.seed_scores(out, rows).astype(np.float64)
        np.testing.assert_allclose(again, stored, rtol=0, atol=1e-5 * np.abs(stored).max())
    # a new seed: weighted rows, ranked from the store without a cluster
    top = dkernel.top_k(out, [0, 1, 2], 10)
    scores = dkernel.seed_scores(out, [0, 1, 2])
    np.testing.assert_array_equal(top["index"].to_numpy(), np.argsort(-scores, kind="stable")[:10])
    assert np.mean(y[top["index"].to_numpy()] == 0) == 1.0
    weighted = dkernel.seed_scores(out, [0, 100], weights=[1.0, 0.0])
    np.testing.assert_allclose(weighted, dkernel.seed_scores(out, 0), rtol=1e-6)
    with pytest.raises(dkernel.errors.InvalidInputError, match="outside"):
        dkernel.seed_scores(out, [150])
    with pytest.raises(dkernel.errors.InvalidInputError, match="non-negative"):
        dkernel.seed_scores(out, [1, 2], weights=[1.0, -1.0])


def test_seed_scores_needs_projection(tmp_path, client):
    params = {"max_samples": 40, "seeds": {"global": None}, "top_k": 5}
    out = _run_kppr(params, tmp_path / "k.zarr", client)
    assert "projection" not in open_results(out)["ranking"].to_dataset()
    with pytest.raises(dkernel.errors.StoreError, match="store_projection: true"):
        dkernel.seed_scores(out, [0])
    with pytest.raises(dkernel.errors.StoreError, match="store_projection"):
        dkernel.top_k(out, [0], 3)


def test_jrc_job(tmp_path, client):
    params = {
        "kernel": "pck",
        "pck_n_estimators": 8,
        "pck_max_components": 8,
        "n_init": 5,
        "top_k": 4,
    }
    out = run_job(_spec("jrc", params, tmp_path / "j.zarr"), client=client, progress=False)
    tree = open_results(out)
    rk = tree["ranking"].to_dataset()
    assert list(rk["seed"].values) == ["global", "cluster_0", "cluster_1", "cluster_2"]
    labels = tree["labels"].to_dataset()["labels"].values
    cti = rk["cluster_top_index"].values
    assert cti.shape == (4, 3, 4)
    for c in range(3):
        rows = cti[:, c]
        assert np.all(labels[rows[rows >= 0]] == c)
        assert np.all(rows[:, : min(4, np.sum(labels == c))] >= 0)
    assert tree["embedding"].to_dataset()["embedding"].shape == (150, 3)
    assert tree["metrics"].attrs["acc"] > 0.85


def test_jrc_job_at_defaults(tmp_path, client):
    """The default kernel (half-weighted 10-NN graph) and normalized truncation, end to end."""
    out = run_job(
        _spec("jrc", {"top_k": 4}, tmp_path / "j.zarr"),
        client=client,
        progress=False,
    )
    tree = open_results(out)
    emb = tree["embedding"].to_dataset()
    assert emb["embedding"].shape == (150, 3)  # n_components defaults to n_clusters
    np.testing.assert_allclose(emb["embedding"].values[:, 0], 1.0, atol=1e-10)
    assert emb.attrs["embedding"] == "normalized"
    assert tree["ranking"].attrs["kernel"]["kernel"] == "knn_mean"
    labels = tree["labels"].to_dataset()["labels"].values
    assert np.bincount(labels, minlength=3).min() > 30
    assert tree["metrics"].attrs["acc"] > 0.8


def test_kppr_job_adaptive_kernel(tmp_path, client):
    params = {
        "kernel": "knn_mean",
        "max_samples": 100,
        "seeds": {"setosa": {"class": 0}, "row_120": 120},
        "top_k": 10,
    }
    out = _run_kppr(params, tmp_path / "k.zarr", client)
    tree = open_results(out)
    assert tree["ranking"].attrs["kernel"]["kernel"] == "knn_mean"
    assert tree["metrics"].attrs["ndcg@10_setosa"] > 0.8
    with pytest.raises(SpecError, match="n_neighbors"):
        _run_kppr({**params, "max_samples": 10}, tmp_path / "bad.zarr", client)


@pytest.mark.parametrize(
    ("method", "estimator"),
    [("jrc", dkernel.JointRankingClustering), ("kppr", dkernel.KernelPersonalizedPageRank)],
)
def test_job_defaults_equal_estimator_defaults(method, estimator):
    from dkernel.jobs.registry import get_method

    job = {p.name: p.default for p in get_method(method).params}
    est = estimator().get_params()
    shared = sorted(set(job) & set(est))
    assert {"kernel", "n_neighbors", "alpha", "n_components", "sigma", "sigma_fraction"} <= set(
        shared
    )
    assert {k: job[k] for k in shared} == {k: est[k] for k in shared}


def test_seed_spec_errors(tmp_path):
    with pytest.raises(SpecError, match="seeds"):
        _spec("kppr", {"seeds": {"bad": "x"}}, tmp_path / "e.zarr")


@pytest.mark.parametrize(
    "path", sorted((REPO / "jobs").glob("kppr-*.yaml")) + sorted((REPO / "jobs").glob("jrc-*.yaml"))
)
def test_example_specs_validate(path, data_dir):
    spec = load_spec(path)
    assert spec.method in ("kppr", "jrc")


def test_kppr_job_former_n_fit_is_max_samples(monkeypatch):
    """``n_fit``, the kppr job's former name of its in-sample size ``max_samples``, still sets
    it for one release (warning once); both names with different values are refused."""
    from dkernel.jobs.steps import kppr as step
    from dkernel.kernels import aliases

    monkeypatch.setattr(aliases, "_WARNED", set())
    with pytest.warns(FutureWarning, match="n_fit is deprecated.*max_samples=60"):
        assert step._n_fit({"max_samples": 2000, "n_fit": 60}, 1000) == 60
    assert step._n_fit({"max_samples": 60, "n_fit": None}, 1000) == 60
    assert step._n_fit({"max_samples": 2000, "n_fit": None}, 1000) == 1000
    with pytest.raises(SpecError, match="give max_samples only"):
        step._n_fit({"max_samples": 50, "n_fit": 60}, 1000)


def test_kppr_job_max_samples_is_a_count_or_a_fraction():
    from dkernel.io.data import LoadedData
    from dkernel.jobs.steps import kppr as step

    assert step._n_fit({"max_samples": 0.25, "n_fit": None}, 1000) == 250
    assert step._n_fit({"max_samples": 1.0, "n_fit": None}, 1000) == 1000
    params = _spec("kppr", {"max_samples": 0.001}, "x.zarr").params
    X = np.random.default_rng(0).normal(size=(1000, 2))
    with pytest.raises(SpecError, match=r"max_samples \(0\.001\) of 1000 rows draws 1;"):
        step.check_data(params, LoadedData(X=X))


@pytest.mark.parametrize(
    ("params", "sparse"),
    [
        ({}, True),
        ({"kernel": "knn"}, True),
        ({"kernel": "rbf"}, False),
        ({"embedding": "laplacian"}, False),
    ],
)
def test_jrc_job_cost_takes_the_sparse_graph_past_the_dense_limit(params, sparse):
    from dkernel.jobs.steps import jrc as step

    full = _spec("jrc", {"n_clusters": 3, **params}, "x.zarr").params
    n = 200_000
    cost = step.estimate(full, n, 4)
    assert (cost.memory_bytes < 8.0 * n * n) == sparse
    assert step.estimate(full, 2_000, 4).memory_bytes == 3.0 * 8 * 2_000**2
    if not sparse:
        assert "knn_mean" in cost.alternative


def test_class_seed_without_labels_names_the_labels_column(tmp_path):
    path = tmp_path / "table.csv"
    np.savetxt(path, np.random.default_rng(0).normal(size=(20, 3)), delimiter=",")
    spec = _spec(
        "kppr",
        {"seeds": {"first": {"class": 1}}},
        tmp_path / "k.zarr",
        data={"reader": "csv", "path": str(path)},
    )
    with pytest.raises(SpecError, match="data.label_column"):
        run_job(spec, progress=False)
