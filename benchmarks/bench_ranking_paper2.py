"""Paper II (Kernel Personalized PageRank) Fig. 1 and Fig. 2 (top row) with PCK defaults.

Paper II is Løkse & Jenssen, "Kernel Personalized PageRank", in Løkse (2020), PhD thesis
[Lokse2020] (Paper I, PCKID, is in the same thesis); section, figure and equation numbers are
that paper's.

Datasets: Wine, Iris, WDBC (scikit-learn's breast cancer) and Jain's two moons
(``$DKERNEL_DATA/shapes_2d_sipu/jain.txt``). Kernel: ``ProbabilisticClusterKernel`` with the
paper's defaults (Q = G = 30, 10 EM iterations, 50 % subsamples), fitted once per dataset on
all points; ``K = Γ Γᵀ / Z``. Restart probability α = 0.1. Relevance = exact PPR (Chung–Zhao
solve [Chung2010], Eq. 2) on all points.

* **Fig. 1 (eigenvector ordering, §4.1)**: at every dimensionality 1 … N−1, 100 random
  single-point queries (drawn afresh per dimensionality, shared by both orderings); in-sample
  KPPR with the first ``dims`` non-trivial eigenvectors ordered by Prop. 6 (``c_i^2``) or by
  eigenvalue; mean NDCG@k (k = 10, 20, 30, 40). The paper's protocol ranks the data with the
  seed in it and uses all eigenpairs; two variants (seed left out; only λ* > 0.01) show how much
  the comparison depends on those choices (``FIG1_PROTOCOLS``).
* **Fig. 2 top row (out-of-sample seed)**: a random fraction of the points is in sample; KPPR
  (eigenpairs with λ* > 0.01, Prop. 6 order) is fitted on it and all points are ranked for a
  seed drawn from the out-of-sample points (Defs. 1–3); the seed is left out of the NDCG (§4.2);
  mean NDCG@10 over queries and splits with a 95 % confidence interval over splits. The paper
  uses 100 splits × 30 queries; the default here is 20 splits × 30 queries (``--splits``).

Run:  python benchmarks/bench_ranking_paper2.py [--quick] [--part all|fig1|fig2] [--splits 20]
Writes benchmarks/results/ranking_paper2_fig1.{csv,png}, ranking_paper2_fig2.{csv,png},
ranking_paper2_runs.json (commands and times) and ranking_paper2.md (from the CSVs).
"""

from __future__ import annotations

import argparse
import json
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
    ndcg_at_k_columns,
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
    pck = ProbabilisticClusterKernel(n_estimators=q, max_components=q, random_state=seed).fit(X)
    G = np.asarray(pck.transform(X), dtype=np.float64)
    return G @ G.T


# Fig. 1 protocols. "paper" is [Lokse2020], Paper II, §4.1 as written: in-sample embeddings over all
# eigenpairs (Def. 4; the in-sample embedding E_k((1+β)I - Λ*_k)^{-1/2} never divides by λ*, so
# the λ* > 0.01 cut of §4.2, made for Eq. (7), does not apply), the data ranked *with* the seed
# (§4.2 says explicitly that its seeds are left out; §4.1 does not), 100 queries drawn afresh for
# every dimensionality. The other two change one choice each, to show how much hangs on it.
FIG1_PROTOCOLS = {
    "paper": {"exclude_seed": False, "min_eigenvalue": None},
    "seed excluded": {"exclude_seed": True, "min_eigenvalue": None},
    "lambda* > 0.01": {"exclude_seed": False, "min_eigenvalue": 0.01},
}


FIG1_HEADER = "dataset,protocol,dims," + ",".join(
    f"ndcg{k}_{o}" for k in KS for o in ("prop6", "eigenvalue", "diff_se")
)


