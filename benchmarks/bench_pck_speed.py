"""PCK ensemble fit vs a loop of scikit-learn GaussianMixture fits, side by side in one run.

The ensemble: Q = G = 30 (870 diagonal GMMs, g = 2..30), 10 EM iterations, 50 % subsample per
initial condition. The alternative a user would write: for every (q, g), draw a 50 % subsample
and fit ``GaussianMixture(g, covariance_type='diag', max_iter=10)`` (scikit-learn's default
k-means initialisation). Both run in this process on the same cores and the same data.

The scikit-learn loop is 30 identical repetitions (one per q) of the same 29 fits; by default it
is timed for ``--sk-inits`` of them (5) and scaled to 30 (``--sk-inits 30`` runs all of it).

Datasets: synthetic N = 100 000, p = 20 (8 Gaussian clusters, float32) and Samson
(9025 pixels × 156 bands). ``--million`` also fits N = 10⁶, p = 20 (ours only) and reports its
wall time and peak memory (ru_maxrss of this process).

Run:  python benchmarks/bench_pck_speed.py [--quick] [--million]
Writes benchmarks/results/pck_speed.md (and .json).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.mixture import GaussianMixture

from dkernel._random import derive_rng
from dkernel.gmm.pck import ProbabilisticClusterKernel


def synthetic(n: int, p: int = 20, k: int = 8, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centers = rng.normal(scale=3.0, size=(k, p))
    X = centers[rng.integers(0, k, n)] + rng.normal(size=(n, p))
    return X.astype(np.float32)


def samson() -> np.ndarray:
    from dkernel.io.hyperspectral import load_samson

    cube, _ = load_samson(os.environ.get("DKERNEL_DATA"))
    return cube.reshape(-1, cube.shape[-1]).astype(np.float32)


LOAD_AT_START = os.getloadavg()[0]


def time_ours(X: np.ndarray, Q: int, G: int) -> tuple[float, float]:
    """(wall s, CPU s of this process) of the ensemble fit."""
    t, c = time.perf_counter(), time.process_time()
    ProbabilisticClusterKernel(n_inits=Q, max_components=G, random_state=0).fit(X)
    return time.perf_counter() - t, time.process_time() - c


def time_sklearn(X: np.ndarray, n_inits: int, G: int) -> tuple[float, float]:
    n_sub = X.shape[0] // 2
    t, c = time.perf_counter(), time.process_time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        for q in range(n_inits):
            rows = derive_rng(0, "sk", q).choice(X.shape[0], n_sub, replace=False)
            Xs = X[rows]
            for g in range(2, G + 1):
                GaussianMixture(g, covariance_type="diag", max_iter=10, random_state=q).fit(Xs)
    return time.perf_counter() - t, time.process_time() - c


def peak_rss_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="N = 20 000, Q = G = 10, 2 sk inits")
    ap.add_argument("--sk-inits", type=int, default=5)
    ap.add_argument("--million", action="store_true", help="also fit N = 10^6, p = 20")
    ap.add_argument("--skip-samson", action="store_true")
    ap.add_argument(
        "--million-only", action="store_true", help="only the N = 10^6 fit; prints, writes nothing"
    )
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "pck_speed"))
    args = ap.parse_args()
    Q = G = 10 if args.quick else 30
    sk_inits = 2 if args.quick else min(args.sk_inits, Q)
    sets = [("synthetic N=100000 p=20", synthetic(20_000 if args.quick else 100_000))]
    if args.million_only:
        args.million, args.quick, sets = True, True, []
        Q = G = 30
    elif not args.skip_samson:
        sets.append(("Samson 9025 x 156", samson()))
    rows = []
    for name, X in sets:
        ours, ours_cpu = time_ours(X, Q, G)
        sk_part, sk_part_cpu = time_sklearn(X, sk_inits, G)
        sk, sk_cpu = sk_part * Q / sk_inits, sk_part_cpu * Q / sk_inits
        row = {
            "data": name,
            "ours_s": ours,
            "ours_cpu_s": ours_cpu,
            "sklearn_s": sk,
            "sklearn_cpu_s": sk_cpu,
            "sklearn_measured_inits": sk_inits,
            "sklearn_measured_s": sk_part,
            "speedup": sk / ours,
            "speedup_cpu": sk_cpu / ours_cpu,
        }
        rows.append(row)
        print(
            f"{name}: ours {ours:.1f} s (CPU {ours_cpu:.1f}) | sklearn loop {sk:.1f} s "
            f"(CPU {sk_cpu:.1f}; {sk_part:.1f} s measured for {sk_inits}/{Q} inits) | "
            f"speed-up {sk / ours:.1f}x wall, {sk_cpu / ours_cpu:.1f}x CPU",
            flush=True,
        )
    million = None
    if args.million:
        X = synthetic(1_000_000)
        t, c = time_ours(X, Q, G)
        million = {"seconds": t, "cpu_seconds": c, "peak_rss_gib": peak_rss_gib()}
        print(
            f"N=10^6 p=20: {t:.1f} s wall, {c:.1f} s CPU, peak RSS "
            f"{million['peak_rss_gib']:.2f} GiB",
            flush=True,
        )
    if args.quick:
        return
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(
        json.dumps(
            {"Q": Q, "G": G, "rows": rows, "million": million, "cpus": os.cpu_count()}, indent=1
        )
    )
    lines = [
        "# PCK ensemble fit vs a loop of scikit-learn GaussianMixture (diag, max_iter=10)",
        "",
        f"Q = G = {Q} (870 models), 10 EM iterations, 50 % subsample; same process, same "
        f"{os.cpu_count()} cores (load average {LOAD_AT_START:.1f} at the start). The scikit-learn loop "
        f"was timed for {sk_inits} of the {Q} initial conditions and scaled by {Q}/{sk_inits} "
        "(the 30 repetitions are identical in cost).",
        "",
        "Command: `python benchmarks/bench_pck_speed.py"
        + (f" --sk-inits {args.sk_inits}" if args.sk_inits != 5 else "")
        + (" --million" if args.million else "")
        + "`",
        "",
        "| data | dkernel PCK fit: wall s (CPU s) | sklearn loop: wall s (CPU s) | speed-up wall "
        "| speed-up CPU |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['data']} | {r['ours_s']:.1f} ({r['ours_cpu_s']:.1f}) | {r['sklearn_s']:.1f} "
            f"({r['sklearn_cpu_s']:.1f}; {r['sklearn_measured_inits']} inits measured) "
            f"| {r['speedup']:.1f}× | {r['speedup_cpu']:.1f}× |"
        )
    if million:
        lines += [
            "",
            f"N = 10⁶, p = 20 (ours only): {million['seconds']:.0f} s wall, peak RSS "
            f"{million['peak_rss_gib']:.2f} GiB.",
        ]
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print(f"wrote {out.with_suffix('.md')}")


if __name__ == "__main__":
    main()
