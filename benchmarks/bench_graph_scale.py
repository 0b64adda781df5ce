"""Task graphs of a ``spectral-clustering`` job at 10⁸–10¹⁰ rows, built and not computed.

What a cluster's scheduler would be handed, pass by pass, for a table of N rows × F float32
features in a Zarr store (chunks of ``--store-rows`` rows), at the job's defaults
(``SpectralClustering``'s bipartite landmark path above 5 000 rows):

1. the landmark sample (``dkernel.rows.take_rows`` of ``10 p`` rows), reading the store's chunks
   (the input is not persisted: ``JobContext.row_chunks``);
2. the landmark sums over every row (``dkernel.graphs.bipartite.accumulate_landmark_sums``);
3. the embedding of every row written to the store (``to_zarr``, as the job writes it);
4. the k-means sample of the stored embedding (``take_rows`` of ``kmeans_max_samples`` rows);
5. the labels of every row from the stored embedding, written to the store.

Each pass's graph is taken from the package's own code: a scheduler function stands in for
Dask's and records the graph it is given instead of running it (``Captured``), so what is
counted is exactly what ``dask.compute`` / ``persist`` would submit. The model (landmarks,
coefficients, centres) comes from a real fit on 20 000 rows of the same kind of data; it does
not grow with N. Per pass: tasks, the pickled graph's size (what the client sends), the time
and the client memory to build it; and, measured once on a real ``LocalCluster``, the
scheduler's memory per task, to turn task counts into scheduler memory. Results feed
``docs/scaling.md``.

Run: ``python benchmarks/bench_graph_scale.py [--sizes 1e8 1e9 1e10] [--features 10]``
"""

from __future__ import annotations

import argparse
import gc
import json
import pickle
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import dask
import dask.array as da
import numpy as np
import psutil
import zarr

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"


class Captured(Exception):
    """Raised by :func:`capture` with the graph a compute was about to run."""

    def __init__(self, graph: dict) -> None:
        super().__init__(f"{len(graph)} tasks")
        self.graph = graph


def capture(dsk: Any, keys: Any, **kwargs: Any) -> Any:
    # Dask hands its schedulers an expression; its graph is what a scheduler would run
    graph = dsk.__dask_graph__() if hasattr(dsk, "__dask_graph__") else dsk
    raise Captured(dict(graph))


def graph_of(build: Callable[[], Any]) -> tuple[dict, float, float]:
    """The graph that ``build()`` hands to Dask's scheduler, the seconds and the client
    memory (RSS growth, bytes) it took to build it."""
    gc.collect()
    rss0 = psutil.Process().memory_info().rss
    t = time.perf_counter()
    with dask.config.set(scheduler=capture):
        try:
            build()
        except Captured as done:
            seconds = time.perf_counter() - t
            grown = psutil.Process().memory_info().rss - rss0
            return done.graph, seconds, float(max(grown, 0))
    raise RuntimeError("the pass computed nothing")


def metadata_only_array(path: Path, shape: tuple[int, ...], rows: int, dtype: str) -> da.Array:
    """A Zarr array with no chunk written (building reads no data), chunked by ``rows`` rows."""
    arr = zarr.create_array(
        store=str(path), shape=shape, chunks=(min(rows, shape[0]), *shape[1:]), dtype=dtype
    )
    return da.from_zarr(arr)


def metadata_only_table(root: Path, n: int, f: int, store_rows: int) -> da.Array:
    """A Zarr table of ``n × f`` float32 with no chunk written."""
    return metadata_only_array(root / f"table_{n}.zarr", (n, f), store_rows, "float32")


def fitted_model(f: int, seed: int = 0) -> Any:
    from sklearn.datasets import make_blobs

    from dkernel import SpectralClustering

    X, _ = make_blobs(20_000, n_features=f, centers=5, random_state=seed)
    return SpectralClustering(n_clusters=5, random_state=seed).fit(X)


