"""Real distributed runs: ``dkernel submit`` every method to a loopback ``dask scheduler`` with
two ``dask worker`` processes; results equal an embedded run bit for bit; the scheduler's
dashboard shows the workers and the job's tasks."""

from __future__ import annotations

import io
import json
import time
import urllib.error
import urllib.request
from contextlib import redirect_stderr

import pytest

from dkernel.cli import main
from dkernel.jobs.registry import METHODS as REGISTRY
from dkernel.jobs.runner import run_job
from dkernel.storage import open_results

#: end to end (every method on a loopback cluster of dask processes): tasks.py test --fast skips it
pytestmark = pytest.mark.slow

#: Every registered method (a new one needs a small spec in ``ops.method_specs``).
METHODS = REGISTRY.names()


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
        m: run_job(specs[m], output=out / f"{m}.zarr", client=client, progress=False)
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
    # a job with JSON logs, then the scheduler's HTTP endpoints
    t0 = time.time()
    err = io.StringIO()
    with redirect_stderr(err):
        code = main(
            [
                "submit",
                str(specs["pck-spectral"]),
                "--scheduler",
                loopback_cluster.address,
                "--output",
                str(tmp_path / "cmd.zarr"),
                "--log-json",
            ]
        )
    assert code == 0, err.getvalue()
    lines = [json.loads(line) for line in err.getvalue().splitlines() if line.strip()]
    assert any(e["message"].startswith("Dask dashboard: http://127.0.0.1:") for e in lines)
    assert any("complete in" in e["message"] for e in lines)

    records = task_stream.get_task_stream(start=t0)
    keys = " ".join(str(r["key"]) for r in records)
    # Γ of this small job is held by the client, which computes it from the N × p data (no
    # posterior_block task); a Γ too large to hold is computed by the workers, pass by pass
    assert "fit_init_batch" in keys, keys[:500]
    # the PCK ensemble (one task per initial condition) ran on both workers
    assert len({r["worker"] for r in records}) == 2

    def get(path: str) -> str:
        try:
            with urllib.request.urlopen(loopback_cluster.dashboard + path, timeout=10) as r:
                return r.read().decode()
        except urllib.error.HTTPError as exc:
            raise AssertionError(f"{path}: HTTP {exc.code}") from exc

    workers = task_stream.scheduler_info()["workers"]
    page = get("/info/main/workers.html")
    for addr in workers:
        assert addr in page
    counts = json.loads(get("/json/counts.json"))
    assert counts["workers"] == 2 and counts["cores"] == 2
    # each worker's info page lists the tasks it processed
    for addr in workers:
        assert "Worker" in get(f"/info/worker/{urllib.request.quote(addr, safe='')}.html")


def test_a_job_computes_on_its_own_client_while_another_is_current(
    specs, loopback_cluster, tmp_path
):
    """A notebook's ``with Client(...)`` leaves that client current; a submitted job's computes
    must still go to the job's own client, which persisted their inputs: from another client a
    compute could reach the scheduler before the persist ("lost dependencies", seen in CI for
    the kernel-kmeans job under load). The scheduler logs every graph under the client that
    sent it."""
    from distributed import Client

    with Client(loopback_cluster.address, timeout=30) as other:
        assert Client.current() is other
        err = io.StringIO()
        with redirect_stderr(err):
            code = main(
                [
                    "submit",
                    str(specs["kernel-kmeans"]),
                    "--scheduler",
                    loopback_cluster.address,
                    "--output",
                    str(tmp_path / "own.zarr"),
                    "--no-progress",
                ]
            )
        assert code == 0, err.getvalue()
        graphs_from_other = [
            e for _, e in other.get_events(other.id) if e.get("action") == "update-graph"
        ]
        assert graphs_from_other == []
        assert open_results(tmp_path / "own.zarr").attrs["status"] == "complete"
