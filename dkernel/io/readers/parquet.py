"""The Parquet table reader (pyarrow): local files, folders of files and URLs.

Importing this module registers reader ``parquet``; pyarrow is imported when it loads.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dkernel.errors import InvalidInputError
from dkernel.io.data import LoadedData
from dkernel.io.registry import STORAGE_OPTIONS, Reader, register_reader
from dkernel.schema.params import Param


def load_parquet(
    path: str,
    columns: list[str] | None = None,
    label_column: str | None = None,
    storage_options: dict[str, Any] | None = None,
) -> LoadedData:
    """A Parquet table (a file, or a folder of files written as one data set) as features.

    Parameters
    ----------
    path : str
        File, folder or URL (``s3://``, ``gs://``, ``az://``, ``https://``, …).
    columns : list of str, optional
        The feature columns (default: every column but ``label_column``).
    label_column : str, optional
        A column of ground-truth labels (any type), used only for metrics.
    storage_options : dict, optional
        fsspec options of a remote path.

    Raises
    ------
    InvalidInputError
        Unreadable file, unknown column, or a feature column that is not numeric or boolean.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    from dkernel.io.files import at_open
    from dkernel.storage.remote import filesystem, is_remote, local_path

    if is_remote(path):
        fs, inner = filesystem(path, storage_options, purpose="input")
        filesystem_arg: Any = fs
    else:
        # the data root again at the point of reading: the path and every member pyarrow opens
        inner, filesystem_arg = at_open(local_path(str(path)), "data.path"), None
        for member in parquet_files(inner)[1:]:
            at_open(member, "data.path")
    try:
        schema = (
            pq.read_schema(inner, filesystem=filesystem_arg)
            if _is_file(inner, filesystem_arg)
            else pq.ParquetDataset(inner, filesystem=filesystem_arg).schema
        )
    except (OSError, pa.ArrowException) as exc:
        raise InvalidInputError(
            f"could not read {path} as Parquet: {str(exc)[:200]} ({type(exc).__name__})."
        ) from None
    names = list(schema.names)
    wanted = list(columns) if columns else [n for n in names if n != label_column]
    unknown = [c for c in [*wanted, *([label_column] if label_column else [])] if c not in names]
    if unknown:
        raise InvalidInputError(
            f"{path} has no column {unknown[0]!r}; its columns are {', '.join(names[:20])}"
            f"{' …' if len(names) > 20 else ''}."
        )
    for name in wanted:
        kind = schema.field(name).type
        if not (
            pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_boolean(kind)
        ):
            raise InvalidInputError(
                f"{path}: column {name!r} holds {kind}, not numbers; list the feature columns "
                "in data.columns (and the labels in data.label_column)."
            )
    read = [*wanted, *([label_column] if label_column and label_column not in wanted else [])]
    try:
        table = pq.read_table(inner, columns=read, filesystem=filesystem_arg)
    except (OSError, pa.ArrowException) as exc:
        raise InvalidInputError(
            f"could not read {path} as Parquet: {str(exc)[:200]} ({type(exc).__name__})."
        ) from None
    X = np.empty((table.num_rows, len(wanted)), dtype=np.float64)
    for j, name in enumerate(wanted):
        X[:, j] = table.column(name).cast(pa.float64()).to_numpy(zero_copy_only=False)
    y = None
    if label_column:
        labels = np.asarray(table.column(label_column).to_pylist(), dtype=object).astype(str)
        y = np.unique(labels, return_inverse=True)[1]
    return LoadedData(
        X=X,
        y=y,
        feature_names=wanted,
        meta={"source": str(path), "missing": int(np.isnan(X).sum())},
    )


#: Most files and folders a local Parquet folder may hold (each is checked by a data root).
MAX_PARQUET_ENTRIES = 100_000


def parquet_files(path: str, **_: Any) -> list[str]:
    """Every file and folder pyarrow may read of reader ``parquet``'s ``path``: the file, or
    every entry below the folder (links listed, not followed: each is checked where it
    leads by the data root's confinement, :func:`dkernel.io.files.confine`)."""
    import os

    from dkernel.storage.remote import is_url, local_path

    if is_url(path) and not path.lower().startswith("file://"):
        return []
    local = local_path(str(path))
    entries = [local]
    if not os.path.isdir(local):
        return entries
    for folder, dirs, files in os.walk(local, followlinks=True):  # a cycle: the cap
        entries.extend(os.path.join(folder, name) for name in (*dirs, *files))
        if len(entries) > MAX_PARQUET_ENTRIES:
            raise InvalidInputError(
                f"{path} holds more than {MAX_PARQUET_ENTRIES:,} files and folders; a Parquet "
                "data set of fewer, larger files is read (pyarrow: "
                "pq.write_table(pq.read_table(folder), 'one.parquet'))."
            )
    return entries


def _is_file(path: str, fs: Any) -> bool:
    if fs is None:
        import os

        return not os.path.isdir(path)
    return not fs.isdir(path)


register_reader(
    Reader(
        name="parquet",
        params=(
            Param("path", "str", doc="Parquet file or folder, or a URL (s3://, https://, ...)."),
            Param("columns", "list", default=None, nullable=True, doc="Feature columns."),
            Param("label_column", "str", default=None, nullable=True, doc="Label column."),
            STORAGE_OPTIONS,
        ),
        load=load_parquet,
        files=parquet_files,
        description="A Parquet table (pyarrow); numeric or boolean feature columns, nulls "
        "become NaN.",
        urls=("path",),
    )
)
