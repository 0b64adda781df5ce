"""Running a job: spec → validation → data → cost check → cluster → method → store."""

from __future__ import annotations

import errno
import logging
import math
import os
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from dkernel._budget import SizeLimit, format_size, memory_limit
from dkernel.errors import DKernelError, InvalidInputError, ResourceLimitError
from dkernel.io.data import LoadedData
from dkernel.jobs.outputs import check_side_outputs, prefetch_map_writers, write_outputs
from dkernel.jobs.prepare import (  # noqa: F401  (re-exported: the pre-cluster checks)
    HANDLES_MISSING,
    check_cost,
    check_finite,
    load_data,
    prepare_job,
)
from dkernel.jobs.registry import JobContext, StoreView, get_method, persist, with_own_keys
from dkernel.jobs.spec import JobSpec, OutputPolicy
from dkernel.runtime.threads import InProcessScheduler
from dkernel.storage.layout import input_dataset
from dkernel.storage.lock import Lease, acquire_lease
from dkernel.storage.remote import Location, as_location, check_job_store, is_remote
from dkernel.storage.store import (
    ResultsStore,
    check_resumable,
    check_target,
    check_writable,
    failure_cause,
)

if TYPE_CHECKING:
    from dkernel.runtime.connect import SharedCluster

logger = logging.getLogger(__name__)

#: ``runtime.scheduler`` in the store of a job that ran on threads of its own process.
IN_PROCESS_SCHEDULER = "dask threads of the dkernel process"


class JobFailedError(DKernelError, RuntimeError):
    """A job that failed while running; its store is marked ``failed``."""

    def __init__(self, message: str, store: Location) -> None:
        self.store = store
        super().__init__(message)


def _check_cluster_memory(spec: JobSpec, data: LoadedData, client: Any) -> None:
    """The cost estimate again, ``max_memory`` capped at the workers' total memory limit.

    Only known once the cluster answers; a worker without a limit caps nothing (nor do the
    threads of this process: ``client`` None). Refused before the store is opened."""
    if client is None:
        return
    workers = client.scheduler_info(n_workers=-1).get("workers", {}).values()
    limits = [float(w.get("memory_limit") or 0) for w in workers]
    if not limits or not all(limits):
        return
    total, current = sum(limits), memory_limit(spec.limits.get("max_memory"))
    if total >= current:
        return
    capped = SizeLimit(
        total,
        f"{current.note}, capped at the {len(limits)} workers' total memory limit "
        f"{format_size(total)}",
    )
    check_cost(replace(spec, limits={**spec.limits, "max_memory": capped}), data)


