"""Where a job runs, and its input held there: threads of this process for a small job, else
a client of a Dask cluster (the caller's, the one several jobs share, or one of its own)."""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np

from dkernel.errors import DKernelError
from dkernel.io.data import LoadedData
from dkernel.jobs.failures import JobFailedError
from dkernel.jobs.spec import JobSpec
from dkernel.runtime.persist import persist_spread, with_own_keys
from dkernel.runtime.threads import InProcessScheduler
from dkernel.storage.layout import input_dataset
from dkernel.storage.store import failure_cause

if TYPE_CHECKING:
    from dkernel.runtime.connect import SharedCluster
    from dkernel.storage.store import ResultsStore

logger = logging.getLogger("dkernel.jobs.runner")

#: ``runtime.scheduler`` in the store of a job that ran on threads of its own process.
IN_PROCESS_SCHEDULER = "dask threads of the dkernel process"


def start_runtime(
    spec: JobSpec,
    data: LoadedData,
    memory: float,
    exit: ExitStack,
    *,
    client: Any,
    scheduler: str | None,
    cluster: SharedCluster | None,
    n_workers: int | None,
    threads_per_worker: int | None,
    timeout: float,
    security: Any,
    quiet: bool,
) -> tuple[Any, InProcessScheduler | None]:
    """``(client, threads)`` of where the job runs (see :func:`_start_client`), its release
    registered on ``exit``: the job's own threads or cluster close when the job ends, the
    caller's client and the shared cluster stay (their owner closes them)."""
    own_client = client is None
    shared = cluster if scheduler is None else None  # the command's; its caller closes it
    threads = None
    if own_client:
        client, threads = _start_client(
            spec,
            data,
            memory,
            scheduler=scheduler,
            n_workers=n_workers or spec.runtime.get("n_workers"),
            threads_per_worker=threads_per_worker or spec.runtime.get("threads_per_worker"),
            timeout=timeout,
            security=security,
            quiet=quiet,
            cluster=shared,
        )
    if threads is not None:
        exit.callback(threads.close)
    elif own_client and shared is None:
        exit.callback(_close_quietly, client)
    if client is not None:
        from dkernel.runtime.plugins import register_job_plugins

        # the data stage bounded this process's GDAL cache already; on a cluster of its own
        # the job reports a failed task in one line (--log-level debug keeps the workers')
        register_job_plugins(
            client,
            embedded=own_client and scheduler is None and not logger.isEnabledFor(logging.DEBUG),
        )
        exit.callback(_release_shared_quietly, client)  # before the client closes
    return client, threads


def _release_shared_quietly(client: Any) -> None:
    """Take the objects the job's methods put on the workers off them again
    (``dkernel.runtime.shared.share``); a cluster already gone holds nothing."""
    from dkernel.runtime.shared import release_shared

    try:
        release_shared(client)
    except Exception:  # noqa: BLE001
        logger.debug("could not release the job's shared objects", exc_info=True)


def _start_client(
    spec: JobSpec,
    data: LoadedData,
    memory: float,
    *,
    scheduler: str | None,
    n_workers: int | None,
    threads_per_worker: int | None,
    timeout: float,
    security: Any,
    quiet: bool,
    cluster: SharedCluster | None = None,
) -> tuple[Any, InProcessScheduler | None]:
    """Where the job runs, as ``(client, threads)``: Dask's threaded scheduler on threads of
    this process for a small job unless a cluster is asked for (``(None, threads)``, open),
    else a client of an embedded cluster of process workers (``cluster``'s, the one several jobs
    share without a scheduler) or of the scheduler asked for (``(client, None)``); a failure to
    start or connect is one line, exit 1."""
    from dkernel.runtime import connect
    from dkernel.runtime.connect import runs_in_process

    in_process = runs_in_process(
        data.n_samples,
        memory,
        requested=bool(spec.runtime.get("in_process", True)),
        scheduler=scheduler,
        n_workers=n_workers,
    )
    if in_process:
        from dkernel.runtime.connect import check_cluster_size, default_workers

        # the spec's runtime is checked as for a cluster, and the job gets the threads that
        # cluster would have; "auto" limits no worker here (and needs no distributed to read)
        workers, threads_each = default_workers()
        threads_each = threads_per_worker or threads_each
        limit = spec.runtime.get("memory_limit", "auto")
        check_cluster_size(workers, threads_each, None if limit == "auto" else limit)
        threads = InProcessScheduler(workers * threads_each).__enter__()
        if not quiet:
            logger.info(
                f"a small job: running on {threads.n_threads} threads of this process, without "
                "a cluster or dashboard (--workers N, or runtime.in_process: false, starts "
                "process workers and one)"
            )
        return None, threads
    if cluster is not None:
        return _started(spec, scheduler, cluster.client), None  # logs its link once, started
    client = _started(
        spec,
        scheduler,
        lambda: connect(
            scheduler,
            n_workers=n_workers,
            threads_per_worker=threads_per_worker,
            memory_limit=spec.runtime.get("memory_limit", "auto"),
            timeout=timeout,
            quiet=True,
            security=security,
        ),
    )
    if not quiet:
        logger.info(f"Dask dashboard: {client.dashboard_link}")
    return client, None


