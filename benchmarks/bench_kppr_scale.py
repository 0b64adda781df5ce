"""Out-of-sample KPPR scoring at scale: per-core throughput and 10^6 points end to end to Zarr.

In-sample set: 2000 rows of Statlog Landsat (36 features, ``$DKERNEL_DATA``). New points: rows
resampled from the full Landsat table plus small Gaussian noise, generated lazily per chunk.
Seeds: three (global, one row, one class). Kernels: PCK (Q = G = 30, F = 13 920, the default;
and Q = G = 10, F = 540) as an explicit feature map, and an RBF (σ = 20 % of the median
distance) as a block function.

1. **Per core, once Γ is computed** (one BLAS thread), side by side:
   *direct* score = ``Γ_new @ (Γ_fitᵀ α)``, O(F) per point and seed (Løkse 2020, Paper II,
   Prop. 8 [Lokse2020], through the feature map); the *projection*
   ``z = Γ_new @ Γ_fitᵀ[1/Vol, A]`` (O(F (k+1)), once per point, seed-independent); *projected*
   score = ``z @ [1; m'_s]``, O(k) per point and seed (``KernelPersonalizedPageRank.project`` /
   ``seed_weights``). For the RBF the same three with kernel rows ``κ(x, X_fit)`` in place of Γ
   (O(N_fit) instead of O(F)).
2. **Per core, posteriors included**: ``transform`` (PCK posteriors) + the direct or the
   projected scorer; for the RBF, kernel rows (O(N_fit p) per point) + the same.
3. **End to end**: 10^6 new points scored through a fresh 2-worker LocalCluster and written to
   a results store's ``/ranking`` group (scores for 3 seeds + top-100; the cheaper scorer for 3
   seeds, i.e. direct), with wall time and peak RSS per worker; then ``dkernel.top_k`` answers a
   query from the store.
4. **Versus what a user would otherwise do**: re-solving the exact PPR (SciPy Cholesky) on
   in-sample + 3000 new points with the same kernel (RBF rows, or PCK posteriors and ``Γ Γᵀ``),
   against KPPR scoring of the same points.

Run:  python benchmarks/bench_kppr_scale.py [--quick] [--n-new 1000000]
Writes benchmarks/results/ranking_kppr_scale.md.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
import warnings
from pathlib import Path

import dask.array as da
import numpy as np
from threadpoolctl import threadpool_limits

import dkernel
from dkernel._random import derive_rng
from dkernel.gmm.pck import ProbabilisticClusterKernel
from dkernel.ranking import (
    KernelPersonalizedPageRank,
    make_projected_scorer,
    make_scorer,
    ppr_exact,
    project_graph,
    score_graph,
    scorer_for_seeds,
    scores_from_projection,
    seed_vector,
)
from dkernel.storage import ResultsStore
from dkernel.storage.layout import ranking_dataset

RESULTS = Path(__file__).resolve().parent / "results"


def load_landsat() -> tuple[np.ndarray, np.ndarray]:
    data_dir = Path(
        os.environ.get("DKERNEL_DATA", Path(__file__).resolve().parents[2] / "shared" / "data")
    )
    d = data_dir / "statlog_landsat_satellite"
    T = np.vstack([np.loadtxt(d / "sat.trn"), np.loadtxt(d / "sat.tst")])
    return T[:, :-1], T[:, -1].astype(int)


def new_points(X: np.ndarray, n: int, chunk: int, seed: int) -> da.Array:
    """Lazy (n, p) new points: resampled rows + noise, one generator per chunk."""
    sd = X.std(axis=0) * 0.05

    def block(block_info=None):
        (lo, hi), _ = block_info[None]["array-location"]
        rng = derive_rng(seed, "new-points", lo)
        rows = X[rng.integers(0, X.shape[0], hi - lo)]
        return rows + rng.standard_normal(rows.shape) * sd

    chunks = ((chunk,) * (n // chunk) + ((n % chunk,) if n % chunk else ()), (X.shape[1],))
    return da.map_blocks(block, chunks=chunks, dtype=np.float64)


def rate(fn, n_points: int, repeat: int = 3) -> float:
    """Points per second of CPU time of this (single-threaded) process: a per-core rate that the
    other jobs sharing the machine do not distort the way wall time does."""
    best = np.inf
    for _ in range(repeat):
        t = time.process_time()
        fn()
        best = min(best, time.process_time() - t)
    return n_points / max(best, 1e-9)


def fit_models(X_fit: np.ndarray, y_fit: np.ndarray, quick: bool) -> dict:
    models = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for q in (10,) if quick else (30, 10):
            pck = ProbabilisticClusterKernel(n_estimators=q, max_components=q, random_state=0)
            t = time.perf_counter()
            kppr = KernelPersonalizedPageRank(kernel=pck, random_state=0).fit(X_fit)
            models[f"PCK Q=G={q}"] = (kppr, time.perf_counter() - t)
        t = time.perf_counter()
        kppr = KernelPersonalizedPageRank(kernel="rbf", dtype="float32", random_state=0).fit(X_fit)
        models["RBF"] = (kppr, time.perf_counter() - t)
    return models


def seed_weights(kppr: KernelPersonalizedPageRank, y_fit: np.ndarray) -> np.ndarray:
    """``[1; m'_s]`` (k+1, 3) for the global seed, row 0 and class 1 (in sample)."""
    return np.stack(
        [kppr.seed_weights(None), kppr.seed_weights(0), kppr.seed_weights(cluster=1, labels=y_fit)],
        axis=1,
    )


def rows_of(kppr: KernelPersonalizedPageRank, Y: np.ndarray) -> np.ndarray:
    """Γ (PCK posteriors, float32) or RBF kernel rows κ(Y, X_fit) (float32) of new points."""
    kern = kppr.kernel_
    if kern.is_feature_map:
        return np.asarray(kern.features(Y), dtype=np.float32)
    return np.asarray(kern.cross(Y), dtype=np.float32)


SPARSE_CUTS = (1e-6, 1e-4)


def per_core_rates(kppr, y_fit, sample) -> dict:
    """Points/s on one core (3 seeds each): direct, projection, projected, and inclusive."""
    W = seed_weights(kppr, y_fit)
    basis = kppr.score_basis()
    kern = kppr.kernel_
    direct_w = kern.weights(basis @ W)  # (F or N, 3): Γᵀα or α
    proj_w = kern.weights(basis)  # (F or N, k+1)
    width = direct_w.shape[0]
    n_g = min(sample.shape[0], max(2000, (400 * 2**20) // (4 * width)))
    R = rows_of(kppr, sample[:n_g])
    R = np.tile(R, (int(np.ceil(n_g / R.shape[0])), 1))[:n_g]
    w32, b32, W32 = (a.astype(np.float32) for a in (direct_w, proj_w, W))
    out = {"width": width, "k": kppr.n_components_}
    out["direct"] = rate(lambda: R @ w32, n_g)
    out["projection"] = rate(lambda: R @ b32, n_g)
    Z = R @ b32
    n_z = int(min(1_000_000, 2e8 // (4 * Z.shape[1])))
    Zt = np.ascontiguousarray(np.tile(Z, (int(np.ceil(n_z / Z.shape[0])), 1))[:n_z])
    out["projected"] = rate(lambda: Zt @ W32, n_z, repeat=5)
    n_c = min(2000, n_g)
    ref = R[:n_c].astype(np.float64) @ direct_w
    got = Z[:n_c] @ W32
    out["err"] = float(np.max(np.abs(got - ref)) / np.max(np.abs(ref)))
    # PCK posteriors are nearly one-hot per model: Γ kept sparse (small entries dropped)
    if kern.is_feature_map:
        w1 = np.ascontiguousarray(w32[:, 2])  # one seed (class 1): the O(nnz) Prop. 8 product
        ref1 = R[:n_c].astype(np.float64) @ direct_w[:, 2]
        out["sparse"] = {}
        for cut in SPARSE_CUTS:
            # = R with the entries below the cut set to 0, built a row block at a time
            Rs = kern.transformer.transform(sample[:n_g], sparse_threshold=cut)
            out["sparse"][cut] = {
                "nnz": Rs.nnz / n_g,
                "seeds3": rate(lambda Rs=Rs: Rs @ w32, n_g),
                "seed1": rate(lambda Rs=Rs: Rs @ w1, n_g),
                "err": float(np.max(np.abs(Rs[:n_c] @ w1 - ref1)) / np.max(np.abs(ref1))),
            }
    n_e = 20_000 if width < 2000 else 4000
    direct = make_scorer(kppr, basis @ W, dtype="float32")
    projected = make_projected_scorer(kppr, W, dtype="float32")
    out["direct_all"] = rate(lambda: direct(sample[:n_e]), n_e, repeat=2)
    out["projected_all"] = rate(lambda: projected(sample[:n_e]), n_e, repeat=2)
    return out


def _start_rss_sampler(dask_worker=None) -> int:
    """On a worker: sample this process's RSS every 0.1 s into ``dask_worker._bench_rss``."""
    import threading

    import psutil

    state = {"max": 0, "stop": False}
    proc = psutil.Process()

    def loop() -> None:
        while not state["stop"]:
            state["max"] = max(state["max"], proc.memory_info().rss)
            time.sleep(0.1)

    state["start"] = proc.memory_info().rss
    dask_worker._bench_rss = state
    threading.Thread(target=loop, daemon=True).start()
    return state["start"]


def _stop_rss_sampler(dask_worker=None) -> tuple[int, int]:
    state = dask_worker._bench_rss
    state["stop"] = True
    return state["start"], state["max"]


def end_to_end(name, kppr, y_fit, X, n_new, tmp) -> dict:
    """n_new points scored on a fresh 2 × 1 LocalCluster and written to /ranking."""
    from dkernel.runtime import connect

    client = connect(n_workers=2, threads_per_worker=1, quiet=True)
    try:
        scorer = scorer_for_seeds(kppr, seed_weights(kppr, y_fit), dtype="float32")
        Xn = new_points(X, n_new, 50_000 if n_new >= 500_000 else 10_000, 11)
        path = tmp / f"{name.replace(' ', '_').replace('=', '')}.zarr"
        client.run(_start_rss_sampler)
        cpu0 = client.run(lambda: time.process_time())
        t = time.perf_counter()
        store = ResultsStore.create(path, job={"method": "bench-kppr"}, seed=0)
        W = seed_weights(kppr, y_fit)
        names = ["global", "row_0", "class_1"]
        attrs = {"beta": kppr.beta_, "volume": kppr.volume_}
        if kppr.kernel_.is_feature_map:  # as the kppr job: store the projection for PCK
            Z = project_graph(Xn, kppr, dtype="float32", client=client)
            ds = ranking_dataset(scores_from_projection(Z, W), names, k=100, attrs=attrs)
            ds["projection"] = (("sample", "basis"), Z)
        else:
            ds = ranking_dataset(score_graph(Xn, scorer, client=client), names, k=100, attrs=attrs)
        client.compute(store.write("ranking", ds, compute=False)).result()
        store.mark_complete()
        wall = time.perf_counter() - t
        rss = client.run(_stop_rss_sampler)
        cpu = client.run(lambda: time.process_time())
    finally:
        client.close()
    t = time.perf_counter()
    top = dkernel.top_k(path, "class_1", 10)
    t_q = time.perf_counter() - t
    assert len(top) == 10
    new_seed = None
    if kppr.kernel_.is_feature_map:
        # a seed chosen after the job, ranked from the stored projection on one thread
        import dask

        with dask.config.set(scheduler="synchronous"):
            dkernel.seed_scores(path, [5, 17])  # warm the file cache
            t, c = time.perf_counter(), time.process_time()
            scores = dkernel.seed_scores(path, [5, 17])
            new_seed = {"wall": time.perf_counter() - t, "cpu": time.process_time() - c}
        assert scores.shape == (n_new,)
    return {
        "n": n_new,
        "wall": wall,
        "rss": max(v[1] for v in rss.values()) / 2**30,
        "rss0": max(v[0] for v in rss.values()) / 2**30,
        "cpu": sum(cpu.values()) - sum(cpu0.values()),
        "query": t_q,
        "path": "projection stored"
        if kppr.kernel_.is_feature_map
        else ("projected" if scorer.head is not None else "direct"),
        "new_seed": new_seed,
    }


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--quick", action="store_true", help="10^5 new points, PCK Q=G=10 only")
    ap.add_argument("--n-new", type=int, default=None)
    ap.add_argument("--n-fit", type=int, default=2000)
    args = ap.parse_args()
    n_new = args.n_new or (100_000 if args.quick else 1_000_000)
    X, y = load_landsat()
    rng = derive_rng(0, "fit")
    fit_idx = np.sort(rng.choice(X.shape[0], args.n_fit, replace=False))
    X_fit, y_fit = X[fit_idx], y[fit_idx]
    cmd = f"python benchmarks/bench_kppr_scale.py{' --quick' if args.quick else ''} --n-new {n_new}"
    lines = [
        "# KPPR out-of-sample scoring at scale",
        "",
        f"`{cmd}`; in sample: {args.n_fit} Statlog Landsat rows (36 features); 3 seeds (global, "
        f"row 0, class 1); machine: {os.cpu_count()} cores shared with other jobs (load average "
        f"{os.getloadavg()[0]:.1f} at start). Per-core rates are CPU time of one BLAS thread "
        "(best of several), so other jobs on the machine distort them less than wall time.",
        "",
    ]
    models = fit_models(X_fit, y_fit, args.quick)
    sample = new_points(X, 20_000, 20_000, 7).compute()
    with threadpool_limits(1):
        rates = {name: per_core_rates(kppr, y_fit, sample) for name, (kppr, _) in models.items()}
    lines += [
        "## Per core (one BLAS thread), once Γ (PCK posteriors) or RBF kernel rows are computed",
        "",
        "Points/s, each point scored for all 3 seeds. *Direct*: ``Γ @ (Γ_fitᵀ α)`` (O(F) per seed; "
        "RBF: ``κ @ α``, O(N_fit)). *Projection*: ``z = Γ @ Γ_fitᵀ[1/Vol, A]`` (O(F (k+1)) once per "
        "point, seed-independent). *Projected*: ``z @ [1; m'_s]`` (O(k) per seed). Error: projected "
        "(float32) against direct (float64), relative to the largest score.",
        "",
        "| kernel | F or N_fit | k | fit (s) | direct: points/s | projection Γ→z: points/s "
        "| projected z→scores: points/s | projected / direct | max rel. error |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, r in rates.items():
        size = f"F = {r['width']}" if "PCK" in name else f"N_fit = {r['width']}"
        lines.append(
            f"| {name} | {size} | {r['k']} | {models[name][1]:.1f} | {r['direct']:,.0f} | "
            f"{r['projection']:,.0f} | {r['projected']:,.0f} | "
            f"{r['projected'] / r['direct']:.0f}× | {r['err']:.1e} |"
        )
        print(lines[-1], flush=True)
    lines += [
        "",
        "Posteriors (PCK) or kernel rows (RBF) included, 3 seeds:",
        "",
        "| kernel | direct scorer: points/s | projected scorer: points/s | direct / projected |",
        "|---|---|---|---|",
    ]
    for name, r in rates.items():
        lines.append(
            f"| {name} | {r['direct_all']:,.0f} | {r['projected_all']:,.0f} | "
            f"{r['direct_all'] / r['projected_all']:.2f} |"
        )
        print(lines[-1], flush=True)
    lines += [
        "",
        "PCK feature maps Γ kept sparse (`pck.transform(X, sparse_threshold=cut)`: scipy CSR, float32; entries below the cut "
        "dropped — a model's posteriors are nearly one-hot), direct Prop. 8 product "
        "``Γ_s @ (Γ_fitᵀ α)``, O(non-zeros) per point; error of one seed's scores against dense "
        "float64, relative to the largest score:",
        "",
        "| kernel | cut | non-zeros per point | 3 seeds: points/s | 1 seed: points/s "
        "| max rel. error |",
        "|---|---|---|---|---|---|",
    ]
    for name, r in rates.items():
        for cut, sp in r.get("sparse", {}).items():
            lines.append(
                f"| {name} | {cut:.0e} | {sp['nnz']:.0f} | {sp['seeds3']:,.0f} "
                f"| {sp['seed1']:,.0f} | {sp['err']:.1e} |"
            )
            print(lines[-1], flush=True)

    # 3. end to end
    lines += [
        "",
        f"## End to end: {n_new:,} new points scored and written to Zarr (2 workers × 1 thread)",
        "",
        "Posteriors / kernel rows included; a fresh LocalCluster per kernel; peak RSS is the "
        "larger of the two worker processes', sampled every 0.1 s while scoring (in "
        "parentheses: at the start, i.e. the imported libraries).",
        "",
        "| kernel | points | scorer | wall (s) | points/s (wall) | worker CPU (s) | points/s/core (CPU) "
        "| peak RSS per worker (GiB) | top_k query from the store (s) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    tmp = Path(tempfile.mkdtemp(prefix="bench-kppr-"))
    e2e = {}
    try:
        for name, (kppr, _) in models.items():
            r = end_to_end(name, kppr, y_fit, X, n_new, tmp)
            e2e[name] = r
            lines.append(
                f"| {name} | {r['n']:,} | {r['path']} | {r['wall']:.1f} | {r['n'] / r['wall']:,.0f} | "
                f"{r['cpu']:.1f} | {r['n'] / r['cpu']:,.0f} | {r['rss']:.2f} ({r['rss0']:.2f}) | {r['query']:.2f} |"
            )
            print(lines[-1], flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    queried = {k: v["new_seed"] for k, v in e2e.items() if v["new_seed"]}
    if queried:
        lines += [
            "",
            "A seed chosen after the job (rows 5 and 17), ranked for every stored point from the "
            "stored projection with `dkernel.seed_scores` (no cluster, one thread, read from Zarr "
            "included):",
            "",
            "| kernel | points | wall (s) | CPU (s) | points/s/core (CPU) |",
            "|---|---|---|---|---|",
        ]
        for name, q in queried.items():
            n_q = e2e[name]["n"]
            lines.append(
                f"| {name} | {n_q:,} | {q['wall']:.3f} | {q['cpu']:.3f} | {n_q / q['cpu']:,.0f} |"
            )
            print(lines[-1], flush=True)

    # 4. versus exact re-solve
    n_b = 3000
    Xb = new_points(X, n_b, n_b, 13).compute()
    lines += [
        "",
        f"## Versus re-solving the exact PPR on the {args.n_fit} in-sample + {n_b} new points",
        "",
        "| kernel | KPPR: score the new points (s) | exact PPR: kernel + SciPy Cholesky solve (s) "
        "| ratio |",
        "|---|---|---|---|",
    ]
    U = np.vstack([X_fit, Xb])
    s0 = seed_vector(0, U.shape[0])
    for name in [n for n in ("PCK Q=G=30", "RBF") if n in models]:
        kppr = models[name][0]
        t = time.perf_counter()
        kppr.score_samples(Xb, 0)
        t_kppr = time.perf_counter() - t
        t = time.perf_counter()
        if kppr.kernel_.is_feature_map:
            G = np.asarray(kppr.kernel_.features(U), dtype=np.float64)
            K = G @ G.T
        else:
            from dkernel.kernels import rbf_block

            K = rbf_block(U, U, kppr.kernel_params_["sigma"])
        ppr_exact(K, s0, 0.1)
        t_exact = time.perf_counter() - t
        lines.append(f"| {name} | {t_kppr:.3f} | {t_exact:.2f} | **{t_exact / t_kppr:.0f}×** |")
        print(lines[-1], flush=True)
    lines += [
        "",
        "The exact solve is O(N³) in N = in-sample + new points; KPPR is O(F) per point.",
        "",
    ]

    default = "PCK Q=G=30" if "PCK Q=G=30" in rates else next(iter(rates))
    r = rates[default]
    best_direct = max(v["direct"] for k, v in rates.items() if "PCK" in k)
    lines += [
        "## Acceptance",
        "",
        f"* ≥ 10⁶ points/s/core with PCK once the per-point representation is computed: "
        f"{default} projected {r['projected']:,.0f} points/s/core for 3 seeds "
        + ("(**holds**" if r["projected"] >= 1e6 else "(**does not hold**")
        + f"; O(k) with k = {r['k']}). The projection z = Γ Γ_fitᵀ[1/Vol, A] is computed once per "
        f"point like Γ itself ({r['projection']:,.0f} points/s/core from Γ, next to "
        f"{r['direct_all']:,.0f} points/s/core for posteriors + direct scores). Direct O(F) from "
        f"Γ: {r['direct']:,.0f} points/s/core for {default} (best PCK direct: {best_direct:,.0f}); "
        "with F = 13 920 it reads 56 KB of Γ per point (memory-bound), so the O(F) path alone "
        "does not reach 10⁶/s at the default Q = G = 30; kept sparse it scores "
        + ", ".join(
            f"{sp['seed1']:,.0f} points/s/core for one seed ({sp['nnz']:.0f} non-zeros per "
            f"point, cut {cut:.0e}, error {sp['err']:.0e})"
            for cut, sp in r.get("sparse", {}).items()
        )
        + "."
        + "".join(
            f" The kppr job stores z with Γ (PCK default), so a seed chosen later ranks every "
            f"stored point from Zarr at {e2e[k]['n'] / q['cpu']:,.0f} points/s/core ({k}, "
            "`dkernel.seed_scores`)."
            for k, q in queried.items()
            if k == default
        ),
        "* 10⁶ new points scored end to end and written to Zarr: "
        + "; ".join(
            f"{k}: {v['n']:,} points in {v['wall']:.1f} s wall, peak {v['rss']:.2f} GiB per worker"
            for k, v in e2e.items()
        )
        + (" (**holds**" if all(v["n"] >= 1_000_000 for v in e2e.values()) else " (**not at 10⁶**")
        + " for every kernel run).",
        "",
    ]
    RESULTS.mkdir(parents=True, exist_ok=True)
    if not args.quick:
        (RESULTS / "ranking_kppr_scale.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
