"""The data root checked where a file is opened, for the files a reader does not name itself
(issue 54, what was left): every metadata and chunk file of a local Zarr store, read lazily by
the job's tasks, and the sidecars GDAL would read beside a GeoTIFF. Each case plants a link to
outside the data root after the spec was validated, runs ``dkernel run`` through
``dkernel.cli.main`` and asserts the exit code, the message, no traceback and a hang guard.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

from tests.cli_run import run_cli
from tests.limits import REFUSAL_S


@pytest.fixture()
def rooted(tmp_path, monkeypatch):
    """``tmp_path/root`` as DKERNEL_DATA_ROOT (the job runs from it), ``tmp_path/outside``
    beside it."""
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    for var in ("DKERNEL_OUTPUT_ROOT", "DKERNEL_MAX_MEMORY"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("DKERNEL_DATA_ROOT", str(root))
    monkeypatch.chdir(root)
    return root, outside


def _write_job(root: Path, data: dict, *, data_root: Path | None = None) -> Path:
    """A job clustering ``data`` (mssc) into ``root/out.zarr``; ``data_root`` as the spec's
    ``runtime.data_root``."""
    params = {"n_clusters": 2, "write_geotiff": False, "write_png": False}
    body = {"name": "swap", "seed": 0, "method": "mssc", "data": data, "params": params}
    body["output"] = str(root / "out.zarr")
    if data_root is not None:
        body["runtime"] = {"data_root": str(data_root)}
    spec = root / "job.yaml"
    spec.write_text(yaml.safe_dump(body, sort_keys=False))
    return spec


def _cube(path: Path, seed: int) -> Path:
    """A small georeferenced cube (3 bands, 24 × 20) in a Zarr store, rows in chunks of 8."""
    import rioxarray  # noqa: F401  (the .rio accessor)
    import xarray as xr

    rng = np.random.default_rng(seed)
    image = xr.DataArray(
        rng.normal(size=(3, 24, 20)).astype(np.float32),
        dims=("band", "y", "x"),
        coords={
            "band": [1, 2, 3],
            "y": 4200000.0 - 30.0 * np.arange(24),
            "x": 500000.0 + 30.0 * np.arange(20),
        },
        name="image",
    ).rio.write_crs("EPSG:32618")
    image.to_dataset().chunk({"y": 8}).to_zarr(path, mode="w", zarr_format=3, consolidated=False)
    return path


#: A chunk of the cube's image (rows 8-15, every band and column).
CHUNK = "cube.zarr/image/c/0/1/0"


def _swap_in(monkeypatch, link: Path, target: Path, *, when: str) -> list[str]:
    """Replace ``link`` by a link to ``target`` just ``before`` the stage that opens the data
    (after validation) or just ``after`` it (the chunks are then read by the compute's
    tasks); returns a list recording the swap."""
    import dkernel.jobs.stages as stages

    swapped: list[str] = []
    open_data = stages.open_data

    def swap() -> None:
        link.unlink()
        link.symlink_to(target)
        swapped.append(str(link))

    def hooked(spec):
        if when == "before":
            swap()
            return open_data(spec)
        loaded = open_data(spec)
        swap()
        return loaded

    monkeypatch.setattr(stages, "open_data", hooked)
    return swapped


@pytest.mark.parametrize(
    ("when", "workers"),
    [("before", []), ("after", []), ("after", ["--workers", "1"])],
    ids=["before-open", "in-a-task", "in-a-process-worker"],
)
def test_a_zarr_chunk_swapped_for_a_link_out_of_the_root_is_not_read(
    rooted, monkeypatch, when, workers
):
    """A chunk of a local input store replaced by a link to a chunk outside the data root
    (a valid chunk of another cube: read, it would go unnoticed), before the data are opened
    or after, when only the tasks computing the job read it (on this process's threads, or
    in a process worker, which gets the job's data root with the store): refused where it
    is opened."""
    root, outside = rooted
    if workers:  # the worker must not find the root in its environment: the store carries it
        monkeypatch.delenv("DKERNEL_DATA_ROOT")
    _cube(root / "cube.zarr", seed=0)
    _cube(outside / "secret.zarr", seed=1)
    secret = outside / "secret.zarr" / "image" / "c" / "0" / "1" / "0"
    job = _write_job(root, {"reader": "zarr-raster", "path": "cube.zarr"}, data_root=root)
    swapped = _swap_in(monkeypatch, root / CHUNK, secret, when=when)
    code, text = run_cli(["run", str(job), "--no-progress", *workers], limit=REFUSAL_S)
    assert swapped, f"the data were not opened by dkernel.jobs.stages.open_data: {text}"
    assert code == 2, text
    assert "at the time of reading" in text and f"(a link to {secret})" in text, text
    assert f"outside the data root {root}" in text, text


def test_a_zarr_table_chunk_swapped_for_a_link_out_of_the_root_is_not_read(rooted, monkeypatch):
    """Reader ``zarr`` (a table of rows × features) reads its chunks in the job's tasks too:
    a chunk swapped once the data were opened is refused where it is opened."""
    import zarr

    root, outside = rooted
    rng = np.random.default_rng(0)
    for folder in (root, outside):
        table = zarr.create_array(
            str(folder / "table.zarr"), shape=(40, 3), chunks=(10, 3), dtype="float64"
        )
        table[...] = rng.normal(size=(40, 3))
    secret = outside / "table.zarr" / "c" / "1" / "0"
    body = {"name": "swap", "seed": 0, "method": "rbf-spectral", "params": {"n_clusters": 2}}
    body |= {"data": {"reader": "zarr", "path": "table.zarr"}, "output": str(root / "out.zarr")}
    job = root / "job.yaml"
    job.write_text(yaml.safe_dump(body, sort_keys=False))
    swapped = _swap_in(monkeypatch, root / "table.zarr" / "c" / "1" / "0", secret, when="after")
    code, text = run_cli(["run", str(job), "--no-progress"], limit=REFUSAL_S)
    assert swapped, text
    assert code == 2, text
    assert "at the time of reading" in text and f"(a link to {secret})" in text, text


def test_a_zarr_metadata_file_swapped_for_a_link_out_of_the_root_is_not_read(rooted, monkeypatch):
    root, outside = rooted
    _cube(root / "cube.zarr", seed=0)
    _cube(outside / "secret.zarr", seed=1)
    secret = outside / "secret.zarr" / "image" / "zarr.json"
    job = _write_job(root, {"reader": "zarr-raster", "path": "cube.zarr"})
    swapped = _swap_in(
        monkeypatch, root / "cube.zarr" / "image" / "zarr.json", secret, when="before"
    )
    code, text = run_cli(["run", str(job), "--no-progress"], limit=REFUSAL_S)
    assert swapped, text
    assert code == 2, text
    assert "at the time of reading" in text and f"(a link to {secret})" in text, text


def test_a_zarr_chunk_folder_swapped_for_a_link_out_of_the_root_is_not_read(rooted, monkeypatch):
    """A folder of chunks (``image/c/0/1``) replaced by a link to one outside: every chunk
    below it resolves outside, and is refused where it is opened."""
    root, outside = rooted
    _cube(root / "cube.zarr", seed=0)
    _cube(outside / "secret.zarr", seed=1)
    folder = root / "cube.zarr" / "image" / "c" / "0" / "1"
    secret = outside / "secret.zarr" / "image" / "c" / "0" / "1"
    job = _write_job(root, {"reader": "zarr-raster", "path": "cube.zarr"})
    import dkernel.jobs.stages as stages

    open_data = stages.open_data

    def swap_after_open(spec):
        loaded = open_data(spec)
        shutil.rmtree(folder)
        folder.symlink_to(secret)
        return loaded

    monkeypatch.setattr(stages, "open_data", swap_after_open)
    code, text = run_cli(["run", str(job), "--no-progress"], limit=REFUSAL_S)
    assert code == 2, text
    assert "at the time of reading" in text and f"{secret}" in text, text
    assert f"outside the data root {root}" in text, text


def test_a_zarr_chunk_swapped_for_a_fifo_after_opening_fails_instead_of_hanging(
    rooted, monkeypatch
):
    """A chunk replaced by a FIFO inside the root once the store was checked: the read
    refuses it from ``fstat`` of the descriptor opened without blocking."""
    root, _ = rooted
    _cube(root / "cube.zarr", seed=0)
    job = _write_job(root, {"reader": "zarr-raster", "path": "cube.zarr"})
    import dkernel.jobs.stages as stages

    open_data = stages.open_data
    chunk = root / CHUNK

    def swap_after_open(spec):
        loaded = open_data(spec)
        chunk.unlink()
        os.mkfifo(chunk)
        return loaded

    monkeypatch.setattr(stages, "open_data", swap_after_open)
    code, text = run_cli(["run", str(job), "--no-progress"], limit=REFUSAL_S)
    assert code == 2, text
    assert f"could not read {chunk}: it is a FIFO (named pipe)" in text, text


def test_a_zarr_store_inside_the_root_runs(rooted):
    root, _ = rooted
    _cube(root / "cube.zarr", seed=0)
    job = _write_job(root, {"reader": "zarr-raster", "path": "cube.zarr"})
    code, text = run_cli(["run", str(job), "--no-progress"], limit=REFUSAL_S)
    assert code == 0, text


# ------------------------------------------------------------------------------------------
# GDAL's sidecars: never opened
# ------------------------------------------------------------------------------------------


def _geotiff(path: Path) -> Path:
    import rasterio
    from rasterio.transform import from_origin

    rng = np.random.default_rng(0)
    data = rng.normal(size=(3, 24, 20)).astype(np.float32)
    profile = dict(driver="GTiff", width=20, height=24, count=3, dtype="float32")
    profile |= dict(crs="EPSG:32618", transform=from_origin(500000.0, 4200000.0, 30.0, 30.0))
    with rasterio.open(path, "w", **profile) as dst:
        dst.write(data)
    return path


#: The sidecars GDAL's GTiff driver looks up by name beside ``data.tif`` (PAM metadata,
#: external overview and mask, world files, DigitalGlobe / GeoEye metadata). With its sibling
#: lookup on (``GDAL_DISABLE_READDIR_ON_OPEN=TRUE``) it opened the .ovr, .msk, .IMD and .RPB of
#: these in a plain open and read (measured on GDAL 3.10).
SIDECARS = (
    "data.tif.aux.xml",
    "data.aux.xml",
    "data.tif.ovr",
    "data.ovr",
    "data.tif.msk",
    "data.tfw",
    "data.tifw",
    "data.wld",
    "data.IMD",
    "data.RPB",
    "data_RPC.TXT",
)

#: Watches FIFOs: a FIFO can be opened for writing without blocking only while a reader has
#: it open, so each name opened is recorded (then closed: the reader sees its end).
_WATCHER = """
import os, sys, time
out, names = sys.argv[1], sys.argv[2:]
while True:
    for name in names:
        try:
            fd = os.open(name, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:
            continue
        with open(out, "a") as fh:
            fh.write(name + "\\n")
        os.close(fd)
    time.sleep(0.005)
"""


def test_gdal_sidecars_planted_after_validation_are_never_opened(rooted, monkeypatch, tmp_path):
    """Every sidecar name GDAL knows planted beside the GeoTIFF after validation, each a link
    to a FIFO outside the data root: GDAL opens none of them (a watcher process records any
    open), and the job runs on the GeoTIFF alone."""
    root, outside = rooted
    _geotiff(root / "data.tif")
    job = _write_job(root, {"reader": "geotiff", "path": "data.tif"})
    fifos = []
    for name in SIDECARS:
        fifo = outside / name
        os.mkfifo(fifo)
        fifos.append(str(fifo))
    seen = tmp_path / "opened.txt"
    watcher = subprocess.Popen([sys.executable, "-c", _WATCHER, str(seen), *fifos])
    import dkernel.jobs.stages as stages

    open_data = stages.open_data
    planted: list[str] = []

    def plant_then_open(spec):
        for name in SIDECARS:
            (root / name).symlink_to(outside / name)
            planted.append(name)
        return open_data(spec)

    monkeypatch.setattr(stages, "open_data", plant_then_open)
    try:
        code, text = run_cli(["run", str(job), "--no-progress"], limit=REFUSAL_S)
        time.sleep(0.1)
    finally:
        watcher.kill()
        watcher.wait()
    assert planted == list(SIDECARS), text
    opened = seen.read_text().split() if seen.exists() else []
    assert opened == [], f"GDAL opened {opened}"
    assert code == 0, text


def test_gdal_sidecar_lookup_is_off_for_local_rasters():
    """The one setting the local raster reads run under (``dkernel.io.gdal.NETWORK_OFF``, set
    by ``network_off`` / ``raster_env``): GDAL takes the folder for empty."""
    from dkernel.io.gdal import NETWORK_OFF

    assert NETWORK_OFF["GDAL_DISABLE_READDIR_ON_OPEN"] == "EMPTY_DIR"
