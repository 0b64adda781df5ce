"""Loaders for the UCI tables in ``$DKERNEL_DATA`` (see its MANIFEST.md §1, §4, §5).

* ``load_wisconsin`` — Breast Cancer Wisconsin (Original), 699 × 9, its 16 real ``?`` entries
  (bare nuclei) become NaN; labels 0 benign, 1 malignant; the sample-code column is dropped.
* ``load_statlog_landsat`` — Statlog (Landsat Satellite), 36 features (3×3 pixels × 4 MSS
  bands), classes 1–5, 7 relabelled 0..5; ``split`` 'train' (4435), 'test' (2000) or 'all'.
* ``load_ecoli`` — UCI Ecoli, 336 × 7, 8 localisation sites relabelled 0..7 (alphabetical).

Each returns a :class:`~dkernel.io.data.LoadedData`; ``dkernel.io.readers.tables`` registers
them as readers ``wisconsin``, ``statlog-landsat`` and ``ecoli``.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from dkernel.errors import InvalidInputError
from dkernel.io.data import LoadedData, data_root, expand_data_path

WISCONSIN_DIR = "breast_cancer_wisconsin_original"
STATLOG_DIR = "statlog_landsat_satellite"
ECOLI_DIR = "uci_ecoli"

WISCONSIN_FEATURES = [
    "clump_thickness",
    "uniformity_of_cell_size",
    "uniformity_of_cell_shape",
    "marginal_adhesion",
    "single_epithelial_cell_size",
    "bare_nuclei",
    "bland_chromatin",
    "normal_nucleoli",
    "mitoses",
]
ECOLI_FEATURES = ["mcg", "gvh", "lip", "chg", "aac", "alm1", "alm2"]
STATLOG_FILES = {"train": ("sat.trn",), "test": ("sat.tst",), "all": ("sat.trn", "sat.tst")}
STATLOG_CLASSES = {
    1: "red soil",
    2: "cotton crop",
    3: "grey soil",
    4: "damp grey soil",
    5: "soil with vegetation stubble",
    7: "very damp grey soil",
}


#: Largest dataset file read (bytes): the UCI tables are below 1 MB.
MAX_TABLE_BYTES = 64 << 20


def table_file(data_dir: str | os.PathLike | None, sub: str, name: str) -> Path:
    """The dataset file ``sub/name`` (or ``name``) under ``data_dir``: a regular file (a
    FIFO or device is not found) of at most :data:`MAX_TABLE_BYTES`."""
    if data_dir is None:
        data_dir = data_root()
    base = expand_data_path(data_dir)
    for candidate in (base / sub / name, base / name):
        if candidate.is_file():
            size = candidate.stat().st_size
            if size > MAX_TABLE_BYTES:
                raise InvalidInputError(
                    f"{candidate} is {size:,} bytes; the {name} table is below 1 MB and at most "
                    f"{MAX_TABLE_BYTES:,} are read. Check the file."
                )
            return candidate
    raise InvalidInputError(f"{name} not found under {base} (expected {sub}/{name}).")


def load_wisconsin(data_dir: str | os.PathLike | None = None) -> LoadedData:
    """Breast Cancer Wisconsin (Original): X (699, 9) float64 with NaN for '?', y 0/1.

    Notes
    -----
    Reads ~20 kB.
    """
    src = table_file(data_dir, WISCONSIN_DIR, "breast-cancer-wisconsin.data")
    rows = [line.split(",") for line in src.read_text().splitlines() if line.strip()]
    if any(len(r) != 11 for r in rows):
        raise InvalidInputError(f"{src}: expected 11 comma-separated fields per row.")
    table = np.array(
        [[np.nan if v.strip() == "?" else float(v) for v in r[1:]] for r in rows], dtype=np.float64
    )
    X, cls = table[:, :9], table[:, 9].astype(np.int64)
    y = (cls == 4).astype(np.int64)
    return LoadedData(
        X=X,
        y=y,
        feature_names=list(WISCONSIN_FEATURES),
        meta={
            "source": str(src),
            "dataset": "breast-cancer-wisconsin-original",
            "n_missing": int(np.isnan(X).sum()),
            "classes": {"0": "benign (2)", "1": "malignant (4)"},
            "n_clusters": 2,
        },
    )


def load_statlog_landsat(
    data_dir: str | os.PathLike | None = None, split: str = "all"
) -> LoadedData:
    """Statlog (Landsat Satellite): X (n, 36) float64, y 0..5 (classes 1, 2, 3, 4, 5, 7).

    Parameters
    ----------
    data_dir : path, optional
        ``$DKERNEL_DATA`` by default.
    split : {'train', 'test', 'all'}
        ``sat.trn`` (4435 rows), ``sat.tst`` (2000) or both (6435, train first).
    """
    if split not in STATLOG_FILES:
        raise InvalidInputError(f"split must be 'train', 'test' or 'all'; got {split!r}.")
    tables = []
    sources = []
    for name in STATLOG_FILES[split]:
        src = table_file(data_dir, STATLOG_DIR, name)
        sources.append(str(src))
        tables.append(np.loadtxt(src, dtype=np.float64))
    table = np.vstack(tables)
    cls = table[:, 36].astype(np.int64)
    codes = np.array(sorted(STATLOG_CLASSES))
    y = np.searchsorted(codes, cls)
    return LoadedData(
        X=np.ascontiguousarray(table[:, :36]),
        y=y.astype(np.int64),
        feature_names=[f"pixel{p}_band{b}" for p in range(9) for b in range(1, 5)],
        meta={
            "source": sources,
            "dataset": "statlog-landsat",
            "split": split,
            "classes": {str(i): STATLOG_CLASSES[c] for i, c in enumerate(codes)},
            "n_clusters": 6,
        },
    )


def load_ecoli(data_dir: str | os.PathLike | None = None) -> LoadedData:
    """UCI Ecoli: X (336, 7) float64, y 0..7 (sites in alphabetical order)."""
    src = table_file(data_dir, ECOLI_DIR, "ecoli.data")
    rows = [line.split() for line in src.read_text().splitlines() if line.strip()]
    if any(len(r) != 9 for r in rows):
        raise InvalidInputError(f"{src}: expected 9 whitespace-separated fields per row.")
    X = np.array([[float(v) for v in r[1:8]] for r in rows], dtype=np.float64)
    sites, y = np.unique([r[8] for r in rows], return_inverse=True)
    return LoadedData(
        X=X,
        y=y.astype(np.int64),
        feature_names=list(ECOLI_FEATURES),
        meta={
            "source": str(src),
            "dataset": "ecoli",
            "classes": {str(i): s for i, s in enumerate(sites.tolist())},
            "n_clusters": int(sites.size),
        },
    )
