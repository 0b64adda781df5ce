"""Clustering incomplete data: every dkernel clusterer against mean-imputed k-means (issue 57, item 3).

Two sets with planted missing values, at every estimator's defaults with only the true k:

* **digits** (scikit-learn's ``load_digits``, 1 797 images of 8×8, k = 10): a random 4×4 block of
  every image is missing (a quarter of each image);
* **ecoli** (``$DKERNEL_DATA/uci_ecoli/ecoli.data``, 336 × 7, k = 8): 25 % of the entries
  missing completely at random (no row loses every entry).

Columns are standardised on their observed values. Per set and seed (0–2: the seed draws the
missing entries and seeds the estimators):

* the baseline, scikit-learn ``KMeans(k)`` on the mean-imputed data;
* every dkernel clusterer **given the NaN** (``nan``: its ARI, or ``refuses`` when it raises),
  and **given the mean-imputed data** (``imputed``, what a user does when it refuses);
* ``SpectralClustering`` of one self-tuning 10-NN graph (given as a precomputed kernel) on three
  distances: the expected squared distances
  (:func:`dkernel.kernels.missing.expected_sq_distances`, ``expected``) and the partial distances
  (:func:`dkernel.kernels.missing.partial_sq_distances`, ``partial``), the two candidates for
  the shared default (the expected distances won and are now every distance-based clusterer's
  default for rows with NaN), and the distances of the mean-imputed rows (``imputed, same
  graph``), the control.

MeanShift was run when it counted rows with a NaN as nodata (label −1); it now fills a row's
missing entries with their conditional means and only all-NaN rows are nodata
(``benchmarks/bench_realdata.py`` measures it).

Run:  python benchmarks/bench_missing.py [--seeds 0 1 2] [--sets digits ecoli] [--max-n 1797]
      [--timeout 600] [--methods SpectralClustering ...]  (``--methods`` alone: the graphs only)
Prints one table per set (mean ARI over seeds, and the ratio to mean-imputed k-means) and writes
``benchmarks/results/missing.md``.
"""

from __future__ import annotations

import argparse
import os
import signal
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
from sklearn.cluster import KMeans
from sklearn.datasets import load_digits
from sklearn.metrics import adjusted_rand_score

RESULTS = Path(__file__).resolve().parent / "results"


def _digits(seed: int, max_n: int) -> tuple[np.ndarray, np.ndarray]:
    X, y = load_digits(return_X_y=True)
    rng = np.random.default_rng(seed)
    if max_n < len(X):
        keep = np.sort(rng.choice(len(X), max_n, replace=False))
        X, y = X[keep], y[keep]
    img = X.reshape(-1, 8, 8).astype(np.float64)
    r, c = rng.integers(0, 5, len(img)), rng.integers(0, 5, len(img))
    for i in range(len(img)):
        img[i, r[i] : r[i] + 4, c[i] : c[i] + 4] = np.nan
    return img.reshape(len(img), 64), y


def _ecoli(seed: int, max_n: int) -> tuple[np.ndarray, np.ndarray]:
    from dkernel.io.tables import load_ecoli

    root = os.environ.get("DKERNEL_DATA", Path(__file__).resolve().parents[2] / "shared" / "data")
    table = load_ecoli(root)
    X, y = np.asarray(table.X, dtype=np.float64).copy(), np.asarray(table.y)
    rng = np.random.default_rng(seed)
    holes = rng.random(X.shape) < 0.25
    holes[holes.all(axis=1), 0] = False
    X[holes] = np.nan
    return X[:max_n], y[:max_n]


SETS: dict[str, Callable[[int, int], tuple[np.ndarray, np.ndarray]]] = {
    "digits": _digits,
    "ecoli": _ecoli,
}


def standardise(X: np.ndarray) -> np.ndarray:
    mu, sd = np.nanmean(X, axis=0), np.nanstd(X, axis=0)
    keep = sd > 0
    return ((X - mu) / np.where(keep, sd, 1.0))[:, keep]


def mean_impute(X: np.ndarray) -> np.ndarray:
    return np.where(np.isnan(X), np.nanmean(X, axis=0)[None, :], X)


def _dk(name: str, **params: object) -> Callable[[np.ndarray, int, int], np.ndarray]:
    def run(X: np.ndarray, k: int, seed: int) -> np.ndarray:
        import dkernel

        cls = getattr(dkernel, name)
        if name == "MeanShift":
            est = cls()
        elif name in ("KernelPCAEmbedding", "KECA", "JointRankingClustering"):
            est = cls(n_clusters=k, random_state=seed)
        else:
            est = cls(k, random_state=seed, **params)
        return np.asarray(est.fit(X).labels_)

    return run


def _self_tuning_spectral(D: np.ndarray, k: int, seed: int) -> np.ndarray:
    """SpectralClustering of a self-tuning 10-NN graph (σ_i: the distance to the 7th
    neighbour, [ZelnikManor2005]) on squared distances ``D``, given as a precomputed kernel
    (every point a landmark: the exact kernel)."""
    from dkernel import SpectralClustering

    d = np.sqrt(D)
    order = np.argsort(d, axis=1, kind="stable")
    s = np.maximum(np.take_along_axis(d, order[:, 7:8], axis=1)[:, 0], 1e-12)
    K = np.exp(-D / np.outer(s, s))
    rows = np.arange(len(D))[:, None]
    W = np.zeros_like(K)
    W[rows, order[:, 1:11]] = K[rows, order[:, 1:11]]
    W = np.maximum(W, W.T)
    np.fill_diagonal(W, 1.0)
    est = SpectralClustering(k, kernel="precomputed", n_landmarks=len(D), random_state=seed)
    return np.asarray(est.fit(W).labels_)


