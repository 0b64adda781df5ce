"""Nyström spectral clustering at N = 10⁶: dkernel vs dask-ml vs scikit-learn, side by side.

Issue 4 acceptance: on N = 10⁶ points (20-D, 6 blobs; and a non-convex set: two noisy
interleaved half moons in 2-D, noise 0.08, σ = 0.1), dkernel's Nyström spectral clustering with 200 and 1 000 landmarks
is no slower than dask-ml ``SpectralClustering`` with the same number of landmarks
(``n_components``), uses no more memory and reaches at least its ARI; the same run records
where scikit-learn's dense ``SpectralClustering`` stops (time or memory).

Every run is a fresh subprocess with the threaded Dask scheduler (2 threads) on the same
row-chunked Dask array, the same RBF width (``gamma = 1 / (2 σ²)``) and the same seed; the
subprocess reports its own wall time and peak RSS (``ru_maxrss``). Runs alternate between
libraries so that background load affects both alike. dkernel also predicts held-out points
(dask-ml's estimator has no ``predict``); its ARI on 10⁴ new points is reported.

With ``--adaptive`` the same runs add dkernel with the self-tuning ``local_scaling`` kernel
(each point's width its distance to the 7th nearest landmark, no σ given) beside dkernel's RBF
and dask-ml, and print the adaptive / RBF time ratio (issue 15: ≤ 1.5×, and below dask-ml);
results go to ``spectral_million_adaptive.{json,md}``.

With ``--defaults`` (issue 29) nothing is tuned: dkernel's ``SpectralClustering(k,
random_state=0)`` — no kernel, no σ, no landmarks, so above its exact-path limit the landmark
bipartite graph runs — fits the NumPy array at every ``--n`` (default 10⁶ and 10⁷; one process,
so its ``ru_maxrss`` is the peak of all the work), and dask-ml's ``SpectralClustering(
n_clusters=k, random_state=0)`` at its defaults (RBF with gamma 1, 100 components, embedding
not persisted) on a Dask array of 50 000-row blocks at ``--daskml-n`` only (default 10⁶). Data:
``moons2d`` (two moons, noise 0.07) and ``blobs10d`` (5 blobs in 10-D), generated and
standardised in 10⁶-row chunks inside the child (see :func:`make_default_data`), plus 10⁴
held-out points for dkernel's ``predict``. Reported per run: fit time, peak RSS, RSS of the data
alone, ARI, held-out ARI, dkernel's ``approximation_``; then dkernel / dask-ml time and memory
at the shared N. Results: ``spectral_million_defaults.{json,md}`` (``--out`` to change; the
JSON is rewritten after each run).

Usage: python benchmarks/bench_spectral_million.py [--quick] [--n N] [--landmarks 200 1000]
       [--datasets blobs rings] [--timeout S] [--adaptive]
       python benchmarks/bench_spectral_million.py --defaults [--n 1e6 1e7] [--daskml-n 1e6]
       [--datasets moons2d blobs10d] [--timeout 3600] [--out PATH]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).parent / "results"
# blobs: dkernel's rule of thumb (0.2 × median distance). Concentric rings were tried first
# and dropped: 200 uniform landmarks leave gaps along the outer ring wider than any σ that
# still separates the rings, so it breaks into arcs for every Nyström method; the moons
# are non-convex yet covered by 100 landmarks each.
SIGMA = {"rings": 0.15, "moons": 0.1}
N_CLUSTERS = {"blobs": 6, "rings": 3, "moons": 2}


def make_data(name: str, n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    if name == "blobs":
        from sklearn.datasets import make_blobs

        return make_blobs(n, n_features=20, centers=6, cluster_std=1.0, random_state=seed)
    if name == "rings":
        y = rng.integers(0, 3, n)
        theta = rng.uniform(0, 2 * np.pi, n)
        r = 1.0 + y + rng.normal(0, 0.1, n)
        X = np.c_[r * np.cos(theta), r * np.sin(theta)]
        return X, y
    if name == "moons":
        from sklearn.datasets import make_moons

        return make_moons(n, noise=0.08, random_state=seed)
    raise ValueError(name)


def sigma_for(name: str, X: np.ndarray) -> float:
    if name in SIGMA:
        return SIGMA[name]
    from dkernel.kernels.rbf import sigma_rule_of_thumb

    return sigma_rule_of_thumb(X)


def child(lib: str, name: str, n: int, m: int, n_clusters: int) -> dict:
    import dask
    import dask.array as da
    from sklearn.metrics import adjusted_rand_score

    X_all, y_all = make_data(name, n + 10_000)  # the last 10⁴ points are held out
    X, y, Xn, yn = X_all[:n], y_all[:n], X_all[n:], y_all[n:]
    sigma = sigma_for(name, X)
    gamma = 1.0 / (2 * sigma**2)
    chunk = 50_000 if m <= 300 else 20_000
    Xd = da.from_array(X, chunks=(chunk, X.shape[1]))
    base_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    out = {"lib": lib, "dataset": name, "n": n, "landmarks": m, "sigma": sigma}
    t = time.perf_counter()
    with dask.config.set(scheduler="threads", num_workers=2):
        if lib in ("dkernel", "dkernel-adaptive"):
            from dkernel.spectral.clustering import SpectralClustering

            kernel = {"sigma": sigma} if lib == "dkernel" else {"kernel": "local_scaling"}
            est = SpectralClustering(
                n_clusters, n_landmarks=m, landmarks="uniform", random_state=0, **kernel
            ).fit(Xd)
            labels = est.labels_
            out["fit_s"] = time.perf_counter() - t
            out["ari_new_points"] = float(adjusted_rand_score(yn, est.predict(Xn)))
        elif lib == "dask-ml":
            from dask_ml.cluster import SpectralClustering

            # persist_embedding=True: dask-ml's default recomputes the n × m embedding on every
            # k-means|| pass (5-10x slower here); the faster setting is the fair comparison
            est = SpectralClustering(
                n_clusters=n_clusters,
                n_components=m,
                gamma=gamma,
                random_state=0,
                persist_embedding=True,
            ).fit(Xd)
            labels = est.labels_
            labels = np.asarray(labels.compute() if hasattr(labels, "compute") else labels)
            out["fit_s"] = time.perf_counter() - t
        else:
            from sklearn.cluster import SpectralClustering

            labels = (
                SpectralClustering(n_clusters, affinity="rbf", gamma=gamma, random_state=0)
                .fit(X)
                .labels_
            )
            out["fit_s"] = time.perf_counter() - t
    out["ari"] = float(adjusted_rand_score(y, labels))
    out["peak_rss_gib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    out["data_rss_gib"] = base_rss
    return out


def run_child(args: list[str], timeout: float) -> dict:
    try:
        proc = subprocess.run(
            [sys.executable, __file__, "--child", *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return {"status": f"timeout > {timeout:.0f} s"}
    if proc.returncode:
        lines = proc.stderr.strip().splitlines() or [f"exit code {proc.returncode}"]
        return {"status": "failed", "error": lines[-1][-300:]}
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    res["status"] = "ok"
    return res


def sklearn_stop(name: str, timeout: float, mem_limit_gib: float) -> list[dict]:
    """Double N for scikit-learn's dense SpectralClustering until time or memory stops it."""
    rows = []
    n = 2000
    while True:
        need = 3 * 8 * n * n / 2**30  # affinity + Laplacian + eigensolver copy, float64
        if need > mem_limit_gib:
            rows.append(
                {
                    "lib": "sklearn",
                    "dataset": name,
                    "n": n,
                    "status": f"not run: needs ≈ {need:.1f} GiB > {mem_limit_gib} GiB budget",
                }
            )
            break
        res = run_child(["sklearn", name, str(n), "0", str(N_CLUSTERS[name])], timeout)
        res.setdefault("n", n)
        res.setdefault("lib", "sklearn")
        res.setdefault("dataset", name)
        rows.append(res)
        print(fmt(res), flush=True)
        if res["status"] != "ok":
            break
        n *= 2
    return rows


