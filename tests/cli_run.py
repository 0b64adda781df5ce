"""``dkernel ARGS`` run in the test's own process, or as a process of its own, for the suites
that drive the CLI."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import time
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

from dkernel.cli import main
from tests.limits import JOB_S

REPO = Path(__file__).resolve().parents[1]


def run_cli(args: list[str], *, limit: float = JOB_S) -> tuple[int, str]:
    """``dkernel ARGS`` in this process: exit code and everything printed; no traceback, and
    within ``limit`` seconds (a hang guard, not a timing)."""
    err, out = io.StringIO(), io.StringIO()
    t = time.perf_counter()
    with redirect_stderr(err), redirect_stdout(out):
        code = main(args)
    elapsed = time.perf_counter() - t
    text = err.getvalue() + out.getvalue()
    assert "Traceback" not in text, text
    assert elapsed < limit, f"{elapsed:.1f} s:\n{text}"
    return code, text


def start_cli(args: list[str], *, cwd: Path) -> subprocess.Popen:
    """``dkernel ARGS`` as a process of its own (this checkout's package first on its path),
    in a session of its own so that ``os.killpg`` reaches the workers it starts; its output
    piped, as text."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])
    return subprocess.Popen(
        [sys.executable, "-m", "dkernel.cli", *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
