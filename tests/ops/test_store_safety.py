"""Storage safety and resume: completion marker last, chunk-aligned writes, --resume."""

from __future__ import annotations

import io
import os
from contextlib import redirect_stderr
from pathlib import Path

import dask
import dask.array as da
import numpy as np
import pytest
import xarray as xr
import zarr

from dkernel.cli import main
from dkernel.errors import StoreError
from dkernel.storage import ResultsStore, open_results
from dkernel.storage.store import GROUP_MARKER

REPO = Path(__file__).resolve().parents[2]
JOB = {"name": "t", "method": "m"}


def _store(tmp_path, **kw):
    return ResultsStore.create(tmp_path / "r.zarr", job=JOB, seed=3, **kw)


def _chunk_files(path: Path, group: str, name: str) -> dict[str, float]:
    root = path / group / name / "c"
    return {str(p.relative_to(root)): p.stat().st_mtime_ns for p in root.rglob("*") if p.is_file()}


def test_complete_marker_is_refused_while_a_write_is_unfinished(tmp_path):
    store = _store(tmp_path)
    x = da.ones((40, 4), chunks=(10, 4))
    pending = store.write("big", xr.Dataset({"x": (("sample", "f"), x)}), compute=False)
    assert store.attrs["status"] == "running"
    with pytest.raises(StoreError, match=r"groups \['big'\] are missing or their write did not"):
        store.mark_complete()
    with dask.config.set(scheduler="sync"):
        dask.compute(pending)
    assert store.group_complete("big")
    store.mark_complete()
    assert open_results(store.path).attrs["status"] == "complete"


def test_failed_chunk_write_leaves_group_unfinished(tmp_path):
    store = _store(tmp_path)

    def boom(block):
        if block[0, 0] >= 20:
            raise RuntimeError("disk full")
        return block

    x = da.arange(40.0, chunks=10).reshape(40, 1).rechunk((10, 1)).map_blocks(boom)
    with pytest.raises(RuntimeError, match="disk full"), dask.config.set(scheduler="sync"):
        store.write("x", xr.Dataset({"x": (("sample", "f"), x)}))
    assert not store.group_complete("x")
    with pytest.raises(StoreError, match="did not finish"):
        store.mark_complete()


def test_writes_are_chunk_aligned(tmp_path):
    store = _store(tmp_path)
    x = da.random.default_rng(0).random((100, 7), chunks=((30, 20, 40, 10), (7,)))
    with dask.config.set(scheduler="sync"):
        store.write("x", xr.Dataset({"x": (("sample", "f"), x)}))
    arr = zarr.open_array(str(store.path), path="x/x", mode="r")
    assert arr.chunks == (40, 7)
    np.testing.assert_array_equal(arr[...], x.compute())
    # one file per chunk: each Dask block went to exactly one Zarr chunk
    assert sorted(_chunk_files(store.path, "x", "x")) == ["0/0", "1/0", "2/0"]


def test_resume_skips_finished_groups_and_writes_only_missing_chunks(tmp_path):
    x = da.random.default_rng(1).random((60, 3), chunks=(10, 3))
    store = _store(tmp_path)
    with dask.config.set(scheduler="sync"):
        store.write("done", xr.Dataset({"d": (("i",), np.arange(5))}))
        store.write("big", xr.Dataset({"x": (("sample", "f"), x)}))
    # simulate a writer killed after 4 of 6 chunks: drop two chunks, unmark the group
    for key in ("4/0", "5/0"):
        os.remove(store.path / "big" / "x" / "c" / key)
    (store.path / "big" / "x" / "c" / "3" / "0.abc.partial").write_bytes(b"half")
    zarr.open_group(str(store.path), path="big", mode="r+").attrs[GROUP_MARKER] = "writing"
    store.mark_failed(RuntimeError("killed"))
    before = _chunk_files(store.path, "big", "x")

    resumed = ResultsStore.resume(store.path, job=JOB, seed=3)
    assert resumed.attrs["status"] == "running" and resumed.attrs["resumes"] == 1
    assert "error" not in resumed.attrs
    calls = []

    def counted(block):
        calls.append(block.shape)
        return block

    with dask.config.set(scheduler="sync"):
        assert resumed.write("done", xr.Dataset({"d": (("i",), np.arange(5))})) is None
        resumed.write(
            "big",
            xr.Dataset({"x": (("sample", "f"), x.map_blocks(counted, meta=np.empty((0, 0))))}),
        )
    assert len(calls) == 2  # only the two missing blocks were computed
    after = _chunk_files(resumed.path, "big", "x")
    assert set(after) == {f"{i}/0" for i in range(6)}
    assert all(after[k] == before[k] for k in before if not k.endswith(".partial"))
    assert not list(resumed.path.rglob("*.partial"))
    resumed.mark_complete()
    tree = open_results(resumed.path)
    np.testing.assert_array_equal(tree["big"]["x"].values, x.compute())


