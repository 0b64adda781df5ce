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
from dkernel.schema.params import Param, did_you_mean

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


#: Most columns a delimited table may have (each is a feature of every sample); counted in
#: its first line before pandas parses anything.
MAX_CSV_COLUMNS = 100_000
#: Longest first line of a delimited table read to count its columns (bytes).
MAX_CSV_LINE_BYTES = 16 << 20
#: Share of the memory limit (``DKERNEL_MAX_MEMORY``, 4 GiB by default) a delimited table's
#: text may take, decompressed: pandas parses it whole, into several times its size at worst
#: (``0\n`` is two bytes of text, eight of float64).
CSV_MEMORY_SHARE = 0.25


#: The least text a table may hold whatever the memory limit (a small table's cost is the
#: method's, which the job's budget checks name).
CSV_MIN_BYTES = 64 << 20


def csv_max_bytes() -> int:
    """The most bytes of text (decompressed) reader ``csv`` reads: :data:`CSV_MEMORY_SHARE`
    of the memory limit (:func:`dkernel._budget.memory_limit`), at least
    :data:`CSV_MIN_BYTES`."""
    from dkernel._budget import memory_limit

    return max(CSV_MIN_BYTES, int(memory_limit() * CSV_MEMORY_SHARE))


def csv_separator(delimiter: str | None) -> str:
    """pandas' ``sep`` for ``data.delimiter``, always meant literally: a delimiter of several
    characters is escaped (pandas would take it for a regular expression, and ``(a+)+b``
    backtracks for ever); None splits on any run of white space.

    Raises
    ------
    InvalidInputError
        An empty delimiter, or one holding a line break or a double quote.
    """
    import re

    if delimiter is None:
        return r"\s+"
    if not delimiter or any(c in delimiter for c in '\r\n"'):
        raise InvalidInputError(
            f"data.delimiter {delimiter!r} cannot separate fields (empty, or holding a line "
            "break or a quote); use e.g. ',', ';', '\\t', or null for white space."
        )
    return delimiter if len(delimiter) == 1 else re.escape(delimiter)


def _split_fields(line: str, delimiter: str | None) -> list[str]:
    """The fields of one line as the table reader splits them (quotes as pandas reads them
    for a one-character delimiter; a longer one is taken literally)."""
    import csv

    if delimiter is None:
        return line.split()
    if len(delimiter) > 1:
        return line.split(delimiter)
    return next(csv.reader([line], delimiter=delimiter), [])


def check_columns(source: Any, path: str, delimiter: str | None, encoding: str) -> None:
    """Refuse a table whose first line is longer than :data:`MAX_CSV_LINE_BYTES` or holds
    more than :data:`MAX_CSV_COLUMNS` fields, before pandas parses it (a header of ten
    million columns took the parser to ``std::bad_alloc``)."""
    with source.open() as fh:
        line = b""
        while not line.strip():
            line = fh.readline(MAX_CSV_LINE_BYTES + 1)
            if not line:
                return  # no data rows: pandas' message
            if len(line) > MAX_CSV_LINE_BYTES:
                raise InvalidInputError(
                    f"{path}: its first line is longer than {MAX_CSV_LINE_BYTES:,} bytes; a "
                    f"table of at most {MAX_CSV_COLUMNS:,} columns is read. Check "
                    "data.delimiter (and that the file is a delimited text table)."
                )
    try:
        text = line.decode(encoding, errors="replace")
    except LookupError:
        return  # an unknown encoding: pandas' message
    n = len(_split_fields(text.rstrip("\r\n"), delimiter))
    if n > MAX_CSV_COLUMNS:
        raise InvalidInputError(
            f"{path}: its first line has {n:,} fields; a table of at most "
            f"{MAX_CSV_COLUMNS:,} columns is read (each is a feature of every sample). Check "
            "data.delimiter, or select the columns first."
        )


