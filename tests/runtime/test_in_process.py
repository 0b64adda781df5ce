"""Small jobs run on dask's threaded scheduler in this process (``dkernel.runtime.threads``),
with the same results bit for bit as on process workers; ``connect(processes=False)`` gives
thread workers of a ``distributed`` cluster in this process."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import zarr

from dkernel.jobs.runner import IN_PROCESS_SCHEDULER
from dkernel.runtime.connect import (
    IN_PROCESS_MAX_MEMORY,
    IN_PROCESS_MAX_SAMPLES,
    connect,
    runs_in_process,
)

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("n_samples", "memory", "kwargs", "expected"),
    [
        (178, 1e6, {}, True),
        (178, 1e6, {"requested": False}, False),
        (10**7, 1e6, {}, False),
        (IN_PROCESS_MAX_SAMPLES - 1, IN_PROCESS_MAX_MEMORY, {}, True),
        (IN_PROCESS_MAX_SAMPLES, 1e6, {}, False),
        (178, IN_PROCESS_MAX_MEMORY + 1, {}, False),
        (178, 1e6, {"scheduler": "tls://10.0.0.5:8786"}, False),
        (178, 1e6, {"n_workers": 2}, False),
    ],
)
def test_only_small_jobs_with_no_cluster_asked_for_run_in_process(
    n_samples, memory, kwargs, expected
):
    assert runs_in_process(n_samples, memory, **kwargs) is expected


def _blas_threads() -> int:
    from threadpoolctl import threadpool_info

    return max(int(p["num_threads"]) for p in threadpool_info() if p["user_api"] == "blas")


def test_in_process_client_runs_the_blas_on_one_thread_and_restores_it(capsys):
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=2, user_api="blas"):
        before = _blas_threads()
        client = connect(n_workers=1, threads_per_worker=2, processes=False, dashboard=False)
        try:
            assert client.cluster.processes is False
            # inproc:// (no other process can reach it, and nothing is serialised)
            assert client.scheduler.address.startswith("inproc://")
            assert _blas_threads() == 1
            assert client.submit(sum, [1, 2]).result() == 3
        finally:
            client.close()
        assert _blas_threads() == before
    # collected later, a client closes again (Client.__del__): that must not reset the
    # limits in force by then (an in-process scheduler's single BLAS thread flipped to 2)
    with threadpool_limits(limits=1, user_api="blas"):
        client.close()
        assert _blas_threads() == 1
    # no dashboard, so no link is printed (it would point at nothing)
    assert "dashboard" not in capsys.readouterr().err


def _arrays(store: Path) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}

    def visit(group: zarr.Group, prefix: str) -> None:
        for name, member in group.members():
            if isinstance(member, zarr.Group):
                visit(member, f"{prefix}{name}/")
            else:
                out[f"{prefix}{name}"] = np.asarray(member[...])

    visit(zarr.open_group(str(store), mode="r"), "")
    return out


@pytest.mark.slow
def test_a_small_job_runs_in_process_by_default_with_the_process_clusters_results(tmp_path):
    import yaml

    from dkernel.jobs.runner import run_job
    from dkernel.jobs.spec import validate_spec

    job = REPO / "jobs" / "wine-rbf-kpca.yaml"
    raw = yaml.safe_load(job.read_text())
    # a small job runs in process by default; runtime.in_process: false starts process workers
    threads = run_job(job, output=tmp_path / "threads.zarr", progress=False)
    declined = validate_spec({**raw, "runtime": {"in_process": False}}, path=job)
    processes = run_job(declined, output=tmp_path / "processes.zarr", progress=False)
    runtime = {
        p: dict(zarr.open_group(str(p), mode="r").attrs)["runtime"]["scheduler"]
        for p in (threads, processes)
    }
    assert runtime == {threads: IN_PROCESS_SCHEDULER, processes: "embedded LocalCluster"}
    a, b = _arrays(threads), _arrays(processes)
    assert a.keys() == b.keys() and len(a) > 5
    different = [k for k in a if not np.array_equal(a[k], b[k], equal_nan=True)]
    assert not different


def test_in_process_scheduler_runs_dask_on_its_threads_with_one_blas_thread():
    import dask
    import dask.array as da
    from distributed import Client
    from threadpoolctl import threadpool_limits

    from dkernel.runtime.progress import active_client
    from dkernel.runtime.threads import InProcessScheduler

    x = da.arange(12, chunks=3)
    with (
        threadpool_limits(limits=2, user_api="blas"),
        Client(processes=False, n_workers=1, threads_per_worker=1, dashboard_address=None),
    ):
        before = _blas_threads()
        with InProcessScheduler(2) as threads:
            assert _blas_threads() == 1
            # a distributed client around is not used: the configured scheduler wins
            assert active_client() is None
            assert int(x.sum().compute()) == 66
            assert dask.compute(dask.delayed(_blas_threads)())[0] == 1
        assert threads.n_tasks >= 4  # 4 chunks, their sums and the total
        assert _blas_threads() == before
        assert active_client() is not None


def test_in_process_scheduler_refuses_no_threads():
    from dkernel.runtime.threads import InProcessScheduler

    with pytest.raises(ValueError, match="n_threads must be >= 1"):
        InProcessScheduler(0)


_NO_DISTRIBUTED = """
import sys
from dkernel.jobs.runner import run_job
store = run_job(sys.argv[1], output=sys.argv[2], progress=True)
import zarr
attrs = dict(zarr.open_group(str(store), mode="r").attrs)
print(attrs["runtime"]["scheduler"], attrs["resources"]["n_tasks"], attrs["status"])
print("distributed imported:", "distributed" in sys.modules)
"""


def _run_without_distributed(job: Path, store: Path) -> str:
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-c", _NO_DISTRIBUTED, str(job), str(store)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


@pytest.mark.slow
def test_a_small_job_needs_no_distributed(tmp_path):
    """The wine job, in a fresh interpreter: no ``distributed`` import (0.3-0.7 s), no
    event loop; its tasks are counted."""
    stdout = _run_without_distributed(REPO / "jobs" / "wine-rbf-kpca.yaml", tmp_path / "w.zarr")
    scheduler, n_tasks, status = stdout.splitlines()[0].rsplit(" ", 2)
    assert scheduler == IN_PROCESS_SCHEDULER and int(n_tasks) > 0 and status == "complete"
    assert "distributed imported: False" in stdout


@pytest.mark.slow
def test_a_small_image_job_reads_its_scene_without_distributed(tmp_path, data_dir):
    """Jasper Ridge: its reader computes the valid mask and rechunks the scene before the job
    chooses where it runs (Dask asks distributed for a client at both, unless told not to)."""
    stdout = _run_without_distributed(REPO / "jobs" / "mssc-jasper.yaml", tmp_path / "j.zarr")
    assert stdout.splitlines()[0].endswith(" complete")
    assert "distributed imported: False" in stdout


def test_without_client_rechunks_and_computes_without_distributed():
    import subprocess
    import sys

    code = (
        "import sys, dask, dask.array as da\n"
        "from dkernel.runtime.progress import without_client\n"
        "x = da.ones((8, 8), chunks=2)\n"
        "with without_client():\n"
        "    total = float(x.rechunk((4, 8)).sum().compute())\n"
        "print(total, 'distributed' in sys.modules, dask.config.get('scheduler', None))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["64.0", "False", "None"]  # and the scope is undone


@pytest.mark.slow
def test_a_job_on_a_scheduler_closes_its_client_beside_a_shared_cluster(tmp_path, client):
    """With ``--scheduler`` every job of a command connects there and closes its own client;
    the command's SharedCluster is never started."""
    from dkernel.jobs.runner import run_job
    from dkernel.runtime import SharedCluster

    def n_clients() -> int:
        return client.run_on_scheduler(lambda dask_scheduler: len(dask_scheduler.clients))

    before = n_clients()
    with SharedCluster() as cluster:
        for name in ("kpca", "keca"):
            run_job(
                REPO / "jobs" / f"wine-rbf-{name}.yaml",
                scheduler=client.scheduler.address,
                cluster=cluster,
                output=tmp_path / f"{name}.zarr",
                progress=False,
            )
            assert n_clients() == before
        assert not cluster.started
