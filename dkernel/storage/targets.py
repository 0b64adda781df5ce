"""Checks made before a job writes a store, so that a wrong output fails before any cluster
starts: may a store be created at a path (:func:`check_target`), may ``--resume`` continue the
one there (:func:`check_resumable`).

Each backend's checks live in its ``StoreTarget`` (``dkernel.storage.store_target``): a
directory's in ``dkernel.storage.local_target``, an object store's in
``dkernel.storage.remote_target``. This module takes either (:func:`store_target`) and
re-exports their names.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dkernel.storage.local_target import LocalTarget
from dkernel.storage.remote import as_location
from dkernel.storage.remote_target import (  # noqa: F401  (where it was)
    RemoteTarget,
    _check_remote_target,
)
from dkernel.storage.store_target import StoreTarget
from dkernel.storage.store_target import (  # noqa: F401  (where it was)
    refuse_status as _refuse_status,
)


def store_target(path: str | Path, storage_options: Mapping[str, Any] | None = None) -> StoreTarget:
    """Where a store goes: a local directory (``LocalTarget``) or an object-store URL
    (``RemoteTarget``), read through ``storage_options``.

    Raises
    ------
    StoreError
        When ``path`` is no place a store can be written
        (:func:`dkernel.storage.remote.as_location`).
    """
    location = as_location(path)
    if isinstance(location, str):
        return RemoteTarget(location, storage_options)
    return LocalTarget(location, storage_options)


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
    return store_target(path, storage_options).check(overwrite=overwrite)


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
    return store_target(path, storage_options).check_resumable(job=job, seed=seed)
