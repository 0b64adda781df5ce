"""Checks made where a file or response is opened, not only when the spec is validated
(issue 54, the rest): a data file swapped for a link to outside the data root after
validation, and an HTTP(S) Zarr chunk whose body never ends. Jobs and reads go through
``dkernel.cli.main``; each case asserts the exit code, the message, no traceback and bounded
time (and memory where a body never ends).
"""

from __future__ import annotations

import http.server
import io
import os
import subprocess
import sys
import threading
import time
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import numpy as np
import pytest
import yaml

from dkernel.cli import main

#: Seconds a refusal may take.
REFUSAL_S = 60.0


def _run(args: list[str]) -> tuple[int, str]:
    err, out = io.StringIO(), io.StringIO()
    t = time.perf_counter()
    with redirect_stderr(err), redirect_stdout(out):
        code = main(args)
    text = err.getvalue() + out.getvalue()
    assert "Traceback" not in text, text
    assert time.perf_counter() - t < REFUSAL_S, text
    return code, text


@pytest.fixture()
def rooted(tmp_path, monkeypatch):
    """``tmp_path/root`` as DKERNEL_DATA_ROOT (the job runs from it), ``tmp_path/outside``
    beside it holding a secret table."""
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    for var in ("DKERNEL_OUTPUT_ROOT", "DKERNEL_MAX_MEMORY"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("DKERNEL_DATA_ROOT", str(root))
    monkeypatch.chdir(root)
    return root, outside


def _swap_after_validation(monkeypatch, path: Path, target: Path) -> list[str]:
    """Replace ``path`` by a link to ``target`` right after the spec is validated (as another
    user could, between the check and the read); returns a list that records the swap."""
    import dkernel.jobs.prepare as prepare

    swapped: list[str] = []
    validate = prepare.load_spec

    def load_then_swap(spec):
        loaded = validate(spec)
        path.unlink()
        path.symlink_to(target)
        swapped.append(str(path))
        return loaded

    monkeypatch.setattr(prepare, "load_spec", load_then_swap)
    return swapped


def _write_job(root: Path, data: dict, method: str = "rbf-spectral", params=None) -> Path:
    body = {"name": "swap", "seed": 0, "method": method, "data": data}
    body |= {"params": params or {"n_clusters": 2}, "output": str(root / "out.zarr")}
    spec = root / "job.yaml"
    spec.write_text(yaml.safe_dump(body, sort_keys=False))
    return spec


def _table(path: Path, rows: int = 30) -> Path:
    rng = np.random.default_rng(0)
    np.savetxt(path, rng.normal(size=(rows, 3)), delimiter=",", fmt="%.4f")
    return path


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


@pytest.mark.parametrize("kind", ["csv", "npy", "geotiff"])
def test_a_file_swapped_for_a_link_after_validation_is_not_read(rooted, monkeypatch, kind):
    root, outside = rooted
    if kind == "csv":
        secret, data = _table(outside / "secret.csv"), {"reader": "csv", "path": "data.csv"}
        _table(root / "data.csv")
        job = _write_job(root, data)
    elif kind == "npy":
        rng = np.random.default_rng(0)
        np.save(outside / "secret.npy", rng.normal(size=(30, 3)))
        np.save(root / "data.npy", rng.normal(size=(30, 3)))
        secret, data = outside / "secret.npy", {"reader": "npy", "path": "data.npy"}
        job = _write_job(root, data)
    else:
        secret = _geotiff(outside / "secret.tif")
        _geotiff(root / "data.tif")
        params = {"n_clusters": 2, "write_geotiff": False, "write_png": False}
        job = _write_job(root, {"reader": "geotiff", "path": "data.tif"}, "mssc", params)
    name = {"csv": "data.csv", "npy": "data.npy", "geotiff": "data.tif"}[kind]
    swapped = _swap_after_validation(monkeypatch, root / name, secret)
    code, text = _run(["run", str(job), "--no-progress"])
    assert swapped, "the spec was not validated through prepare_job"
    assert code == 2, text
    assert "at the time of reading" in text and f"(a link to {secret})" in text, text
    assert f"outside the data root {root}" in text, text
    assert not (root / "out.zarr").exists()


def test_at_open_follows_dkernel_data_root_in_a_worker(tmp_path, monkeypatch):
    """Where no job set the data root (a Dask worker process), the environment's is checked."""
    from dkernel.errors import InvalidInputError
    from dkernel.io.files import at_open

    root = tmp_path / "root"
    root.mkdir()
    (tmp_path / "secret").write_text("x")
    (root / "link").symlink_to(tmp_path / "secret")
    monkeypatch.delenv("DKERNEL_DATA_ROOT", raising=False)
    assert at_open(root / "link") == str(root / "link")  # no root: as it is
    monkeypatch.setenv("DKERNEL_DATA_ROOT", str(root))
    with pytest.raises(InvalidInputError, match="at the time of reading"):
        at_open(root / "link", "data.path")


# ------------------------------------------------------------------------------------------
# an HTTP(S) Zarr chunk whose body never ends
# ------------------------------------------------------------------------------------------


class StoreWithEndlessChunk(http.server.SimpleHTTPRequestHandler):
    """Serves a folder; a request whose path ends with ``endless`` (a chunk key) gets a body
    that never ends, without a length."""

    endless = "/c/0/0/0"
    protocol_version = "HTTP/1.0"

    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:
        if not self.path.endswith(self.endless):
            return super().do_GET()
        self.send_response(200)
        self.end_headers()
        block = b"\x00" * 65536
        try:
            while True:
                self.wfile.write(block)
        except OSError:
            pass


@pytest.fixture()
def endless_chunk_server(tmp_path):
    """An HTTP server of ``tmp_path/site`` whose first chunk of every 3-D array never ends."""
    site = tmp_path / "site"
    site.mkdir()

    def handler(*args, **kwargs):
        return StoreWithEndlessChunk(*args, directory=str(site), **kwargs)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield site, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def _child(code: str, cwd: Path) -> tuple[int, str, float]:
    """``code`` run in a fresh interpreter (prints its peak RSS last): its exit code, its
    output and that peak in MiB."""
    tail = "\nimport resource; print('RSS', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    proc = subprocess.run(
        [sys.executable, "-c", code + tail],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    text = proc.stdout + proc.stderr
    rss = [line for line in proc.stdout.splitlines() if line.startswith("RSS ")]
    assert rss, text
    return proc.returncode, text, int(rss[-1].split()[1]) / 1024


#: Peak RSS (MiB) of a child that refused an endless chunk; reading one up to the old cap of
#: 1 GiB took more than that on its own.
ENDLESS_RSS_MIB = 800


def test_a_zarr_input_chunk_streaming_an_endless_body(endless_chunk_server, tmp_path):
    """`dkernel run` of an image job whose Zarr cube is read over HTTP: the first chunk's body
    never ends; the read stops at what the array's metadata allows for one chunk."""
    import xarray as xr

    site, url = endless_chunk_server
    rng = np.random.default_rng(0)
    cube = xr.Dataset(
        {"image": (("band", "y", "x"), rng.random((3, 24, 20)).astype(np.float32))},
        coords={"y": np.arange(24.0), "x": np.arange(20.0)},
    )
    cube.to_zarr(site / "cube.zarr", zarr_format=3, consolidated=True)
    params = {"n_clusters": 2, "write_geotiff": False, "write_png": False}
    data = {"reader": "zarr-raster", "path": f"{url}/cube.zarr", "variable": "image"}
    data["crs"] = "none"
    job = {"name": "endless", "seed": 0, "method": "mssc", "data": data, "params": params}
    job["output"] = str(tmp_path / "out.zarr")
    (tmp_path / "job.yaml").write_text(yaml.safe_dump(job, sort_keys=False))
    code = (
        "import sys\nfrom dkernel.cli import main\n"
        "rc = main(['run', 'job.yaml', '--no-progress'])\nprint('EXIT', rc)"
    )
    t = time.perf_counter()
    _, text, rss = _child(code, tmp_path)
    assert time.perf_counter() - t < 240
    assert "EXIT 2" in text, text
    assert "/cube.zarr/image/c/0/0/0 sent more than" in text, text
    assert "more than one stored chunk of the array" in text and "cube.zarr/image" in text
    assert "Traceback" not in text, text
    assert rss < ENDLESS_RSS_MIB, rss
    assert not (tmp_path / "out.zarr").exists()


def test_a_results_array_chunk_streaming_an_endless_body(endless_chunk_server, tmp_path):
    """open_results of a store over HTTP whose kernel chunk never ends: reading the array
    fails naming the chunk, in bounded memory."""
    import dask.array as da
    import xarray as xr

    from dkernel.storage.store import ResultsStore

    site, url = endless_chunk_server
    store = ResultsStore.create(site / "res.zarr", job={"name": "t"}, seed=0)
    values = da.from_array(np.ones((2, 6, 6)), chunks=(2, 6, 6))
    store.write("kernel", xr.Dataset({"kernel": (("k", "a", "b"), values)}))
    store.mark_complete()
    code = (
        "from dkernel.storage.store import open_results\n"
        f"tree = open_results({url + '/res.zarr'!r})\n"
        "try:\n    tree['kernel']['kernel'].values\nexcept Exception as e:\n"
        "    print('ERR', type(e).__name__, e)\n"
    )
    _, text, rss = _child(code, tmp_path)
    assert "ERR ResponseTooLarge" in text and "/res.zarr/kernel/kernel/c/0/0/0" in text, text
    assert "sent more than 66,688 bytes" in text, text  # 2 x (72 float64 values) + 64 KiB
    assert rss < ENDLESS_RSS_MIB, rss
