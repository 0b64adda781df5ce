"""Inputs where they live: GeoTIFFs, Zarr cubes and tables read from a real S3-compatible
server (moto on 127.0.0.1) and from an HTTP server that honours Range requests; bad remote
inputs refused at validation with a message naming what is wrong."""

from __future__ import annotations

import http.server
import re
import socket
import threading
import time
from pathlib import Path

import dask.array as da
import numpy as np
import pytest
import xarray as xr

from dkernel.errors import InvalidInputError, SpecError
from dkernel.io import raster as R
from dkernel.io.remote import redact_storage_options, to_gdal
from dkernel.jobs.spec import validate_spec
from dkernel.storage.remote import is_url, to_fsspec


@pytest.fixture(autouse=True)
def _local_threads():
    """Compute in this process: a session-wide Dask cluster (fixture ``client``) may have
    started its workers before the S3 fixture set the credentials in the environment."""
    import dask

    with dask.config.set(scheduler="threads"):
        yield


def write_cog(path: Path, shape=(3, 300, 260), *, crs: str | None = "EPSG:32618") -> np.ndarray:
    """A tiled COG (128-pixel tiles) of uint16 values, written with rioxarray."""
    bands, rows, cols = shape
    rng = np.random.default_rng(0)
    data = rng.integers(1, 1000, size=shape, dtype=np.uint16)
    cube = xr.DataArray(
        data,
        dims=("band", "y", "x"),
        coords={
            "band": np.arange(1, bands + 1),
            "y": 4_000_000.0 - 10.0 * (np.arange(rows) + 0.5),
            "x": 500_000.0 + 10.0 * (np.arange(cols) + 0.5),
        },
    )
    if crs is not None:
        cube = cube.rio.write_crs(crs)
    cube.rio.to_raster(path, driver="COG", blocksize=128, compress="deflate")
    return data


def credentials(endpoint: str) -> dict:
    """The test server's storage options: they travel with the task graph to the workers
    (a session-wide cluster's workers may not have the AWS_* variables)."""
    return {"endpoint_url": endpoint, "key": "dkernel-test", "secret": "dkernel-test"}


def s3fs_of(endpoint: str):
    import s3fs

    return s3fs.S3FileSystem(client_kwargs={"endpoint_url": endpoint}, skip_instance_cache=True)


@pytest.fixture(scope="module")
def cog_file(tmp_path_factory) -> tuple[Path, np.ndarray]:
    path = tmp_path_factory.mktemp("cog") / "scene.tif"
    return path, write_cog(path)


@pytest.fixture()
def s3_cog(s3_server, s3_bucket, cog_file) -> str:
    path, _ = cog_file
    s3fs_of(s3_server).put(str(path), f"{s3_bucket}/scenes/scene.tif")
    return f"s3://{s3_bucket}/scenes/scene.tif"


def image_spec(data: dict) -> dict:
    return {"name": "remote", "data": data, "method": "mssc", "output": "out.zarr"}


def table_spec(data: dict) -> dict:
    return {
        "name": "remote",
        "data": data,
        "method": "spectral-clustering",
        "params": {"n_clusters": 2},
        "output": "out.zarr",
    }


# ------------------------------------------------------------------------------------------
# URLs
# ------------------------------------------------------------------------------------------


def test_urls_are_recognised_and_translated() -> None:
    assert is_url("s3://eco/rgb_cog.tif") and is_url("/vsis3/eco/rgb_cog.tif")
    assert is_url("https://example.org/a.tif") and is_url("ftp://x/y")
    assert not is_url("data/scene.tif") and not is_url("/vsizip/a.zip/x.tif")
    assert to_gdal("s3://eco/rgb_cog.tif") == "/vsis3/eco/rgb_cog.tif"
    assert to_gdal("https://h/a.tif") == "/vsicurl/https://h/a.tif"
    assert to_gdal("file:///tmp/a.tif") == "/tmp/a.tif"
    assert to_fsspec("/vsis3/eco/a.tif") == "s3://eco/a.tif"
    assert to_fsspec("/vsicurl/http://h/a.tif") == "http://h/a.tif"


