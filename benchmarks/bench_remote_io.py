"""Inputs where they live (issue 30): remote GeoTIFF reads and the pandas CSV reader.

1. **COGs from a loopback S3 server vs local disk.** A moto S3 server on 127.0.0.1, wrapped in
   a WSGI middleware that counts the bytes of every GET response, serves the demo scene
   (``RGB.byte.tif``, 718 × 791 × 3) and a synthetic 10⁷-pixel COG (3 uint16 bands, 512 × 512
   tiles, DEFLATE). For each, one pass over the image (``open_geotiff(...).data`` computed
   with the threaded scheduler) is timed from ``s3://`` and from the local file, and the bytes
   the server sent are compared with the file size (tile-aligned range reads: ≤ 1.2× per
   pass).
2. **CSV.** A 4·10⁵-row × 8-column CSV read by reader ``csv`` (``load_csv``) and by
   ``pandas.read_csv(...).to_numpy()``, each in a fresh process: wall time of the call and
   peak resident memory above the process's baseline (``VmHWM - VmRSS`` before the call).

Usage::

    python benchmarks/bench_remote_io.py [--pixels 10000000] [--rows 400000]
        [--out benchmarks/results/remote_io.md]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np


class CountingApp:
    """WSGI middleware: the bytes of each GET response body, by path."""

    def __init__(self, app) -> None:
        self.app = app
        self.sent: dict[str, int] = {}
        self.requests: dict[str, int] = {}
        self.lock = threading.Lock()

    def __call__(self, environ, start_response):
        body = self.app(environ, start_response)
        if environ.get("REQUEST_METHOD") != "GET":
            return body
        path = environ.get("PATH_INFO", "")
        chunks = list(body)
        with self.lock:
            self.sent[path] = self.sent.get(path, 0) + sum(len(c) for c in chunks)
            self.requests[path] = self.requests.get(path, 0) + 1
        return chunks

    def reset(self) -> None:
        with self.lock:
            self.sent.clear()
            self.requests.clear()


def start_s3() -> tuple[str, CountingApp, object]:
    from moto.server import DomainDispatcherApplication, create_backend_app
    from werkzeug.serving import WSGIRequestHandler, make_server

    class Quiet(WSGIRequestHandler):
        def log_request(self, *args, **kwargs) -> None:
            pass

    app = CountingApp(DomainDispatcherApplication(create_backend_app))
    server = make_server("127.0.0.1", 0, app, threaded=True, request_handler=Quiet)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    host, port = server.server_address[:2]
    os.environ.update(
        {
            "AWS_ACCESS_KEY_ID": "bench",
            "AWS_SECRET_ACCESS_KEY": "bench",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_ENDPOINT_URL": f"http://{host}:{port}",
            "AWS_S3_ENDPOINT": f"{host}:{port}",
            "AWS_HTTPS": "NO",
            "AWS_VIRTUAL_HOSTING": "FALSE",
        }
    )
    return f"http://{host}:{port}", app, server


def synthetic_cog(path: Path, pixels: int) -> None:
    """A ``side × side`` 3-band uint16 COG of smooth regions plus noise, 512-pixel tiles."""
    import rioxarray  # noqa: F401
    import xarray as xr

    side = int(round(pixels**0.5))
    rng = np.random.default_rng(0)
    yy, xx = np.mgrid[0:side, 0:side].astype(np.float32) / side
    bands = [
        (1000 * (1 + np.sin(6 * xx + k) * np.cos(4 * yy - k)) + rng.normal(0, 20, (side, side)))
        .clip(0, 65535)
        .astype(np.uint16)
        for k in range(3)
    ]
    cube = xr.DataArray(
        np.stack(bands),
        dims=("band", "y", "x"),
        coords={
            "band": [1, 2, 3],
            "y": 4_000_000.0 - 10.0 * (np.arange(side) + 0.5),
            "x": 500_000.0 + 10.0 * (np.arange(side) + 0.5),
        },
    ).rio.write_crs("EPSG:32618")
    cube.rio.to_raster(path, driver="COG", blocksize=512, compress="deflate")


def one_pass(path: str) -> float:
    import dask

    from dkernel.io.raster import open_geotiff

    start = time.perf_counter()
    image = open_geotiff(path)
    dask.compute(image.data.sum(), scheduler="threads", num_workers=2)
    return time.perf_counter() - start


def bench_cog(name: str, local: Path, bucket: str, fs, app: CountingApp) -> dict:
    key = f"{bucket}/{local.name}"
    fs.put(str(local), key)
    size = local.stat().st_size
    one_pass(str(local))  # warm imports and the OS cache
    local_s = min(one_pass(str(local)) for _ in range(2))
    remote_s, sent, requests = [], [], []
    for _ in range(2):
        app.reset()
        remote_s.append(one_pass(f"s3://{key}"))
        sent.append(app.sent.get(f"/{key}", 0))
        requests.append(app.requests.get(f"/{key}", 0))
    return {
        "image": name,
        "file_bytes": size,
        "local_s": local_s,
        "s3_s": min(remote_s),
        "ratio": min(remote_s) / local_s,
        "bytes_sent": max(sent),
        "bytes_per_file": max(sent) / size,
        "get_requests": max(requests),
    }


CSV_CHILD = """
import json, sys, time
import numpy as np, pandas as pd
from dkernel.io.readers.tables import load_csv
def rss(field):
    for line in open('/proc/self/status'):
        if line.startswith(field):
            return int(line.split()[1]) * 1024
