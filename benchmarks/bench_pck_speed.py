"""PCK speed: the ensemble fit vs scikit-learn, posteriors vs their floor, embedding vs fit.

1. Fit. The PCK ensemble fit next to a loop of scikit-learn GaussianMixture fits, in one run.

The ensemble: Q = G = 30 (870 diagonal GMMs, g = 2..30), 10 EM iterations, 50 % subsample per
initial condition. The alternative a user would write: for every (q, g), draw a 50 % subsample
and fit ``GaussianMixture(g, covariance_type='diag', max_iter=10)`` (scikit-learn's default
k-means initialisation). Both run in this process on the same cores and the same data.

The scikit-learn loop is 30 identical repetitions (one per q) of the same 29 fits; by default it
is timed for ``--sk-inits`` of them (5) and scaled to 30 (``--sk-inits 30`` runs all of it).

Datasets: synthetic N = 100 000, p = 20 (8 Gaussian clusters, float32) and Samson
(9025 pixels × 156 bands). ``--million`` also fits N = 10⁶, p = 20 (ours only) and reports its
wall time and peak memory (ru_maxrss of this process).

2. Posteriors vs their floor. A Q = G = 30 ensemble fitted on p = 36 data (the Statlog
Landsat shape); Γ = ``transform`` of N_new points (``posterior_block``) next to the floor of
the same work, timed with NumPy in the same run on the same rows: the two GEMMs
``X² @ A`` and ``X @ B`` (N_new × p by p × Σg, Σg = 13 920) and one ``exp`` of N_new × Σg,
in the same 512-row blocks on one BLAS thread each spread over the cores (the floor's
fastest arrangement here; full-height blocks on threaded BLAS are also timed and the
faster kept). Rates per wall second and per CPU second (the latter is less distorted by
other jobs on a shared machine).

3. Embedding vs fit. The ``pck-spectral`` job (kpca, k = 8, Q = G = 30, 2 workers x 1
thread) on synthetic p = 20 blobs for N = 10³ … 10⁵ (``--embedding-sizes``); its own
``timings`` (``fit_ensemble``, ``embedding`` = Γ + solver) and the solver line it logs.

4. Small N (``--small``, issue 57's "a fit at 3 000 rows in ≤ 2 s at defaults"): scikit-learn's
digits resampled to 3 000 rows × 64 (plus noise of 0.01, standardised), the default ensemble
fitted ``--repeats`` times after a warm-up, next to the same scikit-learn loop; prints and
writes ``benchmarks/results/pck_small.md``.

Run:  python benchmarks/bench_pck_speed.py [--quick] [--million] [--embedding-sizes ...]
      [--embedding-only --out PATH]  (e.g. --embedding-sizes 1000000: Γ then stays lazy)
Writes benchmarks/results/pck_speed.md (and .json); ``--quick`` prints only.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import resource
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.mixture import GaussianMixture

from dkernel._random import derive_rng
from dkernel.gmm import graph
from dkernel.gmm.pck import ProbabilisticClusterKernel
from dkernel.linalg.threads import map_on_cores


def synthetic(n: int, p: int = 20, k: int = 8, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centers = rng.normal(scale=3.0, size=(k, p))
    X = centers[rng.integers(0, k, n)] + rng.normal(size=(n, p))
    return X.astype(np.float32)


def samson() -> np.ndarray:
    from dkernel.io.hyperspectral import load_samson

    cube, _ = load_samson(os.environ.get("DKERNEL_DATA"))
    return cube.reshape(-1, cube.shape[-1]).astype(np.float32)


LOAD_AT_START = os.getloadavg()[0]


def digits_3000() -> np.ndarray:
    """Issue 57's small case: scikit-learn's digits resampled to 3 000 × 64, standardised."""
    from sklearn.datasets import load_digits

    rng = np.random.default_rng(0)
    X, _ = load_digits(return_X_y=True)
    X = X[rng.choice(len(X), 3000, replace=True)] + rng.normal(scale=0.01, size=(3000, 64))
    return (X - X.mean(axis=0)) / X.std(axis=0)


def small_n(repeats: int, sk_inits: int, out: Path) -> None:
    """The default ensemble on 3 000 × 64, ``repeats`` timed fits after a warm-up, and the
    scikit-learn loop (``sk_inits`` of the 30 initial conditions, scaled)."""
    X = digits_3000()
    time_ours(X, 30, 30)  # warm-up: thread pool, BLAS
    ours = [time_ours(X, 30, 30) for _ in range(repeats)]
    sk_part, sk_cpu = time_sklearn(X, sk_inits, 30)
    sk = sk_part * 30 / sk_inits
    walls = sorted(t for t, _ in ours)
    median = walls[len(walls) // 2]
    lines = [
        "# PCK at 3 000 rows × 64 (issue 57: a fit in ≤ 2 s at defaults)",
        "",
        f"`python benchmarks/bench_pck_speed.py --small --repeats {repeats}` (one run; digits "
        "resampled to 3 000 × 64, standardised; `ProbabilisticClusterKernel()` at its defaults: "
        "Q = G = 30, 10 EM iterations, half of the rows per initial condition; load average "
        f"{LOAD_AT_START:.1f} at the start on 2 cores).",
        "",
        "| | wall s | CPU s |",
        "|---|---:|---:|",
        *(f"| dkernel PCK fit {i + 1} | {t:.2f} | {c:.2f} |" for i, (t, c) in enumerate(ours)),
        f"| scikit-learn loop of 870 `GaussianMixture(diag, max_iter=10)` ({sk_inits} of 30 "
        f"initial conditions timed, scaled) | {sk:.1f} | {sk_cpu * 30 / sk_inits:.1f} |",
        "",
        f"Median fit {median:.2f} s, slowest {walls[-1]:.2f} s (target ≤ 2 s); "
        f"the scikit-learn loop takes {sk / median:.0f}× the median fit.",
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    out.write_text(text, encoding="utf-8")


def time_ours(X: np.ndarray, Q: int, G: int) -> tuple[float, float]:
    """(wall s, CPU s of this process) of the ensemble fit."""
    t, c = time.perf_counter(), time.process_time()
    ProbabilisticClusterKernel(n_estimators=Q, max_components=G, random_state=0).fit(X)
    return time.perf_counter() - t, time.process_time() - c


def time_sklearn(X: np.ndarray, n_inits: int, G: int) -> tuple[float, float]:
    n_sub = X.shape[0] // 2
    t, c = time.perf_counter(), time.process_time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        for q in range(n_inits):
            rows = derive_rng(0, "sk", q).choice(X.shape[0], n_sub, replace=False)
            Xs = X[rows]
            for g in range(2, G + 1):
                GaussianMixture(g, covariance_type="diag", max_iter=10, random_state=q).fit(Xs)
    return time.perf_counter() - t, time.process_time() - c


def _timed(fn) -> tuple[float, float]:
    """(wall s, CPU s of this process) of ``fn()``."""
    t, c = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - t, time.process_time() - c


def posteriors_vs_floor(n_fit: int, n_new: int, Q: int = 30, G: int = 30, p: int = 36) -> dict:
    """Γ of ``n_new`` points next to the floor (two GEMMs and one exp) on the same rows."""
    X = synthetic(n_fit + n_new, p=p, seed=1)
    pck = ProbabilisticClusterKernel(n_estimators=Q, max_components=G, random_state=0).fit(
        X[:n_fit]
    )
    Xn = X[n_fit:]
    ens = pck.ensemble_
    C = int(ens.offsets[-1])
    Xc = np.ascontiguousarray(pck._prepare(Xn))
    A = np.ascontiguousarray((-0.5 / ens.variances).T, dtype=np.float32)  # (p, C)
    B = np.ascontiguousarray((ens.means / ens.variances).T, dtype=np.float32)

    def floor_block(sl: slice) -> None:
        x = Xc[sl]
        L = (x * x) @ A
        L += x @ B
        with np.errstate(over="ignore"):  # unnormalised log-densities: the cost is the same
            np.exp(L, out=L)

    rows = graph.POSTERIOR_BLOCK_ROWS
    small = [slice(a, a + rows) for a in range(0, n_new, rows)]
    tall = [slice(a, a + 4096) for a in range(0, n_new, 4096)]
    pck.transform(Xn[:rows])  # warm-up (thread pool, BLAS)
    ours = min((_timed(lambda: pck.transform(Xn)) for _ in range(2)), key=lambda t: t[0])
    floors = {
        "blocks of 512 rows, one BLAS thread each": min(
            (_timed(lambda: map_on_cores(floor_block, small)) for _ in range(2)),
            key=lambda t: t[0],
        ),
        "blocks of 4096 rows, threaded BLAS": min(
            (_timed(lambda: [floor_block(sl) for sl in tall]) for _ in range(2)),
            key=lambda t: t[0],
        ),
    }
    how, floor = min(floors.items(), key=lambda kv: kv[1][0])
    return {
        "Q": Q,
        "G": G,
        "p": p,
        "sum_g": C,
        "n_new": n_new,
        "ours_s": ours[0],
        "ours_cpu_s": ours[1],
        "floor_s": floor[0],
        "floor_cpu_s": floor[1],
        "floor_how": how,
        "floors": {k: list(v) for k, v in floors.items()},
        "ours_pts_s": n_new / ours[0],
        "floor_pts_s": n_new / floor[0],
        "ours_pts_cpu_s": n_new / ours[1],
        "floor_pts_cpu_s": n_new / floor[1],
        "ratio_wall": ours[0] / floor[0],
        "ratio_cpu": ours[1] / floor[1],
    }


class _ListHandler(logging.Handler):
    """Collects the messages of a logger (the job's log lines) into a list."""

    def __init__(self, lines: list[str]) -> None:
        super().__init__(logging.INFO)
        self.lines = lines

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def embedding_vs_fit(n: int, workdir: Path, Q: int = 30, G: int = 30, k: int = 8) -> dict:
    """The pck-spectral job's own timings (fit_ensemble, embedding) and its solver log line."""
    from dkernel.jobs.runner import run_job
    from dkernel.storage import open_results

    X = synthetic(n, p=20, k=k, seed=2)
    path = workdir / f"blobs{n}.npy"
    np.save(path, X)
    spec = workdir / f"job{n}.yaml"
    spec.write_text(
        f"name: pck-speed-{n}\nseed: 0\ndata:\n  reader: npy\n  path: {path}\n"
        f"method: pck-spectral\nparams:\n  n_clusters: {k}\n  n_estimators: {Q}\n"
        f"  max_components: {G}\n  n_init: 10\noutput: {workdir / f'out{n}.zarr'}\n"
    )
    logs: list[str] = []
    handler = _ListHandler(logs)
    step_logger = logging.getLogger("dkernel.jobs.steps.pck_spectral")
    step_logger.addHandler(handler)
    step_logger.setLevel(logging.INFO)
    t = time.perf_counter()
    cpu = _cpu_seconds()
    try:
        store = run_job(
            spec,
            n_workers=2,
            threads_per_worker=1,
            progress=False,
            quiet=True,
            overwrite=True,
        )
    finally:
        step_logger.removeHandler(handler)
    wall = time.perf_counter() - t
    cpu = _cpu_seconds() - cpu
    tree = open_results(store)
    timings = dict(tree.attrs.get("timings", {}))
    solver_line = next((m for m in logs if "solver for" in m), "")
    return {
        "n": n,
        "fit_s": timings.get("fit_ensemble"),
        "embedding_s": timings.get("embedding"),
        "kmeans_s": timings.get("kmeans"),
        "job_wall_s": wall,
        "job_cpu_s": cpu,
        "peak_rss_gib": peak_rss_gib(),
        "peak_rss_workers_gib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 2**20,
        "timings": timings,
        "solver": tree["embedding"].attrs.get("solver"),
        "log": solver_line,
        "load_avg": os.getloadavg()[0],
    }


def _cpu_seconds() -> float:
    """CPU seconds of this process and of its finished children (the job's worker processes,
    counted once the job has closed its cluster)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def peak_rss_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="N = 20 000, Q = G = 10, 2 sk inits")
    ap.add_argument("--sk-inits", type=int, default=5)
    ap.add_argument("--million", action="store_true", help="also fit N = 10^6, p = 20")
    ap.add_argument("--skip-samson", action="store_true")
    ap.add_argument(
        "--million-only", action="store_true", help="only the N = 10^6 fit; prints, writes nothing"
    )
    ap.add_argument(
        "--embedding-sizes",
        default=None,
        help="comma-separated N for the job's embedding vs fit (default 1000,10000,100000; "
        "quick: 1000,3000)",
    )
    ap.add_argument("--posterior-n", type=int, default=None, help="N_new (default 40000)")
    ap.add_argument("--skip-fit", action="store_true", help="skip the scikit-learn comparison")
    ap.add_argument(
        "--embedding-only",
        action="store_true",
        help="only the job's embedding vs fit (--embedding-sizes); write to --out",
    )
    ap.add_argument(
        "--small", action="store_true", help="only 3 000 x 64 (issue 57); writes pck_small.md"
    )
    ap.add_argument("--repeats", type=int, default=5, help="timed fits of --small")
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "pck_speed"))
    args = ap.parse_args()
    if args.small:
        small_n(args.repeats, args.sk_inits, Path(__file__).parent / "results" / "pck_small.md")
        return
    Q = G = 10 if args.quick else 30
    sk_inits = 2 if args.quick else min(args.sk_inits, Q)
    sets = [("synthetic N=100000 p=20", synthetic(20_000 if args.quick else 100_000))]
    if args.million_only:
        args.million, args.quick, sets = True, True, []
        Q = G = 30
    elif not args.skip_samson:
        sets.append(("Samson 9025 x 156", samson()))
    if args.skip_fit or args.embedding_only:
        sets = []
    rows = []
    for name, X in sets:
        ours, ours_cpu = time_ours(X, Q, G)
        sk_part, sk_part_cpu = time_sklearn(X, sk_inits, G)
        sk, sk_cpu = sk_part * Q / sk_inits, sk_part_cpu * Q / sk_inits
        row = {
            "data": name,
            "ours_s": ours,
            "ours_cpu_s": ours_cpu,
            "sklearn_s": sk,
            "sklearn_cpu_s": sk_cpu,
            "sklearn_measured_inits": sk_inits,
            "sklearn_measured_s": sk_part,
            "speedup": sk / ours,
            "speedup_cpu": sk_cpu / ours_cpu,
        }
        rows.append(row)
        print(
            f"{name}: ours {ours:.1f} s (CPU {ours_cpu:.1f}) | sklearn loop {sk:.1f} s "
            f"(CPU {sk_cpu:.1f}; {sk_part:.1f} s measured for {sk_inits}/{Q} inits) | "
            f"speed-up {sk / ours:.1f}x wall, {sk_cpu / ours_cpu:.1f}x CPU",
            flush=True,
        )
    million = None
    if args.million:
        X = synthetic(1_000_000)
        t, c = time_ours(X, Q, G)
        million = {"seconds": t, "cpu_seconds": c, "peak_rss_gib": peak_rss_gib()}
        print(
            f"N=10^6 p=20: {t:.1f} s wall, {c:.1f} s CPU, peak RSS "
            f"{million['peak_rss_gib']:.2f} GiB",
            flush=True,
        )
    post = None
    if not (args.million_only or args.embedding_only):
        n_new = args.posterior_n or (8_000 if args.quick else 40_000)
        post = posteriors_vs_floor(2_000, n_new)
        print(
            f"posteriors Q=G=30 p=36 (Σg={post['sum_g']}), {n_new} points: ours "
            f"{post['ours_pts_s']:,.0f} pts/s ({post['ours_pts_cpu_s']:,.0f} per CPU s) | floor "
            f"{post['floor_pts_s']:,.0f} pts/s ({post['floor_pts_cpu_s']:,.0f} per CPU s; "
            f"{post['floor_how']}) | ours / floor {post['ratio_wall']:.2f}x wall, "
            f"{post['ratio_cpu']:.2f}x CPU",
            flush=True,
        )
    sizes = args.embedding_sizes or ("1000,3000" if args.quick else "1000,10000,100000")
    emb_rows = []
    if not args.million_only:
        with tempfile.TemporaryDirectory() as tmp:
            for n in [int(v) for v in sizes.split(",") if v]:
                r = embedding_vs_fit(n, Path(tmp))
                emb_rows.append(r)
                print(
                    f"pck-spectral N={n}: fit_ensemble {r['fit_s']:.1f} s, embedding "
                    f"{r['embedding_s']:.1f} s (ratio {r['embedding_s'] / r['fit_s']:.2f}), "
                    f"kmeans {r['kmeans_s']:.1f} s; job {r['job_wall_s']:.1f} s wall, "
                    f"{r['job_cpu_s']:.1f} CPU s, peak RSS {r['peak_rss_gib']:.2f} GiB (workers "
                    f"{r['peak_rss_workers_gib']:.2f}); load {r['load_avg']:.1f}; {r['log']}",
                    file=sys.stderr,
                    flush=True,
                )
    if args.quick:
        return
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(
        json.dumps(
            {
                "Q": Q,
                "G": G,
                "rows": rows,
                "million": million,
                "posteriors": post,
                "embedding": emb_rows,
                "cpus": os.cpu_count(),
                "load_avg_start": LOAD_AT_START,
            },
            indent=1,
        )
    )
    lines = [
        "# PCK ensemble fit vs a loop of scikit-learn GaussianMixture (diag, max_iter=10)",
        "",
        f"Q = G = {Q} (870 models), 10 EM iterations, 50 % subsample; same process, same "
        f"{os.cpu_count()} cores (load average {LOAD_AT_START:.1f} at the start). The scikit-learn loop "
        f"was timed for {sk_inits} of the {Q} initial conditions and scaled by {Q}/{sk_inits} "
        "(the 30 repetitions are identical in cost).",
        "",
        "Command: `python benchmarks/bench_pck_speed.py"
        + (f" --sk-inits {args.sk_inits}" if args.sk_inits != 5 else "")
        + (" --million" if args.million else "")
        + "`",
        "",
        "| data | dkernel PCK fit: wall s (CPU s) | sklearn loop: wall s (CPU s) | speed-up wall "
        "| speed-up CPU |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['data']} | {r['ours_s']:.1f} ({r['ours_cpu_s']:.1f}) | {r['sklearn_s']:.1f} "
            f"({r['sklearn_cpu_s']:.1f}; {r['sklearn_measured_inits']} inits measured) "
            f"| {r['speedup']:.1f}× | {r['speedup_cpu']:.1f}× |"
        )
    if million:
        lines += [
            "",
            f"N = 10⁶, p = 20 (ours only): {million['seconds']:.0f} s wall, peak RSS "
            f"{million['peak_rss_gib']:.2f} GiB.",
        ]
    if post:
        lines += [
            "",
            "## Posteriors vs their floor",
            "",
            f"Q = G = 30 ensemble (Σg = {post['sum_g']}) fitted on 2000 points, p = {post['p']}; "
            f"Γ = transform of {post['n_new']:,} new points. Floor: the two GEMMs X² @ A and "
            "X @ B (N × p by p × Σg) and one exp of N × Σg, timed with NumPy on the same rows "
            f"in the same run (fastest arrangement: {post['floor_how']}).",
            "",
            "| | points/s (wall) | points/s per CPU second |",
            "|---|---|---|",
            f"| floor | {post['floor_pts_s']:,.0f} | {post['floor_pts_cpu_s']:,.0f} |",
            f"| dkernel posteriors (`transform`) | {post['ours_pts_s']:,.0f} "
            f"| {post['ours_pts_cpu_s']:,.0f} |",
            f"| ours / floor (time) | {post['ratio_wall']:.2f}× | {post['ratio_cpu']:.2f}× |",
        ]
    if emb_rows:
        lines += [
            "",
            "## pck-spectral: embedding vs ensemble fit (the job's own timings)",
            "",
            "Synthetic blobs, p = 20, 8 clusters; kpca, k = 8, Q = G = 30 (F = 13 920); "
            "2 workers × 1 thread. `embedding` covers Γ and the solver.",
            "",
            "| N | fit_ensemble (s) | embedding (s) | embedding / fit | solver | job wall s "
            "(CPU s) | load avg |",
            "|---|---|---|---|---|---|---|",
        ]
        for r in emb_rows:
            lines.append(
                f"| {r['n']:,} | {r['fit_s']:.1f} | {r['embedding_s']:.1f} "
                f"| {r['embedding_s'] / r['fit_s']:.2f} | {r['solver']} "
                f"| {r['job_wall_s']:.0f} ({r['job_cpu_s']:.0f}) | {r['load_avg']:.1f} |"
            )
        lines += ["", "Logged by the job:", ""]
        lines += [f"* N = {r['n']:,}: {r['log']}" for r in emb_rows]
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print(f"wrote {out.with_suffix('.md')}")


if __name__ == "__main__":
    main()