def test_resume_refuses_other_spec_and_complete_store(tmp_path):
    store = _store(tmp_path)
    with pytest.raises(StoreError, match="different job spec or seed.*--overwrite"):
        ResultsStore.resume(store.path, job={"name": "other"}, seed=3)
    with pytest.raises(StoreError, match="different job spec or seed"):
        ResultsStore.resume(store.path, job=JOB, seed=4)
    store.mark_complete()
    with pytest.raises(StoreError, match="already complete; pass --overwrite"):
        ResultsStore.resume(store.path, job=JOB, seed=3)
    with pytest.raises(StoreError, match="holds no dkernel results store"):
        ResultsStore.resume(tmp_path / "nothing.zarr", job=JOB, seed=3)


# ------------------------------------------------------------------------------------------
# through the CLI
# ------------------------------------------------------------------------------------------


_SCHEDULER: list[str] = []


def _cli(*args: str) -> tuple[int, str]:
    """``dkernel run`` on the session's LocalCluster (saves starting one per call)."""
    err = io.StringIO()
    with redirect_stderr(err):
        code = main([*args, "--no-progress", "--scheduler", _SCHEDULER[0]])
    return code, err.getvalue()


@pytest.fixture()
def wine_job(tmp_path, monkeypatch, client):
    _SCHEDULER[:] = [client.scheduler.address]
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DKERNEL_OUTPUT_ROOT", raising=False)
    spec = tmp_path / "wine.yaml"
    text = (REPO / "jobs" / "wine-rbf-kpca.yaml").read_text()
    spec.write_text(text.replace("results/wine-rbf-kpca.zarr", "wine.zarr"))
    return spec


def test_cli_resume_after_interruption_keeps_finished_groups(wine_job, tmp_path):
    code, err = _cli("run", str(wine_job))
    assert code == 0, err
    out = tmp_path / "wine.zarr"
    reference = open_results(out)
    emb_ref = reference["embedding"]["embedding"].values
    # rerunning a complete store needs --overwrite
    code, err = _cli("run", str(wine_job))
    assert code == 2 and "already holds a complete results store; pass --overwrite" in err
    # make it look like the runner died after the kernel: later groups unfinished
    root = zarr.open_group(str(out), mode="r+")
    root.attrs.update({"status": "running"})
    for group in ("embedding", "labels", "metrics"):
        zarr.open_group(str(out), path=group, mode="r+").attrs[GROUP_MARKER] = "writing"
    kernel_files = _chunk_files(out, "kernel", "kernel")
    code, err = _cli("run", str(wine_job), "--resume")
    assert code == 0, err
    assert "resuming" in err
    tree = open_results(out)
    assert tree.attrs["status"] == "complete" and tree.attrs["resumes"] == 1
    assert _chunk_files(out, "kernel", "kernel") == kernel_files  # kernel not rewritten
    np.testing.assert_array_equal(tree["embedding"]["embedding"].values, emb_ref)
    # --resume of a complete store says so
    code, err = _cli("run", str(wine_job), "--resume")
    assert code == 2 and "already complete; pass --overwrite" in err


def test_cli_resume_without_store_starts_fresh_and_refuses_other_spec(wine_job, tmp_path):
    code, err = _cli("run", str(wine_job), "--resume")
    assert code == 0, err
    root = zarr.open_group(str(tmp_path / "wine.zarr"), mode="r+")
    root.attrs["status"] = "failed"
    wine_job.write_text(wine_job.read_text().replace("n_init: 20", "n_init: 5"))
    code, err = _cli("run", str(wine_job), "--resume")
    assert code == 2 and "written by a different job spec or seed" in err