def run_job(
    spec: JobSpec | str | Path,
    *,
    scheduler: str | None = None,
    n_workers: int | None = None,
    threads_per_worker: int | None = None,
    output: str | Path | None = None,
    overwrite: bool = False,
    resume: bool = False,
    progress: bool = True,
    quiet: bool = False,
    client: Any = None,
    cluster: SharedCluster | None = None,
    timeout: float = 10.0,
    security: Any = None,
    output_policy: OutputPolicy | None = None,
) -> Path | str:
    """Run a job end to end and return the path (or URL) of its complete results store.

    Parameters
    ----------
    spec : JobSpec or path
        A validated spec or the path of a YAML spec.
    scheduler : str, optional
        Address of a running Dask scheduler; an embedded LocalCluster otherwise.
    n_workers, threads_per_worker : int, optional
        Size of the embedded cluster (default: the spec's ``runtime``, else the machine).
    output : path or URL, optional
        Overrides the spec's ``output`` (not subject to ``output_policy``: the caller chose it).
        A URL (``s3://bucket/x.zarr``) writes the store to an object store, with the spec's
        ``store_options`` or the environment's credentials.
    overwrite : bool
        Replace an existing complete store.
    resume : bool
        Continue an unfinished store of the same spec: finished groups are kept, interrupted
        ones write only their missing chunks. Without a store to resume the job starts
        fresh; a store of a different spec is refused (use ``overwrite``).
    progress : bool
        Show progress bars.
    quiet : bool
        Do not log the dashboard link of the cluster the job starts or connects to.
    client : distributed.Client, optional
        Use this client instead of creating one (notebooks, tests).
    cluster : SharedCluster, optional
        Several jobs' cluster: a job that is not small runs on it (and starts it if no job has).
    timeout : float
        Seconds to wait for ``scheduler``.
    security : distributed.Security, optional
        TLS settings for ``scheduler`` (see ``dkernel.runtime.load_security``).
    output_policy : OutputPolicy, optional
        Confine the spec's ``output`` to these roots (the CLI always passes one).

    Raises
    ------
    SpecError, InvalidInputError, ResourceLimitError, StoreError
        Invalid spec, data, output or limits: raised before any cluster starts or store is
        written.
    JobFailedError
        The method failed while running; the store is marked ``failed`` with the error.

    Notes
    -----
    What the job does is logged (INFO) to the ``dkernel.jobs`` loggers: the ``dkernel``
    command shows it; in Python, ``logging.basicConfig(level="INFO")`` does.
    Root attributes record per-phase wall times (``timings``) and, from the scheduler, the
    number of tasks run and the peak memory of each worker (``resources``).
    """
    output = _callers_store(output)
    spec, data = prepare_job(spec)
    if output is not None:
        spec = replace(spec, output=output)
    elif output_policy is not None:
        spec = replace(spec, output=output_policy.confine(spec.output))
    chosen = output is not None or output_policy is not None
    _check_output(spec, data, replace_store=overwrite or resume, chosen=chosen)
    # one writer per store: the lease is taken before any cluster starts and held until the
    # store is marked complete or failed (a live holder is refused, naming it)
    lease = acquire_lease(
        spec.output, command=f"dkernel job {spec.name!r}", storage_options=spec.store_options
    )
    try:
        _run_leased(
            spec,
            data,
            lease=lease,
            scheduler=scheduler,
            n_workers=n_workers,
            threads_per_worker=threads_per_worker,
            overwrite=overwrite,
            resume=resume,
            progress=progress,
            quiet=quiet,
            client=client,
            cluster=cluster,
            timeout=timeout,
            security=security,
        )
    finally:
        lease.release()
    return spec.output


def _callers_store(output: str | Path | None) -> Any:
    """The caller's ``output`` as a location, checked before the data is read (``memory://``
    is refused: the store would vanish with the process)."""
    if output is None:
        return None
    location = as_location(output)
    check_job_store(location)
    return location


def _check_output(spec: JobSpec, data: LoadedData, *, replace_store: bool, chosen: bool) -> None:
    """The checks of the output before any cluster starts; ``chosen``: the caller chose the
    output, so the disk where it goes caps the cost estimate."""
    options = spec.store_options
    if is_remote(spec.output):
        # an object store is reached (bounded time) before anything else reads or writes it
        check_writable(spec.output, options)
        check_target(spec.output, overwrite=replace_store, storage_options=options)
        check_side_outputs(spec.output, spec.params, data, options)
        return
    check_target(spec.output, overwrite=replace_store, storage_options=options)
    check_writable(spec.output)
    check_side_outputs(spec.output, spec.params, data)
    if chosen:
        check_cost(spec, data, output=spec.output)  # the disk of the final output


