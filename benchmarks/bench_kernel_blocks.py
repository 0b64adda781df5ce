"""Blocked RBF kernel written to Zarr vs plain NumPy GEMM, in one run.

Throughput is measured in kernel entries per second. The reference is the cost of the one
BLAS call a dense kernel needs (``X @ X.T`` in NumPy, same dtype, same threads); the blocked
path adds the norms, the exp, Dask scheduling and the Zarr write of every block. The goal
for float32 is a ratio >= 0.7.

    python benchmarks/bench_kernel_blocks.py            # N = 16 384
    python benchmarks/bench_kernel_blocks.py --quick    # N = 4 096
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

import dask
import numpy as np
import xarray as xr

from dkernel.graphs.blocked import blocked_kernel
from dkernel.kernels.rbf import rbf_block
from dkernel.storage import ResultsStore


def best_of(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--n", type=int, default=None)
    parser.add_argument("--features", type=int, nargs="+", default=[32, 128, 512])
    parser.add_argument("--block", type=int, default=4096)
    args = parser.parse_args()
    n = args.n or (4096 if args.quick else 16384)
    rng = np.random.default_rng(0)
    tmp = Path(tempfile.mkdtemp())
    rows = []
    try:
        for dtype in ("float32", "float64"):
            for p in args.features:
                X = rng.normal(size=(n, p)).astype(dtype)
                gemm = best_of(lambda X=X: X @ X.T, 2)

                def write(X=X, dtype=dtype, p=p):
                    store = ResultsStore.create(
                        tmp / "k.zarr", job={"name": "bench"}, seed=0, overwrite=True
                    )
                    K = blocked_kernel(
                        rbf_block, X, block_rows=args.block, dtype=dtype, sigma=float(np.sqrt(p))
                    )
                    store.write("kernel", xr.Dataset({"kernel": (("sample", "sample_"), K)}))

                with dask.config.set(scheduler="threads"):
                    blocked = best_of(write, 2)
                rows.append((dtype, p, n * n / gemm, n * n / blocked, gemm / blocked))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    print(f"\nN = {n}, block {args.block}, threaded scheduler; entries/s (higher is better)")
    print(f"{'dtype':8} {'p':>5} {'numpy GEMM':>14} {'blocked→Zarr':>14} {'ratio':>7}")
    for dtype, p, g, b, r in rows:
        print(f"{dtype:8} {p:5d} {g:14.3e} {b:14.3e} {r:7.2f}")


if __name__ == "__main__":
    main()
