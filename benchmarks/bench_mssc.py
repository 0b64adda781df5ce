"""MSSC benchmarks behind issue #6's acceptance points.

Section, figure and equation numbers are those of Agersborg (2012), *Mean Shift Spectral
Clustering Using Kernel Entropy Component Analysis*, MSc thesis [Agersborg2012] ("the thesis").

Sections (all in one run, tables written to ``benchmarks/results/mssc_*.md``):

* ``grid``   iris and wine ([Agersborg2012], §6.1.1, Fig. 6.5–6.6): accuracy over h_ms ∈ [0.01,
  0.30] and spectral bandwidth ∈ [1, 5], KPCA + Euclidean and KECA + cosine k-means, Eq. 5.4
  affinity.
* ``toy``    [Agersborg2012], §6.1.3 toy data (two noisy half circles of 250 points and a blob of
  100): MSSC (blurring, h_ms = 1, 50 iterations) against KPCA and KECA on the raw kernel with the
  same bandwidth, ARI, five data seeds.
* ``scenes`` Samson and Jasper Ridge with the ``mssc`` job's default parameters (no tuning
  against ground truth) next to k-means, GMM and scikit-learn SpectralClustering on the same
  features.
* ``demo``   the README demo job (``jobs/demo-landsat-mssc.yaml``) end to end in a fresh
  process: wall time, label GeoTIFF CRS/transform vs the source, nodata collar, PNG; and
  ``predict`` consistency on the demo pixels.

Run: ``DKERNEL_DATA=/work/shared/data python benchmarks/bench_mssc.py [--quick] [--only grid,toy]``
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"


def _write(name: str, text: str) -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / name).write_text(text)
    print(text)


# ---------------------------------------------------------------------------------------
def _grid_scores(X, y, labels, m, sigmas, n_init):
    """Best accuracy of KPCA+Euclid and KECA+cosine on the Eq. 5.4 affinity, per sigma."""
    from dkernel.meanshift.estimators import second_stage
    from dkernel.metrics import clustering_accuracy

    d2 = ((X[:, None, :] - X[None, :, :]) ** 2).sum(-1)
    E = np.zeros((X.shape[0], m))
    E[np.arange(X.shape[0]), labels] = 1.0
    out = []
    for s in sigmas:
        S = E.T @ np.exp(-d2 / (2.0 * s * s)) @ E  # Eq. 5.4 numerators and normalisers
        d = np.sqrt(np.diag(S))
        A = S / np.outer(d, d)
        accs = {}
        for emb in ("kpca", "keca"):
            lab = second_stage(A, 3, emb, n_init=n_init, seed=0)[0][labels]
            accs[emb] = clustering_accuracy(y, lab)
        out.append((float(s), accs))
    return out


def _restart_scores(X, y, labels, m, sigmas, n_restarts):
    """Thesis protocol ([Agersborg2012], §5): k-means restarted ``n_restarts`` times, each run
    scored.

    Per sigma and method: (accuracy of the lowest-cost run, best accuracy of any run). Every
    run is a single k-means: Euclidean k-means++ with seeds 0..R-1 on the centered KPCA
    embedding; angular k-means on the KECA embedding, run 0 from the KECA initialisation and
    the others from R-1 random picks of the partitions ([Agersborg2012], §2.2's initialisation).
    """
    from sklearn.cluster import KMeans

    from dkernel.linalg.kmeans import _angular_lloyd, keca_initial_centers, normalize_rows
    from dkernel.metrics import clustering_accuracy
    from dkernel.spectral.dense import keca_embedding, kpca_embedding

    d2 = ((X[:, None, :] - X[None, :, :]) ** 2).sum(-1)
    E = np.zeros((X.shape[0], m))
    E[np.arange(X.shape[0]), labels] = 1.0
    out = []
    for s in sigmas:
        S = E.T @ np.exp(-d2 / (2.0 * s * s)) @ E
        d = np.sqrt(np.diag(S))
        A = S / np.outer(d, d)
        res = {}
        Z = kpca_embedding(A, 3).embedding
        runs = []
        for r in range(n_restarts):
            km = KMeans(3, n_init=1, random_state=r).fit(Z)
            runs.append((km.inertia_, clustering_accuracy(y, km.labels_[labels])))
        res["kpca"] = (min(runs)[1], max(a for _, a in runs))
        U = normalize_rows(keca_embedding(A, 3).embedding)
        rng = np.random.default_rng(0)
        runs = []
        for r in range(n_restarts):
            idx = keca_initial_centers(U, 3) if r == 0 else rng.choice(m, 3, replace=False)
            lab, _, cost = _angular_lloyd(U, U[idx].copy(), 300, 0.0)
            runs.append((cost, clustering_accuracy(y, lab[labels])))
        res["keca"] = (min(runs)[1], max(a for _, a in runs))
        out.append((float(s), res))
    return out


def _thesis_partitions(X, h, tau_rel):
    """[Agersborg2012], §6.1.1 mean shift: exactly 100 non-blurring iterations (no early stop),
    end points closer than ``tau_rel · h`` grouped (single linkage)."""
    from dkernel.meanshift import kernels as K

    res = K.mean_shift(X, X, h, max_iter=100, tol=0.0)
    return K.group_modes(res.ends, tau_rel * h)[0]


def bench_grid_thesis(X, y, h_ms_grid, h_sp_grid, n_restarts, quick):
    """Iris under the protocol of [Agersborg2012], next to the cost-based grid; markdown lines."""
    from dkernel.meanshift import kernels as K
    from dkernel.meanshift.estimators import MeanShift

    out = []
    # partition counts for h_ms in the unstable region ([Agersborg2012], Fig. 6.1/6.2)
    taus = (1e-3, 1e-5, 1e-7)
    out.append("### Partition counts in the unstable region ([Agersborg2012], Fig. 6.1/6.2)\n")
    out.append(
        "[Agersborg2012]: ≈ 70 partitions at h_ms = 0.22 and 'just over 10' at 0.24 with 100 "
        "iterations. Ours: `MeanShift(h, max_iter=100)` (per-seed stop at 1e-3·h, τ = 0.25·median "
        "move clipped to [1e-3 h, h/2]) and the thesis-like variant: exactly 100 iterations "
        "(tol = 0) and a fixed tight τ = c·h.\n"
    )
    out.append("| h_ms | ours | " + " | ".join(f"100 it, τ={t:g}·h" for t in taus) + " |")
    out.append("|---|---|" + "---|" * len(taus))
    for h in np.round(np.arange(0.18, 0.3001, 0.01), 2):
        ours = MeanShift(float(h), max_iter=100).fit(X).n_partitions_
        res = K.mean_shift(X, X, float(h), max_iter=100, tol=0.0)
        cnt = [int(K.group_modes(res.ends, t * h)[0].max() + 1) for t in taus]
        out.append(f"| {h:.2f} | {ours} | " + " | ".join(map(str, cnt)) + " |")
    out.append("")

    tau_rel = 1e-5
    cols = [
        ("ours", "kpca", 1),
        ("ours", "keca", 1),
        ("thesis", "kpca", 0),
        ("thesis", "kpca", 1),
        ("thesis", "keca", 0),
        ("thesis", "keca", 1),
    ]
    names = {
        ("ours", "kpca", 1): "ours, KPCA+Euclid, best acc",
        ("ours", "keca", 1): "ours, KECA+cosine, best acc",
        ("thesis", "kpca", 0): "100 it, KPCA+Euclid, min cost",
        ("thesis", "kpca", 1): "100 it, KPCA+Euclid, best acc",
        ("thesis", "keca", 0): "100 it, KECA+cosine, min cost",
        ("thesis", "keca", 1): "100 it, KECA+cosine, best acc",
    }
    rows, best = [], {}
    for h_ms in h_ms_grid:
        parts = {
            "ours": MeanShift(float(h_ms), max_iter=100).fit(X).labels_,
            "thesis": _thesis_partitions(X, float(h_ms), tau_rel),
        }
        row = {}
        for g, lab in parts.items():
            m = int(lab.max() + 1)
            row[g + "_m"] = m
            if m < 3:
                continue
            for s, res in _restart_scores(X, y, lab, m, h_sp_grid, n_restarts):
                for emb, accs in res.items():
                    for sel in (0, 1):
                        key = (g, emb, sel)
                        if key not in names:
                            continue
                        row[key] = max(row.get(key, 0.0), accs[sel])
                        if accs[sel] > best.get(key, (0.0, None))[0]:
                            best[key] = (accs[sel], (float(h_ms), round(s, 3), m))
        rows.append((h_ms, row))
    out.append(f"### Thesis protocol: best of {n_restarts} k-means restarts by accuracy\n")
    out.append(
        "[Agersborg2012], §5 (end of the paragraph before 'While the mode-finding vectors…'): "
        "'when the real data labels are known, the algorithm is run several times with different "
        "initializations and the best result is used'. Here every (h_ms, σ) cell runs "
        f"{n_restarts} single k-means restarts (KPCA: Euclidean k-means++ seeds 0..{n_restarts - 1}; "
        "KECA: angular k-means, run 0 from the KECA initialisation, the rest from random "
        "partitions) and reports the run with the **highest accuracy** ('best acc', uses the "
        "labels: an upper bound, not a clustering result) or, for comparison, the run with "
        "the **lowest k-means cost** ('min cost', label-free). Partitions: 'ours' = the "
        "grouping of the table above; '100 it' = exactly 100 non-blurring iterations "
        f"(tol = 0), end points grouped at τ = {tau_rel:g}·h_ms. Cells: best over "
        f"σ ∈ {h_sp_grid[0]}..{h_sp_grid[-1]}.\n"
    )
    out.append(
        "| h_ms | partitions ours | partitions 100 it | "
        + " | ".join(names[c] for c in cols)
        + " |"
    )
    out.append("|---|---|---|" + "---|" * len(cols))
    for h_ms, r in rows:
        cells = " | ".join(f"{r[c]:.3f}" if c in r else "–" for c in cols)
        out.append(f"| {h_ms:.2f} | {r['ours_m']} | {r['thesis_m']} | {cells} |")
    out.append("")
    for c in cols:
        if c in best:
            acc, at = best[c]
            out.append(f"- **iris {names[c]}: {acc:.4f}** at (h_ms, σ, partitions) = {at}")
    out.append(IRIS_READING)
    return out


IRIS_READING = """
Reading (issue #6, iris ≥ 97 %): only the protocol of Agersborg (2012) [Agersborg2012] reaches it
— 100 fixed iterations, tight grouping and the k-means restart chosen **by accuracy** (0.9733,
KPCA+Euclid, h_ms = 0.24, in the unstable region where mean shift has not converged, as the
thesis' 98.0 % / 97.77 %). With the label-free choice (lowest k-means cost) the same partitions
give at most 0.953, and our default grouping at most 0.907 (cost) / 0.927 (accuracy). No grouping
threshold reproduces the thesis' ≈ 70 partitions at 0.22 together with ≈ 10 at 0.24 (counts table
above).
"""


def bench_grid(quick: bool) -> None:
    from sklearn.datasets import load_iris, load_wine

    from dkernel.meanshift.estimators import MeanShift

    h_ms_grid = np.round(np.arange(0.01, 0.3001, 0.05 if quick else 0.01), 2)
    h_sp_grid = np.round(np.arange(1.0, 5.0001, 1.0 if quick else 0.2), 2)
    factors = (1, 5, 10, 20)
    n_init = 10
    out = ["# MSSC accuracy grid ([Agersborg2012], §6.1.1, Fig. 6.5–6.6; §6.3.2, Fig. 6.20)", ""]
    out.append(
        "Mean shift: Gaussian, non-blurring, 100 iterations ([Agersborg2012]), tol 1e-3·h, "
        "grouping 0.25·median move. Affinity: exact Cauchy–Schwarz (Eq. 5.4) with its own "
        "bandwidth σ in data units. Second stage: dims = 3, k-means best of "
        f"{n_init}. Cells: best accuracy over σ ∈ {h_sp_grid[0]}..{h_sp_grid[-1]} "
        f"(step {h_sp_grid[1] - h_sp_grid[0]:.1f}); for wine also σ = f·h_ms with "
        f"f ∈ {factors} as in [Agersborg2012], Fig. 6.20.\n\n"
        "Data scaling. **Iris raw (cm)**: [Agersborg2012], Fig. 6.1's partition counts (≈ 150 at "
        "h = 0.01, outliers merging for 0.10–0.20, a handful at 0.30–0.35) and the k-means "
        "accuracy quoted in [Agersborg2012], §6.1.1 (89.33 %) are those of the raw measurements. "
        "**Wine min–max scaled to [0, 1] per feature**: [Agersborg2012] scales features to a unit "
        "range (pixel intensities 0..1, §6.1.2) and a mean-shift bandwidth range of 0.01–0.30 only "
        "forms partitions on unit-range features; standardised wine (the previous table) has "
        "nearest-neighbour distances ≈ 2, so every h_ms ≤ 0.30 left 178 singleton "
        "partitions and MSSC degenerated to KPCA/KECA of the points. Rows with "
        "partitions ≈ N are such (near-)singleton runs; the 'best with partitions ≤ N/2' "
        "line keeps only runs whose partitions hold two or more points on average.\n"
    )
    for name, loader, scale in (("iris", load_iris, "raw"), ("wine", load_wine, "minmax")):
        X, y = loader(return_X_y=True)
        if scale == "minmax":
            X = (X - X.min(0)) / (X.max(0) - X.min(0))
        n = X.shape[0]
        best = {}
        rows = []
        t0 = time.perf_counter()
        for h_ms in h_ms_grid:
            ms = MeanShift(float(h_ms), max_iter=100).fit(X)
            m = ms.n_partitions_
            row = {}
            if m >= 3:
                grids = [("σ∈[1,5]", h_sp_grid)]
                if name == "wine":
                    grids.append(("σ=f·h_ms", np.array([f * h_ms for f in factors])))
                for gname, sig in grids:
                    for s, accs in _grid_scores(X, y, ms.labels_, m, sig, n_init):
                        for emb, acc in accs.items():
                            key = (gname, emb)
                            row[key] = max(row.get(key, 0.0), acc)
                            for sub in ("all", "part") if 2 * m <= n else ("all",):
                                bk = (gname, emb, sub)
                                if acc > best.get(bk, (0.0, None))[0]:
                                    best[bk] = (acc, (float(h_ms), round(s, 3), m))
            rows.append((h_ms, m, row))
        keys = sorted({k for _, _, r in rows for k in r}, key=lambda k: (k[0] != "σ∈[1,5]", k))
        out.append(f"## {name} ({time.perf_counter() - t0:.0f} s)\n")
        out.append(
            "| h_ms | partitions | "
            + " | ".join(f"{g} {'KPCA+Euclid' if e == 'kpca' else 'KECA+cosine'}" for g, e in keys)
            + " |"
        )
        out.append("|---|---|" + "---|" * len(keys))
        for h_ms, m, r in rows:
            cells = " | ".join(f"{r[k]:.3f}" if k in r else "–" for k in keys)
            out.append(f"| {h_ms:.2f} | {m} | {cells} |")
        out.append("")
        for (gname, emb, sub), (acc, at) in sorted(best.items()):
            what = "best" if sub == "all" else "best with partitions ≤ N/2"
            out.append(
                f"- **{name} {what}, {emb}, {gname}: {acc:.4f}** at (h_ms, σ, partitions) = {at}"
            )
        out.append("")
        if name == "iris":
            t1 = time.perf_counter()
            out += bench_grid_thesis(X, y, h_ms_grid, h_sp_grid, n_init, quick)
            out.append(f"([Agersborg2012] protocol: {time.perf_counter() - t1:.0f} s)\n")
    _write("mssc_grid.md", "\n".join(out) + "\n")


# ---------------------------------------------------------------------------------------
def toy_data(
    seed: int, *, scale: float = 1.0, blob_sd: float = 1.0
) -> tuple[np.ndarray, np.ndarray]:
    """[Agersborg2012], §6.1.3: two noisy half circles (250 each, different noise) and a blob (100).

    Radius 5, noise sd 0.4 / 0.6, blob N((11, 7), blob_sd²), everything times ``scale``.
    [Agersborg2012] gives no numbers; ``scale=2, blob_sd=2`` is the variant calibrated to what it
    reports (see :func:`bench_toy`).
    """
    rng = np.random.default_rng(seed)
    t = rng.uniform(0, np.pi, 250)
    a = np.c_[5 * np.cos(t), 5 * np.sin(t)] + rng.normal(0, 0.4, (250, 2))
    t = rng.uniform(0, np.pi, 250)
    b = np.c_[5 - 5 * np.cos(t), 2 - 5 * np.sin(t)] + rng.normal(0, 0.6, (250, 2))
    c = rng.normal([11, 7], blob_sd, (100, 2))
    return scale * np.vstack([a, b, c]), np.repeat([0, 1, 2], [250, 250, 100])


TOY_VARIANTS = {
    "v1: radius 5, noise 0.4/0.6, blob sd 1": {"scale": 1.0, "blob_sd": 1.0},
    "[Agersborg2012]-like: radius 10, noise 0.8/1.2, blob sd 4": {"scale": 2.0, "blob_sd": 2.0},
}


def bench_toy(quick: bool) -> None:
    from sklearn.metrics import adjusted_rand_score as ari

    from dkernel.kernels import rbf_block
    from dkernel.linalg import angular_kmeans, euclidean_kmeans
    from dkernel.meanshift.estimators import MSSC
    from dkernel.spectral.dense import keca_embedding, kpca_embedding

    seeds = range(2 if quick else 5)
    out = ["# MSSC vs direct KPCA / KECA on the [Agersborg2012], §6.1.3 toy data (ARI)", ""]
    out.append(
        "MSSC: blurring mean shift h_ms = 1.0, 50 iterations (as in [Agersborg2012], Fig. 6.14), "
        "default grouping, exact Eq. 5.4 affinity with bandwidth h, 3 dims, k-means best of 20 by "
        "cost. Direct: KPCA + k-means and KECA + angular k-means on the RBF kernel of the "
        "points with the same h. Mean ARI over data seeds " + ", ".join(map(str, seeds)) + "; "
        "'partitions' = mean number of mean-shift partitions (total, and how many hold "
        "points of each half circle / the blob). Agersborg's setting is **h = 2.0** (Fig. "
        "6.13–6.14).\n\n"
        "**Which data.** [Agersborg2012] gives no generator parameters, only what it observed: "
        "blurring mean shift (h_ms = 1, 50 iterations) finds **22 partitions, six on each half "
        "circle and ten on the blob** ('the noise added to the half circles has lower variance'); "
        "with h = 2 direct KPCA splits one half circle into three parts and puts the blob "
        "with a half circle, direct KECA splits the blob between the three clusters. Our "
        "first reconstruction (v1: radius 5, blob sd 1) gives only ~6 partitions. That is "
        "**not the grouping**: after 50 blurring iterations the end points of each group "
        "coincide to round-off (nearest-neighbour distance 0), so every grouping threshold "
        "from 1e-6 to 0.5 gives the same 6–7 groups, and these partitions are pure (merging "
        "each into its majority class gives ARI ≥ 0.98). At that scale h = 1 is large "
        "against the data (the blob collapses to one point, each half circle to 2–4), and "
        "h_spec = 2 is too large to separate the interlocking half circles' ends. Doubling "
        "the geometry (radius 10, noise 0.8/1.2) gives six partitions per half circle as in "
        "[Agersborg2012]; a blob of sd 4 (twice as wide as before relative to the half circles, "
        "still the widest noise) gives ~11 blob partitions, 22 in all on average, and direct "
        "KPCA/KECA then fail as [Agersborg2012] describes. The blob sd was picked from {1, 1.5, 2} "
        "× the doubled scale (seeds 0–4) by the partition counts; the MSSC scores of those trial "
        "runs were visible too, so this variant is a reconstruction of Agersborg's data, not "
        "independent evidence. Grouping and all MSSC parameters are unchanged. Both variants "
        "are shown.\n"
    )
    for vname, kw in TOY_VARIANTS.items():
        out.append(f"## {vname}\n")
        out.append(
            "| h | KPCA direct | KECA direct | MSSC-KPCA | MSSC-KECA | partitions (moon a / "
            "moon b / blob) | seeds where MSSC-KECA > both direct |"
        )
        out.append("|---|---|---|---|---|---|---|")
        for h in (1.0, 2.0, 3.0):
            res = {k: [] for k in ("kpca", "keca", "mkpca", "mkeca", "m", "per")}
            for s in seeds:
                X, y = toy_data(s, **kw)
                Kx = rbf_block(X, X, h)
                Zp = kpca_embedding(Kx, 3).embedding
                Ze = keca_embedding(Kx, 3).embedding
                res["kpca"].append(ari(y, euclidean_kmeans(Zp, 3, n_init=20, random_state=0)[0]))
                res["keca"].append(ari(y, angular_kmeans(Ze, 3, n_init=20, random_state=0)[0]))
                for emb in ("kpca", "keca"):
                    m = MSSC(
                        3,
                        bandwidth=1.0,
                        sigma=h,
                        embedding=emb,
                        blurring=True,
                        max_iter=50,
                        n_init=20,
                        random_state=0,
                        # [Agersborg2012], ch. 5 as written (the estimator's defaults are the job's
                        # since issue 15): Eq. 5.4 affinity, every point a seed and density point
                        normalization="cs",
                        seeds="all",
                        density="sample",
                        density_max_samples=5000,
                        path_radius=0.2,
                    ).fit(X)
                    res["m" + emb].append(ari(y, m.labels_))
                res["m"].append(m.n_partitions_)
                part = m.pixel_partitions_
                res["per"].append([len(np.unique(part[y == k])) for k in range(3)])
            wins = sum(
                mk > max(p, e)
                for mk, p, e in zip(res["mkeca"], res["kpca"], res["keca"], strict=True)
            )
            per = "/".join(f"{v:.1f}" for v in np.mean(res["per"], axis=0))
            out.append(
                f"| {h} | {np.mean(res['kpca']):.3f} | {np.mean(res['keca']):.3f} | "
                f"{np.mean(res['mkpca']):.3f} | {np.mean(res['mkeca']):.3f} | "
                f"{np.mean(res['m']):.1f} ({per}) | {wins}/{len(res['m'])} |"
            )
        out.append("")
    _write("mssc_toy.md", "\n".join(out) + "\n")


# ---------------------------------------------------------------------------------------
def _job_estimator(n_clusters: int, seed: int = 0):
    """An MSSC with the ``mssc`` job method's defaults."""
    from dkernel.jobs.steps.mssc import PARAMS
    from dkernel.meanshift.estimators import MSSC

    p = {q.name: q.default for q in PARAMS}
    keys = (
        "bandwidth",
        "bandwidth_factor",
        "sigma",
        "sigma_fraction",
        "embedding",
        "affinity",
        "n_rff",
        "n_init",
        "normalization",
        "regularization",
        "band_norm",
        "blurring",
        "seeds",
        "n_seeds",
        "density",
        "density_max_samples",
        "max_iter",
        "tol",
        "group_factor",
        "path_radius",
    )
    return MSSC(
        n_clusters,
        **{k: p[k] for k in keys if k != "bandwidth"},
        bandwidth=p["bandwidth"],
        random_state=seed,
    ), p


def _peer(method: str, X: np.ndarray, k: int) -> np.ndarray:
    from sklearn.cluster import KMeans, SpectralClustering
    from sklearn.mixture import GaussianMixture

    if method == "k-means":
        return KMeans(k, n_init=10, random_state=0).fit_predict(X)
    if method == "GMM (diag)":
        return GaussianMixture(k, covariance_type="diag", random_state=0).fit(X).predict(X)
    if method == "SpectralClustering (kNN)":
        return SpectralClustering(k, affinity="nearest_neighbors", random_state=0).fit_predict(X)
    return SpectralClustering(k, random_state=0).fit_predict(X)


TRIED_SCENES = """
## Default changes tried

Label-free candidates, each applied to both scenes with everything else at the job defaults
of the time (MSSC in-process, NMI, seed 0 unless noted; – = not run on Jasper because it
already lost on Samson).

Before the fix (raw bands, h_spec = 20 % of the median distance, KPCA; baseline Samson 0.714,
Jasper 0.663), not adopted:

| change | why it could help | Samson NMI | Jasper NMI |
|---|---|---|---|
| h_spec = 0.5 × median distance | [Agersborg2012], §5.5: spectral kernel 'global' | 0.647 | 0.646 |
| h_spec = 0.707 × median distance | KernelPCAEmbedding's rule | 0.471 | – |
| h_spec = 0.1 × median distance | smaller merge scale | 0.699 | – |
| KECA + angular k-means | Agersborg's preferred method | 0.667 | 0.549 |
| normalization 'cs' (Eq. 5.4) | the affinity of [Agersborg2012] as written | 0.232 | – |
| bands standardised per band | equal weight per band | 0.666 | 0.675 |
| first 10 band PCs (+ coords) | bands are highly correlated | 0.676 | 0.634 |
| unit-norm spectra (spectral angle), h_spec 20 % | illumination invariance | 0.443 | – |
| coordinates in [0, 1] instead of [0, 0.25] | more spatial coherence | 0.709 | – |
| partition affinity = closed-form CS between diagonal Gaussians fitted to each partition (mean, per-feature variance) | per-partition spread, as GMM (diag) | 0.699 | 0.573 |
| same with the Bhattacharyya coefficient | same | 0.699 | 0.573 |
| both Gaussian affinities on PCA-whitened bands (99.9 % variance: 4 / 8 components) | collinear bands | 0.699 | 0.571 |
| both Gaussian affinities, finer partitions (bandwidth_factor 0.25) | oracle 0.89 / 0.88 | 0.603 | 0.257 |
| exact CS on PCA-whitened bands, 99.9 % (4 / 8 comps), h_spec 0.5 × median | brightness no longer dominates | 0.752 | 0.608 |
| exact CS on PCA-whitened bands, 99 % (2 / 3 comps), h_spec 0.2 × median | same | 0.680 | 0.639 |
| finer partitions (bandwidth_factor 0.25), exact CS | oracle 0.89 / 0.88 | 0.699 | 0.659 |
| NJW (normalized spectral clustering) instead of KPCA, raw bands | degree-normalised cut | 0.675 | 0.689 |
| weighted GMM (full) on the KPCA embedding, initialised from its k-means | unequal cluster spreads | 0.699 | 0.643 |
| pixel-level GMM (diag) initialised from the MSSC clusters | per-cluster variances | 0.780 | 0.673 |
| 3×3 majority filter of the label map | abundances are smooth | 0.707 | 0.648 |
| 5×5 majority filter of the label map | same | 0.709 | 0.610 |

The majority filter cannot help: the argmax-abundance ground truth itself, 3×3-filtered, scores
only 0.918 / 0.817. The Gaussian partition affinities are ≈ the identity (mean-shift partitions
are tight relative to their distances), so stage two degenerates. Oracle check: labelling
each default partition by its majority class gives 0.812 / 0.879, so with raw bands the
partitions themselves cap Samson below 0.83.

Adopted (issue #6): bands to unit length per pixel (`band_norm='auto'`, non-negative bands;
pixel coordinates kept at [0, 0.25]) + h_spec = 0.5 × median distance + NJW. With unit-norm
spectra the default partitions' oracle is 0.90 (Samson). Neighbouring settings, all with
unit-norm spectra and coordinates kept (KPCA / NJW, seeds 0, 1, 2):

| h_spec (× median) | bandwidth_factor | Samson KPCA | Samson NJW | Jasper KPCA | Jasper NJW |
|---|---|---|---|---|---|
| 0.5 (adopted) | 0.5 | 0.838 / 0.833 / 0.844 | **0.858 / 0.858 / 0.858** | 0.710 / 0.698 / 0.697 | **0.748 / 0.731 / 0.743** |
| 0.707 | 0.5 | 0.857 / 0.849 / 0.851 | 0.826 / 0.828 / 0.825 | 0.709 / 0.700 / 0.698 | 0.745 / 0.730 / 0.741 |
| 1.0 | 0.5 | 0.864 / 0.851 / 0.859 | 0.796 / 0.786 / 0.789 | 0.733 / 0.704 / 0.741 | 0.721 / 0.721 / 0.738 |
| 0.5 | 0.35 | 0.856 / 0.854 / 0.861 | 0.872 / 0.880 / 0.876 | 0.706 / 0.700 / 0.697 | 0.729 / 0.735 / 0.737 |
| 0.707 | 0.35 | 0.876 / 0.869 / 0.868 | 0.840 / 0.849 / 0.842 | 0.709 / 0.701 / 0.697 | 0.751 / 0.744 / 0.750 |

(Scratch-harness numbers: NJW's k-means there used `random_state=seed` instead of the job's
derived seed; the job itself gives the table above.) Unit-norm spectra without the pixel
coordinates, NJW, h_spec 0.5: 0.829 / 0.686. KPCA at the old h_spec (20 %) with unit-norm
spectra: 0.528 / 0.638 (coordinates scaled with the spectral spread). Reproduce a cell with
`MSSC(..., sigma_fraction=f, embedding=e, bandwidth_factor=b, random_state=s)` on
`dkernel.meanshift.bands.apply_band_norm(X, n_bands, 'unit')`.
"""


SEED_SPREAD = """
Seed spread of the job itself (`dkernel run jobs/mssc-{samson,jasper}.yaml` with `seed:` 0–4, job
defaults of issue #6 otherwise, `bandwidth_factor` 0.5; issue 32's 0.4: see `mssc_defaults.md`): Samson NMI 0.858 / 0.858 / 0.858 / 0.866 / 0.862, Jasper Ridge 0.748 / 0.731 /
0.743 / 0.708 / 0.743 (ACC 0.965–0.968 / 0.726–0.753). The defaults were chosen while these two
scenes' scores were visible (the tables below), so they are a design choice checked on these
scenes, not an independent test; they are not tuned per scene."""

#: The ``mssc`` job defaults before issue #6's fix (raw bands, h_spec 20 %, KPCA).
PREVIOUS_DEFAULTS = {
    "band_norm": "none",
    "sigma_fraction": 0.2,
    "embedding": "kpca",
    "bandwidth_factor": 0.5,
}


def bench_scenes(quick: bool) -> None:
    from dkernel.io.raster import load_hyperspectral
    from dkernel.metrics import clustering_scores

    out = ["# Samson and Jasper Ridge: MSSC with the job defaults vs peers", ""]
    est, p = _job_estimator(3)
    shown = {
        k: p[k]
        for k in (
            "band_norm",
            "bandwidth_factor",
            "sigma_fraction",
            "embedding",
            "normalization",
            "seeds",
            "n_seeds",
            "density",
            "affinity",
            "path_radius",
        )
    }
    out.append(
        "Features: all bands (reflectance, unscaled) + pixel coordinates in [0, 0.25] "
        "(readers `samson` / `jasper` defaults). Ground truth: argmax of the abundances. "
        f"MSSC = `mssc` job defaults {shown}, seed 0: the job scales every pixel's band "
        "vector to unit length (`band_norm='auto'`: the bands are non-negative; spectral "
        f"angle, coordinates kept), h_ms = {p['bandwidth_factor']} × Silverman (Eq. 5.1) and "
        "h_spec = 50 % of the "
        "median distance on those features, normalized spectral clustering (NJW) of the "
        "partitions. Peers on the raw features (as before) and, marked 'unit spectra', on the "
        "job's features: k-means "
        "(n_init=10), GMM (diagonal covariances, 156/198-D), SpectralClustering (sklearn "
        "defaults except affinity='nearest_neighbors', the scalable choice; the default "
        "dense RBF with gamma=1 is added without --quick).\n"
    )
    from dkernel.meanshift.bands import apply_band_norm

    for scene, k in (("samson", 3), ("jasper", 4)):
        d = load_hyperspectral(scene, os.environ.get("DKERNEL_DATA"))
        X = np.asarray(d.X.compute(), dtype=np.float64)
        y = d.y
        rows = []
        variants = [("MSSC (job defaults)", 0, {}), ("MSSC (job defaults, seed 1)", 1, {})]
        variants.append(("MSSC (defaults before the #6 fix)", 0, PREVIOUS_DEFAULTS))
        for name, seed, change in variants:
            t = time.perf_counter()
            est, p = _job_estimator(k, seed)
            p = {**p, **change}
            # the estimator scales the bands (not the two coordinate columns) as the job does
            est.set_params(**change, n_bands=X.shape[1] - 2)
            lab = est.fit(X).labels_
            rows.append(
                (
                    name,
                    clustering_scores(y, lab),
                    time.perf_counter() - t,
                    f"{est.n_partitions_} partitions, h_ms={est.bandwidth_:.3g}, "
                    f"h_spec={est.sigma_:.3g}",
                )
            )
        X_unit = apply_band_norm(X, X.shape[1] - 2, "unit")
        peers = [(m, m, X) for m in ("k-means", "GMM (diag)", "SpectralClustering (kNN)")]
        peers += [
            ("k-means (unit spectra)", "k-means", X_unit),
            ("GMM (diag, unit spectra)", "GMM (diag)", X_unit),
        ]
        if not quick:
            peers.append(("SpectralClustering (rbf, defaults)", "rbf", X))
        for name, method, features in peers:
            t = time.perf_counter()
            try:
                labels = _peer(method, features, k)
                rows.append((name, clustering_scores(y, labels), time.perf_counter() - t, ""))
            except Exception as exc:  # record failures, do not hide them
                rows.append((name, None, time.perf_counter() - t, f"failed: {exc}"))
        out.append(f"## {scene} ({X.shape[0]} pixels × {X.shape[1]} features, k = {k})\n")
        out.append("| method | ACC | NMI | ARI | time s | note |")
        out.append("|---|---|---|---|---|---|")
        for name, sc, sec, note in rows:
            if sc is None:
                out.append(f"| {name} | – | – | – | {sec:.1f} | {note} |")
            else:
                out.append(
                    f"| {name} | {sc['acc']:.3f} | {sc['nmi']:.3f} | {sc['ari']:.3f} | "
                    f"{sec:.1f} | {note} |"
                )
        out.append("")
    out.append("Targets (issue #6): NMI ≥ 0.83 on Samson, ≥ 0.70 on Jasper Ridge.")
    out.append(SEED_SPREAD)
    out.append(TRIED_SCENES)
    _write("mssc_scenes.md", "\n".join(out) + "\n")


# ---------------------------------------------------------------------------------------
def bench_demo(quick: bool) -> None:
    import rioxarray

    from dkernel.io.raster import load_demo_landsat, package_data_path
    from dkernel.meanshift.estimators import MSSC

    out = ["# README demo: jobs/demo-landsat-mssc.yaml end to end", ""]
    tmp = Path(tempfile.mkdtemp(prefix="mssc-demo-"))
    store = tmp / "demo.zarr"
    env = {k: v for k, v in os.environ.items() if k != "DKERNEL_DATA"}
    cmd = [
        str(REPO / ".venv" / "bin" / "dkernel"),
        "run",
        "jobs/demo-landsat-mssc.yaml",
        "--output",
        str(store),
    ]
    t = time.perf_counter()
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t
    out.append(
        f"Command (DKERNEL_DATA unset): `{' '.join(cmd[1:])}` → exit {proc.returncode}, "
        f"**wall {wall:.1f} s** (fresh process, embedded LocalCluster, 2 cores).\n"
    )
    out.append(
        "```\n"
        + "\n".join(
            line
            for line in (proc.stdout + proc.stderr).splitlines()
            if "[dkernel]" in line and "Dask dashboard" not in line  # a new port each run
        )
        + "\n```\n"
    )
    src = rioxarray.open_rasterio(package_data_path("RGB.byte.tif"))
    tif = tmp / "demo.labels.tif"
    png = tmp / "demo.quicklook.png"
    lab = rioxarray.open_rasterio(tif)
    collar = ~(src.values != 0).any(axis=0)
    out.append(f"- label GeoTIFF CRS equal: {lab.rio.crs == src.rio.crs} ({lab.rio.crs})")
    out.append(f"- transform equal: {lab.rio.transform() == src.rio.transform()}")
    out.append(
        f"- nodata collar preserved: {bool((lab.values[0][collar] == lab.rio.nodata).all())} "
        f"({int(collar.sum())} collar pixels, nodata={lab.rio.nodata}); valid pixels "
        f"labelled: {bool((lab.values[0][~collar] != lab.rio.nodata).all())}"
    )
    out.append(f"- quick-look PNG written: {png.is_file()} ({png.stat().st_size} bytes)")

    # predict consistency on the demo pixels with the job defaults
    d = load_demo_landsat(scale="standardize", coord_scale=1.0)
    X = d.X.compute()
    est, _ = _job_estimator(5)
    t = time.perf_counter()
    est.fit(X)
    fit_s = time.perf_counter() - t
    idx = np.random.default_rng(0).choice(X.shape[0], 20000 if not quick else 5000, replace=False)
    same = float((est.predict(X[idx]) == est.labels_[idx]).mean())
    pure = MSSC(**{**est.get_params(), "path_radius": 0.0})
    # same fitted model, predict without the trajectory shortcut (run to convergence)
    pure.__dict__.update({k: v for k, v in est.__dict__.items() if k.endswith("_")})
    pure.path_radius = 0.0
    same_pure = float((pure.predict(X[idx]) == est.labels_[idx]).mean())
    out.append(
        f"- predict consistency on {idx.size} fitted pixels: {same:.4f} (same model, "
        f"trajectory shortcut as in fit); {same_pure:.4f} with every pixel run to "
        f"convergence (path_radius=0) — in-process fit {fit_s:.1f} s"
    )
    _write("mssc_demo.md", "\n".join(out) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", default="grid,toy,scenes,demo")
    args = ap.parse_args()
    for name in args.only.split(","):
        t = time.perf_counter()
        {"grid": bench_grid, "toy": bench_toy, "scenes": bench_scenes, "demo": bench_demo}[name](
            args.quick
        )
        print(f"[{name}] {time.perf_counter() - t:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
