"""The embedded cluster's scheduler settings (``dkernel.runtime.connect``)."""

from __future__ import annotations

from dkernel.runtime.connect import EMBEDDED_SCHEDULER_CONFIG


def _settings(dask_scheduler) -> tuple[float, bool]:
    return dask_scheduler.WORKER_SATURATION, "stealing" in dask_scheduler.extensions


def test_embedded_cluster_hands_out_reads_one_per_free_thread_and_does_not_steal(client):
    saturation, stealing = client.run_on_scheduler(_settings)
    assert saturation == EMBEDDED_SCHEDULER_CONFIG["distributed.scheduler.worker-saturation"] == 1.0
    assert not stealing


def test_the_settings_do_not_leak_into_the_callers_config(client):
    import dask

    assert dask.config.get("distributed.scheduler.work-stealing") is True


def test_embedded_workers_keep_one_malloc_arena_and_distributeds_trim(client):
    import os

    env = client.run(
        lambda: (os.environ.get("MALLOC_ARENA_MAX"), os.environ.get("MALLOC_TRIM_THRESHOLD_"))
    )
    assert set(env.values()) == {("1", "65536")}
