"""Scale-out on loopback: the PCK ensemble fit and the MSSC stream on 1 and 2 worker processes.

The same machine runs a LocalCluster of ``w`` worker processes (1 thread each) for every ``w``
in ``--workers``; each cluster runs

* the ``mssc`` job at its defaults on a synthetic 6-band uint16 GeoTIFF scene
  (``bench_full_tile.write_scene``: regions, gradients and noise, 512-tiled), and
* ``ProbabilisticClusterKernel()`` (PCK) at its defaults (Q = G = 30) fitted to N Gaussian blobs in p dimensions,

and records wall time, speed-up ``t(1) / t(w)``, efficiency ``speed-up / w``, the tasks the
workers executed and the bytes the workers sent, to each other and to the client
(``transfer_outgoing_bytes_total``), per pixel for MSSC. With ``--tables``, each cluster also
runs the table jobs (``spectral-clustering``, ``kernel-kmeans``, ``kernel-decomposition`` at
their defaults with the true k) on a Zarr table of ``--table-rows`` 10-D blobs
(``bench_past_one_machine.write_table``) and records their bytes sent per row. With 16 cores (the ``device`` machine) run ``--workers 1 2 4 8``; on this
2-core machine 1 and 2 workers is all there is. The model of task counts and bytes per pixel
these numbers check is in ``docs/scale_out.md``.

Run: ``python benchmarks/bench_scale_out.py [--quick] [--workers 1 2] [--side 2000] [--tables]``
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"
sys.path.insert(0, str(Path(__file__).resolve().parent))


def _worker_counters(dask_worker) -> tuple[int, int]:
    return dask_worker.state.executed_count, dask_worker.transfer_outgoing_bytes_total


def _counters(client) -> tuple[int, int]:
    per_worker = client.run(_worker_counters).values()
    return sum(t for t, _ in per_worker), sum(b for _, b in per_worker)


def run_spec(client, spec: dict, out: Path) -> dict:
    """Run the job ``spec`` (its output ``out``) on ``client``: wall time, tasks, bytes sent."""
    import yaml

    from dkernel.jobs.runner import run_job

    path = out.with_suffix(".yaml")
    path.write_text(yaml.safe_dump({**spec, "seed": 0, "output": str(out)}))
    tasks0, bytes0 = _counters(client)
    t = time.perf_counter()
    run_job(path, client=client, overwrite=True, progress=False, quiet=True)
    wall = time.perf_counter() - t
    tasks1, bytes1 = _counters(client)
    return {"seconds": wall, "tasks": tasks1 - tasks0, "bytes_moved": bytes1 - bytes0}


def run_mssc(client, tif: Path, out: Path) -> dict:
    spec = {
        "name": "scale-out-mssc",
        "data": {"reader": "geotiff", "path": str(tif)},
        "method": "mssc",
        "params": {"n_clusters": 6, "write_png": False, "write_geotiff": False},
    }
    return run_spec(client, spec, out)


TABLE_METHODS = ("spectral-clustering", "kernel-kmeans", "kernel-decomposition")


def run_table_job(client, method: str, table: Path, out: Path) -> dict:
    spec = {
        "name": f"scale-out-{method}",
        "data": {"reader": "zarr", "path": str(table), "array": "X"},
        "method": method,
        "params": {"n_clusters": 5},
    }
    return run_spec(client, spec, out)


def run_pck(client, X: np.ndarray) -> dict:
    from dkernel import ProbabilisticClusterKernel

    tasks0, bytes0 = _counters(client)
    t = time.perf_counter()
    ProbabilisticClusterKernel(random_state=0).fit(X)
    wall = time.perf_counter() - t
    tasks1, bytes1 = _counters(client)
    return {"seconds": wall, "tasks": tasks1 - tasks0, "bytes_moved": bytes1 - bytes0}


@contextmanager
def _client(settings: str, workers: int) -> Iterator:
    """A client of ``workers`` worker processes (1 thread each) with ``settings``."""
    from distributed import Client, LocalCluster

    if settings == "dkernel":
        from dkernel import connect

        # the embedded cluster is closed with its client
        with connect(
            n_workers=workers, threads_per_worker=1, dashboard=False, quiet=True
        ) as client:
            yield client
        return
    with (
        LocalCluster(
            n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        Client(cluster) as client,
    ):
        yield client


def main() -> None:
    from bench_full_tile import write_scene
    from sklearn.datasets import make_blobs

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--side", type=int, default=2000, help="MSSC scene side (pixels)")
    ap.add_argument("--pck-n", type=int, default=100_000)
    ap.add_argument("--pck-p", type=int, default=20)
    ap.add_argument(
        "--cluster",
        nargs="+",
        choices=["dkernel", "dask"],
        default=["dkernel", "dask"],
        help="dkernel: the embedded cluster of dkernel.connect() (its scheduler settings: no "
        "work stealing, deploy/dask/dkernel.yaml); dask: a LocalCluster at Dask's defaults",
    )
    ap.add_argument(
        "--tables", action="store_true", help="also the table jobs on a Zarr table (bytes/row)"
    )
    ap.add_argument("--table-rows", type=float, default=1e6)
    ap.add_argument("--table-chunk-rows", type=int, default=100_000)
    ap.add_argument("--out", type=Path, default=RESULTS / "scale_out", help="results (.md/.json)")
    ap.add_argument("--quick", action="store_true", help="400² scene, 5000 PCK rows")
    args = ap.parse_args()
    if args.quick:
        args.side, args.pck_n = 400, 5000
    tmp = Path(tempfile.mkdtemp(prefix="scale-out-"))
    tif = tmp / "scene.tif"
    write_scene(tif, args.side)
    pixels = args.side**2
    X, _ = make_blobs(args.pck_n, n_features=args.pck_p, centers=5, random_state=0)
    table_rows = int(args.table_rows)
    if args.tables:
        from bench_past_one_machine import write_table

        write_table(tmp / "table.zarr", "blobs", table_rows, args.table_chunk_rows)

    rows = []
    for settings in args.cluster:
        for w in args.workers:
            with _client(settings, w) as client:
                mssc = run_mssc(client, tif, tmp / f"mssc-{settings}-{w}.zarr")
                pck = run_pck(client, X)
                tables = {
                    m: run_table_job(
                        client, m, tmp / "table.zarr", tmp / f"{m}-{settings}-{w}.zarr"
                    )
                    for m in (TABLE_METHODS if args.tables else ())
                }
            rows.append(
                {"cluster": settings, "workers": w, "mssc": mssc, "pck": pck, "tables": tables}
            )
            print(json.dumps(rows[-1]), flush=True)

    lines = [
        "# Scale-out on loopback (`benchmarks/bench_scale_out.py`)",
        "",
        f"MSSC job at its defaults on a {args.side} × {args.side} × 6 GeoTIFF scene "
        f"({pixels:.2g} pixels, no map files); `ProbabilisticClusterKernel()` at its defaults (Q = G = 30) on "
        f"{args.pck_n} × {args.pck_p} blobs. One cluster per row, worker processes with "
        "1 thread each, on this machine: `dkernel` is the embedded cluster of "
        "`dkernel.connect()` (the scheduler settings of `deploy/dask/dkernel.yaml`: no work "
        "stealing), `dask` a `LocalCluster` at Dask's defaults. Speed-up against the same "
        "settings' first row. (`python benchmarks/bench_scale_out.py --cluster "
        f"{' '.join(args.cluster)} --workers {' '.join(map(str, args.workers))} "
        f"--side {args.side}`, one run.)",
        "",
        "| cluster | workers | MSSC s | speed-up | efficiency | tasks | bytes sent / pixel | "
        "PCK fit s | speed-up | efficiency | tasks | MiB sent |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        w, m, p = r["workers"], r["mssc"], r["pck"]
        base = next(b for b in rows if b["cluster"] == r["cluster"])
        sm = base["mssc"]["seconds"] / m["seconds"] * base["workers"]
        sp = base["pck"]["seconds"] / p["seconds"] * base["workers"]
        lines.append(
            f"| {r['cluster']} | {w} | {m['seconds']:.1f} | {sm:.2f}× | {sm / w:.2f} | {m['tasks']} | "
            f"{m['bytes_moved'] / pixels:.2f} | {p['seconds']:.1f} | {sp:.2f}× | {sp / w:.2f} | "
            f"{p['tasks']} | {p['bytes_moved'] / 2**20:.1f} |"
        )
    if args.tables:
        lines += [
            "",
            f"Table jobs at their defaults (true k) on {table_rows:.0e} × 10 blobs in a Zarr table "
            f"of {args.table_chunk_rows}-row chunks: wall s / bytes sent per row.",
            "",
            "| cluster | workers | " + " | ".join(TABLE_METHODS) + " |",
            "|---|---|" + "---|" * len(TABLE_METHODS),
        ]
        for r in rows:
            cells = [
                f"{r['tables'][m]['seconds']:.1f} / {r['tables'][m]['bytes_moved'] / table_rows:.1f}"
                for m in TABLE_METHODS
            ]
            lines.append(f"| {r['cluster']} | {r['workers']} | " + " | ".join(cells) + " |")
    text = "\n".join(lines) + "\n"
    print(text)
    if not args.quick:
        args.out.with_suffix(".md").write_text(text)
        args.out.with_suffix(".json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
