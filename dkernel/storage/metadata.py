"""Reading a results store's metadata (its ``zarr.json`` files) safely: bounded, never
through a link, every declared array size checked; the store's format and status."""

from __future__ import annotations

import functools
import json
import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dkernel._files import FileRefused, read_regular
from dkernel.errors import StoreError
from dkernel.storage import remote
from dkernel.storage.array_limits import declared_array_problem  # installs bounded codecs
from dkernel.storage.provenance import one_line
from dkernel.storage.remote import as_location

STORE_FORMAT = "dkernel-results/1"
#: A group's attribute saying whether its write finished (``"writing"``, ``"complete"``).
GROUP_MARKER = "dkernel_write"
STATUSES = ("running", "complete", "failed")


def _zarr_kwargs(path: Any, storage_options: Mapping[str, Any]) -> dict[str, Any]:
    """``storage_options=`` for Zarr and xarray when ``path`` is a URL and options were given,
    or it is an HTTP(S) URL (:func:`dkernel.storage.remote.bounded_http_client`); the
    backend reads the environment otherwise."""
    if not isinstance(path, str):
        return {}
    options = remote.storage_options(path, storage_options)  # HTTP: bounded responses
    return {"storage_options": options} if options else {}


def _key(store: Path | str, name: str) -> Path | str:
    """The file ``name`` of a store, as a path or a URL (for messages)."""
    return f"{store}/{name}" if isinstance(store, str) else store / name


def _status_of(meta: dict[str, Any] | None) -> str | None:
    """The status recorded in a root ``zarr.json`` (see :func:`_existing_status`)."""
    attrs = (meta or {}).get("attributes")
    if not isinstance(attrs, dict) or attrs.get("format") != STORE_FORMAT:
        return None
    status = attrs.get("status")
    if not isinstance(status, str):
        return f"<{'missing' if status is None else type(status).__name__}>"
    return status if status in STATUSES else ascii(one_line(status, 80))


def _read_remote_metadata(
    url: str, rel: str, storage_options: Mapping[str, Any] | None
) -> dict[str, Any] | None:
    """One ``zarr.json`` of the store at ``url`` (``rel`` below it), at most
    :data:`MAX_METADATA_BYTES`; None when there is none. Checked as :func:`_read_metadata`."""
    fs, root = remote.filesystem(url, storage_options)
    key = f"{root}/{rel}"
    shown = f"{url}/{rel}"
    try:
        data = remote.call(
            url, "read", lambda: fs.cat_file(key, start=0, end=MAX_METADATA_BYTES + 1)
        )
    except FileNotFoundError:
        return None
    if len(data) > MAX_METADATA_BYTES:
        raise StoreError(
            f"{url} is not a readable Zarr store: its metadata file {shown} is more than "
            f"{MAX_METADATA_BYTES:,} bytes."
        )
    return _parse_metadata(url, shown, data)


#: Largest ``zarr.json`` read (bytes): a results store's root, with the job spec and, once
#: complete, the consolidated metadata of every array, is well under a megabyte.
MAX_METADATA_BYTES = 16 << 20
#: Most metadata files :func:`check_metadata` reads (groups and arrays, not chunks).
_MAX_NODES = 10_000


def _damaged(store: Path | str, file: Path | str, problem: str) -> StoreError:
    return StoreError(
        f"{store} is not a readable Zarr store: its metadata file {file} {problem}. Restore "
        "that file, or remove the store and run the job again."
    )


def _read_metadata(store: Path, file: Path) -> dict[str, Any] | None:
    """One ``zarr.json``, read without following a link, blocking on a FIFO or reading more
    than :data:`MAX_METADATA_BYTES`; None when there is none.

    Raises
    ------
    StoreError
        Naming the file when it is not a regular file, too long, not UTF-8 JSON, or not a
        JSON object.
    """
    try:
        data = read_regular(file, MAX_METADATA_BYTES, follow_links=False)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except FileRefused as exc:
        if exc.mode is None:
            raise _damaged(
                store, file, f"is {exc.size:,} bytes, more than {MAX_METADATA_BYTES:,}"
            ) from None
        kind = "a symbolic link" if stat.S_ISLNK(exc.mode) else "not a regular file"
        raise _damaged(store, file, f"is {kind}") from None
    except OSError as exc:
        raise _damaged(store, file, f"cannot be read ({exc.strerror or exc})") from None
    return _parse_metadata(store, file, data)


