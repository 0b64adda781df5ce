"""Checks made where a file or response is opened, not only when the spec is validated
(issue 54, the rest): a data file swapped for a link to outside the data root after
validation, and an HTTP(S) Zarr chunk whose body never ends. Jobs and reads go through
``dkernel.cli.main``; each case asserts the exit code, the message, no traceback and bounded
time (and memory where a body never ends).
"""

from __future__ import annotations

import http.server
import io
import json
import os
import re
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
    """Replace ``path`` by a link to ``target`` once the spec is validated, just before the
    stage that opens the data (as another user could, between the check and the read);
    returns a list that records the swap."""
    import dkernel.jobs.stages as stages

    swapped: list[str] = []
    open_data = stages.open_data

    def swap_then_open(spec):
        path.unlink()
        path.symlink_to(target)
        swapped.append(str(path))
        return open_data(spec)

    monkeypatch.setattr(stages, "open_data", swap_then_open)
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


def _parquet_table(path: Path, rows: int = 30) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(0)
    pq.write_table(pa.table({f"f{j}": rng.normal(size=rows) for j in range(3)}), path)
    return path


@pytest.mark.parametrize("kind", ["csv", "npy", "geotiff", "parquet-folder"])
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
    elif kind == "parquet-folder":
        secret = _parquet_table(outside / "secret.parquet")
        (root / "table").mkdir()
        _parquet_table(root / "table" / "part-0.parquet")
        job = _write_job(root, {"reader": "parquet", "path": "table"})
    else:
        secret = _geotiff(outside / "secret.tif")
        _geotiff(root / "data.tif")
        params = {"n_clusters": 2, "write_geotiff": False, "write_png": False}
        job = _write_job(root, {"reader": "geotiff", "path": "data.tif"}, "mssc", params)
    name = {
        "csv": "data.csv",
        "npy": "data.npy",
        "geotiff": "data.tif",
        "parquet-folder": "table/part-0.parquet",
    }[kind]
    swapped = _swap_after_validation(monkeypatch, root / name, secret)
    code, text = _run(["run", str(job), "--no-progress"])
    assert swapped, (
        f"the data were not opened by the stages (dkernel.jobs.stages.open_data): {text}"
    )
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
    assert at_open(root / "link", task=True) == str(root / "link")  # no root: as it is
    monkeypatch.setenv("DKERNEL_DATA_ROOT", str(root))
    assert at_open(root / "link") == str(root / "link")  # not a task's data: the job spec
    with pytest.raises(InvalidInputError, match="at the time of reading"):
        at_open(root / "link", "data.path", task=True)


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
    # VmHWM is this process's own peak: ru_maxrss keeps the peak of the process it was
    # spawned from (a pytest worker of a gigabyte) across the exec
    tail = (
        "\nfrom pathlib import Path\n"
        "hwm = [l for l in Path('/proc/self/status').read_text().splitlines() if "
        "l.startswith('VmHWM')]\nprint('RSS', hwm[0].split()[1])"
    )
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


# ------------------------------------------------------------------------------------------
# a fresh probe of the round's surfaces: tables, STAC, object stores, clusters, data roots
# ------------------------------------------------------------------------------------------


def _csv_text(rows: int = 30) -> str:
    rng = np.random.default_rng(0)
    return "\n".join(",".join(map(str, r)) for r in rng.normal(size=(rows, 3)).round(3)) + "\n"


def _parquet(path: Path, **columns) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table(columns), path)


def _stac(path: Path, assets: dict) -> None:
    doc = {"type": "Feature", "stac_version": "1.0.0", "id": "x", "geometry": None}
    doc |= {"properties": {"datetime": "2020-01-01T00:00:00Z"}, "links": [], "assets": assets}
    path.write_text(json.dumps(doc))