def fig1(K: np.ndarray, seed: int, name: str, n_queries: int) -> dict:
    """Mean NDCG@k vs dimensionality (every dimensionality) for both orderings and protocols.

    Returns ``{protocol: {"dims": (r,), "prop6": {k: (r,)}, "eigenvalue": {k: (r,)}}}``.
    """
    n = K.shape[0]
    exact = ppr_exact(K, np.eye(n), ALPHA)  # column j: exact PPR for the single seed j
    values, vectors, d = normalized_eigenpairs(K)
    beta = ALPHA / (1 - ALPHA)
    base = (d / d.sum())[:, None]
    sqd = np.sqrt(d)
    # the same random queries for both orderings (and protocols) at a dimensionality
    queries = {}

    def draw(dims: int) -> np.ndarray:
        if dims not in queries:
            queries[dims] = derive_rng(seed, "fig1", name, dims).choice(
                n, size=min(n_queries, n), replace=False
            )
        return queries[dims]

    out: dict = {}
    per_query: dict = {}
    for cut in sorted({p["min_eigenvalue"] for p in FIG1_PROTOCOLS.values()}, key=str):
        protos = {k: p for k, p in FIG1_PROTOCOLS.items() if p["min_eigenvalue"] == cut}
        for ordering in ("prop6", "eigenvalue"):
            idx, _, _ = select_components(
                values, vectors, d, beta, n_components=None, ordering=ordering, min_eigenvalue=cut
            )
            Z = vectors[:, idx] / np.sqrt(1 + beta - values[idx])[None, :]
            M = Z.T / sqd[None, :]  # column j: restart mean m'_s of the seed 1_j
            restart = np.zeros((n, n))
            for dims in range(1, idx.size + 1):
                restart += beta * np.outer(sqd * Z[:, dims - 1], M[dims - 1])
                q = draw(dims)
                scores = base + restart[:, q]
                for proto, p in protos.items():
                    res = out.setdefault(proto, {"dims": [], "prop6": {}, "eigenvalue": {}})
                    if ordering == "prop6":
                        res["dims"].append(dims)
                    for k in KS:
                        val = ndcg_at_k_columns(
                            exact[:, q], scores, k, exclude=q if p["exclude_seed"] else None
                        )
                        res[ordering].setdefault(k, []).append(float(val.mean()))
                        per_query.setdefault((proto, ordering, k), []).append(val)
        # paired standard error of the Prop. 6 − eigenvalue difference (same queries)
        for proto in protos:
            for k in KS:
                diffs = zip(
                    per_query[(proto, "prop6", k)], per_query[(proto, "eigenvalue", k)], strict=True
                )
                out[proto].setdefault("se", {})[k] = [
                    float(np.std(a - b, ddof=1) / np.sqrt(a.size)) for a, b in diffs
                ]
    return out


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
    ap.add_argument("--part", choices=("all", "fig1", "fig2"), default="all")
    ap.add_argument("--splits", type=int, default=20)
    ap.add_argument("--queries", type=int, default=100, help="Fig. 1 queries per dimensionality")
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
    rows1, rows2 = [], []
    figs1, figs2 = {}, {}
    t0 = time.perf_counter()
    for name, X in load_datasets().items():
        t = time.perf_counter()
        K = pck_kernel(X, args.seed, args.quick)
        t_k = time.perf_counter() - t
        msg = f"{name:16s} N={X.shape[0]:4d}  PCK {t_k:5.1f}s"
        if args.part in ("all", "fig1"):
            r1 = fig1(K, args.seed, name, args.queries)
            figs1[name] = r1
            for proto, res in r1.items():
                for i, dims in enumerate(res["dims"]):
                    vals = ",".join(
                        f"{res[o][k][i]:.6f}" for k in KS for o in ("prop6", "eigenvalue", "se")
                    )
                    rows1.append(f"{name},{proto},{dims},{vals}")
            wins = _wins(r1["paper"])
            msg += "  Fig1 (paper) prop6>=eig at " + ", ".join(
                f"k={k}: {100 * w:.0f}%" for k, w in wins.items()
            )
        if args.part in ("all", "fig2"):
            r2 = fig2(K, fractions, splits, 30, args.seed, name)
            figs2[name] = r2
            for frac, (mean, half, m) in r2.items():
                rows2.append(f"{name},{frac},{m},{mean:.6f},{half:.6f}")
            msg += f"  Fig2 NDCG@10 @20%: {r2[0.2][0]:.3f} ± {r2[0.2][1]:.3f}"
        print(msg, flush=True)
    seconds = time.perf_counter() - t0
    runs_path = RESULTS / "ranking_paper2_runs.json"
    runs = json.loads(runs_path.read_text()) if runs_path.exists() else {}
    cmd = "python benchmarks/bench_ranking_paper2.py" + (" --quick" if args.quick else "")
    cmd += f" --part {args.part} --seed {args.seed}"
    info = {"command": cmd, "seconds": round(seconds), "pck_q_g": 10 if args.quick else 30}
    if figs1:
        (RESULTS / "ranking_paper2_fig1.csv").write_text(
            FIG1_HEADER + "\n" + "\n".join(rows1) + "\n"
        )
        _plot_fig1(figs1)
        runs["fig1"] = {**info, "queries_per_dim": args.queries}
    if figs2:
        (RESULTS / "ranking_paper2_fig2.csv").write_text(
            "dataset,in_sample_fraction,n_in_sample,mean_ndcg10,ci95_half_width\n"
            + "\n".join(rows2)
            + "\n"
        )
        _plot_fig2(figs2)
        runs["fig2"] = {**info, "command": cmd + f" --splits {splits}", "splits": splits}
    runs_path.write_text(json.dumps(runs, indent=1) + "\n")
    report_from_csv()


