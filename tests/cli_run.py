"""``dkernel ARGS`` run in the test's own process, for the suites that drive the CLI."""

from __future__ import annotations

import io
import time
from contextlib import redirect_stderr, redirect_stdout

from dkernel.cli import main
from tests.limits import JOB_S


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
