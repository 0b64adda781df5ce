"""Raster io: GeoTIFF reading with nodata/CRS/transform, features, label GeoTIFF, PNG, readers."""

from __future__ import annotations

import numpy as np
import pytest
import rioxarray
import xarray as xr
from dask.core import flatten

from dkernel.errors import InvalidInputError
from dkernel.io import raster as R
from dkernel.io.cog import write_label_cog
from dkernel.io.registry import get_reader


@pytest.fixture(scope="module")
def demo_image():
    return R.open_geotiff("package:RGB.byte.tif")


def test_vendored_scene_matches_shared_copy(data_dir):
    import hashlib

    vendored = R.package_data_path("RGB.byte.tif").read_bytes()
    shared = (data_dir / "geotiff_rasterio_RGB_byte" / "RGB.byte.tif").read_bytes()
    assert hashlib.sha256(vendored).hexdigest() == hashlib.sha256(shared).hexdigest()
    assert (R.package_data_path("ATTRIBUTION.md")).read_text().count("CC0") >= 1


def test_open_geotiff_mask_crs_transform(demo_image):
    img = demo_image
    assert img.dims == ("band", "y", "x") and img.shape == (3, 718, 791)
    assert img.rio.crs.to_epsg() == 32618
    np.testing.assert_allclose(
        list(img.rio.transform())[:6],
        [300.037927, 0, 101985.0, 0, -300.041783, 2826915.0],
        rtol=1e-7,
    )
    valid = img["valid"].values
    raw = img.values
    np.testing.assert_array_equal(valid, (raw != 0).any(axis=0))
    assert valid.mean() == pytest.approx(0.6746, abs=5e-4)  # MANIFEST: 67.5 % valid


def test_features_minmax_and_coords(demo_image):
    X, names, stats = R.raster_features(demo_image, scale="minmax", coord_scale=0.25)
    assert names == ["band_1", "band_2", "band_3", "col_scaled", "row_scaled"]
    assert X.chunks[1] == (5,)
    Xn = X.compute()
    valid = demo_image["valid"].values
    assert Xn.shape == (int(valid.sum()), 5)
    np.testing.assert_allclose(Xn[:, :3].min(0), 0, atol=1e-6)
    np.testing.assert_allclose(Xn[:, :3].max(0), 1, atol=1e-6)
    r, c = np.nonzero(valid)
    raw = demo_image.values[:, r[:50], c[:50]].T.astype(np.float64)
    lo, width = np.array(stats["offset"]), np.array(stats["width"])
    np.testing.assert_allclose(Xn[:50, :3], (raw - lo) / width, rtol=1e-6)
    np.testing.assert_allclose(Xn[:50, 3], c[:50] * 0.25 / 790, rtol=1e-6)
    np.testing.assert_allclose(Xn[:50, 4], r[:50] * 0.25 / 790, rtol=1e-6)


def test_standardize_and_no_coords(demo_image):
    X, names, _ = R.raster_features(demo_image, scale="standardize", coord_scale=0.0)
    Xn = X.compute().astype(np.float64)
    assert len(names) == 3
    np.testing.assert_allclose(Xn.mean(0), 0, atol=1e-4)
    np.testing.assert_allclose(Xn.std(0), 1, atol=1e-4)


def test_label_geotiff_roundtrip_and_png(demo_image, tmp_path):
    valid = demo_image["valid"].values
    labels = np.arange(int(valid.sum())) % 4
    label_map = R.labels_to_raster(labels, valid)
    assert (label_map[~valid] == -1).all() and (label_map[valid] == labels).all()
    path = write_label_cog(tmp_path / "labels.tif", label_map, demo_image)
    back = rioxarray.open_rasterio(path)
    assert back.rio.crs == demo_image.rio.crs
    assert back.rio.transform() == demo_image.rio.transform()
    # a palette needs uint8/uint16: the file's nodata is 255 where the store has -1
    assert back.dtype == np.uint8 and back.rio.nodata == 255 == path.nodata
    np.testing.assert_array_equal(back.values[0], np.where(label_map < 0, 255, label_map))
    png = R.write_quicklook(tmp_path / "q.png", demo_image, label_map)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_quicklook_drawn_by_the_helper_process_is_the_same_png(demo_image, tmp_path):
    from dkernel._helper import HelperProcess
    from dkernel.io.quicklook import draw_quicklook

    valid = demo_image["valid"].values
    label_map = R.labels_to_raster(np.arange(int(valid.sum())) % 3, valid)
    look = R.quicklook_plan(demo_image, label_map, title="t")
    assert look.legend[-1].startswith("no data") and len(look.legend) == 4
    here = draw_quicklook(tmp_path / "here.png", look)
    helper = HelperProcess()
    try:
        there = helper.call(draw_quicklook, tmp_path / "there.png", look)
    finally:
        helper.close()
    assert there.read_bytes() == here.read_bytes()
    assert R.write_quicklook(
        tmp_path / "api.png", demo_image, label_map, title="t"
    ).read_bytes() == (here.read_bytes())


