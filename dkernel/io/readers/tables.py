"""The table readers: scikit-learn's bundled data sets, delimited text, ``.npy`` arrays, and the
data sets of ``$DKERNEL_DATA`` read as tables (UCI tables, SIPU shapes, Frey faces).

Importing this module registers them; it imports neither scikit-learn nor Dask, so that
``dkernel validate`` and ``dkernel methods`` stay light.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import numpy as np

from dkernel.errors import InvalidInputError
from dkernel.io.data import LoadedData
from dkernel.io.frey import frey_path, load_frey_faces
from dkernel.io.registry import STORAGE_OPTIONS, Reader, register_reader
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
    encoding: str = "utf-8",
    storage_options: dict[str, Any] | None = None,
) -> LoadedData:
    """A delimited text table read by ``pandas.read_csv``; ``missing_values`` entries become NaN.

    ``delimiter: null`` splits on any whitespace. Negative column indices count from the end.
    Fields may be quoted (``"field, north"``); ``path`` may be a URL (``s3://``,
    ``https://``, …) read through fsspec with ``storage_options``.

    Raises
    ------
    InvalidInputError
        No data rows, a column index out of range, a row with another number of fields, or a
        value that is not a number: each names the row (1-based, the header counted, blank
        lines not) and the column.
    """
    import pandas as pd

    missing = list(missing_values or ["", "?", "NA", "NaN", "nan"])
    source, options = _table_source(path, storage_options)
    common: dict[str, Any] = {
        "header": None,
        "sep": delimiter if delimiter is not None else r"\s+",
        "encoding": encoding,
        "skip_blank_lines": True,
        "storage_options": options,
    }
    try:
        first = pd.read_csv(source, nrows=1 + int(header), dtype=str, na_filter=False, **common)
    except pd.errors.EmptyDataError:
        raise InvalidInputError(f"{path} holds no data rows.") from None
    except (OSError, UnicodeDecodeError, LookupError, pd.errors.ParserError) as exc:
        raise InvalidInputError(f"could not read {path}: {_reason(exc)}") from None
    if len(first) <= int(header):
        raise InvalidInputError(f"{path} holds no data rows.")
    width = first.shape[1]
    names = [str(v).strip() for v in first.iloc[0]] if header else None
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
    text_columns = {c: str for c in (*drop, *([label_idx] if label_idx is not None else []))}
    read = dict(
        names=list(range(width)),
        skiprows=1 if header else None,
        na_values=missing,
        keep_default_na=False,
        **common,
    )
    try:
        try:  # the features straight to float64; a text value sends us to the slow path
            table = pd.read_csv(
                source,
                dtype={**dict.fromkeys(keep, np.float64), **text_columns}
                if text_columns
                else np.float64,
                **read,
            )
        except ValueError as exc:
            if isinstance(exc, pd.errors.ParserError) or "convert" not in str(exc):
                raise
            table = pd.read_csv(source, dtype=text_columns or None, **read)
    except pd.errors.ParserError as exc:
        raise InvalidInputError(_field_count_message(path, str(exc), width)) from None
    except (OSError, UnicodeDecodeError, LookupError, ValueError) as exc:
        raise InvalidInputError(f"could not read {path}: {_reason(exc)}") from None
    short = _short_row(source, options, delimiter, encoding, table, width, header)
    if short is not None:
        row, n_fields = short
        raise InvalidInputError(
            f"{path}: row {row} has {n_fields} fields, expected {width} (check data.delimiter)."
        )
    for c in keep:
        if table[c].dtype.kind not in "biuf":
            table[c] = _numeric_column(path, table[c], c, header, missing)
    X = table[keep].to_numpy(dtype=np.float64)
    y = None
    if label_idx is not None:
        labels = table[label_idx].fillna("").astype(str).str.strip().to_numpy()
        y = np.unique(labels, return_inverse=True)[1]
    return LoadedData(
        X=X,
        y=y,
        feature_names=[names[c] for c in keep] if names else None,
        meta={"source": str(path), "missing": int(np.isnan(X).sum())},
    )


def _table_source(path: str, storage_options: dict[str, Any] | None) -> tuple[Any, Any]:
    """What pandas / pyarrow open: a local path checked to be a regular file (a FIFO or a
    device is refused before it is read), or a URL with its fsspec options."""
    from dkernel.storage.remote import is_remote, local_path, to_fsspec
    from dkernel.storage.remote import storage_options as resolve_options

    if is_remote(path):
        url = to_fsspec(path)
        return url, resolve_options(url, storage_options, purpose="input")
    from dkernel.io.files import check_regular

    local = local_path(str(path))
    check_regular(local, "data.path")
    return local, None


def _reason(exc: BaseException) -> str:
    text = str(exc)
    if isinstance(exc, UnicodeDecodeError):
        text = f"'{exc.encoding}' codec can't decode byte at position {exc.start} ({exc.reason})"
    return f"{text[:200]} ({type(exc).__name__}). Check the file and data.encoding."


def _field_count_message(path: str, message: str, width: int) -> str:
    """pandas' 'Expected 3 fields in line 5, saw 4' in dkernel's words."""
    import re

    found = re.search(r"Expected (\d+) fields in line (\d+), saw (\d+)", message)
    if found is None:
        return f"could not read {path}: {message[:200]}."
    return (
        f"{path}: line {found[2]} has {found[3]} fields, expected {width} (check "
        "data.delimiter, and quote fields that hold it)."
    )


def _numeric_column(path: str, column: Any, c: int, header: bool, missing: list[str]) -> Any:
    """A text column as numbers, or the error naming its first value that is not one."""
    import pandas as pd

    numbers = pd.to_numeric(column.str.strip(), errors="coerce")
    bad = numbers.isna() & column.notna() & ~column.str.strip().isin(missing)
    if bad.any():
        i = int(np.flatnonzero(bad.to_numpy())[0])
        value = str(column.iloc[i]).strip()
        raise InvalidInputError(
            f"{path}: row {i + 1 + int(header)}, column {c} holds {_quote_cell(value)}, "
            "which is not a number. Add it to data.missing_values or list the column in "
            "data.skip_columns."
        )
    return numbers


def _short_row(
    source: Any,
    options: Any,
    delimiter: str | None,
    encoding: str,
    table: Any,
    width: int,
    header: bool,
) -> tuple[int, int] | None:
    """``(row, number of fields)`` of the first row with fewer than ``width`` fields, or None.

    pandas fills a short row with NaN; only when the last column holds a NaN is the file read
    again (Python's ``csv``, quoting as pandas does) to tell a short row from an empty field.
    """
    import csv

    if len(table) == 0 or not table[width - 1].isna().any():
        return None
    import fsspec

    with fsspec.open(source, "rt", encoding=encoding, newline="", **(options or {})) as fh:
        if delimiter is None:
            rows = ([f for f in line.split()] for line in fh)
        else:
            rows = csv.reader(fh, delimiter=delimiter)
        n = 0
        for fields in rows:
            if not fields or all(not f.strip() for f in fields) and len(fields) <= 1:
                continue  # a blank line, skipped by pandas too
            n += 1
            if n <= int(header):
                continue
            if len(fields) < width:
                return n, len(fields)
    return None


def load_npy(path: str, labels_path: str | None = None) -> LoadedData:
    """A 2-D ``.npy`` array (memory-mapped), optional labels from another ``.npy``
    (:func:`dkernel.io.files.load_npy`: every failure a message naming the file)."""
    from dkernel.io.files import load_npy as load_npy_file

    X = load_npy_file(path, "data.path")
    y = None
    if labels_path:
        y = load_npy_file(labels_path, "data.labels_path")  # mapped: the shape first
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
            Param("path", "str", doc="File or URL (s3://, gs://, az://, https://, ...)."),
            Param("delimiter", "str", default=",", nullable=True),
            Param("label_column", "int", default=None, nullable=True),
            Param("skip_columns", "int_list", default=None, nullable=True),
            Param("missing_values", "list", default=None, nullable=True),
            Param("header", "bool", default=False),
            Param("encoding", "str", default="utf-8", doc="Text encoding (utf-8, latin-1, ...)."),
            STORAGE_OPTIONS,
        ),
        load=load_csv,
        description="Delimited text tables (pandas.read_csv, quoted fields); missing entries "
        "become NaN.",
        urls=("path",),
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


def _register_table_file(
    name: str, load: Callable[[str], LoadedData], folder: str, file_name: str, description: str
) -> None:
    """Register reader ``name`` of one table file in ``folder`` of the DKERNEL_DATA folder."""
    register_reader(
        Reader(
            name=name,
            params=(_DIR,),
            load=lambda data_dir="${DKERNEL_DATA}": load(data_dir),
            files=lambda data_dir="${DKERNEL_DATA}", **_: [table_file(data_dir, folder, file_name)],
            description=description,
        )
    )


_register_table_file(
    "wisconsin",
    load_wisconsin,
    WISCONSIN_DIR,
    "breast-cancer-wisconsin.data",
    "Breast Cancer Wisconsin (Original), 699 × 9, 16 real missing values (NaN).",
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
_register_table_file("ecoli", load_ecoli, ECOLI_DIR, "ecoli.data", "UCI Ecoli, 336 × 7, 8 classes.")
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
