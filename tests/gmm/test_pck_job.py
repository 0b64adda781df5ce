"""``method: pck-spectral`` end to end on small data, and the example specs validate."""

from __future__ import annotations

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
  n_inits: 4
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
    """kpca/auto: Γ in memory, exact; normalized/randomized: Γ lazy, dask svd_compressed."""
    spec = tmp_path / "job.yaml"
    spec.write_text(SPEC.format(embedding=embedding, solver=solver, out=tmp_path / "out.zarr"))
    store = run_job(spec, client=client, progress=False, log=lambda m: None)
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
        run_job(spec, client=client, progress=False, log=lambda m: None)
    spec.write_text(SPEC.format(embedding="tsne", solver="auto", out=tmp_path / "o.zarr"))
    with pytest.raises(SpecError):
        load_spec(spec)