which, path = sys.argv[1], sys.argv[2]
base = rss('VmRSS:')
start = time.perf_counter()
if which == 'dkernel':
    X = load_csv(path).X
else:
    X = pd.read_csv(path, header=None).to_numpy(dtype=np.float64)
seconds = time.perf_counter() - start
print(json.dumps({'seconds': seconds, 'peak': rss('VmHWM:') - base, 'shape': list(X.shape)}))
"""


def bench_csv(rows: int, folder: Path) -> list[dict]:
    import pandas as pd

    rng = np.random.default_rng(1)
    path = folder / "table.csv"
    pd.DataFrame(rng.normal(size=(rows, 8)).round(6)).to_csv(path, header=False, index=False)
    out = []
    runs: dict[str, list] = {"pandas": [], "dkernel": []}
    for _ in range(5):  # alternated, best of five: the machine is shared
        for which in runs:
            proc = subprocess.run(
                [sys.executable, "-c", CSV_CHILD, which, str(path)],
                capture_output=True,
                text=True,
                check=True,
                env={**os.environ, "OMP_NUM_THREADS": "1"},
            )
            runs[which].append(json.loads(proc.stdout.strip().splitlines()[-1]))
    for which in ("pandas", "dkernel"):
        out.append(
            {
                "reader": which,
                "rows": rows,
                "file_bytes": path.stat().st_size,
                "seconds": min(r["seconds"] for r in runs[which]),
                "peak_bytes": min(r["peak"] for r in runs[which]),
            }
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pixels", type=int, default=10_000_000)
    parser.add_argument("--rows", type=int, default=400_000)
    parser.add_argument("--out", default="benchmarks/results/remote_io.md")
    args = parser.parse_args()

    import s3fs

    from dkernel.io.gdal import limit_gdal_cache
    from dkernel.io.raster import package_data_path

    limit_gdal_cache()
    endpoint, app, server = start_s3()
    fs = s3fs.S3FileSystem(client_kwargs={"endpoint_url": endpoint}, skip_instance_cache=True)
    fs.mkdir("bench")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        cog = folder / "synthetic.tif"
        synthetic_cog(cog, args.pixels)
        cogs = [
            bench_cog(
                "demo scene RGB.byte.tif", package_data_path("RGB.byte.tif"), "bench", fs, app
            ),
            bench_cog(f"synthetic COG {args.pixels:.0e} px", cog, "bench", fs, app),
        ]
        tables = bench_csv(args.rows, folder)
    server.shutdown()

    lines = [
        "# Remote inputs (issue 30)",
        "",
        f"`python benchmarks/bench_remote_io.py --pixels {args.pixels} --rows {args.rows}`; "
        "loopback moto S3 server, threaded scheduler (2 threads), GDAL cache 16 MiB.",
        "",
        "| image | file MB | local s | S3 s | S3 / local | bytes sent / file | GETs |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in cogs:
        lines.append(
            f"| {r['image']} | {r['file_bytes'] / 1e6:.1f} | {r['local_s']:.2f} | "
            f"{r['s3_s']:.2f} | {r['ratio']:.2f} | {r['bytes_per_file']:.3f} | "
            f"{r['get_requests']} |"
        )
    pandas_row = tables[0]
    lines += [
        "",
        "| CSV reader | rows | file MB | s | peak MB | time / pandas | memory / pandas |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in tables:
        lines.append(
            f"| {r['reader']} | {r['rows']:,} | {r['file_bytes'] / 1e6:.1f} | {r['seconds']:.2f} "
            f"| {r['peak_bytes'] / 1e6:.0f} | {r['seconds'] / pandas_row['seconds']:.2f} | "
            f"{r['peak_bytes'] / max(pandas_row['peak_bytes'], 1):.2f} |"
        )
    text = "\n".join(lines) + "\n"
    print(text)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    out.with_suffix(".json").write_text(json.dumps({"cogs": cogs, "csv": tables}, indent=2))


if __name__ == "__main__":
    main()
