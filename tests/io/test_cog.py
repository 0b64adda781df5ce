"""Label COGs on real files: layout (validate_cog), palette, georeferencing, values, class table;
the TIFF IFD parser against GDAL; tile-aligned chunks of open_geotiff."""

from __future__ import annotations

import csv

import dask
import dask.array as da
import numpy as np
import pytest
import rasterio
import xarray as xr
from affine import Affine

from dkernel.errors import InvalidInputError
from dkernel.io import cog
from dkernel.io import raster as R


@pytest.fixture(scope="module")
def demo_image():
    return R.open_geotiff("package:RGB.byte.tif")


@pytest.fixture(scope="module")
def demo_labels(demo_image):
    """k-means(4) on a subsample of the valid pixels, predicted on all of them."""
    from sklearn.cluster import KMeans

    valid = demo_image["valid"].values
    pixels = demo_image.values[:, valid].T.astype(np.float64)
    km = KMeans(4, n_init=1, random_state=0).fit(pixels[::50])
    return R.labels_to_raster(km.predict(pixels), valid)


@pytest.fixture(scope="module")
def demo_cog(demo_image, demo_labels, tmp_path_factory):
    return cog.write_label_cog(
        tmp_path_factory.mktemp("cog") / "demo.labels.tif", demo_labels, demo_image
    )


def _tiled_tif(path, shape=(3, 1100, 700), *, tiled=True, overviews=False):
    bands, rows, cols = shape
    data = (np.arange(rows * cols, dtype=np.uint16).reshape(rows, cols) % 1000)[None] + np.arange(
        1, bands + 1, dtype=np.uint16
    )[:, None, None]
    profile = dict(
        driver="GTiff", width=cols, height=rows, count=bands, dtype="uint16", crs="EPSG:32618"
    )
    profile["transform"] = Affine(10.0, 0.0, 500000.0, 0.0, -10.0, 4000000.0)
    if tiled:
        profile |= dict(tiled=True, blockxsize=512, blockysize=512)
    with rasterio.open(path, "w", **profile) as dst:
        dst.write(data)
        if overviews:
            dst.build_overviews([2, 4], rasterio.enums.Resampling.nearest)
    return data


def test_label_cog_layout(demo_cog):
    assert cog.validate_cog(demo_cog) == []
    ifds = cog.tiff_ifds(demo_cog)
    assert all(d.is_tiled and (d.tile_width, d.tile_height) == (512, 512) for d in ifds)
    assert (ifds[0].width, ifds[0].height) == (791, 718) and not ifds[0].is_overview
    # overviews down to < 512 px, IFDs in decreasing size
    assert [d.is_overview for d in ifds[1:]] == [True] * (len(ifds) - 1) and len(ifds) >= 2
    sizes = [d.width for d in ifds]
    assert sizes == sorted(sizes, reverse=True) and max(ifds[-1].width, ifds[-1].height) < 512
    # all IFDs before the data; smallest overview's tiles first, full image's last
    first_data = min(o for d in ifds for o, _ in d.block_ranges())
    assert max(d.offset for d in ifds) < first_data
    assert max(o for o, _ in ifds[1].block_ranges()) < min(o for o, _ in ifds[0].block_ranges())
    with rasterio.open(demo_cog) as src:
        assert src.tags(ns="IMAGE_STRUCTURE")["LAYOUT"] == "COG"
        assert src.compression.name == "deflate" and src.overviews(1) == [2]


