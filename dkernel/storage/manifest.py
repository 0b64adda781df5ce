"""The manifest of a complete results store: per array, the chunk objects written.

Zarr reads a missing chunk as the array's fill value, so a chunk object deleted or lost after
the job finished (a lifecycle rule, a partial copy, a hand-made clean-up) would read back as
NaN or zeros with ``status: complete``. :func:`manifest_of` lists, when the store is marked
complete, how many chunk objects each array has and their total size; the root attribute
``manifest`` records it, and :func:`check_manifest` compares a reader's listing with it.

An array whose chunks were all fill values has fewer objects than chunks (Zarr does not
write empty chunks); what is recorded is what was written, so that case reads back as
written. A store read over HTTP(S) cannot be listed, so it is not checked.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dkernel.errors import StoreError

#: Root attribute holding the manifest: ``{"array/path": {"chunks": n, "bytes": b}, ...}``.
MANIFEST_ATTR = "manifest"


def _listing(path: str | Path, storage_options: Mapping[str, Any] | None) -> dict[str, int]:
    """Every object under the store ``path``: its path relative to the store → its size."""
    if isinstance(path, str):
        from dkernel.storage import remote

        # a listing cached before the workers wrote would leave their chunks out
        fs, root = remote.filesystem(path, {**(storage_options or {}), **remote.UNCACHED})
        root = root.rstrip("/")
        found = fs.find(root, detail=True)
        return {
            name[len(root) + 1 :]: int(info.get("size") or 0)
            for name, info in found.items()
            if name.startswith(root + "/")
        }
    root_dir = Path(path)
    out: dict[str, int] = {}
    for folder, _dirs, files in os.walk(root_dir):
        for name in files:
            full = os.path.join(folder, name)
            out[os.path.relpath(full, root_dir).replace(os.sep, "/")] = os.lstat(full).st_size
    return out


def _tally(listing: Mapping[str, int]) -> dict[str, dict[str, int]]:
    """Per array (a folder holding ``zarr.json`` and chunk objects under ``c/``): the number
    of chunk objects and their total size."""
    arrays: dict[str, dict[str, int]] = {}
    for key, size in listing.items():
        # the last "/c/": what follows it is the chunk's numeric grid position
        head, sep, _ = f"/{key}".rpartition("/c/")
        if not sep:
            continue
        head = head.lstrip("/")
        if f"{head}/zarr.json".lstrip("/") not in listing:
            continue
        entry = arrays.setdefault(head, {"chunks": 0, "bytes": 0})
        entry["chunks"] += 1
        entry["bytes"] += size
    return arrays


def manifest_of(
    path: str | Path, storage_options: Mapping[str, Any] | None = None
) -> dict[str, dict[str, int]]:
    """The chunk objects of every array of the store at ``path`` (a directory or a URL):
    ``{"group/array": {"chunks": n, "bytes": total}}``."""
    return _tally(_listing(path, storage_options))


def check_manifest(
    path: str | Path,
    recorded: Any,
    storage_options: Mapping[str, Any] | None = None,
) -> None:
    """Check that the store at ``path`` still holds the chunk objects its manifest records.

    Raises
    ------
    StoreError
        Naming the first array with fewer chunk objects than were written, or whose chunk
        objects changed size, and what to do.
    """
    if not isinstance(recorded, Mapping):
        return
    if isinstance(path, str):
        from dkernel.storage.remote import READ_ONLY_SCHEMES, scheme_of

        if scheme_of(path) in READ_ONLY_SCHEMES:
            return  # HTTP(S) has no listing of objects to compare with
    found = manifest_of(path, storage_options)
    for name in sorted(recorded):
        want = recorded[name]
        if not isinstance(want, Mapping):
            continue
        have = found.get(name, {"chunks": 0, "bytes": 0})
        n_want, n_have = int(want.get("chunks", 0)), have["chunks"]
        if n_have < n_want:
            problem = f"holds {n_have} of the {n_want} chunk objects written when it finished"
        elif n_have == n_want and int(want.get("bytes", have["bytes"])) != have["bytes"]:
            problem = "has chunk objects whose size changed since it finished"
        else:
            continue
        raise StoreError(
            f"the array {name!r} of the results store {path} {problem}: some of its values "
            "were lost (deleted or cut short since) and would read as fill values. Restore "
            "the store from a copy, or run the job again with --overwrite to recompute it."
        )
