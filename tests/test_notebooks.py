"""Every notebook under notebooks/ executes headless against stores made in this session."""

import os
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((REPO / "notebooks").glob("*.ipynb"))


@pytest.fixture(scope="session")
def wine_store_for_notebooks(tmp_path_factory, client):
    from dkernel.jobs.runner import run_job

    out = tmp_path_factory.mktemp("nb") / "wine.zarr"
    return run_job(REPO / "jobs" / "wine-rbf-kpca.yaml", output=out, client=client, progress=False)


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_executes(path, wine_store_for_notebooks, data_dir, monkeypatch):
    monkeypatch.setenv("DKERNEL_STORE_01", str(wine_store_for_notebooks))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    nb = nbformat.read(path, as_version=4)
    NotebookClient(
        nb,
        timeout=600,
        kernel_name="python3",
        resources={"metadata": {"path": str(REPO / "notebooks")}},
    ).execute()
    errors = [
        o
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.get("outputs", [])
        if o.get("output_type") == "error"
    ]
    assert not errors
    assert os.environ["DKERNEL_STORE_01"]
