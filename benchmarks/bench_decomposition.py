"""Model selection of the aggregate Markov model by held-out likelihood, as in its paper.

Reproduces the two synthetic analyses of Szymkowiak-Have, Girolami & Larsen (2006), Fig. 2 and 5
[SzymkowiakHave2006]:

* ``gaussian``: five spherical 2-D Gaussian clusters scaled to [0, 1]; 500 training points
  (fresh draw per repeat), 2 500 validation points (one fixed draw), 20 repeats. Paper:
  error-vs-h minimum at h = 0.06; error-vs-C minimal for every C <= 5, C = 5 chosen.
* ``rings``: three rings of radii 3, 5 and 8 around the origin scaled to [0, 1]; 600 training
  / 3 000 validation points, 40 repeats. Paper: minimum at h = 0.065, C = 3 (2 nearly as
  good), posteriors 0/1.

Ring generator (the paper gives only the radii): points uniform on the union of the three
circles, i.e. ring c is drawn with probability proportional to its circumference (3 : 5 : 8),
so all rings have the same density along the curve, with Gaussian radial noise of standard
deviation ``RING_NOISE`` = 0.15 (raw units). With *equally many* points per ring the outer
ring is 8/3 times sparser than the inner one: its mean spacing (0.25 raw units at 200 points)
exceeds the likelihood-optimal width (about 0.2 raw units), it breaks into fragments, and
then neither the factorisation finds the rings reliably nor does Eq. 14 separate C = 3 from
C = 4, 5 (measured over 40 repeats: accuracy at C = 3 0.89, min 0.52; C = 5 chosen).

For each: the generalization error (negative mean held-out log-likelihood, Eq. 11-14) on a
grid of h (averaged over C, as in the paper's left panels) and over C at the chosen h (right
panels), mean ± standard error over repeats; the chosen model; held-out accuracy and the mean
max-posterior at the chosen model. Baseline for context: scikit-learn's KernelDensity
(a plain Parzen estimate, i.e. the C = N limit) on the same validation set and widths.

Usage::

    python benchmarks/bench_decomposition.py [--quick] [--only gaussian|rings]

Writes ``benchmarks/results/decomposition_<experiment>.json`` and ``.md`` (full runs only).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
from sklearn.neighbors import KernelDensity
from threadpoolctl import threadpool_limits

from dkernel.decomposition.selection import select_model

RESULTS = Path(__file__).resolve().parent / "results"

# 5 spherical clusters (before scaling): centres and a common standard deviation.
GAUSS_CENTRES = np.array([[0.0, 0.0], [4.0, 0.0], [0.0, 4.0], [4.0, 4.0], [2.0, 2.0]])
GAUSS_STD = 0.5
RING_RADII = (3.0, 5.0, 8.0)
RING_NOISE = 0.15


def gaussian_clusters(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """n points from 5 equally likely spherical Gaussians (raw coordinates) and labels."""
    y = rng.integers(0, len(GAUSS_CENTRES), size=n)
    X = GAUSS_CENTRES[y] + GAUSS_STD * rng.standard_normal((n, 2))
    return X, y


def rings(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """n points on three noisy rings centred at the origin, and labels.

    Uniform on the union of the circles (ring probability proportional to its radius), with
    Gaussian radial noise ``RING_NOISE`` (module docstring).
    """
    radii = np.asarray(RING_RADII)
    y = rng.choice(len(RING_RADII), size=n, p=radii / radii.sum())
    theta = rng.uniform(0, 2 * np.pi, size=n)
    r = np.asarray(RING_RADII)[y] + RING_NOISE * rng.standard_normal(n)
    return np.column_stack([r * np.cos(theta), r * np.sin(theta)]), y


EXPERIMENTS = {
    "gaussian": dict(
        make=gaussian_clusters,
        n_train=500,
        n_val=2500,
        n_repeats=20,
        true_c=5,
        sigmas=[0.02, 0.03, 0.04, 0.05, 0.06, 0.08, 0.11],
        n_clusters=[1, 2, 3, 4, 5, 6, 7],
        paper_h=0.06,
        paper_c="5 (all C <= 5 minimal)",
        data=(
            f"5 equally likely spherical Gaussians, sd {GAUSS_STD}, centres "
            f"{GAUSS_CENTRES.tolist()}; min-max scaled to [0, 1] with the validation set's range"
        ),
    ),
    "rings": dict(
        make=rings,
        n_train=600,
        n_val=3000,
        n_repeats=40,
        true_c=3,
        sigmas=[0.0075, 0.01, 0.0125, 0.015, 0.02, 0.03, 0.045, 0.065],
        n_clusters=[1, 2, 3, 4, 5],
        paper_h=0.065,
        paper_c="3 (2 nearly as good)",
        data=(
            "rings of radii 3, 5, 8; ring drawn with probability proportional to its radius "
            f"(uniform along the curves); Gaussian radial noise sd {RING_NOISE} (raw units); "
            "min-max scaled to [0, 1] with the validation set's range"
        ),
    ),
}


def make_splits(exp: dict, n_repeats: int, seed: int = 0):
    """Fixed validation set + a fresh training set per repeat, all scaled with the same map
    (min-max of the validation set to [0, 1] per feature)."""
    rng = np.random.default_rng(seed)
    X_val, y_val = exp["make"](exp["n_val"], rng)
    lo, hi = X_val.min(axis=0), X_val.max(axis=0)

    def scale(X):
        return (X - lo) / (hi - lo)

    splits = []
    for r in range(n_repeats):
        X_tr, _ = exp["make"](exp["n_train"], np.random.default_rng([seed, r + 1]))
        splits.append((scale(X_tr), scale(X_val), y_val))
    return splits


def parzen_error(splits, bandwidths) -> tuple[np.ndarray, np.ndarray]:
    """Held-out negative log-likelihood of scikit-learn's KernelDensity (Gaussian), per h."""
    errs = np.array(
        [
            [-KernelDensity(bandwidth=h).fit(tr).score_samples(va).mean() for h in bandwidths]
            for tr, va, _ in splits
        ]
    )
    return errs.mean(axis=0), errs.std(axis=0, ddof=1) / np.sqrt(len(splits))


