"""The manifest of a complete results store: a chunk object lost after the job finished is
told from a fill value (issue 54)."""

from __future__ import annotations

import io
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import numpy as np
import pytest
import yaml
import zarr

from dkernel.cli import main
from dkernel.errors import StoreError
from dkernel.storage import open_results
from dkernel.storage.manifest import MANIFEST_ATTR, check_manifest, manifest_of


@pytest.fixture()
def complete_store(tmp_path, monkeypatch) -> Path:
    """A complete store of a small rbf-spectral job on a CSV table."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DKERNEL_OUTPUT_ROOT", raising=False)
    rng = np.random.default_rng(0)
    np.savetxt(tmp_path / "data.csv", rng.normal(size=(30, 3)), delimiter=",", fmt="%.4f")
    body = {"name": "manifest", "seed": 0, "method": "rbf-spectral"}
    body |= {"data": {"reader": "csv", "path": "data.csv"}, "params": {"n_clusters": 2}}
    body |= {"output": "out.zarr"}
    (tmp_path / "job.yaml").write_text(yaml.safe_dump(body, sort_keys=False))
    err = io.StringIO()
    with redirect_stderr(err), redirect_stdout(io.StringIO()):
        assert main(["run", "job.yaml", "--no-progress"]) == 0, err.getvalue()
    return tmp_path / "out.zarr"


def _chunks(store: Path, array: str) -> list[Path]:
    return sorted(p for p in (store / array / "c").rglob("*") if p.is_file())


def test_a_complete_store_records_the_chunk_objects_of_every_array(complete_store):
    recorded = zarr.open_group(str(complete_store), mode="r").attrs[MANIFEST_ATTR]
    kernel = _chunks(complete_store, "kernel/kernel")
    assert recorded["kernel/kernel"] == {
        "chunks": len(kernel),
        "bytes": sum(p.stat().st_size for p in kernel),
    }
    assert recorded["labels/labels"]["chunks"] >= 1
    assert recorded == manifest_of(complete_store)
    open_results(complete_store)  # intact: opens


def test_a_deleted_kernel_chunk_is_refused_naming_the_array(complete_store):
    _chunks(complete_store, "kernel/kernel")[0].unlink()
    with pytest.raises(StoreError, match=r"the array 'kernel/kernel' .* holds 0 of the 1 chunk"):
        open_results(complete_store)
    err = io.StringIO()
    with redirect_stderr(err), redirect_stdout(io.StringIO()):
        code = main(["show", str(complete_store)])
    text = err.getvalue()
    assert code == 2, text
    assert "'kernel/kernel'" in text and "would read as fill values" in text, text
    assert "--overwrite" in text and "Traceback" not in text


def test_a_chunk_cut_short_is_refused(complete_store):
    chunk = _chunks(complete_store, "labels/labels")[0]
    chunk.write_bytes(chunk.read_bytes()[:-1])
    with pytest.raises(StoreError, match="'labels/labels' .* size changed since it finished"):
        open_results(complete_store)


def test_an_array_whose_chunks_were_all_fill_values_reads_as_written(tmp_path):
    """Zarr writes no object for a chunk of fill values: none is recorded, none is missed."""
    store = tmp_path / "s.zarr"
    root = zarr.open_group(str(store), mode="w", zarr_format=3)
    empty = root.create_array("g/empty", shape=(4,), chunks=(2,), dtype="f8", fill_value=0.0)
    empty[:] = 0.0
    full = root.create_array("g/full", shape=(4,), chunks=(2,), dtype="f8", fill_value=0.0)
    full[:] = 1.0
    recorded = manifest_of(store)
    assert recorded["g/full"]["chunks"] == 2
    assert "g/empty" not in recorded
    check_manifest(store, recorded)
    next((store / "g" / "full" / "c").rglob("1")).unlink()
    with pytest.raises(StoreError, match="'g/full' .* holds 1 of the 2 chunk objects"):
        check_manifest(store, recorded)


def test_a_store_without_a_manifest_still_opens(complete_store):
    """Stores written before the manifest existed carry none: nothing to compare."""
    check_manifest(complete_store, None)
