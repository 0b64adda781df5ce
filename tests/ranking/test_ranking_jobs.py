"""The kppr and jrc job methods end to end (small data), and the example specs validate."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import dkernel
from dkernel.errors import SpecError
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


def test_kppr_job(tmp_path, client):
    params = {
        "n_fit": 60,
        "seeds": {"global": None, "row_5": 5, "rows": [10, 140], "setosa": {"class": 0}},
        "top_k": 15,
        "chunk_rows": 40,
    }
    out = run_job(
        _spec("kppr", params, tmp_path / "k.zarr"),
        client=client,
        progress=False,
        log=lambda _: None,
    )
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


def test_jrc_job(tmp_path, client):
    params = {"kernel": "pck", "pck_n_inits": 8, "pck_max_components": 8, "n_init": 5, "top_k": 4}
    out = run_job(
        _spec("jrc", params, tmp_path / "j.zarr"), client=client, progress=False, log=lambda _: None
    )
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


def test_seed_spec_errors(tmp_path):
    with pytest.raises(SpecError, match="seeds"):
        _spec("kppr", {"seeds": {"bad": "x"}}, tmp_path / "e.zarr")


@pytest.mark.parametrize(
    "path", sorted((REPO / "jobs").glob("kppr-*.yaml")) + sorted((REPO / "jobs").glob("jrc-*.yaml"))
)
def test_example_specs_validate(path, data_dir):
    spec = load_spec(path)
    assert spec.method in ("kppr", "jrc")
