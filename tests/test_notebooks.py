"""Every notebook under notebooks/ executes headless (matplotlib's Agg backend through the
environment, as a test runner sets it), each against a store of its own job."""

import os
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((REPO / "notebooks").glob("*.ipynb"))
NEEDS_DATA = {"04_ranking.ipynb"}  # the Frey faces and Statlog


def _execute(path: Path) -> nbformat.NotebookNode:
    nb = nbformat.read(path, as_version=4)
    NotebookClient(
        nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
    ).execute()
    return nb


def _errors(nb) -> list:
    return [
        o
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.get("outputs", [])
        if o.get("output_type") == "error"
    ]


@pytest.mark.slow
@pytest.mark.parametrize(
    "path",
    [pytest.param(p, marks=[pytest.mark.data] if p.name in NEEDS_DATA else []) for p in NOTEBOOKS],
    ids=lambda p: p.name,
)
def test_notebook_executes(path, tmp_path, monkeypatch):
    """With its store missing, a notebook runs its documented job into that place, then reads it."""
    store = tmp_path / "store.zarr"
    monkeypatch.setenv(f"DKERNEL_STORE_{path.name[:2]}", str(store))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    assert not _errors(_execute(path))
    assert (store / "zarr.json").exists()


def test_notebooks_have_no_backend_override_and_saved_figures():
    for path in NOTEBOOKS:
        nb = nbformat.read(path, as_version=4)
        code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
        assert "matplotlib.use(" not in code, path.name
        images = [
            o
            for c in nb.cells
            if c.cell_type == "code"
            for o in c.get("outputs", [])
            if "image/png" in o.get("data", {})
        ]
        assert images, f"{path.name} has no saved figure (execute it and save the outputs)"


@pytest.mark.slow
def test_notebook_opens_the_existing_store_instead_of_running_a_job(tmp_path, monkeypatch):
    from dkernel.jobs.runner import run_job

    store = tmp_path / "wine.zarr"
    run_job(REPO / "jobs" / "wine-rbf-kpca.yaml", output=store, progress=False)
    before = {p: p.stat().st_mtime_ns for p in store.rglob("*")}
    monkeypatch.setenv("DKERNEL_STORE_01", str(store))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    assert not _errors(_execute(REPO / "notebooks" / "01_open_results.ipynb"))
    assert {p: p.stat().st_mtime_ns for p in store.rglob("*")} == before
    assert os.environ["DKERNEL_STORE_01"] == str(store)
