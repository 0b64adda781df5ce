"""A training checkpoint kept in the results store (``dkernel.storage.checkpoint``), on a local
disk and on a real S3 server (moto)."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr
import zarr

from dkernel import open_results
from dkernel.errors import StoreStatusWarning
from dkernel.storage.checkpoint import CHECKPOINT_GROUP, StoreCheckpoint
from dkernel.storage.store import ResultsStore


def _store(location) -> ResultsStore:
    store = ResultsStore.create(location, job={"name": "t"}, seed=0)
    store.write("codes", xr.Dataset({"codes": (("sample", "code"), np.ones((3, 2)))}))
    return store


def _round_trip(store: ResultsStore) -> None:
    ckpt = store.checkpoint("dkae")
    assert not ckpt.exists()
    with pytest.raises(FileNotFoundError, match="'dkae'"):
        ckpt.read_bytes()
    first, second = bytes(range(256)) * 3, b"\x00second save\xff"
    assert ckpt.write_bytes(first) == len(first)
    assert ckpt.exists() and ckpt.read_bytes() == first
    ckpt.write_bytes(second)
    assert store.checkpoint("dkae").read_bytes() == second  # a new handle reads the last save
    root = zarr.open_group(str(store.path), mode="r", **store._zarr)
    assert list(root[CHECKPOINT_GROUP].array_keys()) == ["dkae_2"]  # the older save is gone
    other = store.checkpoint("ddc")
    other.write_bytes(b"other")
    ckpt.remove()
    assert not ckpt.exists() and other.read_bytes() == b"other"
    other.remove()
    root = zarr.open_group(str(store.path), mode="r", **store._zarr)
    assert CHECKPOINT_GROUP not in root
    store.mark_complete()
    assert set(open_results(store.path, storage_options=store.storage_options).children) == {
        "codes"
    }


def test_saves_replace_each_other_and_removal_leaves_the_store_as_it_was(tmp_path) -> None:
    _round_trip(_store(tmp_path / "s.zarr"))


def test_the_same_on_an_object_store(s3_bucket) -> None:
    import dask

    # here: the session's cluster, if a test started one, has workers without the S3 server's
    # environment
    with dask.config.set(scheduler="sync"):
        _round_trip(_store(f"s3://{s3_bucket}/s.zarr"))


def test_a_kill_between_the_write_and_the_pointer_keeps_the_previous_save(tmp_path) -> None:
    """An array written but not yet named ``latest`` (a kill between the two writes) is
    ignored by the reader and dropped by the next save."""
    store = _store(tmp_path / "s.zarr")
    ckpt = store.checkpoint("dkae")
    ckpt.write_bytes(b"epoch 1")
    group = zarr.open_group(str(store.path), mode="r+")[CHECKPOINT_GROUP]
    group.create_array("dkae_2", shape=(3,), dtype=np.uint8)[...] = [1, 2, 3]  # orphan
    assert ckpt.read_bytes() == b"epoch 1"
    ckpt.write_bytes(b"epoch 2")
    assert ckpt.read_bytes() == b"epoch 2"
    assert list(group.array_keys()) == ["dkae_2"]  # the orphan was replaced, epoch 1 dropped


def test_a_checkpoint_name_is_one_word(tmp_path) -> None:
    with pytest.raises(ValueError, match="single word"):
        StoreCheckpoint(tmp_path / "s.zarr", "../x")


def test_a_failed_store_with_a_checkpoint_still_opens(tmp_path) -> None:
    store = _store(tmp_path / "s.zarr")
    store.checkpoint("dkae").write_bytes(b"state")
    store.mark_failed(RuntimeError("killed"))
    with pytest.warns(StoreStatusWarning, match="status 'failed'"):
        tree = open_results(store.path)
    assert "codes" in tree.children
    assert store.checkpoint("dkae").read_bytes() == b"state"  # kept for --resume


def test_marking_the_store_complete_drops_its_checkpoints(tmp_path) -> None:
    """A finished store holds what one whose training never stopped holds."""
    store = _store(tmp_path / "s.zarr")
    store.checkpoint("dkae").write_bytes(b"state")
    store.checkpoint("ddc").write_bytes(b"other")
    store.mark_complete()
    assert CHECKPOINT_GROUP not in zarr.open_group(str(store.path), mode="r")
    assert not store.checkpoint("dkae").exists()
    assert "checkpoint" not in str(store.attrs.get("manifest", {}))