def fmt(r: dict) -> str:
    if r.get("status") != "ok":
        return f"{r['lib']:8s} {r.get('dataset', ''):6s} n={r.get('n')} m={r.get('landmarks', '-')}: {r['status']}"
    extra = f", ARI new points {r['ari_new_points']:.3f}" if "ari_new_points" in r else ""
    return (
        f"{r['lib']:8s} {r['dataset']:6s} n={r['n']} m={r.get('landmarks', '-')}: "
        f"{r['fit_s']:.1f} s, peak RSS {r['peak_rss_gib']:.2f} GiB, ARI {r['ari']:.4f}{extra}"
    )


def adaptive_ratios(rows: list[dict], datasets: list[str], landmarks: list[int]) -> list[bool]:
    """Print local_scaling vs RBF (same landmarks) and vs dask-ml; True where ≤ 1.5× RBF and
    faster than dask-ml."""
    print("\nadaptive (local_scaling) vs dkernel RBF and dask-ml:")
    verdicts = []
    for name in datasets:
        for m in landmarks:
            get = {
                r["lib"]: r for r in rows if r.get("dataset") == name and r.get("landmarks") == m
            }
            a, r, d = (
                get.get("dkernel-adaptive", {}),
                get.get("dkernel", {}),
                get.get("dask-ml", {}),
            )
            if a.get("status") != "ok" or r.get("status") != "ok":
                print(f"  {name} m={m}: a dkernel run did not finish")
                verdicts.append(False)
                continue
            ratio = a["fit_s"] / r["fit_s"]
            vs_dask = a["fit_s"] / d["fit_s"] if d.get("status") == "ok" else float("nan")
            ok = ratio <= 1.5 and not vs_dask > 1.0
            verdicts.append(ok)
            print(
                f"  {name} m={m}: {a['fit_s']:.1f} s vs RBF {r['fit_s']:.1f} s ({ratio:.2f}x), "
                f"vs dask-ml {vs_dask:.2f}x, peak RSS {a['peak_rss_gib']:.2f} GiB, ARI "
                f"{a['ari']:.4f} (RBF {r['ari']:.4f}), new points {a['ari_new_points']:.3f} "
                f"-> {'PASS' if ok else 'FAIL'}"
            )
    return verdicts