def _wins(res: dict, upto: int | None = None) -> dict[int, float]:
    """Share of dimensionalities (≤ ``upto``) where Prop. 6 ordering ≥ eigenvalue ordering."""
    dims = np.asarray(res["dims"])
    sel = dims <= (upto if upto is not None else dims.max())
    return {
        k: float(
            np.mean(
                np.asarray(res["prop6"][k])[sel] >= np.asarray(res["eigenvalue"][k])[sel] - 1e-12
            )
        )
        for k in KS
    }


def _first_dims(res: dict, k: int, level: float) -> tuple[int | None, int | None]:
    """Smallest dimensionality at which the mean NDCG@k reaches ``level``, per ordering."""
    dims = np.asarray(res["dims"])
    out = []
    for ordering in ("prop6", "eigenvalue"):
        hit = np.asarray(res[ordering][k]) >= level
        out.append(int(dims[np.argmax(hit)]) if hit.any() else None)
    return out[0], out[1]


def _plot_fig1(figs: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    protos = list(FIG1_PROTOCOLS)
    fig, axes = plt.subplots(
        len(protos), len(figs), figsize=(4.2 * len(figs), 3.3 * len(protos)), squeeze=False
    )
    colors = dict(zip(KS, ("C0", "C1", "C2", "C3"), strict=True))
    for row, proto in enumerate(protos):
        for ax, (name, r1) in zip(axes[row], figs.items(), strict=True):
            res = r1[proto]
            for k in KS:
                for ordering, style, label in (
                    ("prop6", "-", "Prop. 6"),
                    ("eigenvalue", "--", "eigenvalue"),
                ):
                    ax.plot(
                        res["dims"],
                        res[ordering][k],
                        style,
                        color=colors[k],
                        lw=1,
                        label=f"{label}, k={k}",
                    )
            ax.set_xscale("log")
            ax.set_title(f"{name} — {proto}", fontsize=9)
            if row == len(protos) - 1:
                ax.set_xlabel("dimensionality (non-trivial eigenvectors)")
        axes[row, 0].set_ylabel("mean NDCG@k vs exact PPR")
    axes[0, -1].legend(fontsize=6, loc="lower right")
    fig.suptitle(
        "Paper II [Lokse2020] Fig. 1: eigenvector ordering (PCK defaults, α = 0.1, 100 random "
        "queries per dimensionality). Top row: the paper's protocol."
    )
    fig.tight_layout()
    fig.savefig(RESULTS / "ranking_paper2_fig1.png", dpi=80)


def _plot_fig2(figs: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(figs), figsize=(4.2 * len(figs), 3.3), sharey=True)
    for ax, (name, r2) in zip(axes, figs.items(), strict=True):
        fr = sorted(r2)
        mean = np.array([r2[f][0] for f in fr])
        half = np.array([r2[f][1] for f in fr])
        ax.errorbar(np.array(fr) * 100, mean, yerr=half, marker="o", capsize=3)
        ax.axhline(0.9, color="gray", lw=0.8, ls=":")
        ax.set_xlabel("in-sample size (% of data)")
        ax.set_title(name)
    axes[0].set_ylabel("NDCG@10, out-of-sample seed")
    fig.suptitle("Paper II [Lokse2020] Fig. 2 (top row): out-of-sample seed, 95 % CI over splits")
    fig.tight_layout()
    fig.savefig(RESULTS / "ranking_paper2_fig2.png", dpi=110)


def _read_fig1() -> dict:
    import csv

    figs: dict = {}
    with open(RESULTS / "ranking_paper2_fig1.csv") as fh:
        for r in csv.DictReader(fh):
            res = figs.setdefault(r["dataset"], {}).setdefault(
                r["protocol"], {"dims": [], "prop6": {}, "eigenvalue": {}}
            )
            res["dims"].append(int(r["dims"]))
            for k in KS:
                for o in ("prop6", "eigenvalue"):
                    res[o].setdefault(k, []).append(float(r[f"ndcg{k}_{o}"]))
                if f"ndcg{k}_diff_se" in r:
                    res.setdefault("se", {}).setdefault(k, []).append(float(r[f"ndcg{k}_diff_se"]))
    return figs


def _paired(res: dict) -> dict[int, tuple[float, float]]:
    """Per k: shares of dimensionalities where Prop. 6 is significantly better / worse than
    the eigenvalue ordering (paired difference over the same queries beyond 1.96 SE)."""
    out = {}
    for k in KS:
        d = np.asarray(res["prop6"][k]) - np.asarray(res["eigenvalue"][k])
        se = np.asarray(res["se"][k])
        out[k] = (float(np.mean(d > 1.96 * se)), float(np.mean(d < -1.96 * se)))
    return out


def _by_protocol(figs: dict):
    """(dataset, protocol, results) in the order of FIG1_PROTOCOLS."""
    for name, protos in figs.items():
        for proto in [p for p in FIG1_PROTOCOLS if p in protos]:
            yield name, proto, protos[proto]


def report_from_csv() -> None:
    """Write ranking_paper2.md from the two CSVs and ranking_paper2_runs.json."""
    import csv

    runs_path = RESULTS / "ranking_paper2_runs.json"
    runs = json.loads(runs_path.read_text()) if runs_path.exists() else {}
    figs = _read_fig1()
    with open(RESULTS / "ranking_paper2_fig2.csv") as fh:
        f2 = list(csv.DictReader(fh))
    r1, r2 = runs.get("fig1", {}), runs.get("fig2", {})
    lines = [
        "# Paper II Fig. 1 and Fig. 2 (top row): KPPR with PCK defaults",
        "",
        "Paper I and Paper II of Løkse (2020), PhD thesis [Lokse2020]. PCK defaults (Paper I "
        "§4 / Paper II §4): Q = G = 30, 10 EM iterations, diagonal "
        "covariances, 50 % subsample per initial condition, kernel evaluated on all points; "
        f"α = {ALPHA}. Relevance: the exact PPR (Chung–Zhao solve [Chung2010], Eq. 2) on all "
        "points.",
        "",
        f"- Fig. 1: `{r1.get('command', '?')}` ({r1.get('seconds', '?')} s, "
        f"{r1.get('queries_per_dim', 100)} queries per dimensionality).",
        f"- Fig. 2: `{r2.get('command', '?')}` ({r2.get('seconds', '?')} s"
        + (f", {r2['note']}" if r2.get("note") else "")
        + ").",
        "",
        "## Fig. 1: eigenvector ordering",
        "",
        "Protocols ([Lokse2020], Paper II, §4.1; see `FIG1_PROTOCOLS` in the benchmark):",
        "",
        "- **paper**: every dimensionality 1 … N−1 of the in-sample embedding (all eigenpairs; "
        "the λ* > 0.01 cut of §4.2 exists for the out-of-sample Eq. 7 and is not applied), the "
        "data ranked *including* the seed (§4.2 states that its seeds are left out; §4.1 does "
        "not), 100 single-point queries drawn afresh for each dimensionality (the same ones for "
        "both orderings).",
        "- **seed excluded**: as paper, but the seed is left out of every NDCG (the protocol of "
        "this benchmark before; §4.2's rule).",
        "- **lambda\\* > 0.01**: as paper, but only eigenpairs with λ* > 0.01 are candidates.",
        "",
        "Share of dimensionalities where mean NDCG@k with the Prop. 6 ordering ≥ with the "
        "eigenvalue ordering (all dimensionalities; in brackets: dimensionalities ≤ 20):",
        "",
        "| dataset | N | protocol | dims | " + " | ".join(f"k = {k}" for k in KS) + " |",
        "|---|---|---|---|" + "---|" * len(KS),
    ]
    for name, proto, res in _by_protocol(figs):
        w, lo = _wins(res), _wins(res, 20)
        n_pts = max(figs[name]["paper"]["dims"]) + 1
        lines.append(
            f"| {name} | {n_pts} | {proto} | {len(res['dims'])} | "
            + " | ".join(f"{100 * w[k]:.0f} % ({100 * lo[k]:.0f} %)" for k in KS)
            + " |"
        )
    has_se = all("se" in protos["paper"] for protos in figs.values())
    if has_se:
        lines += [
            "",
            "Paired comparison (the same 100 queries for both orderings at a dimensionality): "
            "share of dimensionalities where Prop. 6 is significantly better / significantly "
            "worse (mean difference beyond ±1.96 paired standard errors); the rest are ties "
            "within the Monte-Carlo noise of 100 queries:",
            "",
            "| dataset | protocol | " + " | ".join(f"k = {k}" for k in KS) + " |",
            "|---|---|" + "---|" * len(KS),
        ]
        for name, proto, res in _by_protocol(figs):
            pr = _paired(res)
            lines.append(
                f"| {name} | {proto} | "
                + " | ".join(f"{100 * pr[k][0]:.0f} % / {100 * pr[k][1]:.0f} %" for k in KS)
                + " |"
            )
    lines += [
        "",
        "Mean over all dimensionalities of NDCG@k(Prop. 6) − NDCG@k(eigenvalue):",
        "",
        "| dataset | protocol | " + " | ".join(f"k = {k}" for k in KS) + " |",
        "|---|---|" + "---|" * len(KS),
    ]
    for name, proto, res in _by_protocol(figs):
        diff = {
            k: np.mean(np.asarray(res["prop6"][k]) - np.asarray(res["eigenvalue"][k])) for k in KS
        }
        lines.append(f"| {name} | {proto} | " + " | ".join(f"{diff[k]:+.4f}" for k in KS) + " |")
    lines += [
        "",
        "Smallest dimensionality at which the mean NDCG@k reaches a level, Prop. 6 / eigenvalue "
        "ordering (paper protocol; the paper: Prop. 6 “achieves better results relative to the "
        "PPR with fewer dimensions”):",
        "",
        "| dataset | "
        + " | ".join(f"k = {k}: 0.9" for k in KS)
        + " | "
        + " | ".join(f"k = {k}: 0.95" for k in KS)
        + " |",
        "|---|" + "---|" * (2 * len(KS)),
    ]
    for name, protos in figs.items():
        cells = []
        for level in (0.9, 0.95):
            for k in KS:
                a, b = _first_dims(protos["paper"], k, level)
                cells.append(f"{a} / {b}")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    cells = [v > 0.5 for protos in figs.values() for v in _wins(protos["paper"]).values()]
    paired = [v for protos in figs.values() if has_se for v in _paired(protos["paper"]).values()]
    not_worse = [1 - worse > 0.5 for _, worse in paired]
    net = [better > worse for better, worse in paired]
    lines += [
        "",
        "Curves: `ranking_paper2_fig1.csv` / `.png` (solid: Prop. 6, dashed: eigenvalue; one row "
        "per protocol).",
        "",
        "Why the seed matters: for a single-point seed the exact PPR puts roughly α on the seed "
        "itself and O(1/N) on every other point, so with the seed in the ranking NDCG@k mostly "
        "measures whether the low-rank scores already single out the seed. That spike is made "
        "of many small-λ* eigenvectors, which the Prop. 6 criterion (it bounds the error of "
        "D^{-1/2}π, seed entry included) brings forward. Without the seed, NDCG@k measures the "
        "order of the neighbours, which the large-λ* (smooth) eigenvectors carry; there the "
        "eigenvalue ordering is as good or better. Prop. 6 itself (expected scaled error, "
        "Eq. 10) is exact and its ordering minimises that error at every dimensionality "
        "(tests/ranking/test_kppr.py).",
        "",
        "Acceptance (Prop. 6 ≥ eigenvalue ordering at more than half of the dimensionalities, "
        f"paper protocol): strictly (mean ≥ mean) in {sum(cells)} of {len(cells)} (dataset, k) "
        "cells"
        + (" — **holds**." if all(cells) else " — **not in every cell**.")
        + (
            " Not significantly worse (paired, 95 %) at more than half of the dimensionalities in "
            f"{sum(not_worse)} of {len(not_worse)} cells; significantly better more often than "
            f"significantly worse in {sum(net)} of {len(net)} cells."
            if has_se
            else ""
        ),
        "",
        "## Fig. 2 top row: mean NDCG@10 with an out-of-sample seed (95 % CI over splits)",
        "",
        "| dataset | in-sample fraction | in-sample points | NDCG@10 |",
        "|---|---|---|---|",
    ]
    for r in f2:
        lines.append(
            f"| {r['dataset']} | {float(r['in_sample_fraction']):.0%} | {r['n_in_sample']} | "
            f"{float(r['mean_ndcg10']):.3f} ± {float(r['ci95_half_width']):.3f} |"
        )
    at20 = [float(r["mean_ndcg10"]) for r in f2 if float(r["in_sample_fraction"]) == 0.2]
    lines += [
        "",
        "Acceptance: NDCG@10 ≥ 0.9 at 20 % in sample on every dataset: "
        + ("**holds**" if at20 and min(at20) >= 0.9 else "**does not hold**")
        + ".",
        "",
    ]
    text = "\n".join(lines)
    (RESULTS / "ranking_paper2.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
