"""Kernel decomposition with ``n_neighbors=10`` on 10⁵ two-feature blobs beside scikit-learn.

Issue 29: ``KernelDecompositionClustering(n_neighbors=10)`` on 10⁵ × 2 blobs took about 11×
scikit-learn's k-NN ``SpectralClustering``. Both run here in one invocation, each fit in a
fresh process (wall time of ``fit`` with the labels, the process's peak RSS): dkernel with only
``n_clusters``, ``n_neighbors=10`` and a seed (so ``approximation='auto'`` picks its path,
reported), scikit-learn's ``SpectralClustering(n_clusters, affinity='nearest_neighbors')`` at
its defaults otherwise. Data: ``make_blobs(N, n_features=2, centers=C)`` for C = 2 and 3,
standardised. Prints ARI, time and the dkernel / scikit-learn time ratio.

Usage: python benchmarks/bench_decomposition_knn.py [--n 100000] [--centers 2 3]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time


def child(lib: str, n: int, centers: int) -> dict:
    import numpy as np
    from sklearn.datasets import make_blobs
    from sklearn.metrics import adjusted_rand_score
    from sklearn.preprocessing import StandardScaler

    X, y = make_blobs(n, n_features=2, centers=centers, random_state=0)
    X = StandardScaler().fit_transform(X)
    out: dict = {"lib": lib, "n": n, "centers": centers}
    if lib == "dkernel":
        from dkernel import KernelDecompositionClustering

        t = time.perf_counter()
        est = KernelDecompositionClustering(centers, n_neighbors=10, random_state=0).fit(X)
        labels = np.asarray(est.labels_)
        out["path"] = est.approximation_
    else:
        from sklearn.cluster import SpectralClustering

        t = time.perf_counter()
        labels = SpectralClustering(
            centers, affinity="nearest_neighbors", random_state=0
        ).fit_predict(X)
    out["fit_s"] = time.perf_counter() - t
    out["ari"] = float(adjusted_rand_score(y, labels))
    out["peak_rss_gib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=float, default=1e5)
    ap.add_argument("--centers", type=int, nargs="+", default=[2, 3])
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        lib, n, centers = args.child
        print(json.dumps(child(lib, int(n), int(centers))))
        return
    n = int(args.n)
    print(
        "| centers | N | dkernel path | dkernel ARI | dkernel s | sklearn ARI | sklearn s | ratio |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for centers in args.centers:
        res = {}
        for lib in ("dkernel", "sklearn"):
            cmd = [sys.executable, __file__, "--child", lib, str(n), str(centers)]
            done = subprocess.run(cmd, capture_output=True, text=True, check=True)
            res[lib] = json.loads(done.stdout.strip().splitlines()[-1])
        d, s = res["dkernel"], res["sklearn"]
        print(
            f"| {centers} | {n} | {d['path']} | {d['ari']:.3f} | {d['fit_s']:.2f} | "
            f"{s['ari']:.3f} | {s['fit_s']:.2f} | {d['fit_s'] / s['fit_s']:.2f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
