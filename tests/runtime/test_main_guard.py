"""A script that starts process workers outside ``if __name__ == "__main__":`` gets a clear
error before any process starts; guarded scripts, threads, ``python -c`` and ``fork`` are
unaffected. Scripts run for real in a fresh interpreter."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from dkernel.runtime._main_guard import _in_main_guard

REPO = Path(__file__).resolve().parents[2]

CONNECT = "client = dkernel.connect(n_workers=1, threads_per_worker=1, quiet=True{extra})"


def run_python(args: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess:
    environ = {**os.environ, "PYTHONPATH": str(REPO), **env}
    return subprocess.run(
        [sys.executable, *args],
        cwd=cwd,
        env=environ,
        capture_output=True,
        text=True,
        timeout=180,
    )


def write_script(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "analysis.py"
    path.write_text(textwrap.dedent(body), encoding="utf-8")
    return path


def assert_refused(result: subprocess.CompletedProcess, line: int) -> None:
    assert result.returncode != 0
    err = result.stderr
    assert "dkernel.errors.UnguardedMainError" in err, err[-3000:]
    assert f"analysis.py (line {line})" in err
    assert 'if __name__ == "__main__":' in err
    assert "re-imports the script" in err
    assert "processes=False" in err and "tcp://host:8786" in err
    # refused before any worker process started: no nanny, no cluster
    assert "RuntimeError: Nanny failed to start" not in err
    assert "ok" not in result.stdout


def test_unguarded_script_is_refused_with_the_fix(tmp_path):
    script = write_script(
        tmp_path,
        f"""\
        import dkernel

        {CONNECT.format(extra="")}
        print("ok")
        """,
    )
    assert_refused(run_python([script.name], tmp_path), line=3)


def test_unguarded_call_through_a_function_is_refused(tmp_path):
    # connect() inside main(), but main() itself called at the top level
    script = write_script(
        tmp_path,
        f"""\
        import dkernel


        def main():
            {CONNECT.format(extra="")}
            print("ok")


        main()
        """,
    )
    assert_refused(run_python([script.name], tmp_path), line=9)


def test_guarded_script_starts_its_cluster(tmp_path):
    script = write_script(
        tmp_path,
        f"""\
        import dkernel


        def main():
            {CONNECT.format(extra="")}
            print("ok", client.submit(sum, [1, 2]).result())
            client.close()


        if __name__ == "__main__":
            main()
        """,
    )
    result = run_python([script.name], tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "ok 3" in result.stdout


def test_unguarded_script_with_thread_workers_runs(tmp_path):
    script = write_script(
        tmp_path,
        f"""\
        import dkernel

        {CONNECT.format(extra=", processes=False")}
        print("ok", client.submit(sum, [1, 2]).result())
        client.close()
        """,
    )
    result = run_python([script.name], tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "ok 3" in result.stdout


@pytest.mark.parametrize(
    ("how", "method"),
    [("-c", "spawn"), ("script", "fork")],
)
def test_no_refusal_where_workers_do_not_reimport_the_script(tmp_path, how, method):
    # `python -c` has no file to re-import; fork copies the process instead of re-importing
    code = textwrap.dedent(
        f"""\
        from dkernel.runtime._main_guard import check_main_guard
        check_main_guard({method!r})
        print("ok")
        """
    )
    args = ["-c", code] if how == "-c" else [write_script(tmp_path, code).name]
    result = run_python(args, tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "ok" in result.stdout


@pytest.mark.parametrize(
    ("source", "line", "guarded"),
    [
        ('x = 1\nif __name__ == "__main__":\n    run()\n', 3, True),
        ('x = 1\nif __name__ == "__main__":\n    run()\n', 1, False),
        ("if '__main__' == __name__:\n    pass\n    run(\n        1,\n    )\n", 4, True),
        ('if __name__ != "__main__":\n    pass\nelse:\n    run()\n', 4, True),
        ('if __name__ != "__main__":\n    run()\n', 2, False),
        ('if __name__ == "other":\n    run()\n', 2, False),
        ('with open(f) as g:\n    if __name__ == "__main__":\n        run()\n', 3, True),
    ],
)
def test_guard_detection(tmp_path, source, line, guarded):
    path = tmp_path / "s.py"
    path.write_text(source, encoding="utf-8")
    assert _in_main_guard(str(path), line) is guarded


def test_unreadable_source_is_not_refused(tmp_path):
    assert _in_main_guard(str(tmp_path / "missing.py"), 1) is None
    bad = tmp_path / "bad.py"
    bad.write_text("def (:\n", encoding="utf-8")
    assert _in_main_guard(str(bad), 1) is None
