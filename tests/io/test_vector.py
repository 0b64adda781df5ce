"""Segments as a vector layer (dkernel.io.vector): real files, checked against plain rasterio."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pyogrio
import pyogrio.raw
import pytest
import rasterio.features
import shapely
import xarray as xr
from scipy import ndimage
from sklearn.cluster import KMeans

from dkernel.errors import InvalidInputError
from dkernel.io import vector as V
from dkernel.io.raster import image_from_array, labels_to_raster, open_geotiff
from dkernel.storage.geo import label_map as label_dataarray


@pytest.fixture(scope="module")
def scene():
    """The demo scene and a k-means(4) label map of it (-1 on the nodata collar)."""
    image = open_geotiff("package:RGB.byte.tif")
    valid = image["valid"].values
    X = image.values.reshape(3, -1).T[valid.ravel()].astype(np.float64)
    km = KMeans(4, n_init=1, random_state=0).fit(X[::20])
    return image, labels_to_raster(km.predict(X), valid)


@pytest.fixture(scope="module")
def crop(scene):
    """A 200 x 200 window with part of the nodata collar (about 31 % of its pixels)."""
    image, labels = scene
    rows, cols = slice(100, 300), slice(50, 250)
    return image.isel(y=rows, x=cols), labels[rows, cols]


@pytest.fixture(scope="module")
def table(crop):
    image, labels = crop
    return V.segments_table(labels, image, chunk_rows=7)


def _pixel_area(image) -> float:
    t = image.rio.transform()
    return abs(t.a * t.e - t.b * t.d)


def test_gpkg_opens_with_crs_and_fields(crop, table, tmp_path):
    image, labels = crop
    path = V.write_segments(tmp_path / "out" / "segments.gpkg", labels, image, chunk_rows=16)
    info = pyogrio.read_info(path, layer="segments")
    assert info["crs"] == "EPSG:32618"
    assert info["geometry_type"] == "Polygon"
    assert info["features"] == len(table[0])
    expected = ["segment", "class", "pixels", "area", "mean_band_1", "mean_band_2", "mean_band_3"]
    assert list(info["fields"]) == expected
    meta, _, wkb, fields = pyogrio.raw.read(path, layer="segments")
    geoms = shapely.from_wkb(wkb)
    got = dict(zip(meta["fields"], fields, strict=True))
    for name in expected:
        np.testing.assert_array_equal(got[name], table[1][name])
    assert shapely.equals(geoms, table[0]).all()


def test_flatgeobuf_and_rewrite(crop, tmp_path):
    image, labels = crop
    path = tmp_path / "segments.fgb"
    V.write_segments(path, labels, image)
    V.write_segments(path, labels, image)  # an existing file is replaced, not appended to
    info = pyogrio.read_info(path)
    assert info["driver"] == "FlatGeobuf" and info["crs"] == "EPSG:32618"
    assert info["features"] == len(V.segments_table(labels, image)[0])


def test_areas_match_pixels(crop, table):
    image, labels = crop
    geoms, cols = table
    pa = _pixel_area(image)
    assert cols["pixels"].sum() == (labels != -1).sum()
    np.testing.assert_allclose(cols["area"], cols["pixels"] * pa)
    # each polygon covers exactly its pixels (float round-off of the affine map only)
    np.testing.assert_allclose(shapely.area(geoms), cols["area"], rtol=0, atol=1e-3 * pa)
    assert abs(shapely.area(geoms).sum() - (labels != -1).sum() * pa) < len(geoms) * pa
    assert (shapely.get_type_id(geoms) == shapely.GeometryType.POLYGON).all()
    assert shapely.is_valid(geoms).all()
    np.testing.assert_array_equal(cols["segment"], np.arange(1, len(geoms) + 1))


def _pixel_of(points, image) -> tuple[np.ndarray, np.ndarray]:
    inverse = ~image.rio.transform()
    xy = shapely.get_coordinates(points)
    cols = inverse.a * xy[:, 0] + inverse.b * xy[:, 1] + inverse.c
    rows = inverse.d * xy[:, 0] + inverse.e * xy[:, 1] + inverse.f
    return np.floor(rows).astype(int), np.floor(cols).astype(int)


def test_label_inside_each_polygon_is_its_class(crop, table):
    image, labels = crop
    geoms, cols = table
    pick = np.random.default_rng(0).choice(len(geoms), size=min(50, len(geoms)), replace=False)
    rows, cs = _pixel_of(shapely.point_on_surface(geoms[pick]), image)
    np.testing.assert_array_equal(labels[rows, cs], cols["class"][pick])


@pytest.mark.parametrize("min_pixels", [0, 12])
def test_independent_of_chunk_rows(crop, min_pixels, monkeypatch):
    image, labels = crop
    monkeypatch.setattr(V, "_BATCH_VERTICES", 100)  # several GeoJSON batches per strip
    results = [
        V.segments_table(labels, image, chunk_rows=rows, min_segment_pixels=min_pixels)
        for rows in (7, 64, None)
    ]
    (g0, c0), *others = results
    for geoms, cols in others:
        assert len(geoms) == len(g0)
        np.testing.assert_array_equal(np.sort(cols["area"]), np.sort(c0["area"]))
        for name in c0:
            np.testing.assert_array_equal(cols[name], c0[name])
        assert shapely.equals(geoms, g0).all()
        # joined pieces keep no vertex in the middle of a straight edge
        np.testing.assert_array_equal(
            shapely.get_num_coordinates(geoms), shapely.get_num_coordinates(g0)
        )
    per_class = {c: c0["pixels"][c0["class"] == c].sum() for c in np.unique(c0["class"])}
    if min_pixels == 0:
        assert per_class == {c: (labels == c).sum() for c in np.unique(labels[labels != -1])}


def test_segmentize_roundoff_regression():
    """Pieces cut into unit edges once got off-grid vertices (7.000000000000002) and the
    coverage union returned zero-area slivers beside the segment (ragged blob boundaries)."""
    rng = np.random.default_rng(1)
    size = 300
    coarse = rng.normal(size=(size // 40 + 2, size // 40 + 2))
    field = ndimage.zoom(coarse, size / (size // 40 + 2), order=1)[:size, :size]
    field += rng.normal(scale=0.02, size=field.shape)
    labels = np.digitize(field, np.quantile(field, [0.2, 0.4, 0.6, 0.8])).astype(np.int32)
    image = image_from_array(np.zeros((size, size, 1))).rio.write_crs("EPSG:32618")
    g0, c0 = V.segments_table(labels, image)
    geoms, cols = V.segments_table(labels, image, chunk_rows=8)
    assert (shapely.get_type_id(geoms) == shapely.GeometryType.POLYGON).all()
    assert shapely.is_valid(geoms).all()
    np.testing.assert_array_equal(cols["pixels"], c0["pixels"])
    np.testing.assert_array_equal(shapely.area(geoms), cols["pixels"].astype(float))
    assert shapely.equals(geoms, g0).all()
    np.testing.assert_array_equal(
        shapely.get_num_coordinates(geoms), shapely.get_num_coordinates(g0)
    )


def test_same_segments_as_rasterio_on_the_whole_array(crop, table):
    image, labels = crop
    pa = _pixel_area(image)
    reference = Counter(
        (int(value), round(shapely.geometry.shape(geom).area / pa))
        for geom, value in rasterio.features.shapes(
            labels.astype(np.int32), mask=labels != -1, transform=image.rio.transform()
        )
    )
    _, cols = table
    assert Counter(zip(cols["class"].tolist(), cols["pixels"].tolist(), strict=True)) == reference


def test_min_segment_pixels_merges_small_segments(crop, table):
    image, labels = crop
    threshold = 12
    geoms, cols = V.segments_table(labels, image, chunk_rows=9, min_segment_pixels=threshold)
    assert len(geoms) < len(table[0])
    assert cols["pixels"].sum() == table[1]["pixels"].sum()
    np.testing.assert_allclose(shapely.area(geoms).sum(), shapely.area(table[0]).sum())
    assert shapely.is_valid(geoms).all()
    assert not shapely.overlaps(geoms[:, None], geoms[None, :]).any()
    # a segment still below the threshold shares no border with another one
    tree = shapely.STRtree(geoms)
    for i in np.flatnonzero(cols["pixels"] < threshold):
        for j in tree.query(geoms[i], predicate="intersects"):
            if j != i:
                border = shapely.intersection(geoms[i].boundary, geoms[j].boundary)
                assert shapely.length(border) == 0
    # means cover the merged pixels: the band totals are unchanged
    for name in ("mean_band_1", "mean_band_2", "mean_band_3"):
        np.testing.assert_allclose(
            (cols[name] * cols["pixels"]).sum(), (table[1][name] * table[1]["pixels"]).sum()
        )


def test_merged_segment_takes_the_receiving_class():
    labels = np.zeros((6, 6), dtype=np.int32)
    labels[2:4, 2:4] = 1  # 4 pixels of class 1 inside class 0
    labels[0, 5] = 2  # one pixel of class 2 in a corner
    image = image_from_array(np.arange(108, dtype=np.float64).reshape(6, 6, 3))
    image = image.rio.write_crs("EPSG:32618")
    geoms, cols = V.segments_table(labels, image, min_segment_pixels=5)
    assert len(geoms) == 1
    assert cols["class"].tolist() == [0] and cols["pixels"].tolist() == [36]
    np.testing.assert_allclose(cols["mean_band_1"], [np.arange(0, 108, 3).mean()])
    assert shapely.get_num_interior_rings(geoms[0]) == 0


def test_band_means_match_numpy(crop, table):
    image, labels = crop
    geoms, cols = table
    values = image.values.astype(np.float64)
    biggest = np.argsort(cols["pixels"])[::-1][:3]
    smallest = np.flatnonzero(cols["pixels"] == 1)[:2]
    for i in np.concatenate([biggest, smallest]):
        rows, cs = _pixel_of(shapely.point_on_surface(geoms[i : i + 1]), image)
        component, _ = ndimage.label(labels == cols["class"][i])
        mask = component == component[rows[0], cs[0]]
        assert mask.sum() == cols["pixels"][i]
        for b in range(3):
            np.testing.assert_allclose(cols[f"mean_band_{b + 1}"][i], values[b][mask].mean())


def test_lazy_labels_give_the_same_table(crop, table):
    image, labels = crop
    lazy = label_dataarray(labels, image).chunk({"y": 50})
    geoms, cols = V.segments_table(lazy, image, chunk_rows=7)
    for name in cols:
        np.testing.assert_array_equal(cols[name], table[1][name])
    assert shapely.equals(geoms, table[0]).all()


def test_labels_from_a_zarr_store(crop, table, tmp_path):
    image, labels = crop
    store = tmp_path / "labels.zarr"
    label_dataarray(labels, image).chunk({"y": 64}).to_dataset().to_zarr(store)
    lazy = xr.open_zarr(store, mask_and_scale=False)["labels"]  # the stored integers, -1 kept
    assert lazy.chunks is not None  # still lazy: read strip by strip
    path = V.write_segments(tmp_path / "from_zarr.gpkg", lazy, image, chunk_rows=7)
    _, _, _, fields = pyogrio.raw.read(path, layer="segments")
    np.testing.assert_array_equal(fields[2], table[1]["pixels"])


def test_all_nodata_gives_an_empty_layer(crop, tmp_path):
    image, labels = crop
    geoms, cols = V.segments_table(np.full_like(labels, -1), image)
    assert len(geoms) == 0 and all(len(v) == 0 for v in cols.values())


def _read_layer(path):
    """Metadata, geometries and columns, in the order of the ``segment`` field (FlatGeobuf's
    spatial index stores the features in an order of its own)."""
    meta, _, wkb, fields = pyogrio.raw.read(path)
    order = np.argsort(fields[0], kind="stable")
    columns = {name: field[order] for name, field in zip(meta["fields"], fields, strict=True)}
    return meta, shapely.from_wkb(wkb)[order], columns


@pytest.mark.parametrize("suffix", [".gpkg", ".fgb"])
def test_arrow_and_feature_writers_give_the_same_layer(table, suffix, tmp_path, monkeypatch):
    """GDAL >= 3.8 takes the features as one Arrow stream; older GDAL feature by feature."""
    if pyogrio.__gdal_version__ < (3, 8, 0):
        pytest.skip("this GDAL has no Arrow write API: only the feature writer runs")
    geoms, cols = table
    driver = V.FORMATS[suffix]
    crs = "EPSG:32618"
    V.write_layer(tmp_path / f"arrow{suffix}", geoms, cols, driver=driver, crs_wkt=crs)
    monkeypatch.setattr(pyogrio, "__gdal_version__", (3, 7, 0))
    V.write_layer(tmp_path / f"features{suffix}", geoms, cols, driver=driver, crs_wkt=crs)
    (meta_a, geoms_a, cols_a), (meta_f, geoms_f, cols_f) = (
        _read_layer(tmp_path / f"{name}{suffix}") for name in ("arrow", "features")
    )
    assert meta_a["crs"] == meta_f["crs"] == crs
    assert meta_a["geometry_type"] == meta_f["geometry_type"] == "Polygon"
    assert list(cols_a) == list(cols_f) == list(cols)
    for name in cols:
        np.testing.assert_array_equal(cols_a[name], cols[name])
        np.testing.assert_array_equal(cols_f[name], cols[name])
    assert shapely.equals_exact(geoms_a, geoms, tolerance=0).all()
    assert shapely.equals_exact(geoms_f, geoms, tolerance=0).all()


@pytest.mark.parametrize("gdal", [None, (3, 7, 0)])
def test_a_multipolygon_makes_every_feature_one(gdal, tmp_path, monkeypatch):
    if gdal is not None:
        monkeypatch.setattr(pyogrio, "__gdal_version__", gdal)
    square = shapely.box(0, 0, 1, 1)
    two = shapely.MultiPolygon([shapely.box(2, 0, 3, 1), shapely.box(4, 0, 5, 1)])
    geoms = np.array([square, two], dtype=object)
    path = tmp_path / "mixed.gpkg"
    V.write_layer(path, geoms, {"segment": np.arange(2)}, driver="GPKG", crs_wkt="EPSG:32618")
    meta, got, cols = _read_layer(path)
    assert meta["geometry_type"] == "MultiPolygon"
    assert (shapely.get_type_id(got) == shapely.GeometryType.MULTIPOLYGON).all()
    assert shapely.equals(got, geoms).all()
    np.testing.assert_array_equal(cols["segment"], [0, 1])
    assert shapely.get_type_id(geoms[0]) == shapely.GeometryType.POLYGON  # input untouched


def test_an_empty_label_map_writes_an_empty_layer(crop, tmp_path):
    image, labels = crop
    path = V.write_segments(tmp_path / "empty.gpkg", np.full_like(labels, -1), image)
    info = pyogrio.read_info(path, layer="segments")
    assert info["features"] == 0 and info["crs"] == "EPSG:32618"
    assert list(info["fields"])[:4] == ["segment", "class", "pixels", "area"]


def test_errors(crop, tmp_path):
    image, labels = crop
    plain = image_from_array(np.zeros((4, 5, 3)))
    with pytest.raises(InvalidInputError, match="georeferenced raster.*open_geotiff"):
        V.write_segments(tmp_path / "s.gpkg", np.zeros((4, 5), int), plain)
    with pytest.raises(InvalidInputError, match="georeferenced raster"):
        V.segments_table(np.zeros((4, 5), int), plain)
    with pytest.raises(InvalidInputError, match=r"'\.shp'.*supported: \.gpkg.*\.fgb"):
        V.write_segments(tmp_path / "s.shp", labels, image)
    with pytest.raises(InvalidInputError, match=r"shape \(200, 199\).*200 x 200"):
        V.write_segments(tmp_path / "s.gpkg", labels[:, :-1], image)
    with pytest.raises(InvalidInputError, match="must be integers"):
        V.segments_table(labels.astype(np.float32), image)
    with pytest.raises(InvalidInputError, match="min_segment_pixels"):
        V.segments_table(labels, image, min_segment_pixels=-1)
    assert not list(tmp_path.iterdir())
