"""Defaults that win: every clustering estimator at its defaults on a public suite, side by side.

The protocol is what a new user does: standardise the features (``StandardScaler``), pass only
``n_clusters`` (the number of true classes) and a seed, keep every other default. dkernel's
estimators run next to scikit-learn's KMeans, GaussianMixture, SpectralClustering with the RBF
and the k-NN affinity, and HDBSCAN — each at *its* defaults (HDBSCAN chooses its own number of
clusters; its noise label −1 counts as one more cluster). The score is the adjusted Rand index
against the ground truth; the table gives one ARI per dataset × method, the mean over datasets
and the mean rank (1 = best on a dataset, ties averaged). MSSC, a method for image pixels, runs on
the pixel sets only (its mean is over those). For the dkernel estimators with
``predict`` the agreement of ``predict(X_train)`` with ``labels_`` is recorded as well.

The suite (≥ 20 sets): the five synthetic shapes of issue 15 (two moons, two circles, three
concentric rings with equal counts — so the inner ring is denser —, blobs with spreads
0.3/1.5/0.8, anisotropic blobs), every SIPU 2-D shape, iris, wine, breast cancer, digits, UCI
Ecoli, Wisconsin original, Statlog Landsat, Samson and Jasper Ridge pixels, and the BSDS500
sample photo as pixels with position (RGB + x, y; k = 8; ARI against each human segmentation,
averaged). Sets larger than ``--max-n`` are subsampled uniformly with a fixed seed (the photo is
taken on a regular grid instead), so that the dense peers finish on this 2-core machine.
Sets under ``$DKERNEL_DATA`` (default ``../shared/data``) are skipped when it is absent.

Usage::

    python benchmarks/bench_defaults.py [--only-datasets a,b] [--only-methods x,y]
        [--seeds 0 1] [--max-n 2000] [--timeout 300] [--out benchmarks/results/defaults]
        [--update]

``--update`` keeps the rows of ``--out``'s CSV for the methods not run this time and rewrites
the table from both, so one re-chosen default is re-measured without rerunning every peer.
"""

from __future__ import annotations

import argparse
import csv
import os
import signal
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
from scipy.stats import rankdata
from sklearn import cluster, datasets, mixture
from sklearn.metrics import adjusted_rand_score
from sklearn.preprocessing import StandardScaler

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
SIPU = ["jain", "Aggregation", "Compound", "pathbased", "spiral", "flame", "R15", "D31"]


def data_dir() -> Path:
    return Path(os.environ.get("DKERNEL_DATA", ROOT.parent / "shared" / "data"))


