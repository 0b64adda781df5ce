"""How many clusters: ``n_clusters='auto'`` against the true k and against the peers, in one run.

The protocol of ``bench_defaults.py`` (features standardised, every parameter at its default),
at three sizes:

* **2·10³**: the 23-set suite of ``bench_defaults.py`` (sets above 2 000 points subsampled once,
  with seed 0; the seed changes the estimators' randomness).
* **2·10⁴ and 2·10⁵**: the synthetic families of ``bench_defaults.py --sizes`` (moons, circles,
  three rings, varied and anisotropic blobs, 5 blobs in 10-D, moons with three noise features),
  drawn as there (seed 0: the varied and anisotropic blobs are scikit-learn's
  ``random_state=170`` layouts; other draws can put two centres on top of each other); the seed
  changes the estimators' randomness.

Per set and seed:

* dkernel ``SpectralClustering`` and ``KernelDecompositionClustering`` with ``'auto'`` and with
  the true k: the chosen k, both ARIs and both fit times (the cost of choosing); ``MSSC`` on the
  pixel sets (Samson, Jasper Ridge, the BSDS photo) and ``KernelKMeans`` (its criterion) at
  2·10³.
* the peers a user would reach for instead, at *their* defaults: scikit-learn's ``HDBSCAN``
  (its noise label counts as one more cluster) and ``KMeans`` with the k of the best silhouette
  (``silhouette_score`` on at most 5 000 points) over the same candidates at 2·10³ and over
  k = 2..15 above (50 k-means fits of 2·10⁵ points would dominate the run).
* every rule of :mod:`dkernel.model_order` on the same nearly mutual k-NN graph
  (:func:`~dkernel.model_order.knn_graph_embedding`, on at most 5 000 points): the timescale gap,
  the eigengap, the rotation cost (these three once per set, on the first seed: below 5 000
  points the graph does not depend on the seed), and the stability over four 80 % subsamples of
  at most 2 000 points (the clusterer: k-means on the graph embedding of each subsample; every
  seed).

Writes ``--out`` (``benchmarks/results/defaults_auto_k``) ``.md`` and ``.json``::

    python benchmarks/bench_auto_k.py [--sizes 2e3 2e4 2e5] [--seeds 0 1 2]
        [--large-seeds 0] [--estimators SpectralClustering,KDC,MSSC,KernelKMeans]
        [--only-datasets moons,iris] [--no-rules]

``--large-seeds`` replaces ``--seeds`` at 2·10⁵ points (one fit there takes 10-30 s on two
cores).

``--scenes`` instead runs ``MSSC(n_clusters='auto')`` on the whole Samson (k = 3) and Jasper Ridge
(k = 4) scenes with the jobs' features (``bench_mssc_defaults.py``) and on the 6-class synthetic
scene of ``bench_full_tile.py``, for every seed of ``--seeds``, and MSSC at the chosen k, the
best-scoring k, the true k and its neighbours, and writes ``--out`` ``_scenes.md``.

``bench_defaults.py --auto-k`` runs this with the same arguments.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn import cluster
from sklearn.metrics import adjusted_rand_score, silhouette_score

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_defaults as bd  # noqa: E402

ESTIMATORS = {
    "SpectralClustering": "SpectralClustering",
    "KDC": "KernelDecompositionClustering",
    "MSSC": "MSSC",
    "KernelKMeans": "KernelKMeans",
}
RULES = ("timescale-gap", "eigengap", "rotation", "stability")
#: Rows the rules, the silhouette and HDBSCAN see at most (uniform sample, fixed per seed).
RULE_ROWS = 5_000
STABILITY_ROWS = 2_000


#: The peers every set is run with (``--no-peers``: none, for a rerun of dkernel's side only).
PEERS: tuple[str, ...] = ("HDBSCAN", "KMeans-silhouette")


def _ari(ys: list[np.ndarray], labels: np.ndarray) -> float:
    return float(np.mean([adjusted_rand_score(y, labels) for y in ys]))


def _estimator(short: str, X: np.ndarray, ys, n_clusters, seed: int) -> dict:
    import dkernel

    est = getattr(dkernel, ESTIMATORS[short])(n_clusters, random_state=seed)
    t = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.fit(X)
    seconds = time.perf_counter() - t
    return {
        "k": int(est.n_clusters_),
        "ari": _ari(ys, np.asarray(est.labels_)),
        "seconds": seconds,
    }


def _sample(n: int, size: int, seed: int) -> np.ndarray:
    if n <= size:
        return np.arange(n)
    return np.sort(np.random.default_rng(seed).choice(n, size, replace=False))


def _hdbscan(X: np.ndarray, ys, seed: int) -> dict:
    t = time.perf_counter()
    labels = cluster.HDBSCAN().fit_predict(X)
    return {
        "k": int(np.unique(labels[labels >= 0]).size),
        "ari": _ari(ys, labels),
        "seconds": time.perf_counter() - t,
    }


def _kmeans_silhouette(X: np.ndarray, ys, candidates: np.ndarray, seed: int) -> dict:
    if X.shape[0] > 2000:
        candidates = np.arange(2, 16)
    t = time.perf_counter()
    rows = _sample(X.shape[0], RULE_ROWS, seed)
    best_k, best_s, best_labels = None, -np.inf, None
    for k in candidates:
        labels = cluster.KMeans(int(k), random_state=seed).fit_predict(X)
        s = silhouette_score(X[rows], labels[rows])
        if s > best_s:
            best_k, best_s, best_labels = int(k), s, labels
    return {"k": best_k, "ari": _ari(ys, best_labels), "seconds": time.perf_counter() - t}


def _graph_kmeans(rows: np.ndarray, candidates, seed: int) -> dict[int, np.ndarray]:
    """The stability rule's clusterer: k-means on the graph embedding of a subsample."""
    from dkernel.linalg.kmeans import euclidean_kmeans
    from dkernel.model_order import knn_graph_embedding

    top = min(int(max(candidates)), rows.shape[0] - 2)
    _, Z = knn_graph_embedding(rows, top + 1, seed=seed)
    return {
        int(k): euclidean_kmeans(Z[:, : int(k)], int(k), n_init=3, random_state=seed)[0]
        for k in candidates
    }


