"""Kernel-decomposition clustering on sparse k-NN graphs at N = 10^5 and 10^6, 10-D.

Two datasets in 10 dimensions: five separable Gaussian blobs (unit spread, centres drawn once
with spread 4 per coordinate) and two moons (scikit-learn's ``make_moons``, noise 0.05, in the
first two coordinates; eight more coordinates of N(0, 0.05^2) noise). dkernel's
``KernelDecompositionClustering`` runs at its defaults (only ``n_clusters`` and a seed given):
self-tuning kernel on the 7-NN graph, 3 restarts, ``loss='kl-euclidean'``. Side by side, in the
same run: scikit-learn's ``SpectralClustering(n_clusters, affinity='nearest_neighbors',
assign_labels='cluster_qr')`` at its own defaults otherwise (10-NN connectivity, shift-invert
ARPACK), which gives training labels only.

Every fit runs in its own child process (so each peak RSS is that fit's own: ``ru_maxrss`` of
the child, data included) with a wall-clock cap and, for scikit-learn, an address-space cap
(its sparse LU fills in on 10-D graphs; the cap keeps a shared machine alive). Recorded per
fit: wall and CPU seconds, peak RSS, ARI against the truth; for dkernel also the time of
``predict`` on the training points (all of them up to ``--predict-max``, a uniform sample
above) and its agreement with ``labels_`` (the held-out posteriors of Eq. 8-10 evaluated at
the training points), the neighbour search used (``neighbor_search='auto'``: exact below
2·10^5 points) and, when approximate, the recall of the graph on 2 000 rows against brute
force (measured last, outside the timings and the peak RSS). The load average at the start
of each fit is recorded too: on a shared machine wall time depends on the other jobs, CPU
time much less.

Usage::

    python benchmarks/bench_decomposition_scale.py [--quick] [--n 100000 1000000]
        [--datasets blobs moons] [--sklearn-max-n 100000] [--timeout 1800]
        [--sklearn-timeout 900] [--predict-max 100000] [--no-write] [--merge LOG ...]

``--quick`` (N = 8 000, < 1 min) prints the table without writing results. The full run writes
``benchmarks/results/decomposition_scale.json`` and ``.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).resolve().parent / "results"
N_CLUSTERS = {"blobs": 5, "moons": 2}
SKLEARN_MEMORY_CAP_GIB = 8.0


def data(name: str, n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The 10-D benchmark sets (deterministic in ``(name, n, seed)``)."""
    rng = np.random.default_rng(seed)
    if name == "blobs":
        centres = np.random.default_rng(12345).normal(0.0, 4.0, (5, 10))
        y = rng.integers(0, 5, size=n)
        return centres[y] + rng.standard_normal((n, 10)), y
    if name == "moons":
        from sklearn.datasets import make_moons

        M, y = make_moons(n, noise=0.05, random_state=seed)
        return np.hstack([M, 0.05 * rng.standard_normal((n, 8))]), y
    raise ValueError(f"unknown dataset {name!r}; use one of {sorted(N_CLUSTERS)}")


def _peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def run_fit(method: str, name: str, n: int, predict_max: int) -> dict:
    """One fit in this process; returns its measurements."""
    from sklearn.metrics import adjusted_rand_score

    X, y = data(name, n)
    C = N_CLUSTERS[name]
    out: dict = {"method": method, "dataset": name, "n": n, "load_avg_1min": os.getloadavg()[0]}
    out["rss_data_mib"] = round(_peak_rss_mib(), 1)
    t, c = time.perf_counter(), _cpu_s()
    if method == "dkernel":
        from dkernel.decomposition import KernelDecompositionClustering

        model = KernelDecompositionClustering(C, random_state=0).fit(X)
    else:
        from sklearn.cluster import SpectralClustering

        model = SpectralClustering(
            C, affinity="nearest_neighbors", assign_labels="cluster_qr", random_state=0
        ).fit(X)
    out["fit_s"] = round(time.perf_counter() - t, 2)
    out["fit_cpu_s"] = round(_cpu_s() - c, 2)
    out["ari"] = round(float(adjusted_rand_score(y, model.labels_)), 5)
    out["peak_rss_fit_mib"] = round(_peak_rss_mib(), 1)
    if method == "dkernel":
        out["n_iter"] = int(model.n_iter_)
        rows = np.arange(n)
        if n > predict_max:
            rows = np.sort(np.random.default_rng(1).choice(n, predict_max, replace=False))
        t, c = time.perf_counter(), _cpu_s()
        pred = model.predict(X[rows])
        out["predict_rows"] = int(rows.size)
        out["predict_s"] = round(time.perf_counter() - t, 2)
        out["predict_cpu_s"] = round(_cpu_s() - c, 2)
        out["predict_agreement"] = round(float(np.mean(pred == model.labels_[rows])), 6)
        out["peak_rss_mib"] = round(_peak_rss_mib(), 1)
        out.update(graph_recall(model, X))
    else:
        out["peak_rss_mib"] = out["peak_rss_fit_mib"]
    return out


