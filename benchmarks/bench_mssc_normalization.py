"""MSSC's partition graph on the pixel and photo sets of ``bench_realdata.py`` (issue 57).

``MSSC(normalization=...)`` clusters either the size-weighted point-level graph of the
partitions (``'size'``, the default), their Cauchy–Schwarz graph (``'cs'``), or both and keeps
the ``'cs'`` labelling when its silhouette is clearly higher (``'auto'``). Per set and seed:
MSSC at its defaults with each normalization and the true k, and scikit-learn's ``KMeans(k)``
beside it in the same run, on the samples of ``bench_realdata.py`` (columns standardised);
ARI against the labels (BSDS: the mean over its human segmentations). Prints and writes the
mean over seeds, the sets at or above k-means and the ratio of the means to k-means'.

Run:  DKERNEL_DATA=../shared/data python benchmarks/bench_mssc_normalization.py
      [--seeds 0 1 2] [--max-n 3000]   (the BSDS photos beyond 3063: ``bench_realdata.py --stage``)
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

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import realdata_sets as rs  # noqa: E402
from bench_missing import standardise  # noqa: E402

#: The sets MSSC runs on in ``bench_realdata.py`` (its pixel and photo kinds).
SETS = [s.name for s in rs.SETS if s.kind in ("pixels", "photo")]
NORMALIZATIONS = ("size", "cs", "auto")


def _ari(truths: list[np.ndarray], labels: np.ndarray) -> float:
    return float(np.mean([adjusted_rand_score(y, labels) for y in truths]))


def run(seeds: list[int], max_n: int) -> str:
    from dkernel import MSSC

    scores: dict[str, dict[str, list[float]]] = {}
    seconds: dict[str, list[float]] = {n: [] for n in NORMALIZATIONS}
    for name in SETS:
        try:
            rs.load(name, seeds[0], max_n)
        except rs.MissingSource as missing:
            print(f"skipped {name}: {missing}", flush=True)
            continue
        cells: dict[str, list[float]] = {n: [] for n in ("k-means", *NORMALIZATIONS)}
        for seed in seeds:
            X, truths, k, _ = rs.load(name, seed, max_n)
            X = standardise(X)
            cells["k-means"].append(_ari(truths, KMeans(k, random_state=seed).fit(X).labels_))
            for norm in NORMALIZATIONS:
                start = time.perf_counter()
                model = MSSC(k, random_state=seed, normalization=norm).fit(X)
                seconds[norm].append(time.perf_counter() - start)
                cells[norm].append(_ari(truths, np.asarray(model.labels_)))
        scores[name] = cells
        print(name, {c: round(float(np.mean(v)), 3) for c, v in cells.items()}, flush=True)
    mean = {c: float(np.mean([np.mean(s[c]) for s in scores.values()])) for c in cells}
    lines = [
        "# MSSC's partition graph on the pixel and photo sets (`bench_mssc_normalization.py`)",
        "",
        f"`python benchmarks/bench_mssc_normalization.py --seeds {' '.join(map(str, seeds))} "
        f"--max-n {max_n}`: the samples of `bench_realdata.py`, MSSC at its defaults with the "
        "true k and each `normalization`, scikit-learn's `KMeans(k)` in the same run; mean ARI "
        "over seeds. One run on this 2-core machine.",
        "",
        "| set | k-means | " + " | ".join(f"MSSC '{n}'" for n in NORMALIZATIONS) + " |",
        "|---|---:|" + "---:|" * len(NORMALIZATIONS),
    ]
    for name, cells in scores.items():
        row = " | ".join(f"{np.mean(cells[c]):.3f}" for c in ("k-means", *NORMALIZATIONS))
        lines.append(f"| {name} | {row} |")
    lines.append("| **mean** | " + " | ".join(f"{mean[c]:.3f}" for c in mean) + " |")
    lines += ["", "| normalization | mean / k-means | sets ≥ k-means | median fit (s) |"]
    lines.append("|---|---:|---:|---:|")
    for norm in NORMALIZATIONS:
        wins = sum(np.mean(s[norm]) >= np.mean(s["k-means"]) for s in scores.values())
        lines.append(
            f"| '{norm}' | {mean[norm] / mean['k-means']:.3f} | {wins} of {len(scores)} | "
            f"{np.median(seconds[norm]):.2f} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--max-n", type=int, default=3000)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "mssc_normalization"))
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    text = run(args.seeds, args.max_n)
    print(text)
    Path(args.out).with_suffix(".md").write_text(text)


if __name__ == "__main__":
    main()
