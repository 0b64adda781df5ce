"""Fault injection: a worker killed mid PCK ensemble fit / mid MSSC pixel stream, and the job
runner killed mid-write then ``--resume``d. Results must equal an undisturbed run."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import threading
import time
from contextlib import redirect_stderr
from pathlib import Path

import cloudpickle
import numpy as np
import pytest

from dkernel.cli import main
from dkernel.storage import open_results

#: end to end (workers and the runner killed mid-job): tasks.py test --fast skips it
pytestmark = pytest.mark.slow

JOB_TIMEOUT = 240.0

# the scheduler cannot import this test module: ship _task_states by value
cloudpickle.register_pickle_by_value(sys.modules[__name__])


def _task_states(marker, dask_scheduler=None):  # runs on the scheduler
    return [
        (ts.state, ts.processing_on.name if ts.processing_on is not None else None)
        for key, ts in dask_scheduler.tasks.items()
        if marker in str(key)
    ]


def _submit(spec: Path, address: str, out: Path) -> tuple[int, str]:
    err = io.StringIO()
    with redirect_stderr(err):
        code = main(
            ["submit", str(spec), "--scheduler", address, "--output", str(out), "--no-progress"]
        )
    return code, err.getvalue()


def _kill_worker_mid_phase(cluster, spec: Path, out: Path, marker: str) -> dict:
    """Submit ``spec``; SIGKILL worker w1 while a ``marker`` task runs on it; return what
    happened."""
    from distributed import Client

    result: dict = {}

    def job():
        result["code"], result["stderr"] = _submit(spec, cluster.address, out)

    thread = threading.Thread(target=job, daemon=True)
    victim = cluster.workers[1]
    with Client(cluster.address, timeout=30) as watcher:
        thread.start()
        deadline = time.monotonic() + JOB_TIMEOUT
        while thread.is_alive() and time.monotonic() < deadline:
            states = watcher.run_on_scheduler(_task_states, marker)
            running_on_victim = any(s == "processing" and w == "w1" for s, w in states)
            if running_on_victim:
                os.killpg(victim.pid, signal.SIGKILL)
                result["killed_with"] = states
                break
            time.sleep(0.05)
        thread.join(timeout=max(1.0, deadline - time.monotonic()))
    assert not thread.is_alive(), "the job did not finish in time after the worker was killed"
    if "killed_with" in result:
        assert victim.wait(timeout=10) == -signal.SIGKILL
    return result


@pytest.fixture()
def fresh_cluster(tmp_path, ops):
    log_dir = tmp_path / "logs"
    log_dir.mkdir()
    cluster = ops.start_loopback_cluster(log_dir)
    try:
        yield cluster
    finally:
        cluster.stop()


def _pck_spec(tmp: Path, ops) -> Path:
    body = {
        "data": {"reader": "sklearn", "name": "digits"},
        "params": {
            "n_clusters": 10,
            "n_estimators": 6,
            "max_components": 8,
            "n_iter": 40,
            "n_init": 5,
        },
    }
    return ops.write_spec(tmp / "pck.yaml", "pck-spectral", body, tmp / "pck-spec.zarr")


def _mssc_spec(tmp: Path, ops) -> Path:
    import rasterio
    from rasterio.transform import from_origin

    rng = np.random.default_rng(0)
    rows = cols = 400  # enough assign tasks that one is caught running on the victim
    centres = np.array([[20, 40, 200], [200, 30, 50], [80, 220, 100], [230, 200, 230]])
    region = (np.arange(rows)[:, None] >= rows // 2) * 2 + (np.arange(cols)[None] >= cols // 2)
    img = centres[region].transpose(2, 0, 1) + rng.normal(0, 8, (3, rows, cols))
    img = np.clip(img, 1, 255).astype(np.uint8)
    tif = tmp / "scene.tif"
    with rasterio.open(
        tif,
        "w",
        driver="GTiff",
        height=rows,
        width=cols,
        count=3,
        dtype="uint8",
        crs="EPSG:32618",
        transform=from_origin(500000, 4000000, 30, 30),
    ) as dst:
        dst.write(img)
    body = {
        "data": {"reader": "geotiff", "path": str(tif), "chunk_rows": 10},
        "params": {
            "n_clusters": 4,
            "n_seeds": 100,
            "density_max_samples": 4000,
            "n_rff": 200,
            "n_init": 5,
            "write_geotiff": False,
            "write_png": False,
        },
    }
    return ops.write_spec(tmp / "mssc.yaml", "mssc", body, tmp / "mssc-spec.zarr")


@pytest.mark.filterwarnings("ignore::dkernel.errors.NumericalWarning")
@pytest.mark.parametrize(
    ("make_spec", "marker"),
    [(_pck_spec, "fit_init_batch"), (_mssc_spec, "assign")],
    ids=["pck", "mssc"],
)
def test_worker_killed_mid_phase_gives_identical_results(
    make_spec, marker, fresh_cluster, tmp_path, ops
):
    spec = make_spec(tmp_path, ops)
    code, err = _submit(spec, fresh_cluster.address, tmp_path / "undisturbed.zarr")
    assert code == 0, err
    happened = _kill_worker_mid_phase(fresh_cluster, spec, tmp_path / "disturbed.zarr", marker)
    assert "killed_with" in happened, f"the job finished before a {marker} task ran on w1"
    assert happened["code"] == 0, happened["stderr"]
    tree = open_results(tmp_path / "disturbed.zarr")
    assert tree.attrs["status"] == "complete"
    ops.assert_stores_identical(tmp_path / "undisturbed.zarr", tmp_path / "disturbed.zarr")


# ------------------------------------------------------------------------------------------
# the job runner killed mid-write, then --resume
# ------------------------------------------------------------------------------------------


def _chunk_mtimes(store: Path) -> dict[str, int]:
    root = store / "kernel" / "kernel" / "c"
    if not root.exists():
        return {}
    return {
        str(p.relative_to(root)): p.stat().st_mtime_ns
        for p in root.rglob("*")
        if p.is_file() and not p.name.endswith(".partial")
    }


def test_runner_killed_mid_write_then_resume(tmp_path, client, ops):
    from dkernel.jobs.runner import run_job

    body = {
        "data": {"reader": "sklearn", "name": "wine", "standardize": True},
        "params": {"n_clusters": 3, "block_rows": 16, "n_init": 3},
    }
    spec = ops.write_spec(tmp_path / "k.yaml", "rbf-spectral", body, tmp_path / "k-spec.zarr")
    reference = run_job(spec, output=tmp_path / "ref.zarr", client=client, progress=False)
    out = tmp_path / "killed.zarr"
    cmd = [str(Path(sys.executable).parent / "dkernel"), "run", str(spec), "--output", str(out)]
    cmd += ["--workers", "1", "--threads", "1", "--no-progress"]
    proc = subprocess.Popen(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True
    )
    try:
        deadline = time.monotonic() + JOB_TIMEOUT
        while proc.poll() is None and time.monotonic() < deadline:
            if len(_chunk_mtimes(out)) >= 20:
                os.killpg(proc.pid, signal.SIGKILL)  # the runner and its embedded cluster
                break
            time.sleep(0.02)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL, "the run finished before it could be killed"
    before = _chunk_mtimes(out)
    assert 20 <= len(before) < 12 * 12, len(before)
    with pytest.warns(UserWarning, match="'running'"):
        assert open_results(out).attrs["status"] == "running"

    err = io.StringIO()
    with redirect_stderr(err):
        code = main(
            [
                "run",
                str(spec),
                "--output",
                str(out),
                "--resume",
                "--no-progress",
                "--workers",
                "1",
                "--threads",
                "1",
            ]
        )
    assert code == 0, err.getvalue()
    assert "resuming" in err.getvalue()
    after = _chunk_mtimes(out)
    assert len(after) == 12 * 12
    assert all(after[k] == v for k, v in before.items()), "finished chunks were rewritten"
    tree = open_results(out)
    assert tree.attrs["status"] == "complete" and tree.attrs["resumes"] == 1
    ops.assert_stores_identical(reference, out)