def _expected_spectral(X: np.ndarray, k: int, seed: int) -> np.ndarray:
    from dkernel.kernels.missing import expected_sq_distances

    return _self_tuning_spectral(expected_sq_distances(X), k, seed)


def _partial_spectral(X: np.ndarray, k: int, seed: int) -> np.ndarray:
    from dkernel.kernels.missing import partial_sq_distances

    return _self_tuning_spectral(partial_sq_distances(X), k, seed)


def _imputed_graph_spectral(X: np.ndarray, k: int, seed: int) -> np.ndarray:
    from dkernel.kernels.missing import partial_sq_distances

    return _self_tuning_spectral(partial_sq_distances(mean_impute(X)), k, seed)


DK_METHODS = {
    "SpectralClustering": _dk("SpectralClustering"),
    "KernelDecompositionClustering": _dk("KernelDecompositionClustering"),
    "KernelKMeans": _dk("KernelKMeans"),
    "SpectralClustering(kernel='pck')": _dk("SpectralClustering", kernel="pck"),
    "KernelKMeans(kernel='pck')": _dk("KernelKMeans", kernel="pck"),
    "JointRankingClustering": _dk("JointRankingClustering"),
    "PCKSpectralClustering": _dk("PCKSpectralClustering"),
    "KPCA + k-means": _dk("KernelPCAEmbedding"),
    "KECA + k-means": _dk("KECA"),
    "MeanShift": _dk("MeanShift"),
}


class _Timeout(Exception):
    pass


def _alarm(signum, frame):  # noqa: ARG001
    raise _Timeout


def run_cell(fn, X, y, k, seed, timeout) -> tuple[str, float]:
    """``(ari or 'refuses' / 'timeout' / 'error', seconds)``."""
    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(int(timeout))
    t = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            labels = fn(X, k, seed)
        return f"{adjusted_rand_score(y, labels):.3f}", time.perf_counter() - t
    except _Timeout:
        return "timeout", time.perf_counter() - t
    except ValueError as exc:  # InvalidInputError is a ValueError
        text = str(exc).lower()
        kind = "refuses" if ("nan" in text or "missing" in text or "finite" in text) else "error"
        return kind, time.perf_counter() - t
    except Exception:  # noqa: BLE001 - a benchmark reports, it does not stop
        return "error", time.perf_counter() - t
    finally:
        signal.alarm(0)


def _mean(values: list[str]) -> str:
    nums = [float(v) for v in values if v[0].isdigit() or v[0] == "-"]
    if len(nums) == len(values):
        return f"{np.mean(nums):.3f}"
    return "/".join(sorted(set(values)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--sets", nargs="+", default=list(SETS))
    ap.add_argument("--max-n", type=int, default=1797)
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument(
        "--methods", nargs="*", default=None, help="subset of the dkernel methods (none: graphs)"
    )
    ap.add_argument("--out", type=Path, default=RESULTS / "missing.md")
    args = ap.parse_args()
    methods = {m: DK_METHODS[m] for m in (DK_METHODS if args.methods is None else args.methods)}
    lines = ["# Clustering with missing values (`benchmarks/bench_missing.py`)", ""]
    for name in args.sets:
        cells: dict[tuple[str, str], list[str]] = {}
        secs: dict[tuple[str, str], float] = {}
        base: list[float] = []
        for seed in args.seeds:
            X, y = SETS[name](seed, args.max_n)
            X = standardise(X)
            k = len(np.unique(y))
            Xi = mean_impute(X)
            base.append(
                adjusted_rand_score(y, KMeans(k, n_init=10, random_state=seed).fit_predict(Xi))
            )
            todo = [(m, "nan", fn, X) for m, fn in methods.items()]
            todo += [(m, "imputed", fn, Xi) for m, fn in methods.items() if m != "MeanShift"]
            todo.append(("SpectralClustering", "expected", _expected_spectral, X))
            todo.append(("SpectralClustering", "partial", _partial_spectral, X))
            todo.append(("SpectralClustering", "imputed, same graph", _imputed_graph_spectral, X))
            for method, how, fn, data in todo:
                value, sec = run_cell(fn, data, y, k, seed, args.timeout)
                cells.setdefault((method, how), []).append(value)
                secs[(method, how)] = secs.get((method, how), 0.0) + sec
                print(f"{name} seed={seed} {method} [{how}] {value} ({sec:.1f}s)", flush=True)
        km = float(np.mean(base))
        head = f"## {name}: mean-imputed k-means ARI {km:.3f} (seeds {args.seeds})"
        rows = [
            head,
            "",
            "| method | given | ARI | ratio to k-means | fit s |",
            "|---|---|---|---|---|",
        ]
        for (method, how), values in cells.items():
            mean = _mean(values)
            ratio = f"{float(mean) / km:.2f}" if mean[0].isdigit() or mean[0] == "-" else "—"
            n = len(values)
            rows.append(f"| {method} | {how} | {mean} | {ratio} | {secs[(method, how)] / n:.1f} |")
        print("\n".join(rows), flush=True)
        lines += rows + [""]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines))


if __name__ == "__main__":
    main()