def test_storage_options_are_redacted_from_the_stored_spec() -> None:
    raw = {"data": {"reader": "csv", "storage_options": {"key": "AKIA", "secret": "s3cr3t"}}}
    assert redact_storage_options(raw)["data"]["storage_options"] == {
        "key": "***",
        "secret": "***",
    }
    assert raw["data"]["storage_options"]["secret"] == "s3cr3t"


# ------------------------------------------------------------------------------------------
# GeoTIFF / COG on S3
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("form", ["s3", "vsis3"])
def test_cog_on_s3_reads_lazily_and_equals_the_local_file(s3_cog, cog_file, form) -> None:
    path, data = cog_file
    url = s3_cog if form == "s3" else "/vsis3/" + s3_cog.removeprefix("s3://")
    image = R.open_geotiff(url)
    assert isinstance(image.data, da.Array)
    assert image.rio.crs.to_epsg() == 32618
    local = R.open_geotiff(path)
    assert image.rio.transform() == local.rio.transform()
    np.testing.assert_array_equal(image.values, data)
    np.testing.assert_array_equal(image["valid"].values, local["valid"].values)


def test_geotiff_reader_validates_and_loads_an_s3_url(s3_server, s3_cog, cog_file) -> None:
    data = {"reader": "geotiff", "path": s3_cog, "storage_options": credentials(s3_server)}
    spec = validate_spec(image_spec(data))
    assert spec.data["path"] == s3_cog
    loaded = R.load_geotiff(**spec.data)
    local = R.load_geotiff(str(cog_file[0]))
    np.testing.assert_allclose(np.asarray(loaded.X), np.asarray(local.X))
    assert loaded.meta["source"] == s3_cog


def test_storage_options_from_the_spec_reach_s3_and_gdal(s3_server, s3_cog, monkeypatch) -> None:
    for var in ("AWS_ENDPOINT_URL", "AWS_S3_ENDPOINT"):
        monkeypatch.delenv(var)
    options = credentials(s3_server)
    spec = validate_spec(
        image_spec({"reader": "geotiff", "path": s3_cog, "storage_options": options})
    )
    assert spec.source["data"]["storage_options"] == dict.fromkeys(options, "***")
    loaded = R.load_geotiff(**spec.data)
    assert np.isfinite(np.asarray(loaded.X)).all()


def refused_spec(spec: dict, pattern: str, seconds: float = 30.0) -> str:
    start = time.monotonic()
    with pytest.raises(SpecError) as info:
        validate_spec(spec)
    assert time.monotonic() - start < seconds
    message = str(info.value)
    assert re.search(pattern, message), message
    return message


def test_missing_bucket_is_named(s3_server) -> None:
    refused_spec(
        image_spec({"reader": "geotiff", "path": "s3://no-such-bucket-dk/scene.tif"}),
        r"data\.path: cannot read s3://no-such-bucket-dk/scene\.tif: the bucket "
        r"'no-such-bucket-dk' does not exist",
    )


def test_missing_object_is_named(s3_bucket) -> None:
    refused_spec(
        image_spec({"reader": "geotiff", "path": f"s3://{s3_bucket}/nothing.tif"}),
        rf"cannot read s3://{s3_bucket}/nothing\.tif: no such object in the bucket",
    )


def test_unreachable_endpoint_fails_in_bounded_time(s3_server, s3_cog) -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    options = {"endpoint_url": f"http://127.0.0.1:{port}"}
    message = refused_spec(
        image_spec({"reader": "geotiff", "path": s3_cog, "storage_options": options}),
        rf"endpoint cannot be reached \(http://127\.0\.0\.1:{port}|endpoint did not answer",
    )
    assert "storage_options" not in message or "***" not in message


def test_unknown_scheme_is_refused() -> None:
    refused_spec(
        image_spec({"reader": "geotiff", "path": "ftp://host/scene.tif"}),
        r"unknown scheme 'ftp'",
    )


