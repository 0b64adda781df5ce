"""A results store's target on an object store: a prefix (:class:`RemoteTarget`, a
``StoreTarget`` of ``dkernel.storage.store_target``), read and emptied through
``dkernel.storage.remote`` (every call bounded, a failure one line naming the URL)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dkernel.errors import StoreError
from dkernel.storage import remote
from dkernel.storage.lease import is_lease_file
from dkernel.storage.metadata import _read_remote_metadata, _status_of, check_metadata
from dkernel.storage.side_files import SIDE_FILES_ATTR
from dkernel.storage.store_target import StoreTarget, refuse_resume, refuse_status


class RemoteTarget(StoreTarget):
    """A store's prefix on an object store (``s3://bucket/a.zarr``)."""

    path: str

    def check(self, *, overwrite: bool = False) -> str | None:
        return _check_remote_target(self.path, overwrite, self.storage_options)

    def check_resumable(self, *, job: Mapping[str, Any], seed: int | None) -> str:
        status = self.check(overwrite=True)
        meta = (
            _read_remote_metadata(self.path, "zarr.json", self.storage_options) if status else None
        )
        status = refuse_resume(self.path, status, meta, job, seed)
        check_metadata(self.path, self.storage_options)
        return status

    def empty(self) -> list[str]:
        # the objects beside the store stay its own: the next job may replace them
        previous = _read_remote_metadata(self.path, "zarr.json", self.storage_options) or {}
        recorded = (previous.get("attributes") or {}).get(SIDE_FILES_ATTR)
        side_files = sorted(
            r
            for r in _strings(recorded)
            if r.startswith("../") and "/" not in r[3:] and r not in ("../.", "../..")
        )
        self.clear()
        return side_files

    def clear(self) -> None:
        _clear_remote(self.path, self.storage_options)


def _check_remote_target(
    url: str, overwrite: bool, storage_options: Mapping[str, Any] | None
) -> str | None:
    """``dkernel.storage.targets.check_target`` for a store on an object store."""
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
    refuse_status(url, status, overwrite)
    return status


def _clear_remote(url: str, storage_options: Mapping[str, Any] | None) -> None:
    """Empty a store on an object store but keep the writer's lease object."""
    fs, root = remote.filesystem(url, storage_options)
    try:
        keys = remote.call(url, "list", lambda: fs.find(root))
    except FileNotFoundError:
        return
    doomed = [k for k in keys if not is_lease_file(k.rsplit("/", 1)[-1])]
    if doomed:
        remote.call(url, "clear", lambda: fs.rm(doomed))


def _strings(value: Any) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []
