"""Reader ``stac`` and ``cluster_image`` on STAC items (odc-stac): a local item JSON pointing
at COGs written with rioxarray, and the same on the S3 test server; the cube stays lazy."""

from __future__ import annotations

import datetime
import json
from pathlib import Path

import dask.array as da
import numpy as np
import pytest
import rioxarray  # noqa: F401  (registers the .rio accessor)
import xarray as xr

pystac = pytest.importorskip("pystac", reason="needs the cloud extra")
pytest.importorskip("odc.stac", reason="needs the cloud extra")

from dkernel.errors import InvalidInputError  # noqa: E402
from dkernel.io.stac import load_stac, open_stac  # noqa: E402
from dkernel.jobs.spec import validate_spec  # noqa: E402

SHAPE = (60, 80)
X0, Y0, PIXEL = 499_980.0, 3_999_960.0, 30.0  # multiples of 60: grids snap alike


@pytest.fixture(autouse=True)
def _local_threads():
    """Compute in this process: a session-wide Dask cluster (fixture ``client``) may have
    started its workers before the S3 fixture set the credentials in the environment."""
    import dask

    with dask.config.set(scheduler="threads"):
        yield


def write_band(path: Path, values: np.ndarray) -> None:
    rows, cols = values.shape
    band = xr.DataArray(
        values,
        dims=("y", "x"),
        coords={
            "y": Y0 - PIXEL * (np.arange(rows) + 0.5),
            "x": X0 + PIXEL * (np.arange(cols) + 0.5),
        },
    ).rio.write_crs("EPSG:32618")
    band.rio.to_raster(path, driver="COG", blocksize=32)


def bands() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(5)
    return {name: rng.integers(1, 500, SHAPE).astype(np.uint16) for name in ("red", "nir")}


def item_dict(hrefs: dict[str, str]) -> dict:
    from pystac.extensions.projection import ProjectionExtension
    from rasterio.warp import transform_bounds

    rows, cols = SHAPE
    native = (X0, Y0 - PIXEL * rows, X0 + PIXEL * cols, Y0)
    bbox = list(transform_bounds("EPSG:32618", "EPSG:4326", *native))
    xmin, ymin, xmax, ymax = bbox
    geometry = {
        "type": "Polygon",
        "coordinates": [[[xmin, ymin], [xmax, ymin], [xmax, ymax], [xmin, ymax], [xmin, ymin]]],
    }
    when = datetime.datetime(2024, 6, 1, 10, tzinfo=datetime.UTC)
    item = pystac.Item("scene", geometry, bbox, when, {})
    proj = ProjectionExtension.ext(item, add_if_missing=True)
    proj.epsg = 32618
    proj.shape = [rows, cols]
    proj.transform = [PIXEL, 0.0, X0, 0.0, -PIXEL, Y0]
    for name, href in hrefs.items():
        item.add_asset(name, pystac.Asset(href, media_type=pystac.MediaType.COG, roles=["data"]))
    return item.to_dict(include_self_link=False, transform_hrefs=False)


@pytest.fixture()
def local_item(tmp_path) -> tuple[Path, dict[str, np.ndarray]]:
    values = bands()
    for name, v in values.items():
        write_band(tmp_path / f"{name}.tif", v)
    path = tmp_path / "item.json"
    path.write_text(json.dumps(item_dict({n: f"{n}.tif" for n in values})))  # relative hrefs
    return path, values


def test_stac_item_opens_lazily(local_item) -> None:
    path, values = local_item
    cube = open_stac(str(path), assets=["red", "nir"])
    assert isinstance(cube.data, da.Array)
    assert cube.dims == ("band", "y", "x") and cube.shape == (2, *SHAPE)
    assert cube["band"].values.tolist() == ["red", "nir"]
    assert cube.rio.crs.to_epsg() == 32618
    # nothing was read: a file replaced now is what the computation sees
    changed = values["red"][::-1].copy()
    write_band(path.parent / "red.tif", changed)
    np.testing.assert_array_equal(cube.sel(band="red").values, changed)
    np.testing.assert_array_equal(cube.sel(band="nir").values, values["nir"])


def test_stac_reader_loads_without_computing(local_item) -> None:
    path, values = local_item
    spec = {
        "name": "stac",
        "data": {"reader": "stac", "path": str(path), "assets": ["red", "nir"]},
        "method": "mssc",
        "output": "out.zarr",
    }
    loaded = load_stac(**validate_spec(spec).data)
    assert isinstance(loaded.X, da.Array)
    assert loaded.n_samples == SHAPE[0] * SHAPE[1] and loaded.n_features == 4
    np.testing.assert_array_equal(loaded.raster.values, np.stack([values["red"], values["nir"]]))


