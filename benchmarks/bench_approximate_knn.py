"""Recall and time of the approximate k-NN search (:class:`dkernel.graphs.approximate_knn.
CellIndex`) against the exact one, on several datasets.

Datasets: the 10-D blobs and moons of ``bench_decomposition_scale.py``, a uniform 10-D cube,
and 3x3 RGB patches (27-D) of the BSDS500 image 3063 in ``DKERNEL_DATA`` (all its
152 801 interior pixels, whatever ``--n``; many patches of the sky coincide).

Recall: the share of the exact k nearest neighbours (brute force, 2 000 random query rows)
found by the index, a neighbour counting when it is no farther than the exact k-th (so ties
count whichever point is returned); k = 8, the search size of the k-NN kernel at its defaults
(7 graph neighbours, scale rank 7 + 1). The grid of ``cell_size`` x ``n_probe`` measures recall
only (queries: the sample); ``--time`` also times the whole graph (every point queried) at the
defaults, and the exact k-d-tree graph (threaded, tree-ordered, as the estimator runs it).

Usage::

    python benchmarks/bench_approximate_knn.py [--n 200000] [--datasets blobs moons uniform
        bsds] [--cell-sizes 128 256 512] [--n-probes 4 8 12 16 24] [--time] [--exact-time]

Rows are printed as JSON, then a markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_decomposition_scale import data  # noqa: E402

K = 8
N_SAMPLE = 2000


def _cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _bsds_patches() -> np.ndarray:
    from matplotlib.image import imread

    root = Path(os.environ.get("DKERNEL_DATA", "/work/shared/data"))
    img = np.asarray(imread(root / "bsds500_samples" / "3063.jpg"), dtype=np.float64)
    h, w = img.shape[:2]
    shifts = [img[i : h - 2 + i, j : w - 2 + j] for i in range(3) for j in range(3)]
    return np.concatenate(shifts, axis=2).reshape(-1, 27)


def dataset(name: str, n: int) -> np.ndarray:
    if name == "uniform":
        return np.random.default_rng(0).random((n, 10))
    if name == "bsds":
        return _bsds_patches()
    return data(name, n)[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=200_000)
    ap.add_argument("--datasets", nargs="+", default=["blobs", "moons", "uniform", "bsds"])
    ap.add_argument("--cell-sizes", type=int, nargs="+", default=[128, 256, 512])
    ap.add_argument("--n-probes", type=int, nargs="+", default=[4, 8, 12, 16, 24])
    ap.add_argument("--time", action="store_true", help="time the whole graph at the defaults")
    ap.add_argument("--exact-time", action="store_true", help="time the exact graph too")
    args = ap.parse_args()

    from sklearn.neighbors import NearestNeighbors

    from dkernel.decomposition.kernels import spatial_order, threaded_kneighbors
    from dkernel.graphs.approximate_knn import (
        DEFAULT_CELL_SIZE,
        DEFAULT_N_PROBE,
        CellIndex,
        knn_recall,
    )

    rows = []
    for name in args.datasets:
        X = dataset(name, args.n)
        n = X.shape[0]
        q = np.sort(np.random.default_rng(1).choice(n, N_SAMPLE, replace=False))
        de, ie = NearestNeighbors(algorithm="brute").fit(X).kneighbors(X[q], K)
        for cs in args.cell_sizes:
            for npb in args.n_probes:
                index = CellIndex(cs, npb, random_state=0).fit(X)
                d, i = index.kneighbors(X[q], K)
                row = {
                    "dataset": name,
                    "n": n,
                    "p": X.shape[1],
                    "cell_size": cs,
                    "n_probe": npb,
                    "recall": round(knn_recall(i, ie, d, de), 4),
                    "recall_ids": round(knn_recall(i, ie), 4),
                    "self_first": bool(np.all(d[:, 0] == 0)),
                }
                rows.append(row)
                print(json.dumps(row), flush=True)
        if args.time:
            t, c, load = time.perf_counter(), _cpu_s(), os.getloadavg()[0]
            index = CellIndex(random_state=0).fit(X)
            fit_s, fit_c = time.perf_counter() - t, _cpu_s() - c
            d, i = index.kneighbors(X, K)
            row = {
                "dataset": name,
                "n": n,
                "graph": "approximate",
                "cell_size": DEFAULT_CELL_SIZE,
                "n_probe": DEFAULT_N_PROBE,
                "index_s": round(fit_s, 2),
                "index_cpu_s": round(fit_c, 2),
                "graph_s": round(time.perf_counter() - t, 2),
                "graph_cpu_s": round(_cpu_s() - c, 2),
                "recall": round(knn_recall(i[q], ie, d[q], de), 4),
                "load_avg_1min": load,
            }
            rows.append(row)
            print(json.dumps(row), flush=True)
        if args.exact_time:
            t, c, load = time.perf_counter(), _cpu_s(), os.getloadavg()[0]
            nn = NearestNeighbors().fit(X)
            d, i = threaded_kneighbors(nn, X, K, order=spatial_order(X))
            row = {
                "dataset": name,
                "n": n,
                "graph": "exact",
                "graph_s": round(time.perf_counter() - t, 2),
                "graph_cpu_s": round(_cpu_s() - c, 2),
                "recall": round(knn_recall(i[q], ie, d[q], de), 4),
                "load_avg_1min": load,
            }
            rows.append(row)
            print(json.dumps(row), flush=True)

    grid = [r for r in rows if "graph" not in r]
    probes = sorted({r["n_probe"] for r in grid})
    print("\n| dataset | N | p | cell size | " + " | ".join(f"n_probe {p}" for p in probes) + " |")
    print("|---|---|---|---|" + "---|" * len(probes))
    for key in sorted({(r["dataset"], r["n"], r["p"], r["cell_size"]) for r in grid}):
        cells = {
            r["n_probe"]: r["recall"]
            for r in grid
            if (r["dataset"], r["n"], r["p"], r["cell_size"]) == key
        }
        print(
            f"| {key[0]} | {key[1]} | {key[2]} | {key[3]} | "
            + " | ".join(f"{cells.get(p, '—')}" for p in probes)
            + " |"
        )


if __name__ == "__main__":
    main()
