"""Every read bounded and confined, inputs refused rather than altered, limits that mean
something (issue 34, items 4, 5 and 7), through the real ``dkernel`` entry point.

Each refusal exits 2 with a message naming what is wrong, no traceback, within
:data:`MAX_SECONDS` and :data:`MAX_MIB` of Python allocations, before any cluster starts and
without creating the output store.
"""

from __future__ import annotations

import io
import logging
import os
import re
import socket
import threading
import time
import tracemalloc
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import yaml

from dkernel.cli import main
from tests.limits import REFUSAL_S

#: Bounds of a refusal: Python allocations (MiB), and seconds as a hang guard (tests/limits.py).
MAX_MIB = 500
MAX_SECONDS = REFUSAL_S

MSSC = {"n_clusters": 3, "write_geotiff": False, "write_png": False}


@dataclass
class Outcome:
    code: int
    err: str
    seconds: float
    mib: float


@pytest.fixture()
def work(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for var in (
        "DKERNEL_OUTPUT_ROOT",
        "DKERNEL_DATA_ROOT",
        "DKERNEL_MAX_MEMORY",
        "DKERNEL_MAX_DISK",
    ):
        monkeypatch.delenv(var, raising=False)
    rng = np.random.default_rng(0)
    rows = rng.normal(size=(80, 3)).round(4)
    (tmp_path / "data.csv").write_text("\n".join(",".join(map(str, r)) for r in rows) + "\n")
    return tmp_path


@pytest.fixture(scope="module", autouse=True)
def imported():
    """Import what a job reads with once, outside the measured calls (imports are not what
    the bounds are about, and under tracemalloc they take seconds)."""
    import rasterio  # noqa: F401
    import xarray  # noqa: F401
    import zarr  # noqa: F401

    import dkernel.jobs.runner  # noqa: F401
    from dkernel.io.registry import READERS
    from dkernel.jobs.registry import METHODS

    READERS.names(), METHODS.names()


@pytest.fixture(autouse=True)
def no_cluster(monkeypatch):
    """A refusal comes before any cluster: starting one fails the case (exit 1, not 2)."""

    def refuse(*args, **kwargs):
        raise RuntimeError("a cluster was started")

    monkeypatch.setattr("dkernel.runtime.connect", refuse)


def _spec(**top) -> dict:
    spec = {
        "name": "round3",
        "data": {"reader": "csv", "path": "data.csv"},
        "method": "rbf-spectral",
        "params": {"n_clusters": 2},
        "output": "out.zarr",
    }
    spec.update(top)
    return spec


def _image_spec(data: dict, **top) -> dict:
    return _spec(method="mssc", data=data, params=dict(MSSC), **top)


def cli(
    work: Path, spec: dict | str | None, command: str = "validate", *, path: Path | None = None
) -> Outcome:
    """Run ``dkernel COMMAND SPEC`` in this process; exit code, stderr, time and the peak of
    Python allocations (MiB) above the start."""
    if path is None:
        path = work / "job.yaml"
        text = spec if isinstance(spec, str) else yaml.safe_dump(spec, sort_keys=False)
        path.write_text(text)
    args = [command, str(path)]
    if command == "run":
        args += ["--no-progress", "--workers", "1", "--threads", "1"]
    err = io.StringIO()
    tracemalloc.start()
    start = time.perf_counter()
    try:
        with redirect_stderr(err), redirect_stdout(io.StringIO()):
            code = main(args)
    finally:
        seconds = time.perf_counter() - start
        peak = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
    return Outcome(code, err.getvalue(), seconds, peak)


def refused(
    work: Path,
    spec: dict | str | None,
    pattern: str,
    command: str = "validate",
    *,
    path: Path | None = None,
) -> str:
    """Exit 2, the message matches, no traceback, bounded, no store."""
    out = cli(work, spec, command, path=path)
    assert out.code == 2, f"exit {out.code}: {out.err}"
    assert re.search(pattern, out.err, re.S), f"{pattern!r} not in {out.err!r}"
    assert "Traceback" not in out.err
    assert out.seconds <= MAX_SECONDS, out.seconds
    assert out.mib <= MAX_MIB, out.mib
    assert not (work / "out.zarr").exists(), "a store was created"
    return out.err


def accepted(work: Path, spec: dict | str, command: str = "validate") -> str:
    out = cli(work, spec, command)
    assert out.code == 0, out.err
    return out.err


# ------------------------------------------------------------------------------------------
# builders
# ------------------------------------------------------------------------------------------


def geotiff(path: Path, data: np.ndarray, *, nodata: float | None = None) -> Path:
    import rasterio
    from rasterio.transform import from_origin

    bands, rows, cols = data.shape
    with rasterio.open(
        path,
        "w",
        driver="GTiff",
        width=cols,
        height=rows,
        count=bands,
        dtype=data.dtype,
        crs="EPSG:32618",
        transform=from_origin(500000, 4000000, 30, 30),
        nodata=nodata,
    ) as dst:
        dst.write(data)
    return path


def scene(rows: int = 24, cols: int = 20) -> np.ndarray:
    rng = np.random.default_rng(1)
    return rng.integers(0, 200, size=(3, rows, cols)).astype(np.uint8)


def vrt_simple(source: str, size: tuple[int, int] = (20, 24)) -> str:
    cols, rows = size
    return (
        f'<VRTDataset rasterXSize="{cols}" rasterYSize="{rows}">\n'
        "  <SRS>EPSG:32618</SRS><GeoTransform>500000,30,0,4000000,0,-30</GeoTransform>\n"
        '  <VRTRasterBand dataType="Byte" band="1"><SimpleSource>\n'
        f'    <SourceFilename relativeToVRT="0">{source}</SourceFilename>\n'
        "    <SourceBand>1</SourceBand></SimpleSource></VRTRasterBand>\n"
        "</VRTDataset>\n"
    )


def vrt_raw(source: str, cols: int = 256, rows: int = 3) -> str:
    return (
        f'<VRTDataset rasterXSize="{cols}" rasterYSize="{rows}">\n'
        "  <SRS>EPSG:32618</SRS><GeoTransform>500000,30,0,4000000,0,-30</GeoTransform>\n"
        '  <VRTRasterBand dataType="Byte" band="1" subClass="VRTRawRasterBand">\n'
        f'    <SourceFilename relativetoVRT="0">{source}</SourceFilename>\n'
        "    <ImageOffset>0</ImageOffset><PixelOffset>1</PixelOffset>\n"
        f"    <LineOffset>{cols}</LineOffset></VRTRasterBand>\n"
        "</VRTDataset>\n"
    )


def cube(path: Path, *, rows: int = 64, cols: int = 64, chunk: int = 32) -> Path:
    """An xarray cube (band, y, x) float32 with a CRS, 32 × 32 chunks, as ``to_zarr`` writes
    it (consolidated metadata in the root ``zarr.json``)."""
    import rioxarray  # noqa: F401
    import xarray as xr

    rng = np.random.default_rng(2)
    data = rng.random((3, rows, cols)).astype(np.float32)
    da_ = xr.DataArray(
        data,
        dims=("band", "y", "x"),
        coords={
            "band": [1, 2, 3],
            "y": 4000000.0 - 30.0 * np.arange(rows),
            "x": 500000.0 + 30.0 * np.arange(cols),
        },
        name="image",
    ).rio.write_crs("EPSG:32618")
    ds = da_.chunk({"band": -1, "y": chunk, "x": chunk}).to_dataset()
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zarr: consolidated metadata is not in the v3 spec
        ds.to_zarr(path, mode="w")
    return path


def plain_zarr(path: Path, *, fill_value: float = 0.0) -> Path:
    """A plain (band, y, x) Zarr array without dimension names, 4 chunks."""
    import zarr

    arr = zarr.create_array(
        str(path), shape=(3, 64, 64), chunks=(3, 32, 32), dtype="float32", fill_value=fill_value
    )
    arr[...] = np.random.default_rng(3).random((3, 64, 64)).astype(np.float32) + 1.0
    return path


class Listener:
    """A TCP server on 127.0.0.1 that records every connection it receives."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(0.1)
        self.port = self.sock.getsockname()[1]
        self.hits: list[bytes] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(0.5)
                try:
                    self.hits.append(conn.recv(200))
                except OSError:
                    self.hits.append(b"")

    def close(self) -> list[bytes]:
        time.sleep(0.2)
        self._stop.set()
        self._thread.join(5)
        self.sock.close()
        return self.hits


@pytest.fixture()
def listener():
    server = Listener()
    yield server
    server.close()


@pytest.fixture()
def rooted(work, monkeypatch):
    """``work/root`` as DKERNEL_DATA_ROOT, ``work/outside`` beside it."""
    root, outside = work / "root", work / "outside"
    root.mkdir()
    outside.mkdir()
    monkeypatch.setenv("DKERNEL_DATA_ROOT", str(root))
    return root, outside


def wisconsin_folder(folder: Path) -> Path:
    """A dataset folder in the layout of DKERNEL_DATA with a small Wisconsin-like table."""
    sub = folder / "breast_cancer_wisconsin_original"
    sub.mkdir(parents=True)
    rng = np.random.default_rng(4)
    lines = [
        ",".join([str(1000 + i), *map(str, rng.integers(1, 11, 9)), "2" if i % 2 else "4"])
        for i in range(40)
    ]
    (sub / "breast-cancer-wisconsin.data").write_text("\n".join(lines) + "\n")
    return folder


# ------------------------------------------------------------------------------------------
# A. GDAL indirections: no file outside the data root, no network
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["validate", "run"])
def test_vrt_with_a_vsicurl_source_sends_no_request(work, listener, command) -> None:
    url = f"/vsicurl/http://127.0.0.1:{listener.port}/x.tif"
    (work / "scene.tif").write_text(vrt_simple(url))
    refused(
        work,
        _image_spec({"reader": "geotiff", "path": "scene.tif"}),
        r"scene\.tif is a GDAL VRT .*refused because they can make GDAL read files outside "
        r"the data root or fetch URLs",
        command,
    )
    assert listener.close() == [], "GDAL connected to the URL named in the VRT"


def test_vrt_raw_band_over_etc_passwd_is_not_an_image(work) -> None:
    (work / "scene.tif").write_text(vrt_raw("/etc/passwd"))
    err = refused(work, _image_spec({"reader": "geotiff", "path": "scene.tif"}), r"is a GDAL VRT")
    assert "256 × 3" not in err and "root:" not in err


def test_vrt_inside_the_data_root_pointing_outside_is_refused(work, rooted) -> None:
    root, outside = rooted
    geotiff(outside / "real.tif", scene())
    (root / "scene.tif").write_text(vrt_simple(str(outside / "real.tif")))
    refused(work, _image_spec({"reader": "geotiff", "path": "root/scene.tif"}), r"GDAL VRT")


def test_vrt_is_refused_whatever_its_name(work) -> None:
    geotiff(work / "real.tif", scene())
    (work / "scene.vrt").write_text(vrt_simple(str(work / "real.tif")))
    refused(
        work, _image_spec({"reader": "geotiff", "path": "scene.vrt"}), r"scene\.vrt is a GDAL VRT"
    )


def test_vrt_with_an_xml_declaration_is_recognised(work) -> None:
    geotiff(work / "real.tif", scene())
    text = '<?xml version="1.0"?>\n' + vrt_simple(str(work / "real.tif"))
    (work / "scene.tif").write_text(text)
    refused(work, _image_spec({"reader": "geotiff", "path": "scene.tif"}), r"is a GDAL VRT")


def test_gdal_wms_description_is_refused(work, listener) -> None:
    wms = (
        "<GDAL_WMS><Service name='TMS'><ServerUrl>http://127.0.0.1:"
        f"{listener.port}/${{z}}/${{x}}/${{y}}.png</ServerUrl></Service></GDAL_WMS>"
    )
    (work / "scene.tif").write_text(wms)
    refused(work, _image_spec({"reader": "geotiff", "path": "scene.tif"}), r"GDAL WMS description")
    assert listener.close() == []


def test_png_named_tif_is_named_for_what_it_is(work) -> None:
    import rasterio

    with rasterio.open(
        work / "scene.tif", "w", driver="PNG", width=8, height=8, count=1, dtype="uint8"
    ) as dst:
        dst.write(np.arange(64, dtype=np.uint8).reshape(1, 8, 8))
    refused(work, _image_spec({"reader": "geotiff", "path": "scene.tif"}), r"is a PNG image")


def test_geotiff_sidecar_linked_outside_the_data_root_is_not_read(work, rooted) -> None:
    """GDAL opens no sidecar of a local GeoTIFF (``GDAL_DISABLE_READDIR_ON_OPEN=EMPTY_DIR``,
    ``dkernel.io.gdal.NETWORK_OFF``): a ``.aux.xml`` linked out of the root is never read,
    so it is not among the files confined; the GeoTIFF alone is. Planted after validation:
    tests/ops/test_open_time_sidecars.py."""
    from dkernel.io.gdal import raster_files

    root, outside = rooted
    geotiff(root / "scene.tif", scene())
    (outside / "scene.tif.aux.xml").write_text("<PAMDataset></PAMDataset>")
    (root / "scene.tif.aux.xml").symlink_to(outside / "scene.tif.aux.xml")
    accepted(work, _image_spec({"reader": "geotiff", "path": "root/scene.tif"}))
    assert raster_files(root / "scene.tif") == [root / "scene.tif"]


def test_overview_sidecar_that_is_a_vrt_to_a_url_is_not_opened(work, listener) -> None:
    """GDAL would open ``scene.tif.ovr`` with every driver, and a VRT there brings its
    sources; with the sidecar lookup off it is never opened: nothing is requested."""
    from dkernel.io.gdal import raster_files

    geotiff(work / "scene.tif", scene())
    url = f"/vsicurl/http://127.0.0.1:{listener.port}/x.tif"
    (work / "scene.tif.ovr").write_text(vrt_simple(url, size=(10, 12)))
    accepted(work, _image_spec({"reader": "geotiff", "path": "scene.tif"}))
    assert raster_files(work / "scene.tif") == [work / "scene.tif"]
    assert listener.close() == []


def test_check_sidecars_refuses_a_file_list_beyond_the_geotiff(work) -> None:
    """The guard kept for a file list GDAL would report anyway (none under NETWORK_OFF): a
    virtual path, or a file not beside the GeoTIFF, is refused by name."""
    from dkernel.errors import InvalidInputError
    from dkernel.io.gdal import check_sidecars

    tif = work / "scene.tif"
    with pytest.raises(InvalidInputError, match=r"brings /vsicurl/\S+ with it .* virtual path"):
        check_sidecars(tif, [str(tif), "/vsicurl/http://127.0.0.1:9/x.tif"])
    with pytest.raises(InvalidInputError, match=r"brings /etc/passwd with it .* not beside it"):
        check_sidecars(tif, [str(tif), "/etc/passwd"])


def test_overview_sidecar_that_is_a_raw_vrt_over_etc_passwd_is_not_read(work) -> None:
    from dkernel.io.gdal import raster_files

    geotiff(work / "scene.tif", scene())
    (work / "scene.tif.ovr").write_text(vrt_raw("/etc/passwd", cols=10, rows=12))
    err = accepted(work, _image_spec({"reader": "geotiff", "path": "scene.tif"}))
    assert raster_files(work / "scene.tif") == [work / "scene.tif"]
    assert "root:" not in err


def test_geotiff_inside_the_data_root_passes(work, rooted) -> None:
    root, _ = rooted
    geotiff(root / "scene.tif", scene())
    accepted(work, _image_spec({"reader": "geotiff", "path": "root/scene.tif"}))


# /vsicurl/ (like /vsis3/) is a remote input of the raster readers since issue 30
# (tests/io/test_remote_inputs.py); the archive paths stay refused.
@pytest.mark.parametrize("prefix", ["/vsizip/", "/vsitar/", "/vsigzip/"])
def test_gdal_virtual_paths_are_not_files(work, listener, prefix) -> None:
    geotiff(work / "real.tif", scene())
    target = f"http://127.0.0.1:{listener.port}/x.tif" if prefix == "/vsicurl/" else "real.tif"
    refused(
        work,
        _image_spec({"reader": "geotiff", "path": prefix + target}),
        r"data\.path: file not found",
    )
    assert listener.close() == []


def test_vsicurl_as_a_labels_path_is_not_a_file(work, listener) -> None:
    np.save(work / "image.npy", np.random.default_rng(0).random((20, 20, 3)).astype(np.float32))
    data = {
        "reader": "npy-raster",
        "path": "image.npy",
        "labels_path": f"/vsicurl/http://127.0.0.1:{listener.port}/labels.npy",
    }
    refused(work, _image_spec(data), r"data\.labels_path: file not found")
    assert listener.close() == []


# ------------------------------------------------------------------------------------------
# A. reader options that name folders are confined like paths
# ------------------------------------------------------------------------------------------


def test_data_dir_outside_the_data_root(work, rooted) -> None:
    _, outside = rooted
    wisconsin_folder(outside / "data")
    refused(
        work,
        _spec(data={"reader": "wisconsin", "data_dir": str(outside / "data")}),
        r"data\.data_dir: .*outside.* is outside the data root",
    )


def test_data_dir_dotdot_escapes_nothing(work, rooted) -> None:
    wisconsin_folder(work / "data")
    refused(
        work,
        _spec(data={"reader": "wisconsin", "data_dir": "root/../data"}),
        r"data\.data_dir: .* is outside the data root",
    )
    refused(
        work,
        _spec(data={"reader": "wisconsin", "data_dir": "../.."}),
        r"data\.data_dir: .* is outside the data root",
    )


def test_data_dir_link_escaping_the_root(work, rooted) -> None:
    root, outside = rooted
    wisconsin_folder(outside / "data")
    (root / "data").symlink_to(outside / "data")
    refused(
        work,
        _spec(data={"reader": "wisconsin", "data_dir": "root/data"}),
        r"data\.data_dir: .*outside/data is outside the data root",
    )


def test_dataset_file_linked_outside_the_root(work, rooted) -> None:
    root, outside = rooted
    wisconsin_folder(outside / "data")
    sub = root / "data" / "breast_cancer_wisconsin_original"
    sub.mkdir(parents=True)
    (sub / "breast-cancer-wisconsin.data").symlink_to(
        outside / "data" / "breast_cancer_wisconsin_original" / "breast-cancer-wisconsin.data"
    )
    refused(
        work,
        _spec(data={"reader": "wisconsin", "data_dir": "root/data"}),
        r"reader 'wisconsin' would read .*\(a link to .*outside.*\), which is outside the data",
    )


def test_data_dir_inside_the_root_passes(work, rooted) -> None:
    root, _ = rooted
    wisconsin_folder(root / "data")
    accepted(work, _spec(data={"reader": "wisconsin", "data_dir": "root/data"}))


def test_dataset_default_folder_outside_the_root(work, rooted, monkeypatch) -> None:
    """No data_dir: the reader's default, $DKERNEL_DATA, is confined too."""
    _, outside = rooted
    wisconsin_folder(outside / "data")
    monkeypatch.setenv("DKERNEL_DATA", str(outside / "data"))
    refused(work, _spec(data={"reader": "wisconsin"}), r"outside the data root")


def test_zarr_chunk_linked_outside_the_root(work, rooted) -> None:
    root, outside = rooted
    cube(root / "cube.zarr")
    chunk = root / "cube.zarr" / "image" / "c" / "0" / "1" / "1"
    (outside / "chunk").write_bytes(chunk.read_bytes())
    chunk.unlink()
    chunk.symlink_to(outside / "chunk")
    refused(
        work,
        _image_spec({"reader": "zarr-raster", "path": "root/cube.zarr"}),
        r"would read .*c/0/1/1 \(a link to .*outside/chunk\), which is outside the data root",
    )


# ------------------------------------------------------------------------------------------
# A. regular files only, sizes checked before reading
# ------------------------------------------------------------------------------------------


@pytest.mark.timeout(30)
@pytest.mark.parametrize("command", ["validate", "run"])
def test_spec_that_is_a_fifo(work, command) -> None:
    os.mkfifo(work / "job.yaml")
    refused(
        work,
        None,
        r"job spec: could not read .*job\.yaml: it is a FIFO",
        command,
        path=work / "job.yaml",
    )


@pytest.mark.timeout(30)
@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom", "/dev/null"])
def test_spec_linked_to_a_device(work, device) -> None:
    if not Path(device).exists():
        pytest.skip(f"no {device}")
    (work / "job.yaml").symlink_to(device)
    refused(work, None, r"it is a character device", path=work / "job.yaml")


def test_sparse_two_gib_spec_is_refused_before_reading(work) -> None:
    with open(work / "job.yaml", "wb") as fh:
        fh.write(b"name: sparse\n")
        fh.truncate(2 << 30)
    err = refused(
        work,
        None,
        r"the job spec is 2,147,483,648 bytes; at most 1,048,576",
        path=work / "job.yaml",
    )
    assert len(err) < 500


@pytest.mark.timeout(30)
def test_csv_that_is_a_fifo(work) -> None:
    os.mkfifo(work / "pipe.csv")
    refused(
        work,
        _spec(data={"reader": "csv", "path": "pipe.csv"}),
        r"data\.path: could not read .*pipe\.csv: it is a FIFO",
        "run",
    )


def test_csv_linked_to_dev_zero(work) -> None:
    (work / "zero.csv").symlink_to("/dev/zero")
    refused(work, _spec(data={"reader": "csv", "path": "zero.csv"}), r"it is a character device")


def test_csv_that_is_a_directory(work) -> None:
    (work / "table.csv").mkdir()
    refused(
        work,
        _spec(data={"reader": "csv", "path": "table.csv"}),
        r"could not read .*table\.csv: it is a directory",
    )


@pytest.mark.timeout(30)
def test_npy_that_is_a_fifo(work) -> None:
    os.mkfifo(work / "x.npy")
    refused(work, _spec(data={"reader": "npy", "path": "x.npy"}), r"it is a FIFO")


@pytest.mark.timeout(30)
def test_labels_linked_to_dev_urandom(work) -> None:
    np.save(work / "x.npy", np.random.default_rng(0).normal(size=(30, 3)))
    (work / "y.npy").symlink_to("/dev/urandom")
    refused(
        work,
        _spec(data={"reader": "npy", "path": "x.npy", "labels_path": "y.npy"}),
        r"data\.labels_path: could not read .*y\.npy: it is a character device",
    )


@pytest.mark.timeout(30)
def test_zarr_json_that_is_a_fifo(work) -> None:
    cube(work / "cube.zarr")
    meta = work / "cube.zarr" / "image" / "zarr.json"
    meta.unlink()
    os.mkfifo(meta)
    refused(
        work,
        _image_spec({"reader": "zarr-raster", "path": "cube.zarr"}),
        r"could not read .*image/zarr\.json: it is a FIFO",
    )


@pytest.mark.timeout(30)
def test_zarr_chunk_that_is_a_fifo(work) -> None:
    cube(work / "cube.zarr")
    chunk = work / "cube.zarr" / "image" / "c" / "0" / "0" / "1"
    chunk.unlink()
    os.mkfifo(chunk)
    refused(
        work, _image_spec({"reader": "zarr-raster", "path": "cube.zarr"}), r"c/0/0/1: it is a FIFO"
    )


def test_oversized_zarr_metadata_is_refused_unread(work) -> None:
    cube(work / "cube.zarr")
    with open(work / "cube.zarr" / "image" / "zarr.json", "r+b") as fh:
        fh.truncate(1 << 30)  # sparse: 1 GiB of NUL bytes after the JSON
    refused(
        work,
        _image_spec({"reader": "zarr-raster", "path": "cube.zarr"}),
        r"image/zarr\.json' is 1,073,741,824 bytes; at most 67,108,864 are read",
    )


# ------------------------------------------------------------------------------------------
# A. input Zarr cubes: damaged metadata, missing chunks, chunk bombs
# ------------------------------------------------------------------------------------------


def test_truncated_array_zarr_json_fails_validate(work) -> None:
    """The root's consolidated metadata is intact, so xarray alone never reads this file."""
    cube(work / "cube.zarr")
    meta = work / "cube.zarr" / "image" / "zarr.json"
    meta.write_bytes(meta.read_bytes()[:200])
    refused(
        work,
        _image_spec({"reader": "zarr-raster", "path": "cube.zarr"}),
        r"its metadata file \S*cube\.zarr/image/zarr\.json is not valid JSON at line \d+, "
        r"column \d+ \(truncated or corrupt\)",
    )


def test_truncated_root_zarr_json_names_the_file(work) -> None:
    cube(work / "cube.zarr")
    meta = work / "cube.zarr" / "zarr.json"
    meta.write_bytes(meta.read_bytes()[:100])
    refused(
        work,
        _image_spec({"reader": "zarr-raster", "path": "cube.zarr"}),
        r"reader 'zarr-raster' failed on \S*cube\.zarr: its metadata file \S*cube\.zarr/zarr\.json",
    )


def test_cube_with_a_missing_chunk_is_an_error(work) -> None:
    cube(work / "cube.zarr")
    (work / "cube.zarr" / "image" / "c" / "0" / "1" / "1").unlink()
    refused(
        work,
        _image_spec({"reader": "zarr-raster", "path": "cube.zarr"}),
        r"array 'image' has 1 of 4 chunks missing \(the first: c/0/1/1\); they would read as "
        r"its fill value nan, silently.*data\.missing_chunks: nodata",
        "run",
    )


def test_missing_chunks_as_nodata_when_asked(work) -> None:
    cube(work / "cube.zarr")
    (work / "cube.zarr" / "image" / "c" / "0" / "1" / "1").unlink()
    data = {"reader": "zarr-raster", "path": "cube.zarr", "missing_chunks": "nodata"}
    out = cli(work, _image_spec(data))
    assert out.code == 0, out.err


def test_missing_chunks_that_would_read_as_data_stay_an_error(work) -> None:
    plain_zarr(work / "plain.zarr", fill_value=0.0)
    (work / "plain.zarr" / "c" / "0" / "0" / "1").unlink()
    data = {"reader": "zarr-raster", "path": "plain.zarr", "missing_chunks": "nodata"}
    refused(
        work,
        _image_spec(data),
        r"the array has 1 of 4 chunks missing \(the first: c/0/0/1\), and they read as its "
        r"fill value 0\.0, which is not nodata",
    )
    data["nodata"] = 0.0
    assert cli(work, _image_spec(data)).code == 0


def test_missing_chunks_option_is_checked(work) -> None:
    cube(work / "cube.zarr")
    data = {"reader": "zarr-raster", "path": "cube.zarr", "missing_chunks": "zero"}
    refused(work, _image_spec(data), r"data\.missing_chunks: must be one of")


def _edit_zarr_json(path: Path, **changes) -> None:
    import json

    meta = json.loads(path.read_text())
    meta.update(changes)
    path.write_text(json.dumps(meta))


def test_cube_declaring_a_trillion_pixels(work) -> None:
    plain_zarr(work / "plain.zarr")
    _edit_zarr_json(work / "plain.zarr" / "zarr.json", shape=[3, 10**6, 10**6])
    refused(
        work,
        _image_spec({"reader": "zarr-raster", "path": "plain.zarr"}),
        r"declares shape \(3, 1000000, 1000000\) \(3e\+12 values\)",
    )


def test_chunk_bomb_declared_chunk_shape(work) -> None:
    plain_zarr(work / "plain.zarr")
    meta = work / "plain.zarr" / "zarr.json"
    _edit_zarr_json(
        meta,
        shape=[3, 65536, 65536],
        chunk_grid={"name": "regular", "configuration": {"chunk_shape": [3, 65536, 65536]}},
    )
    refused(
        work,
        _image_spec({"reader": "zarr-raster", "path": "plain.zarr"}),
        r"has chunks of \(3, 65536, 65536\) float32 values \(48\.0 GiB each once "
        r"decompressed\); at most 1 GiB",
    )


def test_zarr_path_that_is_a_file(work) -> None:
    (work / "cube.zarr").write_text("{}")
    refused(
        work,
        _image_spec({"reader": "zarr-raster", "path": "cube.zarr"}),
        r"cube\.zarr: it is a file; a Zarr store is a directory",
    )


def test_intact_cube_still_validates(work) -> None:
    cube(work / "cube.zarr")
    accepted(work, _image_spec({"reader": "zarr-raster", "path": "cube.zarr"}))


# ------------------------------------------------------------------------------------------
# B. inputs refused or flagged, never silently altered
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_complex_geotiff_is_refused(work, dtype) -> None:
    data = (scene().astype(np.float32) + 1j * scene().astype(np.float32)).astype(dtype)
    geotiff(work / "scene.tif", data)
    refused(
        work,
        _image_spec({"reader": "geotiff", "path": "scene.tif"}),
        rf"holds {dtype} pixels; dkernel reads real-valued bands .* does not cast {dtype} "
        r"silently.*numpy\.abs",
        "run",
    )


def test_complex_npy_raster_is_refused(work) -> None:
    np.save(work / "image.npy", np.ones((20, 20, 3), dtype=np.complex64))
    refused(
        work,
        _image_spec({"reader": "npy-raster", "path": "image.npy"}),
        r"holds complex64 pixels",
    )


def test_complex_zarr_cube_is_refused(work) -> None:
    import zarr

    arr = zarr.create_array(
        str(work / "c.zarr"), shape=(2, 16, 16), chunks=(2, 16, 16), dtype="complex64"
    )
    arr[...] = np.ones((2, 16, 16), dtype=np.complex64) * (1 + 2j)
    refused(
        work, _image_spec({"reader": "zarr-raster", "path": "c.zarr"}), r"holds complex64 pixels"
    )


def test_npz_given_to_the_npy_reader(work) -> None:
    np.savez(work / "x.npz", a=np.ones((10, 2)), b=np.zeros(3))
    refused(
        work,
        _spec(data={"reader": "npy", "path": "x.npz"}),
        r"x\.npz is a \.npz archive holding 2 array\(s\) \(\['a', 'b'\]\).*numpy\.load\(path\)\['a'\]",
    )


def test_npz_with_one_array_is_refused_too(work) -> None:
    np.savez_compressed(work / "x.npz", only=np.ones((10, 2)))
    refused(work, _spec(data={"reader": "npy", "path": "x.npz"}), r"holding 1 array\(s\)")


def test_npz_given_to_the_npy_raster_reader(work) -> None:
    np.savez(work / "image.npz", image=np.ones((10, 10, 3)))
    refused(work, _image_spec({"reader": "npy-raster", "path": "image.npz"}), r"is a \.npz archive")


def test_npy_of_objects_is_refused(work) -> None:
    np.save(work / "o.npy", np.array([[1, "a"]] * 5, dtype=object), allow_pickle=True)
    refused(work, _spec(data={"reader": "npy", "path": "o.npy"}), r"could not read .*o\.npy")


def test_npy_header_declaring_a_huge_fortran_array(work) -> None:
    header = "{'descr': '<f8', 'fortran_order': True, 'shape': (1000000000, 1000000000), }"
    header = header.ljust(118) + "\n"
    (work / "huge.npy").write_bytes(
        b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode() + b"\0" * 64
    )
    refused(work, _spec(data={"reader": "npy", "path": "huge.npy"}), r"could not read .*huge\.npy")


def test_npy_with_an_oversized_header(work) -> None:
    header = "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 2), " + " " * 200_000 + "}\n"
    data = b"\x93NUMPY\x02\x00" + len(header).to_bytes(4, "little") + header.encode()
    (work / "big.npy").write_bytes(data + b"\0" * 32)
    refused(work, _spec(data={"reader": "npy", "path": "big.npy"}), r"could not read .*big\.npy")


def test_constant_image_is_refused_before_the_cluster(work) -> None:
    np.save(work / "flat.npy", np.full((30, 30, 3), 7, dtype=np.float32))
    refused(
        work,
        _image_spec({"reader": "npy-raster", "path": "flat.npy"}),
        r"flat\.npy is constant: all 900 valid pixels hold the same band values \(7, 7, 7\)",
        "run",
    )


def test_constant_geotiff_is_refused(work) -> None:
    geotiff(work / "flat.tif", np.full((3, 16, 16), 9, dtype=np.uint8))
    refused(work, _image_spec({"reader": "geotiff", "path": "flat.tif"}), r"is constant")


def test_constant_table_is_refused_before_the_cluster(work) -> None:
    (work / "data.csv").write_text("1.5,2\n" * 50)
    refused(work, _spec(), r"every sample of .*data\.csv is identical", "run")


def test_one_pixel_geotiff(work) -> None:
    geotiff(work / "dot.tif", np.ones((3, 1, 1), dtype=np.uint8))
    refused(work, _image_spec({"reader": "geotiff", "path": "dot.tif"}), r"has one valid pixel")


def test_geotiff_all_nan(work) -> None:
    geotiff(work / "nan.tif", np.full((2, 8, 8), np.nan, dtype=np.float32))
    refused(
        work,
        _image_spec({"reader": "geotiff", "path": "nan.tif"}),
        r"every pixel of the image is nodata",
    )


@pytest.mark.parametrize("value", ["1e300", ".nan", "-1", "2e6"])
def test_coord_scale_is_bounded(work, value) -> None:
    np.save(work / "image.npy", np.random.default_rng(0).random((20, 20, 3)).astype(np.float32))
    text = yaml.safe_dump(
        _image_spec({"reader": "npy-raster", "path": "image.npy", "coord_scale": 0.5}),
        sort_keys=False,
    ).replace("coord_scale: 0.5", f"coord_scale: {value}")
    refused(work, text, r"data\.coord_scale: must be", "run")


def test_coord_scale_bound_holds_in_python_too(work) -> None:
    from dkernel.errors import InvalidInputError
    from dkernel.io.raster import image_from_array, raster_features

    image = image_from_array(np.random.default_rng(0).random((8, 8, 2)))
    with pytest.raises(InvalidInputError, match=r"coord_scale must be in \[0, 1e\+06\]"):
        raster_features(image, coord_scale=1e300)


def test_csv_reader_memory_is_close_to_the_table(work) -> None:
    """The reader (pandas.read_csv since issue 30) peaks within 1.2x of pandas.read_csv
    alone: not the text many times over."""
    import pandas as pd

    from dkernel.io.readers import load_csv

    rng = np.random.default_rng(5)
    np.savetxt(work / "big.csv", rng.normal(size=(40_000, 8)), delimiter=",", fmt="%.4f")
    pd.read_csv(work / "big.csv", header=None)  # warm pandas' import-time allocations
    tracemalloc.start()
    pd.read_csv(work / "big.csv", header=None).to_numpy(dtype=np.float64)
    reference = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    tracemalloc.start()
    data = load_csv(str(work / "big.csv"))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert data.X.shape == (40_000, 8)
    assert peak < 1.2 * reference, (peak, reference)


def test_csv_reader_still_reports_ragged_rows_and_labels(work) -> None:
    from dkernel.errors import InvalidInputError
    from dkernel.io.readers import load_csv

    (work / "t.csv").write_text("a,b,c\n1,2,x\n\n3,4,y\n5,6,x\n")
    data = load_csv(str(work / "t.csv"), header=True, label_column=-1)
    assert data.feature_names == ["a", "b"] and data.y.tolist() == [0, 1, 0]
    (work / "r.csv").write_text("1,2\n3,4\n5\n")
    with pytest.raises(InvalidInputError, match=r"row 3 has 1 fields, expected 2"):
        load_csv(str(work / "r.csv"))


# ------------------------------------------------------------------------------------------
# C. limits that mean something
# ------------------------------------------------------------------------------------------


def _free(monkeypatch, free: int, total: int = 100 << 30) -> None:
    import shutil

    usage = shutil._ntuple_diskusage(total, total - free, free)  # type: ignore[attr-defined]
    monkeypatch.setattr("dkernel._budget.shutil.disk_usage", lambda path: usage)


def test_max_disk_is_capped_by_the_free_space(work, monkeypatch) -> None:
    _free(monkeypatch, 40_000)  # the 80 × 80 float64 kernel needs 51 200 bytes
    refused(
        work,
        _spec(limits={"max_disk": "400GiB"}),
        r"needs about 50\.00 kiB of disk, above the limit of 35\.16 kiB \(limits\.max_disk "
        r"400\.00 GiB, capped at 90% of the 39\.06 kiB free on the output's file system, "
        + re.escape(str(work)),
        "run",
    )


def test_default_max_disk_is_capped_too(work, monkeypatch) -> None:
    _free(monkeypatch, 40_000)
    refused(work, _spec(), r"the default 50\.00 GiB, capped at 90% of the 39\.06 kiB free")


def test_max_disk_within_the_free_space_is_kept(work) -> None:
    accepted(work, _spec(limits={"max_disk": "1MiB"}))


def test_max_disk_is_capped_where_the_output_option_puts_the_store(work, monkeypatch) -> None:
    """``--output`` elsewhere than the spec's output: the free space that counts is where the
    store will be, checked again before any cluster starts."""
    import shutil

    (work / "tiny").mkdir()

    def usage(path):
        free = 40_000 if "tiny" in str(path) else 100 << 30
        return shutil._ntuple_diskusage(100 << 30, (100 << 30) - free, free)  # type: ignore[attr-defined]

    monkeypatch.setattr("dkernel._budget.shutil.disk_usage", usage)
    (work / "job.yaml").write_text(yaml.safe_dump(_spec(limits={"max_disk": "1GiB"})))
    err = io.StringIO()
    with redirect_stderr(err):
        code = main(["run", "job.yaml", "--output", "tiny/out.zarr", "--no-progress"])
    assert code == 2, err.getvalue()
    assert re.search(
        r"needs about 50\.00 kiB of disk, above the limit of 35\.16 kiB", err.getvalue()
    )
    assert "Traceback" not in err.getvalue() and not (work / "tiny" / "out.zarr").exists()


def test_max_memory_above_the_machine_is_capped_and_said(work, monkeypatch, caplog) -> None:
    from dkernel._budget import physical_memory

    machine = physical_memory()
    assert machine is not None
    with caplog.at_level(logging.WARNING, logger="dkernel"):
        out = cli(work, _spec(limits={"max_memory": "500TiB"}))
    assert out.code == 0, out.err
    text = out.err + caplog.text
    assert "limits.max_memory 500.00 TiB, capped at this machine's memory" in text, text


def test_max_memory_capped_refusal_names_the_cap(work, monkeypatch) -> None:
    monkeypatch.setattr("dkernel._budget.physical_memory", lambda: 100_000.0)
    refused(
        work,
        _spec(limits={"max_memory": "200GiB"}),
        r"needs about 150\.00 kiB of memory, above the limit of 97\.66 kiB \(limits\.max_memory "
        r"200\.00 GiB, capped at this machine's memory, 97\.66 kiB\)",
        "run",
    )


def test_env_max_memory_of_a_terabyte_is_capped(work, monkeypatch) -> None:
    monkeypatch.setattr("dkernel._budget.physical_memory", lambda: 100_000.0)
    monkeypatch.setenv("DKERNEL_MAX_MEMORY", "1TB")
    refused(
        work,
        _spec(),
        r"\(DKERNEL_MAX_MEMORY 0\.91 TiB, capped at this machine's memory, 97\.66 kiB\)",
    )


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("max_disk", "0"),
        ("max_disk", "-5GiB"),
        ("max_memory", "NaN"),
        ("max_memory", "inf"),
        ("max_memory", "lots"),
    ],
)
def test_nonsense_limits_are_refused(work, key, value) -> None:
    refused(work, _spec(limits={key: value}), rf"limits\.{key}: must be a")


