"""Integer-valued data: repeated rows against the k-NN graph clusterers and their peers.

Answers on a five-point scale, yes/no answers, counts and 8-bit pixels repeat rows: three 4-D
Gaussian blobs (centres uniform in [1.5, 4.5], σ = 0.7) rounded to the integers 1..5 have a few
hundred distinct rows at any N, each repeated tens to thousands of times. A k-NN graph of all
rows is then cut into cliques of copies, landmarks drawn from the rows coincide, and the
nearest neighbours of a row tie (12 binary features: 12 rows at Hamming distance 1). This
benchmark runs dkernel's graph clusterers and the tools a user would pick instead, every one
at its defaults with only the true k (HDBSCAN: its own), on the rounded blobs, on the same
blobs unrounded (the control) and on three groups of 10 and of 12 binary features; one seed
per size, in one run.

Run:  python benchmarks/bench_repeated_rows.py [--sizes 3000 20000 200000] [--seed 0]
Prints one table per size (ARI, fit seconds, ARI / k-means' ARI) and writes
``benchmarks/results/repeated_rows.md``.
"""

from __future__ import annotations

import argparse
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
from sklearn.metrics import adjusted_rand_score

RESULTS = Path(__file__).resolve().parents[1] / "benchmarks" / "results"
#: scikit-learn's spectral clustering builds a dense eigenproblem: beyond this it is skipped
SK_SPECTRAL_MAX_N = 20_000
HDBSCAN_MAX_N = 20_000


def rounded_blobs(n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(rounded X, unrounded X, labels) of three 4-D blobs, the rounded ones on 1..5."""
    rng = np.random.default_rng(seed)
    centres = rng.uniform(1.5, 4.5, size=(3, 4))
    y = rng.integers(0, 3, n)
    X = centres[y] + rng.normal(0, 0.7, (n, 4))
    return np.clip(np.rint(X), 1, 5), X, y


def binary_groups(n: int, d: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(X, labels) of three groups of ``d`` yes/no answers, each answer of a group 'yes' with
    its own probability (uniform in [0.1, 0.9]): at most 2^d distinct rows."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, n)
    p = rng.uniform(0.1, 0.9, size=(3, d))
    return (rng.uniform(size=(n, d)) < p[y]).astype(np.float64), y


def _methods(k: int, seed: int) -> dict[str, Callable[[], object]]:
    from sklearn.cluster import HDBSCAN, KMeans, SpectralClustering

    import dkernel

    return {
        "sk.KMeans": lambda: KMeans(k, random_state=seed),
        "dk.SpectralClustering": lambda: dkernel.SpectralClustering(k, random_state=seed),
        "dk.KernelDecomposition": lambda: dkernel.KernelDecompositionClustering(
            k, random_state=seed
        ),
        "dk.KernelKMeans": lambda: dkernel.KernelKMeans(k, random_state=seed),
        "dk.JointRanking": lambda: dkernel.JointRankingClustering(n_clusters=k, random_state=seed),
        "sk.Spectral-knn": lambda: SpectralClustering(
            k, affinity="nearest_neighbors", random_state=seed
        ),
        "sk.HDBSCAN": lambda: HDBSCAN(),
    }


def comparison_rows(
    cases: list[tuple[np.ndarray, np.ndarray]], n: int, seed: int, k: int = 3
) -> list[str]:
    """One table row per method: ARI (on the first ``len(y)`` rows), fit seconds and the
    ratio to k-means' ARI for each ``(X, y)`` case; peers past their size limit are skipped."""
    rows, base = [], {}
    for name, make in _methods(k, seed).items():
        cells = [name]
        for case, (X, y) in enumerate(cases):
            limit = SK_SPECTRAL_MAX_N if name == "sk.Spectral-knn" else HDBSCAN_MAX_N
            if name.startswith("sk.") and name != "sk.KMeans" and n > limit:
                cells += ["skipped", "", ""]
                continue
            t0 = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                labels = np.asarray(make().fit(X).labels_)[: len(y)]
            secs = time.perf_counter() - t0
            ari = adjusted_rand_score(y, labels)
            if name == "sk.KMeans":
                base[case] = ari
            ratio = f"{ari / base[case]:.2f}" if base.get(case, 0) > 0.01 else "—"
            cells += [f"{ari:.3f}", f"{secs:.2f}", ratio]
        rows.append("| " + " | ".join(cells) + " |")
        print(rows[-1], flush=True)
    return rows


def run(sizes: list[int], seed: int) -> str:
    lines = [
        "# Integer-valued data: repeated rows (`benchmarks/bench_repeated_rows.py`)",
        "",
        f"`python benchmarks/bench_repeated_rows.py --sizes {' '.join(map(str, sizes))} "
        f"--seed {seed}` (one run). Three 4-D blobs rounded to 1..5 and, as the control, "
        "unrounded; then three groups of yes/no answers (binary features); every method at its defaults with the true k (HDBSCAN: its own). "
        "`ratio`: ARI over k-means' ARI on the same data.",
    ]
    for n in sizes:
        Xr, Xc, y = rounded_blobs(n, seed)
        distinct = len(np.unique(Xr, axis=0))
        lines += [
            "",
            f"## N = {n} ({distinct} distinct rounded rows)",
            "",
            "| method | rounded ARI | s | ratio | unrounded ARI | s | ratio |",
            "|---|---:|---:|---:|---:|---:|---:|",
        ]
        lines += comparison_rows([(Xr, y), (Xc, y)], n, seed)
        binary = [binary_groups(n, d, seed) for d in (10, 12)]
        counts = " and ".join(str(len(np.unique(X, axis=0))) for X, _ in binary)
        lines += [
            "",
            f"Three groups of 10 and of 12 binary features, N = {n} ({counts} distinct rows):",
            "",
            "| method | 10 binary ARI | s | ratio | 12 binary ARI | s | ratio |",
            "|---|---:|---:|---:|---:|---:|---:|",
        ]
        lines += comparison_rows(binary, n, seed)
    return "\n".join(lines) + "\n"


def main(run_sizes=None, default_out: str = "repeated_rows.md") -> None:
    """The command line of this benchmark and of those that reuse its table
    (``bench_outliers.py``): ``run_sizes(sizes, seed)`` returns the report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[3000, 20000, 200000])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=str(RESULTS / default_out))
    args = parser.parse_args()
    text = (run_sizes or run)(args.sizes, args.seed)
    Path(args.out).write_text(text)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
