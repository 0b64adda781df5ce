"""Accuracy and cost of the subsample route for a lazy PCK Γ against the lazy randomized route.

One PCK ensemble (Q = G = 30, F = 13 920) fitted on synthetic blobs (p = 20, 8 clusters, the
data of ``bench_pck_speed.py``'s job section); Γ kept lazy (Dask, recomputed chunk by chunk, as
the ``pck-spectral`` job does when Γ does not fit its hold budget). Reference: the randomized
solver on the lazy Γ (``n_power_iter + 2`` passes plus one for the mean). Compared: the
subsample route (:mod:`dkernel.spectral.subsample`) for sample sizes m: the subspace of the
Γ of m uniform rows, then one pass over all N rows.

Reported per route: wall and CPU seconds (this process; Dask's threaded scheduler on the
machine's cores), the largest relative eigenvalue error, the largest principal angle (sine)
between the k-dimensional eigenvector spaces, the relative Frobenius error of the embedding
(columns sign-aligned), and the ARI of k-means labels (n_init = 10, same seed) against the
reference's labels and against the true blobs.

Run:  python benchmarks/bench_pck_subsample.py [--n 50000] [--m 5000,10000,20000]
      [--normalized]
Writes benchmarks/results/pck_subsample.md (and .json).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import time
from pathlib import Path

import dask.array as da
import numpy as np
from sklearn.metrics import adjusted_rand_score

from dkernel.gmm.pck import ProbabilisticClusterKernel
from dkernel.linalg.kmeans import euclidean_kmeans, normalize_rows
from dkernel.spectral.feature_map import feature_map_kpca, feature_map_normalized
from dkernel.spectral.subsample import subsample_kpca, subsample_normalized, subsample_rows


def blobs(n: int, p: int = 20, k: int = 8, seed: int = 2) -> tuple[np.ndarray, np.ndarray]:
    """The job benchmark's synthetic data (``bench_pck_speed.synthetic``) and its labels."""
    rng = np.random.default_rng(seed)
    centers = rng.normal(scale=3.0, size=(k, p))
    y = rng.integers(0, k, n)
    return (centers[y] + rng.normal(size=(n, p))).astype(np.float32), y


def _timed(fn):
    t, c = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - t, time.process_time() - c


def compare(ref, got, labels_ref, labels_got, y) -> dict:
    """Accuracy of ``got`` against ``ref`` (two FeatureMapEmbedding) and of their labels."""
    U, V = ref.eigenvectors, got.eigenvectors

    def sines(j: int) -> np.ndarray:  # of the principal angles between the leading j vectors
        cos = np.linalg.svd(U[:, :j].T @ V[:, :j], compute_uv=False)
        return np.sqrt(np.clip(1 - cos**2, 0, None))

    signs = np.sign(np.sum(ref.embedding * got.embedding, axis=0))
    emb_err = np.linalg.norm(got.embedding * signs - ref.embedding) / np.linalg.norm(ref.embedding)
    return {
        "eig_rel_err": float(np.max(np.abs(got.eigenvalues / ref.eigenvalues - 1))),
        "eig_rel_errs": (got.eigenvalues / ref.eigenvalues - 1).tolist(),
        "max_sine": float(sines(U.shape[1]).max()),
        "max_sine_lead": float(sines(U.shape[1] - 1).max()),
        "embedding_rel_err": float(emb_err),
        "ari_vs_reference": float(adjusted_rand_score(labels_ref, labels_got)),
        "ari_vs_truth": float(adjusted_rand_score(y, labels_got)),
    }


