"""Defaults that win: every clustering estimator at its defaults on a public suite, side by side.

The protocol is what a new user does: standardise the features (``StandardScaler``), pass only
``n_clusters`` (the number of true classes) and a seed, keep every other default. dkernel's
estimators run next to scikit-learn's KMeans, GaussianMixture, SpectralClustering with the RBF
and the k-NN affinity, and HDBSCAN — each at *its* defaults (HDBSCAN and dkernel's
``MeanShift`` choose their own number of clusters; HDBSCAN's noise label −1 counts as one more
cluster). The score is the adjusted Rand index
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

Scaling mode (``--sizes``)
--------------------------
``--sizes 2e3 2e4 2e5 1e6`` runs the same protocol (standardised features, only ``n_clusters``
and a seed) against N instead of the 2 000-point suite. Synthetic families, a fresh draw of N
points at every size (seed 0): ``moons`` (noise 0.07), ``circles`` (factor 0.5, noise 0.05),
``rings3`` (equal counts on radii 1, 2, 3, noise 0.1: the inner ring is the densest),
``varied`` (blobs with spreads 0.3/1.5/0.8), ``aniso`` (blobs sheared by [[0.6, −0.6],
[−0.4, 0.8]]), ``blobs10d`` (5 blobs in 10-D) and ``moons_noise3`` (the moons plus 3 features
uniform over the moons' range: after standardising, 3 of 5 equal-variance dimensions are pure
noise). Real labelled sets run once at their full size (skipped, with the reason printed, when
``$DKERNEL_DATA`` is absent): ``statlog`` (Statlog Landsat train + test, 6 435 × 36),
``samson`` (95 × 95 pixels × 156 bands) and ``jasper`` (100 × 100 × 198), labels the argmax of
the abundances.

Methods, each at its defaults: dkernel ``SpectralClustering`` and
``KernelDecompositionClustering`` (their ``approximation_`` — exact / bipartite / nystrom — is
recorded, and the agreement of ``predict(X)`` with ``labels_``), scikit-learn
``SpectralClustering(affinity='nearest_neighbors')`` (under an address-space limit of
``--mem-gib``, 8 GiB, set with ``RLIMIT_AS`` once the data are in), dask-ml
``SpectralClustering(n_clusters, random_state)`` (RBF, gamma 1, 100 Nyström components, no
persisted embedding) on a Dask array of eight row blocks (≥ 1 000 rows each; the threaded
scheduler), scikit-learn ``KMeans`` and ``MiniBatchKMeans``. dkernel gets the NumPy array.

Every (method, dataset, N) cell runs in a fresh subprocess killed after ``--timeout`` seconds
(600 by default; the limit covers data generation, fit and predict). Recorded: the wall time of
``fit`` (labels included; imports and data generation excluded), the ARI, the peak RSS of the
child (``ru_maxrss`` from ``wait4``, data included) and a status: ``ok``, ``timeout``,
``memory`` (MemoryError, ``bad_alloc`` or killed by SIGKILL), ``error`` (message kept) or
``skipped`` — once a method times out or runs out of memory on a family, its larger N are not
run (``--no-skip-larger`` runs them anyway). The CSV is rewritten after every cell;
``--resume`` keeps it and runs only the missing cells, ``--update`` reruns the selected cells
and keeps the rest. Outputs: ``--out`` (``benchmarks/results/defaults_sizes``) ``.csv`` and
``.md`` (dataset × N rows with ARI, fit time and dkernel's path per method; per-N geometric-mean
ratios of dkernel's default fit time to scikit-learn's k-NN spectral and to dask-ml's; the
largest peak RSS per method and N) and ``--plot`` (``docs/images/defaults_sizes.png``: ARI and
fit time against N per synthetic family and method; × marks a timeout)::

    python benchmarks/bench_defaults.py --sizes 2e3 2e4 2e5 1e6 [--timeout 600] [--mem-gib 8]
        [--only-datasets moons,rings3] [--only-methods sk.KMeans,...] [--resume | --update]

Chosen k (``--auto-k``)
-----------------------
``--auto-k`` runs ``benchmarks/bench_auto_k.py`` (``n_clusters='auto'`` against the true k and
the peers at 2·10³, 2·10⁴ and 2·10⁵ points; its docstring) with the arguments that follow::

    python benchmarks/bench_defaults.py --auto-k --sizes 2e3 2e4 2e5 --seeds 0 1 2
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import signal
import subprocess
import sys
import tempfile
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
# Synthetic generators take the number of points and a seed; the 2 000-point suite calls them
# with (2000, 0), the --sizes mode with (N, 0) for a fresh draw at every N.
def _moons(n: int = 2000, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    return datasets.make_moons(n, noise=0.07, random_state=seed)


def _circles(n: int = 2000, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    return datasets.make_circles(n, factor=0.5, noise=0.05, random_state=seed)


def _rings(n: int = 2000, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(3), n // 3 + 1)[:n]
    r = 1.0 + y + rng.normal(0, 0.1, n)
    t = rng.uniform(0, 2 * np.pi, n)
    return np.c_[r * np.cos(t), r * np.sin(t)], y


def _varied(n: int = 2000, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    return datasets.make_blobs(n, cluster_std=[0.3, 1.5, 0.8], random_state=170 + seed)


def _aniso(n: int = 2000, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    X, y = datasets.make_blobs(n, random_state=170 + seed)
    return X @ np.array([[0.6, -0.6], [-0.4, 0.8]]), y


def _blobs10d(n: int = 2000, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    return datasets.make_blobs(n, n_features=10, centers=5, random_state=seed)


def _moons_noise3(n: int = 2000, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Two moons (noise 0.07) plus 3 uniform noise features on the moons' own range (once
    standardised, 3 of the 5 unit-variance dimensions carry no cluster information)."""
    X, y = _moons(n, seed)
    noise = np.random.default_rng(seed + 1).uniform(X.min(), X.max(), (n, 3))
    return np.c_[X, noise], y