# -- --defaults: the default path (no kernel, width or landmarks given) up to 10⁷ points -------
DEFAULT_SETS = {"moons2d": 2, "blobs10d": 5}  # name -> number of clusters
HELD_OUT = 10_000


def make_default_data(name: str, n: int, seed: int = 0, chunk: int = 1_000_000):
    """``n`` standardised points and int8 labels, generated and standardised in chunks of
    ``chunk`` rows so that the data are the only N-sized arrays in memory (10⁷ × 10 float64 is
    800 MB). ``moons2d``: scikit-learn's two moons (angles uniform on [0, π] instead of a grid),
    noise 0.07, as in ``bench_defaults.py``. ``blobs10d``: 5 isotropic unit-variance blobs in
    10-D, centres uniform in [−10, 10]¹⁰ (``make_blobs``' defaults)."""
    rng = np.random.default_rng(seed)
    k = DEFAULT_SETS[name]
    d = 2 if name == "moons2d" else 10
    centers = rng.uniform(-10, 10, (k, d))
    X = np.empty((n, d))
    y = np.empty(n, dtype=np.int8)
    for s in range(0, n, chunk):
        m = min(chunk, n - s)
        yc = rng.integers(0, k, m)
        if name == "moons2d":
            t = rng.uniform(0, np.pi, m)
            X[s : s + m, 0] = np.where(yc == 0, np.cos(t), 1 - np.cos(t))
            X[s : s + m, 1] = np.where(yc == 0, np.sin(t), 0.5 - np.sin(t))
            X[s : s + m] += rng.normal(0, 0.07, (m, d))
        else:
            X[s : s + m] = centers[yc] + rng.normal(0, 1.0, (m, d))
        y[s : s + m] = yc
    mean = sum(X[s : s + chunk].sum(axis=0) for s in range(0, n, chunk)) / n
    var = sum(((X[s : s + chunk] - mean) ** 2).sum(axis=0) for s in range(0, n, chunk)) / n
    scale = np.sqrt(var)
    for s in range(0, n, chunk):
        X[s : s + chunk] -= mean
        X[s : s + chunk] /= scale
    return X, y