def test_ifd_parser_agrees_with_gdal(demo_cog, tmp_path):
    _tiled_tif(tmp_path / "big.tif", overviews=True)
    for path in (demo_cog, tmp_path / "big.tif"):
        ifds = cog.tiff_ifds(path)
        with rasterio.open(path) as src:
            assert int(src.get_tag_item("IFD_OFFSET", "TIFF", bidx=1)) == ifds[0].offset
            assert (
                int(src.get_tag_item("BLOCK_OFFSET_0_0", "TIFF", bidx=1))
                == (ifds[0].tile_offsets[0])
            )
            assert (
                int(src.get_tag_item("BLOCK_SIZE_0_0", "TIFF", bidx=1))
                == (ifds[0].tile_byte_counts[0])
            )
            for i, _ in enumerate(src.overviews(1)):
                offset = int(src.get_tag_item("IFD_OFFSET", "TIFF", bidx=1, ovr=i))
                assert offset == ifds[1 + i].offset
            n_tiles = -(-src.width // 512) * -(-src.height // 512)
            assert len(ifds[0].tile_offsets) == n_tiles  # pixel-interleaved: one tile all bands


def test_label_cog_palette_georeferencing_values(demo_cog, demo_image, demo_labels):
    with rasterio.open(demo_cog) as src:
        assert src.dtypes[0] == "uint8" and src.nodata == 255 == demo_cog.nodata
        assert src.crs == demo_image.rio.crs
        assert src.transform == demo_image.rio.transform()
        values = src.read(1)
        cmap = src.colormap(1)
    expected = np.round(R.class_colors(4)[:, :3] * 255).astype(int)
    for i in range(4):
        assert cmap[i][:3] == tuple(expected[i]) and cmap[i][3] == 255
    assert cmap[255][3] == 0  # nodata entry transparent
    valid = demo_labels >= 0
    assert (~valid).any() and set(np.unique(demo_labels[valid])) == {0, 1, 2, 3}
    np.testing.assert_array_equal(values[valid], demo_labels[valid])
    assert (values[~valid] == 255).all()


def test_class_table(demo_cog, demo_image, demo_labels):
    assert demo_cog.class_table == cog.class_table_path(demo_cog.path)
    assert demo_cog.class_table.name == "demo.labels.classes.csv"
    with open(demo_cog.class_table) as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == [
        "class",
        "pixels",
        "share",
        "color",
        "mean_band_1",
        "mean_band_2",
        "mean_band_3",
    ]
    valid = demo_labels >= 0
    lab = demo_labels[valid]
    counts = np.bincount(lab, minlength=4)
    raw = demo_image.values.astype(np.float64)
    colors = np.round(R.class_colors(4)[:, :3] * 255).astype(int)
    for i, row in enumerate(rows):
        assert int(row["class"]) == i and int(row["pixels"]) == counts[i]
        assert float(row["share"]) == pytest.approx(counts[i] / lab.size, rel=1e-5)
        assert row["color"] == "#{:02x}{:02x}{:02x}".format(*colors[i])
        for b in range(3):
            direct = raw[b][valid][lab == i].mean()
            assert float(row[f"mean_band_{b + 1}"]) == pytest.approx(direct, rel=1e-5)


def test_dask_and_zarr_label_maps_give_the_same_file(demo_cog, demo_image, demo_labels, tmp_path):
    lazy = da.from_array(demo_labels, chunks=(100, 300))
    out = cog.write_label_cog(tmp_path / "dask.tif", lazy, demo_image, class_table=False)
    assert out.class_table is None and not cog.class_table_path(out.path).exists()
    ds = xr.Dataset({"labels": (("y", "x"), demo_labels)})
    ds.to_zarr(tmp_path / "s.zarr", encoding={"labels": {"chunks": (64, 791)}}, consolidated=False)
    stored = xr.open_zarr(tmp_path / "s.zarr", consolidated=False)["labels"]
    assert isinstance(stored.data, da.Array)
    out_z = cog.write_label_cog(tmp_path / "zarr.tif", stored, demo_image)
    with rasterio.open(demo_cog) as a, rasterio.open(out) as b, rasterio.open(out_z) as c:
        np.testing.assert_array_equal(a.read(1), b.read(1))
        np.testing.assert_array_equal(a.read(1), c.read(1))
    assert demo_cog.class_table.read_text() == out_z.class_table.read_text()
    assert not list(tmp_path.glob(".*tmp.tif"))  # the temporary GTiff is gone


def test_many_labels_make_a_uint16_cog(tmp_path):
    image = R.image_from_array(np.ones((40, 30, 2), np.float32))
    labels = (np.arange(1200) % 300).reshape(40, 30)
    labels[0, :5] = -1
    out = cog.write_label_cog(tmp_path / "many.tif", labels, image)
    assert (out.dtype, out.nodata, out.n_classes) == ("uint16", 65535, 300)
    with rasterio.open(out) as src:
        values = src.read(1)
        assert src.colormap(1)[299][3] == 255
    assert (values[0, :5] == 65535).all()
    np.testing.assert_array_equal(values[labels >= 0], labels[labels >= 0])
    assert cog.validate_cog(out) == []
    with pytest.raises(InvalidInputError, match="holds label 299"):
        cog.write_label_cog(tmp_path / "bad.tif", labels, image, n_classes=10)
    with pytest.raises(InvalidInputError, match="must match"):
        cog.write_label_cog(tmp_path / "bad.tif", labels[:5], image)


def test_validate_cog_rejects_non_cogs(tmp_path):
    stripped = R.package_data_path("RGB.byte.tif")  # a plain stripped GeoTIFF
    errors = cog.validate_cog(stripped)
    assert any("not tiled" in e for e in errors)
    assert any("no internal overviews" in e for e in errors)
    _tiled_tif(tmp_path / "tiled.tif")
    assert [e for e in cog.validate_cog(tmp_path / "tiled.tif") if "overviews" in e]
    # overviews added after the data (gdaladdo-style): IFDs at the end, data order wrong
    _tiled_tif(tmp_path / "ovr.tif", overviews=True)
    errors = cog.validate_cog(tmp_path / "ovr.tif")
    assert any("after the first image data" in e for e in errors)
    assert any("should all come before" in e for e in errors)
    (tmp_path / "not.tif").write_bytes(b"GIF89a" + bytes(20))
    assert "not a TIFF" in cog.validate_cog(tmp_path / "not.tif")[0]


def test_open_geotiff_chunks_follow_the_file_blocks(demo_image, tmp_path):
    assert all(r % 3 == 0 for r in demo_image.chunks[1][:-1])  # the demo has 3-row strips
    data = _tiled_tif(tmp_path / "tiled.tif")
    # fewer reads than the scheduler's root-ish threshold (5 dependencies): one read per
    # work strip, so that no strip is handed to a worker away from its read
    image = R.open_geotiff(tmp_path / "tiled.tif")
    assert _reads(image) == 5
    with dask.config.set({"distributed.scheduler.rootish-taskgroup-dependencies": 2}):
        # reads are whole 512-row tile rows, each cut into work strips of ≤ 2^18 pixels
        assert _reads(R.open_geotiff(tmp_path / "tiled.tif")) == 3
        assert _reads(R.open_geotiff(tmp_path / "tiled.tif", chunk_rows=23)) == 3
        wide = R.open_geotiff(tmp_path / "tiled.tif", chunk_rows=600)
        assert _reads(wide) == 2 and wide.chunks[1] == R.work_rows((1024, 76), 700)
    assert image.chunks[1] == R.work_rows((512, 512, 76), 700) == (256, 256, 256, 256, 76)
    assert image.chunks[2] == (700,)
    np.testing.assert_array_equal(image.values, data)
    np.testing.assert_array_equal(
        R.open_geotiff(tmp_path / "tiled.tif", bands=[2]).values, data[1:2]
    )
    X, _, _ = R.raster_features(image)
    Xs, _, _ = R.raster_features(R._open_strips(tmp_path / "tiled.tif", 23))
    np.testing.assert_array_equal(X.compute(), Xs.compute())  # same features as 23-row strips


def _reads(image) -> int:
    """Read tasks in an image's graph."""
    return sum(1 for k in image.data.__dask_graph__() if str(k[0]).startswith("read-rows-"))


@pytest.mark.parametrize("shape", [(1000, 1000), (1100, 5000), (512, 10980), (3, 2049)])
def test_label_windows_cover_the_map_once_in_bounded_windows(shape):
    n_rows, n_cols = shape
    seen = np.zeros(shape, dtype=np.int8)
    for r0, r1, c0, c1 in cog.label_windows(n_rows, n_cols):
        assert r0 % cog.TILE == 0 and c0 % cog.TILE == 0  # whole tiles
        assert (r1 - r0) * (c1 - c0) <= cog.TILE * cog.WINDOW_COLS
        seen[r0:r1, c0:c1] += 1
    assert (seen == 1).all()
    assert len(cog.label_windows(n_rows, n_cols, max_cols=cog.TILE)) == -(-n_rows // 512) * -(
        -n_cols // 512
    )
    with pytest.raises(InvalidInputError, match="at least 512"):
        cog.label_windows(n_rows, n_cols, max_cols=100)


@pytest.mark.parametrize("n_classes", [7, 300])
def test_file_block_matches_the_full_width_conversion(n_classes):
    """The in-place conversion gives what ``np.where(...).astype(dtype)`` (the previous
    writer's int64-widening form) gave, for both file dtypes."""
    rng = np.random.default_rng(0)
    block = rng.integers(-1, n_classes, size=(512, 700)).astype(np.int32)
    dtype, file_nodata = cog.label_file_dtype(n_classes - 1)
    unlabelled = (block < 0) | (block == -1)
    expected = np.where(unlabelled, file_nodata, block).astype(dtype)
    out = cog.file_block(
        block, nodata=-1, file_nodata=file_nodata, dtype=dtype, n_classes=n_classes
    )
    assert out.dtype == dtype
    np.testing.assert_array_equal(out, expected)
    # a non-negative nodata marker is unlabelled too
    out = cog.file_block(block, nodata=3, file_nodata=file_nodata, dtype=dtype, n_classes=n_classes)
    assert (out[block == 3] == file_nodata).all()
    with pytest.raises(InvalidInputError, match="holds label"):
        cog.file_block(block, nodata=-1, file_nodata=file_nodata, dtype=dtype, n_classes=2)
    # unsigned label maps (no negative values), and windows without any label
    unsigned = np.abs(block).astype(np.uint16)
    out = cog.file_block(
        unsigned, nodata=-1, file_nodata=file_nodata, dtype=dtype, n_classes=n_classes
    )
    np.testing.assert_array_equal(out, unsigned.astype(dtype))
    empty = np.full((3, 4), -1, np.int32)
    out = cog.file_block(empty, nodata=-1, file_nodata=file_nodata, dtype=dtype, n_classes=0)
    assert (out == file_nodata).all()


def test_narrow_windows_write_the_same_cog_as_full_width_ones(monkeypatch, tmp_path):
    """Windows one tile wide and windows spanning the whole width give byte-identical COGs."""
    rng = np.random.default_rng(1)
    shape = (1100, 1700)
    labels = rng.integers(0, 5, size=shape).astype(np.int32)
    labels[:200, :300] = -1
    image = R.image_from_array(np.ones((*shape, 2), np.float32))
    lazy = da.from_array(labels, chunks=(300, 1700))
    paths = {}
    for name, cols in (("full", 10 * cog.TILE), ("narrow", cog.TILE)):
        monkeypatch.setattr(cog, "WINDOW_COLS", cols)
        paths[name] = cog.write_label_cog(tmp_path / f"{name}.tif", lazy, image).path
    assert paths["full"].read_bytes() == paths["narrow"].read_bytes()
    assert (
        cog.class_table_path(paths["full"]).read_text()
        == cog.class_table_path(paths["narrow"]).read_text()
    )


def test_reads_in_column_windows_give_the_same_image(tmp_path, monkeypatch):
    data = _tiled_tif(tmp_path / "tiled.tif")
    monkeypatch.setattr(R, "READ_WINDOW_COLUMNS", 512)  # two windows: 512 + 188 columns
    image = R.open_geotiff(tmp_path / "tiled.tif")
    np.testing.assert_array_equal(image.values, data)
    np.testing.assert_array_equal(image["valid"].values, np.ones(data.shape[1:], dtype=bool))