def interior(idx: int, n: int) -> bool:
    return 0 < idx < n - 1


def run(name: str, quick: bool) -> dict:
    exp = EXPERIMENTS[name]
    n_repeats = 3 if quick else exp["n_repeats"]
    splits = make_splits(exp, n_repeats)
    t0 = time.perf_counter()
    res = select_model(
        splits=splits,
        sigmas=exp["sigmas"],
        n_clusters=exp["n_clusters"],
        n_init=2,
        max_iter=200,
        tol=1e-5,
        random_state=0,
    )
    seconds = time.perf_counter() - t0
    hm, hs = res.error_vs_sigma()
    hm, hs = hm[0], hs[0]
    cm, cs = res.error_vs_clusters()
    k, h, c = (
        res.chosen["neighbors_index"],
        res.chosen["sigma_index"],
        res.chosen["clusters_index"],
    )
    true_ci = exp["n_clusters"].index(exp["true_c"])
    acc_chosen = res.accuracy[:, k, h, c]
    acc_true = res.accuracy[:, k, h, true_ci]
    conf_chosen = res.confidence[:, k, h, c]
    t1 = time.perf_counter()
    pm, ps = parzen_error(splits, exp["sigmas"])
    parzen_s = time.perf_counter() - t1
    dm, ds = res.paired_difference_vs_clusters()
    tied = [exp["n_clusters"][i] for i in np.flatnonzero(dm <= ds)]
    out = {
        "experiment": name,
        "data": exp["data"],
        "n_train": exp["n_train"],
        "n_val": exp["n_val"],
        "n_repeats": n_repeats,
        "bandwidths": exp["sigmas"],
        "n_clusters": exp["n_clusters"],
        "error_vs_h_mean": hm.tolist(),
        "error_vs_h_sem": hs.tolist(),
        "h_min": exp["sigmas"][int(np.argmin(hm))],
        "h_min_interior": interior(int(np.argmin(hm)), len(hm)),
        "paper_h": exp["paper_h"],
        "error_vs_c_mean": cm.tolist(),
        "error_vs_c_sem": cs.tolist(),
        "paired_diff_vs_c_mean": dm.tolist(),
        "paired_diff_vs_c_sem": ds.tolist(),
        "c_within_one_se_of_min": tied,
        "chosen": {k_: v for k_, v in res.chosen.items() if not k_.endswith("index")},
        "paper_c": exp["paper_c"],
        "accuracy_vs_c_mean": res.accuracy[:, k, h, :].mean(axis=0).tolist(),
        "accuracy_chosen_mean": float(acc_chosen.mean()),
        "accuracy_chosen_min": float(acc_chosen.min()),
        "accuracy_true_c_mean": float(acc_true.mean()),
        "accuracy_true_c_min": float(acc_true.min()),
        "mean_max_posterior_chosen": float(conf_chosen.mean()),
        "parzen_sklearn_error_vs_h_mean": pm.tolist(),
        "parzen_sklearn_h_min": exp["sigmas"][int(np.argmin(pm))],
        "seconds_select_model": round(seconds, 1),
        "seconds_parzen_sklearn": round(parzen_s, 1),
        "fits": int(np.prod(res.errors.shape)),
    }
    return out