def _rules(
    X: np.ndarray, candidates: np.ndarray, seed: int, *, graph_rules: bool = True
) -> dict[str, int]:
    from dkernel.model_order import (
        choose,
        knn_graph_embedding,
        rotation_scores,
        spectrum_model_order,
        stability_model_order,
    )

    out: dict[str, int] = {}
    rows = _sample(X.shape[0], RULE_ROWS, seed)
    c = candidates[candidates < rows.size - 1]
    if graph_rules:
        spectrum, Z = knn_graph_embedding(X[rows], int(c[-1]) + 1, seed=seed)
        c = c[c < spectrum.size]
        for rule in RULES[:2]:
            out[rule] = spectrum_model_order(spectrum, c, rule).n_clusters
        U = Z / np.linalg.norm(Z, axis=0, keepdims=True)
        out["rotation"] = choose(rotation_scores(U[:, : int(c[-1])], c), c)
    small = X[_sample(X.shape[0], STABILITY_ROWS, seed)]
    c_small = c[c < 0.8 * small.shape[0] - 2]
    out["stability"] = stability_model_order(
        small, _graph_kmeans, c_small, n_subsamples=4, seed=seed
    ).n_clusters
    return out


def _sets(size: int, seeds: list[int], only: list[str]):
    """``(name, seed, X, label sets, true k)`` for one size."""
    if size <= 2000:
        for name in bd.DATASETS:
            if only and name not in only:
                continue
            if bd.DATASETS[name][1] and not bd.data_dir().exists():
                print(f"skip {name}: no datasets at {bd.data_dir()}", file=sys.stderr)
                continue
            X, ys, k = bd.load_dataset(name, size)
            for s in seeds:
                yield name, s, X, ys, k
        return
    for name in bd.SIZED_FAMILIES:
        if only and name not in only:
            continue
        X, y, k = bd.load_sized(name, size, 0)
        for s in seeds:
            yield name, s, X, [y], k