def one_embedding(name, full, route, est, X, y, Gamma, ms: str, k: int, load: list) -> list:
    """The randomized reference and the subsample route for each m, for one embedding."""
    n = X.shape[0]

    def labels(e):
        Z = e.embedding if name == "kpca" else normalize_rows(e.embedding)
        return euclidean_kmeans(Z, k, n_init=10, random_state=0)[0]

    ref, wall, cpu = _timed(lambda: full(Gamma, k, solver="randomized", random_state=1))
    load.append(os.getloadavg()[0])
    lab_ref = labels(ref)
    row = {"embedding": name, "route": "randomized (lazy)", "m": None, "wall_s": wall}
    rows = [row | {"cpu_s": cpu, "ari_vs_truth": float(adjusted_rand_score(y, lab_ref))}]
    print(rows[-1], flush=True)
    for m in [int(v) for v in ms.split(",") if v]:

        def run(m=m):
            sample = est.transform(X[subsample_rows(n, m, random_state=3)])
            return route(Gamma, sample, k, random_state=1)

        got, wall, cpu = _timed(run)
        load.append(os.getloadavg()[0])
        row = {"embedding": name, "route": "subsample", "m": m, "wall_s": wall, "cpu_s": cpu}
        rows.append(row | compare(ref, got, lab_ref, labels(got), y))
        print(rows[-1], flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=50_000)
    ap.add_argument("--m", default="5000,10000,20000")
    ap.add_argument("--k", type=int, default=8)
    ap.add_argument("--normalized", action="store_true", help="also the normalised embedding")
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "pck_subsample"))
    args = ap.parse_args()
    n, k = args.n, args.k
    load = [os.getloadavg()[0]]
    X, y = blobs(n, k=k)
    est, fit_s, fit_cpu = _timed(
        lambda: ProbabilisticClusterKernel(n_estimators=30, max_components=30, random_state=0).fit(
            X
        )
    )
    rows = int(max(256, min(n, 64 * 2**20 // (4 * est.n_features_out_))))  # the job's chunks
    Gamma = est.transform(da.from_array(X, chunks=(rows, -1)))
    print(
        f"N = {n}: fit {fit_s:.1f} s ({fit_cpu:.1f} CPU s), F = {est.n_features_out_}", flush=True
    )
    embeddings = [("kpca", feature_map_kpca, subsample_kpca)]
    if args.normalized:
        embeddings.append(("normalized", feature_map_normalized, subsample_normalized))
    results = []
    for name, full, route in embeddings:
        results += one_embedding(name, full, route, est, X, y, Gamma, args.m, k, load)
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    out = Path(args.out)
    meta = {"n": n, "k": k, "fit_s": fit_s, "fit_cpu_s": fit_cpu, "commit": commit}
    meta |= {"load_avg": load, "cpus": os.cpu_count(), "F": int(est.n_features_out_)}
    out.with_suffix(".json").write_text(json.dumps({**meta, "rows": results}, indent=1))
    lines = [
        "# PCK, lazy Γ: the subsample route against the lazy randomized route",
        "",
        f"Synthetic blobs N = {n:,}, p = 20, 8 clusters; Q = G = 30 (F = {est.n_features_out_:,}),"
        f" k = {k}; Γ lazy (Dask chunks of {rows} rows, threaded scheduler, {os.cpu_count()} "
        f"cores). Ensemble fit {fit_s:.1f} s ({fit_cpu:.1f} CPU s). Code at `{commit}`; load "
        f"average {min(load):.1f}–{max(load):.1f}.",
        "",
        f"Command: `python benchmarks/bench_pck_subsample.py --n {n} --m {args.m}"
        + (" --normalized" if args.normalized else "")
        + "`",
        "",
        "Errors against the randomized route on the same lazy Γ (4 power iterations: 7 passes for"
        " KPCA (mean, 5 range passes, final), 9 for normalized (column sum, degrees, 7))."
        " Wall and CPU seconds include the sample's posteriors.",
        "",
        "| embedding | route | m | wall s | CPU s | max eig. rel. err. | max sin θ (k − 1 "
        "leading) | max sin θ (k) | emb. rel. err. | ARI vs ref. | ARI vs truth |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        if r["m"] is None:
            lines.append(
                f"| {r['embedding']} | {r['route']} | all | {r['wall_s']:.1f} | {r['cpu_s']:.1f} "
                f"| — | — | — | — | — | {r['ari_vs_truth']:.4f} |"
            )
        else:
            lines.append(
                f"| {r['embedding']} | {r['route']} | {r['m']:,} | {r['wall_s']:.1f} "
                f"| {r['cpu_s']:.1f} | {r['eig_rel_err']:.1e} | {r['max_sine_lead']:.1e} "
                f"| {r['max_sine']:.1e} "
                f"| {r['embedding_rel_err']:.1e} | {r['ari_vs_reference']:.4f} "
                f"| {r['ari_vs_truth']:.4f} |"
            )
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print(f"wrote {out.with_suffix('.md')}")


if __name__ == "__main__":
    main()
