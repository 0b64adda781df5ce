"""Georeferenced, CF-described stores: every raster job's label map opens with its CRS."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import rasterio
import rioxarray  # noqa: F401
import xarray as xr
import yaml
from rasterio.windows import Window

from dkernel.io.raster import package_data_path
from dkernel.storage import open_results, recorded_path
from dkernel.storage.attributes import VARIABLES, lookup

ROWS, COLS = slice(0, 140), slice(0, 160)  # the scene's top-left corner: data and nodata collar


@pytest.fixture(scope="module")
def crop(tmp_path_factory) -> Path:
    """A 140 × 160 window of the demo scene with its CRS, transform and nodata."""
    path = tmp_path_factory.mktemp("geo") / "crop.tif"
    with rasterio.open(package_data_path("RGB.byte.tif")) as src:
        window = Window(COLS.start, ROWS.start, COLS.stop - COLS.start, ROWS.stop - ROWS.start)
        profile = src.profile | {
            "width": window.width,
            "height": window.height,
            "transform": src.window_transform(window),
            "tiled": False,
        }
        profile.pop("blockxsize", None), profile.pop("blockysize", None)
        data = src.read(window=window)
    with rasterio.open(path, "w", **profile) as dst:
        dst.write(data)
    return path


def _run(tmp_path, client, crop, method, params, name):
    from dkernel.jobs.runner import run_job

    spec = {
        "name": name,
        "seed": 0,
        "data": {"reader": "geotiff", "path": str(crop)},
        "method": method,
        "params": params,
        "output": str(tmp_path / f"{name}.zarr"),
    }
    (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump(spec))
    return run_job(tmp_path / f"{name}.yaml", client=client, progress=False, quiet=True)


@pytest.fixture(scope="module")
def stores(tmp_path_factory, client, crop):
    tmp = tmp_path_factory.mktemp("stores")
    return {
        "mssc": _run(tmp, client, crop, "mssc", {"n_clusters": 4}, "mssc"),
        "spectral": _run(
            tmp,
            client,
            crop,
            "spectral-clustering",
            {"n_clusters": 4, "n_landmarks": 100, "write_png": False, "segments": "gpkg"},
            "spectral",
        ),
        "kppr": _run(
            tmp,
            client,
            crop,
            "kppr",
            {"kernel": "rbf", "max_samples": 300, "seeds": {"global": None, "pixel": 2000}},
            "kppr",
        ),
    }


@pytest.mark.parametrize("job, group", [("mssc", "mssc"), ("spectral", "map")])
def test_label_map_has_source_crs_at_default_open(stores, crop, job, group):
    source = rioxarray.open_rasterio(crop)
    for tree in (
        open_results(stores[job]),
        xr.open_datatree(stores[job], engine="zarr"),  # xarray's defaults
    ):
        labels = tree[group]["labels"]
        assert labels.dims == ("y", "x") and labels.shape == (140, 160)
        assert labels.rio.crs == source.rio.crs
        assert labels.rio.transform() == source.rio.transform()
        assert tree[group]["valid"].rio.crs == source.rio.crs
    # open_results keeps integer labels, nodata -1 (the CF _FillValue); xarray masks it to NaN
    labels = open_results(stores[job])[group]["labels"]
    assert labels.dtype == np.int32 and labels.rio.nodata == -1
    valid = open_results(stores[job])[group]["valid"].values
    assert (labels.values[~valid] == -1).all() and (labels.values[valid] >= 0).all()
    assert 0 < valid.mean() < 1
    masked = xr.open_datatree(stores[job], engine="zarr")[group]["labels"]
    assert np.isnan(masked.values[~valid]).all()


def test_ranking_job_writes_score_maps(stores, crop):
    tree = open_results(stores["kppr"])
    scores = tree["map"]["score_map"]
    assert scores.dims == ("seed", "y", "x") and scores.shape == (2, 140, 160)
    assert scores["seed"].values.tolist() == ["global", "pixel"]
    assert scores.rio.crs == rioxarray.open_rasterio(crop).rio.crs
    valid = tree["map"]["valid"].values
    flat = tree["ranking"]["score"].values
    np.testing.assert_allclose(scores.values[:, valid], flat.T.astype(np.float32))
    assert np.isnan(scores.values[:, ~valid]).all()


def test_zarr_metadata_is_cf(stores):
    store = Path(stores["spectral"])
    labels = json.loads((store / "map" / "labels" / "zarr.json").read_text())
    assert labels["fill_value"] == -1 and labels["attributes"]["_FillValue"] == -1
    assert labels["attributes"]["grid_mapping"] == "spatial_ref"
    tree = open_results(store)
    assert tree.attrs["Conventions"].startswith("CF-")
    for axis in ("x", "y"):
        attrs = tree["map"][axis].attrs
        assert attrs["standard_name"] == f"projection_{axis}_coordinate"
        assert attrs["units"] == "metre" and attrs["axis"] == axis.upper()
    assert "crs_wkt" in tree["map"]["spatial_ref"].attrs


def test_every_variable_is_described(stores):
    for store in stores.values():
        tree = open_results(store)
        for node in tree.subtree:
            for name, var in node.data_vars.items():
                where = f"{node.path}/{name}"
                assert var.attrs.get("long_name"), where
                assert var.attrs.get("units"), where
                assert var.attrs.get("description"), where
                assert lookup(node.path.strip("/"), str(name)) is not None, where


def test_catalogue_entries_are_complete():
    for key, (long_name, units, description) in VARIABLES.items():
        assert long_name and units and description, key


def test_consolidated_metadata_keeps_completion_markers(stores):
    import zarr

    store = stores["spectral"]
    root = zarr.open_group(store, mode="r", use_consolidated=True)
    assert root.metadata.consolidated_metadata is not None
    for group in root.attrs["groups"]:
        assert root[group].attrs["dkernel_write"] == "complete"
    xr.open_datatree(store, engine="zarr", consolidated=True)  # no fallback needed
    assert open_results(store).attrs["status"] == "complete"


def test_map_files_recorded(stores):
    tree = open_results(stores["spectral"])
    attrs = tree["map"].attrs
    assert "label_geotiff" in attrs and "quicklook_png" not in attrs
    with rasterio.open(recorded_path(stores["spectral"], attrs["label_geotiff"])) as tif:
        assert tif.crs == tree["map"]["labels"].rio.crs


def test_segments_layer_of_a_job(stores, crop):
    import pyogrio

    tree = open_results(stores["spectral"])
    path = recorded_path(stores["spectral"], tree["map"].attrs["segments"])
    assert path.name == "spectral.segments.gpkg"
    info = pyogrio.read_info(path)
    assert info["crs"] == "EPSG:32618"
    _, _, geometry, fields = pyogrio.raw.read(path, columns=["class", "pixels"])
    valid = tree["map"]["valid"].values
    assert fields[1].sum() == valid.sum()
    labels = tree["map"]["labels"].values[valid]
    np.testing.assert_array_equal(
        np.bincount(fields[0], weights=fields[1]).astype(int), np.bincount(labels)
    )


def test_coordinates_have_no_fill_value(stores):
    tree = open_results(stores["spectral"])
    for axis in ("x", "y"):
        assert "_FillValue" not in tree["map"][axis].attrs