def run(args) -> dict:
    from dkernel.model_order import candidate_range

    only = [d for d in args.only_datasets.split(",") if d]
    estimators = [e for e in args.estimators.split(",") if e]
    cells = []
    for size in args.sizes:
        seeds = args.large_seeds if size >= 200_000 and args.large_seeds else args.seeds
        for name, seed, X, ys, k in _sets(size, seeds, only):
            n = X.shape[0]
            candidates = candidate_range(n)
            cell = {"size": size, "dataset": name, "seed": seed, "n": n, "k": k}
            for short in estimators:
                if short == "MSSC" and name not in bd.PIXEL_SETS:
                    continue
                if short == "KernelKMeans" and size > 2000:
                    continue
                cell[short] = {
                    "auto": _estimator(short, X, ys, "auto", seed),
                    "true": _estimator(short, X, ys, k, seed),
                }
            if "HDBSCAN" in PEERS:
                cell["HDBSCAN"] = _hdbscan(X, ys, seed)
            if "KMeans-silhouette" in PEERS:
                cell["KMeans-silhouette"] = _kmeans_silhouette(X, ys, candidates, seed)
            if not args.no_rules:
                cell["rules"] = _rules(X, candidates, seed, graph_rules=seed == seeds[0])
            cells.append(cell)
            print(_cell_line(cell), file=sys.stderr, flush=True)
    return {"args": vars(args), "cells": cells}


def _cell_line(c: dict) -> str:
    parts = [f"{c['dataset']:14s} n={c['n']:6d} seed {c['seed']} k={c['k']:2d}"]
    for short in ESTIMATORS:
        if short in c:
            a, t = c[short]["auto"], c[short]["true"]
            parts.append(f"{short} {a['k']} ({a['ari']:.3f}/{t['ari']:.3f})")
    for peer in PEERS:
        parts.append(f"{peer} {c[peer]['k']} ({c[peer]['ari']:.3f})")
    if "rules" in c:
        parts.append("rules " + " ".join(f"{r}={k}" for r, k in c["rules"].items()))
    return " | ".join(parts)


def markdown(result: dict) -> str:
    cells = result["cells"]
    a = result["args"]
    lines = [
        "# How many clusters: `n_clusters='auto'` against the true k and the peers",
        "",
        f"`python benchmarks/bench_auto_k.py --sizes {' '.join(f'{s:.0e}' for s in a['sizes'])}"
        f" --seeds {' '.join(map(str, a['seeds']))} --large-seeds "
        f"{' '.join(map(str, a['large_seeds']))} --estimators {a['estimators']}` (one run): features standardised, every "
        "parameter at its default; HDBSCAN at its defaults; k-means with the best-silhouette k "
        "over the same candidates (k = 2..clip(√n, 10, 50)). A set counts as a hit when the "
        "chosen k equals the true k (each seed counts one third).",
    ]
    for size in a["sizes"]:
        here = [c for c in cells if c["size"] == size]
        if not here:
            continue
        lines += ["", f"## {size:.0e} points", ""]
        lines += _per_set_table(here)
        lines += [""] + _summary_table(here)
        if any("rules" in c for c in here):
            lines += [""] + _rules_table(here)
        lines += [""] + _cost_table(here)
    return "\n".join(lines) + "\n"


def _names(cells: list[dict]) -> list[str]:
    return list(dict.fromkeys(c["dataset"] for c in cells))


def _per_set_table(cells: list[dict]) -> list[str]:
    shown = [s for s in ESTIMATORS if any(s in c for c in cells)]
    head = "| dataset | n | true k | " + " | ".join(shown) + " | HDBSCAN | KMeans-silhouette |"
    out = [
        "Each estimator cell: chosen k per seed / mean ARI with 'auto' / mean ARI with the true "
        "k. Peers: k found per seed / mean ARI.",
        "",
        head,
        "|---|---:|---:|" + "---|" * (len(shown) + 2),
    ]
    for name in _names(cells):
        rows = [c for c in cells if c["dataset"] == name]
        parts = []
        for s in shown:
            got = [c[s] for c in rows if s in c]
            if not got:
                parts.append("—")
                continue
            ks = ",".join(str(g["auto"]["k"]) for g in got)
            parts.append(
                f"{ks} / {np.mean([g['auto']['ari'] for g in got]):.3f} / "
                f"{np.mean([g['true']['ari'] for g in got]):.3f}"
            )
        for peer in PEERS:
            ks = ",".join(str(c[peer]["k"]) for c in rows)
            parts.append(f"{ks} / {np.mean([c[peer]['ari'] for c in rows]):.3f}")
        out.append(f"| {name} | {rows[0]['n']} | {rows[0]['k']} | " + " | ".join(parts) + " |")
    return out


