"""No import circle among dkernel's modules: read from the source with ``ast``, nothing run.

Every import counts, at the top of a module, under ``if TYPE_CHECKING:`` and inside a function
(a lazy import), so that a circle cannot hide behind any of them. ``from pkg import name``
depends on ``pkg.name`` when that is a module, else on ``pkg`` itself.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _modules(root: Path) -> dict[str, Path]:
    found = {}
    for path in sorted((root / "dkernel").rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _imports(path: Path, modules: dict[str, Path], root: Path) -> set[str]:
    """The dkernel modules ``path`` imports, anywhere in it."""
    package = ".".join(path.relative_to(root).with_suffix("").parts[:-1])
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the module's own package
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                out.add(sub if sub in modules else base)
    return {name for name in out if name in modules}


def import_cycles(root: Path = REPO) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan), each sorted."""
    modules = _modules(root)
    graph = {name: _imports(path, modules, root) for name, path in modules.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1 or v in graph[v]:
                cycles.append(sorted(group))

    for name in sorted(graph):
        if name not in index:
            visit(name)
    return cycles


def test_no_import_cycle_among_dkernel_modules():
    cycles = import_cycles()
    assert not cycles, "modules that import each other in a circle: " + "; ".join(
        " <-> ".join(group) for group in cycles
    )


@pytest.mark.parametrize("source", ["from dkernel.b import x\n", "import dkernel.b\n"])
def test_a_circle_is_found(tmp_path, source):
    """The check sees a circle made by a top-level or a lazy import of the other module."""
    package = tmp_path / "dkernel"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text(source)
    (package / "b.py").write_text("def f():\n    from dkernel import a\n")
    assert import_cycles(tmp_path) == [["dkernel.a", "dkernel.b"]]
