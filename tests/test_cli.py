import os
import subprocess
import sys
from pathlib import Path

import pytest

from dkernel.cli import main
from dkernel.storage import open_results

REPO = Path(__file__).resolve().parents[1]


def test_validate_ok_and_invalid(tmp_path, capsys):
    assert main(["validate", str(REPO / "jobs" / "wine-rbf-kpca.yaml")]) == 0
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nmethod: nope\ndata: {reader: sklearn, name: wine}\noutput: o.zarr\n")
    assert main(["validate", str(bad)]) == 2
    assert "unknown method 'nope'" in capsys.readouterr().err


def test_submit_to_unreachable_scheduler_fails_fast(capsys, tmp_path):
    code = main(
        [
            "submit",
            str(REPO / "jobs" / "wine-rbf-kpca.yaml"),
            "--scheduler",
            "tcp://127.0.0.1:9",
            "--timeout",
            "1",
            "--output",
            str(tmp_path / "wine.zarr"),
        ]
    )
    assert code == 2
    err = capsys.readouterr().err
    assert "could not reach the Dask scheduler" in err
    assert "drop --scheduler" not in err and "dkernel run" in err


def test_submit_requires_scheduler():
    with pytest.raises(SystemExit) as exc:
        main(["submit", str(REPO / "jobs" / "wine-rbf-kpca.yaml")])
    assert exc.value.code == 2


