"""ARI of dkernel's spectral embeddings vs scikit-learn on the SIPU shape sets and UCI tables.

Issue 4: one table of ARI on the 2-D shape sets in ``DKERNEL_DATA`` (jain, Aggregation,
Compound, pathbased, spiral, flame, R15, D31) and on iris / wine / breast cancer
(standardized) for KPCA, KECA and normalized (NJW) embeddings with the default rule-of-thumb
σ (0.2 × median pairwise distance), next to scikit-learn ``SpectralClustering`` (same σ, and
its default γ = 1) and k-means. dkernel runs exactly here (every point is a landmark);
``n_components = n_clusters`` = the true number of classes for every method.

Usage: python benchmarks/bench_spectral_ari.py [--quick]
Writes benchmarks/results/spectral_ari.md
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np
from sklearn.cluster import KMeans
from sklearn.cluster import SpectralClustering as SkSpectral
from sklearn.metrics import adjusted_rand_score
from sklearn.preprocessing import StandardScaler

from dkernel.io.readers import load_sklearn
from dkernel.io.shapes import SHAPE_SETS, load_shapes
from dkernel.spectral.clustering import SpectralClustering

RESULTS = Path(__file__).parent / "results"
METHODS = ("kpca", "keca", "normalized")


def datasets(quick: bool):
    names = ["jain", "flame", "spiral"] if quick else list(SHAPE_SETS)
    for name in names:
        d = load_shapes(name)
        yield name, d.X, d.y
    for name in ["iris"] if quick else ["iris", "wine", "breast_cancer"]:
        d = load_sklearn(name)
        yield name, StandardScaler().fit_transform(d.X), d.y


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    os.environ.setdefault("DKERNEL_DATA", str(Path(__file__).resolve().parents[2] / "shared/data"))
    cols = [f"dkernel {m}" for m in METHODS] + [
        "sklearn SC (same σ)",
        "sklearn SC (γ=1)",
        "k-means",
    ]
    lines = [
        "| dataset | n | k | σ | " + " | ".join(cols) + " |",
        "|---|---|---|---|" + "---|" * len(cols),
    ]
    t0 = time.perf_counter()
    for name, X, y in datasets(args.quick):
        k = int(np.unique(y).size)
        row = []
        sigma = None
        for method in METHODS:
            sc = SpectralClustering(k, embedding=method, n_landmarks=10**6, random_state=0)
            row.append(adjusted_rand_score(y, sc.fit_predict(X)))
            sigma = sc.sigma_
        gamma = 1.0 / (2 * sigma**2)
        for g in (gamma, 1.0):
            try:
                lab = SkSpectral(k, affinity="rbf", gamma=g, random_state=0).fit_predict(X)
                row.append(adjusted_rand_score(y, lab))
            except Exception:  # noqa: BLE001 - record a failure in the table
                row.append(float("nan"))
        row.append(adjusted_rand_score(y, KMeans(k, n_init=10, random_state=0).fit_predict(X)))
        best = max(row)
        cells = [f"**{v:.3f}**" if v == best else f"{v:.3f}" for v in row]
        lines.append(f"| {name} | {len(y)} | {k} | {sigma:.3g} | " + " | ".join(cells) + " |")
        print(lines[-1], flush=True)
    text = "\n".join(lines)
    print(f"\n{text}\n\n({time.perf_counter() - t0:.0f} s)")
    if not args.quick:
        RESULTS.mkdir(exist_ok=True)
        out = RESULTS / "spectral_ari.md"
        out.write_text(
            "# ARI of spectral embeddings (benchmarks/bench_spectral_ari.py)\n\n"
            "dkernel: exact (every point a landmark), RBF with σ = 0.2 × median pairwise "
            "distance, n_components = n_clusters = number of classes; KPCA → k-means, KECA → "
            "angular k-means, normalized → NJW (row-normalized) k-means. UCI tables "
            "standardized. Best per row in bold.\n\n" + text + "\n"
        )
        print(f"wrote {out}")


if __name__ == "__main__":
    main()
