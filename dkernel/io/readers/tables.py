"""The table readers: scikit-learn's bundled data sets, delimited text, ``.npy`` arrays, and the
data sets of ``$DKERNEL_DATA`` read as tables (UCI tables, SIPU shapes, Frey faces).

Importing this module registers them; it imports neither scikit-learn nor Dask, so that
``dkernel validate`` and ``dkernel methods`` stay light.
"""

from __future__ import annotations

from importlib.util import find_spec
from pathlib import Path
from typing import Any

import numpy as np

from dkernel.errors import InvalidInputError
from dkernel.io.data import LoadedData
from dkernel.io.frey import frey_path, load_frey_faces
from dkernel.io.registry import Reader, register_reader
from dkernel.io.shapes import SHAPE_SETS, load_shapes, shape_files
from dkernel.io.tables import (
    ECOLI_DIR,
    STATLOG_DIR,
    STATLOG_FILES,
    WISCONSIN_DIR,
    load_ecoli,
    load_statlog_landsat,
    load_wisconsin,
    table_file,
)
from dkernel.schema.params import Param

#: The cell-nucleus measurements of the breast-cancer table (its mean, error and worst).
_CELL = "radius texture perimeter area smoothness compactness concavity".split()
_CELL += ["concave points", "symmetry", "fractal dimension"]
#: scikit-learn's bundled data sets: the file in its ``datasets/data`` folder and the names of
#: the columns (as ``sklearn.datasets.load_<name>`` gives them).
SKLEARN_FILES: dict[str, tuple[str, list[str]]] = {
    "wine": (
        "wine_data.csv",
        "alcohol malic_acid ash alcalinity_of_ash magnesium total_phenols flavanoids "
        "nonflavanoid_phenols proanthocyanins color_intensity hue od280/od315_of_diluted_wines "
        "proline".split(),
    ),
    "iris": (
        "iris.csv",
        ["sepal length (cm)", "sepal width (cm)", "petal length (cm)", "petal width (cm)"],
    ),
    "breast_cancer": (
        "breast_cancer.csv",
        [f"mean {f}" for f in _CELL]
        + [f"{f} error" for f in _CELL]
        + [f"worst {f}" for f in _CELL],
    ),
    "digits": ("digits.csv.gz", [f"pixel_{i}_{j}" for i in range(8) for j in range(8)]),
}
SKLEARN_DATASETS = tuple(SKLEARN_FILES)


def sklearn_data_dir() -> Path:
    """scikit-learn's folder of bundled data files, found without importing scikit-learn."""
    spec = find_spec("sklearn")
    if spec is None or not spec.submodule_search_locations:
        raise InvalidInputError("reader 'sklearn' needs scikit-learn, which is not installed.")
    return Path(list(spec.submodule_search_locations)[0]) / "datasets" / "data"


def load_sklearn(name: str) -> LoadedData:
    """One of scikit-learn's bundled data sets (no download), read from its files.

    The same table as ``sklearn.datasets.load_<name>()`` (``data``, ``target`` and
    ``feature_names``; ``tests/io/test_readers.py`` compares them), read without importing
    scikit-learn: the files hold one sample per line, its class last, below a header line
    (``n_samples,n_features,class names...``) except for ``digits``.
    """
    filename, names = SKLEARN_FILES[name]
    path = sklearn_data_dir() / filename
    try:
        table = np.loadtxt(path, delimiter=",", skiprows=0 if name == "digits" else 1)
    except OSError as exc:
        raise InvalidInputError(f"cannot read scikit-learn's {name} data ({path}): {exc}") from exc
    return LoadedData(
        X=np.ascontiguousarray(table[:, :-1]),
        y=table[:, -1].astype(np.int64),
        feature_names=list(names),
        meta={"source": f"sklearn.datasets.load_{name}"},
    )


def _quote_cell(value: str) -> str:
    """A cell for an error message: short tokens quoted; longer text (or any text while a data
    root confines the process, DKERNEL_DATA_ROOT) only described, so messages never quote
    whole lines of a file that was not meant to be read."""
    import os

    if len(value) <= 20 and value.isprintable() and not os.environ.get("DKERNEL_DATA_ROOT"):
        return repr(value)
    return f"a {len(value)}-character text"