# -- datasets --------------------------------------------------------------------------------
def _rings(n: int = 2000, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(3), n // 3 + 1)[:n]
    r = 1.0 + y + rng.normal(0, 0.1, n)
    t = rng.uniform(0, 2 * np.pi, n)
    return np.c_[r * np.cos(t), r * np.sin(t)], y


def _aniso() -> tuple[np.ndarray, np.ndarray]:
    X, y = datasets.make_blobs(2000, random_state=170)
    return X @ np.array([[0.6, -0.6], [-0.4, 0.8]]), y


def _table(loader: str) -> Callable[[], tuple[np.ndarray, np.ndarray]]:
    def load():
        from dkernel.io import tables

        kwargs = {"split": "train"} if loader == "load_statlog_landsat" else {}
        d = getattr(tables, loader)(data_dir(), **kwargs)
        X, y = np.asarray(d.X, dtype=np.float64), np.asarray(d.y)
        ok = np.all(np.isfinite(X), axis=1)  # Wisconsin's 16 missing values: complete rows
        return X[ok], y[ok]

    return load


def _cube(name: str) -> Callable[[], tuple[np.ndarray, np.ndarray]]:
    def load():
        from dkernel.io import hyperspectral

        cube, labels = getattr(hyperspectral, f"load_{name}")(
            data_dir() / "hyperspectral_unmixing_samson_jasper"
        )
        return cube.reshape(-1, cube.shape[-1]).astype(np.float64), labels.ravel()

    return load


def _shape(name: str) -> Callable[[], tuple[np.ndarray, np.ndarray]]:
    def load():
        from dkernel.io.shapes import load_shapes

        d = load_shapes(name, data_dir() / "shapes_2d_sipu")
        return np.asarray(d.X, dtype=np.float64), np.asarray(d.y)

    return load


def _bsds(max_n: int) -> tuple[np.ndarray, list[np.ndarray]]:
    from matplotlib.image import imread
    from scipy.io import loadmat

    folder = data_dir() / "bsds500_samples"
    img = np.asarray(imread(folder / "3063.jpg"), dtype=np.float64)
    truth = loadmat(folder / "3063_groundTruth.mat")["groundTruth"][0]
    h, w = img.shape[:2]
    step = max(1, int(np.ceil(np.sqrt(h * w / max_n))))
    rows, cols = np.mgrid[0:h:step, 0:w:step]
    X = np.c_[img[rows, cols].reshape(-1, 3), rows.ravel(), cols.ravel()]
    ys = [np.asarray(t["Segmentation"][0, 0])[rows, cols].ravel() for t in truth]
    return X, ys


DATASETS: dict[str, tuple[Callable[[], tuple[np.ndarray, np.ndarray]], bool]] = {
    "moons": (lambda: datasets.make_moons(2000, noise=0.07, random_state=0), False),
    "circles": (
        lambda: datasets.make_circles(2000, factor=0.5, noise=0.05, random_state=0),
        False,
    ),
    "rings3": (_rings, False),
    "varied": (
        lambda: datasets.make_blobs(2000, cluster_std=[0.3, 1.5, 0.8], random_state=170),
        False,
    ),
    "aniso": (_aniso, False),
    **{name: (_shape(name), True) for name in SIPU},
    "iris": (lambda: datasets.load_iris(return_X_y=True), False),
    "wine": (lambda: datasets.load_wine(return_X_y=True), False),
    "breast_cancer": (lambda: datasets.load_breast_cancer(return_X_y=True), False),
    "digits": (lambda: datasets.load_digits(return_X_y=True), False),
    "ecoli": (_table("load_ecoli"), True),
    "wisconsin": (_table("load_wisconsin"), True),
    "statlog": (_table("load_statlog_landsat"), True),
    "samson": (_cube("samson"), True),
    "jasper": (_cube("jasper"), True),
    "bsds3063": (None, True),  # loaded by _bsds (several ground truths)
}
N_CLUSTERS_BSDS = 8
#: MSSC clusters image pixels (mean shift over the bands and position): it runs on these only.
PIXEL_SETS = {"samson", "jasper", "bsds3063"}


def load_dataset(name: str, max_n: int) -> tuple[np.ndarray, list[np.ndarray], int]:
    """Standardised X, the ground truth(s) and the number of clusters."""
    if name == "bsds3063":
        X, ys = _bsds(max_n)
        return StandardScaler().fit_transform(X), ys, N_CLUSTERS_BSDS
    X, y = DATASETS[name][0]()
    X, y = np.asarray(X, dtype=np.float64), np.asarray(y)
    if X.shape[0] > max_n:
        idx = np.sort(np.random.default_rng(0).choice(X.shape[0], max_n, replace=False))
        X, y = X[idx], y[idx]
    return StandardScaler().fit_transform(X), [y], int(np.unique(y).size)


# -- methods ---------------------------------------------------------------------------------
def _pck_labels(X: np.ndarray, k: int, seed: int) -> tuple[np.ndarray, None]:
    from dkernel import ProbabilisticClusterKernel
    from dkernel.linalg.kmeans import euclidean_kmeans
    from dkernel.spectral.feature_map import feature_map_kpca

    # what the pck-spectral job does at its defaults: Γ → KPCA → k-means (100 restarts)
    pck = ProbabilisticClusterKernel(random_state=seed).fit(X)
    emb = feature_map_kpca(np.asarray(pck.transform(X)), k, random_state=seed)
    labels, _, _ = euclidean_kmeans(emb.embedding, k, n_init=100, random_state=seed)
    return labels, None


def _fit(est, X: np.ndarray) -> tuple[np.ndarray, float | None]:
    est.fit(X)
    labels = np.asarray(est.labels_)
    agree = None
    if hasattr(est, "predict"):
        try:
            agree = float(np.mean(np.asarray(est.predict(X)) == labels))
        except Exception:  # noqa: BLE001 - an estimator whose predict needs more than X
            agree = None
    return labels, agree


def _dk(name: str) -> Callable[[np.ndarray, int, int], tuple[np.ndarray, float | None]]:
    def run(X, k, seed):
        import dkernel

        cls = getattr(dkernel, name)
        if name in ("KernelPCAEmbedding", "KECA"):
            est = cls(n_clusters=k, random_state=seed)
        elif name == "JointRankingClustering":
            est = cls(n_clusters=k, random_state=seed)
        else:
            est = cls(k, random_state=seed)
        return _fit(est, X)

    return run


def _sk(make: Callable[[int, int], object]):
    def run(X, k, seed):
        est = make(k, seed)
        if isinstance(est, mixture.GaussianMixture):
            return est.fit(X).predict(X), None
        return np.asarray(est.fit(X).labels_), None

    return run


METHODS: dict[str, Callable[[np.ndarray, int, int], tuple[np.ndarray, float | None]]] = {
    "dk.SpectralClustering": _dk("SpectralClustering"),
    "dk.KernelDecomposition": _dk("KernelDecompositionClustering"),
    "dk.JointRankingClustering": _dk("JointRankingClustering"),
    "dk.KPCA": _dk("KernelPCAEmbedding"),
    "dk.KECA": _dk("KECA"),
    "dk.PCK": _pck_labels,
    "dk.MSSC": _dk("MSSC"),
    "sk.KMeans": _sk(lambda k, s: cluster.KMeans(k, random_state=s)),
    "sk.GMM": _sk(lambda k, s: mixture.GaussianMixture(k, random_state=s)),
    "sk.Spectral-rbf": _sk(lambda k, s: cluster.SpectralClustering(k, random_state=s)),
    "sk.Spectral-knn": _sk(
        lambda k, s: cluster.SpectralClustering(k, affinity="nearest_neighbors", random_state=s)
    ),
    "sk.HDBSCAN": _sk(lambda k, s: cluster.HDBSCAN()),
}


class _Timeout(Exception):
    pass


def _alarm(signum, frame):
    raise _Timeout


def run_cell(method: str, X, ys, k, seed, timeout: float) -> dict:
    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(int(timeout))
    t = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            labels, agree = METHODS[method](X, k, seed)
        ari = float(np.mean([adjusted_rand_score(y, labels) for y in ys]))
        return {"ari": ari, "predict_agreement": agree, "status": "ok"} | {
            "seconds": time.perf_counter() - t
        }
    except _Timeout:
        return {"ari": None, "status": f"timeout > {timeout:.0f} s", "seconds": timeout}
    except Exception as exc:  # noqa: BLE001 - recorded in the table, the run goes on
        msg = f"{type(exc).__name__}: {exc}".replace("\n", " ")[:160]
        return {"ari": None, "status": f"error: {msg}", "seconds": time.perf_counter() - t}
    finally:
        signal.alarm(0)


def summarise(rows: list[dict], methods: list[str], names: list[str]) -> tuple[dict, dict]:
    """Mean ARI and mean rank per method (a failed cell counts as ARI 0 and ranks last)."""
    table = {(r["dataset"], r["method"]): r for r in rows}
    means, ranks = {}, {m: [] for m in methods}
    for m in methods:
        vals = [table[(d, m)]["ari_mean"] or 0.0 for d in names if (d, m) in table]
        means[m] = float(np.mean(vals)) if vals else float("nan")
    for d in names:
        present = [m for m in methods if (d, m) in table]
        vals = [-(table[(d, m)]["ari_mean"] or -1.0) for m in present]
        for m, r in zip(present, rankdata(vals), strict=True):
            ranks[m].append(float(r))
    return means, {m: float(np.mean(v)) for m, v in ranks.items()}


def write_markdown(path: Path, rows, methods, names, args) -> str:
    means, ranks = summarise(rows, methods, names)
    table = {(r["dataset"], r["method"]): r for r in rows}
    short = [m.split(".", 1)[1] for m in methods]
    lines = [
        "# Clustering at defaults: dkernel vs scikit-learn (`benchmarks/bench_defaults.py`)",
        "",
        f"`python benchmarks/bench_defaults.py --seeds {' '.join(map(str, args.seeds))} "
        f"--max-n {args.max_n}`; ARI (mean over seeds; BSDS: mean over the human "
        "segmentations). Features standardised, only `n_clusters` given. `dk.*` are dkernel, "
        "`sk.*` scikit-learn. A failed or timed-out cell is shown as such and counts as 0 in "
        "the mean and last in the rank.",
        "",
        "| dataset | n | k | " + " | ".join(short) + " |",
        "|---|---|---|" + "---|" * len(methods),
    ]
    for d in names:
        first = next(r for r in rows if r["dataset"] == d)
        cells = []
        for m in methods:
            r = table.get((d, m))
            if r is None:
                cells.append("")
            elif r["ari_mean"] is None:
                cells.append(r["status"].split(":")[0])
            else:
                cells.append(f"{r['ari_mean']:.3f}")
        lines.append(f"| {d} | {first['n']} | {first['k']} | " + " | ".join(cells) + " |")
    lines.append(
        "| **mean ARI** | | | " + " | ".join(f"**{means[m]:.3f}**" for m in methods) + " |"
    )
    lines.append("| **mean rank** | | | " + " | ".join(f"{ranks[m]:.2f}" for m in methods) + " |")
    failures = [r for r in rows if r["status"] != "ok"]
    if failures:
        lines += ["", "Failed cells:", ""]
        lines += [f"- {r['dataset']} / {r['method']}: {r['status']}" for r in failures]
    agree = [r for r in rows if r.get("predict_agreement") is not None]
    if agree:
        worst = min(agree, key=lambda r: r["predict_agreement"])
        lines += [
            "",
            f"`predict(X_train)` agrees with `labels_` on ≥ {worst['predict_agreement']:.3f} "
            f"of the points in every dkernel cell that has `predict` (lowest: {worst['dataset']}"
            f" / {worst['method']}).",
        ]
    text = "\n".join(lines) + "\n"
    path.write_text(text)
    return text


def read_rows(path: Path) -> list[dict]:
    """The rows of a results CSV written by :func:`main`, with numbers parsed back."""

    def num(v: str, cast=float):
        return None if v in ("", "None") else cast(v)

    with open(path, newline="") as fh:
        return [
            r
            | {
                "n": int(r["n"]),
                "k": int(r["k"]),
                "ari_mean": num(r["ari_mean"]),
                "predict_agreement": num(r["predict_agreement"]),
                "seconds": float(r["seconds"]),
            }
            for r in csv.DictReader(fh)
        ]


def merge_rows(old: list[dict], new: list[dict]) -> list[dict]:
    """``old`` with every (dataset, method) cell that ``new`` measured replaced."""
    fresh = {(r["dataset"], r["method"]): r for r in new}
    kept = [r for r in old if (r["dataset"], r["method"]) not in fresh]
    return kept + new


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only-datasets", default="", help="comma-separated dataset names")
    ap.add_argument("--only-methods", default="", help="comma-separated method names")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--max-n", type=int, default=2000, help="subsample larger sets to this")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per cell")
    ap.add_argument("--out", default=str(RESULTS / "defaults"), help="path without suffix")
    ap.add_argument(
        "--update",
        action="store_true",
        help="replace only the rows of the methods run in --out's existing table",
    )
    args = ap.parse_args()
    names = [d for d in DATASETS if not args.only_datasets or d in args.only_datasets.split(",")]
    methods = [m for m in METHODS if not args.only_methods or m in args.only_methods.split(",")]
    have_data = data_dir().exists()
    rows = []
    for d in names:
        if DATASETS[d][1] and not have_data:
            print(f"skip {d}: no datasets at {data_dir()} (set DKERNEL_DATA)", file=sys.stderr)
            continue
        X, ys, k = load_dataset(d, args.max_n)
        for m in methods:
            if m == "dk.MSSC" and d not in PIXEL_SETS:
                continue
            cells = [run_cell(m, X, ys, k, s, args.timeout) for s in args.seeds]
            aris = [c["ari"] for c in cells if c["ari"] is not None]
            agrees = [
                c["predict_agreement"] for c in cells if c.get("predict_agreement") is not None
            ]
            row = {
                "dataset": d,
                "method": m,
                "n": X.shape[0],
                "k": k,
                "ari_mean": float(np.mean(aris)) if len(aris) == len(cells) else None,
                "ari_per_seed": " ".join(f"{a:.4f}" for a in aris),
                "predict_agreement": min(agrees) if agrees else None,
                "seconds": float(np.mean([c["seconds"] for c in cells])),
                "status": next((c["status"] for c in cells if c["status"] != "ok"), "ok"),
            }
            rows.append(row)
            shown = "—" if row["ari_mean"] is None else f"{row['ari_mean']:.3f}"
            print(
                f"{d:14s} {m:28s} ARI {shown:>6s} {row['seconds']:6.1f} s {row['status']}",
                file=sys.stderr,
                flush=True,
            )
    out = Path(args.out)
    if args.update and out.with_suffix(".csv").exists():
        rows = merge_rows(read_rows(out.with_suffix(".csv")), rows)
        names = [d for d in DATASETS if any(r["dataset"] == d for r in rows)]
        methods = [m for m in METHODS if any(r["method"] == m for r in rows)]
    names = [d for d in names if any(r["dataset"] == d for r in rows)]
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out.with_suffix(".csv"), "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    print(write_markdown(out.with_suffix(".md"), rows, methods, names, args))


if __name__ == "__main__":
    main()
