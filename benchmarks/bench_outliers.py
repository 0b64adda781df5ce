"""Far outliers and uniform noise against the graph clusterers and their peers.

Satellite scenes carry bad pixels, tables carry entry errors: three 5-D Gaussian blobs with a
few far points (5) or 1 % of uniform noise in a cube 40 standard deviations wide. Every method
at its defaults with the true k = 3 (HDBSCAN: its own); ARI on the blob points only (the noise
has no label), one seed per size, in one run.

Run:  python benchmarks/bench_outliers.py [--sizes 3000 20000 200000] [--seed 0]
Prints one table per size and writes ``benchmarks/results/outliers.md``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from bench_repeated_rows import comparison_rows, main
from sklearn.datasets import make_blobs

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
        cases = [blobs_with_outliers(n, n_far, seed) for n_far in (5, n // 100)]
        lines += comparison_rows(cases, n, seed)
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main(run, "outliers.md")
