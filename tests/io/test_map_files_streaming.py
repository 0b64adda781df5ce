"""The map files made strip by strip from a lazy label map and image (as a job makes them from
the store and the source) are the files made from the whole arrays in memory: the label COG
byte for byte against a one-write reference, the class table against plain NumPy, the
quick-look's plan and PNG against the in-memory plan; and a job's map files hold the label map
and the image in memory only below ``HELD_MAP_BYTES``."""

from __future__ import annotations

import csv

import dask.array as da
import numpy as np
import pytest
import rasterio
import rasterio.shutil
import xarray as xr
from affine import Affine

from dkernel.io import cog, quicklook_plan
from dkernel.io import raster as R
from dkernel.io.palette import class_colors
from dkernel.io.quicklook import draw_quicklook

ROWS, COLS, BANDS = 1100, 700, 3
N_CLASSES = 5


@pytest.fixture(scope="module")
def scene(tmp_path_factory):
    """A 512-tiled uint16 GeoTIFF (nodata 0 in a corner) opened lazily, its label map in a
    Zarr store read back lazily (row chunks that do not follow the tiles), and both in memory."""
    folder = tmp_path_factory.mktemp("scene")
    rng = np.random.default_rng(0)
    r, c = np.mgrid[0:ROWS, 0:COLS]
    classes = ((r // 97 + c // 131) % N_CLASSES).astype(np.int32)
    data = (1000 * (classes + 1) + rng.integers(0, 300, (BANDS, ROWS, COLS))).astype(np.uint16)
    data[:, :40, :60] = 0  # not valid
    profile = dict(driver="GTiff", width=COLS, height=ROWS, count=BANDS, dtype="uint16")
    profile |= dict(crs="EPSG:32618", nodata=0, tiled=True, blockxsize=512, blockysize=512)
    profile["transform"] = Affine(10.0, 0.0, 500000.0, 0.0, -10.0, 4000000.0)
    with rasterio.open(folder / "scene.tif", "w", **profile) as dst:
        dst.write(data)
    image = R.open_geotiff(folder / "scene.tif")
    assert isinstance(image.data, da.Array) and len(image.data.chunks[1]) > 1
    labels = np.where(image["valid"].values, classes, -1).astype(np.int32)
    labels[700:720] = -1  # a stripe without labels inside the valid pixels
    ds = xr.Dataset({"labels": (("y", "x"), labels)})
    ds.to_zarr(folder / "s.zarr", encoding={"labels": {"chunks": (300, COLS)}}, consolidated=False)
    lazy = xr.open_zarr(folder / "s.zarr", consolidated=False)["labels"]
    assert isinstance(lazy.data, da.Array)
    return {"image": image, "held_image": image.compute(), "labels": lazy, "held": labels}


def _obvious_cog(path, labels, image):
    """The label COG written the obvious way: the whole map converted and written at once."""
    dtype, nodata = cog.label_file_dtype(N_CLASSES - 1)
    whole = np.where(labels < 0, nodata, labels).astype(dtype)
    rgba = np.round(np.asarray(class_colors(N_CLASSES)) * 255).astype(int)
    palette = {i: (*map(int, rgba[i, :3]), 255) for i in range(N_CLASSES)}
    palette[nodata] = (0, 0, 0, 0)
    profile = dict(driver="GTiff", width=COLS, height=ROWS, count=1, dtype=dtype.name)
    profile |= dict(nodata=nodata, tiled=True, blockxsize=512, blockysize=512)
    profile |= dict(compress="deflate", transform=image.rio.transform(), crs=image.rio.crs)
    tiled = path.with_name("whole.tiled.tif")
    with rasterio.open(tiled, "w", **profile) as dst:
        dst.write(whole, 1)
        dst.write_colormap(1, palette)
    options = dict(BLOCKSIZE=512, COMPRESS="DEFLATE", OVERVIEW_RESAMPLING="MODE")
    rasterio.shutil.copy(tiled, path, driver="COG", BIGTIFF="IF_SAFER", **options)
    return path


def test_streamed_label_cog_is_the_whole_array_cog_byte_for_byte(scene, tmp_path):
    streamed = cog.write_label_cog(
        tmp_path / "streamed.tif", scene["labels"], scene["image"], class_table=False
    )
    held = cog.write_label_cog(
        tmp_path / "held.tif", scene["held"], scene["held_image"], class_table=False
    )
    whole = _obvious_cog(tmp_path / "whole.tif", scene["held"], scene["held_image"])
    assert streamed.n_classes == N_CLASSES
    assert streamed.path.read_bytes() == whole.read_bytes() == held.path.read_bytes()
    assert cog.validate_cog(streamed) == []


def test_streamed_class_table_is_the_whole_array_table(scene, tmp_path):
    streamed = cog.write_class_table(tmp_path / "s.csv", scene["labels"], scene["image"])
    held = cog.write_class_table(tmp_path / "h.csv", scene["held"], scene["held_image"])
    assert streamed.read_text() == held.read_text()
    labels, pixels = scene["held"], scene["held_image"].values.astype(np.float64)
    rows = list(csv.DictReader(streamed.open()))
    assert len(rows) == N_CLASSES
    labelled = int((labels >= 0).sum())
    for i, row in enumerate(rows):
        mine = labels == i
        assert int(row["pixels"]) == int(mine.sum())
        assert float(row["share"]) == pytest.approx(mine.sum() / labelled, rel=1e-5)
        for b in range(BANDS):
            assert float(row[f"mean_band_{b + 1}"]) == pytest.approx(
                pixels[b][mine].mean(), rel=1e-5
            )


@pytest.mark.parametrize("side", [300, 2000])  # strided reads, and the whole scene
def test_streamed_quicklook_is_the_whole_array_quicklook(scene, tmp_path, monkeypatch, side):
    monkeypatch.setattr(quicklook_plan, "QUICKLOOK_PIXELS", side)  # read where it lives
    streamed = R.quicklook_plan(scene["image"], scene["labels"], title="t")
    held = R.quicklook_plan(scene["held_image"], scene["held"], title="t")
    step = -(-ROWS // side) if side < ROWS else 1
    np.testing.assert_array_equal(streamed.labels, scene["held"][::step, ::step])
    np.testing.assert_array_equal(streamed.labels, held.labels)
    assert len(streamed.views) == len(held.views) == 1
    np.testing.assert_array_equal(streamed.views[0][1], held.views[0][1])
    assert streamed.legend == held.legend and streamed.extent == held.extent
    counts = np.bincount(scene["held"][scene["held"] >= 0])
    assert [int(s.rsplit("(", 1)[1].split()[0].replace(",", "")) for s in held.legend[:-1]] == (
        counts.tolist()
    )
    if side < ROWS:  # the PNG is drawn from the plan alone: once is enough
        a = draw_quicklook(tmp_path / "streamed.png", streamed)
        b = draw_quicklook(tmp_path / "held.png", held)
        assert a.read_bytes() == b.read_bytes()


def test_job_map_files_hold_the_arrays_only_below_the_budget(scene, monkeypatch):
    from dkernel import _budget
    from dkernel.jobs.outputs import _held_if_small

    # a 1000² scene of 6 uint16 bands and its int32 labels (16 MiB) streams
    assert _budget.HELD_MAP_BYTES < 1000**2 * (6 * 2 + 4)
    labels, image = scene["labels"].data, scene["image"]
    total = labels.nbytes + image.nbytes
    monkeypatch.setattr(_budget, "HELD_MAP_BYTES", total)
    held_labels, held_image = _held_if_small(labels, image)
    assert isinstance(held_labels, np.ndarray) and held_image.chunks is None
    np.testing.assert_array_equal(held_labels, scene["held"])
    monkeypatch.setattr(_budget, "HELD_MAP_BYTES", total - 1)
    lazy_labels, lazy_image = _held_if_small(labels, image)
    assert lazy_labels is labels and lazy_image is image
