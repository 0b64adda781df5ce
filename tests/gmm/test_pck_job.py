"""``method: pck-spectral`` end to end on small data, and the example specs validate."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

from dkernel.errors import InvalidInputError, SpecError
from dkernel.jobs.runner import run_job
from dkernel.jobs.spec import load_spec
from dkernel.storage import open_results

REPO = Path(__file__).resolve().parents[2]

SPEC = """
name: pck-test
seed: 3
data:
  reader: sklearn
  name: wine
  standardize: true
method: pck-spectral
params:
  n_clusters: 3
  n_estimators: 4
  max_components: 6
  embedding: {embedding}
  solver: {solver}
  store_features: true
  store_kernel: true
  n_init: 10
output: {out}
"""


@pytest.mark.parametrize("embedding, solver", [("kpca", "auto"), ("normalized", "randomized")])
def test_pck_spectral_job_end_to_end(tmp_path, client, embedding, solver):
    """kpca/auto: the Gram route; normalized/randomized: the F-side subspace iteration (Γ is
    small, so both hold it in memory)."""
    spec = tmp_path / "job.yaml"
    spec.write_text(SPEC.format(embedding=embedding, solver=solver, out=tmp_path / "out.zarr"))
    store = run_job(spec, client=client, progress=False)
    tree = open_results(store)
    assert tree.attrs["status"] == "complete"
    gmm = tree["gmm"].to_dataset()
    assert gmm["means"].shape == (4, 5, 6, 13)
    # padding beyond g components is NaN; weights of each model sum to one
    assert np.isnan(gmm["means"].values[:, 0, 2:]).all()
    np.testing.assert_allclose(np.nansum(gmm["weights"].values, axis=2), 1.0, rtol=1e-5)
    assert gmm["mean_entropy"].shape == (4, 5)
    F = tree["features"]["features"].values
    assert F.shape == (178, 4 * 20)
    K = tree["kernel"]["kernel"].values
    np.testing.assert_allclose(K, F @ F.T, rtol=1e-5, atol=1e-6)
    emb = tree["embedding"].to_dataset()
    assert emb.attrs["solver"] == ("exact" if solver == "auto" else "randomized")
    assert emb["embedding"].shape == (178, 3)
    assert np.all(np.diff(emb["eigenvalues"].values) <= 0)
    labels = tree["labels"]["labels"].values
    assert labels.shape == (178,) and set(labels.tolist()) == {0, 1, 2}
    assert tree["metrics"].attrs["acc"] > 0.85


def test_example_specs_validate(monkeypatch, data_dir):
    monkeypatch.setenv("DKERNEL_DATA", str(data_dir))
    for name in ("pck-wine.yaml", "pck-wisconsin.yaml", "pck-statlog.yaml"):
        spec = load_spec(REPO / "jobs" / name)
        assert spec.method == "pck-spectral"


def test_bad_job_params(tmp_path, client):
    bad = SPEC.format(embedding="kpca", solver="auto", out=tmp_path / "o.zarr").replace(
        "max_components: 6", "max_components: 200"
    )
    spec = tmp_path / "bad.yaml"
    spec.write_text(bad)
    with pytest.raises((InvalidInputError, SpecError), match="max_components"):
        run_job(spec, client=client, progress=False)
    spec.write_text(SPEC.format(embedding="tsne", solver="auto", out=tmp_path / "o.zarr"))
    with pytest.raises(SpecError):
        load_spec(spec)


def test_informative_missingness_job(tmp_path, client):
    """Wine with its largest 45 % per column removed (NMAR), read from a CSV with empty fields:
    missingness: informative stores ρ beside the variances and clusters well."""
    from sklearn.datasets import load_wine

    X, y = load_wine(return_X_y=True)
    top = np.argsort(-X, axis=0, kind="stable")[: int(0.45 * len(X))]
    X[top, np.arange(X.shape[1])] = np.nan
    rows = [
        ",".join("" if np.isnan(v) else str(float(v)) for v in x) + f",{t}"
        for x, t in zip(X, y, strict=True)
    ]
    (tmp_path / "wine.csv").write_text("\n".join(rows) + "\n")
    spec = tmp_path / "job.yaml"
    spec.write_text(
        f"""
name: pckid-nmar
seed: 1
data:
  reader: csv
  path: {tmp_path / "wine.csv"}
  label_column: 13
  standardize: true
method: pck-spectral
params:
  n_clusters: 3
  n_estimators: 6
  max_components: 8
  missingness: informative
  n_init: 10