def test_npy_and_zarr_rasters(tmp_path, rng):
    import zarr

    cube = rng.uniform(1, 2, (20, 30, 4)).astype(np.float32)
    cube[:3, :5] = -9
    np.save(tmp_path / "c.npy", cube)
    np.save(tmp_path / "y.npy", (np.arange(600) % 3).reshape(20, 30))
    d = R.load_npy_raster(str(tmp_path / "c.npy"), nodata=-9, labels_path=str(tmp_path / "y.npy"))
    assert d.X.shape == (600 - 15, 6) and d.y.shape == (585,)
    assert not d.raster["valid"].values[:3, :5].any()
    z = zarr.open_group(str(tmp_path / "c.zarr"), mode="w")
    z.create_array("img", data=cube.transpose(2, 0, 1))
    with pytest.raises(InvalidInputError, match="variable"):
        R.load_zarr_raster(str(tmp_path / "c.zarr"))
    dz = R.load_zarr_raster(str(tmp_path / "c.zarr"), variable="img", nodata=-9)
    np.testing.assert_allclose(dz.X.compute(), d.X.compute())


def test_registered_readers(data_dir):
    for name in ("geotiff", "demo-landsat", "npy-raster", "zarr-raster", "samson", "jasper"):
        assert get_reader(name).raster
    d = get_reader("samson").load(path=str(data_dir))
    assert d.X.shape == (9025, 158) and d.y.shape == (9025,)
    assert d.raster.shape == (156, 95, 95)
    assert isinstance(d.raster, xr.DataArray)


def test_errors(tmp_path):
    with pytest.raises(InvalidInputError, match="does not exist"):
        R.open_geotiff(tmp_path / "missing.tif")
    with pytest.raises(InvalidInputError, match="ships no data file"):
        R.resolve_path("package:nope.tif")
    with pytest.raises(InvalidInputError, match="scale must be"):
        R.raster_features(R.image_from_array(np.ones((4, 4, 2))), scale="zscore")
    with pytest.raises(InvalidInputError, match="must match"):
        R.labels_to_raster(np.zeros(3), np.ones((2, 2), bool))


def _rgb_reference(image):
    """The quick-look stretch as first written: a float64 copy of the three bands."""
    n_bands = int(image.sizes["band"])
    pick = [0, 1, 2] if n_bands >= 3 else [0] * 3
    if n_bands > 3:
        pick = [int(n_bands * f) for f in (0.75, 0.5, 0.25)]
    arr = np.asarray(image.isel(band=pick).values, dtype=np.float64).transpose(1, 2, 0)
    valid = np.asarray(image["valid"].values)
    rgb = np.zeros_like(arr)
    for i in range(3):
        band = arr[..., i]
        lo, hi = np.percentile(band[valid], [2, 98]) if valid.any() else (0.0, 1.0)
        rgb[..., i] = np.clip((band - lo) / (hi - lo if hi > lo else 1.0), 0, 1)
    rgb[~valid] = 1.0
    return rgb


def test_quicklook_rgb_in_place_equals_the_float64_copy(demo_image, rng):
    """The band-by-band in-place stretch gives bit-identical RGB (so identical PNGs)."""
    np.testing.assert_array_equal(R._rgb(demo_image), _rgb_reference(demo_image))
    cube = rng.uniform(0, 3, (25, 40, 5)).astype(np.float32)
    cube[..., 2] = 1.5  # a constant band: hi == lo
    cube[:4, :6] = -9
    image = R.image_from_array(cube, nodata=-9)
    got = R._rgb(image)
    assert got.dtype == np.float64 and got.shape == (25, 40, 3)
    np.testing.assert_array_equal(got, _rgb_reference(image))
    none = R.image_from_array(np.full((5, 6, 1), -9, np.float32), nodata=-9)
    np.testing.assert_array_equal(R._rgb(none), _rgb_reference(none))


def test_image_strips_cut_large_chunks_into_keys_of_their_own(rng):
    cube = rng.integers(0, 1000, (1024, 700, 3)).astype(np.uint16)
    cube[:5, :5] = 0
    image = R.image_from_array(cube, nodata=0, chunk_rows=512)
    data, valid = R.image_strips(image)
    assert data.chunks[1] == valid.chunks[0] == (256, 256, 256, 256)
    # one task cuts each 512-row chunk; every strip is its own key (not a fused slice)
    graph = data.__dask_graph__()
    assert sum(str(key[0]).startswith("cut-rows-") for key in graph) == 2
    strips = list(flatten(data.__dask_keys__()))
    assert len(strips) == 4 and all(key in graph for key in strips)
    np.testing.assert_array_equal(data.compute(), cube.transpose(2, 0, 1))
    np.testing.assert_array_equal(valid.compute(), ~(cube == 0).all(axis=-1))
    X, _, _ = R.raster_features(image)
    Xs, _, _ = R.raster_features(R.image_from_array(cube, nodata=0, chunk_rows=256))
    np.testing.assert_array_equal(X.compute(), Xs.compute())
    small = R.image_from_array(cube, nodata=0, chunk_rows=128)
    assert R.image_strips(small)[0].name == small.data.name  # nothing to cut


def test_a_pass_pairing_bands_and_mask_reads_every_strip_once(demo_image):
    # optimised apart, the bands and the valid mask each fused their own copy of a strip's
    # read: every strip was decoded twice, on two workers, and one copy moved between them
    import dask
    from dask.base import collections_to_expr

    from dkernel.io.pixels import _strip_blocks, strip_summary

    data, valid = R.image_strips(demo_image)
    parts = [dask.delayed(strip_summary)(b, m) for b, m, _, _ in _strip_blocks(data, valid)]
    graph = collections_to_expr(parts).__dask_graph__()
    reads = [key for key in graph if "read-rows" in str(key)]
    assert len(parts) > 1 and len(reads) == len(parts)
    counts = [p["n"] for p in dask.compute(*parts)]
    assert sum(counts) == int(np.asarray(demo_image["valid"].values).sum())
