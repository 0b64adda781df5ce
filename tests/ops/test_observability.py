"""Observability: per-phase wall times, task counts and peak worker memory in the store;
``dkernel show`` prints them; ``--log-level`` and ``--log-json``."""

from __future__ import annotations

import io
import json
import logging
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

from dkernel.cli import JsonFormatter, TextFormatter, main
from dkernel.runtime.monitor import ResourceMonitor

REPO = Path(__file__).resolve().parents[2]


def _run(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(list(args))
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def json_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("obs") / "wine.zarr"
    job = str(REPO / "jobs" / "wine-rbf-kpca.yaml")
    code, stdout, stderr = _run(
        "run", job, "--output", str(out), "--workers", "2", "--threads", "1", "--log-json"
    )
    assert code == 0, stderr
    return out, stdout, stderr


def test_store_records_phases_tasks_and_memory(json_run):
    import zarr

    attrs = dict(zarr.open_group(str(json_run[0]), mode="r").attrs)
    assert {"input", "kernel", "embedding_and_clustering", "total"} <= set(attrs["timings"])
    assert all(v >= 0 for v in attrs["timings"].values())
    res = attrs["resources"]
    assert res["n_workers"] == 2
    assert res["n_tasks"] >= 2
    assert sum(w["tasks"] for w in res["workers"].values()) == res["n_tasks"]
    # a Python worker process needs tens of MiB at least; less than the 24 GiB machine
    assert 20 * 2**20 < res["peak_worker_memory"] < 24 * 2**30
    assert attrs["runtime"] == {
        "scheduler": "embedded LocalCluster",
        "n_workers": 2,
        "n_threads": 2,
    }


def test_log_json_lines_and_no_progress_bar(json_run):
    _, stdout, stderr = json_run
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    entries = [json.loads(ln) for ln in lines]  # every line is JSON, no progress bars
    assert {e["level"] for e in entries} == {"info"}
    # each line names the module that logged it (logging.getLogger(__name__))
    assert all(e["logger"].startswith("dkernel.") and "time" in e for e in entries)
    by_logger = {e["logger"] for e in entries}
    assert {"dkernel.jobs.runner", "dkernel.jobs.outputs"} <= by_logger, by_logger
    messages = [e["message"] for e in entries]
    assert not any("[dkernel]" in m for m in messages)  # the text formatter's prefix only
    assert any(m.startswith("Dask dashboard: http://127.0.0.1:") for m in messages)
    assert any(m.startswith("job 'wine-rbf-kpca': method rbf-spectral") for m in messages)
    assert any(m.startswith("ACC ") for m in messages)  # the metrics line
    assert any(m.startswith("complete in") for m in messages)


def test_show_prints_timings_tasks_and_memory(json_run):
    code, stdout, _ = _run("show", str(json_run[0]))
    assert code == 0
    assert "timings:  input " in stdout and "total " in stdout
    assert "tasks:    " in stdout and "on 2 workers; peak worker memory " in stdout
    assert "cluster:  embedded LocalCluster, 2 workers, 2 threads" in stdout
    code, stdout, _ = _run("show", str(json_run[0]), "--json")
    info = json.loads(stdout)
    assert info["attrs"]["resources"]["n_workers"] == 2


def test_log_level_warning_silences_progress_messages(tmp_path):
    code, _, stderr = _run(
        "run",
        str(REPO / "jobs" / "wine-rbf-kpca.yaml"),
        "--output",
        str(tmp_path / "w.zarr"),
        "--workers",
        "1",
        "--threads",
        "1",
        "--no-progress",
        "--log-level",
        "warning",
    )
    assert code == 0
    assert stderr.strip() == ""
    # errors still reach stderr, as JSON with --log-json
    code, _, stderr = _run(
        "run",
        str(REPO / "jobs" / "wine-rbf-kpca.yaml"),
        "--output",
        str(tmp_path / "w.zarr"),
        "--log-json",
        "--log-level",
        "error",
    )
    assert code == 2
    entry = json.loads(stderr.strip())
    assert entry["level"] == "error" and "--overwrite" in entry["message"]


def test_bad_log_level_is_a_usage_error():
    with pytest.raises(SystemExit) as exc, redirect_stderr(io.StringIO()):
        main(["show", "x.zarr", "--log-level", "loud"])
    assert exc.value.code == 2


def test_text_formatter_prefixes_lines_and_names_levels_other_than_info():
    def line(level: int, message: str) -> str:
        record = logging.LogRecord("dkernel.jobs.runner", level, __file__, 1, message, (), None)
        return TextFormatter().format(record)

    assert line(logging.INFO, "complete in 1.0 s: w.zarr") == "[dkernel] complete in 1.0 s: w.zarr"
    assert line(logging.WARNING, "slow") == "[dkernel] warning: slow"
    assert line(logging.DEBUG, "chunks (64, 13)") == "[dkernel] debug: chunks (64, 13)"


def test_setup_logging_routes_module_loggers_once(capsys):
    from dkernel.cli import setup_logging

    setup_logging("info")
    setup_logging("info")  # a second call replaces the handler: no duplicated lines
    logging.getLogger("dkernel.jobs.runner").info("job started")
    logging.getLogger("dkernel.jobs.runner").debug("not shown at info")
    assert capsys.readouterr().err == "[dkernel] job started\n"
    setup_logging("debug", json_lines=True)
    logging.getLogger("dkernel.jobs.steps.kppr").debug("scoring")
    entry = json.loads(capsys.readouterr().err)
    assert entry["level"] == "debug" and entry["logger"] == "dkernel.jobs.steps.kppr"
    assert entry["message"] == "scoring"


def test_python_warnings_become_log_lines(capsys):
    """A warning under the command line (a NumericalWarning of an estimator in a job) was two
    lines of the interpreter's text naming the ``dkernel`` script, in the middle of
    ``--log-json``'s JSON lines."""
    import warnings

    from dkernel.cli import setup_logging
    from dkernel.errors import NumericalWarning

    setup_logging("info", json_lines=True)
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.warn("drops 1 all-NaN column", NumericalWarning, stacklevel=1)
    entry = json.loads(capsys.readouterr().err)
    assert entry["level"] == "warning" and entry["logger"] == "dkernel.warnings"
    assert entry["message"] == "NumericalWarning: drops 1 all-NaN column"
    setup_logging("error")  # below the level shown: nothing
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.warn("not shown", NumericalWarning, stacklevel=1)
    assert capsys.readouterr().err == ""


def test_json_formatter_includes_exceptions():
    try:
        raise ValueError("bad thing")
    except ValueError:
        import sys

        record = logging.LogRecord(
            "dkernel", logging.ERROR, __file__, 1, "oops", (), sys.exc_info()
        )
    entry = json.loads(JsonFormatter().format(record))
    assert entry["message"] == "oops" and "ValueError: bad thing" in entry["exception"]


def test_monitor_counts_tasks_per_worker(client):
    import dask.array as da

    x = da.ones((100, 10), chunks=(10, 10))
    with ResourceMonitor(client, interval=0.05) as mon:
        assert float(client.compute(x.sum()).result()) == 1000.0
    summary = mon.summary()
    assert summary["n_workers"] == 2
    # 10 chunk tasks + a reduction tree: at least 11 tasks ran
    assert summary["n_tasks"] >= 11
    assert summary["peak_worker_memory"] > 0
