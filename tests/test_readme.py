"""The README's Quick tour runs as written: every bash and python block, in order, in a fresh
directory (blocks marked ``<!-- readme-test: skip (reason) -->`` are skipped with that reason)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SKIP = re.compile(r"<!--\s*readme-test:\s*skip\s*\(([^)]*)\)\s*-->\s*$")


def quick_tour_blocks() -> list[tuple[str, str, str | None]]:
    """(language, code, skip reason) of every fenced block in the Quick tour section."""
    text = (ROOT / "README.md").read_text()
    section = text.split("\n## Quick tour", 1)[1].split("\n## ", 1)[0]
    blocks, lines, i = [], section.splitlines(), 0
    while i < len(lines):
        match = re.match(r"^```(\w+)\s*$", lines[i])
        if match:
            j = i + 1
            while not lines[j].startswith("```"):
                j += 1
            before = next((ln for ln in reversed(lines[:i]) if ln.strip()), "")
            skip = SKIP.match(before.strip())
            blocks.append((match.group(1), "\n".join(lines[i + 1 : j]), skip and skip.group(1)))
            i = j
        i += 1
    return blocks


def test_the_quick_tour_has_runnable_blocks():
    langs = [lang for lang, _, skip in quick_tour_blocks() if skip is None]
    assert langs.count("bash") >= 1 and langs.count("python") >= 2


@pytest.mark.slow
def test_quick_tour_runs_as_written(tmp_path):
    shutil.copytree(ROOT / "jobs", tmp_path / "jobs")
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env.setdefault("MPLBACKEND", "Agg")
    skipped = []
    for n, (lang, code, skip) in enumerate(quick_tour_blocks()):
        if skip is not None:
            skipped.append(skip)
            continue
        if lang == "bash":
            cmd = ["bash", "-euo", "pipefail", "-c", code]
        elif lang == "python":
            script = tmp_path / f"snippet_{n}.py"
            script.write_text(code)
            cmd = [sys.executable, str(script)]
        else:
            continue  # yaml / text: shown, not run
        proc = subprocess.run(
            cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
        )
        assert proc.returncode == 0, (
            f"block {n} ({lang}) failed:\n{code}\n---\n{proc.stderr[-3000:]}"
        )
    assert skipped == ["needs a running Dask scheduler"]
