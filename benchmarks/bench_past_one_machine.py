"""Past one machine: a Zarr table on local disk or on S3, submitted to a real Dask cluster.

Issue 56, items 1 and 4, the way a cluster user runs a job: a Zarr table of N rows (10-D blobs
with 5 centres, or 2-D moons) written chunk by chunk (``--chunk-rows`` rows per chunk, float32,
labels beside it), optionally uploaded to the loopback S3 server (``moto``), then for each N a
``dkernel submit`` of the method at its defaults (only ``n_clusters`` given) to a
``dask scheduler`` with ``--workers`` separate ``dask worker`` processes (one thread each,
``--memory-limit`` each). Recorded per run: wall time of the submit, the job's own timings,
the tasks the job ran, the peak memory of each worker (the job's monitor, in the store's
``resources``), and the ARI of the stored labels on a ``--sample`` -row sample read lazily
from the results store.

Writes ``--out`` (``benchmarks/results/past_one_machine``) ``.md`` and ``.json``::

    python benchmarks/bench_past_one_machine.py --sizes 1e6 1e7 --store local s3
        [--data blobs moons] [--method spectral-clustering] [--workers 2]
        [--memory-limit 4GiB] [--chunk-rows 1000000] [--keep DIR]

(``--sizes 1e8`` writes 4 GB of blobs; on S3 the moto server holds them in memory.)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack, contextmanager
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"
N_CLUSTERS = {"blobs": 5, "moons": 2}


def _chunk(kind: str, rows: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    if kind == "blobs":
        centres = np.random.default_rng(0).uniform(-10, 10, size=(5, 10))
        y = rng.integers(0, 5, rows)
        return (centres[y] + rng.normal(size=(rows, 10))).astype(np.float32), y.astype(np.int8)
    from sklearn.datasets import make_moons

    X, y = make_moons(rows, noise=0.05, random_state=seed)
    return X.astype(np.float32), y.astype(np.int8)


def write_table(path: Path, kind: str, n: int, chunk_rows: int) -> None:
    """``X`` (n × p float32) and ``y`` (int8) in a local Zarr store, one chunk at a time."""
    import zarr

    p = 10 if kind == "blobs" else 2
    group = zarr.open_group(path, mode="w")
    X = group.create_array("X", shape=(n, p), chunks=(chunk_rows, p), dtype="float32")
    y = group.create_array("y", shape=(n,), chunks=(chunk_rows,), dtype="int8")
    for i, start in enumerate(range(0, n, chunk_rows)):
        rows = min(chunk_rows, n - start)
        X[start : start + rows], y[start : start + rows] = _chunk(kind, rows, 1000 + i)


@contextmanager
def s3_server():
    """The loopback S3 server (as the test suite's fixture): yields the endpoint URL, with the
    environment that makes the CLI and the workers use it."""
    import logging

    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no line per request
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    os.environ.update(
        {
            "AWS_ACCESS_KEY_ID": "bench",
            "AWS_SECRET_ACCESS_KEY": "bench",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_ENDPOINT_URL": endpoint,
        }
    )
    try:
        yield endpoint
    finally:
        server.stop()


def _env(dask_config: str = "none") -> dict[str, str]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    if dask_config == "deploy":  # the settings the deploy recipes install (dkernel cluster-config)
        env["DASK_CONFIG"] = str(REPO / "deploy" / "dask")
    return env


@contextmanager
def dask_cluster(tmp: Path, workers: int, memory_limit: str, dask_config: str = "deploy"):
    """``dask scheduler`` and ``workers`` × ``dask worker`` processes; yields the address.
    ``dask_config='deploy'``: they read ``deploy/dask/dkernel.yaml``, as the deploy recipes
    set them up; ``'none'``: Dask's defaults."""
    scheduler_file = tmp / "scheduler.json"
    bin_dir = Path(sys.executable).parent
    procs = [
        subprocess.Popen(
            [bin_dir / "dask", "scheduler", "--scheduler-file", scheduler_file, "--port", "0"]
            + ["--dashboard-address", ":0"],
            env=_env(dask_config),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    ]
    try:
        deadline = time.time() + 60
        while not scheduler_file.exists() and time.time() < deadline:
            time.sleep(0.2)
        address = json.loads(scheduler_file.read_text())["address"]
        for _ in range(workers):
            procs.append(
                subprocess.Popen(
                    [bin_dir / "dask", "worker", "--scheduler-file", scheduler_file]
                    + ["--nthreads", "1", "--memory-limit", memory_limit],
                    env=_env(dask_config),
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
        from distributed import Client

        with Client(address, timeout=60) as client:
            client.wait_for_workers(workers, timeout=120)
        yield address
    finally:
        for proc in reversed(procs):
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()


def submit(tmp: Path, name: str, table: str, method: str, k: int, address: str) -> dict:
    import yaml

    spec = tmp / f"{name}.yaml"
    out = tmp / f"{name}-out.zarr"
    spec.write_text(
        yaml.safe_dump(
            {
                "name": name,
                "seed": 0,
                "data": {"reader": "zarr", "path": table, "array": "X"},
                "method": method,
                "params": {"n_clusters": k},
                "output": str(out),
            }
        )
    )
    t = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "dkernel.cli", "submit", str(spec), "--scheduler", address]
        + ["--no-progress", "--overwrite"],
        env=_env(),
        cwd=tmp,
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - t
    if proc.returncode != 0:
        return {"status": "failed", "wall_s": wall, "message": proc.stderr[-2000:]}
    return {"status": "complete", "wall_s": wall, "results": str(out)}


def score(store: str, table: Path, sample: int) -> dict:
    """ARI of the stored labels on ``sample`` rows (both read lazily, only those rows)."""
    import zarr
    from sklearn.metrics import adjusted_rand_score

    import dkernel

    tree = dkernel.open_results(store)
    n = int(tree["labels"]["labels"].shape[0])
    rows = np.sort(np.random.default_rng(0).choice(n, min(sample, n), replace=False))
    labels = tree["labels"]["labels"].isel(sample=rows).values
    truth = zarr.open_group(table, mode="r")["y"].get_orthogonal_selection(rows)
    resources = tree.attrs.get("resources", {})
    workers = resources.get("workers", {})
    return {
        "ari": float(adjusted_rand_score(truth, labels)),
        "n_tasks": resources.get("n_tasks"),
        "peak_worker_gib": [round(w["peak_memory"] / 2**30, 3) for w in workers.values()],
        "timings": tree.attrs.get("timings", {}),
    }


def markdown(rows: list[dict], args) -> str:
    lines = [
        "# Past one machine: a Zarr table submitted to a Dask cluster (issue 56)",
        "",
        f"`python benchmarks/bench_past_one_machine.py --sizes {' '.join(f'{s:.0e}' for s in args.sizes)}"
        f" --store {' '.join(args.store)} --data {' '.join(args.data)} --method {args.method}"
        f" --workers {args.workers} --memory-limit {args.memory_limit}"
        f" --dask-config {args.dask_config}` (one run): `dkernel "
        f"submit` to a `dask scheduler` with {args.workers} `dask worker` processes (1 thread, "
        f"{args.memory_limit} each; "
        + (
            "Dask settings of `deploy/dask/dkernel.yaml`"
            if args.dask_config == "deploy"
            else "Dask's default settings"
        )
        + "); the method at its defaults with the true k. Stages: the job's own timings.",
        "",
        "| data | N | store | status | wall s | stages s | tasks | peak GiB per worker | ARI (sample) |",
        "|---|---:|---|---|---:|---|---:|---|---:|",
    ]
    for r in rows:
        stages = ", ".join(
            f"{k} {v:.1f}" for k, v in r.get("timings", {}).items() if k not in ("input", "total")
        )
        ari = "" if "ari" not in r else f"{r['ari']:.3f}"
        lines.append(
            f"| {r['data']} | {r['n']:.0e} | {r['store']} | {r['status']} | {r['wall_s']:.1f} | "
            f"{stages} | {r.get('n_tasks', '')} | "
            f"{', '.join(map(str, r.get('peak_worker_gib', [])))} | "
            f"{ari} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=float, nargs="+", default=[1e6, 1e7])
    p.add_argument("--store", nargs="+", choices=["local", "s3"], default=["local", "s3"])
    p.add_argument("--data", nargs="+", choices=sorted(N_CLUSTERS), default=["blobs"])
    p.add_argument("--method", default="spectral-clustering")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--memory-limit", default="4GiB")
    p.add_argument("--chunk-rows", type=int, default=1_000_000)
    p.add_argument("--sample", type=int, default=1_000_000)
    p.add_argument("--keep", type=Path, default=None, help="keep the tables and stores here")
    p.add_argument(
        "--dask-config",
        choices=["deploy", "none"],
        default="deploy",
        help="the scheduler's and workers' Dask settings: deploy/dask/dkernel.yaml, or Dask's",
    )
    p.add_argument("--out", type=Path, default=RESULTS / "past_one_machine")
    args = p.parse_args(argv)
    tmp = args.keep or Path(tempfile.mkdtemp(prefix="dkernel-past-"))
    tmp.mkdir(parents=True, exist_ok=True)
    rows: list[dict] = []
    with ExitStack() as stack:
        if "s3" in args.store:
            stack.enter_context(s3_server())
            import s3fs

            fs = s3fs.S3FileSystem(skip_instance_cache=True)
            fs.mkdir("bench")
        address = stack.enter_context(
            dask_cluster(tmp, args.workers, args.memory_limit, args.dask_config)
        )
        for kind in args.data:
            for size in args.sizes:
                n = int(size)
                table = tmp / f"{kind}-{n}.zarr"
                t = time.perf_counter()
                write_table(table, kind, n, min(args.chunk_rows, n))
                print(f"wrote {table} in {time.perf_counter() - t:.1f} s", file=sys.stderr)
                for where in args.store:
                    location = str(table)
                    if where == "s3":
                        location = f"s3://bench/{table.name}"
                        fs.put(str(table), location[5:], recursive=True)
                    name = f"{kind}-{n}-{where}"
                    row = {"data": kind, "n": n, "store": where}
                    row |= submit(tmp, name, location, args.method, N_CLUSTERS[kind], address)
                    if row["status"] == "complete":
                        row |= score(row.pop("results"), table, args.sample)
                        shutil.rmtree(tmp / f"{name}-out.zarr", ignore_errors=True)
                    rows.append(row)
                    print(json.dumps(row), file=sys.stderr, flush=True)
                    if where == "s3":
                        fs.rm(location[5:], recursive=True)
                if args.keep is None:
                    shutil.rmtree(table, ignore_errors=True)
    text = markdown(rows, args)
    args.out.with_suffix(".md").write_text(text)
    args.out.with_suffix(".json").write_text(json.dumps(rows, indent=1))
    print(text)


if __name__ == "__main__":
    main()
