"""A results store's target on a local (or shared POSIX) filesystem: a directory
(:class:`LocalTarget`, a ``StoreTarget`` of ``dkernel.storage.store_target``)."""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dkernel.errors import StoreError
from dkernel.storage.lease import LEASE_FILE, is_lease_file
from dkernel.storage.metadata import _existing_status, _read_metadata, check_metadata
from dkernel.storage.side_files import (
    check_scratch_dir,
    recorded_side_files,
    remove_scratch_dir,
    side_file_record,
)
from dkernel.storage.store_target import StoreTarget, refuse_resume, refuse_status


class LocalTarget(StoreTarget):
    """A store's directory, its scratch folder beside it (``.NAME.scratch``)."""

    path: Path

    @property
    def scratch_dir(self) -> Path:
        return self.path.parent / f".{self.path.name}.scratch"

    def check(self, *, overwrite: bool = False) -> str | None:
        path = self.path
        check_scratch_dir(self.scratch_dir, path.name)
        if not path.exists():
            return None
        if not path.is_dir():
            raise StoreError(
                f"{path} exists and is not a dkernel results store (it is a file); refusing to "
                "replace it. Choose another output path."
            )
        status = _existing_status(path)
        if status is None:
            _refuse_foreign(path)
            return None
        refuse_status(path, status, overwrite)
        return status

    def check_resumable(self, *, job: Mapping[str, Any], seed: int | None) -> str:
        status = self.check(overwrite=True)
        meta = _read_metadata(self.path, self.path / "zarr.json") if status else None
        status = refuse_resume(self.path, status, meta, job, seed)
        check_metadata(self.path)
        return status

    def empty(self) -> list[str]:
        path = self.path
        # first: a scratch path that is not ours refuses the store
        remove_scratch_dir(self.scratch_dir, path.name)
        side_files = side_file_record(path, recorded_side_files(path))
        if path.exists():
            self.clear()
        path.mkdir(parents=True, exist_ok=True)
        return side_files

    def clear(self) -> None:
        _clear_keeping_lease(self.path)


def _refuse_foreign(path: Path) -> None:
    """Refuse a directory that holds no dkernel store but holds more than a lease."""
    if all(is_lease_file(p.name) for p in path.iterdir()):
        return
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


def _clear_keeping_lease(path: Path) -> None:
    """Empty a store directory but keep the writer's lease file."""
    for child in path.iterdir():
        if child.name == LEASE_FILE:
            continue
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()
