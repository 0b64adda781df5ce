"""The layer rules of the package (docs/DEVELOPING.md, "Layout and layers"; issue 16, item 5),
checked statically.

1. The numeric layer never imports Dask, Zarr or xarray (checked through the dkernel modules it
   imports, so package ``__init__`` files that re-export estimators don't count).
2. No import cycles among module-level imports, and no function-level import that closes a
   cycle (except the ones listed in ``KNOWN_VIOLATIONS``).
3. No import goes up a floor of ``FLOORS``, and no family imports another family's estimators.

How an import counts:

* A **module-level** import (also inside a module-level ``try`` or ``if``) runs when the
  module is imported: these edges make the import-time graph, which must have no cycle.
* A **function-level** (lazy) import runs later, so it cannot deadlock an import, but it is a
  dependency all the same: it counts for the floors, and one that closes a cycle with the
  other imports is reported too (a registry that imports its built-ins on first use).
* An import under ``if TYPE_CHECKING:`` is an annotation only and never counts.
* A **deferred** import (``deferred("dkernel.x", "f")``, ``EstimatorSchema("dkernel.x:C")``,
  ``constants("dkernel.x", "N")``; see ``dkernel._lazy``) counts as a function-level one.
* ``from dkernel.a import b`` points at the module ``dkernel.a.b`` when there is one, at
  ``dkernel.a`` (its ``__init__``) otherwise. The parent packages' ``__init__`` files that
  Python runs on the way are not edges; a package ``__init__`` is checked as a module itself.
"""

from __future__ import annotations

import ast
import functools
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "dkernel"

#: The floors of docs/DEVELOPING.md's layer table, lowest first: a module may import modules on its
#: own floor or below, never above. A module sits on the floor of the longest name listed here that
#: is the module itself or a package above it.
FLOORS: tuple[tuple[str, tuple[str, ...]], ...] = (
    # errors, argument checks, seeds, cost budgets, feature maps by name, the parameter schema
    # type, the generic registry and the helper process: used by every floor
    (
        "foundation",
        (
            "dkernel.errors",
            "dkernel.schema",
            "dkernel.registry",
            "dkernel._validation",
            "dkernel._random",
            "dkernel._budget",
            "dkernel._feature_maps",
            "dkernel._lazy",
            "dkernel._files",
            "dkernel._helper",
            "dkernel._cache",
        ),
    ),
    # compute kernels and graph builders (the two lowest layers): the shared kernels, solvers and
    # blocked/k-NN graphs, the progress of Dask work, and each family's NumPy kernel modules
    (
        "numerics",
        (
            "dkernel.metrics",
            "dkernel.rows",
            "dkernel.kernels",
            "dkernel.linalg",
            "dkernel.graphs",
            "dkernel.runtime.progress",
            "dkernel.runtime.shared",
            "dkernel.runtime.persist",
            "dkernel.gmm.em",
            "dkernel.meanshift.kernels",
            "dkernel.meanshift.stage_two",
            "dkernel.decomposition.nmf",
            "dkernel.decomposition.nmf_posteriors",
            "dkernel.decomposition.kernels",
            "dkernel.spectral.dense",
            "dkernel.spectral.sparse",
            "dkernel.spectral.pck_memory",
            "dkernel.model_order",
            "dkernel.ranking.ppr",
            "dkernel.ranking.seeds",
            "dkernel.ranking.metrics",
            "dkernel.kmeans.features",
            "dkernel.kmeans.lloyd",
            "dkernel.cca.dual",
            "dkernel.change.mad",
            "dkernel.change.threshold",
        ),
    ),
    # estimators, one family per package (see FAMILIES)
    (
        "estimators",
        (
            "dkernel.gmm",
            "dkernel.spectral",
            "dkernel.ranking",
            "dkernel.meanshift",
            "dkernel.decomposition",
            "dkernel.kmeans",
            "dkernel.cca",
            "dkernel.deep",
            "dkernel.reservoir",
        ),
    ),
    # the only code that knows the results store's layout
    ("storage", ("dkernel.storage",)),
    # readers of rasters and tables, pixel streams, writers of map files; change detection
    # between two rasters (kernel CCA, an estimator, on the images the readers give)
    ("io", ("dkernel.io", "dkernel.data", "dkernel.change")),
    # creating and connecting to Dask clients, worker plugins, resource monitoring
    ("runtime", ("dkernel.runtime",)),
    # job specs, methods, the runner
    ("jobs", ("dkernel.jobs",)),
    # what users call: the command, the package's lazy facade, the image helper
    ("interface", ("dkernel.cli", "dkernel", "dkernel.images")),
)

