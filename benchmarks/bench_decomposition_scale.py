"""Kernel-decomposition clustering at N = 10^5 with the k-NN ("K-connected graph") kernel.

Five spherical 2-D Gaussian clusters (the seed-003 geometry) scaled to [0, 1], N training
points and N new points. dkernel: k-NN Gaussian density kernel computed blockwise through Dask
(in-process distributed client, so the peak RSS below covers the workers), aggregate Markov
factorisation on the CSR kernel, out-of-sample posteriors and log-likelihood of the new points
through Dask. Side by side: scikit-learn's SpectralClustering on the same k-NN graph
(``affinity='nearest_neighbors'``), what a user would otherwise run, which gives labels for the
training points only (no posteriors, no out-of-sample step, no likelihood).

Usage::

    python benchmarks/bench_decomposition_scale.py [--quick] [--n N] [--skip-sklearn]

Writes ``benchmarks/results/decomposition_scale.json`` / ``.md`` (full run only).
"""

from __future__ import annotations

import argparse
import json
import resource
import time
from pathlib import Path

import dask.array as da
import numpy as np
from distributed import Client
from sklearn.cluster import SpectralClustering
from threadpoolctl import threadpool_limits

from dkernel.decomposition import KernelDecompositionClustering
from dkernel.metrics import clustering_scores

RESULTS = Path(__file__).resolve().parent / "results"
CENTRES = np.array([[0.0, 0.0], [4.0, 0.0], [0.0, 4.0], [4.0, 4.0], [2.0, 2.0]])


def data(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 5, size=n)
    X = CENTRES[y] + 0.5 * rng.standard_normal((n, 2))
    return (X + 2.0) / 8.0, y  # fixed affine map to about [0, 1]


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="N = 20 000, results not written")
    ap.add_argument("--n", type=int, default=None)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--bandwidth", type=float, default=0.01)
    ap.add_argument("--skip-sklearn", action="store_true")
    args = ap.parse_args()
    n = args.n or (20_000 if args.quick else 100_000)
    X, y = data(n, 0)
    Z, yz = data(n, 1)
    out: dict = {
        "n_train": n,
        "n_new": n,
        "n_neighbors": args.k,
        "bandwidth": args.bandwidth,
        "n_clusters": 5,
        "rss_before_mib": round(peak_rss_mib(), 1),
    }
    with Client(processes=False, n_workers=1, threads_per_worker=2, dashboard_address=None):
        Xd = da.from_array(X, chunks=(10_000, 2))
        Zd = da.from_array(Z, chunks=(10_000, 2))
        model = KernelDecompositionClustering(
            5,
            kernel="gaussian",
            bandwidth=args.bandwidth,
            n_neighbors=args.k,
            n_init=2,
            random_state=0,
        )
        t = time.perf_counter()
        Kc, log_norm, Xn = model.training_kernel(Xd)
        out["seconds_knn_kernel"] = round(time.perf_counter() - t, 2)
        out["kernel_nnz"] = int(Kc.nnz)
        out["kernel_mib"] = round(
            (Kc.data.nbytes + Kc.indices.nbytes + Kc.indptr.nbytes) / 2**20, 1
        )
        t = time.perf_counter()
        model.fit_kernel(Kc, log_norm, Xn)
        out["seconds_factorisation"] = round(time.perf_counter() - t, 2)
        out["n_iter"] = int(model.n_iter_)
        t = time.perf_counter()
        P = model.predict_proba(Zd).compute()
        ll = model.score_samples(Zd).compute()
        out["seconds_out_of_sample"] = round(time.perf_counter() - t, 2)
    out["peak_rss_mib_dkernel"] = round(peak_rss_mib(), 1)
    out["seconds_dkernel_total"] = round(
        out["seconds_knn_kernel"] + out["seconds_factorisation"] + out["seconds_out_of_sample"], 2
    )
    out["train_scores"] = clustering_scores(y, model.labels_)
    out["new_point_scores"] = clustering_scores(yz, P.argmax(1))
    out["mean_max_posterior_new"] = float(P.max(1).mean())
    out["heldout_mean_loglik"] = float(ll.mean())
    out["dense_kernel_would_need_gib"] = round(8.0 * n * n / 2**30, 1)
    print(json.dumps(out, indent=1))
    if not args.skip_sklearn:
        t = time.perf_counter()
        with threadpool_limits(2):
            sc = SpectralClustering(
                5,
                affinity="nearest_neighbors",
                n_neighbors=args.k,
                assign_labels="cluster_qr",
                random_state=0,
            ).fit(X)
        out["seconds_sklearn_spectral"] = round(time.perf_counter() - t, 2)
        out["peak_rss_mib_after_sklearn"] = round(peak_rss_mib(), 1)
        out["sklearn_train_scores"] = clustering_scores(y, sc.labels_)
        out["ratio_time_dkernel_fit_over_sklearn"] = round(
            (out["seconds_knn_kernel"] + out["seconds_factorisation"])
            / out["seconds_sklearn_spectral"],
            2,
        )
    md = [
        f"# decomposition at scale: N = {n} train + {n} new points, {args.k}-NN Gaussian "
        f"kernel (h = {args.bandwidth}), C = 5",
        "",
        "| step | dkernel KernelDecompositionClustering |",
        "|---|---|",
        f"| k-NN kernel (Dask, blockwise) | {out['seconds_knn_kernel']} s, "
        f"{out['kernel_nnz']} non-zeros, {out['kernel_mib']} MiB CSR |",
        f"| factorisation (2 restarts + refinement) | {out['seconds_factorisation']} s, "
        f"{out['n_iter']} iterations |",
        f"| out-of-sample posteriors + log-likelihood of {n} new points (Dask) | "
        f"{out['seconds_out_of_sample']} s |",
        f"| peak RSS of the process (client in-process) | {out['peak_rss_mib_dkernel']} MiB "
        f"(dense kernel would need {out['dense_kernel_would_need_gib']} GiB) |",
        f"| training ACC / ARI | {out['train_scores']['acc']:.4f} / "
        f"{out['train_scores']['ari']:.4f} |",
        f"| new points ACC / ARI | {out['new_point_scores']['acc']:.4f} / "
        f"{out['new_point_scores']['ari']:.4f} |",
        f"| mean max posterior (new points) | {out['mean_max_posterior_new']:.4f} |",
        "",
    ]
    if "seconds_sklearn_spectral" in out:
        md += [
            f"scikit-learn SpectralClustering (nearest_neighbors, same k, cluster_qr): "
            f"{out['seconds_sklearn_spectral']} s, training ACC "
            f"{out['sklearn_train_scores']['acc']:.4f} / ARI "
            f"{out['sklearn_train_scores']['ari']:.4f}; peak RSS after it "
            f"{out['peak_rss_mib_after_sklearn']} MiB. Time ratio dkernel fit / sklearn: "
            f"{out['ratio_time_dkernel_fit_over_sklearn']}.",
            "",
        ]
    print("\n".join(md))
    if not args.quick:
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / "decomposition_scale.json").write_text(json.dumps(out, indent=1) + "\n")
        (RESULTS / "decomposition_scale.md").write_text("\n".join(md))


if __name__ == "__main__":
    main()