def load_csv(
    path: str,
    delimiter: str | None = ",",
    label_column: int | str | None = None,
    skip_columns: list[int | str] | None = None,
    missing_values: list[str] | None = None,
    header: bool = False,
    encoding: str = "utf-8",
    storage_options: dict[str, Any] | None = None,
) -> LoadedData:
    """A delimited text table read by ``pandas.read_csv``; ``missing_values`` entries become NaN.

    ``delimiter: null`` splits on any whitespace; a delimiter of several characters is
    taken literally. Columns are given by index (negative indices count from the end) or,
    with ``header: true``, by their name in the header line. Fields may be quoted
    (``"field, north"``); ``path`` may be a URL (``s3://``, ``https://``, …) read through
    fsspec with ``storage_options``, and compressed (``.gz``, ``.bz2``, ``.xz``, ``.zip``,
    ``.zst``).

    Limits, checked before pandas parses anything: the text, decompressed, at most
    :func:`csv_max_bytes` (a quarter of the memory limit); the first line at most
    :data:`MAX_CSV_COLUMNS` fields.

    Raises
    ------
    InvalidInputError
        No data rows, a column index out of range, a row with another number of fields, or a
        value that is not a number: each names the row (1-based, the header counted, blank
        lines not) and the column. A table above the limits, naming the limit.
    """
    import pandas as pd

    from dkernel.io.files import bounded_input

    missing = list(missing_values or ["", "?", "NA", "NaN", "nan"])
    sep = csv_separator(delimiter)
    source = bounded_input(
        path,
        csv_max_bytes(),
        "data.path",
        storage_options,
        advice="pandas parses a table whole, so its text may take at most a quarter of the "
        "memory limit (DKERNEL_MAX_MEMORY); convert a larger one to Parquet or .npy.",
    )
    check_columns(source, path, delimiter, encoding)
    common: dict[str, Any] = {
        "header": None,
        "sep": sep,
        "encoding": encoding,
        "skip_blank_lines": True,
        "compression": None,  # decompressed by the source, within its cap
    }
    if len(sep) > 1:
        common["engine"] = "python"

    def read_csv(**kwargs: Any) -> Any:
        with source.open() as fh:
            return pd.read_csv(fh, **common, **kwargs)

    try:
        first = read_csv(nrows=1 + int(header), dtype=str, na_filter=False)
    except pd.errors.EmptyDataError:
        raise InvalidInputError(f"{path} holds no data rows.") from None
    except (OSError, UnicodeDecodeError, LookupError, pd.errors.ParserError) as exc:
        raise InvalidInputError(f"could not read {path}: {_reason(exc)}") from None
    if len(first) <= int(header):
        raise InvalidInputError(f"{path} holds no data rows.")
    width = first.shape[1]
    names = [str(v).strip() for v in first.iloc[0]] if header else None
    label_idx = (
        None
        if label_column is None
        else _csv_column(label_column, names, width, "data.label_column", path)
    )
    drop = {_csv_column(c, names, width, "data.skip_columns", path) for c in skip_columns or []}
    keep = [c for c in range(width) if c not in drop and c != label_idx]
    text_columns = {c: str for c in (*drop, *([label_idx] if label_idx is not None else []))}
    read = dict(
        names=list(range(width)),
        skiprows=1 if header else None,
        na_values=missing,
        keep_default_na=False,
    )
    try:
        try:  # the features straight to float64; a text value sends us to the slow path
            table = read_csv(
                dtype={**dict.fromkeys(keep, np.float64), **text_columns}
                if text_columns
                else np.float64,
                **read,
            )
        except ValueError as exc:
            if isinstance(exc, pd.errors.ParserError) or "convert" not in str(exc):
                raise
            table = read_csv(dtype=text_columns or None, **read)
    except pd.errors.ParserError as exc:
        raise InvalidInputError(_field_count_message(path, str(exc), width)) from None
    except (OSError, UnicodeDecodeError, LookupError, ValueError) as exc:
        raise InvalidInputError(f"could not read {path}: {_reason(exc)}") from None
    short = _short_row(source, delimiter, encoding, table, width, header)
    if short is not None:
        row, n_fields = short
        raise InvalidInputError(
            f"{path}: row {row} has {n_fields} fields, expected {width} (check data.delimiter)."
        )
    for c in keep:
        if table[c].dtype.kind not in "biuf":
            table[c] = _numeric_column(path, table[c], c, names, missing)
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


def _csv_column(column: int | str, names: list[str] | None, width: int, key: str, path: str) -> int:
    """The 0-based index of ``column``, an index (negative: from the end) or a header name."""
    if isinstance(column, str):
        if names is None:
            raise InvalidInputError(
                f"{key}: {column!r} is a column name, but {path} is read without a header; "
                "set data.header: true (its first line names the columns), or give the "
                "column's index (0-based)."
            )
        if column not in names:
            raise InvalidInputError(
                f"{key}: {path} has no column named {column!r}; its header names "
                f"{', '.join(repr(n) for n in names[:20])}{' …' if len(names) > 20 else ''}."
                f"{did_you_mean(column, names)}"
            )
        if names.count(column) > 1:
            raise InvalidInputError(
                f"{key}: {path} has {names.count(column)} columns named {column!r}; give the "
                "column's index (0-based) instead."
            )
        return names.index(column)
    if not -width <= column < width:
        raise InvalidInputError(
            f"{key}: column {column} does not exist in {path}, which has {width} "
            f"columns (0 to {width - 1}, or -{width} to -1 counting from the end)."
        )
    return column % width


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


def _numeric_column(
    path: str, column: Any, c: int, names: list[str] | None, missing: list[str]
) -> Any:
    """A text column as numbers, or the error naming its first value that is not one (and the
    column by its name where the file has a header)."""
    import pandas as pd

    header = names is not None

    numbers = pd.to_numeric(column.str.strip(), errors="coerce")
    bad = numbers.isna() & column.notna() & ~column.str.strip().isin(missing)
    if bad.any():
        i = int(np.flatnonzero(bad.to_numpy())[0])
        value = str(column.iloc[i]).strip()
        hint = (
            " If the first line names the columns, set data.header: true."
            if i == 0 and not header
            else ""
        )
        named = f" ({_quote_cell(names[c])})" if names is not None else ""
        raise InvalidInputError(
            f"{path}: row {i + 1 + int(header)}, column {c}{named} holds {_quote_cell(value)}, "
            "which is not a number. Add it to data.missing_values or list the column in "
            f"data.skip_columns{named}." + hint
        )
    return numbers


def _short_row(
    source: Any,
    delimiter: str | None,
    encoding: str,
    table: Any,
    width: int,
    header: bool,
) -> tuple[int, int] | None:
    """``(row, number of fields)`` of the first row with fewer than ``width`` fields, or None.

    pandas fills a short row with NaN; only when the last column holds a NaN is the file read
    again (Python's ``csv``, quoting as pandas does; a delimiter of several characters
    literally) to tell a short row from an empty field.
    """
    import csv
    import io

    if len(table) == 0 or not table[width - 1].isna().any():
        return None
    with io.TextIOWrapper(source.open(), encoding=encoding, newline="") as fh:
        if delimiter is None:
            rows: Any = (line.split() for line in fh)
        elif len(delimiter) > 1:
            rows = (line.rstrip("\r\n").split(delimiter) for line in fh)
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
            Param(
                "label_column",
                "column",
                default=None,
                nullable=True,
                doc="Labels column: its index, or its name with header: true.",
            ),
            Param(
                "skip_columns",
                "column_list",
                default=None,
                nullable=True,
                doc="Columns left out: indices, or names with header: true.",
            ),
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
