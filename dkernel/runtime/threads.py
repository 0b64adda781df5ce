"""Dask's threaded scheduler on threads of this process: where a small job runs.

A job too small for a cluster (:func:`dkernel.runtime.connect.runs_in_process`) needs no
scheduler process, no event loop and no workers: ``dask.threaded`` runs its tasks on a pool of
threads of this process. Beside an in-process ``distributed`` cluster this leaves out
importing ``distributed`` (0.1–0.2 s on 2 CPUs), its event loop and the asyncio threads that
take the GIL from the tasks while they run: the demo job took 4.2 instead of 5.5 s (2 CPUs).
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Mapping
from typing import Any


def default_threads(cpu_count: int | None = None) -> int:
    """Threads a small job runs on: one per CPU core."""
    return max(1, cpu_count or os.cpu_count() or 1)


class InProcessScheduler:
    """While open, Dask computes on ``n_threads`` threads of this process, each task with the
    BLAS on one thread, and counts the tasks it runs.

    The BLAS limit is the one process workers get from distributed's ``nanny.pre-spawn-environ``
    (``OMP_NUM_THREADS=1``): the same BLAS threading, so the tasks' results are those of a
    process-worker run bit for bit, and no oversubscription of the cores. The scheduler is set
    as a callable in ``dask.config``: Dask then neither looks for a ``distributed`` client
    (``dkernel.runtime.progress.active_client`` neither) nor imports ``distributed``.
    ``n_tasks`` counts the tasks of the graphs it was given.

    Parameters
    ----------
    n_threads : int, optional
        Threads that run tasks; by default one per CPU core.

    Examples
    --------
    >>> import dask.array as da
    >>> with InProcessScheduler(2) as threads:
    ...     total = float(da.ones(10, chunks=5).sum().compute())
    >>> total, threads.n_tasks > 0
    (10.0, True)
    """

    def __init__(self, n_threads: int | None = None) -> None:
        self.n_threads = default_threads() if n_threads is None else int(n_threads)
        if self.n_threads < 1:
            raise ValueError(f"n_threads must be >= 1; got {n_threads}.")
        self.n_tasks = 0
        self._lock = threading.Lock()
        self._undo = contextlib.ExitStack()

    def get(self, dsk: Any, keys: Any, **kwargs: Any) -> Any:
        """Dask's threaded ``get`` on this scheduler's threads; counts the graph's tasks."""
        import dask.threaded

        # what dask.local.get_async does first: the graph of an expression, materialised once
        graph = dsk if isinstance(dsk, Mapping) else dsk.__dask_graph__()
        with self._lock:
            self.n_tasks += len(graph)
        kwargs.setdefault("num_workers", self.n_threads)
        return dask.threaded.get(graph, keys, **kwargs)

    def __enter__(self) -> InProcessScheduler:
        import dask
        from threadpoolctl import threadpool_limits

        self._undo.enter_context(threadpool_limits(limits=1))
        # rechunks by tasks: no client can exist here (Dask would import distributed to ask)
        self._undo.enter_context(
            dask.config.set({"scheduler": self.get, "array.rechunk.method": "tasks"})
        )
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Restore the BLAS threads and Dask's scheduler as they were (idempotent)."""
        self._undo.close()
