"""Checks made before a job writes a store, so that a wrong output fails before any cluster
starts: may a store be created at a path (:func:`check_target`), may ``--resume`` continue the
one there (:func:`check_resumable`)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dkernel.errors import StoreError
from dkernel.storage import remote
from dkernel.storage.lock import is_lease_file
from dkernel.storage.metadata import (
    STATUSES,
    _existing_status,
    _key,
    _read_metadata,
    _read_remote_metadata,
    _status_of,
    check_metadata,
)
from dkernel.storage.provenance import _jsonable
from dkernel.storage.remote import as_location
from dkernel.storage.side_files import check_scratch_dir


def check_target(
    path: str | Path,
    *,
    overwrite: bool = False,
    storage_options: Mapping[str, Any] | None = None,
) -> str | None:
    """Check that a store may be created at ``path``; return the existing store's status.

    Called before any cluster starts, so a wrong output fails fast.

    Raises
    ------
    StoreError
        ``path`` is a file, a directory that is not a dkernel store, or a complete store
        while ``overwrite`` is False; or the scratch path beside it is not the store's
        (:func:`dkernel.storage.side_files.check_scratch_dir`). On an object store: the
        same, read through ``storage_options``.
    """
    location = as_location(path)
    if isinstance(location, str):
        return _check_remote_target(location, overwrite, storage_options)
    path = location
    check_scratch_dir(path.parent / f".{path.name}.scratch", path.name)
    if not path.exists():
        return None
    if not path.is_dir():
        raise StoreError(
            f"{path} exists and is not a dkernel results store (it is a file); refusing to "
            "replace it. Choose another output path."
        )
    status = _existing_status(path)
    if status == "complete" and not overwrite:
        raise StoreError(
            f"{path} already holds a complete results store; pass --overwrite to replace "
            "it or choose another --output."
        )
    if status is not None and status not in STATUSES and not overwrite:
        raise StoreError(
            f"{path} holds a dkernel results store whose status is {status}, not one of "
            f"{', '.join(STATUSES)}: its metadata {path / 'zarr.json'} was edited or damaged. "
            "Pass --overwrite to replace it, or choose another --output."
        )
    if status is None and any(not is_lease_file(p.name) for p in path.iterdir()):
        if not (path / "zarr.json").exists() and any(path.glob("*/zarr.json")):
            raise StoreError(
                f"{path} looks like a results store whose metadata {path / 'zarr.json'} is "
                "missing; refusing to replace it. Restore that file, or remove the store and "
                "run the job again."
            )
        raise StoreError(
            f"{path} exists and is not a dkernel results store; refusing to replace it. "
            "Choose another output path or remove it."
        )
    return status


def check_resumable(
    path: str | Path,
    *,
    job: Mapping[str, Any],
    seed: int | None,
    storage_options: Mapping[str, Any] | None = None,
) -> str:
    """Check that ``--resume`` may continue the store at ``path``; return its status.

    Reads only metadata (the root attributes and every group's and array's ``zarr.json``),
    so the runner calls it before any cluster starts.

    Raises
    ------
    StoreError
        When ``path`` holds no dkernel store, a complete one, one whose status is not
        ``running`` or ``failed``, one written by a different spec or seed, or one whose
        metadata is damaged (naming the file).
    """
    path = as_location(path)
    status = check_target(path, overwrite=True, storage_options=storage_options)
    if status is None:
        raise StoreError(
            f"cannot resume: {path} holds no dkernel results store; run without --resume."
        )
    if status == "complete":
        raise StoreError(
            f"cannot resume: {path} is already complete; pass --overwrite to recompute it."
        )
    if status not in ("running", "failed"):
        raise StoreError(
            f"cannot resume {path}: its status is {status}, not running or failed (its "
            f"metadata {_key(path, 'zarr.json')} was edited or damaged). Pass --overwrite to "
            "start it over, or choose another --output."
        )
    if isinstance(path, str):
        meta = _read_remote_metadata(path, "zarr.json", storage_options)
    else:
        meta = _read_metadata(path, path / "zarr.json")
    attrs = (meta or {}).get("attributes") or {}
    if attrs.get("job") != _jsonable(dict(job)) or attrs.get("seed") != seed:
        raise StoreError(
            f"cannot resume {path}: it was written by a different job spec or seed. Pass "
            "--overwrite to start it over, or choose another --output."
        )
    check_metadata(path, storage_options)
    return status


def _check_remote_target(
    url: str, overwrite: bool, storage_options: Mapping[str, Any] | None
) -> str | None:
    """:func:`check_target` for a store on an object store."""
    meta = _read_remote_metadata(url, "zarr.json", storage_options)
    status = _status_of(meta)
    if meta is None or status is None:
        fs, root = remote.filesystem(url, storage_options)
        try:
            names = remote.call(url, "list", lambda: fs.ls(root, detail=False))
        except FileNotFoundError:
            names = []
        # a writer's lease and the probe it writes before taking it are not results data
        # (seen by a second writer, whom the lease then names its holder)
        others = [n for n in names if not is_lease_file(n.rstrip("/").rsplit("/", 1)[-1])]
        if not others:
            return None
        raise StoreError(
            f"{url} exists and is not a dkernel results store (it holds "
            f"{len(others)} other object(s)); refusing to replace it. Choose another output "
            "URL or remove it."
        )
    _refuse_status(url, status, overwrite)
    return status


def _refuse_status(path: Path | str, status: str, overwrite: bool) -> None:
    if status == "complete" and not overwrite:
        raise StoreError(
            f"{path} already holds a complete results store; pass --overwrite to replace "
            "it or choose another --output."
        )
    if status not in STATUSES and not overwrite:
        raise StoreError(
            f"{path} holds a dkernel results store whose status is {status}, not one of "
            f"{', '.join(STATUSES)}: its metadata {_key(path, 'zarr.json')} was edited or "
            "damaged. Pass --overwrite to replace it, or choose another --output."
        )