def _hits(cells: list[dict], chosen) -> tuple[float, float]:
    """Sets with the true k (a set's seeds average) and the mean |chosen − true|."""
    per_set = {}
    errors = []
    for c in cells:
        k = chosen(c)
        if k is None:
            continue
        per_set.setdefault(c["dataset"], []).append(k == c["k"])
        errors.append(abs(k - c["k"]))
    return float(sum(np.mean(v) for v in per_set.values())), float(np.mean(errors))


def _summary_table(cells: list[dict]) -> list[str]:
    out = [
        "| method | sets | true k chosen (sets) | mean abs(chosen − true) | mean ARI 'auto' | "
        "mean ARI true k | 'auto' / true k | 'auto' / HDBSCAN |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for s in ESTIMATORS:
        got = [c for c in cells if s in c]
        if not got:
            continue
        hits, err = _hits(got, lambda c, s=s: c[s]["auto"]["k"])
        auto = _set_mean(got, lambda c, s=s: c[s]["auto"]["ari"])
        true = _set_mean(got, lambda c, s=s: c[s]["true"]["ari"])
        hdb = _set_mean(got, lambda c: c["HDBSCAN"]["ari"]) if "HDBSCAN" in PEERS else np.nan
        out.append(
            f"| {s} | {len(_names(got))} | {hits:.2f} | {err:.2f} | {auto:.3f} | {true:.3f} | "
            f"{auto / true:.3f} | {auto / hdb:.3f} |"
        )
    for peer in PEERS:
        hits, err = _hits(cells, lambda c, p=peer: c[p]["k"])
        ari = _set_mean(cells, lambda c, p=peer: c[p]["ari"])
        out.append(
            f"| {peer} (peer) | {len(_names(cells))} | {hits:.2f} | {err:.2f} | {ari:.3f} | "
            "— | — | — |"
        )
    return out


def _set_mean(cells: list[dict], value) -> float:
    """The mean over sets of the mean over seeds."""
    per_set: dict[str, list[float]] = {}
    for c in cells:
        per_set.setdefault(c["dataset"], []).append(value(c))
    return float(np.mean([np.mean(v) for v in per_set.values()]))


def _rules_table(cells: list[dict]) -> list[str]:
    out = [
        "Each rule of `dkernel.model_order` on the same nearly mutual k-NN graph (at most "
        f"{RULE_ROWS} points; stability: four 80 % subsamples of at most {STABILITY_ROWS}):",
        "",
        "| rule | true k chosen (sets) | mean abs(chosen − true) | chosen k per set (first seed) |",
        "|---|---:|---:|---|",
    ]
    for rule in RULES:
        hits, err = _hits(cells, lambda c, r=rule: c.get("rules", {}).get(r))
        first = {
            c["dataset"]: c["rules"][rule]
            for c in cells
            if c["seed"] == min_seed(cells) and rule in c.get("rules", {})
        }
        shown = ", ".join(f"{d} {k}" for d, k in first.items())
        out.append(f"| {rule} | {hits:.2f} | {err:.2f} | {shown} |")
    return out


def min_seed(cells: list[dict]) -> int:
    return min(c["seed"] for c in cells)


def _cost_table(cells: list[dict]) -> list[str]:
    out = [
        "Cost of choosing: fit time with 'auto' over the fit time with the true k (geometric "
        "mean over sets and seeds; the largest in brackets).",
        "",
        "| estimator | auto / true k | worst |",
        "|---|---:|---:|",
    ]
    for s in ESTIMATORS:
        r = [c[s]["auto"]["seconds"] / c[s]["true"]["seconds"] for c in cells if s in c]
        if r:
            out.append(f"| {s} | {float(np.exp(np.mean(np.log(r)))):.2f} | {max(r):.2f} |")
    return out


def _labelled_scenes() -> list[tuple[str, np.ndarray, np.ndarray, int, int]]:
    """(name, features, labels, true k, bands): Samson, Jasper Ridge with the jobs' features,
    and ``bench_full_tile.py``'s 6-class synthetic scene (300², the image readers' defaults)."""
    from bench_full_tile import N_CLASSES, scene_strip
    from bench_mssc_defaults import _scene

    from dkernel.io.raster import image_from_array, raster_to_loaded

    out = []
    for name, k in (("samson", 3), ("jasper", 4)):
        X, y = _scene(name, "none", 0.25)
        out.append((name, X, y, k, X.shape[1] - 2))
    bands, classes = scene_strip(0, 300, 300)
    image = image_from_array(bands.transpose(1, 2, 0).astype(np.float32), layout="yxb", name="s")
    data = raster_to_loaded(image, scale="minmax", coord_scale=0.25)
    out.append(("synthetic 300²", np.asarray(data.X), classes.ravel(), N_CLASSES, bands.shape[0]))
    return out


def scenes(seeds: list[int]) -> str:
    """``--scenes``: MSSC's chosen k on the whole labelled scenes, and the ARI around it."""
    from dkernel import MSSC
    from dkernel.model_order import IMAGE_FINEST_FRACTION, choose

    lines = [
        "# MSSC `n_clusters='auto'` on the whole labelled scenes",
        "",
        f"`python benchmarks/bench_auto_k.py --scenes --seeds {' '.join(map(str, seeds))}`: "
        "Samson and Jasper Ridge with the jobs' features (reflectance unscaled, pixel "
        "coordinates in [0, 0.25]), the 6-class synthetic scene of `bench_full_tile.py` with "
        "the image readers' defaults; MSSC at its defaults. 'auto' takes the finest k whose "
        f"timescale-gap score is at least {IMAGE_FINEST_FRACTION:g} × the best "
        "(`dkernel.model_order.IMAGE_FINEST_FRACTION`); 'best score' is the k the spectral "
        "estimators' rule would take. ARI by k: MSSC with that k given, the same seed.",
        "",
        "| scene | true k | seed | chosen k | best score | scores (k: score) | ARI by k |",
        "|---|---:|---:|---:|---:|---|---|",
    ]
    for name, X, y, k, n_bands in _labelled_scenes():
        for seed in seeds:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                auto = MSSC(n_bands=n_bands, random_state=seed).fit(X)
                order = auto.model_order_
                best = choose(order.scores, order.candidates)
                ks = sorted({k - 1, k, k + 1, auto.n_clusters_, best})
                aris = {
                    kk: adjusted_rand_score(
                        y, MSSC(kk, n_bands=n_bands, random_state=seed).fit(X).labels_
                    )
                    for kk in ks
                }
            shown = ", ".join(
                f"{int(c)}: {v:.2f}"
                for c, v in zip(order.candidates[:6], order.scores[:6], strict=False)
            )
            by_k = ", ".join(f"{kk}: {a:.3f}" for kk, a in aris.items())
            lines.append(
                f"| {name} | {k} | {seed} | {auto.n_clusters_} | {best} | {shown} | {by_k} |"
            )
            print(lines[-1], file=sys.stderr, flush=True)
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=float, nargs="+", default=[2e3, 2e4, 2e5])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--large-seeds", type=int, nargs="*", default=[0], help="seeds at 2e5")
    ap.add_argument("--estimators", default=",".join(ESTIMATORS), help="comma-separated")
    ap.add_argument("--only-datasets", default="", help="comma-separated dataset names")
    ap.add_argument("--no-rules", action="store_true", help="skip the per-rule hit rates")
    ap.add_argument(
        "--no-peers", action="store_true", help="skip HDBSCAN and k-means by silhouette"
    )
    ap.add_argument("--scenes", action="store_true", help="MSSC on the whole labelled scenes")
    ap.add_argument("--out", default=str(bd.RESULTS / "defaults_auto_k"))
    args = ap.parse_args(argv)
    global PEERS
    if args.no_peers:
        PEERS = ()
    if args.scenes:
        text = scenes(args.seeds)
        Path(f"{args.out}_scenes.md").write_text(text)
        print(text)
        return
    args.sizes = [int(s) for s in args.sizes]
    result = run(args)
    text = markdown(result)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".md").write_text(text)
    out.with_suffix(".json").write_text(json.dumps(result, indent=1, default=float))
    print(text)


if __name__ == "__main__":
    main()