@pytest.mark.slow
def test_run_and_show_through_the_installed_command(tmp_path):
    out = tmp_path / "w.zarr"
    cmd = [sys.executable, "-m", "dkernel.cli"]
    run = subprocess.run(
        [
            *cmd,
            "run",
            str(REPO / "jobs" / "wine-rbf-kpca.yaml"),
            "--output",
            str(out),
            "--workers",
            "1",
            "--threads",
            "1",
            "--no-progress",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    # the terminal form: one "[dkernel] ..." line per step (progress bars are off)
    lines = [ln for ln in run.stderr.splitlines() if ln.strip()]
    assert all(ln.startswith("[dkernel] ") for ln in lines), run.stderr
    assert any(ln.startswith("[dkernel] Dask dashboard: http://127.0.0.1:") for ln in lines)
    assert any(ln.startswith("[dkernel] job 'wine-rbf-kpca': method rbf-spectral") for ln in lines)
    assert any(ln.startswith("[dkernel] complete in ") for ln in lines)
    again = subprocess.run(
        [*cmd, "run", str(REPO / "jobs" / "wine-rbf-kpca.yaml"), "--output", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert again.returncode == 2 and "--overwrite" in again.stderr
    show = subprocess.run([*cmd, "show", str(out)], capture_output=True, text=True, timeout=120)
    assert show.returncode == 0
    assert "status:   complete" in show.stdout
    assert "/kernel/kernel: (sample=178, sample_=178)" in show.stdout
    assert "timings:" in show.stdout
    # what the job recorded beside its arrays: the width 'auto' chose and what it compared
    embedding = next(ln for ln in show.stdout.splitlines() if ln.startswith("  /embedding: "))
    assert "sigma_fraction_candidates [0.7071, 1, 2]" in embedding, embedding
    assert "  /labels: n_clusters 3, clustering k-means" in show.stdout


def test_methods_lists_registries_and_parameters(capsys):
    assert main(["methods"]) == 0
    out = capsys.readouterr().out
    assert "rbf-spectral" in out and "sklearn" in out
    assert main(["methods", "rbf-spectral"]) == 0
    assert "n_clusters: an int >= 1 (required)" in capsys.readouterr().out
    assert main(["methods", "nope"]) == 2
    assert "Valid names:" in capsys.readouterr().err


def test_cluster_config_prints_or_writes_the_deploy_settings(capsys, tmp_path):
    from dkernel.runtime.connect import cluster_config_yaml

    assert main(["cluster-config"]) == 0
    assert capsys.readouterr().out == cluster_config_yaml()
    target = tmp_path / "dask" / "dkernel.yaml"
    target.parent.mkdir()
    assert main(["cluster-config", "--output", str(target)]) == 0
    assert target.read_text(encoding="utf-8") == cluster_config_yaml()
    assert main(["cluster-config", "--output", str(tmp_path / "missing" / "x.yaml")]) == 2
    assert "cannot write the cluster settings" in capsys.readouterr().err


def test_version_flag(capsys):
    import dkernel
    from dkernel.cli import main

    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.strip() == f"dkernel {dkernel.__version__}"


def test_every_argument_has_help():
    import argparse

    from dkernel.cli import _parser

    parser = _parser()
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name, sub in subparsers.choices.items():
        for action in sub._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            assert action.help, f"dkernel {name}: argument {action.dest!r} has no help"


def test_user_facing_help_has_no_internal_citations(capsys):
    import re

    from dkernel.io.registry import READERS, get_reader
    from dkernel.jobs.registry import METHODS, get_method

    get_method("rbf-spectral")
    get_reader("csv")
    citation = re.compile(r"\b00\d\b|\bEq\.|seed 0\d\d|Paper [IV]+\b|\bAlg\. ?\d|§|\bFig\. ?\d")
    for registry in (METHODS, READERS):
        for name, entry in registry.items():
            for text in [entry.description] + [p.doc or "" for p in entry.params]:
                assert not citation.search(text), f"{name}: {text}"
    from dkernel.cli import main

    assert main(["methods", "rbf-spectral"]) == 0
    out = capsys.readouterr().out
    assert "(default required)" not in out and "(required)" in out


def test_show_into_a_closed_pipe_is_quiet(tmp_path):
    from dkernel.jobs.runner import run_job

    store = run_job(
        REPO / "jobs" / "wine-rbf-kpca.yaml",
        output=tmp_path / "w.zarr",
        progress=False,
        n_workers=1,
    )
    # the reader is gone before dkernel writes a byte (what `| head` does to a long output)
    read, write = os.pipe()
    os.close(read)
    proc = subprocess.run(
        [sys.executable, "-m", "dkernel.cli", "show", str(store)],
        stdout=write,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    os.close(write)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr


def test_the_script_exits_with_the_commands_code_after_its_exit_handlers(tmp_path):
    """``python -m dkernel.cli`` (the console script's path): exit codes of --help, a usage
    error and a refused spec; an exit handler registered by the command's process still
    runs (the script skips the interpreter's teardown, not ``atexit``)."""
    cmd = [sys.executable, "-m", "dkernel.cli"]
    assert subprocess.run([*cmd, "--help"], capture_output=True).returncode == 0
    usage = subprocess.run([*cmd, "run"], capture_output=True, text=True)
    assert usage.returncode == 2 and "required: job" in usage.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nmethod: nope\n")
    refused = subprocess.run([*cmd, "validate", str(bad)], capture_output=True, text=True)
    assert refused.returncode == 2 and "dkernel: error:" in refused.stderr
    marker = tmp_path / "atexit-ran"
    code = (
        "import atexit, pathlib, sys; "
        f"atexit.register(pathlib.Path({str(marker)!r}).touch); "
        "sys.argv = ['dkernel', '--help']; "
        "from dkernel.cli import script; script()"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0 and "usage: dkernel" in done.stdout
    assert marker.exists()


def test_several_jobs_run_in_turn_on_one_cluster(tmp_path):
    jobs = [str(REPO / "jobs" / f"wine-rbf-{e}.yaml") for e in ("kpca", "keca")]
    cmd = [sys.executable, "-m", "dkernel.cli", "run", *jobs, "--output-root", str(tmp_path)]
    run = subprocess.run(
        [*cmd, "--workers", "1", "--threads", "1", "--no-progress"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    # one cluster for both: its link once, then each job on it
    assert run.stderr.count("Dask dashboard: http://127.0.0.1:") == 1, run.stderr
    assert "[dkernel] one cluster for the jobs of this command that need one" in run.stderr
    for name in ("wine-rbf-kpca", "wine-rbf-keca"):
        tree = open_results(tmp_path / "results" / f"{name}.zarr")
        assert tree.attrs["status"] == "complete"
        assert tree.attrs["runtime"]["scheduler"] == "embedded LocalCluster"


def test_several_jobs_start_a_cluster_only_for_those_that_need_one(tmp_path):
    """Small jobs run in process; the first job that needs process workers starts the cluster,
    the next one runs on it (one dashboard link), a small job after them stays in process."""
    from dkernel.jobs.runner import IN_PROCESS_SCHEDULER

    names = ["small-a", "big-a", "big-b", "small-b"]
    base = (REPO / "jobs" / "wine-rbf-kpca.yaml").read_text()
    jobs = []
    for name in names:
        text = base.replace("name: wine-rbf-kpca", f"name: {name}")
        text = text.replace("results/wine-rbf-kpca.zarr", f"results/{name}.zarr")
        if name.startswith("big"):
            text += "runtime:\n  in_process: false\n  threads_per_worker: 1\n"
        (tmp_path / f"{name}.yaml").write_text(text)
        jobs.append(str(tmp_path / f"{name}.yaml"))
    cmd = [sys.executable, "-m", "dkernel.cli", "run", *jobs, "--output-root", str(tmp_path)]
    run = subprocess.run([*cmd, "--no-progress"], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert run.stderr.count("Dask dashboard: http://127.0.0.1:") == 1, run.stderr
    schedulers = [
        open_results(tmp_path / "results" / f"{n}.zarr").attrs["runtime"]["scheduler"]
        for n in names
    ]
    assert schedulers == [
        IN_PROCESS_SCHEDULER,
        *["embedded LocalCluster"] * 2,
        IN_PROCESS_SCHEDULER,
    ]
    small = subprocess.run(
        [*cmd[:4], jobs[0], jobs[3], *cmd[-2:], "--no-progress", "--overwrite"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert small.returncode == 0, small.stderr
    assert "Dask dashboard" not in small.stderr, small.stderr  # no cluster at all


def test_several_jobs_are_all_checked_before_any_runs(tmp_path):
    good = str(REPO / "jobs" / "wine-rbf-kpca.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nmethod: nope\noutput: x.zarr\n")
    base = [sys.executable, "-m", "dkernel.cli", "run", "--output-root", str(tmp_path)]
    cases = [
        ([good, str(bad)], "data: is required"),
        ([good, good], "write the same store"),
        ([good, str(bad), "--output", str(tmp_path / "o.zarr")], "names the store of one job"),
    ]
    for args, message in cases:
        run = subprocess.run([*base, *args], capture_output=True, text=True, timeout=120)
        assert run.returncode == 2, run.stderr
        assert message in run.stderr and "Traceback" not in run.stderr
    assert not (tmp_path / "results").exists()  # the good job did not run


def test_the_script_pauses_the_garbage_collector_only_for_the_imports(monkeypatch):
    """``script`` pauses the cyclic GC; running a job resumes it once the runner is imported,
    with the imported objects frozen; any other command resumes it before it starts."""
    import gc

    import dkernel.cli as cli
    import dkernel.cli_process as process

    try:
        for resume in (
            cli._import_runner,
            lambda: cli._dispatch(cli._parser().parse_args(["methods"])),
        ):
            gc.disable()
            monkeypatch.setattr(process, "_GC_PAUSED", True)
            resume()
            assert gc.isenabled() and gc.get_freeze_count() > 0 and not process._GC_PAUSED
            gc.unfreeze()
        # not paused (main() in this process): nothing is frozen
        cli._import_runner()
        assert gc.isenabled() and gc.get_freeze_count() == 0
    finally:
        gc.unfreeze()
        gc.enable()


@pytest.mark.parametrize(
    ("job", "draws"), [("demo-landsat-mssc.yaml", True), ("wine-rbf-kpca.yaml", False)]
)
def test_run_starts_the_quicklook_helper_before_its_imports_when_the_job_draws_one(
    job, draws, monkeypatch, tmp_path
):
    """The helper process imports the plotting library while ``dkernel run`` imports the
    job's; a job without a quick-look (a table) starts none."""
    import dkernel.cli as cli
    from dkernel import _helper

    if _helper._shared is not None:  # another test's
        _helper._shared.close()
        monkeypatch.setattr(_helper, "_shared", None)
    seen = []

    def import_runner():
        seen.append(_helper.shared_helper(start=False) is not None)
        raise SystemExit(0)  # the job itself is not this test's

    monkeypatch.setattr(cli, "_import_runner", import_runner)
    with pytest.raises(SystemExit):
        main(["run", str(REPO / "jobs" / job), "--output-root", str(tmp_path)])
    assert seen == [draws]
