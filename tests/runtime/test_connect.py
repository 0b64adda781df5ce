"""The embedded cluster's scheduler settings (``dkernel.runtime.connect``)."""

from __future__ import annotations

from pathlib import Path

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


DEPLOY_CONFIG = Path(__file__).resolve().parents[2] / "deploy" / "dask" / "dkernel.yaml"


def test_the_deploy_config_is_the_embedded_clusters_settings():
    """``deploy/dask/dkernel.yaml`` (what ``dkernel cluster-config`` prints), read the way Dask
    reads its configuration files, gives every setting of the embedded cluster."""
    import dask

    from dkernel.runtime.connect import cluster_config_yaml

    assert DEPLOY_CONFIG.read_text(encoding="utf-8") == cluster_config_yaml(), (
        "deploy/dask/dkernel.yaml is stale: run dkernel cluster-config --output "
        "deploy/dask/dkernel.yaml"
    )
    read = dask.config.collect(paths=[str(DEPLOY_CONFIG.parent)], env={})
    with dask.config.set(read):
        for key, value in EMBEDDED_SCHEDULER_CONFIG.items():
            assert dask.config.get(key) == value, key


def test_a_scheduler_and_worker_of_your_own_run_with_the_deploy_config(tmp_path):
    """``dask scheduler`` and ``dask worker`` processes started with ``DASK_CONFIG`` at the
    deploy folder: no work stealing, saturation 1, the malloc settings in the worker."""
    import json
    import os
    import subprocess
    import sys
    import time

    from distributed import Client

    bin_dir = Path(sys.executable).parent
    env = {**os.environ, "DASK_CONFIG": str(DEPLOY_CONFIG.parent)}
    scheduler_file = tmp_path / "scheduler.json"
    common = {"env": env, "stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    procs = [
        subprocess.Popen(
            [bin_dir / "dask", "scheduler", "--scheduler-file", scheduler_file, "--port", "0"]
            + ["--host", "127.0.0.1", "--no-dashboard"],
            **common,
        )
    ]
    try:
        deadline = time.time() + 60
        while not scheduler_file.exists() and time.time() < deadline:
            time.sleep(0.1)
        procs.append(
            subprocess.Popen(
                [bin_dir / "dask", "worker", "--scheduler-file", scheduler_file]
                + ["--nthreads", "1", "--host", "127.0.0.1", "--no-dashboard"],
                **common,
            )
        )
        address = json.loads(scheduler_file.read_text())["address"]
        with Client(address, timeout=60) as client:
            client.wait_for_workers(1, timeout=60)
            # probes defined here, pickled by value: the scheduler cannot import this module
            saturation, stealing = client.run_on_scheduler(
                lambda dask_scheduler: (
                    dask_scheduler.WORKER_SATURATION,
                    "stealing" in dask_scheduler.extensions,
                )
            )
            arena = client.run(lambda: __import__("os").environ.get("MALLOC_ARENA_MAX"))
        assert saturation == 1.0 and not stealing
        assert list(arena.values()) == ["1"]
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(timeout=30)
