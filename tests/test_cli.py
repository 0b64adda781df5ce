import subprocess
import sys
from pathlib import Path

import pytest

from dkernel.cli import main

REPO = Path(__file__).resolve().parents[1]


def test_validate_ok_and_invalid(tmp_path, capsys):
    assert main(["validate", str(REPO / "jobs" / "wine-rbf-kpca.yaml")]) == 0
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nmethod: nope\ndata: {reader: sklearn, name: wine}\noutput: o.zarr\n")
    assert main(["validate", str(bad)]) == 2
    assert "unknown method 'nope'" in capsys.readouterr().err


def test_submit_to_unreachable_scheduler_fails_fast(capsys):
    code = main(
        [
            "submit",
            str(REPO / "jobs" / "wine-rbf-kpca.yaml"),
            "--scheduler",
            "tcp://127.0.0.1:9",
            "--timeout",
            "1",
        ]
    )
    assert code == 2
    assert "could not reach the Dask scheduler" in capsys.readouterr().err


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
    assert "Dask dashboard: http://127.0.0.1:" in run.stderr
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


def test_methods_lists_registries_and_parameters(capsys):
    assert main(["methods"]) == 0
    out = capsys.readouterr().out
    assert "rbf-spectral" in out and "sklearn" in out
    assert main(["methods", "rbf-spectral"]) == 0
    assert "n_clusters: an int >= 1 (default required)" in capsys.readouterr().out
    assert main(["methods", "nope"]) == 2
    assert "Valid names:" in capsys.readouterr().err