def load_csv(
    path: str,
    delimiter: str | None = ",",
    label_column: int | None = None,
    skip_columns: list[int] | None = None,
    missing_values: list[str] | None = None,
    header: bool = False,
) -> LoadedData:
    """A delimited text table; ``missing_values`` entries become NaN.

    ``delimiter: null`` splits on any whitespace. Negative column indices count from the end.

    Notes
    -----
    Two passes over the file, line by line: the first counts the rows, the second parses
    them into the float64 table, so memory is the table (8 bytes per value) plus one line
    and the label column, not the file's text several times over.
    """
    missing = set(missing_values or ["", "?", "NA", "NaN", "nan"])

    def split(line: str) -> list[str]:
        fields = line.split(delimiter) if delimiter is not None else line.split()
        return [f.strip() for f in fields]

    names, first, n_rows = _csv_shape(path, split, header)
    if first is None:
        raise InvalidInputError(f"{path} holds no data rows.")
    width = len(first)
    for key, cols in (("label_column", [label_column]), ("skip_columns", skip_columns or [])):
        bad = [c for c in cols if c is not None and not -width <= c < width]
        if bad:
            raise InvalidInputError(
                f"data.{key}: column {bad[0]} does not exist in {path}, which has {width} "
                f"columns (0 to {width - 1}, or -{width} to -1 counting from the end)."
            )
    drop = {c % width for c in (skip_columns or [])}
    label_idx = None if label_column is None else label_column % width
    keep = [c for c in range(width) if c not in drop and c != label_idx]
    X = np.empty((n_rows, len(keep)), dtype=np.float64)
    labels: list[str] = []
    filled = 0
    for i, row in enumerate(_csv_rows(path, split, header, n_rows)):
        filled = i + 1
        if len(row) != width:
            raise InvalidInputError(
                f"{path}: row {i + 1 + int(header)} has {len(row)} fields, expected "
                f"{width} (check data.delimiter)."
            )
        for j, c in enumerate(keep):
            value = row[c]
            if value in missing:
                X[i, j] = np.nan
                continue
            try:
                X[i, j] = float(value)
            except ValueError:
                raise InvalidInputError(
                    f"{path}: row {i + 1 + int(header)}, column {c} holds "
                    f"{_quote_cell(value)}, which is not a number. Add it to "
                    "data.missing_values or list the column in data.skip_columns."
                ) from None
        if label_idx is not None:
            labels.append(row[label_idx])
    if filled != n_rows:
        raise InvalidInputError(f"{path} changed while it was read; read it again.")
    y = None
    if label_idx is not None:
        y = np.unique(labels, return_inverse=True)[1]
    return LoadedData(
        X=X,
        y=y,
        feature_names=[names[c] for c in keep] if names else None,
        meta={"source": str(path), "missing": int(np.isnan(X).sum())},
    )


def _csv_lines(path: str) -> Any:
    """The non-blank lines of a text file, one at a time (a regular file only: a FIFO or a
    device is refused before it is read)."""
    from dkernel.io.files import open_regular

    fd, _ = open_regular(path, "data.path")
    try:
        with open(fd, encoding="utf-8", closefd=True) as fh:
            for line in fh:
                if line.strip():
                    yield line.rstrip("\r\n")
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidInputError(f"could not read {path}: {exc}") from exc


def _csv_shape(path: str, split: Any, header: bool) -> tuple[list[str] | None, Any, int]:
    """(header names, first data row, number of data rows): the first pass."""
    names, first, n_rows = None, None, 0
    for line in _csv_lines(path):
        if header and names is None:
            names = split(line)
            continue
        if first is None:
            first = split(line)
        n_rows += 1
    return names, first, n_rows


def _csv_rows(path: str, split: Any, header: bool, n_rows: int) -> Any:
    """The data rows, split into fields: the second pass (at most ``n_rows``, in case the
    file grew meanwhile)."""
    lines = _csv_lines(path)
    if header:
        next(lines, None)
    for i, line in enumerate(lines):
        if i >= n_rows:
            break
        yield split(line)


def _load_npy_file(path: str, key: str, *, mmap: bool = True) -> np.ndarray:
    """``np.load`` with every failure (not a regular file, empty file, truncated header,
    pickled objects, a ``.npz`` archive) as an :class:`InvalidInputError` naming the file
    and the fix (:func:`dkernel.io.files.load_npy`)."""
    from dkernel.io.files import load_npy

    return load_npy(path, key, mmap=mmap)


