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
    "kernels/widths.py",
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