def _build(case: str, work: Path) -> tuple[str, dict, dict]:
    """(command, data, spec top-level extras) of a probe case, its files written in ``work``."""
    rng = np.random.default_rng(0)
    good = _csv_text()
    (work / "good.csv").write_text(good)
    image = {"method": "mssc", "params": {"n_clusters": 2, "write_geotiff": False}}
    image["params"]["write_png"] = False
    if case == "csv_nul_byte":
        (work / "t.csv").write_text(good.replace("0.", "0\x00.", 1))
    elif case == "csv_utf16":
        (work / "t.csv").write_bytes(good.encode("utf-16"))
    elif case == "csv_200k_empty_header_fields":
        (work / "t.csv").write_text("," * 200_000 + "\n" + good)
    elif case == "csv_path_is_a_directory":
        (work / "t.csv").mkdir()
    elif case == "csv_truncated_gzip":
        import gzip

        (work / "t.csv.gz").write_bytes(gzip.compress(good.encode() * 50)[:200])
        return "run", {"reader": "csv", "path": "t.csv.gz"}, {}
    elif case == "csv_newline_delimiter":
        return "run", {"reader": "csv", "path": "good.csv", "delimiter": "\n"}, {}
    if case.startswith("csv_"):
        return "run", {"reader": "csv", "path": "t.csv"}, {}
    if case == "parquet_that_is_a_csv":
        (work / "t.parquet").write_text(good)
    elif case == "parquet_of_zero_rows":
        _parquet(work / "t.parquet", a=np.zeros(0), b=np.zeros(0))
    elif case == "parquet_empty_folder":
        (work / "t.parquet").mkdir()
    elif case == "parquet_list_column":
        _parquet(work / "t.parquet", a=[[1.0, 2.0]] * 20, b=list(rng.normal(size=20)))
    elif case == "parquet_text_columns":
        _parquet(work / "t.parquet", a=["x"] * 20, b=["y"] * 20)
    if case.startswith("parquet_"):
        return "run", {"reader": "parquet", "path": "t.parquet"}, {}
    if case == "stac_json_array":
        (work / "item.json").write_text("[1, 2, 3]")
    elif case == "stac_nested_100k_deep":
        (work / "item.json").write_text("[" * 100_000 + "]" * 100_000)
    elif case == "stac_asset_with_empty_href":
        _stac(work / "item.json", {"b1": {"href": ""}})
    elif case == "stac_item_without_assets":
        _stac(work / "item.json", {})
    if case.startswith("stac_"):
        return "run", {"reader": "stac", "path": "item.json"}, image
    if case == "npy_complex_values":
        np.save(work / "t.npy", rng.normal(size=(30, 3)) + 1j)
    elif case == "npy_header_declaring_a_trillion_values":
        with open(work / "t.npy", "wb") as fh:
            header = {"descr": "<f8", "fortran_order": False, "shape": (10**6, 10**6)}
            np.lib.format.write_array_header_1_0(fh, header)
            fh.write(b"\0" * 800)
    if case.startswith("npy_"):
        return "run", {"reader": "npy", "path": "t.npy"}, {}
    if case == "store_endpoint_a_file_url":
        extras = {"output": "s3://bkt/x.zarr", "store_options": {"endpoint": "file:///etc"}}
        return "run", {"reader": "csv", "path": "good.csv"}, extras
    if case in (
        "scheduler_http_scheme",
        "scheduler_port_out_of_range",
        "output_root_memory",
        "data_root_that_does_not_exist",
    ):
        return "run", {"reader": "csv", "path": "good.csv"}, {}
    raise AssertionError(case)


#: case: (exit code, a pattern of the message). Each was tried against this tree (issue 54's
#: fresh probe); none printed a traceback or ran unbounded.
PROBE = {
    "csv_nul_byte": (2, r"row 1, column 0 holds a 6-character text, which is not a number"),
    "csv_utf16": (2, r"'utf-8' codec can't decode.*Check the file and data\.encoding"),
    "csv_200k_empty_header_fields": (2, r"its first line has 200,001 fields; a table of at most"),
    "csv_path_is_a_directory": (2, r"it is a directory, and dkernel reads regular files only"),
    "csv_truncated_gzip": (2, r"could not decompress .*t\.csv\.gz \(gzip\).*EOFError"),
    "csv_newline_delimiter": (2, r"data\.delimiter '\\n' cannot separate fields"),
    "parquet_that_is_a_csv": (2, r"could not read .*t\.parquet as Parquet: Parquet magic bytes"),
    "parquet_of_zero_rows": (2, r"t\.parquet is empty \(shape \(0, 2\)\)"),
    "parquet_empty_folder": (2, r"t\.parquet is empty \(shape \(0, 0\)\)"),
    "parquet_list_column": (2, r"column 'a' holds list<element: double>, not numbers"),
    "parquet_text_columns": (2, r"column 'a' holds string, not numbers; list the feature"),
    "stac_json_array": (2, r"is not a STAC item or item collection"),
    "stac_nested_100k_deep": (2, r"could not read the STAC document .*RecursionError"),
    "stac_asset_with_empty_href": (2, r"asset 'b1' of the STAC item 'x' has an empty href"),
    "stac_item_without_assets": (2, r"the STAC item 'x' has no assets, so there is nothing"),
    "npy_complex_values": (2, r"holds <c16 \(complex128\) values; dkernel needs a numeric"),
    "npy_header_declaring_a_trillion_values": (2, r"could not read .*t\.npy as a \.npy array"),
    "store_endpoint_a_file_url": (2, r"cannot write the results store s3://bkt/x\.zarr .*"),
    "scheduler_http_scheme": (2, r"could not reach the Dask scheduler at http://127\.0\.0\.1:1"),
    "scheduler_port_out_of_range": (2, r"could not reach the Dask scheduler at tcp://:99999"),
    "output_root_memory": (2, r"a memory:// store lives in this process's memory only"),
    "data_root_that_does_not_exist": (2, r"the data root /nonexistent/dk-root \(DKERNEL_DATA_"),
}