def load_npy(path: str, labels_path: str | None = None) -> LoadedData:
    """A 2-D ``.npy`` array (memory-mapped), optional labels from another ``.npy``."""
    X = _load_npy_file(path, "data.path")
    y = None
    if labels_path:
        y = _load_npy_file(labels_path, "data.labels_path")  # mapped: the shape first
        if y.ndim == 0 or y.shape[0] != X.shape[0]:
            entries = y.shape[0] if y.ndim else 0
            raise InvalidInputError(
                f"labels in {labels_path} have {entries} entries but {path} has {X.shape[0]} rows."
            )
        y = np.array(y)
    return LoadedData(X=X, y=y, meta={"source": str(Path(path))})


register_reader(
    Reader(
        name="sklearn",
        params=(Param("name", "str", choices=SKLEARN_DATASETS, doc="Bundled dataset name."),),
        load=load_sklearn,
        description="scikit-learn's bundled datasets (wine, iris, breast_cancer, digits).",
    )
)
register_reader(
    Reader(
        name="csv",
        params=(
            Param("path", "str"),
            Param("delimiter", "str", default=",", nullable=True),
            Param("label_column", "int", default=None, nullable=True),
            Param("skip_columns", "int_list", default=None, nullable=True),
            Param("missing_values", "list", default=None, nullable=True),
            Param("header", "bool", default=False),
        ),
        load=load_csv,
        description="Delimited text tables; missing entries become NaN.",
    )
)
register_reader(
    Reader(
        name="npy",
        params=(Param("path", "str"), Param("labels_path", "str", default=None, nullable=True)),
        load=load_npy,
        description="A 2-D .npy array with optional labels.",
    )
)

_DIR = Param("data_dir", "str", default="${DKERNEL_DATA}", doc="The DKERNEL_DATA folder.")

register_reader(
    Reader(
        name="wisconsin",
        params=(_DIR,),
        load=lambda data_dir="${DKERNEL_DATA}": load_wisconsin(data_dir),
        files=lambda data_dir="${DKERNEL_DATA}", **_: [
            table_file(data_dir, WISCONSIN_DIR, "breast-cancer-wisconsin.data")
        ],
        description="Breast Cancer Wisconsin (Original), 699 × 9, 16 real missing values (NaN).",
    )
)
register_reader(
    Reader(
        name="statlog-landsat",
        params=(_DIR, Param("split", "str", default="all", choices=("train", "test", "all"))),
        load=lambda data_dir="${DKERNEL_DATA}", split="all": load_statlog_landsat(data_dir, split),
        files=lambda data_dir="${DKERNEL_DATA}", split="all", **_: [
            table_file(data_dir, STATLOG_DIR, name) for name in STATLOG_FILES[split]
        ],
        description="Statlog (Landsat Satellite), 36 features, 6 classes.",
    )
)
register_reader(
    Reader(
        name="ecoli",
        params=(_DIR,),
        load=lambda data_dir="${DKERNEL_DATA}": load_ecoli(data_dir),
        files=lambda data_dir="${DKERNEL_DATA}", **_: [
            table_file(data_dir, ECOLI_DIR, "ecoli.data")
        ],
        description="UCI Ecoli, 336 × 7, 8 classes.",
    )
)
register_reader(
    Reader(
        name="shapes",
        params=(
            Param("name", "str", choices=SHAPE_SETS, doc="SIPU shape set."),
            Param(
                "path",
                "str",
                default=None,
                nullable=True,
                doc="Data folder (default $DKERNEL_DATA).",
            ),
        ),
        load=load_shapes,
        files=lambda name, path=None, **_: shape_files(name, path),
        description="SIPU 2-D clustering shape sets (jain, Aggregation, ..., D31) with labels.",
    )
)
register_reader(
    Reader(
        name="frey-faces",
        params=(
            Param(
                "path",
                "str",
                default=None,
                nullable=True,
                doc="frey_rawface.mat (default: $DKERNEL_DATA/frey_faces/frey_rawface.mat).",
            ),
            Param("scale", "bool", default=True, doc="Grey levels divided by 255."),
        ),
        load=load_frey_faces,
        files=lambda path=None, **_: [frey_path(path)],
        description="Frey faces: 1965 images of 28x20 pixels as 560-dimensional rows.",
    )
)
