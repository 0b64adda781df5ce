"""Kernel k-means at scale: dkernel's ``KernelKMeans`` against scikit-learn's Nyström pipelines
and exact kernel k-means, ARI and wall time from one run.

Issue 31, item 4. Every row is one data set at one size, standardised (``StandardScaler``), with
the true number of classes as K and one seed; every method sees the same array. Methods:

* ``dk`` — ``dkernel.KernelKMeans(K, random_state=seed)`` at its defaults (RBF, σ chosen among
  0.5, 1 and 2 × the median distance by ``sigma_fraction='auto'``, ``solver='auto'``: exact
  kernel k-means when it is the cheaper, else k-means on a Nyström map of 300 landmarks fitted
  on ≤ 50 000 sampled points, every point assigned); its path and the agreement of
  ``predict(X)`` with ``labels_`` are recorded;
* ``exact`` — ``KernelKMeans(K, solver='exact')``: exact kernel k-means on the Gram matrix with
  the same kernel (the σ dk chose), for N ≤ ``--exact-max`` (10⁴);
* ``sk.Nys+KM`` — scikit-learn ``Nystroem()`` + ``KMeans(K)``, both at their defaults (RBF with
  ``gamma = 1 / n_features``, 100 components; k-means++, ``n_init='auto'``);
* ``sk.Nys+MB`` — scikit-learn ``Nystroem(gamma = 1 / 2σ², n_components = m)`` +
  ``MiniBatchKMeans(K)``: dkernel's kernel and number of landmarks (the acceptance's
  "same number of components" at 10⁶ points).

Data: a few sets of the defaults suite (``benchmarks/bench_defaults.py``'s loaders, subsampled to
``--suite-n`` = 2 000 points as that suite is; skipped when ``$DKERNEL_DATA`` is absent) and the
scale families two moons, three rings and 10-D blobs (``moons``, ``rings3``, ``blobs10d``: a fresh
draw of N points, seed 0) at every ``--sizes`` N (default 1e3 1e4 1e5; 1e6 allowed).

BLAS runs on ``--blas-threads`` threads (default 1) for every method, through threadpoolctl:
on this shared 2-core machine a multi-threaded BLAS on thin products ran 10-100× slower under
load (``dkernel/linalg/threads.py``), which made the peers' times depend on the neighbours' jobs.
scikit-learn's OpenMP loops (KMeans) and dkernel's row blocks still use both cores.

Printed: one markdown table (ARI and fit seconds per method, dkernel's path) and the ratios of
dkernel's time to each peer's, per row and as geometric means, plus mean ARIs. ``--out``
(default ``benchmarks/results/kernel_kmeans``) gets the ``.md`` and a ``.json`` of the rows.

Usage::

    python benchmarks/bench_kernel_kmeans.py [--sizes 1e3 1e4 1e5] [--seed 0]
        [--families moons rings3 blobs10d] [--suite varied aniso D31 wine digits statlog]
        [--exact-max 1e4] [--out benchmarks/results/kernel_kmeans]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
from sklearn.cluster import KMeans, MiniBatchKMeans
from sklearn.kernel_approximation import Nystroem
from sklearn.metrics import adjusted_rand_score
from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_defaults as bd  # noqa: E402  (the loaders of the defaults suite)

from dkernel import KernelKMeans  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
METHODS = ("dk", "exact", "sk.Nys+KM", "sk.Nys+MB")
FAMILIES = ("moons", "rings3", "blobs10d")
SUITE = ("varied", "aniso", "D31", "wine", "digits", "statlog")


def _timed(fit: Callable[[], np.ndarray]) -> tuple[np.ndarray, float]:
    t = time.perf_counter()
    labels = fit()
    return np.asarray(labels), time.perf_counter() - t


def run_row(name: str, X: np.ndarray, y: np.ndarray, k: int, seed: int, exact_max: int) -> dict:
    """Every method on one data set; ARI, seconds and dkernel's path."""
    n = X.shape[0]
    row: dict = {"dataset": name, "n": n, "k": k}
    est = KernelKMeans(k, random_state=seed)
    labels, seconds = _timed(lambda: est.fit(X).labels_)
    row["dk"] = {"ari": adjusted_rand_score(y, labels), "seconds": seconds}
    row["dk_solver"] = est.solver_
    row["dk_predict_agreement"] = float(np.mean(est.predict(X) == est.labels_))
    sigma, m = float(est.sigma_), min(est.n_landmarks, n)
    if n <= exact_max:
        exact = KernelKMeans(k, kernel_params={"sigma": sigma}, solver="exact", random_state=seed)
        labels, seconds = _timed(lambda: exact.fit(X).labels_)
        row["exact"] = {"ari": adjusted_rand_score(y, labels), "seconds": seconds}

    def nys_km() -> np.ndarray:
        return (
            KMeans(k, random_state=seed).fit(Nystroem(random_state=seed).fit_transform(X)).labels_
        )

    def nys_mb() -> np.ndarray:
        Z = Nystroem(gamma=0.5 / sigma**2, n_components=m, random_state=seed).fit_transform(X)
        return MiniBatchKMeans(k, random_state=seed).fit(Z).labels_

    for method, fit in (("sk.Nys+KM", nys_km), ("sk.Nys+MB", nys_mb)):
        labels, seconds = _timed(fit)
        row[method] = {"ari": adjusted_rand_score(y, labels), "seconds": seconds}
    return row


