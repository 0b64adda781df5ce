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
