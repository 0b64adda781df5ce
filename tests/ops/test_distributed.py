"""Real distributed runs: ``dkernel submit`` every method to a loopback ``dask scheduler`` with
two ``dask worker`` processes; results equal an embedded run bit for bit; the scheduler's
dashboard shows the workers and the job's tasks."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import time
import urllib.request
from contextlib import redirect_stderr
from pathlib import Path

import pytest

from dkernel.cli import main
from dkernel.jobs.runner import run_job
from dkernel.storage import open_results

METHODS = [
    "rbf-spectral",
    "pck-spectral",
    "mssc",
    "spectral-clustering",
    "kppr",
    "jrc",
    "kernel-decomposition",
]


@pytest.fixture(scope="module")
def specs(tmp_path_factory, ops):
    tmp = tmp_path_factory.mktemp("specs")
    bodies = ops.method_specs(tmp)
    return {
        m: ops.write_spec(tmp / f"{m}.yaml", m, bodies[m], tmp / f"{m}-spec.zarr") for m in METHODS
    }


@pytest.fixture(scope="module")
def embedded(tmp_path_factory, specs, client):
    """Every spec run on the embedded (LocalCluster) client."""
    out = tmp_path_factory.mktemp("embedded")
    return {
        m: run_job(
            specs[m], output=out / f"{m}.zarr", client=client, progress=False, log=lambda s: None
        )
        for m in METHODS
    }


@pytest.fixture(scope="module")
def task_stream(loopback_cluster):
    """A client on the loopback scheduler with its task stream (the dashboard's) switched on."""
    from distributed import Client

    with Client(loopback_cluster.address, timeout=30) as c:
        c.get_task_stream(count=1)  # creates the scheduler's task-stream plugin
        yield c


@pytest.mark.parametrize("method", METHODS)
def test_submit_equals_embedded_run(
    method, specs, embedded, loopback_cluster, task_stream, ops, tmp_path
):
    out = tmp_path / f"{method}.zarr"
    t0 = time.time()
    err = io.StringIO()
    with redirect_stderr(err):
        code = main(
            [
                "submit",
                str(specs[method]),
                "--scheduler",
                loopback_cluster.address,
                "--output",
                str(out),
                "--no-progress",
                "--timeout",
                "30",
            ]
        )
    assert code == 0, err.getvalue()
    tree = open_results(out)
    assert tree.attrs["status"] == "complete"
    assert tree.attrs["runtime"] == {"scheduler": "external", "n_workers": 2, "n_threads": 2}
    assert tree.attrs["resources"]["n_tasks"] > 0
    ops.assert_stores_identical(embedded[method], out)
    # the job's tasks are in the scheduler's task stream (what the dashboard plots)
    records = task_stream.get_task_stream(start=t0)
    assert records, "no tasks reached the loopback scheduler"
    workers = {r["worker"] for r in records}
    assert workers <= set(task_stream.scheduler_info()["workers"])


def test_dashboard_shows_workers_and_tasks(loopback_cluster, task_stream, specs, tmp_path):
    # a job through the real console command, then the scheduler's HTTP endpoints
    t0 = time.time()
    proc = subprocess.run(
        [
            str(Path(sys.executable).parent / "dkernel"),
            "submit",
            str(specs["rbf-spectral"]),
            "--scheduler",
            loopback_cluster.address,
            "--output",
            str(tmp_path / "cmd.zarr"),
            "--no-progress",
            "--log-json",
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(line) for line in proc.stderr.splitlines() if line.startswith("{")]
    assert any(e["message"].startswith("Dask dashboard: http://127.0.0.1:") for e in lines)
    assert any("complete in" in e["message"] for e in lines)

    records = task_stream.get_task_stream(start=t0)
    keys = " ".join(str(r["key"]) for r in records)
    assert "rbf" in keys or "store" in keys, keys[:500]
    # over this module's jobs (the PCK ensemble, the MSSC stream, ...) both workers worked
    everything = task_stream.get_task_stream()
    assert len({r["worker"] for r in everything}) == 2

    def get(path: str) -> str:
        with urllib.request.urlopen(loopback_cluster.dashboard + path, timeout=10) as r:
            assert r.status == 200
            return r.read().decode()

    workers = task_stream.scheduler_info()["workers"]
    page = get("/info/main/workers.html")
    for addr in workers:
        assert addr in page
    identity = json.loads(get("/json/identity.json"))
    assert set(identity["workers"]) == set(workers)
    counts = json.loads(get("/json/counts.json"))
    assert counts["workers"] == 2 and counts["cores"] == 2
    # each worker's info page lists the tasks it processed
    for addr in workers:
        assert "Worker" in get(f"/info/worker/{urllib.request.quote(addr, safe='')}.html")
