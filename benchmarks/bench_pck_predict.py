"""PCKSpectralClustering out of sample: fit on a sample, predict the rest, against fitting on all.

What a user with more rows than a fit should take does: fit `PCKSpectralClustering` on a
uniform sample and `predict` the other rows (the Nyström extension of its embedding), against
the same estimator fitted on every row and scikit-learn's `KMeans` on every row, at defaults
with the true k, in one run. Sets: the real pixel and image sets of `realdata_sets.py` with more
rows than the sample (Samson, Jasper Ridge, Statlog, MNIST 5k with a quarter of each image
missing), columns standardised on their observed values (k-means gets the mean-imputed ones).

Run:  python benchmarks/bench_pck_predict.py [--sample 1500] [--sets samson statlog ...]
Writes ``benchmarks/results/pck_predict.md``.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.cluster import KMeans
from sklearn.metrics import adjusted_rand_score

sys.path.insert(0, str(Path(__file__).resolve().parent))
import realdata_sets as rs  # noqa: E402
from bench_missing import mean_impute, standardise  # noqa: E402

from dkernel import PCKSpectralClustering  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"


def _ari(ys: list[np.ndarray], labels: np.ndarray) -> float:
    return float(np.mean([adjusted_rand_score(y, labels) for y in ys]))


def run(name: str, sample: int, seed: int, max_n: int) -> dict:
    X, ys, k, _ = rs.load(name, seed, max_n)
    X = standardise(X)
    rng = np.random.default_rng(seed)
    rows = np.sort(rng.choice(X.shape[0], size=min(sample, X.shape[0]), replace=False))
    t = time.perf_counter()
    full = PCKSpectralClustering(k, random_state=seed).fit(X)
    t_full = time.perf_counter() - t
    t = time.perf_counter()
    part = PCKSpectralClustering(k, random_state=seed).fit(X[rows])
    t_fit = time.perf_counter() - t
    t = time.perf_counter()
    predicted = part.predict(X)
    t_predict = time.perf_counter() - t
    t = time.perf_counter()
    km = KMeans(k, random_state=seed).fit_predict(mean_impute(X))
    t_km = time.perf_counter() - t
    return {
        "set": name,
        "n": X.shape[0],
        "k": k,
        "full": (_ari(ys, full.labels_), t_full),
        "sample+predict": (_ari(ys, predicted), t_fit + t_predict),
        "train rows agree": float(np.mean(predicted[rows] == part.labels_)),
        "kmeans": (_ari(ys, km), t_km),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sample", type=int, default=1500)
    ap.add_argument("--max-n", type=int, default=6000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--sets", nargs="+", default=["samson", "jasper", "statlog", "mnist_holed"])
    ap.add_argument("--out", type=Path, default=RESULTS / "pck_predict.md")
    args = ap.parse_args()
    warnings.filterwarnings("ignore")
    lines = [
        "# PCKSpectralClustering: fit on a sample, predict the rest (`bench_pck_predict.py`)",
        "",
        f"`python benchmarks/bench_pck_predict.py --sample {args.sample} --max-n {args.max_n} "
        f"--seed {args.seed}` (one run; seeded samples of at most {args.max_n} rows; ARI against "
        "the labels; seconds of wall time on this machine; every estimator at its defaults "
        "with the true k).",
        "",
        "| set | n | k | fit on all: ARI / s | fit on "
        f"{args.sample} + predict: ARI / s | time ratio | sample's rows: predict = labels_ "
        "| k-means on all: ARI / s |",
        "|---|---:|---:|---|---|---:|---:|---|",
    ]
    for name in args.sets:
        try:
            r = run(name, args.sample, args.seed, args.max_n)
        except rs.MissingSource as exc:
            print(f"{name}: skipped ({exc})", flush=True)
            continue
        (a_full, t_full), (a_pred, t_pred) = r["full"], r["sample+predict"]
        a_km, t_km = r["kmeans"]
        line = (
            f"| {name} | {r['n']} | {r['k']} | {a_full:.3f} / {t_full:.1f} | "
            f"{a_pred:.3f} / {t_pred:.1f} | {t_pred / t_full:.2f} | "
            f"{r['train rows agree']:.3f} | {a_km:.3f} / {t_km:.2f} |"
        )
        print(line, flush=True)
        lines.append(line)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
