"""Built-in readers; importing this module registers them.

Readers for tables (``sklearn``, ``csv``, ``npy``) live here; families add theirs in their own
io modules, imported at the bottom.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from dkernel.errors import InvalidInputError
from dkernel.io.data import LoadedData
from dkernel.io.registry import Reader, register_reader
from dkernel.schema.params import Param

SKLEARN_DATASETS = ("wine", "iris", "breast_cancer", "digits")


def load_sklearn(name: str) -> LoadedData:
    """One of scikit-learn's bundled datasets (no download)."""
    from sklearn import datasets

    bunch = getattr(datasets, f"load_{name}")()
    return LoadedData(
        X=np.asarray(bunch.data, dtype=np.float64),
        y=np.asarray(bunch.target),
        feature_names=[str(f) for f in getattr(bunch, "feature_names", [])] or None,
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
    """
    missing = set(missing_values or ["", "?", "NA", "NaN", "nan"])
    rows: list[list[str]] = []
    try:
        with open(path, encoding="utf-8") as fh:
            lines = fh.read().splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidInputError(f"could not read {path}: {exc}") from exc
    names = None
    for line in lines:
        if not line.strip():
            continue
        fields = line.split(delimiter) if delimiter is not None else line.split()
        rows.append([f.strip() for f in fields])
    if header and rows:
        names, rows = rows[0], rows[1:]
    if not rows:
        raise InvalidInputError(f"{path} holds no data rows.")
    width = len(rows[0])
    ragged = [i for i, r in enumerate(rows) if len(r) != width]
    if ragged:
        raise InvalidInputError(
            f"{path}: row {ragged[0] + 1 + int(header)} has {len(rows[ragged[0]])} fields, expected "
            f"{width} (check data.delimiter)."
        )
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
    X = np.empty((len(rows), len(keep)), dtype=np.float64)
    for i, row in enumerate(rows):
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
    y = None
    if label_idx is not None:
        y = np.unique([r[label_idx] for r in rows], return_inverse=True)[1]
    return LoadedData(
        X=X,
        y=y,
        feature_names=[names[c] for c in keep] if names else None,
        meta={"source": str(path), "missing": int(np.isnan(X).sum())},
    )


def _load_npy_file(path: str, key: str, *, mmap: bool = True) -> np.ndarray:
    """``np.load`` with every failure (empty file, truncated header, pickled objects) as an
    :class:`InvalidInputError` naming the file and the fix."""
    try:
        if Path(path).stat().st_size == 0:
            raise InvalidInputError(
                f"{key}: {path} is empty (0 bytes); a .npy file written by numpy.save is "
                "expected. Check that the file was copied completely."
            )
        return np.load(path, mmap_mode="r" if mmap else None, allow_pickle=False)
    except InvalidInputError:
        raise
    except Exception as exc:  # noqa: BLE001  (EOFError, ValueError, OSError, ...)
        raise InvalidInputError(
            f"{key}: could not read {path} as a .npy array: {str(exc)[:200]} "
            f"({type(exc).__name__}). Write it with numpy.save(path, array) (numeric, not "
            "pickled objects)."
        ) from exc


def load_npy(path: str, labels_path: str | None = None) -> LoadedData:
    """A 2-D ``.npy`` array (memory-mapped), optional labels from another ``.npy``."""
    X = _load_npy_file(path, "data.path")
    y = None
    if labels_path:
        y = _load_npy_file(labels_path, "data.labels_path", mmap=False)
        if y.shape[0] != X.shape[0]:
            raise InvalidInputError(
                f"labels in {labels_path} have {y.shape[0]} entries but {path} has {X.shape[0]} rows."
            )
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
from dkernel.io import (
    frey,  # noqa: E402,F401  (registers the frey-faces reader)
    raster,  # noqa: E402,F401  (registers geotiff, demo-landsat, npy-raster, zarr-raster, samson, jasper)
    shapes,  # noqa: E402,F401  (registers the SIPU 2-D shape sets)
    tables,  # noqa: E402,F401  (registers wisconsin, statlog-landsat, ecoli)
)
