"""MSSC at its defaults: seed stability and the comparison with k-means (issue 15).

Every cell fits ``MSSC(k, random_state=s, **variant)`` for the seeds ``s`` (default 0..4) and
records, per pixel set:

* with ground truth: the ARI of every seed (BSDS: mean over the human segmentations), its mean
  and its spread (max − min over the seeds), next to scikit-learn ``KMeans(k, random_state=s)``
  on the same features, and the ratio MSSC / k-means of the mean ARIs;
* always: the smallest ARI between the label maps of two seeds (``min pair``; 1 = the same
  partition whatever the seed) — the only stability measure on the demo scene, which has no
  ground truth.

Pixel sets (features as in ``bench_defaults.py`` and the jobs, nothing tuned per set):

* ``bsds3063``: BSDS500 photo 3063 as RGB + (row, col), standardised, k = 8, on the regular grid
  of ``bench_defaults.py --max-n 2000`` (1944 pixels); ``bsds3063_full``: all 154 401 pixels.
* ``demo``: the vendored Landsat scene of ``dkernel demo`` (383 115 valid pixels, 3 bands
  standardised + coordinates in [0, 0.25], ``n_bands=3``: the demo job's features), k = 5, no
  ground truth.
* ``samson_std`` / ``jasper_std``: ``bench_defaults.py``'s protocol (2000 pixels, every feature
  standardised, so ``band_norm='auto'`` keeps them); ``samson`` / ``jasper``: the job's features
  (reflectance + coordinates in [0, 0.25], ``n_bands`` = the bands, so 'auto' scales them to
  unit length), NMI as well.

Usage::

    DKERNEL_DATA=/work/shared/data python benchmarks/bench_mssc_stability.py \\
        [--sets bsds3063,demo] [--seeds 0 1 2 3 4] [--variant '{"embedding": "keca"}' ...]
        [--out benchmarks/results/mssc_stability] [--merge a.json b.json]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.cluster import KMeans
from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score
from sklearn.preprocessing import StandardScaler

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_defaults as bd  # noqa: E402

SETS = ("bsds3063", "bsds3063_full", "demo", "samson_std", "jasper_std", "samson", "jasper")
#: Acceptance points of issue 15.
MAX_SPREAD = 0.03
MIN_PAIR = 0.97


def load(name: str) -> tuple[np.ndarray, list[np.ndarray] | None, int, dict]:
    """Features, ground truths (None: none), k and extra estimator parameters."""
    if name == "bsds3063":
        X, ys = bd._bsds(2000)
        return StandardScaler().fit_transform(X), ys, bd.N_CLUSTERS_BSDS, {}
    if name == "bsds3063_full":
        X, ys = bd._bsds(10**9)
        return StandardScaler().fit_transform(X), ys, bd.N_CLUSTERS_BSDS, {}
    if name == "demo":
        from dkernel.io.raster import load_demo_landsat

        d = load_demo_landsat(scale="standardize")  # the demo job's features
        return np.asarray(d.X.compute(), dtype=np.float64), None, 5, {"n_bands": 3}
    if name.endswith("_std"):
        X, ys, k = bd.load_dataset(name[:-4], 2000)
        return X, ys, k, {}
    from dkernel.io.raster import load_hyperspectral

    d = load_hyperspectral(name, os.environ.get("DKERNEL_DATA", str(bd.data_dir())))
    X = np.asarray(d.X.compute(), dtype=np.float64)
    k = 3 if name == "samson" else 4
    return X, [np.asarray(d.y)], k, {"n_bands": X.shape[1] - 2}


def _score(labels: np.ndarray, ys: list[np.ndarray] | None) -> float | None:
    if ys is None:
        return None
    return float(np.mean([adjusted_rand_score(y, labels) for y in ys]))


def _min_pair(labels: list[np.ndarray]) -> float:
    return float(min(adjusted_rand_score(a, b) for a, b in itertools.combinations(labels, 2)))


def run_mssc(X, ys, k, extra, variant, seeds) -> dict:
    from dkernel.meanshift.estimators import MSSC

    labels, aris, nmis, parts, t = [], [], [], [], time.perf_counter()
    for s in seeds:
        est = MSSC(k, random_state=s, **{**extra, **variant}).fit(X)
        lab = np.asarray(est.labels_)
        labels.append(lab)
        aris.append(_score(lab, ys))
        if ys is not None and len(ys) == 1:
            nmis.append(float(normalized_mutual_info_score(ys[0], lab)))
        parts.append(est.n_partitions_)
    return _row(labels, aris, nmis, (time.perf_counter() - t) / len(seeds), parts)


def run_kmeans(X, ys, k, seeds) -> dict:
    labels, aris, nmis, t = [], [], [], time.perf_counter()
    for s in seeds:
        lab = KMeans(k, random_state=s).fit_predict(X)
        labels.append(lab)
        aris.append(_score(lab, ys))
        if ys is not None and len(ys) == 1:
            nmis.append(float(normalized_mutual_info_score(ys[0], lab)))
    return _row(labels, aris, nmis, (time.perf_counter() - t) / len(seeds), None)


def _row(labels, aris, nmis, seconds, parts) -> dict:
    have = aris[0] is not None
    return {
        "ari": aris if have else None,
        "ari_mean": float(np.mean(aris)) if have else None,
        "spread": float(max(aris) - min(aris)) if have else None,
        "nmi_mean": float(np.mean(nmis)) if nmis else None,
        "min_pair": _min_pair(labels) if len(labels) > 1 else None,
        "partitions": f"{min(parts)}–{max(parts)}" if parts else "",
        "seconds": seconds,
    }


def _f(v, fmt=".3f") -> str:
    return "–" if v is None else format(v, fmt)


def markdown(rows: list[dict], seeds) -> str:
    lines = [
        "# MSSC seed stability and k-means (`benchmarks/bench_mssc_stability.py`)",
        "",
        f"Seeds {', '.join(map(str, seeds))} (`random_state`). ARI against the ground truth "
        "(BSDS 3063: mean over its human segmentations); spread = max − min of that ARI over "
        "the seeds; min pair = smallest ARI between two seeds' label maps; ratio = MSSC mean "
        "ARI / k-means mean ARI on the same features. Targets (issue 15): spread ≤ "
        f"{MAX_SPREAD}, min pair ≥ {MIN_PAIR} where there is no ground truth, BSDS ratio ≥ 1.",
        "",
        "| set | n | k | method | variant | ARI per seed | mean ARI | spread | min pair | "
        "NMI | ratio | partitions | s / fit |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        per = " ".join(_f(a, ".3f") for a in r["ari"]) if r["ari"] else "–"
        lines.append(
            f"| {r['set']} | {r['n']} | {r['k']} | {r['method']} | {r['variant']} | {per} | "
            f"{_f(r['ari_mean'])} | {_f(r['spread'])} | {_f(r['min_pair'])} | "
            f"{_f(r['nmi_mean'])} | {_f(r.get('ratio'), '.2f')} | {r['partitions']} | "
            f"{r['seconds']:.1f} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sets", default=",".join(SETS))
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    ap.add_argument(
        "--variant",
        action="append",
        default=None,
        help="JSON dict of MSSC parameters over the defaults (repeatable; default: {})",
    )
    ap.add_argument("--no-kmeans", action="store_true")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "mssc_stability"))
    ap.add_argument(
        "--merge", nargs="+", default=None, help="only render these earlier .json outputs"
    )
    args = ap.parse_args()
    if args.merge:
        rows = [r for path in args.merge for r in json.loads(Path(path).read_text())]
        text = markdown(rows, args.seeds)
        Path(args.out).with_suffix(".md").write_text(text)
        Path(args.out).with_suffix(".json").write_text(json.dumps(rows, indent=1))
        print(text)
        return
    variants = [json.loads(v) for v in (args.variant or ["{}"])]
    rows = []
    warnings.simplefilter("ignore")
    for name in args.sets.split(","):
        X, ys, k, extra = load(name)
        base = {"set": name, "n": X.shape[0], "k": k}
        km = None
        if not args.no_kmeans:
            km = run_kmeans(X, ys, k, args.seeds)
            rows.append({**base, "method": "k-means", "variant": "sklearn defaults", **km})
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
        for v in variants:
            r = run_mssc(X, ys, k, extra, v, args.seeds)
            if km is not None and km["ari_mean"]:
                r["ratio"] = r["ari_mean"] / km["ari_mean"]
            shown = json.dumps(v) if v else "defaults"
            rows.append({**base, "method": "MSSC", "variant": shown.replace("|", "/"), **r})
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    text = markdown(rows, args.seeds)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".md").write_text(text)
    out.with_suffix(".json").write_text(json.dumps(rows, indent=1))
    print(text)


if __name__ == "__main__":
    main()