output: {tmp_path / "out.zarr"}
"""
    )
    store = run_job(spec, client=client, progress=False)
    tree = open_results(store)
    gmm = tree["gmm"].to_dataset()
    assert gmm.attrs["missingness"] == "informative"
    rho = gmm["missing_probs"].values
    assert rho.shape == (6, 7, 8, 13) and np.isnan(rho[:, 0, 2:]).all()
    assert np.nanmin(rho) > 0 and np.nanmax(rho) < 1
    assert tree["metrics"].attrs["acc"] > 0.9
    spec.write_text(spec.read_text().replace("n_init: 10", "n_init: 10\n  covariance_type: full"))
    with pytest.raises(InvalidInputError, match="informative"):
        run_job(spec, client=client, progress=False)


def test_job_defaults_equal_the_estimator_defaults():
    import inspect

    from dkernel.gmm.pck import ProbabilisticClusterKernel
    from dkernel.jobs.steps.pck_spectral import PARAMS

    est = inspect.signature(ProbabilisticClusterKernel).parameters
    shared = [p for p in PARAMS if p.name in est]
    assert {p.name for p in shared} >= {
        "n_estimators",
        "max_components",
        "projection",
        "missingness",
    }
    for p in shared:
        assert p.default == est[p.name].default, p.name


def test_projection_job(tmp_path, client):
    """projection: 5 fits the ensemble on 5 principal axes; /gmm stores them."""
    spec = tmp_path / "job.yaml"
    text = SPEC.format(embedding="kpca", solver="auto", out=tmp_path / "out.zarr")
    spec.write_text(text.replace("n_init: 10", "n_init: 10\n  projection: 5"))
    tree = open_results(run_job(spec, client=client, progress=False))
    gmm = tree["gmm"].to_dataset()
    assert gmm["means"].shape == (4, 5, 6, 5) and gmm["projection"].shape == (13, 5)
    assert gmm.attrs["projection"] == 5
    assert tree["metrics"].attrs["acc"] > 0.85
    spec.write_text(text.replace("n_init: 10", "n_init: 10\n  projection: 2.5"))
    with pytest.raises(SpecError, match="projection"):
        load_spec(spec)


def test_gamma_placements_give_the_same_embedding(tmp_path, client, monkeypatch, caplog):
    """Γ held dense, held sparse (entries below SPARSE_CUT dropped) or lazy (recomputed once
    per randomized pass): the same eigenvalues and embedding to float32 rounding."""
    from dkernel.jobs.steps import pck_spectral

    results = {}
    for placement in ("dense", "sparse", "lazy"):
        monkeypatch.setattr(pck_spectral, "gamma_placement", lambda params, n, _p=placement: _p)
        out = tmp_path / f"{placement}.zarr"
        spec = tmp_path / f"{placement}.yaml"
        text = SPEC.format(embedding="kpca", solver="randomized", out=out)
        # diagonal covariances: the 1 % below was measured on them (wine's full-covariance Γ
        # puts its third eigenvalue 1.3 % off on a 100-row subsample; the labels agree)
        text = text.replace("  store_kernel: true\n", "  covariance_type: diag\n")
        spec.write_text(text.replace("  store_features: true\n", ""))
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="dkernel.jobs.steps.pck_spectral"):
            tree = open_results(run_job(spec, client=client, progress=False))
        logs = [r.getMessage() for r in caplog.records if r.getMessage().startswith("Γ (")]
        assert logs and all(("sparse" in m) == (placement == "sparse") for m in logs)
        results[placement] = tree["embedding"].to_dataset()
    ref = results["dense"]
    for placement in ("sparse", "lazy"):
        got = results[placement]
        np.testing.assert_allclose(got["eigenvalues"], ref["eigenvalues"], rtol=1e-5)
        np.testing.assert_allclose(got["embedding"], ref["embedding"], atol=1e-4)


@pytest.mark.parametrize("embedding", ["kpca", "normalized"])
def test_lazy_gamma_auto_takes_the_subsample_route(
    tmp_path, client, monkeypatch, caplog, embedding
):
    """A Γ too large to hold (forced here) is embedded, with solver: auto, from the subspace of
    a row subsample's Γ and one pass: the choice is logged and stored, and the result is close
    to the held Γ's randomized embedding (the same clusters)."""
    from sklearn.metrics import adjusted_rand_score

    from dkernel.jobs.steps import pck_spectral
    from dkernel.spectral import pck_memory

    # one rule sizes the subsample, for the estimator and the step's estimate alike
    monkeypatch.setattr(pck_memory, "SUBSAMPLE_ROWS", 100)
    results = {}
    for placement, solver in (("dense", "randomized"), ("lazy", "auto")):
        monkeypatch.setattr(pck_spectral, "gamma_placement", lambda params, n, _p=placement: _p)
        spec = tmp_path / f"{placement}.yaml"
        text = SPEC.format(embedding=embedding, solver=solver, out=tmp_path / f"{placement}.zarr")
        # diagonal covariances: the 1 % below was measured on them (wine's full-covariance Γ
        # puts its third eigenvalue 1.3 % off on a 100-row subsample; the labels agree)
        text = text.replace("  store_kernel: true\n", "  covariance_type: diag\n")
        spec.write_text(text.replace("  store_features: true\n", ""))
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="dkernel.jobs.steps.pck_spectral"):
            results[placement] = open_results(run_job(spec, client=client, progress=False))
    line = next(r.getMessage() for r in caplog.records if r.getMessage().startswith("Γ ("))
    assert "subsample solver" in line and "subsample of 100 rows + 1 pass" in line
    emb = results["lazy"]["embedding"].to_dataset()
    ref = results["dense"]["embedding"].to_dataset()
    assert emb.attrs["solver"] == "subsample" and emb.attrs["subsample_rows"] == 100
    np.testing.assert_allclose(emb["eigenvalues"], ref["eigenvalues"], rtol=0.01)
    labels = [results[p]["labels"]["labels"].values.ravel() for p in ("lazy", "dense")]
    assert adjusted_rand_score(*labels) > 0.9