def _started(spec: JobSpec, scheduler: str | None, start: Callable[[], Any]) -> Any:
    """``start()``'s client; a failure to start or connect is one line, exit 1."""
    try:
        return start()
    except DKernelError:
        raise
    except Exception as exc:  # noqa: BLE001  (nothing was written yet: one line, exit 1)
        what = f"connect to {scheduler}" if scheduler else "start the embedded Dask cluster"
        raise JobFailedError(
            f"job {spec.name!r} could not {what}: {failure_cause(exc)}", spec.output
        ) from exc


def _close_quietly(client: Any) -> None:
    """Close the job's own cluster; a worker slow to stop (a loaded machine) only delays the
    exit: the job's outcome is already recorded in the store, so a close timeout is logged,
    not reported as the job failing."""
    try:
        client.close()
    except TimeoutError:
        logger.warning(
            "the job's Dask cluster took too long to stop; its processes exit with this one"
        )


def runtime_info(
    client: Any, scheduler: str | None, threads: InProcessScheduler | None = None
) -> dict[str, Any]:
    """Where the job ran (no environment, no credentials): scheduler kind and workers."""
    if threads is not None:
        return {"scheduler": IN_PROCESS_SCHEDULER, "n_workers": 1, "n_threads": threads.n_threads}
    try:
        info = client.scheduler_info()
        workers = info.get("workers", {})
        n_threads = sum(int(w.get("nthreads", 0)) for w in workers.values())
    except Exception:  # noqa: BLE001
        workers, n_threads = {}, 0
    embedded = "embedded LocalCluster"
    if getattr(getattr(client, "cluster", None), "processes", True) is False:
        embedded = "in-process LocalCluster (threads)"
    return {
        "scheduler": "external" if scheduler else embedded,
        "n_workers": len(workers),
        "n_threads": n_threads,
    }


def _held_in_memory(data: LoadedData, client: Any) -> LoadedData:
    """``data`` with the lazy pixel features of an image persisted on the workers when they
    take at most ``PERSIST_BYTES``: a method passes over them several times (MSSC: the density
    sample, the band check, the stream through mean shift, the affinity sample), and each pass
    would otherwise read and decode the file again.

    Image features only: every computation on them is row by row or an exact selection, so a
    chunk recomputed after a lost worker, or moved between workers, gives the same results; a
    table's may feed sums whose last bits follow where a chunk's memory lies (a PCK job's
    eigenvalues differed after a worker was killed)."""
    import dask.array as da

    from dkernel._budget import PERSIST_BYTES

    X = data.X
    if data.raster is None or not isinstance(X, da.Array):
        return data
    if math.isnan(X.nbytes) or X.nbytes > PERSIST_BYTES:
        return data
    return replace(data, X=persist_spread(with_own_keys(X), client))


def _write_input(store: ResultsStore, data: LoadedData) -> None:
    n_missing = int(np.isnan(np.asarray(data.X)).sum()) if isinstance(data.X, np.ndarray) else None
    store.write(
        "input",
        input_dataset(
            n_samples=data.n_samples,
            n_features=data.n_features,
            n_missing=n_missing,
            feature_names=data.feature_names,
            labels_true=data.y,
            meta=data.meta,
        ),
    )


def written_input(store: ResultsStore, data: LoadedData, client: Any) -> LoadedData:
    """``data`` held where the job runs (:func:`_held_in_memory`), its summary written to the
    store's ``/input`` group (timed: ``input``)."""
    t = time.perf_counter()
    data = _held_in_memory(data, client)
    _write_input(store, data)
    store.record_timing("input", time.perf_counter() - t)
    return data
