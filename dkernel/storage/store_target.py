"""Where a job's results store goes, on one backend: the :class:`StoreTarget` interface.

A target answers the questions asked before a store is written there: may a store be created
(:meth:`StoreTarget.check`), may ``--resume`` continue the one there
(:meth:`StoreTarget.check_resumable`), and it empties the place for a new store, keeping the
writer's lease (:meth:`StoreTarget.empty`). A directory on a local or shared filesystem is a
``LocalTarget`` (``dkernel.storage.local_target``), a prefix on an object store a
``RemoteTarget`` (``dkernel.storage.remote_target``); ``dkernel.storage.targets`` takes
either (``store_target``), as ``dkernel.storage.lock`` does for the lease.

A job checks its target before the lease (``dkernel validate`` too), again under the lease
(another writer may have finished meanwhile), and once more when the store is created, still
under the lease: what was put in the store's folder while the cluster started is refused
there, not emptied. Each backend's checks are written once, in its module.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dkernel.errors import StoreError
from dkernel.storage.metadata import STATUSES, _key
from dkernel.storage.provenance import _jsonable


class StoreTarget(ABC):
    """Where a store goes: a directory (``Path``) or an object-store URL (``str``)."""

    def __init__(self, path: Path | str, storage_options: Mapping[str, Any] | None) -> None:
        self.path: Any = path
        self.storage_options = storage_options

    @abstractmethod
    def check(self, *, overwrite: bool = False) -> str | None:
        """The status of the store there (None: nothing, or nothing but a lease), or
        :class:`~dkernel.errors.StoreError` when a store may not be created there
        (``dkernel.storage.targets.check_target``)."""

    @abstractmethod
    def check_resumable(self, *, job: Mapping[str, Any], seed: int | None) -> str:
        """The status of the store there when ``--resume`` may continue it, else
        :class:`~dkernel.errors.StoreError` (``dkernel.storage.targets.check_resumable``)."""

    @abstractmethod
    def empty(self) -> list[str]:
        """Make the place ready for a new store (checked first: :meth:`check`), keeping the
        writer's lease; return the side files beside it that stay the store's own (the next
        job may replace them), as the store records them."""

    @abstractmethod
    def clear(self) -> None:
        """Remove all but the writer's lease (a store whose root could not be written)."""


def refuse_status(path: Path | str, status: str, overwrite: bool) -> None:
    """Refuse a complete store (unless ``overwrite``) or one whose status was edited."""
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


def refuse_resume(
    path: Path | str,
    status: str | None,
    meta: Mapping[str, Any] | None,
    job: Mapping[str, Any],
    seed: int | None,
) -> str:
    """``status`` when a resume may continue the store at ``path`` (its root metadata
    ``meta``) for ``job`` and ``seed``; a :class:`~dkernel.errors.StoreError` otherwise."""
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
    attrs = (meta or {}).get("attributes") or {}
    if attrs.get("job") != _jsonable(dict(job)) or attrs.get("seed") != seed:
        raise StoreError(
            f"cannot resume {path}: it was written by a different job spec or seed. Pass "
            "--overwrite to start it over, or choose another --output."
        )
    return status