def test_nonsense_env_limit_names_the_variable(work, monkeypatch) -> None:
    monkeypatch.setenv("DKERNEL_MAX_MEMORY", "NaN")
    refused(work, _spec(), r"DKERNEL_MAX_MEMORY: cannot read 'NaN' as a size")


def test_kppr_evaluation_is_in_the_estimate(work) -> None:
    rng = np.random.default_rng(6)
    np.save(work / "rows.npy", rng.normal(size=(30_000, 4)))
    spec = _spec(
        data={"reader": "npy", "path": "rows.npy"},
        method="kppr",
        params={"max_samples": 500, "evaluate_max_samples": 1_000_000},
        limits={"max_memory": "2GiB"},
    )
    refused(
        work,
        spec,
        r"the evaluation against the exact PPR \(a dense 30000 x 30000 kernel.*needs about "
        r"20\.12 GiB of memory.*lower params\.evaluate_max_samples below 30,000",
        "run",
    )
    spec["params"]["evaluate_max_samples"] = 0
    accepted(work, spec)


# ------------------------------------------------------------------------------------------
# A. chunk bombs: decompressed sizes bounded by the declared chunk shape
# ------------------------------------------------------------------------------------------


def zstd_bomb(total: int, *, declare: bool) -> bytes:
    """A zstd frame of RLE blocks that decompresses to ``total`` zero bytes: about 4 bytes per
    128 KiB (2 GiB in 64 KiB), with or without its content size in the header."""
    import struct

    out = bytearray(b"\x28\xb5\x2f\xfd")
    if declare:
        out += bytes([0b11100000]) + struct.pack("<Q", total)  # single segment, 8-byte size
    else:
        out += bytes([0, 0x58])  # no content size; a window descriptor
    block = 128 * 1024
    sizes = [block] * (total // block) + ([total % block] if total % block else [])
    for i, size in enumerate(sizes):
        header = (1 if i == len(sizes) - 1 else 0) | (1 << 1) | (size << 3)  # an RLE block
        out += header.to_bytes(3, "little") + b"\x00"
    return bytes(out)


@pytest.mark.parametrize("declare", [True, False])
def test_zstd_chunk_bomb_is_refused_from_its_headers(work, declare) -> None:
    cube(work / "cube.zarr")
    chunk = work / "cube.zarr" / "image" / "c" / "0" / "1" / "0"
    chunk.write_bytes(zstd_bomb(2 << 30, declare=declare))
    assert chunk.stat().st_size < 70_000
    refused(
        work,
        _image_spec({"reader": "zarr-raster", "path": "cube.zarr"}),
        r"the chunk file \S*c/0/1/0 \(\d[\d,]* bytes of zstd\) would decompress to "
        r".*bytes, but a chunk of \(3, 32, 32\) float32 values is 12,288 bytes: a compression "
        r"bomb",
        "run",
    )


def test_blosc_chunk_bomb_is_refused_from_its_header(work) -> None:
    import zarr

    arr = zarr.create_array(
        str(work / "b.zarr"),
        shape=(3, 64, 64),
        chunks=(3, 32, 32),
        dtype="float32",
        compressors=zarr.codecs.BloscCodec(),
    )
    arr[...] = np.random.default_rng(7).random((3, 64, 64)).astype(np.float32)
    chunk = work / "b.zarr" / "c" / "0" / "0" / "0"
    head = bytearray(chunk.read_bytes())
    head[4:8] = (2 << 30).to_bytes(4, "little")  # nbytes: 2 GiB
    chunk.write_bytes(bytes(head))
    refused(
        work,
        _image_spec({"reader": "zarr-raster", "path": "b.zarr"}),
        r"bytes of blosc\) would decompress to 2,147,483,648 bytes",
    )


def test_chunk_file_larger_than_its_chunk(work) -> None:
    cube(work / "cube.zarr")
    with open(work / "cube.zarr" / "image" / "c" / "0" / "0" / "0", "r+b") as fh:
        fh.truncate(1 << 30)  # sparse
    refused(
        work,
        _image_spec({"reader": "zarr-raster", "path": "cube.zarr"}),
        r"c/0/0/0 is 1,073,741,824 bytes, more than a chunk of \(3, 32, 32\) float32 values "
        r"can take \(12,288 bytes\)",
    )


def test_bomb_check_passes_real_zstd_and_blosc_chunks() -> None:
    import numcodecs

    from dkernel.io.zarr_inputs import blosc_content_bound, zstd_content_bound

    rng = np.random.default_rng(8)
    for data in (np.zeros(10**6, np.float32), rng.random(10**6).astype(np.float32)):
        raw = data.tobytes()
        for checksum in (False, True):
            frame = numcodecs.Zstd(level=3, checksum=checksum).encode(raw)
            assert zstd_content_bound(io.BytesIO(frame), len(raw) + 2**17) == len(raw)
        packed = numcodecs.Blosc(cname="lz4").encode(raw)
        assert blosc_content_bound(io.BytesIO(packed)) == len(raw)
    with pytest.raises(ValueError, match="not a zstd frame"):
        zstd_content_bound(io.BytesIO(b"garbage!"), 100)


# ------------------------------------------------------------------------------------------
# more of the same groups
# ------------------------------------------------------------------------------------------


def test_label_image_of_another_shape(work) -> None:
    np.save(work / "image.npy", np.random.default_rng(0).random((20, 16, 3)).astype(np.float32))
    np.save(work / "labels.npy", np.zeros((16, 20), dtype=np.int64))
    data = {"reader": "npy-raster", "path": "image.npy", "labels_path": "labels.npy"}
    refused(
        work,
        _image_spec(data),
        r"the label image \S*labels\.npy has shape \(16, 20\); the image \S*image\.npy has 20 rows "
        r"× 16 columns",
    )


def test_scalar_labels_for_a_table(work) -> None:
    np.save(work / "x.npy", np.random.default_rng(0).normal(size=(30, 3)))
    np.save(work / "y.npy", np.array(3))
    refused(
        work,
        _spec(data={"reader": "npy", "path": "x.npy", "labels_path": "y.npy"}),
        r"labels in .*y\.npy have 0 entries but .*x\.npy has 30 rows",
    )


def test_dataset_file_that_is_a_fifo_is_not_found(work) -> None:
    folder = work / "data" / "uci_ecoli"
    folder.mkdir(parents=True)
    os.mkfifo(folder / "ecoli.data")
    refused(
        work,
        _spec(data={"reader": "ecoli", "data_dir": "data"}),
        r"ecoli\.data not found under",
        "run",
    )


def test_spec_with_windows_line_ends_still_reads(work) -> None:
    text = yaml.safe_dump(_spec(), sort_keys=False).replace("\n", "\r\n")
    accepted(work, text)


def test_spec_that_grew_is_never_read_past_the_cap(work) -> None:
    from dkernel.errors import SpecError
    from dkernel.jobs.spec import MAX_SPEC_BYTES, read_spec_text

    path = work / "job.yaml"
    path.write_bytes(b"name: x\n" + b"#" * (MAX_SPEC_BYTES - 100))
    assert read_spec_text(path).startswith("name: x")
    path.write_bytes(b"#" * (MAX_SPEC_BYTES + 1))
    with pytest.raises(SpecError, match=r"the job spec is 1,048,577 bytes"):
        read_spec_text(path)