def test_non_geotiff_object_is_named_for_what_it_is(s3_server, s3_bucket) -> None:
    fs = s3fs_of(s3_server)
    fs.pipe(f"{s3_bucket}/scene.tif", b"\x89PNG\r\n\x1a\n" + bytes(200))
    url = f"s3://{s3_bucket}/scene.tif"
    validate_spec(image_spec({"reader": "geotiff", "path": url}))  # it exists
    with pytest.raises(InvalidInputError, match=r"scene\.tif is a PNG image"):
        R.open_geotiff(url)


def test_remote_input_is_refused_under_a_data_root(s3_cog, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("DKERNEL_DATA_ROOT", str(tmp_path))
    refused_spec(image_spec({"reader": "geotiff", "path": s3_cog}), r"is a remote input")


# ------------------------------------------------------------------------------------------
# GeoTIFF over HTTP with Range requests
# ------------------------------------------------------------------------------------------


class RangeHandler(http.server.SimpleHTTPRequestHandler):
    """Serves files of ``directory`` honouring ``Range: bytes=a-b`` (206 Partial Content),
    and counts the bytes sent."""

    sent: list[int]

    def log_message(self, *args) -> None:  # quiet
        pass

    def do_GET(self) -> None:
        path = Path(self.translate_path(self.path))
        if not path.is_file():
            self.send_error(404)
            return
        body = path.read_bytes()
        match = re.fullmatch(r"bytes=(\d+)-(\d*)", self.headers.get("Range", ""))
        if match:
            start = int(match[1])
            stop = min(len(body) - 1, int(match[2])) if match[2] else len(body) - 1
            if start >= len(body):
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{len(body)}")
                self.end_headers()
                return
            chunk = body[start : stop + 1]
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{stop}/{len(body)}")
        else:
            chunk = body
            self.send_response(200)
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Length", str(len(chunk)))
        self.end_headers()
        self.wfile.write(chunk)
        type(self).sent.append(len(chunk))

    def do_HEAD(self) -> None:
        path = Path(self.translate_path(self.path))
        if not path.is_file():
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Length", str(path.stat().st_size))
        self.end_headers()


@pytest.fixture()
def http_root(cog_file):
    folder = cog_file[0].parent
    handler = type("Handler", (RangeHandler,), {"sent": []})
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), lambda *a: handler(*a, directory=str(folder))
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", handler
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("form", ["http", "vsicurl"])
def test_cog_over_http_range_requests(http_root, cog_file, form) -> None:
    root, handler = http_root
    url = f"{root}/scene.tif" if form == "http" else f"/vsicurl/{root}/scene.tif"
    spec = validate_spec(image_spec({"reader": "geotiff", "path": url}))
    image = R.open_geotiff(spec.data["path"])
    np.testing.assert_array_equal(image.values, cog_file[1])
    # tile-aligned range requests: no whole-file download, one pass reads the file about once
    size = cog_file[0].stat().st_size
    assert max(handler.sent) < size
    assert sum(handler.sent) <= 1.2 * size


def test_missing_file_over_http_is_named(http_root) -> None:
    root, _ = http_root
    refused_spec(
        image_spec({"reader": "geotiff", "path": f"{root}/missing.tif"}),
        r"cannot read \S+/missing\.tif: no such file",
    )


# ------------------------------------------------------------------------------------------
# GeoTIFF reader on a Zarr store; GeoTIFFs without CRS; regions of interest
# ------------------------------------------------------------------------------------------


def test_geotiff_reader_on_a_zarr_store_suggests_zarr_raster(tmp_path) -> None:
    cube = xr.DataArray(np.ones((2, 4, 5), np.float32), dims=("band", "y", "x"), name="image")
    cube.to_dataset().to_zarr(tmp_path / "cube.zarr")
    with pytest.raises(InvalidInputError, match=r"cube\.zarr is a Zarr store.*zarr-raster"):
        R.load_geotiff(str(tmp_path / "cube.zarr"))