def _table(loader: str, split: str = "train") -> Callable[[], tuple[np.ndarray, np.ndarray]]:
    def load():
        from dkernel.io import tables

        kwargs = {"split": split} if loader == "load_statlog_landsat" else {}
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
    "moons": (_moons, False),
    "circles": (_circles, False),
    "rings3": (_rings, False),
    "varied": (_varied, False),
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
    from dkernel import PCKSpectralClustering

    # what the pck-spectral job does at its defaults: the estimator's
    model = PCKSpectralClustering(k, random_state=seed).fit(X)
    return np.asarray(model.labels_), None


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
        elif name == "MeanShift":  # its own number of clusters, as HDBSCAN
            est = cls()
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
    "dk.KernelKMeans": _dk("KernelKMeans"),
    "dk.MeanShift": _dk("MeanShift"),
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
        "segmentations). Features standardised, only `n_clusters` given (MeanShift and "
        "HDBSCAN: nothing). `dk.*` are dkernel, `sk.*` scikit-learn. A failed or timed-out cell is shown as such and counts as 0 in "
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


# -- --sizes mode: the same protocol from 2·10³ to 10⁶ points ---------------------------------
#: Synthetic families of the --sizes mode: a fresh draw of N points at every size (seed 0).
SIZED_FAMILIES: dict[str, Callable[[int, int], tuple[np.ndarray, np.ndarray]]] = {
    "moons": _moons,
    "circles": _circles,
    "rings3": _rings,
    "varied": _varied,
    "aniso": _aniso,
    "blobs10d": _blobs10d,
    "moons_noise3": _moons_noise3,
}
#: Real labelled sets of the --sizes mode, run once at their full size.
FULL_SETS: dict[str, Callable[[], tuple[np.ndarray, np.ndarray]]] = {
    "statlog": _table("load_statlog_landsat", split="all"),
    "samson": _cube("samson"),
    "jasper": _cube("jasper"),
}
#: Methods that run under the ``--mem-gib`` address-space limit (a dense or sparse N × N object).
MEM_LIMITED = {"sk.Spectral-knn"}
FAILED = ("timeout", "memory")


