"""Small modules with one concern each (issue 53, item 4): no module of dkernel is longer than
:data:`MAX_LINES` lines, so that a reader finds one job per file. A module over the limit is
split into rooms of one concern each, its old import path kept as a re-export."""

from __future__ import annotations

from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "dkernel"

#: Most lines in one module (``wc -l``).
MAX_LINES = 800

#: Modules still over the limit while their split is under way (issue 53, item 4), each with
#: who splits it. Remove an entry once its module is split.
KNOWN_LONG: dict[str, str] = {}


def _lines(path: Path) -> int:
    return path.read_bytes().count(b"\n")


MODULES = sorted(str(p.relative_to(PKG)) for p in PKG.rglob("*.py"))


def test_no_module_is_over_max_lines():
    over = {m: _lines(PKG / m) for m in MODULES if m not in KNOWN_LONG}
    over = {m: n for m, n in over.items() if n > MAX_LINES}
    assert not over, (
        f"modules over {MAX_LINES} lines: {over}. Split each into modules of one concern "
        "(keep its import path, re-exporting the names other modules import from it)."
    )


def test_known_long_modules_exist():
    missing = sorted(m for m in KNOWN_LONG if m not in MODULES)
    assert not missing, f"KNOWN_LONG names modules that no longer exist, remove them: {missing}"


def test_the_check_sees_a_long_module(tmp_path):
    long = tmp_path / "long.py"
    long.write_text("x = 1\n" * (MAX_LINES + 1))
    assert _lines(long) == MAX_LINES + 1 > MAX_LINES