#: Estimator families: on the estimators floor a family imports its own modules and the floors
#: below (another family's NumPy kernels included), never another family's estimators.
FAMILIES = (
    "gmm",
    "spectral",
    "ranking",
    "meanshift",
    "decomposition",
    "kmeans",
    "cca",
    "deep",
    "reservoir",
)

#: Violations allowed for now: (rule, file, imported module). The tests fail on any violation
#: not listed here, and on a listed one that no longer occurs, so the list can only shrink.
#: Empty since issue 16 landed; keep it that way.
KNOWN_VIOLATIONS: frozenset[tuple[str, str, str]] = frozenset()

FORBIDDEN = ("dask", "zarr", "distributed", "xarray", "rioxarray")
NUMERIC = [
    "kernels/pairwise.py",
    "kernels/rbf.py",
    "kernels/widths.py",
    "linalg/eigen.py",
    "linalg/components.py",
    "linalg/groups.py",
    "linalg/kmeans.py",
    "spectral/dense.py",
    "spectral/pck_memory.py",
    "metrics.py",
    "_validation.py",
    "_random.py",
    "_budget.py",
    "errors.py",
    "kmeans/features.py",
    "kmeans/lloyd.py",
    "cca/dual.py",
    "change/mad.py",
    "change/threshold.py",
    "reservoir/_reservoir.py",
    "reservoir/series.py",
    "meanshift/stage_two.py",
    "kernels/missing.py",
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


#: One interpreter imports what every numeric module stands on (NumPy, SciPy, scikit-learn:
#: a second of CPU per interpreter), then forks a fresh child per module: the child imports
#: the module and reports which of FORBIDDEN it loaded.
_FORKED_IMPORTS = """
import json, os, sys
import numpy, scipy.linalg, scipy.sparse, scipy.spatial, sklearn.base, sklearn.cluster
forbidden = json.loads(sys.argv[1])
result = {"": " ".join(m for m in forbidden if m in sys.modules)}
for module in sys.argv[2:]:
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            __import__(module)
            out = " ".join(m for m in forbidden if m in sys.modules)
        except BaseException as exc:
            out = f"error: {exc!r}"
        os.write(w, out.encode())
        os._exit(0)
    os.close(w)
    with os.fdopen(r) as pipe:
        result[module] = pipe.read()
    os.waitpid(pid, 0)
print(json.dumps(result))
"""


def _dotted(relpath: str) -> str:
    return "dkernel." + relpath.removesuffix(".py").replace("/", ".")


@pytest.fixture(scope="module")
def loaded_at_import() -> dict[str, str]:
    """Module name -> the FORBIDDEN modules importing it loaded ("" for the shared base)."""
    import json

    out = subprocess.run(
        [sys.executable, "-c", _FORKED_IMPORTS, json.dumps(FORBIDDEN)]
        + [_dotted(p) for p in NUMERIC],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    loaded = json.loads(out.stdout)
    assert loaded.pop("") == "", f"NumPy/SciPy/scikit-learn load {loaded['']}"
    return loaded


@pytest.mark.skipif(not hasattr(os, "fork"), reason="forks a fresh child per module")
@pytest.mark.parametrize("relpath", NUMERIC)
def test_numeric_module_imports_no_dask_at_run_time(relpath, loaded_at_import):
    """What the static check cannot see: the package ``__init__`` files Python runs on the way
    (a family's lazy re-exports, ``dkernel._lazy``) and every function-level import at module
    load, in a fresh child of an interpreter that holds only NumPy, SciPy and scikit-learn."""
    module = _dotted(relpath)
    assert loaded_at_import[module] == "", f"importing {module} loads {loaded_at_import[module]}"


# --- the import graph -------------------------------------------------------------------------


@dataclass(frozen=True)
class Edge:
    """``source`` imports ``target`` (a dkernel module) at ``line``."""

    source: str
    target: str
    line: int
    lazy: bool

    @property
    def file(self) -> str:
        return MODULES[self.source].relative_to(ROOT).as_posix()

    def key(self, rule: str) -> tuple[str, str, str]:
        return (rule, self.file, self.target)

    def __str__(self) -> str:
        kind = " (function-level)" if self.lazy else ""
        return f"{self.file}:{self.line} -> {self.target}{kind}"


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES: dict[str, Path] = {_module_name(p): p for p in sorted(PKG.rglob("*.py"))}


def _resolve(name: str) -> str | None:
    """The dkernel module ``name`` denotes: itself, or the longest module above it."""
    parts = name.split(".")
    while parts:
        if ".".join(parts) in MODULES:
            return ".".join(parts)
        parts.pop()
    return None


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _targets(node: ast.Import | ast.ImportFrom, module: str, is_package: bool) -> Iterator[str]:
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    else:
        base = node.module or ""
        if node.level:  # relative: from the module's package, ``level - 1`` packages up
            package = module.split(".") if is_package else module.split(".")[:-1]
            package = package[: len(package) - node.level + 1]
            base = ".".join([*package, base] if base else package)
        names = [f"{base}.{a.name}" for a in node.names]
    for name in names:
        if name.split(".")[0] == "dkernel":
            target = _resolve(name)
            if target is not None:
                yield target


#: Calls that import the module named by their first argument, a literal ``'dkernel.x'`` or
#: ``'dkernel.x:name'``, when first used (``deferred``, ``resolve``) or when the stored value
#: is missing (``constants``, ``EstimatorSchema``).
DEFERRING_CALLS = {"deferred", "resolve", "constants", "EstimatorSchema"}


def _deferred_target(node: ast.AST) -> str | None:
    """The dkernel module a deferred import names, if ``node`` is one."""
    if not (isinstance(node, ast.Call) and node.args):
        return None
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    first = node.args[0]
    if name not in DEFERRING_CALLS or not isinstance(first, ast.Constant):
        return None
    if not isinstance(first.value, str) or first.value.split(".")[0] != "dkernel":
        return None
    return _resolve(first.value.partition(":")[0])


def _edges(module: str) -> list[Edge]:
    path = MODULES[module]
    edges: list[Edge] = []

    def visit(node: ast.AST, lazy: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child.test):
                for sub in child.orelse:  # the body is for type checkers only
                    visit_node(sub, lazy)
                continue
            visit_node(child, lazy)

    def visit_node(child: ast.AST, lazy: bool) -> None:
        targets: Iterator[str] | list[str] = []
        if isinstance(child, ast.Import | ast.ImportFrom):
            targets = _targets(child, module, path.name == "__init__.py")
        elif (target := _deferred_target(child)) is not None:
            targets, lazy = [target], True
        for target in targets:
            edge = Edge(module, target, child.lineno, lazy)
            if target != module and edge not in edges:
                edges.append(edge)
        nested = isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
        visit(child, lazy or nested)

    visit(ast.parse(path.read_text()), False)
    return edges


@functools.cache
def all_edges() -> tuple[Edge, ...]:
    """Every import edge of the package (parsed on first use, not at collection: each pytest
    worker collects this module, one runs its tests)."""
    return tuple(e for m in MODULES for e in _edges(m))


def floor_of(module: str) -> int:
    """Index in FLOORS of the longest listed name that is ``module`` or a package above it."""
    best, floor = -1, None
    for index, (_, names) in enumerate(FLOORS):
        for name in names:
            if (module == name or module.startswith(name + ".")) and len(name) > best:
                best, floor = len(name), index
    if floor is None:
        raise AssertionError(f"{module} is on no floor: add it to FLOORS in tests/test_layers.py")
    return floor


def family_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in FAMILIES else None


def _describe(module: str) -> str:
    return f"{module} ({FLOORS[floor_of(module)][0]})"


def floor_violations(edges: list[Edge]) -> dict[tuple[str, str, str], str]:
    """Imports up a floor, and estimators-floor imports of another family's modules."""
    estimators = [name for name, _ in FLOORS].index("estimators")
    found: dict[tuple[str, str, str], str] = {}
    for e in edges:
        up = floor_of(e.target) > floor_of(e.source)
        both_estimators = floor_of(e.source) == floor_of(e.target) == estimators
        sideways = both_estimators and family_of(e.target) != family_of(e.source)
        if up or sideways:
            why = "up a floor" if up else "into another family's estimators"
            text = f"{e}: {_describe(e.source)} imports {_describe(e.target)}, {why}"
            found[e.key("floor")] = "; ".join(filter(None, [found.get(e.key("floor")), text]))
    return found


def _path(graph: dict[str, set[str]], start: str, goal: str) -> list[str] | None:
    """A shortest import path ``start`` ⇝ ``goal`` (breadth first), or None."""
    parent: dict[str, str | None] = {start: None}
    frontier = [start]
    while frontier and goal not in parent:
        reached = []
        for node in frontier:
            for other in sorted(graph.get(node, ())):
                if other not in parent:
                    parent[other] = node
                    reached.append(other)
        frontier = reached
    if goal not in parent:
        return None
    path: list[str] = []
    node: str | None = goal
    while node is not None:
        path.append(node)
        node = parent[node]
    return path[::-1]


def cycle_violations(edges: list[Edge]) -> dict[tuple[str, str, str], str]:
    """Imports in a cycle of module-level imports ('cycle'), and function-level imports that
    close a cycle with the others ('lazy-cycle'), each with the cycle."""
    top = {(e.source, e.target) for e in edges if not e.lazy}
    found: dict[tuple[str, str, str], str] = {}
    for rule, counted in (("cycle", [e for e in edges if not e.lazy]), ("lazy-cycle", edges)):
        graph: dict[str, set[str]] = {}
        for e in counted:
            graph.setdefault(e.source, set()).add(e.target)
        for e in counted:
            if rule == "lazy-cycle" and (not e.lazy or (e.source, e.target) in top):
                continue  # module-level edges are judged by 'cycle'
            back = _path(graph, e.target, e.source)
            if back is not None:
                found[e.key(rule)] = f"{e} closes the cycle {' -> '.join([e.source, *back])}"
    return found


def _check(rule: str, found: dict[tuple[str, str, str], str]) -> None:
    known = {k for k in KNOWN_VIOLATIONS if k[0] == rule}
    new = [found[k] for k in sorted(set(found) - known)]
    gone = sorted(known - set(found))
    assert not new, f"{len(new)} new {rule} violation(s):\n  " + "\n  ".join(new)
    assert not gone, f"listed in KNOWN_VIOLATIONS but no longer found, remove them: {gone}"


def test_every_module_is_on_a_floor():
    for module in MODULES:
        floor_of(module)


def test_no_import_cycles():
    found = cycle_violations(list(all_edges()))
    _check("cycle", {k: v for k, v in found.items() if k[0] == "cycle"})
    _check("lazy-cycle", {k: v for k, v in found.items() if k[0] == "lazy-cycle"})


def test_no_import_goes_up_a_floor():
    _check("floor", floor_violations(list(all_edges())))


def test_type_checking_imports_do_not_count():
    # jobs/types.py names ResultsStore and LoadedData for annotations only
    targets = {e.target for e in all_edges() if e.source == "dkernel.jobs.types"}
    assert "dkernel.storage.store" not in targets
    assert any(
        e.source == "dkernel.jobs.types" and e.target == "dkernel.schema.params"
        for e in all_edges()
    )


def test_deferred_imports_count_as_function_level_imports():
    """What a step or reader imports on first use, or names by import path, is an edge."""
    lazy = {(e.source, e.target) for e in all_edges() if e.lazy}
    assert ("dkernel.jobs.steps.rbf_spectral", "dkernel.storage.layout") in lazy
    assert ("dkernel.jobs.steps.rbf_spectral", "dkernel.spectral.estimators") in lazy
    assert ("dkernel.jobs.steps.kppr", "dkernel.ranking.kernelmap") in lazy
    assert ("dkernel.io.readers.images", "dkernel.io.raster") in lazy
    call = ast.parse("deferred('dkernel.io.raster', 'f')", mode="eval").body
    assert _deferred_target(call) == "dkernel.io.raster"
    assert _deferred_target(ast.parse("deferred('numpy')", mode="eval").body) is None


def test_the_checks_catch_a_violation():
    """The rules on made-up edges: io importing jobs, a family importing another's estimator, a
    cycle of module-level imports, one closed by a function-level import."""
    fake = [
        Edge("dkernel.io.data", "dkernel.jobs.runner", 1, lazy=True),
        Edge("dkernel.ranking.kppr", "dkernel.gmm.pck", 2, lazy=True),
        Edge("dkernel.ranking.kppr", "dkernel.gmm.em", 3, lazy=False),  # numerics: allowed
        Edge("dkernel.jobs.runner", "dkernel.io.data", 4, lazy=False),  # down: allowed
    ]
    assert set(floor_violations(fake)) == {
        ("floor", "dkernel/io/data.py", "dkernel.jobs.runner"),
        ("floor", "dkernel/ranking/kppr.py", "dkernel.gmm.pck"),
    }
    ring = [
        Edge("dkernel.jobs.spec", "dkernel.jobs.runner", 1, lazy=False),
        Edge("dkernel.jobs.runner", "dkernel.jobs.spec", 2, lazy=False),
        Edge("dkernel.io.data", "dkernel.io.cube", 3, lazy=False),
        Edge("dkernel.io.cube", "dkernel.io.data", 4, lazy=True),
    ]
    found = cycle_violations(ring)
    assert set(found) == {
        ("cycle", "dkernel/jobs/spec.py", "dkernel.jobs.runner"),
        ("cycle", "dkernel/jobs/runner.py", "dkernel.jobs.spec"),
        ("lazy-cycle", "dkernel/io/cube.py", "dkernel.io.data"),
    }
    assert found[("lazy-cycle", "dkernel/io/cube.py", "dkernel.io.data")].endswith(
        "closes the cycle dkernel.io.cube -> dkernel.io.data -> dkernel.io.cube"
    )


# -- the store layout has one home (issue 16, item 3) ------------------------------------

#: Where an ``xarray.Dataset`` may be built inside dkernel, and why.
DATASET_BUILDERS = {
    # the store layout: one builder per group (storage/layout/), the /map group (geo.py)
    "storage/",
}

#: Where a Zarr store may be opened, written or read directly, and why.
ZARR_ACCESS = {
    # the results store: writer, reader, lease, ranking queries
    "storage/",
    # the zarr-raster reader opens *input* cubes (a user's Zarr, not a results store),
    # through the store that checks each of their files where it is opened (zarr_inputs)
    "io/cube.py",
    "io/raster.py",
    "io/zarr_inputs.py",
    # the zarr table reader opens *input* tables (a 2-D array of rows × features)
    "io/readers/zarr_table.py",
}

#: Calls that open, write or read a Zarr store (module-level functions and methods).
_ZARR_CALLS = {"open_zarr", "open_datatree", "to_zarr", "from_zarr"}


def _outside(relpath: str, allowed: set[str]) -> bool:
    return not any(relpath == a or (a.endswith("/") and relpath.startswith(a)) for a in allowed)


def _package_modules() -> list[str]:
    return sorted(str(p.relative_to(PKG)) for p in PKG.rglob("*.py"))


def _xarray_names(tree: ast.Module) -> tuple[set[str], set[str]]:
    """The names the module binds to ``xarray`` and to ``xarray.Dataset``."""
    modules, classes = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name == "xarray":
                    modules.add(a.asname or "xarray")
        elif isinstance(node, ast.ImportFrom) and node.module == "xarray":
            classes.update(a.asname or a.name for a in node.names if a.name == "Dataset")
    return modules, classes


def _dataset_constructions(path: Path) -> list[int]:
    """Lines calling ``xr.Dataset(...)``, ``Dataset(...)`` or ``xr.Dataset.<from_*>(...)``."""
    tree = ast.parse(path.read_text())
    modules, classes = _xarray_names(tree)

    def is_dataset(node: ast.expr) -> bool:
        if isinstance(node, ast.Name):
            return node.id in classes
        return (
            isinstance(node, ast.Attribute)
            and node.attr == "Dataset"
            and isinstance(node.value, ast.Name)
            and node.value.id in modules
        )

    lines = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if is_dataset(func) or (isinstance(func, ast.Attribute) and is_dataset(func.value)):
            lines.append(node.lineno)
    return lines


def _zarr_access(path: Path) -> list[str]:
    """``import zarr`` and calls that open, write or read a Zarr store, with their lines."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import | ast.ImportFrom):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            names += [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if any(n.split(".")[0] == "zarr" for n in names):
                found.append(f"line {node.lineno}: import zarr")
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if name in _ZARR_CALLS:
                found.append(f"line {node.lineno}: {name}()")
    return found


def test_datasets_are_built_only_by_the_store_layout():
    offenders = {
        rel: lines
        for rel in _package_modules()
        if _outside(rel, DATASET_BUILDERS) and (lines := _dataset_constructions(PKG / rel))
    }
    assert not offenders, (
        f"xarray.Dataset built outside dkernel/storage/ (lines {offenders}): add or extend a "
        "builder in dkernel/storage/layout/ and pass it the numbers."
    )


def test_only_storage_opens_zarr_stores():
    offenders = {
        rel: found
        for rel in _package_modules()
        if _outside(rel, ZARR_ACCESS) and (found := _zarr_access(PKG / rel))
    }
    assert not offenders, (
        f"Zarr opened outside dkernel/storage/ ({offenders}): go through ResultsStore, "
        "open_results or dkernel.storage.query."
    )


def test_the_rules_see_what_they_forbid(tmp_path):
    """The AST checks catch the spellings they are meant to catch."""
    sample = tmp_path / "sample.py"
    sample.write_text(
        "import xarray as xr\nfrom xarray import Dataset as D\nimport zarr\n"
        "a = xr.Dataset({})\nb = D()\nc = xr.Dataset.from_dict({})\n"
        "d = xr.open_zarr('s')\ne = a.to_zarr('s')\nf = xr.DataArray(1)\n"
    )
    assert _dataset_constructions(sample) == [4, 5, 6]
    assert _zarr_access(sample) == [
        "line 3: import zarr",
        "line 7: open_zarr()",
        "line 8: to_zarr()",
    ]