def graph_recall(model, X: np.ndarray, n_sample: int = 2000) -> dict:
    """The neighbour search the fit used (``neighbor_search``'s route) and, for the
    approximate one, the recall of its graph rows (the search size, 8 at the defaults)
    against brute force on a random sample of rows (measured after the fit, not timed)."""
    from sklearn.neighbors import NearestNeighbors

    from dkernel.graphs.approximate_knn import CellIndex, knn_recall

    index = model._index
    if not isinstance(index, CellIndex):
        return {"search": "exact"}
    g = max(int(model.n_neighbors), int(model.scale_neighbors) + 1)
    rows = np.sort(np.random.default_rng(2).choice(X.shape[0], n_sample, replace=False))
    d, i = index.kneighbors(X[rows], g)
    de, ie = NearestNeighbors(algorithm="brute").fit(X).kneighbors(X[rows], g)
    return {
        "search": f"approximate (cell_size {index.cell_size}, n_probe {index.n_probe})",
        "graph_recall": round(knn_recall(i, ie, d, de), 4),
    }


def _cap_memory() -> None:
    cap = int(SKLEARN_MEMORY_CAP_GIB * 2**30)
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))


def in_child(method: str, name: str, n: int, predict_max: int, timeout: float) -> dict:
    """:func:`run_fit` in a fresh interpreter, with a wall-clock (and, for scikit-learn, a
    memory) cap; a failure is returned as a row with ``error``."""
    cmd = [sys.executable, __file__, "--child", method, name, str(n), str(predict_max)]
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    t = time.perf_counter()
    try:
        res = subprocess.run(
            cmd,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
            preexec_fn=_cap_memory if method == "sklearn" else None,
        )
    except subprocess.TimeoutExpired:
        return {"method": method, "dataset": name, "n": n, "error": f"timeout > {timeout:.0f} s"}
    lines = [ln for ln in res.stdout.splitlines() if ln.startswith("{")]
    if res.returncode != 0 or not lines:
        tail = (res.stderr.strip().splitlines() or ["?"])[-1][:200]
        if method == "sklearn" and "MemoryError" in res.stderr:
            tail = f"out of memory under the {SKLEARN_MEMORY_CAP_GIB:g} GiB address-space cap"
        return {
            "method": method,
            "dataset": name,
            "n": n,
            "error": f"{tail} (after {time.perf_counter() - t:.0f} s)",
        }
    return json.loads(lines[-1])


def _cell(row: dict | None, key: str, fmt: str = "{}") -> str:
    if row is None:
        return "not run"
    if "error" in row:
        return row["error"] if key == "fit_s" else "—"
    return fmt.format(row[key]) if key in row else "—"


def _search_cell(row: dict | None) -> str:
    if not row or "search" not in row:
        return "—"
    return row["search"] + (f" ({row['graph_recall']:.4f})" if "graph_recall" in row else "")


def table(rows: list[dict], sklearn_max_n: int) -> list[str]:
    md = [
        "| dataset | N | dkernel fit s (CPU s) | sklearn fit s (CPU s) | time ratio dk/sk | "
        "dkernel peak RSS MiB | sklearn peak RSS MiB | ARI dk | ARI sk | "
        "dk predict s (rows) | predict = labels_ | dk k-NN search (graph recall) | load avg |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    keys = sorted({(r["dataset"], r["n"]) for r in rows})
    for name, n in keys:
        dk = next(
            (r for r in rows if r["method"] == "dkernel" and (r["dataset"], r["n"]) == (name, n)),
            None,
        )
        sk = next(
            (r for r in rows if r["method"] == "sklearn" and (r["dataset"], r["n"]) == (name, n)),
            None,
        )
        if sk is None and n > sklearn_max_n:
            sk_cell = f"not run (N > {sklearn_max_n})"
        else:
            sk_cell = _cell(sk, "fit_s") + (
                f" ({sk['fit_cpu_s']})" if sk and "fit_cpu_s" in sk else ""
            )
        ratio = "—"
        if dk and sk and "fit_s" in dk and "fit_s" in sk:
            ratio = f"{dk['fit_s'] / sk['fit_s']:.2f}"
        elif dk and sk and "fit_s" in dk and "error" in sk and "timeout" in sk["error"]:
            ratio = f"< {dk['fit_s'] / float(sk['error'].split('>')[1].split()[0]):.2f}"
        loads = "/".join(
            f"{r['load_avg_1min']:.1f}" for r in (dk, sk) if r and "load_avg_1min" in r
        )
        md.append(
            f"| {name} | {n} | {_cell(dk, 'fit_s')}"
            + (f" ({dk['fit_cpu_s']})" if dk and "fit_cpu_s" in dk else "")
            + f" | {sk_cell} | {ratio} | {_cell(dk, 'peak_rss_mib')} | "
            f"{_cell(sk, 'peak_rss_mib') if sk else '—'} | {_cell(dk, 'ari', '{:.4f}')} | "
            f"{_cell(sk, 'ari', '{:.4f}') if sk else '—'} | "
            f"{_cell(dk, 'predict_s')} ({_cell(dk, 'predict_rows')}) | "
            f"{_cell(dk, 'predict_agreement', '{:.4%}')} | {_search_cell(dk)} | {loads} |"
        )
    return md


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="N = 8 000, results not written")
    ap.add_argument("--n", type=int, nargs="+", default=None)
    ap.add_argument("--datasets", nargs="+", default=["blobs", "moons"])
    ap.add_argument("--sklearn-max-n", type=int, default=100_000)
    ap.add_argument("--predict-max", type=int, default=100_000, help="rows predicted at most")
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds per dkernel fit")
    ap.add_argument("--sklearn-timeout", type=float, default=900.0, help="seconds per sklearn fit")
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument(
        "--merge",
        nargs="+",
        metavar="LOG",
        help="instead of running: the JSON rows printed by earlier runs (a later row replaces "
        "an earlier one of the same method, dataset and N), written as the results",
    )
    ap.add_argument("--child", nargs=4, metavar=("METHOD", "DATASET", "N", "PREDICT_MAX"))
    args = ap.parse_args()
    if args.child:
        method, name, n, pmax = args.child
        print(json.dumps(run_fit(method, name, int(n), int(pmax))), flush=True)
        return
    rows: list[dict] = []
    if args.merge:
        latest: dict = {}
        for log in args.merge:
            for line in Path(log).read_text().splitlines():
                if line.startswith('{"method"'):
                    row = json.loads(line)
                    latest[(row["method"], row["dataset"], row["n"])] = row
        rows = list(latest.values())
    sizes = [] if args.merge else (args.n or ([8_000] if args.quick else [100_000, 1_000_000]))
    for n in sizes:
        for name in args.datasets:
            for method in ("dkernel", "sklearn"):
                if method == "sklearn" and n > args.sklearn_max_n:
                    continue
                cap = args.timeout if method == "dkernel" else args.sklearn_timeout
                row = in_child(method, name, n, args.predict_max, cap)
                rows.append(row)
                print(json.dumps(row), flush=True)
    md = [
        "# Kernel decomposition on sparse k-NN graphs at scale (`bench_decomposition_scale.py`)",
        "",
        "10-D: five separable Gaussian blobs (C = 5) and two moons + 8 noise dimensions (C = 2). "
        "dkernel `KernelDecompositionClustering(C, random_state=0)` at its defaults against "
        "scikit-learn `SpectralClustering(C, affinity='nearest_neighbors', "
        "assign_labels='cluster_qr', random_state=0)`, each fit in its own process (peak RSS = "
        "that process's maximum resident set, data included). Predict: `predict` on the training "
        "points (a uniform sample above `--predict-max`), agreement with `labels_`. "
        f"scikit-learn runs under a {SKLEARN_MEMORY_CAP_GIB:g} GiB address-space cap. "
        "Load avg: 1-minute load average of the (2-core, shared) machine when the fit started.",
        "",
        *table(rows, args.sklearn_max_n),
        "",
    ]
    print("\n".join(md))
    if not args.quick and not args.no_write:
        RESULTS.mkdir(exist_ok=True)
        meta = {"cpus": os.cpu_count(), "sklearn_memory_cap_gib": SKLEARN_MEMORY_CAP_GIB}
        (RESULTS / "decomposition_scale.json").write_text(
            json.dumps({"meta": meta, "rows": rows}, indent=1) + "\n"
        )
        (RESULTS / "decomposition_scale.md").write_text("\n".join(md))


if __name__ == "__main__":
    main()
