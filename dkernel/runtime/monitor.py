"""Resource accounting of a job on its Dask cluster: tasks run and worker memory.

Used by the job runner; the summary lands in the results store's root attribute
``resources`` and ``dkernel show`` prints it.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

from dkernel.errors import DKernelError

#: Seconds a job waits with no worker on its cluster before it fails (every worker killed or
#: gone: the scheduler would hold the tasks forever, issue 54). ``DKERNEL_NO_WORKERS_TIMEOUT``
#: overrides it: a new worker may take longer to join on a slow batch system.
NO_WORKERS_TIMEOUT_S = 60.0
_NO_WORKERS_ENV = "DKERNEL_NO_WORKERS_TIMEOUT"


class WorkersLostError(DKernelError):
    """The job's cluster had no worker for longer than the job waits for one."""


def no_workers_timeout() -> float:
    """:data:`NO_WORKERS_TIMEOUT_S`, or ``$DKERNEL_NO_WORKERS_TIMEOUT`` when that is a positive
    number of seconds."""
    try:
        value = float(os.environ.get(_NO_WORKERS_ENV, ""))
    except ValueError:
        return NO_WORKERS_TIMEOUT_S
    return value if 0 < value < float("inf") else NO_WORKERS_TIMEOUT_S


def _peak_rss() -> int:
    """This process's peak resident memory so far (bytes)."""
    import resource
    import sys

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak if sys.platform == "darwin" else peak * 1024)  # Linux reports KiB


def _worker_snapshot(dask_worker: Any) -> dict[str, Any]:
    """Runs on each worker: tasks executed so far, current and peak RSS of the process."""
    import psutil

    return {
        "name": str(dask_worker.name),
        "executed": int(dask_worker.state.executed_count),
        "rss": int(psutil.Process().memory_info().rss),
        "peak_rss": _peak_rss(),
    }


class ResourceMonitor:
    """Context manager that measures what a job used on ``client``'s cluster.

    Task counts are the difference of each worker's executed-task counter between entry and
    exit; peak memory is the larger of the sampled worker memory (scheduler heartbeats, every
    ``interval`` seconds) and the worker process's peak RSS at exit (on a long-lived external
    worker this is the process's lifetime peak).

    Parameters
    ----------
    client : distributed.Client
    interval : float
        Seconds between memory samples.

    Notes
    -----
    Cost: one ``client.run`` round trip at entry and exit and one ``scheduler_info`` call per
    interval; nothing on the workers' task path.

    The samples also watch for a cluster left without workers: after
    ``no_workers_timeout()`` seconds with none, the client's futures are cancelled (so the
    job's wait ends) and the ``with`` block raises ``WorkersLostError``.
    """

    def __init__(self, client: Any, interval: float = 0.5) -> None:
        self.client = client
        self.interval = interval
        self.lost: str | None = None
        self._no_workers_since: float | None = None
        self._start: dict[str, dict[str, Any]] = {}
        self._end: dict[str, dict[str, Any]] = {}
        self._peak: dict[str, int] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _snapshot(self) -> dict[str, dict[str, Any]]:
        try:
            return dict(self.client.run(_worker_snapshot))
        except Exception:  # noqa: BLE001  (a worker may be gone; accounting is best effort)
            return {}

    def _sample(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                workers = self.client.scheduler_info(n_workers=-1).get("workers", {})
            except TypeError:
                workers = self.client.scheduler_info().get("workers", {})
            except Exception:  # noqa: BLE001
                continue
            for addr, w in workers.items():
                mem = int(w.get("metrics", {}).get("memory", 0) or 0)
                self._peak[addr] = max(self._peak.get(addr, 0), mem)
            if self._watch_workers(len(workers)):
                return

    def _watch_workers(self, n_workers: int) -> bool:
        """Whether the cluster has been without workers for too long; if so the job's futures
        are cancelled with the reason."""
        now = time.monotonic()
        if n_workers:
            self._no_workers_since = None
            return False
        if self._no_workers_since is None:
            self._no_workers_since = now
        waited = now - self._no_workers_since
        if waited < no_workers_timeout():
            return False
        self.lost = (
            f"the Dask cluster has had no worker for {waited:.0f} s: every worker was lost "
            "(killed, out of memory, or its machine gone) and none joined again. Start "
            f"workers (or raise {_NO_WORKERS_ENV}), then run the job again with --resume: "
            "the finished groups are kept."
        )
        futures = self._futures()
        if futures:
            try:
                self.client.cancel(futures, reason="workers-lost", msg=self.lost)
            except Exception:  # noqa: BLE001  (the client may be closing; __exit__ still raises)
                pass
        return True

    def _futures(self) -> list:
        """The client's pending futures (the job's computations)."""
        from distributed import Future

        return [Future(key, self.client) for key in list(self.client.futures)]

    def __enter__(self) -> ResourceMonitor:
        self._start = self._snapshot()
        self._thread = threading.Thread(target=self._sample, name="dkernel-monitor", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self.lost is not None:
            raise WorkersLostError(self.lost) from exc[1]
        self._end = self._snapshot()

    def summary(self) -> dict[str, Any]:
        """``{"n_tasks", "n_workers", "peak_worker_memory", "workers": {...}}`` (bytes)."""
        workers: dict[str, dict[str, Any]] = {}
        for addr in sorted(set(self._end) | set(self._peak)):
            end = self._end.get(addr, {})
            start = self._start.get(addr, {})
            executed = end.get("executed", 0) - start.get("executed", 0) if end else None
            peak = max(self._peak.get(addr, 0), int(end.get("peak_rss", 0)))
            workers[end.get("name", addr)] = {"tasks": executed, "peak_memory": peak}
        counted = [w["tasks"] for w in workers.values() if w["tasks"] is not None]
        return {
            "n_tasks": int(sum(counted)),
            "n_workers": len(workers),
            "peak_worker_memory": max((w["peak_memory"] for w in workers.values()), default=0),
            "workers": workers,
        }


class InProcessMonitor:
    """What a job used on the threads of this process (an
    :class:`~dkernel.runtime.threads.InProcessScheduler`): the tasks it ran, and the peak
    memory of this process, reading the input included. Same interface and summary as
    :class:`ResourceMonitor`, with one worker: ``"this process"``."""

    def __init__(self, threads: Any) -> None:
        self.threads = threads
        self._start = self._tasks = 0

    def __enter__(self) -> InProcessMonitor:
        self._start = self.threads.n_tasks
        return self

    def __exit__(self, *exc: Any) -> None:
        self._tasks = self.threads.n_tasks - self._start

    def summary(self) -> dict[str, Any]:
        """``{"n_tasks", "n_workers", "peak_worker_memory", "workers": {...}}`` (bytes)."""
        peak = _peak_rss()
        return {
            "n_tasks": int(self._tasks),
            "n_workers": 1,
            "peak_worker_memory": peak,
            "workers": {"this process": {"tasks": int(self._tasks), "peak_memory": peak}},
        }