def scheduler_bytes_per_task(n_tasks: int) -> float:
    """Scheduler RSS growth per held task of a graph of ``n_tasks`` independent small tasks,
    on a real one-worker ``LocalCluster``."""
    from distributed import Client, LocalCluster, wait

    def rss() -> int:
        return psutil.Process().memory_info().rss

    with (
        LocalCluster(
            n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        Client(cluster) as client,
    ):
        client.run_on_scheduler(gc.collect)
        before = client.run_on_scheduler(rss)
        futures = client.map(np.int64, range(n_tasks), pure=False)
        wait(futures)
        client.run_on_scheduler(gc.collect)
        after = client.run_on_scheduler(rss)
        del futures
    return (after - before) / n_tasks


def passes(X: da.Array, est: Any, n: int, root: Path) -> tuple[dict[str, Callable[[], Any]], int]:
    from dkernel.graphs.bipartite import accumulate_landmark_sums
    from dkernel.jobs.steps.spectral_clustering import PARAMS, _chunk_rows
    from dkernel.rows import take_rows

    params = {p.name: p.default for p in PARAMS}
    rows = _chunk_rows(params, n)
    Xp = X.rechunk({0: rows, 1: -1}).astype(np.float64)
    model = est.graph_model_
    rng = np.random.default_rng(0)
    landmark_rows = np.sort(rng.choice(n, 10 * model.graph.n_landmarks, replace=False))
    kmeans_rows = np.sort(rng.choice(n, est.kmeans_max_samples, replace=False))
    Z = model.transform(Xp)
    # the stored embedding, as the job reads it back (metadata only: nothing is read)
    stored = metadata_only_array(root / f"embedding_{n}.zarr", Z.shape, Z.chunks[0][0], "float64")
    return {
        "1 landmark sample": lambda: take_rows(Xp, landmark_rows),
        "2 landmark sums": lambda: accumulate_landmark_sums(model.graph, Xp),
        "3 embedding to the store": lambda: Z.to_zarr(
            str(root / f"z_{n}.zarr"), overwrite=True, compute=False
        ).compute(),
        "4 k-means sample": lambda: take_rows(stored, kmeans_rows),
        "5 labels to the store": lambda: (
            est._assign(stored)
            .to_zarr(str(root / f"labels_{n}.zarr"), overwrite=True, compute=False)
            .compute()
        ),
    }, rows


def run(sizes: list[int], f: int, store_rows: int, per_task_tasks: int) -> dict:
    est = fitted_model(f)
    out: dict[str, Any] = {"features": f, "store_rows": store_rows, "sizes": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            X = metadata_only_table(Path(tmp), n, f, store_rows)
            steps, rows = passes(X, est, n, Path(tmp))
            row = {"chunk_rows": rows, "chunks": -(-n // rows), "passes": {}}
            for name, build in steps.items():
                graph, seconds, grown = graph_of(build)
                t = time.perf_counter()
                pickled = len(pickle.dumps(graph, protocol=5))
                row["passes"][name] = {
                    "tasks": len(graph),
                    "pickled_bytes": pickled,
                    "build_s": round(seconds, 2),
                    "pickle_s": round(time.perf_counter() - t, 2),
                    "client_bytes": grown,
                }
                print(f"N={n:.0e} {name}: {row['passes'][name]}", flush=True)
                del graph
            out["sizes"][str(n)] = row
    out["scheduler_bytes_per_task"] = scheduler_bytes_per_task(per_task_tasks)
    out["scheduler_tasks_measured"] = per_task_tasks
    return out


def table(result: dict) -> str:
    per_task = result["scheduler_bytes_per_task"]
    lines = [
        "| N | chunk rows | chunks | pass | tasks | graph pickled | build | est. scheduler memory |",
        "|---:|---:|---:|---|---:|---:|---:|---:|",
    ]
    for n, row in result["sizes"].items():
        for name, p in row["passes"].items():
            lines.append(
                f"| {int(n):.0e} | {row['chunk_rows']} | {row['chunks']} | {name} | {p['tasks']} "
                f"| {p['pickled_bytes'] / 2**20:.1f} MiB | {p['build_s']:.1f} s "
                f"| {p['tasks'] * per_task / 2**30:.2f} GiB |"
            )
    lines.append("")
    lines.append(
        f"Scheduler memory per held task, measured on a one-worker LocalCluster with "
        f"{result['scheduler_tasks_measured']} independent tasks: {per_task / 1024:.1f} KiB."
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", nargs="+", type=float, default=[1e8, 1e9, 1e10])
    ap.add_argument("--features", type=int, default=10)
    ap.add_argument("--store-rows", type=int, default=1_000_000)
    ap.add_argument("--per-task-tasks", type=int, default=50_000)
    ap.add_argument("--out", default=str(RESULTS / "graph_scale"))
    args = ap.parse_args(argv)
    result = run([int(s) for s in args.sizes], args.features, args.store_rows, args.per_task_tasks)
    text = table(result)
    print(text)
    Path(args.out + ".json").write_text(json.dumps(result, indent=1))
    Path(args.out + ".md").write_text(
        "# Task graphs of a spectral-clustering job, built and not computed\n\n"
        f"`python benchmarks/bench_graph_scale.py --sizes {' '.join(f'{s:.0e}' for s in args.sizes)}"
        f" --features {args.features}`\n\n" + text + "\n"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
