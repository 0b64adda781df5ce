"""Worker plugins a job registers on its cluster."""

from __future__ import annotations

import logging
from typing import Any

from distributed import WorkerPlugin

from dkernel.io.gdal import GDAL_CACHE_MB, limit_gdal_cache
from dkernel.runtime.memory import TRIM_INTERVAL


class GDALCacheLimit(WorkerPlugin):
    """Bound every worker's GDAL block cache (:mod:`dkernel.io.gdal`), on workers that join
    later too."""

    name = "dkernel-gdal-cache"

    def __init__(self, megabytes: int = GDAL_CACHE_MB) -> None:
        self.megabytes = int(megabytes)

    def setup(self, worker: Any) -> None:
        limit_gdal_cache(self.megabytes)


class BoundedZarrCodecs(WorkerPlugin):
    """Decode Zarr chunks on every worker through dkernel's bounded codecs
    (:func:`dkernel.storage.array_limits.install_bounded_codecs`): a task reading a results
    store or an input cube refuses a chunk that would inflate past its declared size, as this
    process does, on workers that join later too."""

    name = "dkernel-bounded-zarr-codecs"

    def setup(self, worker: Any) -> None:
        from dkernel.storage.array_limits import install_bounded_codecs

        install_bounded_codecs()


class TrimFreedMemory(WorkerPlugin):
    """Every ``interval`` seconds, give a worker's free heap pages back to the system
    (:func:`dkernel.runtime.memory.trim_freed_memory`), so that its memory stays at what it
    holds through a long pass instead of growing with the chunks it has written."""

    name = "dkernel-trim-freed-memory"

    def __init__(self, interval: float = TRIM_INTERVAL) -> None:
        self.interval = float(interval)

    def setup(self, worker: Any) -> None:
        from tornado.ioloop import PeriodicCallback

        from dkernel.runtime.memory import trim_freed_memory

        def trim() -> None:
            trim_freed_memory()

        self.teardown(worker)  # registered again by the next job: one callback a worker
        callback = PeriodicCallback(trim, self.interval * 1000)
        worker.periodic_callbacks[self.name] = callback
        callback.start()

    def teardown(self, worker: Any) -> None:
        callback = worker.periodic_callbacks.pop(self.name, None)
        if callback is not None:
            callback.stop()


#: Worker log records a job's own cluster drops (:class:`QuietTaskFailures`).
QUIET_WORKER_RECORDS = (
    "Compute Failed",
    "Failed to communicate with scheduler during heartbeat",
)


class _DropComputeFailed(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(QUIET_WORKER_RECORDS)


class QuietTaskFailures(WorkerPlugin):
    """Drop the workers' own "Compute Failed" log record (task, exception, traceback), and
    their "Failed to communicate with scheduler during heartbeat" one.

    On the cluster a job starts itself the failure reaches the job, which reports it in one
    line and records it in the store; the worker's copy would print a traceback beside it.
    The scheduler of that cluster stops only when the job closes it (a worker's heartbeat
    then racing the close printed a 40-line traceback after the job's last line, on a loaded
    machine), or when it fails, which the job reports itself.
    """

    name = "dkernel-quiet-task-failures"

    def setup(self, worker: Any) -> None:
        logger = logging.getLogger("distributed.worker")
        if not any(isinstance(f, _DropComputeFailed) for f in logger.filters):
            logger.addFilter(_DropComputeFailed())


def register_job_plugins(client: Any, *, embedded: bool = False) -> None:
    """Register the plugins of :mod:`dkernel.runtime.plugins` on ``client``'s cluster;
    :class:`QuietTaskFailures` only on a cluster the job started (``embedded``).

    Thread workers of this process (an in-process cluster) share its GDAL cache, which
    ``prepare_job`` bounded already for an image job, and its Zarr codecs:
    :class:`GDALCacheLimit`, :class:`BoundedZarrCodecs` and :class:`TrimFreedMemory` are
    left out there (the first would import rasterio for a table job too; the client process
    sets its own allocator, :mod:`dkernel.runtime.memory`)."""
    if getattr(getattr(client, "cluster", None), "processes", True) is not False:
        client.register_plugin(GDALCacheLimit())
        client.register_plugin(BoundedZarrCodecs())
        client.register_plugin(TrimFreedMemory())
    if embedded:
        client.register_plugin(QuietTaskFailures())