@pytest.mark.parametrize("case", sorted(PROBE))
def test_probe_case(case, tmp_path, monkeypatch):
    for var in ("DKERNEL_OUTPUT_ROOT", "DKERNEL_DATA_ROOT", "DKERNEL_MAX_MEMORY"):
        monkeypatch.delenv(var, raising=False)
    for var, value in (("AWS_ACCESS_KEY_ID", "x"), ("AWS_SECRET_ACCESS_KEY", "x")):
        monkeypatch.setenv(var, os.environ.get(var, value))
    monkeypatch.chdir(tmp_path)
    if case == "data_root_that_does_not_exist":
        monkeypatch.setenv("DKERNEL_DATA_ROOT", "/nonexistent/dk-root")
    command, data, extras = _build(case, tmp_path)
    body = {"name": "probe", "seed": 0, "method": "rbf-spectral", "data": data}
    body |= {"params": {"n_clusters": 2}, "output": str(tmp_path / "out.zarr")} | extras
    spec = tmp_path / "job.yaml"
    spec.write_text(yaml.safe_dump(body, sort_keys=False))
    args = [command, str(spec), "--no-progress"]
    if case == "scheduler_http_scheme":
        args = ["submit", str(spec), "--scheduler", "http://127.0.0.1:1", "--timeout", "3"]
    elif case == "scheduler_port_out_of_range":
        args = ["submit", str(spec), "--scheduler", "tcp://:99999", "--timeout", "3"]
    elif case == "output_root_memory":
        args += ["--output-root", "memory://x"]
    code, text = _run(args)
    expected, pattern = PROBE[case]
    assert code == expected, text
    assert re.search(pattern, text, re.S), text
    assert not (tmp_path / "out.zarr").exists()


def test_the_job_spec_is_not_data_under_a_data_root(tmp_path, monkeypatch):
    """The spec itself may lie outside the data root (only the data it names is confined),
    and a data root that is itself a link confines to where it leads."""
    real, spec_dir = tmp_path / "real", tmp_path / "specs"
    real.mkdir()
    spec_dir.mkdir()
    (real / "d.csv").write_text(_csv_text())
    (tmp_path / "root").symlink_to(real)
    monkeypatch.setenv("DKERNEL_DATA_ROOT", str(tmp_path / "root"))
    monkeypatch.delenv("DKERNEL_OUTPUT_ROOT", raising=False)
    body = {"name": "p", "seed": 0, "method": "rbf-spectral", "params": {"n_clusters": 2}}
    body |= {"data": {"reader": "csv", "path": str(tmp_path / "root" / "d.csv")}}
    body |= {"output": str(spec_dir / "out.zarr")}
    (spec_dir / "job.yaml").write_text(yaml.safe_dump(body))
    code, text = _run(["validate", str(spec_dir / "job.yaml")])
    assert code == 0, text
    body["data"]["path"] = str(real / ".." / "specs" / "job.yaml")
    (spec_dir / "job.yaml").write_text(yaml.safe_dump(body))
    code, text = _run(["validate", str(spec_dir / "job.yaml")])
    assert code == 2 and f"outside the data root {real}" in text, text
