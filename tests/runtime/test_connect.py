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


def test_embedded_workers_keep_one_malloc_arena_and_reuse_freed_blocks(client):
    import os

    from dkernel.runtime.memory import REUSE_MMAP_THRESHOLD, REUSE_TRIM_THRESHOLD

    names = ("MALLOC_ARENA_MAX", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")
    env = client.run(lambda: tuple(os.environ.get(name) for name in names))
    assert set(env.values()) == {("1", str(REUSE_MMAP_THRESHOLD), str(REUSE_TRIM_THRESHOLD))}


def test_embedded_workers_file_their_profiles_every_ten_seconds(client):
    import time

    import dask

    def profile_state(dask_worker):
        import psutil

        up = time.time() - psutil.Process().create_time()
        return (
            dask.config.get("distributed.worker.profile.cycle"),
            len(dask_worker.profile_history),
            up,
        )

    if min(up for _, _, up in client.run(profile_state).values()) < 4:
        time.sleep(4)
    cycles = client.run(profile_state).values()
    assert {c for c, _, _ in cycles} == {"10s"}
    # at distributed's one tree a second a worker up for u seconds would hold about u of them
    assert all(n <= up / 10 + 1 for _, n, up in cycles)
    assert dask.config.get("distributed.worker.profile.cycle") == "1000ms"  # caller's config kept