def test_geotiff_without_crs_is_refused_unless_crs_none(tmp_path) -> None:
    path = tmp_path / "plain.tif"
    write_cog(path, crs=None)
    with pytest.raises(InvalidInputError, match=r"has no CRS.*data\.crs: none"):
        R.load_geotiff(str(path))
    with pytest.warns(UserWarning, match="pixel coordinates"):
        loaded = R.load_geotiff(str(path), crs="none")
    assert loaded.raster.rio.crs is None
    assert loaded.n_samples == 300 * 260
    assigned = R.load_geotiff(str(path), crs="EPSG:32618")
    assert assigned.raster.rio.crs.to_epsg() == 32618


def test_roi_window_and_bounds_select_the_same_pixels(cog_file) -> None:
    path, data = cog_file
    image = R.open_geotiff(path)
    window = R.apply_roi(image, {"window": [10, 20, 50, 40]})
    np.testing.assert_array_equal(window.values, data[:, 20:60, 10:60])
    x, y = image["x"].values, image["y"].values
    bounds = [x[10], y[59], x[59], y[20]]
    by_bounds = R.apply_roi(image, {"bounds": bounds})
    np.testing.assert_array_equal(by_bounds.values, window.values)
    assert by_bounds.rio.transform() == window.rio.transform()
    t = image.rio.transform()
    assert window.rio.transform().c == t.c + 10 * t.a
    assert window.rio.transform().f == t.f + 20 * t.e
    assert isinstance(window.data, da.Array)
    with pytest.raises(InvalidInputError, match="hold no pixel"):
        R.apply_roi(image, {"bounds": [0, 0, 1, 1]})
    with pytest.raises(InvalidInputError, match="give one of"):
        R.apply_roi(image, {"box": [0, 0, 1, 1]})


def test_roi_through_the_reader(cog_file) -> None:
    loaded = R.load_geotiff(str(cog_file[0]), roi={"window": [0, 0, 30, 20]})
    assert loaded.n_samples == 600
    assert loaded.raster.sizes["y"] == 20 and loaded.raster.sizes["x"] == 30


# ------------------------------------------------------------------------------------------
# Zarr cubes and tables on S3
# ------------------------------------------------------------------------------------------


def zarr_cube(path: Path) -> xr.DataArray:
    rng = np.random.default_rng(1)
    cube = xr.DataArray(
        rng.random((3, 40, 50)).astype(np.float32),
        dims=("band", "y", "x"),
        coords={
            "band": ["red", "green", "blue"],
            "y": 4_000_000.0 - 30.0 * np.arange(40),
            "x": 500_000.0 + 30.0 * np.arange(50),
        },
        name="image",
    ).rio.write_crs("EPSG:32618")
    cube.to_dataset().chunk({"y": 20}).to_zarr(path)
    return cube


def test_zarr_cube_on_s3_through_zarr_raster(s3_server, s3_bucket, tmp_path) -> None:
    cube = zarr_cube(tmp_path / "cube.zarr")
    s3fs_of(s3_server).put(str(tmp_path / "cube.zarr"), f"{s3_bucket}/cube.zarr", recursive=True)
    url = f"s3://{s3_bucket}/cube.zarr"
    data = {"reader": "zarr-raster", "path": url, "storage_options": credentials(s3_server)}
    spec = validate_spec(image_spec(data))
    remote = R.load_zarr_raster(**spec.data)
    local = R.load_zarr_raster(str(tmp_path / "cube.zarr"))
    assert isinstance(remote.X, da.Array)
    assert remote.raster.rio.crs.to_epsg() == 32618
    assert remote.raster["band"].values.tolist() == ["red", "green", "blue"]
    np.testing.assert_allclose(np.asarray(remote.X), np.asarray(local.X))
    np.testing.assert_array_equal(remote.raster.values, cube.values)


def test_cluster_image_finds_the_crs_of_xr_open_zarr(tmp_path) -> None:
    """``xr.open_zarr`` without ``decode_coords='all'`` leaves ``spatial_ref`` a data variable."""
    import dkernel
    from dkernel.io.cube import image_from_xarray

    zarr_cube(tmp_path / "cube.zarr")
    opened = xr.open_zarr(tmp_path / "cube.zarr")
    assert "spatial_ref" in opened.data_vars  # the case of the issue
    image = image_from_xarray(opened)
    assert image.rio.crs.to_epsg() == 32618
    labels = dkernel.cluster_image(opened, dkernel.MSSC(n_clusters=2, random_state=0))
    assert labels.rio.crs.to_epsg() == 32618 and labels.shape == (40, 50)