def to_markdown(r: dict) -> str:
    lines = [
        f"# decomposition: {r['experiment']} ([SzymkowiakHave2006])",
        "",
        f"{r['n_train']} training points per repeat, {r['n_val']} validation points, "
        f"{r['n_repeats']} repeats; {r['fits']} fits in {r['seconds_select_model']} s.",
        "",
        *([f"Data: {r['data']}.", ""] if "data" in r else []),
        "## Generalization error vs h (mean over C; ± SE over repeats)",
        "",
        "| h | error (aggregate Markov) | ± SE | Parzen (sklearn KernelDensity) |",
        "|---|---|---|---|",
    ]
    for h, m, s, p in zip(
        r["bandwidths"],
        r["error_vs_h_mean"],
        r["error_vs_h_sem"],
        r["parzen_sklearn_error_vs_h_mean"],
        strict=True,
    ):
        lines.append(f"| {h:g} | {m:.4f} | {s:.4f} | {p:.4f} |")
    lines += [
        "",
        f"Minimum at h = {r['h_min']:g} (interior: {r['h_min_interior']}); "
        f"paper: h = {r['paper_h']:g}. Parzen minimum at h = {r['parzen_sklearn_h_min']:g}.",
        "",
        f"## Generalization error vs C at h = {r['chosen']['sigma']:g}",
        "",
        "| C | error | ± SE | error − error(C_min), paired | ± SE (paired) | held-out accuracy |",
        "|---|---|---|---|---|---|",
    ]
    rows = zip(
        r["n_clusters"],
        r["error_vs_c_mean"],
        r["error_vs_c_sem"],
        r["paired_diff_vs_c_mean"],
        r["paired_diff_vs_c_sem"],
        r["accuracy_vs_c_mean"],
        strict=True,
    )
    for c, m, s, d, ds, a in rows:
        lines.append(f"| {c} | {m:.4f} | {s:.4f} | {d:.2e} | {ds:.2e} | {a:.4f} |")
    lines += [
        "",
        f"C within one paired SE of the minimum: {r['c_within_one_se_of_min']}; chosen "
        f"C = {r['chosen']['n_clusters']} (largest such); paper: {r['paper_c']}.",
        "",
        f"Held-out accuracy at the chosen model: mean {r['accuracy_chosen_mean']:.4f}, "
        f"min {r['accuracy_chosen_min']:.4f} over repeats; at the true C: mean "
        f"{r['accuracy_true_c_mean']:.4f}, min {r['accuracy_true_c_min']:.4f}. "
        f"Mean max posterior at the chosen model: {r['mean_max_posterior_chosen']:.4f}.",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="3 repeats, results not written")
    ap.add_argument("--only", choices=sorted(EXPERIMENTS), default=None)
    ap.add_argument(
        "--render",
        action="store_true",
        help="only rewrite the .md tables from the stored .json results",
    )
    args = ap.parse_args()
    if args.render:
        for name in [args.only] if args.only else list(EXPERIMENTS):
            r = json.loads((RESULTS / f"decomposition_{name}.json").read_text())
            (RESULTS / f"decomposition_{name}.md").write_text(to_markdown(r))
            print(to_markdown(r))
        return
    threadpool_limits(1)  # one BLAS thread: the grid is many small problems
    for name in [args.only] if args.only else list(EXPERIMENTS):
        r = run(name, args.quick)
        md = to_markdown(r)
        print(md)
        if not args.quick:
            RESULTS.mkdir(exist_ok=True)
            (RESULTS / f"decomposition_{name}.json").write_text(json.dumps(r, indent=1) + "\n")
            (RESULTS / f"decomposition_{name}.md").write_text(md)


if __name__ == "__main__":
    main()
