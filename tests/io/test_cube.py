"""xarray cubes in: lazy images with CRS and band names, the zarr-raster reader, cluster_image."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
import rioxarray
import xarray as xr
import yaml

from dkernel.errors import InvalidInputError
from dkernel.io.cube import image_from_xarray
from dkernel.io.raster import load_geotiff, open_geotiff, package_data_path

DEMO = package_data_path("RGB.byte.tif")


@pytest.fixture(scope="module")
def demo_cube():
    return rioxarray.open_rasterio(DEMO, chunks={"band": -1, "y": 128, "x": -1})


def _boom(block):
    raise AssertionError("the cube was computed before fit")


def test_image_from_xarray_keeps_crs_bands_and_mask(demo_cube):
    cube = demo_cube.assign_coords(band=["red", "green", "blue"])
    image = image_from_xarray(cube.transpose("y", "x", "band"))
    reference = open_geotiff(DEMO)
    assert image.dims == ("band", "y", "x")
    assert image["band"].values.tolist() == ["red", "green", "blue"]
    assert image.rio.crs == reference.rio.crs
    assert image.rio.transform() == reference.rio.transform()
    assert isinstance(image["valid"].data, da.Array)  # lazy until the features are built
    np.testing.assert_array_equal(image["valid"].values, reference["valid"].values)
    np.testing.assert_array_equal(image.values, reference.values)


def test_image_from_xarray_does_not_compute(demo_cube):
    poisoned = demo_cube.copy(data=demo_cube.data.map_blocks(_boom, dtype=demo_cube.dtype))
    image = image_from_xarray(poisoned)  # builds the graph only
    assert image.shape == (3, 718, 791)
    import dkernel

    with pytest.raises(AssertionError, match="computed before fit"):
        dkernel.cluster_image(poisoned)  # fit is what reads the pixels


def test_one_variable_per_band_dataset(demo_cube):
    ds = xr.Dataset({f"b{i}": demo_cube.isel(band=i, drop=True) for i in range(3)})
    ds = ds.rio.write_crs(demo_cube.rio.crs)
    image = image_from_xarray(ds)
    assert image["band"].values.tolist() == ["b0", "b1", "b2"]
    np.testing.assert_array_equal(image.values, demo_cube.values)


def test_cube_without_crs_refused_like_a_geotiff(demo_cube, tmp_path):
    import rasterio

    bare = xr.DataArray(demo_cube.values, dims=("band", "y", "x"))
    with pytest.raises(InvalidInputError) as cube_error:
        image_from_xarray(bare)
    profile = {"driver": "GTiff", "width": 20, "height": 10, "count": 1, "dtype": "uint8"}
    with rasterio.open(tmp_path / "nocrs.tif", "w", **profile) as dst:
        dst.write(np.ones((1, 10, 20), np.uint8))
    with pytest.raises(InvalidInputError) as tif_error:
        load_geotiff(str(tmp_path / "nocrs.tif"))
    tail = "has no CRS (it is not georeferenced)"
    assert tail in str(cube_error.value) and tail in str(tif_error.value)
    assert str(cube_error.value).split(tail)[1] == str(tif_error.value).split(tail)[1]


def test_bad_cubes(demo_cube):
    with pytest.raises(InvalidInputError, match="spatial pair"):
        image_from_xarray(xr.DataArray(np.zeros((2, 3, 4)), dims=("a", "b", "c")))
    with pytest.raises(InvalidInputError, match="only one band"):
        image_from_xarray(demo_cube.expand_dims(time=2))
    with pytest.raises(InvalidInputError, match="several variables"):
        image_from_xarray(xr.Dataset({"a": demo_cube, "b": demo_cube}))
    with pytest.raises(InvalidInputError, match="DataArray or Dataset"):
        image_from_xarray(np.zeros((3, 4, 5)))


def test_cluster_image_returns_georeferenced_labels(demo_cube):
    import dkernel

    crop = demo_cube.isel(y=slice(0, 140), x=slice(0, 160))
    labels = dkernel.cluster_image(crop, dkernel.MSSC(n_clusters=3))
    assert labels.dims == ("y", "x") and labels.shape == (140, 160)
    assert labels.rio.crs == demo_cube.rio.crs
    assert labels.rio.transform() == demo_cube.rio.transform()  # the crop starts at (0, 0)
    assert labels.rio.nodata == -1
    valid = (crop.values != 0).any(axis=0)
    assert (labels.values[~valid] == -1).all()
    assert set(np.unique(labels.values[valid])) == {0, 1, 2}


def _job(tmp_path, name, data):
    spec = {
        "name": name,
        "seed": 0,
        "data": data,
        "method": "mssc",
        "params": {"write_png": False},
        "output": str(tmp_path / f"{name}.zarr"),
    }
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def test_zarr_cube_job_equals_geotiff_job(tmp_path, client):
    """A rioxarray cube of the demo scene in Zarr gives the GeoTIFF run's labels and a label
    GeoTIFF with the same CRS and transform."""
    from dkernel.jobs.runner import run_job
    from dkernel.storage import open_results

    cube = rioxarray.open_rasterio(DEMO).to_dataset(name="reflectance")
    cube.to_zarr(tmp_path / "cube.zarr", mode="w", zarr_format=3, consolidated=True)
    runs = {}
    for name, data in (
        ("tif", {"reader": "geotiff", "path": str(DEMO)}),
        ("zarr", {"reader": "zarr-raster", "path": str(tmp_path / "cube.zarr")}),
    ):
        out = run_job(_job(tmp_path, name, data), client=client, progress=False, quiet=True)
        runs[name] = open_results(out)
    np.testing.assert_array_equal(
        runs["zarr"]["mssc"]["labels"].values, runs["tif"]["mssc"]["labels"].values
    )
    tifs = {k: rioxarray.open_rasterio(tmp_path / f"{k}.labels.tif") for k in runs}
    assert tifs["zarr"].rio.crs == tifs["tif"].rio.crs == cube.rio.crs
    assert tifs["zarr"].rio.transform() == tifs["tif"].rio.transform()
    np.testing.assert_array_equal(tifs["zarr"].values, tifs["tif"].values)


@pytest.mark.parametrize("consolidated", [True, False])
def test_zarr_cube_opens_without_warnings_either_way(tmp_path, demo_cube, consolidated):
    """A cube written without consolidated metadata opens quietly: xarray's own fallback warned
    the user to pass ``consolidated=False``, which dkernel's readers do not take."""
    import warnings

    from dkernel.io.cube import open_zarr_cube

    path = tmp_path / "cube.zarr"
    cube = demo_cube.to_dataset(name="reflectance")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zarr's note on writing consolidated metadata in v3
        cube.to_zarr(path, mode="w", zarr_format=3, consolidated=consolidated)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        opened = open_zarr_cube(str(path))
    assert opened.dims == ("band", "y", "x")
    np.testing.assert_array_equal(opened.values, demo_cube.values)
