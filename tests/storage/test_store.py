import numpy as np
import pytest
import xarray as xr
import zarr

from dkernel.errors import StoreError, StoreNotFoundError, StoreStatusWarning
from dkernel.storage import ResultsStore, describe_store, open_results
from dkernel.testing import raise_if_dask_computes


def _store(tmp_path, **kw):
    return ResultsStore.create(tmp_path / "r.zarr", job={"name": "t", "method": "m"}, seed=3, **kw)


def test_round_trip_is_lazy_and_keeps_provenance(tmp_path):
    store = _store(tmp_path)
    Z = np.arange(12.0).reshape(6, 2)
    store.write("embedding", xr.Dataset({"embedding": (("sample", "component"), Z)}))
    store.record_timing("phase", 1.5)
    store.mark_complete()
    with raise_if_dask_computes():
        tree = open_results(store.path)
        var = tree["embedding"]["embedding"]
    assert tree.attrs["status"] == "complete"
    assert tree.attrs["seed"] == 3 and tree.attrs["job"]["name"] == "t"
    assert tree.attrs["timings"] == {"phase": 1.5}
    assert "numpy" in tree.attrs["versions"]
    np.testing.assert_array_equal(var.values, Z)
    info = describe_store(store.path)
    assert info["arrays"][0]["shape"] == [6, 2]


def test_running_and_failed_stores_warn_on_open(tmp_path):
    store = _store(tmp_path)
    with pytest.warns(StoreStatusWarning, match="'running'"):
        open_results(store.path)
    try:
        raise RuntimeError("boom")
    except RuntimeError as exc:
        store.mark_failed(exc)
    with pytest.warns(StoreStatusWarning, match="RuntimeError: boom"):
        tree = open_results(store.path)
    assert "boom" in tree.attrs["traceback"]


def test_complete_store_needs_overwrite(tmp_path):
    store = _store(tmp_path)
    store.mark_complete()
    with pytest.raises(StoreError, match="--overwrite"):
        _store(tmp_path)
    assert _store(tmp_path, overwrite=True).attrs["status"] == "running"


def test_foreign_and_missing_stores_are_refused(tmp_path):
    with pytest.raises(StoreNotFoundError):
        open_results(tmp_path / "nope.zarr")
    zarr.open_group(str(tmp_path / "foreign.zarr"), mode="w").attrs["x"] = 1
    with pytest.raises(StoreError, match="not a dkernel results store"):
        open_results(tmp_path / "foreign.zarr")
    (tmp_path / "dir").mkdir()
    (tmp_path / "dir" / "file.txt").write_text("precious")
    with pytest.raises(StoreError, match="refusing to replace"):
        ResultsStore.create(tmp_path / "dir", job={}, seed=0)
    assert (tmp_path / "dir" / "file.txt").exists()


def test_mark_complete_refuses_missing_groups(tmp_path):
    store = _store(tmp_path)
    store.write("labels", xr.Dataset({"labels": (("sample",), np.zeros(3))}))
    import shutil

    shutil.rmtree(store.path / "labels")
    with pytest.raises(StoreError, match="missing"):
        store.mark_complete()


def test_scratch_arrays_round_trip_and_are_removed_with_the_run(tmp_path):
    import dask
    import dask.array as da

    store = ResultsStore.create(tmp_path / "r.zarr", job={"name": "t"}, seed=0)
    values = da.from_array(np.arange(1000, dtype=np.int32), chunks=((300, 700),))
    assert dask.compute(*store.write_scratch("partitions", values)) == (300, 700)
    back = store.read_scratch("partitions")
    assert back.chunks == ((300, 700),) and back.dtype == np.int32
    np.testing.assert_array_equal(back.compute(), np.arange(1000))
    assert store.scratch_dir.parent == tmp_path and store.scratch_dir.name.startswith(".")
    store.mark_complete()
    assert not store.scratch_dir.exists()

    failed = ResultsStore.create(tmp_path / "f.zarr", job={"name": "t"}, seed=0)
    dask.compute(*failed.write_scratch("partitions", values))
    failed.mark_failed(RuntimeError("boom"))
    assert not failed.scratch_dir.exists()


def test_scratch_reads_after_another_arrays_blocks(tmp_path):
    import dask
    import dask.array as da

    store = ResultsStore.create(tmp_path / "r.zarr", job={"name": "t"}, seed=0)
    values = da.from_array(np.arange(1000, dtype=np.int32), chunks=((300, 700),))
    dask.compute(*store.write_scratch("partitions", values))
    after = da.zeros((2, 5), chunks=(1, 5))  # one block per chunk of the read
    back = store.read_scratch("partitions", after=after)
    assert back.chunks == ((300, 700),)
    np.testing.assert_array_equal(back.compute(), np.arange(1000))
    from dask.core import get_dependencies

    graph = dict(back.__dask_graph__())
    reads = [k for k in graph if str(k).startswith("_read_scratch_row")]
    assert len(reads) == 2 and all(get_dependencies(graph, k) for k in reads)  # no roots
    with pytest.raises(ValueError, match="pair one to one"):
        store.read_scratch("partitions", after=da.zeros(3, chunks=1))


def test_an_interrupted_group_of_variables_sharing_tasks_resumes_on_a_cluster(tmp_path, client):
    # a change map and its valid mask from shared tasks, as a change-detection job writes
    # them: resumed, only the missing chunks are written (optimised together, as a first
    # write's), and both variables hold every value
    import dask.array as da
    import xarray as xr

    from dkernel.runtime import compute_parts

    values = da.arange(40.0, chunks=10) * 2
    shared = values + 1
    ds = xr.Dataset({"change": (("sample",), shared * 3), "valid": (("sample",), shared > 20)})
    job = {"name": "r"}
    store = ResultsStore.create(tmp_path / "r.zarr", job=job, seed=0)
    parts, _ = store.write_parts("map", ds)
    compute_parts(parts[:3], client)  # killed after three of the eight chunk writes
    resumed = ResultsStore.resume(tmp_path / "r.zarr", job=job, seed=0)
    parts, finish = resumed.write_parts("map", ds)
    assert 0 < len(parts) < 8
    compute_parts(parts, client)
    finish()
    np.testing.assert_array_equal(resumed.read_array("map", "change").compute(), shared * 3)
    np.testing.assert_array_equal(resumed.read_array("map", "valid").compute(), shared > 20)
