"""BLAS threading helpers shared by the numeric kernels.

OpenBLAS's thread count is process-wide. Thin GEMMs (an inner or outer dimension of a few
dozen) gain little from BLAS threads and lose a lot when the cores are shared: on a busy
2-core machine a (900 × 73)·(73 × 1024) float32 product ran at 8 GFLOP/s on two BLAS threads
and at 86 GFLOP/s on one. Such work is split into row blocks instead, one BLAS thread each,
spread over the cores by a thread pool (NumPy and BLAS release the GIL).
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any, TypeVar

from threadpoolctl import ThreadpoolController

T = TypeVar("T")

_CONTROLLER: list[ThreadpoolController] = []
_LOCK = threading.Lock()
_STATE: dict[str, Any] = {"depth": 0, "limiter": None}


def blas_controller() -> ThreadpoolController:
    """The process's threadpoolctl controller (created once: it inspects the loaded libraries)."""
    if not _CONTROLLER:
        _CONTROLLER.append(ThreadpoolController())
    return _CONTROLLER[0]


@contextmanager
def one_blas_thread() -> Iterator[None]:
    """BLAS limited to one thread while any caller is inside (safe across threads).

    Nested or concurrent callers share one limit, set by the first to enter and lifted by the
    last to leave, so an early exit cannot restore the threads under another caller, nor a late
    one leave the process on one thread.
    """
    with _LOCK:
        if _STATE["depth"] == 0:
            _STATE["limiter"] = blas_controller().limit(limits=1, user_api="blas")
        _STATE["depth"] += 1
    try:
        yield
    finally:
        with _LOCK:
            _STATE["depth"] -= 1
            if _STATE["depth"] == 0:
                _STATE["limiter"].restore_original_limits()
                _STATE["limiter"] = None


def _in_dask_worker() -> bool:
    distributed = sys.modules.get("distributed")  # not imported: not in a worker
    if distributed is None:
        return False
    try:
        distributed.get_worker()
    except ValueError:
        return False
    return True


def map_on_cores(
    fn: Callable[[Any], T], items: Sequence[Any], n_threads: int | None = None
) -> list[T]:
    """``[fn(item) for item in items]`` on one BLAS thread each, spread over the cores.

    Inside a ``distributed`` worker the items run in turn (the worker's own threads are the
    parallelism), unless ``n_threads`` is given. The results come back in order, so what is
    summed from them does not depend on the number of threads.
    """
    if n_threads is None:
        n_threads = 1 if _in_dask_worker() else os.cpu_count() or 1
    n_threads = max(1, min(len(items), int(n_threads)))
    with one_blas_thread():
        if n_threads <= 1:
            return [fn(item) for item in items]
        with ThreadPoolExecutor(n_threads) as pool:
            return list(pool.map(fn, items))
