"""KPCA and KECA clustering at defaults from 2·10³ to 2·10⁵ points, against their peers.

Above the memory the dense eigen-solve may use (about 13 000 points at the default 4 GiB),
``KernelPCAEmbedding`` and ``KECA`` take the Nyström path (``approximation='auto'``). Five
10-D Gaussian blobs (standard deviation 2, standardised), every method at its defaults with
the true k = 5: dkernel's KPCA and KECA with ``n_clusters``, scikit-learn's k-means, its
``Nystroem`` feature map followed by k-means and, up to ``EXACT_PEER_MAX`` points, its exact
``KernelPCA`` (5 components, ARPACK or a dense solve by its own rule) followed by k-means;
ARI, fit seconds and the ratio of each ARI to k-means', one seed, in one run.

Run:  python benchmarks/bench_kpca_scale.py [--sizes 2000 10000 20000 200000] [--seed 0]
Prints the table and writes ``benchmarks/results/kpca_scale.md``.
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[2000, 10000, 20000, 200000])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=str(RESULTS / "kpca_scale.md"))
    args = parser.parse_args()
    Path(args.out).write_text(run(args.sizes, args.seed))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
