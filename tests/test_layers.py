"""The numeric layer never imports Dask, Zarr or xarray (DESIGN.md §2).

Checked statically (the module's own imports and, transitively, the dkernel modules it
imports), so package ``__init__`` files that re-export estimators don't count.
"""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "dkernel"
FORBIDDEN = ("dask", "zarr", "distributed", "xarray", "rioxarray")
NUMERIC = [
    "kernels/rbf.py",
    "linalg/eigen.py",
    "linalg/kmeans.py",
    "spectral/dense.py",
    "metrics.py",
    "_validation.py",
    "_random.py",
    "errors.py",
]
NUMERIC += [
    str(p.relative_to(PKG))
    for pattern in (
        "gmm/em*.py",
        "meanshift/kernels*.py",
        "decomposition/nmf*.py",
        "ranking/ppr.py",
        "ranking/seeds.py",
        "ranking/metrics.py",
    )
    for p in sorted(PKG.glob(pattern))
]


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def _module_path(name: str) -> Path | None:
    rel = Path(*name.split(".")[1:])
    for candidate in (
        ROOT / "dkernel" / rel.with_suffix(".py"),
        ROOT / "dkernel" / rel / "__init__.py",
    ):
        if candidate.exists():
            return candidate
    return None


@pytest.mark.parametrize("relpath", NUMERIC)
def test_numeric_module_does_not_import_dask_or_zarr(relpath):
    seen, todo = set(), [PKG / relpath]
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        for name in _imports(path):
            top = name.split(".")[0]
            assert top not in FORBIDDEN, f"{relpath} reaches {name} via {path.relative_to(ROOT)}"
            if top == "dkernel":
                target = _module_path(name)
                if target is not None and target.name != "__init__.py":
                    todo.append(target)


# --- import cycles and floors (issue 16, item 3) ---------------------------------------------


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in PKG.rglob("*.py")}


def _resolve(name: str) -> str | None:
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _module_level_imports(path: Path) -> set[str]:
    """dkernel modules imported when ``path`` is imported: module-level statements (inside
    ``if``/``try`` too), not ``if TYPE_CHECKING:`` blocks nor function bodies.
    ``from package import submodule`` counts as the submodule."""
    deps = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.dump(node.test):
            continue
        for n in ast.walk(node) if isinstance(node, ast.If | ast.Try) else [node]:
            if isinstance(n, ast.Import):
                deps.update(_resolve(a.name) for a in n.names if a.name.startswith("dkernel"))
            elif isinstance(n, ast.ImportFrom) and n.level == 0 and n.module:
                if not n.module.startswith("dkernel"):
                    continue
                subs = [f"{n.module}.{a.name}" for a in n.names]
                found = [s for s in subs if s in MODULES]
                deps.update(found if len(found) == len(subs) else [_resolve(n.module), *found])
    deps.discard(None)
    deps.discard(_module_name(path))
    return deps


def test_no_import_cycles():
    graph = {name: _module_level_imports(path) for name, path in MODULES.items()}
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(name: str, path: list[str]) -> None:
        state[name] = 1
        for dep in sorted(graph.get(name, ())):
            if state.get(dep) == 1:
                cycle = path[path.index(dep) :] + [dep]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if dep not in state:
                visit(dep, [*path, dep])
        state[name] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])


#: What the lower floors may import (any import, function bodies included): the parameter
#: schema type and the generic registry sit below io; io never reaches up to jobs or the CLI.
FLOORS = {
    "dkernel/schema": ("dkernel.errors", "dkernel.schema"),
    "dkernel/registry.py": ("dkernel.errors", "dkernel.schema.params"),
}
NEVER = {
    "dkernel/io": ("dkernel.jobs", "dkernel.cli", "dkernel.runtime"),
    "dkernel/kernels": ("dkernel.io", "dkernel.jobs", "dkernel.cli"),
    "dkernel/jobs": ("dkernel.cli",),
}


def _files(where: str) -> list[Path]:
    target = ROOT / where
    return [target] if target.suffix == ".py" else sorted(target.rglob("*.py"))


@pytest.mark.parametrize("where", sorted(FLOORS))
def test_lower_floors_import_only_below(where):
    allowed = FLOORS[where]
    for path in _files(where):
        for name in _imports(path):
            if name.startswith("dkernel"):
                ok = any(name == a or name.startswith(a + ".") for a in allowed)
                assert ok, f"{path.relative_to(ROOT)} imports {name}"


@pytest.mark.parametrize("where", sorted(NEVER))
def test_no_arrow_up_a_floor(where):
    for path in _files(where):
        for name in _imports(path):
            for above in NEVER[where]:
                assert not (name == above or name.startswith(above + ".")), (
                    f"{path.relative_to(ROOT)} imports {name}"
                )