def _run_leased(
    spec: JobSpec,
    data: LoadedData,
    *,
    lease: Lease,
    scheduler: str | None,
    n_workers: int | None,
    threads_per_worker: int | None,
    overwrite: bool,
    resume: bool,
    progress: bool,
    quiet: bool,
    client: Any,
    cluster: SharedCluster | None,
    timeout: float,
    security: Any,
) -> None:
    t_start = time.perf_counter()
    if lease.info.get("took_over"):
        old = lease.info["took_over"]
        logger.info(
            f"took over the stale lease of pid {old.get('pid')} on {old.get('host')}: "
            f"{old.get('reason', 'its writer is gone')}"
        )
    # checked again under the lease: another writer may have finished meanwhile. A resume is
    # checked against the stored spec, seed and metadata here, before any cluster starts
    options = spec.store_options
    status = check_target(spec.output, overwrite=overwrite or resume, storage_options=options)
    resume = resume and status is not None
    if resume:
        check_resumable(spec.output, job=spec.to_dict(), seed=spec.seed, storage_options=options)
    method = get_method(spec.method)

    cost = method.estimate and method.estimate(spec.params, data.n_samples, data.n_features)
    memory = cost.memory_bytes if cost else 0.0
    own_client = client is None
    shared = cluster if scheduler is None else None  # the command's cluster; its caller closes it
    threads = None
    if own_client:
        client, threads = _start_runtime(
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
    try:
        if client is not None:
            from dkernel.runtime.plugins import register_job_plugins

            # prepare_job bounded this process's GDAL cache already; on a cluster of its own
            # the job reports a failed task in one line (--log-level debug keeps the workers')
            register_job_plugins(
                client,
                embedded=own_client
                and scheduler is None
                and not logger.isEnabledFor(logging.DEBUG),
            )
        _check_cluster_memory(spec, data, client)
        store = _open_store(spec, data, resume=resume)
        # every compute inside the job goes to the job's client: with another client current
        # (a notebook's `with Client(...)`), a compute sent from it could reach the scheduler
        # before this client's persist of its input ("lost dependencies")
        with nullcontext() if client is None else client.as_current():
            _run_in_store(
                spec,
                data,
                store,
                lease=lease,
                method=method,
                client=client,
                threads=threads,
                scheduler=scheduler,
                progress=progress,
                t_start=t_start,
            )
    finally:
        if threads is not None:
            threads.close()
        elif own_client and shared is None:
            _close_quietly(client)
    logger.info(f"complete in {time.perf_counter() - t_start:.1f} s: {spec.output}")


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


def _start_runtime(
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


def _open_store(spec: JobSpec, data: LoadedData, *, resume: bool) -> ResultsStore:
    """Create (or reopen, to resume) the job's store; a failure is one line, exit 1."""
    try:
        options = spec.store_options
        if resume:
            store = ResultsStore.resume(
                spec.output, job=spec.to_dict(), seed=spec.seed, storage_options=options
            )
            logger.info(f"resuming {spec.output} (finished groups are kept)")
            return store
        return ResultsStore.create(
            spec.output,
            job=spec.to_dict(),
            seed=spec.seed,
            overwrite=True,
            storage_options=options,
        )
    except DKernelError:
        raise
    except Exception as exc:  # noqa: BLE001
        raise JobFailedError(
            f"job {spec.name!r} could not {'reopen' if resume else 'create'} its results "
            f"store: {_describe_failure(exc, spec, _disk_needed(spec, data))}",
            spec.output,
        ) from exc


def _run_in_store(
    spec: JobSpec,
    data: LoadedData,
    store: ResultsStore,
    *,
    lease: Lease,
    method: Any,
    client: Any,
    threads: InProcessScheduler | None,
    scheduler: str | None,
    progress: bool,
    t_start: float,
) -> None:
    """Run the method into ``store``; every failure marks it ``failed`` with a one-line cause.

    The method computes; :func:`~dkernel.jobs.outputs.write_outputs` writes what it yields.

    Disk is set aside beside the lease (:meth:`StoreLease.reserve`) and given back, half just
    before the final ``complete`` write and all of it before a ``failed`` one, so that the
    status is written even when another process fills the disk.
    """
    from dkernel.runtime.monitor import InProcessMonitor, ResourceMonitor

    identity = _identity(spec.output)
    reserve = _reserve_bytes(spec.output)
    if not lease.reserve(reserve):
        logger.warning(
            f"could not set {format_size(reserve)} aside beside {spec.output} for the final "
            "status write: its filesystem is (nearly) full"
        )
    monitor = None
    try:
        store.update_attrs(runtime=runtime_info(client, scheduler, threads))
        logger.info(
            f"job {spec.name!r}: method {spec.method}, {data.n_samples} samples × "
            f"{data.n_features} features → {spec.output}"
        )
        monitor = ResourceMonitor(client) if threads is None else InProcessMonitor(threads)
        with monitor:
            t = time.perf_counter()
            data = _held_in_memory(data, client)
            _write_input(store, data)
            store.record_timing("input", time.perf_counter() - t)
            ctx = JobContext(
                spec=spec,
                params=spec.params,
                data=data,
                client=client,
                store=StoreView(store),
                seed=spec.seed,
                progress=progress,
            )
            prefetch_map_writers(ctx)
            write_outputs(method.compute(ctx), store, ctx)
        store.update_attrs(resources=monitor.summary())
        store.record_timing("total", time.perf_counter() - t_start)
        lease.free_reserve(keep=reserve // 2)  # the other half for a `failed` write
        _check_in_place(spec.output, identity)  # never mark a replaced directory complete
        lease.check_held()
        store.mark_complete()
    except BaseException as exc:
        cause, marked = _record_failure(
            store, exc, spec=spec, lease=lease, identity=identity, needed=_disk_needed(spec, data)
        )
        if monitor is not None and marked:
            try:
                summary = monitor.summary()
                _status_write(store, lambda: store.update_attrs(resources=summary))
            except Exception:  # noqa: BLE001  (best effort: the scheduler may be gone)
                pass
        # bad input found while running keeps its own type (exit code 2 in the CLI)
        if isinstance(exc, KeyboardInterrupt | InvalidInputError | ResourceLimitError):
            raise
        raise JobFailedError(
            f"job {spec.name!r} failed while running: {cause}", spec.output
        ) from exc


# ------------------------------------------------------------------------------------------
# failures while running
# ------------------------------------------------------------------------------------------

#: Space set aside beside the lease for the final status writes: this much plus four times
#: the root metadata (rewritten through a temporary copy; half the reserve is kept through
#: the ``complete`` write for a ``failed`` one), at most :data:`_RESERVE_MAX`.
RESERVE_BYTES = 128 * 1024
_RESERVE_MAX = 16 << 20


def _reserve_bytes(path: Location) -> int:
    if is_remote(path):
        return 0
    try:
        root = (Path(path) / "zarr.json").stat().st_size
    except OSError:
        root = 0
    return min(_RESERVE_MAX, RESERVE_BYTES + 4 * root)


class _StoreGone(Exception):
    """The store directory was removed or replaced while the job ran."""


def _identity(path: Location) -> tuple[int, int] | None:
    if is_remote(path):
        return None
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _gone(path: Location, identity: tuple[int, int] | None) -> bool:
    """Whether the store directory was removed or replaced, or lost its root metadata."""
    if is_remote(path):
        return False  # an object store has no directory to replace
    return _identity(path) != identity or not os.path.lexists(Path(path) / "zarr.json")


def _removed_message(path: Location, identity: tuple[int, int] | None) -> str:
    if _identity(path) == identity:
        what = f"the metadata {Path(path) / 'zarr.json'} of the results store {path} was removed"
        again = "Remove the store, then run the job again to recompute it."
    else:
        what = f"the results store {path} was removed"
        again = "Run the job again to recompute it."
        if os.path.lexists(path):
            again = (
                f"Writes under way recreated part of {path}: remove it, then run the job "
                "again to recompute the store."
            )
    return f"{what} while the job was running, so nothing could be recorded in it. {again}"


def _check_in_place(path: Location, identity: tuple[int, int] | None) -> None:
    if _gone(path, identity):
        raise _StoreGone(str(path))


def _record_failure(
    store: ResultsStore,
    exc: BaseException,
    *,
    spec: JobSpec,
    lease: Lease,
    identity: tuple[int, int] | None,
    needed: float | None,
) -> tuple[str, bool]:
    """Mark ``store`` failed with a one-line cause of ``exc``; return that cause and whether
    the store was marked.

    The space set aside is given back first. When the store directory is gone nothing is
    written; when the status cannot be written (the disk still full), the cause says so.
    """
    if _gone(spec.output, identity):
        lease.free_reserve()
        _tell_interrupt(exc, "the results store was removed while the job ran")
        return _removed_message(spec.output, identity), False
    cause = _describe_failure(exc, spec, needed)  # the free space before the reserve is freed
    lease.free_reserve()
    try:
        _status_write(store, lambda: store.mark_failed(exc, cause=cause))
        _tell_interrupt(exc, "the store is marked failed")
        return cause, True
    except Exception as error:  # noqa: BLE001  (retried below, smaller)
        first = error
    try:
        if isinstance(first, TimeoutError):
            raise first  # an object store that stalls: not waited for twice
        _status_write(store, lambda: store.mark_failed(exc, cause=cause, with_traceback=False))
    except Exception as write_error:  # noqa: BLE001
        if _gone(spec.output, identity):
            _tell_interrupt(exc, "the results store was removed while the job ran")
            return _removed_message(spec.output, identity), False
        _tell_interrupt(exc, "the store could not be marked failed; --resume continues it")
        return (
            f"{cause.rstrip('.')}. The store could not be marked failed either "
            f"({_describe_failure(write_error, spec, None, advice=False)}), so it still reads "
            "'running': --resume continues it."
        ), False
    _tell_interrupt(exc, "the store is marked failed")
    return cause, True


#: Seconds the status write of a failed job on an object store may take: the endpoint that
#: made the job fail may be the one that stalls, and SIGTERM must end the job promptly.
STATUS_WRITE_S = 10.0


def _status_write(store: ResultsStore, write: Callable[[], None]) -> None:
    """``write()``, bounded by :data:`STATUS_WRITE_S` on an object store (a local write is
    made as it is).

    Raises
    ------
    TimeoutError
        When the object store did not finish the write in time (it may still land).
    """
    if not store.remote:
        write()
        return
    from dkernel.storage.remote import call_bounded

    try:
        call_bounded(write, STATUS_WRITE_S)
    except TimeoutError:
        raise TimeoutError(f"the object store did not answer within {STATUS_WRITE_S:g} s") from None


def _tell_interrupt(exc: BaseException, what: str) -> None:
    """What became of the store, as a note on an interrupt (Ctrl-C, SIGTERM) for the command
    to print: an interrupt before the store exists carries none."""
    if isinstance(exc, KeyboardInterrupt):
        exc.add_note(what)


_DISK_FULL = {errno.ENOSPC: "disk full (ENOSPC)", errno.EDQUOT: "disk quota exceeded (EDQUOT)"}


def _disk_full(exc: BaseException) -> str | None:
    """``disk full (ENOSPC)`` when ``exc`` (or an error it came from) is a full disk."""
    seen: set[int] = set()
    error: BaseException | None = exc
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, OSError) and error.errno in _DISK_FULL:
            return _DISK_FULL[error.errno]
        if "No space left on device" in str(error):
            return _DISK_FULL[errno.ENOSPC]
        if "Disk quota exceeded" in str(error):
            return _DISK_FULL[errno.EDQUOT]
        error = error.__cause__ or error.__context__
    return None


def _describe_failure(
    exc: BaseException, spec: JobSpec, needed: float | None, *, advice: bool = True
) -> str:
    """One line: the error, or for a full disk which filesystem, its free space and the need."""
    full = _disk_full(exc)
    if full is None or is_remote(spec.output):
        return failure_cause(exc)
    text = f"{full} writing the results store {spec.output}: {_filesystem(spec.output)}"
    if needed:
        text += f"; this job writes about {format_size(needed)} (estimate)"
    if advice:
        text += (
            ". Free space (or choose another --output), then run the job again with --resume: "
            "the finished groups are kept."
        )
    return text


def _disk_needed(spec: JobSpec, data: LoadedData) -> float | None:
    """The job's disk estimate (bytes), when its method has one."""
    try:
        method = get_method(spec.method)
        if method.estimate is None:
            return None
        cost = method.estimate(spec.params, data.n_samples, data.n_features)
        return float(cost.disk_bytes) or None
    except Exception:  # noqa: BLE001  (a message detail only)
        return None


def _filesystem(path: Location) -> str:
    """``the tmpfs filesystem mounted at /mnt/x has 0 B free of 2.00 MiB``."""
    probe = Path(os.path.abspath(path))
    while not probe.exists() and probe.parent != probe:
        probe = probe.parent
    try:
        st = os.statvfs(probe)
    except OSError:
        return "its free space cannot be read"
    free, total = st.f_bavail * st.f_frsize, st.f_blocks * st.f_frsize
    mount, kind = _mount_of(probe)
    return (
        f"the {kind} filesystem mounted at {mount} has {format_size(free)} free of "
        f"{format_size(total)}"
    )


def _mount_of(path: Path) -> tuple[str, str]:
    """(mount point, filesystem type) of ``path``, from ``/proc/self/mounts`` when there is
    one; else the highest folder on ``path``'s device and ``unknown``."""
    real = os.path.realpath(path)
    best = ("", "unknown")
    try:
        with open("/proc/self/mounts", encoding="utf-8", errors="replace") as mounts:
            for line in mounts:
                fields = line.split()
                if len(fields) < 3:
                    continue
                point = fields[1].replace("\\040", " ").replace("\\011", "\t")
                inside = real == point or real.startswith(point.rstrip("/") + "/")
                if inside and len(point) >= len(best[0]):
                    best = (point, fields[2])
    except OSError:
        pass
    if best[0]:
        return best
    mount, dev = Path(real), os.stat(real).st_dev
    while mount.parent != mount and os.stat(mount.parent).st_dev == dev:
        mount = mount.parent
    return str(mount), "unknown"


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
    return replace(data, X=persist(with_own_keys(X), client))


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
