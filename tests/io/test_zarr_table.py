"""Reader ``zarr``: a 2-D Zarr array of rows × features, lazily, chunked as stored."""

from __future__ import annotations

import shutil

import dask.array as da
import numpy as np
import pytest
import zarr

from dkernel.errors import InvalidInputError
from dkernel.io.readers.zarr_table import load_zarr_table


@pytest.fixture()
def table(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(250, 3)).astype(np.float32)
    y = np.repeat(["a", "b"], 125)
    path = tmp_path / "t.zarr"
    group = zarr.open_group(path, mode="w")
    group.create_array("X", shape=X.shape, chunks=(100, 3), dtype=X.dtype)[...] = X
    group.create_array("y", shape=(250,), chunks=(250,), dtype="int8")[...] = y == "b"
    group.create_array("cube", shape=(2, 3, 4), chunks=(2, 3, 4), dtype="f4")[...] = 0
    return path, X, y


def test_table_is_read_lazily_in_its_row_chunks(table) -> None:
    path, X, y = table
    data = load_zarr_table(str(path), array="X", label_array="y")
    assert isinstance(data.X, da.Array)
    assert data.X.chunks == ((100, 100, 50), (3,))
    np.testing.assert_array_equal(data.X.compute(), X)
    np.testing.assert_array_equal(data.y, (y == "b").astype(int))
    assert data.meta["shape"] == [250, 3] and data.meta["chunks"] == [100, 3]


def test_a_plain_array_store_needs_no_name(tmp_path) -> None:
    X = np.arange(12.0).reshape(6, 2)
    zarr.create_array(tmp_path / "a.zarr", shape=X.shape, chunks=(4, 1), dtype="f8")[...] = X
    data = load_zarr_table(str(tmp_path / "a.zarr"))
    assert data.X.chunks == ((4, 2), (2,))  # the feature chunks joined: whole rows per task
    np.testing.assert_array_equal(data.X.compute(), X)
    with pytest.raises(InvalidInputError, match=r"single Zarr array, not a group; remove data"):
        load_zarr_table(str(tmp_path / "a.zarr"), array="X")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({}, r"is a Zarr group; set data\.array to one of: X, cube, y\."),
        ({"array": "Z"}, r"it has no array 'Z'; set data\.array to one of: X, cube, y"),
        ({"array": "cube"}, r"3-D float32 array; reader 'zarr' reads a 2-D .*'zarr-raster'"),
        ({"array": "X", "label_array": "w"}, r"data\.label_array: .* has no array 'w'"),
    ],
)
def test_wrong_names_and_shapes_are_messages(table, options, message) -> None:
    with pytest.raises(InvalidInputError, match=message):
        load_zarr_table(str(table[0]), **options)


def test_labels_of_another_length_are_refused(table) -> None:
    path, _, _ = table
    zarr.open_group(path, mode="a").create_array("short", shape=(5,), dtype="i4")[...] = 1
    with pytest.raises(InvalidInputError, match=r"'short' has shape \(5,\); the table has 250"):
        load_zarr_table(str(path), array="X", label_array="short")


def test_a_deleted_chunk_is_refused_before_reading(table) -> None:
    path, _, _ = table
    shutil.rmtree(path / "X" / "c" / "1")
    with pytest.raises(InvalidInputError, match=r"reader 'zarr' failed on .*chunks missing"):
        load_zarr_table(str(path), array="X")


def test_a_spec_with_the_zarr_reader_validates(table, tmp_path) -> None:
    from dkernel.jobs.spec import validate_spec

    spec = validate_spec(
        {
            "name": "t",
            "data": {"reader": "zarr", "path": str(table[0]), "array": "X"},
            "method": "spectral-clustering",
            "params": {"n_clusters": 2},
            "output": str(tmp_path / "out.zarr"),
        }
    )
    assert spec.reader == "zarr" and spec.data["array"] == "X"


@pytest.mark.skipif(not hasattr(__import__("os"), "mkfifo"), reason="needs FIFOs")
def test_refusals_name_the_zarr_reader_before_and_at_the_time_of_reading(table) -> None:
    """The input-store checks shared with ``zarr-raster`` name reader ``zarr``: before the
    data are read (a FIFO in the store), and where a task opens a chunk (a chunk swapped
    for a FIFO after the checks, through the store the tasks carry, pickled)."""
    import os
    import pickle

    from dkernel.io.zarr_inputs import confined_store

    path, _, _ = table
    store = pickle.loads(pickle.dumps(confined_store(path, reader="zarr")))
    chunk = path / "X" / "c" / "1" / "0"
    chunk.unlink()
    os.mkfifo(chunk)
    with pytest.raises(InvalidInputError, match=r"^reader 'zarr' failed on .*t\.zarr: "):
        load_zarr_table(str(path), array="X")
    with pytest.raises(InvalidInputError, match=r"^reader 'zarr' failed on .*t\.zarr: .*FIFO"):
        zarr.open_group(store, mode="r")["X"][...]
