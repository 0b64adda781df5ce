"""Compare every array of the results stores under two folders, bit for bit.

Used to check that a refactoring leaves every example job's results unchanged::

    for j in jobs/*.yaml; do dkernel run $j --output-root /tmp/before --no-progress; done
    # ... change the code ...
    for j in jobs/*.yaml; do dkernel run $j --output-root /tmp/after --no-progress; done
    python benchmarks/compare_job_stores.py /tmp/before /tmp/after

Prints one line per store (arrays compared, arrays that differ) and exits 1 when any array
differs or is missing on one side. Timings and run metadata (attributes) are not compared.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import zarr


def _arrays(store: Path) -> dict[str, np.ndarray]:
    root = zarr.open_group(str(store), mode="r")
    out: dict[str, np.ndarray] = {}

    def visit(group: zarr.Group, prefix: str) -> None:
        for name, member in group.members():
            path = f"{prefix}{name}"
            if isinstance(member, zarr.Group):
                visit(member, path + "/")
            else:
                out[path] = np.asarray(member[...])

    visit(root, "")
    return out


def compare(before: Path, after: Path) -> int:
    stores = sorted(p.relative_to(before) for p in before.rglob("*.zarr") if p.is_dir())
    failures = 0
    for rel in stores:
        a, b = _arrays(before / rel), _arrays(after / rel) if (after / rel).exists() else {}
        differ = [
            k
            for k in sorted(set(a) | set(b))
            if k not in a
            or k not in b
            or a[k].shape != b[k].shape
            or a[k].dtype != b[k].dtype
            or not np.array_equal(a[k], b[k], equal_nan=a[k].dtype.kind in "fc")
        ]
        failures += bool(differ)
        print(f"{rel}: {len(a)} arrays, {len(differ)} differ" + (f": {differ}" if differ else ""))
    print(f"{len(stores)} stores, {failures} with differences")
    return 1 if failures or not stores else 0


if __name__ == "__main__":
    sys.exit(compare(Path(sys.argv[1]), Path(sys.argv[2])))