def load_sized(name: str, n: int, seed: int) -> tuple[np.ndarray, np.ndarray, int]:
    """Standardised X, labels and k of a synthetic family at N = n, or of a full real set."""
    X, y = SIZED_FAMILIES[name](n, seed) if name in SIZED_FAMILIES else FULL_SETS[name]()
    X, y = np.asarray(X, dtype=np.float64), np.asarray(y)
    return StandardScaler().fit_transform(X), y, int(np.unique(y).size)


def _dask_rows(n: int) -> int:
    """dask-ml's input: eight row blocks (at least 1 000 rows each), so both cores get work."""
    return max(1000, -(-n // 8))


def _sized_fit(method: str, X: np.ndarray, k: int, seed: int) -> Callable[[], tuple]:
    """``fit()`` of ``method`` at its defaults (``n_clusters`` and a seed only), returning the
    labels and the estimator (None for the peers); imports happen here, outside the timing."""
    if method.startswith("dk."):
        import dkernel

        cls = {
            "dk.SpectralClustering": dkernel.SpectralClustering,
            "dk.KernelDecomposition": dkernel.KernelDecompositionClustering,
        }[method]

        def fit_dk():
            est = cls(k, random_state=seed).fit(X)
            return np.asarray(est.labels_), est

        return fit_dk
    if method == "daskml.Spectral":
        import dask.array as da
        from dask_ml.cluster import SpectralClustering as DaskSpectral

        def fit_dask():
            Xd = da.from_array(X, chunks=(_dask_rows(X.shape[0]), X.shape[1]))
            labels = DaskSpectral(n_clusters=k, random_state=seed).fit(Xd).labels_
            return np.asarray(labels.compute() if hasattr(labels, "compute") else labels), None

        return fit_dask
    est = {
        "sk.Spectral-knn": lambda: cluster.SpectralClustering(
            k, affinity="nearest_neighbors", random_state=seed
        ),
        "sk.KMeans": lambda: cluster.KMeans(k, random_state=seed),
        "sk.MiniBatchKMeans": lambda: cluster.MiniBatchKMeans(k, random_state=seed),
    }[method]()
    return lambda: (np.asarray(est.fit(X).labels_), None)


SIZED_METHODS = [
    "dk.SpectralClustering",
    "dk.KernelDecomposition",
    "sk.Spectral-knn",
    "daskml.Spectral",
    "sk.KMeans",
    "sk.MiniBatchKMeans",
]


def sized_child(method: str, dataset: str, n: int, seed: int, mem_gib: float) -> dict:
    """One (method, dataset, N) cell, run inside its own process; a JSON-able result."""
    import resource

    out: dict = {}
    try:
        X, y, k = load_sized(dataset, n, seed)
        out |= {"n": X.shape[0], "d": X.shape[1], "k": k}
        out["data_rss_gib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fit = _sized_fit(method, X, k, seed)
            if method in MEM_LIMITED and mem_gib > 0:  # the data and imports are in already
                lim = int(mem_gib * 2**30)
                resource.setrlimit(resource.RLIMIT_AS, (lim, lim))
            t = time.perf_counter()
            labels, est = fit()
            out["fit_s"] = time.perf_counter() - t
            out["ari"] = float(adjusted_rand_score(y, labels))
            if est is not None:
                out["approximation"] = getattr(est, "approximation_", "exact")
                t = time.perf_counter()
                out["predict_agreement"] = float(np.mean(np.asarray(est.predict(X)) == labels))
                out["predict_s"] = time.perf_counter() - t
        out["status"] = "ok"
    except MemoryError as exc:
        out |= {"status": "memory", "detail": f"MemoryError: {exc}"[:200]}
    except Exception as exc:  # noqa: BLE001 - recorded in the table, the run goes on
        out |= {"status": "error", "detail": f"{type(exc).__name__}: {exc}"[:300]}
    return out


_MEMORY_MARKS = ("MemoryError", "bad_alloc", "Cannot allocate memory", "Unable to allocate")


def run_sized_cell(method: str, dataset: str, n: int, seed: int, args) -> dict:
    """Run one cell in a fresh subprocess under ``args.timeout``; its peak RSS from wait4."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--cell", method, dataset, str(n)]
    cmd += ["--seeds", str(seed), "--mem-gib", str(args.mem_gib)]
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        start = time.monotonic()
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, text=True)
        timed_out = False
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() - start > args.timeout:
                proc.kill()
                pid, status, usage = os.wait4(proc.pid, 0)
                timed_out = True
                break
            time.sleep(0.1)
        proc.returncode = os.waitstatus_to_exitcode(status)
        wall = time.monotonic() - start
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    row: dict = {"peak_rss_gib": usage.ru_maxrss / 2**20, "wall_s": wall}
    if timed_out:
        return row | {"status": "timeout", "detail": f"> {args.timeout:.0f} s (whole child)"}
    if proc.returncode == 0 and stdout.strip():
        try:
            return row | json.loads(stdout.strip().splitlines()[-1])
        except json.JSONDecodeError:
            pass
    last = (stderr.strip().splitlines() or [f"exit code {proc.returncode}"])[-1][-300:]
    if any(m in stderr for m in _MEMORY_MARKS) or proc.returncode == -signal.SIGKILL:
        return row | {"status": "memory", "detail": last}
    return row | {"status": "error", "detail": f"exit code {proc.returncode}: {last}"}


SIZED_FIELDS = [
    "dataset",
    "kind",
    "n",
    "d",
    "k",
    "method",
    "seed",
    "status",
    "ari",
    "fit_s",
    "approximation",
    "predict_agreement",
    "predict_s",
    "peak_rss_gib",
    "data_rss_gib",
    "wall_s",
    "timeout_s",
    "detail",
]


def read_sized(path: Path) -> list[dict]:
    """Rows of a --sizes CSV, numbers parsed back (empty cells become None)."""
    ints, floats = {"n", "d", "k", "seed"}, set(SIZED_FIELDS[8:17]) - {"approximation"}

    def parse(key: str, v: str):
        if v in ("", "None"):
            return None
        return int(v) if key in ints else float(v) if key in floats else v

    with open(path, newline="") as fh:
        return [{key: parse(key, v) for key, v in r.items()} for r in csv.DictReader(fh)]


def write_sized_csv(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".csv.tmp")
    with open(tmp, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=SIZED_FIELDS, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    tmp.replace(path)


def _gmean(v: list[float]) -> float:
    return float(np.exp(np.mean(np.log(v))))


def _fmt_s(r: dict) -> str:
    if r["status"] == "ok":
        return f"{r['fit_s']:.3g}"
    return f"> {r['timeout_s']:.0f}" if r["status"] == "timeout" else ""


def sized_markdown(rows: list[dict], methods: list[str], args) -> str:
    table = {(r["dataset"], r["n"], r["method"]): r for r in rows}
    keys = sorted(
        {(r["kind"], r["dataset"], r["n"], r["d"], r["k"]) for r in rows if r["n"] is not None},
        key=lambda t: (
            t[0] != "synthetic",
            list(SIZED_FAMILIES).index(t[1]) if t[1] in SIZED_FAMILIES else 0,
            t[1],
            t[2],
        ),
    )
    head, rule = ["dataset", "N", "d", "k"], ["---"] * 4
    for m in methods:
        head += [f"{m} ARI", "s"] + (["path"] if m.startswith("dk.") else [])
        rule += ["---", "---"] + (["---"] if m.startswith("dk.") else [])
    measured_sizes = sorted({r["n"] for r in rows if r["kind"] == "synthetic"} or args.sizes)
    sizes = " ".join(f"{s:.0e}".replace("e+0", "e") for s in measured_sizes)
    # the caps of this run, and those an earlier run's kept rows were skipped by (--update)
    cap_of = {
        r["method"]: float(r["detail"].rsplit(" ", 1)[1])
        for r in rows
        if r.get("status") == "skipped"
        and str(r.get("detail", "")).startswith("N > --method-max-n ")
        and "method" in r
    }
    cap_of.update(getattr(args, "method_max_n", {}))
    caps = "".join(f" {m}={v:.0e}".replace("e+0", "e") for m, v in cap_of.items())
    caps = f" --method-max-n{caps}" if caps else ""
    lines = [
        "# Clustering at defaults against N (`benchmarks/bench_defaults.py --sizes`)",
        "",
        f"`python benchmarks/bench_defaults.py --sizes {sizes} --timeout {args.timeout:.0f} "
        f"--mem-gib {args.mem_gib:g}{caps}`. Features standardised, only `n_clusters` and a seed "
        "given, every other parameter at its default; each cell a fresh process. ARI against "
        "the true labels; `s` is the wall time of `fit` (with the labels) in seconds; `path` is "
        "dkernel's `approximation_`. `timeout`: the cell's process passed the time limit; "
        "`memory`: it ran out of memory (scikit-learn's spectral clustering runs under an "
        f"address-space limit of {args.mem_gib:g} GiB); `skipped`: the same method timed out or "
        "ran out of memory on the same family at a smaller N. Synthetic families are fresh "
        "draws at each N (seed 0); real sets run once at their full size."
        + (
            f" Then `--update --sizes {' '.join(f'{s:.0e}'.replace('e+0', 'e') for s in args.sizes)}"
            f" --only-methods {args.only_methods}` re-measured that method's cells (the synthetic "
            "families at those N and the real sets); the other cells are the first run's."
            if args.update and args.only_methods
            else ""
        ),
        "",
        "| " + " | ".join(head) + " |",
        "|" + "|".join(rule) + "|",
    ]
    for _kind, d, n, dim, k in keys:
        cells = [d, str(n), str(dim), str(k)]
        for m in methods:
            r = table.get((d, n, m))
            if r is None:
                cells += ["", ""]
            elif r["status"] == "ok":
                cells += [f"{r['ari']:.3f}", _fmt_s(r)]
            else:
                cells += [r["status"], _fmt_s(r)]
            if m.startswith("dk."):
                cells.append((r or {}).get("approximation") or "")
        lines.append("| " + " | ".join(cells) + " |")
    # ratios of the dkernel defaults' fit time to the spectral peers', per N
    pairs = [
        (a, b)
        for a in ("dk.SpectralClustering", "dk.KernelDecomposition")
        for b in ("sk.Spectral-knn", "daskml.Spectral")
        if a in methods and b in methods
    ]
    if pairs:
        lines += [
            "",
            "## Fit-time ratios per N",
            "",
            "dkernel default fit time / peer fit time over the datasets of that N where both "
            "finished: geometric mean (min–max, number of datasets). `+j` counts datasets where "
            "dkernel finished and the peer did not (timeout, memory, error or skipped), so "
            "the peer is slower there by more than the ratio shows.",
            "",
            "| N | " + " | ".join(f"{a} / {b}" for a, b in pairs) + " |",
            "|---|" + "---|" * len(pairs),
        ]
        groups = sorted({t[2] for t in keys if t[0] == "synthetic"})
        groups += ["real sets"] if any(t[0] == "real" for t in keys) else []
        for n in groups:
            cells = []
            for a, b in pairs:
                ratios, lost = [], 0
                for kind, d, nn, _, _ in keys:
                    ra, rb = table.get((d, nn, a)), table.get((d, nn, b))
                    if (nn if kind == "synthetic" else "real sets") != n:
                        continue
                    if ra is None or rb is None or ra["status"] != "ok":
                        continue
                    if rb["status"] == "ok":
                        ratios.append(ra["fit_s"] / rb["fit_s"])
                    else:
                        lost += 1
                txt = (
                    f"{_gmean(ratios):.3g} ({min(ratios):.3g}–{max(ratios):.3g}, {len(ratios)})"
                    if ratios
                    else "—"
                )
                cells.append(txt + (f" +{lost}" if lost else ""))
            lines.append(f"| {n} | " + " | ".join(cells) + " |")
    # largest peak RSS per method and N
    lines += [
        "",
        "## Peak memory",
        "",
        "Largest peak RSS of the cell's process (GiB, `ru_maxrss`, data generation included) "
        "per method and N, over the datasets of that N.",
        "",
        "| N | " + " | ".join(methods) + " |",
        "|---|" + "---|" * len(methods),
    ]
    for n in sorted({t[2] for t in keys}):
        cells = []
        for m in methods:
            v = [
                r["peak_rss_gib"]
                for r in rows
                if r["n"] == n and r["method"] == m and r.get("peak_rss_gib") is not None
            ]
            cells.append(f"{max(v):.2f}" if v else "")
        lines.append(f"| {n} | " + " | ".join(cells) + " |")
    agree = [r for r in rows if r.get("predict_agreement") is not None]
    if agree:
        worst = min(agree, key=lambda r: r["predict_agreement"])
        lines += [
            "",
            f"`predict(X)` agrees with `labels_` on ≥ {worst['predict_agreement']:.4f} of the "
            f"points in every dkernel cell (lowest: {worst['dataset']}, N = {worst['n']}, "
            f"{worst['method']}).",
        ]
    failures = [r for r in rows if r["status"] not in ("ok",)]
    if failures:
        lines += ["", "Cells that did not finish:", ""]
        lines += [
            f"- {r['dataset']} N={r['n']} / {r['method']}: {r['status']} — {r.get('detail')}"
            for r in failures
        ]
    return "\n".join(lines) + "\n"


def sized_plot(rows: list[dict], methods: list[str], path: Path) -> None:
    """ARI and fit time against N, one column per synthetic family, one line per method."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fams = [f for f in SIZED_FAMILIES if any(r["dataset"] == f for r in rows)]
    if not fams:
        return
    fig, axes = plt.subplots(2, len(fams), figsize=(3.2 * len(fams), 6), squeeze=False)
    colors = dict(zip(methods, plt.rcParams["axes.prop_cycle"].by_key()["color"], strict=False))
    markers = dict(zip(methods, "osD^vP<>", strict=False))
    for j, fam in enumerate(fams):
        for m in methods:
            mine = sorted(
                (r for r in rows if r["dataset"] == fam and r["method"] == m), key=lambda r: r["n"]
            )
            ok = [r for r in mine if r["status"] == "ok"]
            kw = {
                "color": colors.get(m),
                "marker": markers.get(m, "o"),
                "ms": 6 if m.startswith("dk.") else 4,
                "ls": "-" if m.startswith("dk.") else "--",
                "alpha": 0.85,
                "fillstyle": "none" if m.startswith("dk.") else "full",
            }
            axes[0, j].plot([r["n"] for r in ok], [r["ari"] for r in ok], label=m, **kw)
            axes[1, j].plot([r["n"] for r in ok], [r["fit_s"] for r in ok], **kw)
            out = [r for r in mine if r["status"] == "timeout"]
            axes[1, j].scatter(
                [r["n"] for r in out],
                [r["timeout_s"] for r in out],
                marker="x",
                color=colors.get(m),
            )
        axes[0, j].set_title(fam)
        axes[0, j].set_ylim(-0.05, 1.05)
        for i in (0, 1):
            axes[i, j].set_xscale("log")
            axes[i, j].grid(alpha=0.3)
        axes[1, j].set_yscale("log")
        axes[1, j].set_xlabel("N")
    axes[0, 0].set_ylabel("ARI")
    axes[1, 0].set_ylabel("fit time (s); × = timeout")
    fig.legend(
        *axes[0, 0].get_legend_handles_labels(),
        loc="lower center",
        ncol=min(3, len(methods)),
        fontsize=8,
    )
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def run_sizes(args) -> None:
    """The --sizes mode: every (method, dataset, N) cell in its own process, saved as it goes."""
    only_d = set(filter(None, args.only_datasets.split(",")))
    only_m = set(filter(None, args.only_methods.split(",")))
    unknown = (only_d - set(SIZED_FAMILIES) - set(FULL_SETS)) | (only_m - set(SIZED_METHODS))
    if unknown:
        raise SystemExit(f"unknown dataset or method: {sorted(unknown)}")
    methods = [m for m in SIZED_METHODS if not only_m or m in only_m]
    fams = [f for f in SIZED_FAMILIES if not only_d or f in only_d]
    reals = [d for d in FULL_SETS if not only_d or d in only_d]
    if reals and not data_dir().exists():
        print(f"skip {', '.join(reals)}: no datasets at {data_dir()} (set DKERNEL_DATA)")
        reals = []
    seed = args.seeds[0]
    out = Path(args.out)
    csv_path = out.with_suffix(".csv")
    rows: list[dict] = []
    if (args.update or args.resume) and csv_path.exists():
        rows = read_sized(csv_path)
    # real sets once (N = None: their own size), then every family at every N, smallest first
    plan = [(d, None, "real") for d in reals]
    plan += [(f, n, "synthetic") for n in sorted(args.sizes) for f in fams]
    stopped: dict[tuple[str, str], str] = {}  # (family, method) -> why larger N are skipped
    for d, n, kind in plan:
        for m in methods:
            prev = [r for r in rows if r["dataset"] == d and r["method"] == m]
            if kind == "synthetic" and not args.no_skip_larger:
                for r in prev:
                    if r["status"] in FAILED and r["n"] is not None and r["n"] < n:
                        stopped.setdefault((d, m), f"{r['status']} at N={r['n']}")
            measured = [r for r in prev if r["status"] != "skipped"]
            if args.resume and any(kind == "real" or r["n"] == n for r in measured):
                continue  # already in the CSV (a real set: at its full size)
            cap = args.method_max_n.get(m)
            if (d, m) in stopped and kind == "synthetic":
                row = {"status": "skipped", "detail": stopped[(d, m)], "n": n}
            elif cap is not None and kind == "synthetic" and n > cap:
                row = {"status": "skipped", "detail": f"N > --method-max-n {cap:.0e}", "n": n}
            else:
                row = run_sized_cell(m, d, n or 0, seed, args)
            row = {"dataset": d, "kind": kind, "method": m, "seed": seed} | row
            row["timeout_s"] = args.timeout
            row.setdefault("n", n)
            row = {f: row.get(f) for f in SIZED_FIELDS}
            rows = [
                r
                for r in rows
                if not (r["dataset"] == d and r["method"] == m and r["n"] == row["n"])
            ] + [row]
            write_sized_csv(csv_path, rows)
            ari = "" if row.get("ari") is None else f"ARI {row['ari']:.3f}"
            fit = "" if row.get("fit_s") is None else f"{row['fit_s']:.2f} s"
            print(
                f"{d:13s} N={row['n']!s:8s} {m:24s} {row['status']:8s} {ari:10s} {fit:>10s} "
                f"{row.get('approximation') or '':9s} RSS {row.get('peak_rss_gib') or 0:.2f} GiB",
                flush=True,
            )
    # fill d, k of skipped rows from a finished row of the same dataset and N
    for r in rows:
        if r.get("d") is None:
            twin = next(
                (
                    s
                    for s in rows
                    if s["dataset"] == r["dataset"] and s["n"] == r["n"] and s.get("d") is not None
                ),
                None,
            )
            if twin:
                r["d"], r["k"] = twin["d"], twin["k"]
    write_sized_csv(csv_path, rows)
    shown = [m for m in SIZED_METHODS if any(r["method"] == m for r in rows)]
    text = sized_markdown(rows, shown, args)
    out.with_suffix(".md").write_text(text)
    sized_plot(rows, shown, Path(args.plot))
    print(text)
    print(f"wrote {csv_path}, {out.with_suffix('.md')}, {args.plot}")


def suite(args):
    """``(name, X, label sets, k)`` of every dataset asked for (``--only-datasets``), at most
    ``--max-n`` points; the real sets are skipped, with a line, when there is no data."""
    names = [d for d in DATASETS if not args.only_datasets or d in args.only_datasets.split(",")]
    have_data = data_dir().exists()
    for d in names:
        if DATASETS[d][1] and not have_data:
            print(f"skip {d}: no datasets at {data_dir()} (set DKERNEL_DATA)", file=sys.stderr)
            continue
        yield (d, *load_dataset(d, args.max_n))


def main() -> None:
    if "--auto-k" in sys.argv[1:]:
        import bench_auto_k

        bench_auto_k.main([a for a in sys.argv[1:] if a != "--auto-k"])
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only-datasets", default="", help="comma-separated dataset names")
    ap.add_argument("--only-methods", default="", help="comma-separated method names")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--max-n", type=int, default=2000, help="subsample larger sets to this")
    ap.add_argument(
        "--timeout", type=float, default=None, help="seconds per cell (300; --sizes: 600)"
    )
    ap.add_argument(
        "--out", default=None, help="path without suffix (results/defaults or defaults_sizes)"
    )
    ap.add_argument(
        "--update",
        action="store_true",
        help="replace only the rows of the methods run in --out's existing table",
    )
    ap.add_argument(
        "--sizes",
        type=lambda v: int(float(v)),
        nargs="+",
        default=None,
        help="scaling mode: synthetic families at these N (e.g. 2e3 2e4 2e5 1e6), real sets full",
    )
    ap.add_argument(
        "--resume",
        action="store_true",
        help="--sizes: keep --out's CSV and run only the cells missing from it",
    )
    ap.add_argument(
        "--mem-gib",
        type=float,
        default=8.0,
        help="--sizes: address-space limit of scikit-learn's spectral clustering (0: none)",
    )
    ap.add_argument(
        "--method-max-n",
        nargs="*",
        default=[],
        metavar="METHOD=N",
        help="--sizes: run METHOD only up to N (e.g. sk.Spectral-knn=2e4); larger cells are "
        "recorded as skipped",
    )
    ap.add_argument(
        "--no-skip-larger",
        action="store_true",
        help="--sizes: run a method at larger N even after it timed out or ran out of memory",
    )
    ap.add_argument(
        "--plot",
        default=str(ROOT / "docs" / "images" / "defaults_sizes.png"),
        help="--sizes: where the ARI / time against N figure goes",
    )
    ap.add_argument("--cell", nargs=3, help=argparse.SUPPRESS)  # child: method dataset n
    args = ap.parse_args()
    args.method_max_n = {m: float(v) for m, v in (item.split("=", 1) for item in args.method_max_n)}
    if args.cell:
        method, dataset, n = args.cell
        print(json.dumps(sized_child(method, dataset, int(n), args.seeds[0], args.mem_gib)))
        return
    if args.sizes:
        args.timeout = 600.0 if args.timeout is None else args.timeout
        args.out = args.out or str(RESULTS / "defaults_sizes")
        run_sizes(args)
        return
    args.timeout = 300.0 if args.timeout is None else args.timeout
    args.out = args.out or str(RESULTS / "defaults")
    methods = [m for m in METHODS if not args.only_methods or m in args.only_methods.split(",")]
    rows = []
    for d, X, ys, k in suite(args):
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
        methods = [m for m in METHODS if any(r["method"] == m for r in rows)]
    names = [d for d in DATASETS if any(r["dataset"] == d for r in rows)]
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out.with_suffix(".csv"), "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    print(write_markdown(out.with_suffix(".md"), rows, methods, names, args))


if __name__ == "__main__":
    main()