def _gmean(values: list[float]) -> float:
    return float(np.exp(np.mean(np.log(values)))) if values else float("nan")


def markdown(rows: list[dict], args: argparse.Namespace) -> str:
    head = "| data | N | K | dk path | " + " | ".join(f"{m} ARI / s" for m in METHODS)
    head += " | dk/exact time | dk/sk.Nys+KM time | dk/sk.Nys+MB time | dk predict = labels_ |"
    lines = [
        f"Kernel k-means, seed {args.seed}, {args.blas_threads} BLAS thread(s) (one run; times "
        "in seconds, fit with labels; ratios < 1: dkernel faster).",
        "",
        head,
        "|" + "---|" * (head.count("|") - 1),
    ]
    for r in rows:
        cells = [r["dataset"], str(r["n"]), str(r["k"]), r["dk_solver"]]
        for m in METHODS:
            cells.append(f"{r[m]['ari']:.3f} / {r[m]['seconds']:.2f}" if m in r else "—")
        for m in ("exact", "sk.Nys+KM", "sk.Nys+MB"):
            cells.append(f"{r['dk']['seconds'] / r[m]['seconds']:.2f}" if m in r else "—")
        cells.append(f"{r['dk_predict_agreement']:.4f}")
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "| rows | " + " | ".join(f"mean ARI {m}" for m in METHODS) + " |"]
    lines.append("|" + "---|" * (len(METHODS) + 1))
    groups = {"suite": [r for r in rows if r["dataset"] in SUITE], "all": rows}
    for label, group in groups.items():
        if not group:
            continue
        means = []
        for m in METHODS:
            have = [r for r in group if m in r]
            means.append(
                f"{np.mean([r[m]['ari'] for r in have]):.3f} ({len(have)})" if have else "—"
            )
        lines.append(f"| {label} | " + " | ".join(means) + " |")
    lines += ["", "| N | geo-mean dk/exact | dk/sk.Nys+KM | dk/sk.Nys+MB |", "|---|---|---|---|"]
    for n in sorted({r["n"] for r in rows}):
        at = [r for r in rows if r["n"] == n]
        ratios = [
            _gmean([r["dk"]["seconds"] / r[m]["seconds"] for r in at if m in r])
            for m in ("exact", "sk.Nys+KM", "sk.Nys+MB")
        ]
        cells = ["—" if np.isnan(v) else f"{v:.2f}" for v in ratios]
        lines.append(f"| {n} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", nargs="+", type=float, default=[1e3, 1e4, 1e5])
    parser.add_argument("--families", nargs="*", default=list(FAMILIES))
    parser.add_argument("--suite", nargs="*", default=list(SUITE))
    parser.add_argument("--suite-n", type=int, default=2000)
    parser.add_argument("--exact-max", type=float, default=1e4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--blas-threads", type=int, default=1)
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "kernel_kmeans"))
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    threadpool_limits(limits=args.blas_threads, user_api="blas")
    rows = []
    for name in args.suite:
        try:
            X, ys, k = bd.load_dataset(name, args.suite_n)
        except (OSError, FileNotFoundError) as exc:
            print(f"skipping {name}: {exc}", flush=True)
            continue
        rows.append(run_row(name, X, ys[0], k, args.seed, int(args.exact_max)))
        print(json.dumps(rows[-1]), flush=True)
    for n in sorted(int(s) for s in args.sizes):
        for name in args.families:
            X, y, k = bd.load_sized(name, n, 0)
            rows.append(run_row(name, X, y, k, args.seed, int(args.exact_max)))
            print(json.dumps(rows[-1]), flush=True)
    table = markdown(rows, args)
    print(table)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".md").write_text(table)
    out.with_suffix(".json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
