"""PCK ensemble fit on 1, 2 and 4 Dask workers: wall time and bit-identical Γ.

For each worker count an embedded LocalCluster (process workers, one thread each) is started,
the ensemble is fitted (one task per initial condition, data scattered once) and Γ = transform(X)
is computed on the cluster from Dask input; the SHA-256 of Γ's bytes must be the same for every
worker count and for a second run. Timing ratios are meaningful only on a machine with at least
4 free cores (the acceptance asks for ≥ 3× from 1 to 4 workers there).

Run:  python benchmarks/bench_pck_scaling.py [--n 20000] [--inits 30] [--components 30]
          [--missingness informative]
Writes benchmarks/results/pck_scaling.md (and .json; ``pck_scaling_informative`` for the
informative missingness model).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import time
from pathlib import Path

import dask.array as da
import numpy as np

from dkernel.gmm.pck import ProbabilisticClusterKernel
from dkernel.runtime import connect


def data(n: int, p: int = 20, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centers = rng.normal(scale=3.0, size=(8, p))
    X = centers[rng.integers(0, 8, n)] + rng.normal(size=(n, p))
    X[rng.random((n, p)) < 0.1] = np.nan  # 10 % missing: exercises the PCKID path
    return X.astype(np.float32)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=20_000)
    ap.add_argument("--inits", type=int, default=30)
    ap.add_argument("--components", type=int, default=30)
    ap.add_argument("--workers", default="1,2,4")
    ap.add_argument("--missingness", default="ignorable", choices=("ignorable", "informative"))
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    suffix = "" if args.missingness == "ignorable" else f"_{args.missingness}"
    args.out = args.out or str(Path(__file__).parent / "results" / f"pck_scaling{suffix}")
    X = data(args.n)
    Xd = da.from_array(X, chunks=(2048, X.shape[1]))
    params = dict(
        n_estimators=args.inits,
        max_components=args.components,
        random_state=11,
        missingness=args.missingness,
    )
    rows = []
    for nw in [int(w) for w in args.workers.split(",")]:
        client = connect(n_workers=nw, threads_per_worker=1, quiet=True)
        try:
            client.run(lambda: __import__("dkernel.gmm.graph"))  # warm the workers' imports
            hashes = []
            times = []
            for _ in range(2):
                t = time.perf_counter()
                pck = ProbabilisticClusterKernel(**params).fit(X)
                times.append(time.perf_counter() - t)
                G = pck.transform(Xd).compute()
                hashes.append(hashlib.sha256(np.ascontiguousarray(G).tobytes()).hexdigest())
        finally:
            client.close()
        row = {
            "workers": nw,
            "fit_s": min(times),
            "sha256": hashes[0],
            "runs_equal": hashes[0] == hashes[1],
        }
        rows.append(row)
        print(
            f"{nw} workers: fit {row['fit_s']:.1f} s  Γ sha256 {row['sha256'][:16]}…  "
            f"two runs equal: {row['runs_equal']}",
            flush=True,
        )
    identical = len({r["sha256"] for r in rows}) == 1 and all(r["runs_equal"] for r in rows)
    base = rows[0]["fit_s"]
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(
        json.dumps(
            {
                "n": args.n,
                "params": params,
                "cpus": os.cpu_count(),
                "rows": rows,
                "identical": identical,
            },
            indent=1,
        )
    )
    lines = [
        "# PCK ensemble fit on 1, 2, 4 workers: determinism and scaling",
        "",
        f"N = {args.n}, p = 20, 10 % missing; Q = {args.inits}, G = {args.components}, "
        f"missingness = {args.missingness}; machine with {os.cpu_count()} cores (shared). "
        f"Command: `python benchmarks/bench_pck_scaling.py --n {args.n} --inits {args.inits} "
        f"--components {args.components} --missingness {args.missingness}`",
        "",
        "| workers | fit (s, best of 2) | speed-up vs 1 | Γ sha256 | two runs equal |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['workers']} | {r['fit_s']:.1f} | {base / r['fit_s']:.2f}× | "
            f"`{r['sha256'][:16]}…` | {r['runs_equal']} |"
        )
    lines += ["", f"Γ bit-identical across worker counts and runs: **{identical}**."]
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print(f"identical: {identical}; wrote {out.with_suffix('.md')}")


if __name__ == "__main__":
    main()
