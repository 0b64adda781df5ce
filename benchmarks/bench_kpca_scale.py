"""KPCA and KECA clustering at defaults from 2·10³ to 2·10⁵ points, against their peers.

Above the memory the dense eigen-solve may use (about 13 000 points at the default 4 GiB),
``KernelPCAEmbedding`` and ``KECA`` take the Nyström path (``approximation='auto'``). Five
10-D Gaussian blobs (standard deviation 2, standardised), every method at its defaults with
the true k = 5: dkernel's KPCA and KECA with ``n_clusters``, scikit-learn's k-means, its
``Nystroem`` feature map followed by k-means and, up to ``EXACT_PEER_MAX`` points, its exact
``KernelPCA`` (5 components, ARPACK or a dense solve by its own rule) followed by k-means;
ARI, fit seconds and the ratio of each ARI to k-means', one seed, in one run.

A second table: three overlapping 4-D blobs (centres uniform in [1.5, 4.5], σ = 0.7; the
unrounded control of ``bench_repeated_rows.py``), seeds ``--overlap-seeds``, at the sizes above
``WIDTH_SAMPLE`` (3 000 rows), where 'auto' compares its widths on a sample: each estimator at
its defaults (the chosen setting fitted on every row and verified on the sample,
``dkernel.kernels.width_selection.verified_fit``) and, in the same run, with that check off
(``MAX_VERIFIED_FITS`` = 1: the sample's best setting fitted on every row and taken on trust,
as before 7 December 2026), with k-means and Nystroem + k-means.

Run:  python benchmarks/bench_kpca_scale.py [--sizes 2000 10000 20000 200000] [--seed 0]
      [--overlap-seeds 0 1 2]
Prints the tables and writes ``benchmarks/results/kpca_scale.md``.
"""

from __future__ import annotations

import argparse
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
from sklearn.datasets import make_blobs
from sklearn.metrics import adjusted_rand_score
from sklearn.preprocessing import StandardScaler

RESULTS = Path(__file__).resolve().parents[1] / "benchmarks" / "results"
K = 5
#: scikit-learn's exact KernelPCA holds the N x N kernel (and a centred copy): up to this N.
EXACT_PEER_MAX = 13000


def _methods(seed: int, n: int) -> dict[str, Callable[[], object]]:
    from sklearn.cluster import KMeans
    from sklearn.decomposition import KernelPCA
    from sklearn.kernel_approximation import Nystroem
    from sklearn.pipeline import make_pipeline

    import dkernel

    exact = {
        "sk.KernelPCA+KMeans": lambda: make_pipeline(
            KernelPCA(K, kernel="rbf", random_state=seed), KMeans(K, random_state=seed)
        )
    }
    return {
        "sk.KMeans": lambda: KMeans(K, random_state=seed),
        "dk.KernelPCAEmbedding": lambda: dkernel.KernelPCAEmbedding(
            n_clusters=K, random_state=seed
        ),
        "dk.KECA": lambda: dkernel.KECA(n_clusters=K, random_state=seed),
        "sk.Nystroem+KMeans": lambda: make_pipeline(
            Nystroem(random_state=seed), KMeans(K, random_state=seed)
        ),
        **(exact if n <= EXACT_PEER_MAX else {}),
    }


def _labels(model: object) -> np.ndarray:
    last = model.steps[-1][1] if hasattr(model, "steps") else model
    return np.asarray(last.labels_)


