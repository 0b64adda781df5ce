"""JointRankingClustering past the dense limit: its sparse k-NN graph path against scikit-learn.

At its defaults (the half-weighted 10-NN graph, the normalized embedding) `JointRankingClustering`
ran on a dense N × N kernel and refused above about 13 000 points; beyond that limit it now runs
on the same kernel as a sparse matrix. This compares it, at defaults with the true k, in one run,
with what a user would take instead: scikit-learn's `SpectralClustering(affinity=
'nearest_neighbors')` (the same k-NN affinity, sparse, ARPACK) and `KMeans`, on two families
drawn at each size: five 4-D Gaussian blobs (standard deviation 1.5), the same blobs with a
quarter of their entries missing (NaN; `JointRankingClustering` takes them at their expected
distances, the peers get mean-imputed columns, since they refuse NaN) and two moons in 2-D
(noise 0.05). Each fit runs in a fresh process, so its peak resident memory is its own.

Run:  python benchmarks/bench_jrc_scale.py [--sizes 2e3 2e4 2e5] [--seed 0] [--timeout 600]
Writes ``benchmarks/results/jrc_scale.md``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
METHODS = ("dk.JointRanking", "sk.Spectral-knn", "sk.KMeans")
FAMILIES = ("blobs4d", "blobs4d-holed", "moons")

CHILD = r"""
import json, resource, sys, time, warnings
import numpy as np
from sklearn.datasets import make_blobs, make_moons
from sklearn.metrics import adjusted_rand_score
warnings.filterwarnings("ignore")
method, family, n, seed = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
if family.startswith("blobs4d"):
    X, y = make_blobs(n, centers=5, n_features=4, cluster_std=1.5, random_state=seed)
else:
    X, y = make_moons(n, noise=0.05, random_state=seed)
if family.endswith("-holed"):
    X[np.random.default_rng(seed).random(X.shape) < 0.25] = np.nan
    observed = ~np.isnan(X).all(axis=1)  # rows with no value at all are dropped
    X, y = X[observed], y[observed]
k = int(y.max()) + 1
if method != "dk.JointRanking" and np.isnan(X).any():
    X = np.where(np.isnan(X), np.nanmean(X, axis=0), X)  # the peers refuse NaN
# imports before the clock starts: the fit's time, not the libraries' loading
from dkernel import JointRankingClustering
from sklearn.cluster import KMeans, SpectralClustering
t = time.perf_counter()
if method == "dk.JointRanking":
    labels = JointRankingClustering(n_clusters=k, random_state=seed).fit(X).labels_
elif method == "sk.Spectral-knn":
    labels = SpectralClustering(
        k, affinity="nearest_neighbors", random_state=seed
    ).fit_predict(X)
else:
    labels = KMeans(k, random_state=seed).fit_predict(X)
seconds = time.perf_counter() - t
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**10
print(json.dumps({"ari": adjusted_rand_score(y, labels), "seconds": seconds, "peak_mib": peak}))
"""


def run_one(method: str, family: str, n: int, seed: int, timeout: float) -> dict:
    try:
        done = subprocess.run(
            [sys.executable, "-c", CHILD, method, family, str(n), str(seed)],
            capture_output=True,
            text=True,
            check=False,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return {"error": f"timeout ({timeout:.0f} s)"}
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines() or [f"exit status {done.returncode}"]
        return {"error": lines[-1][:200]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", type=float, default=[2e3, 2e4, 2e5])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per fit")
    args = parser.parse_args(argv)
    rows = []
    for n in (int(s) for s in args.sizes):
        for family in FAMILIES:
            row = {"family": family, "n": n}
            for method in METHODS:
                row[method] = run_one(method, family, n, args.seed, args.timeout)
                print(family, n, method, row[method], flush=True)
            rows.append(row)
    lines = [
        "# JointRankingClustering past the dense limit",
        "",
        f"`python benchmarks/bench_jrc_scale.py --sizes {' '.join(f'{s:g}' for s in args.sizes)}"
        f" --seed {args.seed} --timeout {args.timeout:g}` (one run, this 2-core machine; each fit in its own process; "
        "ARI / fit seconds (imports excluded) / peak resident MiB of the process, which includes "
        "about 150-300 MiB of imports, dkernel's with Dask). Above about 13 000 points `JointRankingClustering` runs on its sparse "
        "k-NN graph.",
        "",
        "| family | N | " + " | ".join(METHODS) + " | dk / sk.Spectral-knn time | dk / "
        "sk.Spectral-knn memory |",
        "|---|---:|" + "---|" * len(METHODS) + "---:|---:|",
    ]
    for row in rows:
        cells = []
        for method in METHODS:
            r = row[method]
            cells.append(
                r["error"]
                if "error" in r
                else f"{r['ari']:.3f} / {r['seconds']:.1f} / {r['peak_mib']:.0f}"
            )
        dk, sk = row["dk.JointRanking"], row["sk.Spectral-knn"]
        ok = "error" not in dk and "error" not in sk
        time_ratio = f"{dk['seconds'] / sk['seconds']:.2f}" if ok else "—"
        memory_ratio = f"{dk['peak_mib'] / sk['peak_mib']:.2f}" if ok else "—"
        lines.append(
            f"| {row['family']} | {row['n']} | "
            + " | ".join(cells)
            + f" | {time_ratio} | {memory_ratio} |"
        )
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "jrc_scale.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
