"""Paper II (Kernel Personalized PageRank) Fig. 1 and Fig. 2 (top row) with PCK defaults.

Datasets: Wine, Iris, WDBC (scikit-learn's breast cancer) and Jain's two moons
(``$DKERNEL_DATA/shapes_2d_sipu/jain.txt``). Kernel: ``ProbabilisticClusterKernel`` with the
paper's defaults (Q = G = 30, 10 EM iterations, 50 % subsamples), fitted once per dataset on
all points; ``K = Γ Γᵀ / Z``. Restart probability α = 0.1. Relevance = exact PPR (Chung–Zhao
solve) on all points; the seed point is left out of every NDCG.

* **Fig. 1 (eigenvector ordering)**: 100 random single-point queries; KPPR in sample with the
  first ``dims`` non-trivial eigenvectors ordered by Prop. 6 (``c_i^2``) or by eigenvalue;
  mean NDCG@k (k = 10, 20, 30, 40) against dimensionality.
* **Fig. 2 top row (out-of-sample seed)**: a random fraction of the points is in sample; KPPR
  (eigenpairs with λ* > 0.01, Prop. 6 order) is fitted on it and all points are ranked for a
  seed drawn from the out-of-sample points (Defs. 1–3); mean NDCG@10 over queries and splits
  with a 95 % confidence interval over splits. The paper uses 100 splits × 30 queries; the
  default here is 20 splits × 30 queries (``--splits``).

Run:  python benchmarks/bench_ranking_paper2.py [--quick] [--splits 20]
Writes benchmarks/results/ranking_paper2_fig1.{csv,png}, ranking_paper2_fig2.{csv,png} and
ranking_paper2.md.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np
from sklearn.datasets import load_breast_cancer, load_iris, load_wine

from dkernel._random import derive_rng
from dkernel.gmm.pck import ProbabilisticClusterKernel
from dkernel.ranking import (
    KernelPersonalizedPageRank,
    ndcg_at_k,
    normalized_eigenpairs,
    ppr_exact,
    select_components,
)

RESULTS = Path(__file__).resolve().parent / "results"
ALPHA = 0.1
KS = (10, 20, 30, 40)


def load_datasets() -> dict[str, np.ndarray]:
    data_dir = Path(
        os.environ.get("DKERNEL_DATA", Path(__file__).resolve().parents[2] / "shared" / "data")
    )
    jain = np.loadtxt(data_dir / "shapes_2d_sipu" / "jain.txt")[:, :2]
    return {
        "wine": load_wine().data,
        "iris": load_iris().data,
        "wdbc": load_breast_cancer().data,
        "two-moon (jain)": jain,
    }


def pck_kernel(X: np.ndarray, seed: int, quick: bool) -> np.ndarray:
    q = 10 if quick else 30
    pck = ProbabilisticClusterKernel(n_inits=q, max_components=q, random_state=seed).fit(X)
    G = np.asarray(pck.transform(X), dtype=np.float64)
    return G @ G.T


def dims_grid(n_max: int) -> list[int]:
    grid = set(range(1, min(10, n_max) + 1))
    grid.update(int(round(v)) for v in np.geomspace(10, n_max, 25))
    return sorted(g for g in grid if 1 <= g <= n_max)


def fig1(K: np.ndarray, rng: np.random.Generator, n_queries: int) -> dict:
    n = K.shape[0]
    queries = rng.choice(n, size=n_queries, replace=False)
    S = np.zeros((n, n_queries))
    S[queries, np.arange(n_queries)] = 1.0
    exact = ppr_exact(K, S, ALPHA)
    values, vectors, d = normalized_eigenpairs(K)
    beta = ALPHA / (1 - ALPHA)
    base = (d / d.sum())[:, None]
    sqd = np.sqrt(d)[:, None]
    grid = dims_grid(n - 1)
    out = {}
    for ordering in ("prop6", "eigenvalue"):
        idx, _, _ = select_components(
            values, vectors, d, beta, n_components=None, ordering=ordering, min_eigenvalue=None
        )
        Z = vectors[:, idx] / np.sqrt(1 + beta - values[idx])[None, :]
        M = Z.T @ (S / sqd)  # (n-1, q): per-component seed means
        restart = np.zeros_like(exact)
        done = 0
        curves = {k: [] for k in KS}
        for dims in grid:
            restart += beta * sqd * (Z[:, done:dims] @ M[done:dims])
            done = dims
            scores = base + restart
            for k in KS:
                curves[k].append(
                    np.mean(
                        [
                            ndcg_at_k(exact[:, j], scores[:, j], k, exclude=queries[j])
                            for j in range(n_queries)
                        ]
                    )
                )
        out[ordering] = curves
    return {"grid": grid, **out}


def fig2(K: np.ndarray, fractions, n_splits: int, n_queries: int, seed: int, name: str) -> dict:
    n = K.shape[0]
    res = {}
    for frac in fractions:
        m = max(5, int(round(frac * n)))
        split_means = []
        for split in range(n_splits):
            rng = derive_rng(seed, "fig2", name, frac, split)
            perm = rng.permutation(n)
            fit, out = np.sort(perm[:m]), perm[m:]
            queries = rng.choice(out, size=min(n_queries, out.size), replace=False)
            kppr = KernelPersonalizedPageRank(kernel="precomputed", alpha=ALPHA).fit(
                K[np.ix_(fit, fit)]
            )
            rows_all = K[:, fit]
            S = np.zeros((n, queries.size))
            S[queries, np.arange(queries.size)] = 1.0
            exact = ppr_exact(K, S, ALPHA)
            vals = []
            for j, q in enumerate(queries):
                coef = kppr.coefficients(seed_X=K[[q]][:, fit])
                scores = rows_all @ coef
                vals.append(ndcg_at_k(exact[:, j], scores, 10, exclude=q))
            split_means.append(np.mean(vals))
        split_means = np.asarray(split_means)
        half = (
            1.96 * split_means.std(ddof=1) / np.sqrt(split_means.size)
            if split_means.size > 1
            else 0.0
        )
        res[frac] = (float(split_means.mean()), float(half), int(m))
    return res


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--quick", action="store_true", help="Q = G = 10, 5 splits, 30 queries")
    ap.add_argument("--splits", type=int, default=20)
    ap.add_argument("--queries", type=int, default=100, help="Fig. 1 queries")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--report-only",
        action="store_true",
        help="rewrite ranking_paper2.md from the CSVs of an earlier run",
    )
    args = ap.parse_args()
    if args.report_only:
        report_from_csv()
        return
    splits = 5 if args.quick else args.splits
    fractions = (0.1, 0.2, 0.3, 0.5)
    RESULTS.mkdir(parents=True, exist_ok=True)
    rows1, rows2, summary = [], [], []
    figs = {}
    t0 = time.perf_counter()
    for name, X in load_datasets().items():
        t = time.perf_counter()
        K = pck_kernel(X, args.seed, args.quick)
        t_k = time.perf_counter() - t
        r1 = fig1(K, derive_rng(args.seed, "fig1", name), min(args.queries, K.shape[0]))
        r2 = fig2(K, fractions, splits, 30, args.seed, name)
        figs[name] = (r1, r2)
        grid = r1["grid"]
        wins = {}
        for k in KS:
            a, b = np.asarray(r1["prop6"][k]), np.asarray(r1["eigenvalue"][k])
            wins[k] = float(np.mean(a >= b - 1e-12))
            for dims, va, vb in zip(grid, a, b, strict=True):
                rows1.append(f"{name},{k},{dims},{va:.6f},{vb:.6f}")
        for frac, (mean, half, m) in r2.items():
            rows2.append(f"{name},{frac},{m},{mean:.6f},{half:.6f}")
        summary.append((name, X.shape, t_k, wins, r2))
        print(
            f"{name:16s} N={X.shape[0]:4d}  PCK {t_k:5.1f}s  Fig1 prop6>=eig at "
            + ", ".join(f"k={k}: {100 * w:.0f}%" for k, w in wins.items())
            + f"  Fig2 NDCG@10 @20%: {r2[0.2][0]:.3f} ± {r2[0.2][1]:.3f}",
            flush=True,
        )
    (RESULTS / "ranking_paper2_fig1.csv").write_text(
        "dataset,k,dims,ndcg_prop6,ndcg_eigenvalue\n" + "\n".join(rows1) + "\n"
    )
    (RESULTS / "ranking_paper2_fig2.csv").write_text(
        "dataset,in_sample_fraction,n_in_sample,mean_ndcg10,ci95_half_width\n"
        + "\n".join(rows2)
        + "\n"
    )
    _plots(figs)
    _report(summary, splits, args, time.perf_counter() - t0)


def _plots(figs: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(figs), figsize=(4.2 * len(figs), 3.6))
    colors = dict(zip(KS, ("C0", "C1", "C2", "C3"), strict=True))
    for ax, (name, (r1, _)) in zip(axes, figs.items(), strict=True):
        for k in KS:
            ax.plot(r1["grid"], r1["prop6"][k], "-", color=colors[k], label=f"Prop. 6, k={k}")
            ax.plot(
                r1["grid"], r1["eigenvalue"][k], "--", color=colors[k], label=f"eigenvalue, k={k}"
            )
        ax.set_xscale("log")
        ax.set_xlabel("dimensionality")
        ax.set_title(name)
    axes[0].set_ylabel("mean NDCG@k vs exact PPR")
    axes[-1].legend(fontsize=7, loc="lower right")
    fig.suptitle("Paper II Fig. 1: eigenvector ordering (PCK, α = 0.1, 100 queries)")
    fig.tight_layout()
    fig.savefig(RESULTS / "ranking_paper2_fig1.png", dpi=110)

    fig, axes = plt.subplots(1, len(figs), figsize=(4.2 * len(figs), 3.3), sharey=True)
    for ax, (name, (_, r2)) in zip(axes, figs.items(), strict=True):
        fr = sorted(r2)
        mean = np.array([r2[f][0] for f in fr])
        half = np.array([r2[f][1] for f in fr])
        ax.errorbar(np.array(fr) * 100, mean, yerr=half, marker="o", capsize=3)
        ax.axhline(0.9, color="gray", lw=0.8, ls=":")
        ax.set_xlabel("in-sample size (% of data)")
        ax.set_title(name)
    axes[0].set_ylabel("NDCG@10, out-of-sample seed")
    fig.suptitle("Paper II Fig. 2 (top row): out-of-sample seed, 95 % CI over splits")
    fig.tight_layout()
    fig.savefig(RESULTS / "ranking_paper2_fig2.png", dpi=110)


def report_from_csv() -> None:
    """Summarise the two CSVs (also the share of Prop. 6 wins at low dimensionality, dims ≤ 20)."""
    import csv

    with open(RESULTS / "ranking_paper2_fig1.csv") as fh:
        f1 = list(csv.DictReader(fh))
    with open(RESULTS / "ranking_paper2_fig2.csv") as fh:
        f2 = list(csv.DictReader(fh))
    names = list(dict.fromkeys(r["dataset"] for r in f1))
    lines = [
        "## Fig. 1 summary: share of dimensionalities where Prop. 6 ≥ eigenvalue ordering",
        "",
        "| dataset | k | all dims | dims ≤ 20 | mean NDCG Prop. 6 / eigenvalue, dims ≤ 20 |",
        "|---|---|---|---|---|",
    ]
    for name in names:
        for k in KS:
            rows = [r for r in f1 if r["dataset"] == name and int(r["k"]) == k]
            a = np.array([float(r["ndcg_prop6"]) for r in rows])
            b = np.array([float(r["ndcg_eigenvalue"]) for r in rows])
            low = np.array([int(r["dims"]) <= 20 for r in rows])
            lines.append(
                f"| {name} | {k} | {100 * np.mean(a >= b - 1e-12):.0f} % | "
                f"{100 * np.mean(a[low] >= b[low] - 1e-12):.0f} % | {a[low].mean():.3f} / {b[low].mean():.3f} |"
            )
    lines += [
        "",
        "## Fig. 2 top row: mean NDCG@10, out-of-sample seed (95 % CI over splits)",
        "",
        "| dataset | in-sample fraction | in-sample points | NDCG@10 |",
        "|---|---|---|---|",
    ]
    for r in f2:
        lines.append(
            f"| {r['dataset']} | {float(r['in_sample_fraction']):.0%} | {r['n_in_sample']} | "
            f"{float(r['mean_ndcg10']):.3f} ± {float(r['ci95_half_width']):.3f} |"
        )
    text = "\n".join(lines) + "\n"
    md = RESULTS / "ranking_paper2.md"
    head = md.read_text().split("## Fig. 1 summary")[0] if md.exists() else ""
    md.write_text(head.rstrip() + "\n\n" + text)
    print(text)


def _report(summary, splits, args, seconds) -> None:
    lines = [
        "# Paper II Fig. 1 and Fig. 2 (top row): KPPR with PCK defaults",
        "",
        f"`python benchmarks/bench_ranking_paper2.py{' --quick' if args.quick else ''} --splits {splits}`"
        f" ({seconds:.0f} s). PCK Q = G = {10 if args.quick else 30}, α = {ALPHA}, seed {args.seed}. "
        "Relevance: exact PPR on all points; the seed is left out of the ranking.",
        "",
        "## Fig. 1: share of dimensionalities where Prop. 6 ordering ≥ eigenvalue ordering",
        "",
        "| dataset | N | " + " | ".join(f"k = {k}" for k in KS) + " |",
        "|---|---|" + "---|" * len(KS),
    ]
    for name, shape, _, wins, _ in summary:
        lines.append(
            f"| {name} | {shape[0]} | " + " | ".join(f"{100 * wins[k]:.0f} %" for k in KS) + " |"
        )
    lines += [
        "",
        "Curves: `ranking_paper2_fig1.csv` / `.png` (solid: Prop. 6, dashed: eigenvalue).",
        "",
        f"## Fig. 2 top row: mean NDCG@10 with an out-of-sample seed ({splits} splits × 30 queries, 95 % CI)",
        "",
        "| dataset | 10 % | 20 % | 30 % | 50 % |",
        "|---|---|---|---|---|",
    ]
    for name, _, _, _, r2 in summary:
        lines.append(
            f"| {name} | "
            + " | ".join(f"{r2[f][0]:.3f} ± {r2[f][1]:.3f}" for f in sorted(r2))
            + " |"
        )
    lines += [
        "",
        "Acceptance: NDCG@10 ≥ 0.9 at 20 % in sample on every dataset: "
        + ("**holds**" if all(r2[0.2][0] >= 0.9 for *_, r2 in summary) else "**does not hold**")
        + ".",
        "",
    ]
    (RESULTS / "ranking_paper2.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