def run(sizes: list[int], seed: int) -> str:
    lines = [
        "# KPCA and KECA clustering against N (`benchmarks/bench_kpca_scale.py`)",
        "",
        f"`python benchmarks/bench_kpca_scale.py --sizes {' '.join(map(str, sizes))} "
        f"--seed {seed}` (one run). Five standardised 10-D blobs (standard deviation 2), every "
        "method at its defaults with k = 5; `path`: dkernel's `approximation_`; `ratio`: ARI "
        "over k-means' ARI on the same data; scikit-learn's exact `KernelPCA` up to "
        f"{EXACT_PEER_MAX} points.",
        "",
        "| N | method | ARI | s | ratio | path |",
        "|---:|---|---:|---:|---:|---|",
    ]
    for n in sizes:
        X, y = make_blobs(n, centers=K, n_features=10, cluster_std=2.0, random_state=seed)
        X = StandardScaler().fit_transform(X)
        base = None
        for name, make in _methods(seed, n).items():
            t = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                model = make().fit(X)
            seconds = time.perf_counter() - t
            ari = adjusted_rand_score(y, _labels(model))
            base = ari if base is None else base
            path = getattr(model, "approximation_", "")
            row = f"| {n} | {name} | {ari:.3f} | {seconds:.2f} | {ari / base:.2f} | {path} |"
            print(row, flush=True)
            lines.append(row)
    return "\n".join(lines) + "\n"


def run_overlapping(sizes: list[int], seeds: list[int]) -> str:
    """The verified 'auto' width against the same choice taken on trust, one run."""
    from bench_repeated_rows import rounded_blobs
    from sklearn.cluster import KMeans
    from sklearn.kernel_approximation import Nystroem
    from sklearn.pipeline import make_pipeline

    import dkernel
    from dkernel.kernels import width_selection

    lines = [
        "",
        "## Three overlapping 4-D blobs above the width sample",
        "",
        f"`--overlap-seeds {' '.join(map(str, seeds))}`: the verified 'auto' width (the "
        "default) against the sample's choice taken on trust (`MAX_VERIFIED_FITS` = 1, as "
        "before 7 December 2026), in the same run. ARI per seed; `fits`: settings fitted on "
        "every row per seed; s: mean fit seconds.",
        "",
        "| N | method | ARI per seed | mean | fits | s |",
        "|---:|---|---|---:|---|---:|",
    ]
    sizes = [n for n in sizes if n > width_selection.WIDTH_SAMPLE]
    default_fits = width_selection.MAX_VERIFIED_FITS
    for n in sizes:
        # the unrounded blobs of bench_repeated_rows.py (its control)
        data = {seed: rounded_blobs(n, seed)[1:] for seed in seeds}
        methods: list[tuple[str, Callable[[int], object], int]] = [
            ("sk.KMeans", lambda seed: KMeans(3, random_state=seed), default_fits),
            (
                "sk.Nystroem+KMeans",
                lambda seed: make_pipeline(
                    Nystroem(random_state=seed), KMeans(3, random_state=seed)
                ),
                default_fits,
            ),
        ]
        for name in ("KernelPCAEmbedding", "KECA"):
            make = getattr(dkernel, name)
            for label, fits in ((f"dk.{name}", default_fits), (f"dk.{name} on trust", 1)):
                methods.append(
                    (label, lambda seed, make=make: make(n_clusters=3, random_state=seed), fits)
                )
        for label, make, fits in methods:
            aris, counts, seconds = [], [], []
            width_selection.MAX_VERIFIED_FITS = fits
            try:
                for seed in seeds:
                    X, y = data[seed]
                    t = time.perf_counter()
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        model = make(seed).fit(X)
                    seconds.append(time.perf_counter() - t)
                    aris.append(adjusted_rand_score(y, _labels(model)))
                    verified = getattr(model, "sigma_fraction_verified_scores_", None)
                    counts.append("" if verified is None else str(int(np.isfinite(verified).sum())))
            finally:
                width_selection.MAX_VERIFIED_FITS = default_fits
            fitted = ", ".join(counts) if any(counts) else "—"
            row = (
                f"| {n} | {label} | {', '.join(f'{a:.3f}' for a in aris)} | "
                f"{np.mean(aris):.3f} | {fitted} | {np.mean(seconds):.2f} |"
            )
            print(row, flush=True)
            lines.append(row)
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[2000, 10000, 20000, 200000])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--overlap-seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--out", default=str(RESULTS / "kpca_scale.md"))
    args = parser.parse_args()
    report = run(args.sizes, args.seed) + run_overlapping(args.sizes, args.overlap_seeds)
    Path(args.out).write_text(report)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
