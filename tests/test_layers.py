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
    # the zarr-raster reader opens *input* cubes (a user's Zarr, not a results store)
    "io/cube.py",
    "io/raster.py",
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