def _parse_metadata(store: Path | str, file: Path | str, data: bytes) -> dict[str, Any]:
    """The JSON object in ``data`` (the metadata file ``file`` of ``store``)."""
    if not data.strip():
        raise _damaged(store, file, "is empty")
    try:
        meta = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise _damaged(store, file, f"holds bytes that are not UTF-8 (byte {exc.start})") from None
    except ValueError as exc:
        raise _damaged(
            store, file, f"is truncated or not valid JSON ({len(data):,} bytes; {exc})"
        ) from None
    except RecursionError:
        raise _damaged(store, file, "holds JSON nested too deeply") from None
    if not isinstance(meta, dict):
        raise _damaged(store, file, f"holds a JSON {type(meta).__name__}, not Zarr metadata")
    _check_declared_sizes(store, file, meta)
    return meta


def _check_declared_sizes(store: Path | str, file: Path | str, meta: dict[str, Any]) -> None:
    """Refuse metadata declaring an array beyond what can be read
    (:func:`dkernel.storage.array_limits.declared_array_problem`): the document's own array,
    or one of the arrays of its consolidated metadata (what xarray reads instead)."""
    problem = declared_array_problem(meta)
    if problem is not None:
        raise _damaged(store, file, problem)
    consolidated = meta.get("consolidated_metadata")
    nodes = consolidated.get("metadata") if isinstance(consolidated, dict) else None
    for name, node in (nodes or {}).items() if isinstance(nodes, dict) else ():
        problem = declared_array_problem(node) if isinstance(node, dict) else None
        if problem is not None:
            raise _damaged(store, file, f"(consolidated metadata of {name!r}) {problem}")


def check_metadata(path: str | Path, storage_options: Mapping[str, Any] | None = None) -> None:
    """Check that every ``zarr.json`` of the store at ``path`` (its root, groups and arrays;
    not the chunks) is a regular file holding a JSON object.

    Raises
    ------
    StoreError
        Naming the first damaged file (see :func:`_read_metadata`).
    """
    location = as_location(path, read_only=True)
    if isinstance(location, str):
        _check_remote_metadata(location, storage_options)
        return
    path = location
    todo, n_read = [path], 0
    while todo and n_read < _MAX_NODES:
        node = todo.pop()
        meta = _read_metadata(path, node / "zarr.json")
        n_read += 1
        if meta is None or meta.get("node_type") != "group":
            continue  # an array's folder holds its chunks: not walked
        with os.scandir(node) as entries:
            todo.extend(
                Path(e.path)
                for e in entries
                if not e.name.startswith(".") and e.is_dir(follow_symlinks=False)
            )


def _check_remote_metadata(url: str, storage_options: Mapping[str, Any] | None) -> None:
    """:func:`check_metadata` for a store on an object store (listed group by group)."""
    fs, root = remote.filesystem(url, storage_options)
    todo, n_read = [""], 0
    while todo and n_read < _MAX_NODES:
        rel = todo.pop()
        meta = _read_remote_metadata(
            url, f"{rel}/zarr.json" if rel else "zarr.json", storage_options
        )
        n_read += 1
        if meta is None or meta.get("node_type") != "group" or url.startswith("http"):
            continue  # an array's folder holds its chunks: not walked
        node = f"{root}/{rel}" if rel else root
        entries = remote.call(url, "list", functools.partial(fs.ls, node, detail=True))
        for entry in entries:
            name = entry["name"].rstrip("/").rsplit("/", 1)[-1]
            if entry.get("type") == "directory" and not name.startswith("."):
                todo.append(f"{rel}/{name}" if rel else name)


def _existing_status(path: Path) -> str | None:
    """The status of the dkernel store at ``path``: None when there is none (no root
    metadata, or a foreign one); a status that is not text, or missing, as ``<dict>`` or
    ``<missing>``; raises :class:`StoreError` when the root metadata is damaged."""
    return _status_of(_read_metadata(path, path / "zarr.json"))
