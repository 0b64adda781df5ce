"""Far outliers and uniform noise against the graph clusterers and their peers.

Satellite scenes carry bad pixels, tables carry entry errors: three 5-D Gaussian blobs with a
few far points (5) or 1 % of uniform noise in a cube 40 standard deviations wide. Every method
at its defaults with the true k = 3 (HDBSCAN: its own); ARI on the blob points only (the noise
has no label), one seed per size, in one run.

Run:  python benchmarks/bench_outliers.py [--sizes 3000 20000 200000] [--seed 0]
Prints one table per size and writes ``benchmarks/results/outliers.md``.
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path

import numpy as np
from bench_repeated_rows import HDBSCAN_MAX_N, SK_SPECTRAL_MAX_N, _methods
from sklearn.datasets import make_blobs
from sklearn.metrics import adjusted_rand_score

RESULTS = Path(__file__).resolve().parents[1] / "benchmarks" / "results"


def blobs_with_outliers(n: int, n_far: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(X with ``n_far`` uniform points in [-200, 200]^5 appended, labels of the n blob points)."""
    X, y = make_blobs(n, n_features=5, centers=3, random_state=seed)
    far = np.random.default_rng(seed).uniform(-200, 200, (n_far, 5))
    return np.vstack([X, far]), y


def run(sizes: list[int], seed: int) -> str:
    lines = [
        "# Far outliers and uniform noise (`benchmarks/bench_outliers.py`)",
        "",
        f"`python benchmarks/bench_outliers.py --sizes {' '.join(map(str, sizes))} "
        f"--seed {seed}` (one run). Three 5-D blobs plus 5 far points or 1 % uniform noise; "
        "every method at its defaults with k = 3 (HDBSCAN: its own); ARI on the blob points; "
        "`ratio`: ARI over k-means' ARI.",
    ]
    for n in sizes:
        lines += [
            "",
            f"## N = {n}",
            "",
            "| method | 5 far points ARI | s | ratio | 1 % noise ARI | s | ratio |",
            "|---|---:|---:|---:|---:|---:|---:|",
        ]
        data = [blobs_with_outliers(n, n_far, seed) for n_far in (5, n // 100)]
        base: dict[int, float] = {}
        for name, make in _methods(3, seed).items():
            cells = [name]
            for case, (X, y) in enumerate(data):
                limit = SK_SPECTRAL_MAX_N if name == "sk.Spectral-knn" else HDBSCAN_MAX_N
                if name.startswith("sk.") and name != "sk.KMeans" and n > limit:
                    cells += ["skipped", "", ""]
                    continue
                t0 = time.perf_counter()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    labels = np.asarray(make().fit(X).labels_)[:n]
                secs = time.perf_counter() - t0
                ari = adjusted_rand_score(y, labels)
                if name == "sk.KMeans":
                    base[case] = ari
                ratio = f"{ari / base[case]:.2f}" if base.get(case, 0) > 0.01 else "—"
                cells += [f"{ari:.3f}", f"{secs:.2f}", ratio]
            lines.append("| " + " | ".join(cells) + " |")
            print(lines[-1], flush=True)
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[3000, 20000, 200000])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=str(RESULTS / "outliers.md"))
    args = parser.parse_args()
    text = run(args.sizes, args.seed)
    Path(args.out).write_text(text)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