def test_cf_grid_mapping_with_another_name_is_read(tmp_path) -> None:
    from dkernel.io.cube import image_from_xarray

    cube = zarr_cube(tmp_path / "cube.zarr").to_dataset()
    crs = cube["spatial_ref"].attrs
    ds = cube.drop_vars("spatial_ref")
    ds["crs"] = xr.DataArray(0, attrs=crs)
    ds["image"].encoding["grid_mapping"] = "crs"
    ds.to_zarr(tmp_path / "cf.zarr")
    opened = xr.open_zarr(tmp_path / "cf.zarr")
    assert image_from_xarray(opened).rio.crs.to_epsg() == 32618


@pytest.fixture()
def table(tmp_path) -> tuple[np.ndarray, Path, Path]:
    rng = np.random.default_rng(2)
    X = np.vstack([rng.normal(0, 0.3, (30, 3)), rng.normal(3, 0.3, (30, 3))]).round(5)
    csv = tmp_path / "table.csv"
    lines = ["a,b,c,site"] + [
        f'{r[0]},{r[1]},{r[2]},"field, {"north" if i < 30 else "south"}"' for i, r in enumerate(X)
    ]
    csv.write_text("\n".join(lines) + "\n")
    import pandas as pd

    frame = pd.DataFrame(X, columns=["a", "b", "c"])
    frame["site"] = ["north"] * 30 + ["south"] * 30
    parquet = tmp_path / "table.parquet"
    frame.to_parquet(parquet)
    return X, csv, parquet


def test_csv_and_parquet_on_s3(s3_server, s3_bucket, table) -> None:
    from dkernel.io.readers.parquet import load_parquet
    from dkernel.io.readers.tables import load_csv

    X, csv, parquet = table
    fs = s3fs_of(s3_server)
    fs.put(str(csv), f"{s3_bucket}/t/table.csv")
    fs.put(str(parquet), f"{s3_bucket}/t/table.parquet")
    data = {"reader": "csv", "path": f"s3://{s3_bucket}/t/table.csv", "header": True}
    spec = validate_spec(table_spec({**data, "label_column": -1}))
    loaded = load_csv(**spec.data)
    np.testing.assert_allclose(loaded.X, X)
    assert loaded.feature_names == ["a", "b", "c"] and loaded.y.tolist() == [0] * 30 + [1] * 30
    data = {"reader": "parquet", "path": f"s3://{s3_bucket}/t/table.parquet"}
    spec = validate_spec(table_spec({**data, "label_column": "site"}))
    loaded = load_parquet(**spec.data)
    np.testing.assert_allclose(loaded.X, X)
    assert loaded.y.tolist() == [0] * 30 + [1] * 30


def test_table_job_from_s3_runs_end_to_end(s3_server, s3_bucket, table, tmp_path) -> None:
    """``dkernel run`` of a Parquet table on S3 (a fresh process, the endpoint from the
    environment), results written locally."""
    import json
    import subprocess
    import sys

    import yaml

    _, _, parquet = table
    s3fs_of(s3_server).put(str(parquet), f"{s3_bucket}/t/table.parquet")
    data = {"reader": "parquet", "path": f"s3://{s3_bucket}/t/table.parquet"}
    options = {"endpoint_url": s3_server}
    spec = table_spec({**data, "label_column": "site", "storage_options": options})
    spec["runtime"] = {"n_workers": 1, "threads_per_worker": 1}
    (tmp_path / "job.yaml").write_text(yaml.safe_dump(spec))
    out = subprocess.run(
        [str(Path(sys.executable).parent / "dkernel"), "run", "job.yaml", "--no-progress"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    attrs = json.dumps(json.loads((tmp_path / "out.zarr" / "zarr.json").read_text()))
    assert f"s3://{s3_bucket}/t/table.parquet" in attrs
    assert s3_server not in attrs and s3_server not in out.stderr  # options never stored/logged
