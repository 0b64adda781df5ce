"""Matrix-free top-k eigenpairs of a Zarr-stored RBF kernel, streamed block by block.

Acceptance (issue 4): top-10 eigenpairs of a 40 000 × 40 000 RBF kernel stored in Zarr with
relative residual < 1e-6 while peak RSS stays < 3 GiB.

Phases run in fresh subprocesses so each reports its own peak RSS:
1. ``write``: blocked RBF kernel (float32, 2000 × 2000 chunks) → ``/kernel`` of a results store;
2. ``solve``: :class:`ZarrKernelOperator` + :func:`matrix_free_eigh` (subspace iteration);
3. (``--quick`` only, N small) dense ``scipy.linalg.eigh`` on the in-memory kernel, the
   alternative a user would otherwise use, for timing and agreement. At N = 40 000 the dense
   route needs ≈ 38 GiB (kernel + LAPACK workspace in float64) and is not run.

Usage: python benchmarks/bench_eigensolver_zarr.py [--quick] [--n N] [--keep]
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).parent / "results"


def data(n: int) -> np.ndarray:
    from sklearn.datasets import make_blobs

    X, _ = make_blobs(n, n_features=5, centers=6, cluster_std=1.5, random_state=0)
    return X


def peak_rss_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def phase_write(n: int, path: str) -> dict:
    import dask
    import xarray as xr

    from dkernel.graphs.blocked import blocked_kernel
    from dkernel.kernels.registry import make_kernel
    from dkernel.storage.store import ResultsStore

    X = data(n)
    kernel = make_kernel("rbf", X)
    t = time.perf_counter()
    K = blocked_kernel(kernel.block, X, block_rows=2000, dtype=np.float32)
    store = ResultsStore.create(path, job={"method": "bench-eigensolver"}, seed=0, overwrite=True)
    with dask.config.set(scheduler="threads", num_workers=2):
        store.write(
            "kernel",
            xr.Dataset({"kernel": (("sample", "sample_"), K)}, attrs=dict(kernel.params)),
        )
    store.mark_complete()
    size = sum(f.stat().st_size for f in Path(path).rglob("*") if f.is_file())
    return {
        "n": n,
        "sigma": kernel.params["sigma"],
        "write_s": time.perf_counter() - t,
        "disk_gib": size / 2**30,
        "peak_rss_gib": peak_rss_gib(),
    }


def phase_solve(path: str, k: int, method: str, block: int, tol: float) -> dict:
    from dkernel.linalg.matfree import matrix_free_eigh
    from dkernel.storage.kernel_operator import ZarrKernelOperator

    op = ZarrKernelOperator.from_store(path)
    t = time.perf_counter()
    res = matrix_free_eigh(op.matmat, op.shape[0], k, method=method, block_size=block, tol=tol)
    elapsed = time.perf_counter() - t
    np.save(Path(path).with_suffix(".vectors.npy"), res.vectors)
    return {
        "method": method,
        "block_size": block,
        "solve_s": elapsed,
        "passes": res.n_passes,
        "gib_read": op.bytes_read / 2**30,
        "converged": res.converged,
        "max_rel_residual": float(res.residuals.max()),
        "eigenvalues": res.values.tolist(),
        "peak_rss_gib": peak_rss_gib(),
    }


def phase_dense(n: int, k: int, path: str) -> dict:
    from scipy import linalg

    from dkernel.kernels.registry import make_kernel

    X = data(n)
    kernel = make_kernel("rbf", X)
    t = time.perf_counter()
    K = kernel(X).astype(np.float32).astype(np.float64)  # same values as stored
    w, V = linalg.eigh(K, subset_by_index=[n - k, n - 1])
    elapsed = time.perf_counter() - t
    w, V = w[::-1], V[:, ::-1]
    mf = np.load(Path(path).with_suffix(".vectors.npy"))
    cos = np.abs(np.sum(mf * V, axis=0))
    return {
        "dense_s": elapsed,
        "eigenvalues": w.tolist(),
        "min_abs_cos_with_dense": float(cos.min()),
        "peak_rss_gib": peak_rss_gib(),
    }


def run_phase(args: list[str]) -> dict:
    out = subprocess.run(
        [sys.executable, __file__, *args], capture_output=True, text=True, check=False
    )
    if out.returncode:
        raise RuntimeError(out.stderr[-3000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="N = 6000 with the dense comparison")
    ap.add_argument("--n", type=int, default=None)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--method", default="subspace")
    ap.add_argument("--block", type=int, default=40)
    ap.add_argument("--tol", type=float, default=1e-7)
    ap.add_argument("--keep", action="store_true", help="keep the kernel store")
    ap.add_argument("--phase", choices=("write", "solve", "dense"), help=argparse.SUPPRESS)
    ap.add_argument("--path", help=argparse.SUPPRESS)
    args = ap.parse_args()
    n = args.n or (6000 if args.quick else 40_000)
    if args.phase == "write":
        print(json.dumps(phase_write(n, args.path)))
        return
    if args.phase == "solve":
        print(json.dumps(phase_solve(args.path, args.k, args.method, args.block, args.tol)))
        return
    if args.phase == "dense":
        print(json.dumps(phase_dense(n, args.k, args.path)))
        return

    tmp = Path(tempfile.mkdtemp(prefix="dkernel-bench-eig-"))
    path = str(tmp / "kernel.zarr")
    try:
        w = run_phase(["--phase", "write", "--n", str(n), "--path", path])
        print(
            f"wrote {n}² kernel: {w['write_s']:.1f} s, {w['disk_gib']:.2f} GiB on disk, "
            f"peak RSS {w['peak_rss_gib']:.2f} GiB",
            flush=True,
        )
        s = run_phase(
            [
                "--phase",
                "solve",
                "--path",
                path,
                "--k",
                str(args.k),
                "--method",
                args.method,
                "--block",
                str(args.block),
                "--tol",
                str(args.tol),
            ]
        )
        print(
            f"matrix-free {s['method']} (block {s['block_size']}): {s['solve_s']:.1f} s, "
            f"{s['passes']} passes, {s['gib_read']:.1f} GiB read, max relative residual "
            f"{s['max_rel_residual']:.2e}, peak RSS {s['peak_rss_gib']:.2f} GiB",
            flush=True,
        )
        d = None
        dense_need = 3 * 8 * n * n / 2**30
        if n <= 12_000:
            d = run_phase(["--phase", "dense", "--n", str(n), "--k", str(args.k), "--path", path])
            print(
                f"dense scipy.linalg.eigh: {d['dense_s']:.1f} s, peak RSS "
                f"{d['peak_rss_gib']:.2f} GiB; min |cos| with matrix-free vectors "
                f"{d['min_abs_cos_with_dense']:.8f}; speed ratio dense/matrix-free "
                f"{d['dense_s'] / s['solve_s']:.2f}"
            )
        else:
            print(f"dense scipy.linalg.eigh: not run (needs ≈ {dense_need:.0f} GiB in float64)")
        ok = s["max_rel_residual"] < 1e-6 and s["peak_rss_gib"] < 3.0
        print(f"acceptance (residual < 1e-6, solve peak RSS < 3 GiB): {'PASS' if ok else 'FAIL'}")
        if not args.quick:
            RESULTS.mkdir(exist_ok=True)
            out = RESULTS / "spectral_eigensolver_zarr.json"
            out.write_text(
                json.dumps(
                    {"write": w, "solve": s, "dense": d, "dense_needs_gib": dense_need, "pass": ok},
                    indent=2,
                )
            )
            print(f"wrote {out}")
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
