"""Reading a results store: :func:`open_results` (lazily, as an :class:`xarray.DataTree`),
:func:`describe_store` (the summary ``dkernel show`` prints) and :func:`recorded_path` (a file
the store recorded beside it)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr
import zarr

from dkernel.errors import StoreError, StoreNotFoundError, StoreStatusWarning, warn_caller
from dkernel.storage import remote
from dkernel.storage.lock import lease_objects_unlisted
from dkernel.storage.manifest import MANIFEST_ATTR, check_manifest
from dkernel.storage.metadata import GROUP_MARKER, STORE_FORMAT, _zarr_kwargs, check_metadata
from dkernel.storage.remote import as_location


def recorded_path(store: str | Path, recorded: str | Path) -> Path:
    """A file path recorded in a store's attributes (label GeoTIFF, quick-look PNG), resolved.

    Stores record such paths relative to the store directory (for a store on an object store,
    the result is a URL string beside it), so a store and its files can be moved together and opened from any working directory. Absolute paths are returned as they
    are; a path written by an older version relative to the job's working directory is used
    when it exists and the store-relative one does not.

    Examples
    --------
    >>> recorded_path("results/demo.zarr", "../demo.labels.tif").as_posix()
    'results/demo.labels.tif'
    """
    if remote.is_remote(store) and not Path(recorded).is_absolute():
        # beside a store on an object store: a URL (``s3://bucket/x.labels.tif``)
        parts = [*str(store).rstrip("/").split("/"), *str(recorded).split("/")]
        out: list[str] = []
        for part in parts:
            if part == ".." and out and out[-1] and not out[-1].endswith(":"):
                out.pop()
            elif part not in (".", ".."):
                out.append(part)
        return "/".join(out)  # type: ignore[return-value]  # a URL, documented
    recorded = Path(recorded)
    if recorded.is_absolute():
        return recorded
    resolved = Path(os.path.normpath(Path(store) / recorded))
    if not resolved.exists() and recorded.exists():
        return recorded
    return resolved


def open_results(
    path: str | Path,
    *,
    warn: bool = True,
    storage_options: Mapping[str, Any] | None = None,
) -> xr.DataTree:
    """Open a results store lazily (no cluster needed) as an :class:`xarray.DataTree`.

    Arrays are Dask-backed and read only when used.

    Parameters
    ----------
    path : str or Path
        The store written by ``dkernel run``: a path, or a URL (``s3://bucket/x.zarr``,
        ``gs://``, ``az://``, ``https://`` read-only).
    warn : bool
        Emit :class:`~dkernel.errors.StoreStatusWarning` when the store is not complete.
    storage_options : mapping, optional
        fsspec options of a URL (``endpoint``, ``anon``, ``profile``); by default the
        backend reads the environment.

    Raises
    ------
    StoreNotFoundError
        When nothing exists at ``path``.
    StoreError
        When ``path`` is not a dkernel results store (corrupt or foreign).

    Examples
    --------
    >>> tree = open_results("results/wine-rbf-kpca.zarr")  # doctest: +SKIP
    >>> tree["embedding"]["embedding"]  # doctest: +SKIP
    """
    path = as_location(path, what="store", read_only=True)
    kw = _zarr_kwargs(path, storage_options or {})
    if isinstance(path, str):
        if not remote.check_remote_readable(path, storage_options):
            raise StoreNotFoundError(f"no results store at {path}.")
        check_metadata(path, storage_options)
    elif not path.exists():
        raise StoreNotFoundError(f"no results store at {path}.")
    elif path.is_dir():
        check_metadata(path)
    try:
        group = zarr.open_group(str(path), mode="r", **kw)
        fmt = group.attrs.get("format")
    except Exception as exc:
        raise StoreError(f"{path} is not a readable Zarr store: {exc}") from exc
    if fmt != STORE_FORMAT:
        raise StoreError(
            f"{path} is a Zarr store but not a dkernel results store (format {fmt!r}, "
            f"expected {STORE_FORMAT!r})."
        )
    status = group.attrs.get("status")
    if status == "complete":  # a chunk lost since would read as fill values
        check_manifest(path, group.attrs.get(MANIFEST_ATTR), storage_options)
    if warn and status != "complete":
        msg = f"results store {path} has status {status!r}"
        if status == "failed":
            msg += f": {group.attrs.get('error')}"
        warn_caller(msg + "; its arrays may be incomplete.", StoreStatusWarning)
    try:
        with lease_objects_unlisted():
            return xr.open_datatree(
                str(path),
                engine="zarr",
                chunks={},
                consolidated=status == "complete",
                # integer label maps stay integers; their nodata is labels.rio.nodata (-1)
                mask_and_scale=False,
                **kw,
            )
    except Exception as exc:
        raise StoreError(f"{path} could not be opened as a results store: {exc}") from exc


#: Arrays with at most this many elements are shown with their values (metrics, scalars).
SHOW_VALUES_MAX = 10


def _chunks_fit(array_dir: Path, nbytes: int) -> bool:
    """Whether the chunk files of a small array are no larger than its values could need.

    A compressed chunk far larger than its declared values is damaged or crafted to inflate
    (a 2 MiB zstd chunk of a 10-value array decompresses to gigabytes before Zarr checks its
    shape); its values are then not shown. Links are not followed."""
    budget = int(nbytes) + SHOW_CHUNK_SLACK
    total = 0
    for root, dirs, files in os.walk(array_dir / "c"):
        for name in files:
            total += os.lstat(os.path.join(root, name)).st_size
            if total > budget:
                return False
        dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(root, d))]
    return True


def _remote_chunks_fit(
    url: str, array: str, nbytes: int, storage_options: Mapping[str, Any] | None
) -> bool:
    """:func:`_chunks_fit` for a store on an object store (sizes from one listing)."""
    if url.startswith("http"):
        return False  # no listing over HTTP: the values of small arrays are not shown
    fs, root = remote.filesystem(url, storage_options)
    try:
        sizes = remote.call(url, "list", lambda: fs.find(f"{root}/{array}/c", detail=True))
    except FileNotFoundError:
        return True
    return sum(int(e.get("size") or 0) for e in sizes.values()) <= nbytes + SHOW_CHUNK_SLACK


#: Bytes a small array's chunks may hold beyond its raw values (codec headers, checksums).
SHOW_CHUNK_SLACK = 4096


def describe_store(
    path: str | Path, storage_options: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """Summary used by ``dkernel show``: status, provenance, timings, each array's shape, and
    the values of the small ones (metrics and other scalars); ``path`` may be a URL."""
    path = as_location(path, what="store", read_only=True)
    tree = open_results(path, warn=False, storage_options=storage_options)

    def fits(node: str, name: str, nbytes: int) -> bool:
        if isinstance(path, str):
            return _remote_chunks_fit(path, f"{node}/{name}".strip("/"), nbytes, storage_options)
        return _chunks_fit(Path(path) / node / name, nbytes)

    attrs = dict(tree.attrs)
    arrays = []
    for node in tree.subtree:
        for name, var in node.data_vars.items():
            chunks = var.chunks
            arrays.append(
                {
                    "group": node.path,
                    "name": name,
                    "dims": list(var.dims),
                    "shape": list(var.shape),
                    "dtype": str(var.dtype),
                    "chunks": [max(c) for c in chunks] if chunks else None,
                    "values": (
                        np.asarray(var.values).tolist()
                        if var.size <= SHOW_VALUES_MAX
                        and fits(node.path.strip("/"), str(name), var.nbytes)
                        else None
                    ),
                }
            )
    info: dict[str, Any] = {
        "path": str(path),
        "attrs": attrs,
        "arrays": arrays,
        "groups": _group_attributes(tree),
    }
    if "model_order" in tree.children:
        info["model_order"] = _model_order_summary(tree["model_order"].to_dataset(), fits)
    if "mssc" in tree.children:
        group = tree["mssc"].attrs
        info["stage_two"] = {key: group.get(key) for key in STAGE_TWO_EVIDENCE}
    return info


def _group_attributes(tree: Any) -> list[dict[str, Any]]:
    """Each group's attributes below the root (what a job recorded beside its arrays: widths,
    the rule that chose them, the input's shape), without the write marker."""
    groups = []
    for node in tree.subtree:
        if node is tree:
            continue
        attrs = {key: value for key, value in node.attrs.items() if key != GROUP_MARKER}
        if attrs:
            groups.append({"group": node.path, "attrs": attrs})
    return groups


#: The ``/mssc`` attributes that say which partition graph and which limit of its affinity
#: MSSC's stage two kept, and the evidence of each choice (``dkernel show`` prints them).
STAGE_TWO_EVIDENCE = (
    "normalization_chosen",
    "normalization_silhouettes",
    "wide_limit_chosen",
    "eigengap_ratios",
)


#: The ``/model_order`` attributes that ``dkernel show`` prints on its model-order line.
MODEL_ORDER_SUMMARY = ("rule", "n_clusters_chosen", "higher_is_better")
#: Most candidates of ``/model_order`` whose scores :func:`describe_store` reads.
SHOW_CANDIDATES_MAX = 200


def _model_order_summary(ds: xr.Dataset, fits: Callable[[str, str, int], bool]) -> dict:
    """The ``/model_order`` evidence for ``dkernel show``: the rule, the chosen k, and every
    candidate with its score (None where the arrays are missing, too long or damaged)."""
    out: dict[str, Any] = {key: ds.attrs.get(key) for key in MODEL_ORDER_SUMMARY}
    for name in ("n_clusters", "score"):
        var = ds.get(name)
        if (
            var is None
            or var.ndim != 1
            or var.size > SHOW_CANDIDATES_MAX
            or not fits("model_order", name, var.nbytes)
        ):
            out[name] = None
            continue
        out[name] = np.asarray(var.values).tolist()
    return out
