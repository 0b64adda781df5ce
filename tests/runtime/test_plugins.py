"""Worker plugins of a job's cluster, on real worker processes."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent(
    """
    import errno, sys
    from dkernel.runtime.connect import connect
    from dkernel.runtime.plugins import register_job_plugins

    def full(x):
        raise OSError(errno.ENOSPC, "No space left on device")

    if __name__ == "__main__":
        client = connect(n_workers=1, threads_per_worker=1, quiet=True)
        register_job_plugins(client, embedded=sys.argv[1] == "embedded")
        try:
            client.submit(full, 1).result()
        except OSError as exc:
            print("the job saw:", exc)
        client.close()
    """
)


@pytest.mark.parametrize("embedded", [True, False])
def test_a_failed_task_is_reported_once_on_the_jobs_own_cluster(tmp_path, embedded):
    script = tmp_path / "fail.py"
    script.write_text(SCRIPT)
    out = subprocess.run(
        [sys.executable, str(script), "embedded" if embedded else "remote"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "the job saw: [Errno 28]" in out.stdout, out.stderr
    # the workers' own record (with its traceback) only where the job did not start them
    assert ("Compute Failed" in out.stderr) is not embedded, out.stderr
    assert ("Traceback" in out.stderr) is not embedded


def test_an_in_process_cluster_gets_no_gdal_plugin():
    """Its workers share this process's GDAL cache (bounded by ``prepare_job``)."""
    from dkernel.runtime.connect import connect
    from dkernel.runtime.plugins import GDALCacheLimit, register_job_plugins

    client = connect(n_workers=1, threads_per_worker=1, processes=False, dashboard=False)
    try:
        register_job_plugins(client, embedded=True)
        names = client.run(lambda dask_worker: sorted(dask_worker.plugins))
    finally:
        client.close()
    (plugins,) = names.values()
    assert GDALCacheLimit.name not in plugins
    assert "dkernel-quiet-task-failures" in plugins


def _worker_zstd_codec() -> str:
    import zarr

    return str(zarr.config.get("codecs.zstd"))


def test_process_workers_decode_zarr_chunks_with_the_bounded_codecs():
    """A task on a worker process reads Zarr chunks through the bounded codecs, as the
    client does (a chunk that would inflate past its declared size is refused there too)."""
    from dkernel.runtime.connect import connect
    from dkernel.runtime.plugins import BoundedZarrCodecs, register_job_plugins

    client = connect(n_workers=1, threads_per_worker=1, quiet=True, dashboard=False)
    try:
        register_job_plugins(client)
        names = client.run(lambda dask_worker: sorted(dask_worker.plugins))
        codecs = client.run(_worker_zstd_codec)
    finally:
        client.close()
    (plugins,) = names.values()
    assert BoundedZarrCodecs.name in plugins
    (codec,) = codecs.values()
    assert codec == "dkernel.storage.array_limits.BoundedZstdCodec"


def _fragment_heap() -> int:
    """Free 300 MiB of 1 MiB heap blocks kept apart by small blocks still in use (what a
    long write pass leaves); the worker's RSS after freeing them."""
    import gc

    import numpy as np
    import psutil

    big, kept = [], []
    for _ in range(300):
        big.append(np.ones(1 << 20, dtype=np.uint8))
        kept.append(bytearray(2000))
    globals()["_kept"] = kept
    del big
    gc.collect()
    return psutil.Process().memory_info().rss


def _rss() -> int:
    import psutil

    return psutil.Process().memory_info().rss


def test_process_workers_give_freed_heap_pages_back():
    """TrimFreedMemory: a worker whose freed blocks lie between blocks in use gives their
    pages back within a few intervals (the allocator alone keeps them at the reuse
    thresholds the embedded workers start with)."""
    import time

    from dkernel.runtime.connect import connect
    from dkernel.runtime.plugins import TrimFreedMemory

    client = connect(n_workers=1, threads_per_worker=1, quiet=True, dashboard=False)
    try:
        client.register_plugin(TrimFreedMemory(interval=0.2))
        (before,) = client.run(_fragment_heap).values()
        time.sleep(1.0)
        (after,) = client.run(_rss).values()
        names = client.run(lambda dask_worker: sorted(dask_worker.periodic_callbacks))
    finally:
        client.close()
    assert before - after > 200 * 2**20, (before >> 20, after >> 20)
    (callbacks,) = names.values()
    assert TrimFreedMemory.name in callbacks


def test_the_quiet_filter_drops_failed_tasks_and_lost_heartbeats_only():
    """A heartbeat racing the job's own close of its cluster printed a traceback after the
    job's last line; other worker records pass."""
    import logging

    from dkernel.runtime.plugins import _DropComputeFailed

    def record(msg: str) -> logging.LogRecord:
        return logging.LogRecord("distributed.worker", logging.ERROR, __file__, 1, msg, (), None)

    keep = _DropComputeFailed().filter
    assert not keep(record("Compute Failed\nKey: x"))
    assert not keep(record("Failed to communicate with scheduler during heartbeat."))
    assert keep(record("Worker is at 85% memory usage."))