def child_defaults(lib: str, name: str, n: int, k: int) -> dict:
    """One default-path run in this process: fit time, peak RSS, ARI (and path, predict)."""
    from sklearn.metrics import adjusted_rand_score

    X_all, y_all = make_default_data(name, n + HELD_OUT)  # the last 10⁴ points are held out
    X, y, Xn, yn = X_all[:n], y_all[:n], X_all[n:], y_all[n:]
    base_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    out = {"lib": lib, "dataset": name, "n": n, "d": X.shape[1], "k": k}
    if lib == "dkernel":
        from dkernel.spectral.clustering import SpectralClustering

        t = time.perf_counter()
        est = SpectralClustering(k, random_state=0).fit(X)  # NumPy in: one process
        labels = np.asarray(est.labels_)
        out["fit_s"] = time.perf_counter() - t
        out["approximation"] = getattr(est, "approximation_", "exact")
        out["ari_new_points"] = float(adjusted_rand_score(yn, est.predict(Xn)))
    else:
        import dask.array as da
        from dask_ml.cluster import SpectralClustering

        Xd = da.from_array(X, chunks=(min(n, 50_000), X.shape[1]))
        t = time.perf_counter()
        labels = SpectralClustering(n_clusters=k, random_state=0).fit(Xd).labels_
        labels = np.asarray(labels.compute() if hasattr(labels, "compute") else labels)
        out["fit_s"] = time.perf_counter() - t
    out["ari"] = float(adjusted_rand_score(y, labels))
    out["peak_rss_gib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    out["data_rss_gib"] = base_rss
    return out


def defaults_markdown(rows: list[dict], args) -> str:
    sizes = " ".join(f"{n:.0e}".replace("e+0", "e") for n in args.n)
    dask_sizes = " ".join(f"{n:.0e}".replace("e+0", "e") for n in args.daskml_n)
    lines = [
        "# Spectral clustering at defaults to 10⁷ points (`bench_spectral_million.py --defaults`)",
        "",
        f"`python benchmarks/bench_spectral_million.py --defaults --n {sizes} --daskml-n "
        f"{dask_sizes} --timeout {args.timeout:.0f}`. dkernel: `SpectralClustering(k, "
        "random_state=0)` on the NumPy array, nothing else given (`path` is its "
        "`approximation_`); dask-ml: `SpectralClustering(n_clusters=k, random_state=0)` on a "
        "Dask array of 50 000-row blocks (threaded scheduler). Features standardised. Each run "
        "a fresh process; `fit s` is the wall time of `fit` with the labels, `peak RSS` the "
        "process's `ru_maxrss` (data included; `data` is the RSS once the data were "
        "generated), `ARI new` the ARI of `predict` on 10⁴ held-out points.",
        "",
        "| dataset | N | library | path | fit s | peak RSS GiB | data GiB | ARI | ARI new | status |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]

    def num(r, key, f):
        return f.format(r[key]) if r.get(key) is not None else ""

    for r in rows:
        lines.append(
            f"| {r['dataset']} | {r['n']} | {r['lib']} | {r.get('approximation') or ''} | "
            f"{num(r, 'fit_s', '{:.1f}')} | {num(r, 'peak_rss_gib', '{:.2f}')} | "
            f"{num(r, 'data_rss_gib', '{:.2f}')} | {num(r, 'ari', '{:.4f}')} | "
            f"{num(r, 'ari_new_points', '{:.4f}')} | {r['status']} |"
        )
    lines += [
        "",
        "dkernel / dask-ml at the same N:",
        "",
        "| dataset | N | time ratio | memory ratio | ARI dkernel | ARI dask-ml |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        if r["lib"] != "dkernel":
            continue
        b = next(
            (
                s
                for s in rows
                if s["lib"] == "dask-ml" and s["dataset"] == r["dataset"] and s["n"] == r["n"]
            ),
            None,
        )
        if b is None:
            continue
        if r["status"] == "ok" and b["status"] == "ok":
            lines.append(
                f"| {r['dataset']} | {r['n']} | {r['fit_s'] / b['fit_s']:.3f} | "
                f"{r['peak_rss_gib'] / b['peak_rss_gib']:.2f} | {r['ari']:.4f} | "
                f"{b['ari']:.4f} |"
            )
        else:
            lines.append(
                f"| {r['dataset']} | {r['n']} | dkernel {r['status']}, dask-ml {b['status']} "
                f"| | {num(r, 'ari', '{:.4f}')} | {num(b, 'ari', '{:.4f}')} |"
            )
    return "\n".join(lines) + "\n"


def run_defaults(args) -> None:
    """--defaults: dkernel's default path at every --n, dask-ml's defaults at --daskml-n."""
    out = Path(args.out) if args.out else RESULTS / "spectral_million_defaults"
    datasets = args.datasets or list(DEFAULT_SETS)
    rows: list[dict] = []
    for n in args.n:
        for name in datasets:
            for lib in ("dkernel", "dask-ml"):
                if lib == "dask-ml" and n not in args.daskml_n:
                    continue
                k = DEFAULT_SETS[name]
                res = run_child([f"{lib}-defaults", name, str(n), "0", str(k)], args.timeout)
                res.update({"lib": lib, "dataset": name, "n": n})
                rows.append(res)
                print(
                    fmt(res) + (f" [{res['approximation']}]" if "approximation" in res else ""),
                    flush=True,
                )
                out.parent.mkdir(parents=True, exist_ok=True)
                out.with_suffix(".json").write_text(
                    json.dumps({"rows": rows, "complete": False}, indent=2)
                )
    out.with_suffix(".json").write_text(json.dumps({"rows": rows, "complete": True}, indent=2))
    text = defaults_markdown(rows, args)
    out.with_suffix(".md").write_text(text)
    print(text)
    print(f"wrote {out.with_suffix('.json')}, {out.with_suffix('.md')}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="N = 50 000")
    ap.add_argument(
        "--n", type=lambda v: int(float(v)), nargs="+", default=None, help="N (--defaults: several)"
    )
    ap.add_argument("--landmarks", type=int, nargs="+", default=[200, 1000])
    ap.add_argument(
        "--datasets", nargs="+", default=None, help="blobs moons (--defaults: moons2d blobs10d)"
    )
    ap.add_argument(
        "--timeout", type=float, default=None, help="per-run limit (s; 900, --defaults: 3600)"
    )
    ap.add_argument("--sklearn-timeout", type=float, default=300.0)
    ap.add_argument("--sklearn-mem-gib", type=float, default=5.0)
    ap.add_argument("--no-sklearn", action="store_true")
    ap.add_argument("--adaptive", action="store_true", help="also run the local_scaling kernel")
    ap.add_argument(
        "--defaults",
        action="store_true",
        help="dkernel's default path (no kernel, sigma or landmarks) at every --n; dask-ml at its "
        "defaults at --daskml-n",
    )
    ap.add_argument(
        "--daskml-n",
        type=lambda v: int(float(v)),
        nargs="+",
        default=[1_000_000],
        help="--defaults: the N at which dask-ml runs too",
    )
    ap.add_argument(
        "--out", default=None, help="--defaults: path without suffix (spectral_million_defaults)"
    )
    ap.add_argument("--child", nargs=5, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        lib, name, n, m, k = args.child
        if lib.endswith("-defaults"):
            print(json.dumps(child_defaults(lib.removesuffix("-defaults"), name, int(n), int(k))))
        else:
            print(json.dumps(child(lib, name, int(n), int(m), int(k))))
        return
    if args.defaults:
        args.n = args.n or [1_000_000, 10_000_000]
        args.timeout = 3600.0 if args.timeout is None else args.timeout
        run_defaults(args)
        return
    if args.n and len(args.n) > 1:
        ap.error("--n takes one value without --defaults")
    args.datasets = args.datasets or ["blobs", "moons"]
    args.timeout = 900.0 if args.timeout is None else args.timeout
    n = args.n[0] if args.n else (50_000 if args.quick else 1_000_000)
    rows: list[dict] = []
    full = not args.quick and args.n is None
    out = RESULTS / ("spectral_million_adaptive.json" if args.adaptive else "spectral_million.json")
    libs = ("dkernel", "dkernel-adaptive", "dask-ml") if args.adaptive else ("dkernel", "dask-ml")

    def save(done: bool) -> None:
        if full:  # written after every run so an interrupted benchmark keeps its rows
            RESULTS.mkdir(exist_ok=True)
            out.write_text(json.dumps({"rows": rows, "complete": done}, indent=2))

    if not args.no_sklearn:
        for name in args.datasets:
            rows += sklearn_stop(name, args.sklearn_timeout, args.sklearn_mem_gib)
            save(False)
    for m in args.landmarks:
        for name in args.datasets:
            k = N_CLUSTERS[name]
            for lib in libs:
                res = run_child([lib, name, str(n), str(m), str(k)], args.timeout)
                res.update({"lib": lib, "dataset": name, "n": n, "landmarks": m})
                rows.append(res)
                print(fmt(res), flush=True)
                save(False)

    print("\nratios dkernel / dask-ml (time, memory) and ARI difference:")
    verdicts = []
    for name in args.datasets:
        for m in args.landmarks:
            a = next(
                r
                for r in rows
                if r["lib"] == "dkernel" and r["dataset"] == name and r.get("landmarks") == m
            )
            b = next(
                r
                for r in rows
                if r["lib"] == "dask-ml" and r["dataset"] == name and r.get("landmarks") == m
            )
            if a.get("status") != "ok":
                print(f"  {name} m={m}: dkernel did not finish ({a.get('status')})")
                verdicts.append(False)
                continue
            if b.get("status") != "ok":
                print(
                    f"  {name} m={m}: dask-ml did not finish ({b.get('status')}); dkernel "
                    f"{a['fit_s']:.1f} s"
                )
                verdicts.append(True)
                continue
            ok = (
                a["fit_s"] <= b["fit_s"]
                and a["peak_rss_gib"] <= b["peak_rss_gib"]
                and a["ari"] >= b["ari"] - 1e-9
            )
            verdicts.append(ok)
            print(
                f"  {name} m={m}: time {a['fit_s'] / b['fit_s']:.2f}x, memory "
                f"{a['peak_rss_gib'] / b['peak_rss_gib']:.2f}x, ARI {a['ari']:.4f} vs "
                f"{b['ari']:.4f} -> {'PASS' if ok else 'FAIL'}"
            )
    if args.adaptive:
        verdicts += adaptive_ratios(rows, args.datasets, args.landmarks)
    if full:
        RESULTS.mkdir(exist_ok=True)
        out.write_text(
            json.dumps({"rows": rows, "complete": True, "pass": all(verdicts)}, indent=2)
        )
        print(f"wrote {out}")


if __name__ == "__main__":
    main()
