"""The Zarr table reader: a 2-D array (rows × features) in a Zarr store, read chunk by chunk.

Importing this module registers reader ``zarr``. Tables larger than memory are kept as users
keep them — a 2-D Zarr array on disk or in an object store — and the job reads them as a Dask
array with one task per chunk of rows, on the workers (issue 56): nothing is loaded at
``load`` time but the metadata.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dkernel.errors import InvalidInputError
from dkernel.io.data import LoadedData, resolve_path
from dkernel.io.registry import STORAGE_OPTIONS, Reader, register_reader
from dkernel.schema.params import Param

READER = "zarr"


def load_zarr_table(
    path: str,
    array: str | None = None,
    label_array: str | None = None,
    storage_options: dict[str, Any] | None = None,
) -> LoadedData:
    """A 2-D Zarr array of rows × features as a Dask array chunked as stored (rows only).

    Parameters
    ----------
    path : str
        The store: a folder, or a URL (``s3://bucket/table.zarr``, ``gs://``, ``az://``).
    array : str, optional
        The array's name when the store is a group (default: the store is the array).
    label_array : str, optional
        A 1-D array of ground-truth labels in the same group, one per row (used only for
        metrics; read whole, so it is for tables whose labels fit in memory).
    storage_options : dict, optional
        fsspec options of a remote store.

    Raises
    ------
    InvalidInputError
        Unreadable store, a group without ``array``, an array that is not 2-D or not
        numeric, a label array of another length; for a local store also the checks of
        :func:`dkernel.io.zarr_inputs.scan_zarr_store` and
        :func:`~dkernel.io.zarr_inputs.check_zarr_chunks` (files, sizes, chunk bombs,
        missing chunks) before any chunk is read.
    """
    import dask.array as da
    import zarr

    from dkernel.io.cube import zarr_arrays
    from dkernel.io.files import at_open
    from dkernel.io.zarr_inputs import check_zarr_chunks, confined_store, scan_zarr_store
    from dkernel.storage.remote import is_remote, to_fsspec
    from dkernel.storage.remote import storage_options as resolve_options

    if is_remote(path):
        location = to_fsspec(path)
        options = {"storage_options": resolve_options(location, storage_options, purpose="input")}
    else:
        location = at_open(resolve_path(path), "data.path")
        scan_zarr_store(location, reader=READER)
        options = {}
    # a local store through the store that checks each file where it is opened (its chunks
    # are read by the job's tasks, maybe in process workers, long after the checks here)
    store: Any = location if is_remote(path) else confined_store(location, reader=READER)
    try:
        node = zarr.open(store, mode="r", **options)
    except Exception as exc:  # noqa: BLE001  (zarr raises many types for a broken store)
        raise InvalidInputError(
            f"could not open {path} as a Zarr store: {str(exc)[:200]} ({type(exc).__name__})."
        ) from None
    group = node if isinstance(node, zarr.Group) else None
    if group is not None:
        names = sorted(k for k, _ in group.arrays())
        if array is None or array not in names:
            which = (
                "set data.array" if array is None else f"it has no array {array!r}; set data.array"
            )
            raise InvalidInputError(
                f"{path} is a Zarr group; {which} to one of: {', '.join(names) or '(none)'}."
            )
        table = group[array]
    elif array is not None:
        raise InvalidInputError(
            f"{path} is a single Zarr array, not a group; remove data.array ({array!r})."
        )
    else:
        table = node
    if table.ndim != 2 or np.dtype(table.dtype).kind not in "biuf":
        raise InvalidInputError(
            f"{path}{f'/{array}' if array else ''} holds a {table.ndim}-D {table.dtype} array; "
            f"reader '{READER}' reads a 2-D numeric array of rows × features (an image cube "
            "is reader 'zarr-raster')."
        )
    if not is_remote(path):
        _check_chunks(path, location, array or "", zarr_arrays, check_zarr_chunks)
    X = da.from_zarr(table)
    if X.numblocks[1] > 1:
        X = X.rechunk({1: -1})
    y = None
    if label_array is not None:
        if group is None or label_array not in group:
            raise InvalidInputError(
                f"data.label_array: {path} has no array {label_array!r} beside the table."
            )
        labels = np.asarray(group[label_array][...])
        if labels.shape != (table.shape[0],):
            raise InvalidInputError(
                f"data.label_array: {label_array!r} has shape {labels.shape}; the table has "
                f"{table.shape[0]} rows (one label per row)."
            )
        y = np.unique(labels, return_inverse=True)[1]
    return LoadedData(
        X=X,
        y=y,
        meta={"source": str(path), "shape": list(table.shape), "chunks": list(table.chunks)},
    )


def _check_chunks(path: str, location: str, name: str, arrays: Any, check: Any) -> None:
    """The table's chunk files as ``zarr-raster`` checks an image's (sizes, bombs), and no
    chunk missing: a missing chunk reads as the fill value, rows that were never data."""
    table = [(n, a) for n, a in arrays(location, reader=READER) if n == name]
    gaps = check(location, table, missing_chunks="nodata", reader=READER)
    for gap in gaps:
        raise InvalidInputError(
            f"reader '{READER}' failed on {path}: {gap.describe()}; they would read as its "
            f"fill value {gap.fill!r}, rows that were never written. Rewrite the store."
        )


def zarr_table_files(path: str, **_: Any) -> list:
    """The links inside a local store of reader ``zarr`` (each must resolve inside the data
    root); a URL has none."""
    from dkernel.io.zarr_inputs import zarr_store_links
    from dkernel.storage.remote import is_url

    if is_url(path):
        return []
    return zarr_store_links(resolve_path(path), reader=READER)


register_reader(
    Reader(
        name=READER,
        params=(
            Param("path", "str", doc="Zarr store folder or URL (s3://bucket/table.zarr, ...)."),
            Param(
                "array",
                "str",
                default=None,
                nullable=True,
                doc="The 2-D array's name when the store is a group.",
            ),
            Param(
                "label_array",
                "str",
                default=None,
                nullable=True,
                doc="A 1-D array of labels beside it (metrics only).",
            ),
            STORAGE_OPTIONS,
        ),
        load=load_zarr_table,
        files=zarr_table_files,
        urls=("path",),
        description="A 2-D Zarr array (rows × features), read chunk by chunk on the workers.",
    )
)