def test_stac_grid_options(local_item) -> None:
    path, values = local_item
    coarse = open_stac(str(path), assets=["red"], resolution=60.0)
    assert coarse.shape == (1, SHAPE[0] // 2, SHAPE[1] // 2)
    box = [X0 + 301, Y0 - 599, X0 + 899, Y0 - 301]  # inside the pixel edges
    part = open_stac(str(path), assets=["red"], crs="EPSG:32618", resolution=30.0, bounds=box)
    assert part.shape == (1, 10, 20)
    np.testing.assert_array_equal(part.values[0], values["red"][10:20, 10:30])


def test_missing_asset_and_bad_document(local_item, tmp_path) -> None:
    path, _ = local_item
    with pytest.raises(InvalidInputError, match=r"has no asset 'swir'; it has nir, red"):
        open_stac(str(path), assets=["swir"])
    (tmp_path / "cat.json").write_text(json.dumps({"type": "Catalog", "id": "c"}))
    with pytest.raises(InvalidInputError, match=r"not a STAC item or item collection"):
        open_stac(str(tmp_path / "cat.json"))


def test_cluster_image_takes_a_stac_item(local_item) -> None:
    import dkernel

    path, _ = local_item
    item = pystac.Item.from_file(str(path))
    item.make_asset_hrefs_absolute()
    labels = dkernel.cluster_image(
        item, dkernel.MSSC(n_clusters=2, random_state=0), assets=["red", "nir"]
    )
    assert labels.shape == SHAPE and labels.rio.crs.to_epsg() == 32618
    again = dkernel.cluster_image(
        str(path), dkernel.MSSC(n_clusters=2, random_state=0), assets=["red", "nir"]
    )
    np.testing.assert_array_equal(labels.values, again.values)


def item_on_s3(endpoint: str, prefix: str, local_item) -> str:
    """The local item's bands and an item JSON pointing at them, uploaded under ``prefix``
    (``bucket/folder``) on the S3 server at ``endpoint``; the item's URL."""
    import s3fs

    path, values = local_item
    fs = s3fs.S3FileSystem(client_kwargs={"endpoint_url": endpoint}, skip_instance_cache=True)
    for name in values:
        fs.put(str(path.parent / f"{name}.tif"), f"{prefix}/{name}.tif")
    hrefs = {n: f"s3://{prefix}/{n}.tif" for n in values}
    fs.pipe(f"{prefix}/item.json", json.dumps(item_dict(hrefs)).encode())
    return f"s3://{prefix}/item.json"


def test_stac_item_on_s3(s3_server, s3_bucket, local_item) -> None:
    values = local_item[1]
    url = item_on_s3(s3_server, f"{s3_bucket}/stac", local_item)
    spec = {
        "name": "stac",
        "data": {"reader": "stac", "path": url, "assets": ["red", "nir"]},
        "method": "mssc",
        "output": "out.zarr",
    }
    # validated like a job; read here (a session-wide cluster's workers may lack the AWS_*
    # variables, and odc-stac reads assets with the environment's credentials)
    options = validate_spec(spec).data
    cube = open_stac(options["path"], assets=options["assets"])
    assert isinstance(cube.data, da.Array)
    np.testing.assert_array_equal(cube.values, np.stack([values["red"], values["nir"]]))


def test_stac_job_on_s3_with_the_specs_storage_options(s3_server, s3_bucket, local_item) -> None:
    """A job on a process worker reads STAC assets on S3 with the endpoint and credentials of
    ``data.storage_options`` alone (the environment has none). The keys reach rasterio
    through an AWS session (it refuses them as GDAL options: this failed with EnvError), and
    odc-stac carries them into its read tasks; they are neither logged nor stored."""
    import os
    import subprocess
    import sys

    import yaml
    import zarr

    path = local_item[0]
    url = item_on_s3(s3_server, f"{s3_bucket}/job", local_item)
    options = {"endpoint": s3_server, "key": "dkernel-test", "secret": "dkernel-test"}
    spec = {
        "name": "stac-s3",
        "seed": 0,
        "data": {
            "reader": "stac",
            "path": url,
            "assets": ["red", "nir"],
            "storage_options": options,
        },
        "method": "mssc",
        "params": {"n_clusters": 2, "n_seeds": 40, "density_max_samples": 400, "n_rff": 100},
        "output": "out.zarr",
    }
    job = path.parent / "job.yaml"
    job.write_text(yaml.safe_dump(spec))
    repo = Path(__file__).resolve().parents[2]
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env |= {"PYTHONPATH": str(repo)}
    proc = subprocess.run(
        [sys.executable, "-m", "dkernel.cli", "run", str(job), "--no-progress"]
        + ["--workers", "1", "--threads", "1"],
        cwd=path.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert "dkernel-test" not in proc.stderr
    root = zarr.open_group(str(path.parent / "out.zarr"), mode="r")
    assert root.attrs["status"] == "complete"
    assert "dkernel-test" not in json.dumps(dict(root.attrs))
