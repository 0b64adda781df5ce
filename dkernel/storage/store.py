"""The results store: one Zarr v3 store per job, one group per stage, written via xarray.

Layout: root attributes hold the provenance (``job`` spec, ``versions``,
``git_revision``, ``seed``, ``timings``, ``status``); groups such as ``/input``, ``/kernel``,
``/embedding``, ``/labels``, ``/metrics``, ``/gmm``, ``/features``, ``/ranking``, ``/mssc``
hold the arrays, each built by its builder in :mod:`dkernel.storage.layout`. ``status`` goes
``running`` → ``complete`` (written last, only after every array is written) or ``failed``
(with the error). This is the only module that touches Zarr.

One writer per store: ``dkernel run``/``submit`` hold the store's lease
(:mod:`dkernel.storage.lock`, the file ``dkernel.lease`` in the store) from before the cluster
starts until the status is final; a second writer, or ``--overwrite``, is refused while the
holder lives, and a stale lease (dead pid on this host, or a heartbeat older than
``DKERNEL_LEASE_TIMEOUT``) is taken over. Guarantees: mutual exclusion on local disks and on
shared filesystems with working POSIX locks (NFS v4, Lustre, GPFS); heartbeat-only protection
where ``flock`` is unsupported (NFS v3 without lockd, FUSE mounts); conditional writes on S3;
an advisory lease, never taken over, on object stores without them. See
``docs/store_lock.md``.

A store may live on an object store: every function here takes an fsspec URL
(``s3://bucket/x.zarr``) as well as a path, with ``storage_options``
(``dkernel.storage.remote``).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import logging
import os
import platform
import shutil
import stat
import subprocess
import traceback
import warnings
from collections.abc import Callable, Hashable, Mapping
from pathlib import Path
from typing import Any, Literal

import numpy as np
import xarray as xr
import zarr

from dkernel._files import FileRefused, read_regular
from dkernel._validation import is_dask_array
from dkernel.errors import StoreError, StoreNotFoundError, StoreStatusWarning, warn_caller
from dkernel.runtime.progress import active_client
from dkernel.storage import remote
from dkernel.storage.array_limits import declared_array_problem  # installs bounded codecs
from dkernel.storage.attributes import describe_variables
from dkernel.storage.geo import CONVENTIONS
from dkernel.storage.lock import LEASE_FILE, is_lease_file, lease_objects_unlisted
from dkernel.storage.manifest import MANIFEST_ATTR, check_manifest, manifest_of
from dkernel.storage.paths import check_writable  # noqa: F401  (where it was)
from dkernel.storage.remote import as_location
from dkernel.storage.side_files import (
    SIDE_FILES_ATTR,
    check_scratch_dir,
    recorded_side_files,
    remove_scratch_dir,
    scratch_entry,
    side_file_record,
)

logger = logging.getLogger(__name__)

STORE_FORMAT = "dkernel-results/1"
STATUSES = ("running", "complete", "failed")


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


def package_versions() -> dict[str, str]:
    """Versions of the packages that determine results."""
    import importlib.metadata as md

    names = ["dkernel", "numpy", "scipy", "scikit-learn", "dask", "distributed", "zarr", "xarray"]
    out = {"python": platform.python_version()}
    for name in names:
        try:
            out[name] = md.version(name)
        except md.PackageNotFoundError:
            continue
    return out


def git_revision() -> str | None:
    """The git revision of the dkernel checkout, when it is one."""
    root = Path(__file__).resolve().parents[2]
    if not (root / ".git").exists():
        return None
    try:
        out = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def _jsonable(value: Any) -> Any:
    """Round-trip through JSON so attributes never hold NumPy scalars or paths."""
    return json.loads(json.dumps(value, default=_json_default))


def _json_default(obj: Any) -> Any:
    if hasattr(obj, "item"):
        return obj.item()
    if hasattr(obj, "tolist"):
        return obj.tolist()
    return str(obj)


class ResultsStore:
    """Writer for one job's results store.

    Use :meth:`create` to start a job's store, then :meth:`write` per stage, and finally
    :meth:`mark_complete` or :meth:`mark_failed`.
    """

    def __init__(self, path: str | Path, storage_options: Mapping[str, Any] | None = None) -> None:
        #: a local directory, or a URL string for a store on an object store (``s3://``)
        self.path: Any = as_location(path, read_only=True)
        self.storage_options = dict(storage_options or {})

    @property
    def remote(self) -> bool:
        """Whether the store is on an object store (``self.path`` is then a URL)."""
        return isinstance(self.path, str)

    @property
    def _zarr(self) -> dict[str, Any]:
        """Keyword arguments that open this store with Zarr (its storage options)."""
        return _zarr_kwargs(self.path, self.storage_options)

    def relative(self, file: str | Path) -> str:
        """``file`` as recorded in the store's attributes: relative to the store directory
        (read back with :func:`dkernel.recorded_path`)."""
        return os.path.relpath(Path(file).resolve(), self.path.resolve())

    # -- lifecycle -----------------------------------------------------------------------
    @classmethod
    def create(
        cls,
        path: str | Path,
        *,
        job: Mapping[str, Any],
        seed: int | None,
        overwrite: bool = False,
        storage_options: Mapping[str, Any] | None = None,
    ) -> ResultsStore:
        """Create a fresh store with ``status: running`` (at a path or an object-store URL,
        opened with ``storage_options``).

        Raises
        ------
        StoreError
            When ``path`` holds a complete store and ``overwrite`` is False, or holds something
            that is not a dkernel store.
        """
        location = as_location(path)
        check_target(location, overwrite=overwrite, storage_options=storage_options)
        store = cls(location, storage_options)
        if isinstance(location, str):
            # the objects beside the store stay its own: the next job may replace them
            previous = _read_remote_metadata(location, "zarr.json", storage_options) or {}
            side_files: Any = sorted(
                r
                for r in _strings((previous.get("attributes") or {}).get(SIDE_FILES_ATTR))
                if r.startswith("../") and "/" not in r[3:] and r not in ("../.", "../..")
            )
            _clear_remote(location, storage_options)
        else:
            path = location
            store.clear_scratch()  # first: a scratch path that is not ours refuses the store
            # the files beside the store stay its own: the next job may replace them
            side_files = side_file_record(path, recorded_side_files(path))
            if path.exists():
                _clear_keeping_lease(path)
            path.mkdir(parents=True, exist_ok=True)
        try:
            group = zarr.open_group(str(location), mode="a", zarr_format=3, **store._zarr)
            group.attrs.update(
                _jsonable(
                    {
                        "format": STORE_FORMAT,
                        "Conventions": CONVENTIONS,
                        "title": f"dkernel results: {job.get('name') or 'job'}",
                        "status": "running",
                        "created": _now(),
                        "job": dict(job),
                        "seed": seed,
                        "versions": package_versions(),
                        "git_revision": git_revision(),
                        "timings": {},
                        "groups": [],
                        SIDE_FILES_ATTR: side_files,
                    }
                )
            )
        except BaseException:
            # a half-written root (disk full) would read as a foreign directory afterwards
            with contextlib.suppress(OSError):
                if isinstance(location, str):
                    _clear_remote(location, storage_options)
                else:
                    _clear_keeping_lease(location)
            raise
        return store

    def _root(self, mode: Literal["r", "r+"] = "r+") -> zarr.Group:
        # the writer reads the groups' own metadata, never the consolidated snapshot
        return zarr.open_group(
            str(self.path), mode=mode, zarr_format=3, use_consolidated=False, **self._zarr
        )

    @property
    def attrs(self) -> dict[str, Any]:
        return dict(self._root("r").attrs)

    def update_attrs(self, **attrs: Any) -> None:
        """Merge JSON-serialisable attributes into the root."""
        self._root().attrs.update(_jsonable(attrs))

    def update_group_attrs(self, group: str, **attrs: Any) -> None:
        """Merge JSON-serialisable attributes into a written group's attributes."""
        zarr.open_group(
            str(self.path),
            path=group,
            mode="r+",
            zarr_format=3,
            use_consolidated=False,
            **self._zarr,
        ).attrs.update(_jsonable(attrs))

    def record_timing(self, phase: str, seconds: float) -> None:
        """Add one phase's wall time (seconds) to ``timings``."""
        root = self._root()
        timings = dict(_attrs(root).get("timings", {}))
        timings[phase] = round(float(seconds), 4)
        root.attrs["timings"] = timings

    def mark_complete(self) -> None:
        """Set ``status: complete``; refuses while any registered group is unfinished.

        Raises
        ------
        StoreError
            Naming the groups that are missing or whose write did not finish.
        """
        root = self._root()
        groups = _attrs(root).get("groups", [])
        unfinished = [g for g in groups if not self.group_complete(g, root)]
        if unfinished:
            raise StoreError(
                f"cannot mark {self.path} complete: groups {unfinished} are missing or "
                "their write did not finish."
            )
        written = manifest_of(self.path, self.storage_options)  # what a reader checks
        root.attrs.update({"status": "complete", "finished": _now(), MANIFEST_ATTR: written})
        _consolidate(self.path, self.storage_options)
        self.clear_scratch(strict=False)

    # -- scratch arrays -----------------------------------------------------------------
    @property
    def scratch_dir(self) -> Any:
        """Beside the store: a running job's intermediate per-pixel arrays (removed by
        :meth:`mark_complete`, :meth:`mark_failed` and the next :meth:`create` of the store).

        Made with a marker file and never followed through a link nor emptied unless it is
        this store's (:mod:`dkernel.storage.side_files`). On an object store, a URL beside
        the store's prefix."""
        if self.remote:
            parent, _, name = self.path.rpartition("/")
            return f"{parent}/.{name}.scratch"
        return self.path.parent / f".{self.path.name}.scratch"

    def write_scratch(self, name: str, array: Any) -> list:
        """Delayed writes of a 1-D Dask array to the scratch array ``name``, one per chunk,
        each giving the number of values it wrote; replaces an older array.

        Each chunk is one row of a 2-D Zarr array of one chunk per row, so every task writes
        its own Zarr chunk with nothing rechunked or waiting for a neighbour, and
        :meth:`read_scratch` gives the chunks back as they were. Compute the writes with
        :func:`dkernel.runtime.compute_parts`, so that each finished write is released at
        once.
        """
        import dask

        counts = [int(c) for c in array.chunks[0]]
        width = max([1, *counts])
        if self.remote:
            path = f"{self.scratch_dir}/{name}.zarr"
        else:
            path = str(scratch_entry(self.scratch_dir, self.path.name, f"{name}.zarr"))
        zarr.create_array(
            path,
            shape=(len(counts), width),
            chunks=(1, width),
            dtype=array.dtype,
            overwrite=True,
            attributes={"counts": counts},
            **self._zarr,
        )
        write = dask.delayed(_write_scratch_row, pure=True)
        kw = self._zarr
        return [write(path, i, block, kw) for i, block in enumerate(array.to_delayed().ravel())]

    def read_scratch(self, name: str, *, after: Any = None) -> Any:
        """The scratch array ``name`` as a lazy 1-D Dask array, chunked as it was written.

        ``after``: a Dask array with one block per chunk, in order. Each chunk is then read
        by a task that waits for ``after``'s block and so runs where that block is. Without
        it every read is a task with no inputs, which the scheduler may run far ahead of the
        work that pairs it with ``after``'s block, holding both meanwhile (MSSC reads each
        strip's partitions after the strip's valid mask).
        """
        import dask
        import dask.array as da

        path = f"{self.scratch_dir}/{name}.zarr"
        stored = zarr.open_array(path, mode="r", **self._zarr)
        counts = [int(c) for c in _attrs(stored)["counts"]]
        blocks = [None] * len(counts) if after is None else list(after.to_delayed().ravel())
        if len(blocks) != len(counts):
            raise ValueError(
                f"after has {len(blocks)} blocks for the {len(counts)} chunks of the scratch "
                f"array {name!r}; they must pair one to one."
            )
        read = dask.delayed(_read_scratch_row, pure=True)
        parts = [
            da.from_delayed(read(path, i, n, block, self._zarr), (n,), stored.dtype)
            for i, (n, block) in enumerate(zip(counts, blocks, strict=True))
        ]
        return da.concatenate(parts) if parts else da.zeros((0,), dtype=stored.dtype)

    def clear_scratch(self, *, strict: bool = True) -> None:
        """Remove the scratch arrays.

        A scratch path this store did not make (a link, a file, a folder without its marker)
        is left alone: :class:`~dkernel.errors.StoreError` naming it, or a logged warning when ``strict`` is
        False.
        """
        if self.remote:
            fs, key = remote.filesystem(self.scratch_dir, self.storage_options)
            try:
                if fs.exists(key):
                    fs.rm(key, recursive=True)
            except Exception as exc:  # noqa: BLE001
                if strict:
                    raise StoreError(
                        f"cannot remove the scratch arrays {self.scratch_dir}: "
                        f"{remote.describe_error(exc)}."
                    ) from None
                logger.warning(f"could not remove the scratch arrays {self.scratch_dir}")
            return
        remove_scratch_dir(self.scratch_dir, self.path.name, strict=strict)

    def group_complete(self, group: str, root: zarr.Group | None = None) -> bool:
        """Whether ``/group`` exists and every array of its last write finished."""
        root = self._root("r") if root is None else root
        if group not in root:
            return False
        return root[group].attrs.get(GROUP_MARKER) == "complete"

    def mark_failed(
        self, error: BaseException, *, cause: str | None = None, with_traceback: bool = True
    ) -> None:
        """Set ``status: failed`` with a one-line cause and the error's traceback.

        Parameters
        ----------
        error : BaseException
            What made the job fail.
        cause : str, optional
            The ``error`` attribute (one line); by default the error's type and message
            (``failure_cause``).
        with_traceback : bool
            Also record the traceback (``traceback``); False writes the smallest update (a
            retry when the disk is full).
        """
        attrs = {
            "status": "failed",
            "finished": _now(),
            "error": one_line(relative_paths(cause or failure_cause(error)), 2000),
        }
        if with_traceback:
            tb = relative_paths(
                "".join(traceback.format_exception(type(error), error, error.__traceback__))
            )
            attrs["traceback"] = tb[-8000:]
        # first: it may free the space the status write needs
        self.clear_scratch(strict=False)
        self._root().attrs.update(attrs)

    # -- writing -------------------------------------------------------------------------
    def write(self, group: str, dataset: xr.Dataset, *, compute: bool = True) -> Any:
        """Write one stage's dataset to ``/group`` (replacing it).

        Dask-backed variables are written chunk by chunk by whatever scheduler is active
        (the job's distributed client); their chunks are first made regular so that every
        Dask block maps onto exactly one Zarr chunk (no two tasks ever write one chunk). With
        ``compute=False`` the delayed write is returned so the caller can show progress while
        it runs. The group is marked written (attribute ``dkernel_write``) only after its
        last chunk lands; :meth:`mark_complete` refuses a store with an unfinished group.

        In a resumed store (:meth:`resume`), a group already written is not written again
        (a no-op is returned), and a group whose write was interrupted keeps the chunks that
        reached disk and writes only the missing ones.

        Notes
        -----
        Memory: one chunk per running task. Writes are atomic per chunk (the Zarr local store
        writes a temporary file and renames it).
        """
        if not group or "/" in group.strip("/") or group.startswith("."):
            raise StoreError(f"invalid group name {group!r}: use a single word such as 'kernel'.")
        dataset = _variable_length_strings(_regular_chunks(dataset.copy()))
        dataset = describe_variables(group, dataset)
        dataset.attrs = _jsonable(dict(dataset.attrs))
        if self.resuming:
            resumed = self._resume_write(group, dataset, compute=compute)
            if resumed is not _NOT_RESUMABLE:
                return resumed
        self._register_group(group)
        dataset.attrs[GROUP_MARKER] = "writing"
        options: dict[str, Any] = {
            "group": group,
            "mode": "w",
            "zarr_format": 3,
            "consolidated": False,
            "encoding": _encoding(group, dataset),
            **self._zarr,
        }
        if compute and active_client() is None:
            # on dask's local scheduler: written now. Handed to ``dask.delayed`` (below), the
            # write gets keys of its own, which a distributed scheduler needs (another client
            # releasing the same keys of the same data cancelled it: "lost dependencies"), but
            # dask imports distributed to make them, 0.1-0.2 s, in a process without it
            dataset.to_zarr(str(self.path), compute=True, **options)
            _mark_group(str(self.path), group, None, self._zarr)
            return None
        written = dataset.to_zarr(str(self.path), compute=False, **options)
        finish = _finish_group_delayed(written, str(self.path), group, self._zarr)
        if compute:
            finish.compute()
            return None
        return finish

    # -- resuming ------------------------------------------------------------------------
    resuming: bool = False

    @classmethod
    def resume(
        cls,
        path: str | Path,
        *,
        job: Mapping[str, Any],
        seed: int | None,
        storage_options: Mapping[str, Any] | None = None,
    ) -> ResultsStore:
        """Reopen an unfinished store of the same job to continue it.

        Groups whose write finished are kept (and skipped by :meth:`write`); interrupted
        groups keep their finished chunks. The spec and seed must equal the stored ones.

        Raises
        ------
        StoreError
            When ``path`` holds no dkernel store, a complete one, or one written by a
            different spec or seed (then start over with ``--overwrite``).
        """
        store = cls(path, storage_options)
        check_resumable(store.path, job=job, seed=seed, storage_options=storage_options)
        root = zarr.open_group(str(store.path), mode="r+", zarr_format=3, **store._zarr)
        if not store.remote:  # an object store's puts are atomic: no partial objects
            for partial in Path(store.path).rglob("*.partial"):  # temporary chunk files
                partial.unlink(missing_ok=True)
        resumes = int(_attrs(root).get("resumes", 0)) + 1
        root.attrs.update({"status": "running", "resumes": resumes, "resumed": _now()})
        for key in ("error", "traceback", "finished"):
            if key in root.attrs:
                del root.attrs[key]
        store.resuming = True
        return store

    def _resume_write(self, group: str, dataset: xr.Dataset, *, compute: bool) -> Any:
        """Skip a finished group, or write only the missing chunks of an interrupted one."""
        root = self._root("r")
        if group not in root:
            return _NOT_RESUMABLE
        node = root[group]
        if not isinstance(node, zarr.Group) or not _same_layout(node, dataset):
            return _NOT_RESUMABLE
        if node.attrs.get(GROUP_MARKER) == "complete":
            return None if compute else _noop_delayed()
        # interrupted: in-memory variables are rewritten (cheap); Dask ones chunk by chunk
        tasks = []
        for name, var in dataset.variables.items():
            target = f"{group}/{name}"
            if is_dask_array(var.data):
                tasks.extend(_missing_chunk_writes(var.data, str(self.path), target, self._zarr))
            else:
                arr = zarr.open_array(
                    str(self.path), path=target, mode="r+", zarr_format=3, **self._zarr
                )
                arr[...] = np.asarray(var.values)
        import dask

        finish = dask.delayed(_mark_group, pure=False)(str(self.path), group, tasks, self._zarr)
        if compute:
            finish.compute()
            return None
        return finish

    def read_array(self, group: str, name: str) -> Any:
        """A stored array as a lazy Dask array (computed by whatever scheduler is active), its
        values as stored (integer label maps keep their -1 fill value)."""
        ds = xr.open_zarr(
            str(self.path),
            group=group,
            consolidated=False,
            zarr_format=3,
            mask_and_scale=False,
            **self._zarr,
        )
        if name not in ds:
            raise StoreError(f"{self.path}: group {group!r} has no array {name!r}.")
        return ds[name].data

    def _register_group(self, group: str) -> None:
        root = self._root()
        groups = list(_attrs(root).get("groups", []))
        if group not in groups:
            groups.append(group)
            root.attrs["groups"] = groups


GROUP_MARKER = "dkernel_write"
_NOT_RESUMABLE = object()


def _consolidate(path: Path | str, storage_options: Mapping[str, Any] | None = None) -> None:
    """Write the consolidated metadata (a snapshot of every group's metadata in the root).

    Done once, when the store is complete: the snapshot then holds every group's completion
    marker, and nothing writes a complete store again (``--overwrite`` empties it first, so
    no stale snapshot survives). Writers read the groups' own metadata (``_root``).
    """
    with warnings.catch_warnings():
        # zarr: consolidated metadata is not (yet) part of the Zarr v3 specification; xarray,
        # zarr-python and the Pangeo readers support it, which is what users open stores with
        warnings.simplefilter("ignore", UserWarning)
        target: Any = str(path)
        if isinstance(path, str):  # consolidate_metadata takes no storage_options: a store
            # a file system of its own, without cached listings: the Dask workers wrote the
            # arrays, and a listing this process cached before (adlfs keeps one per folder)
            # would leave them out of the snapshot
            options = remote.storage_options(path, storage_options)
            options.update(skip_instance_cache=True, use_listings_cache=False)
            target = zarr.storage.FsspecStore.from_url(path, storage_options=options)
        zarr.consolidate_metadata(target, zarr_format=3)


def _regular_chunks(dataset: xr.Dataset) -> xr.Dataset:
    """Rechunk Dask variables so every block but the last along each axis has one size.

    Zarr chunks are regular; a regular Dask chunking is then written block ↔ chunk, one
    writer per chunk.
    """
    for name, var in dataset.variables.items():
        if not is_dask_array(var.data) or var.ndim == 0:
            continue
        chunks = var.data.chunks
        regular = all(len(set(c[:-1])) <= 1 and c[-1] <= c[0] for c in chunks)
        if not regular:
            target = tuple(max(c) for c in chunks)
            dataset[name] = var.copy(data=var.data.rechunk(target))
        for key in ("chunks", "preferred_chunks"):
            dataset[name].encoding.pop(key, None)
    return dataset


def _finish_group_delayed(write: Any, path: str, group: str, kw: dict[str, Any]) -> Any:
    import dask

    return dask.delayed(_mark_group, pure=False)(path, group, write, kw)


def _mark_group(path: str, group: str, _done: Any, kw: dict[str, Any] | None = None) -> None:
    """Runs after the group's last chunk is written (a dependency of the write)."""
    node = zarr.open_group(path, path=group, mode="r+", zarr_format=3, **(kw or {}))
    node.attrs[GROUP_MARKER] = "complete"


def _zarr_kwargs(path: Any, storage_options: Mapping[str, Any]) -> dict[str, Any]:
    """``storage_options=`` for Zarr and xarray when ``path`` is a URL and options were given,
    or it is an HTTP(S) URL (:func:`dkernel.storage.remote.bounded_http_client`); the
    backend reads the environment otherwise."""
    if not isinstance(path, str):
        return {}
    options = remote.storage_options(path, storage_options)  # HTTP: bounded responses
    return {"storage_options": options} if options else {}


def _attrs(node: zarr.Group | zarr.Array) -> dict[str, Any]:
    """A node's attributes (a copy); their values are dkernel's JSON layout, not typed by zarr."""
    return node.attrs.asdict()


def _noop_delayed() -> Any:
    import dask

    return dask.delayed(lambda: None)()


def _same_layout(node: zarr.Group, dataset: xr.Dataset) -> bool:
    with warnings.catch_warnings():
        # an array whose metadata a killed or disk-full write never wrote is not listed (and
        # zarr warns): the layout then differs and the group is written again
        warnings.simplefilter("ignore", UserWarning)
        arrays = dict(node.arrays())
    if set(arrays) != set(dataset.variables):
        return False
    for name, var in dataset.variables.items():
        arr = arrays[str(name)]  # a key of arrays (the name sets are equal), so a str
        if tuple(arr.shape) != tuple(var.shape):
            return False
        if (
            is_dask_array(var.data)
            and var.ndim
            and tuple(arr.chunks) != tuple(c[0] for c in var.data.chunks)
        ):
            return False
    return True


def _missing_chunk_writes(
    x: Any, path: str, target: str, kw: dict[str, Any] | None = None
) -> list[Any]:
    """One delayed write per block of ``x`` whose Zarr chunk is not on disk yet."""
    import dask

    kw = kw or {}
    arr = zarr.open_array(path, path=target, mode="r", zarr_format=3, **kw)
    prefix = f"{target}/" if target else ""
    present = {k[len(prefix) :] for k in _list_keys(arr) if k.startswith(prefix)}
    tasks = []
    starts = [np.cumsum((0, *c[:-1])) for c in x.chunks]
    for idx in np.ndindex(*x.numblocks):
        key = "c/" + "/".join(str(i) for i in idx)
        if key in present:
            continue
        region = tuple(
            slice(int(st[i]), int(st[i]) + c[i])
            for st, c, i in zip(starts, x.chunks, idx, strict=True)
        )
        tasks.append(dask.delayed(_put_block, pure=False)(x.blocks[idx], path, target, region, kw))
    return tasks


def _list_keys(arr: zarr.Array) -> list[str]:
    from zarr.core.sync import sync  # zarr's own event loop: safe inside Jupyter too

    async def collect() -> list[str]:
        return [k async for k in arr.store.list_prefix(arr.path + "/c/")]

    return sync(collect())


def _put_block(
    block: Any, path: str, target: str, region: tuple[slice, ...], kw: dict[str, Any] | None = None
) -> None:
    arr = zarr.open_array(path, path=target, mode="r+", zarr_format=3, **(kw or {}))
    arr[region] = block


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


def _strings(value: Any) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


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


def _remote_call(url: str, what: str, func: Any) -> Any:
    """``func()`` talking to the object store of ``url``; its failures as one-line
    :class:`StoreError` naming the URL (never the options)."""
    try:
        return func()
    except (StoreError, FileNotFoundError):
        raise
    except Exception as exc:  # noqa: BLE001  (botocore, aiohttp: one line)
        raise StoreError(f"cannot {what} {url}: {remote.describe_error(exc)}.") from None


def _read_remote_metadata(
    url: str, rel: str, storage_options: Mapping[str, Any] | None
) -> dict[str, Any] | None:
    """One ``zarr.json`` of the store at ``url`` (``rel`` below it), at most
    :data:`MAX_METADATA_BYTES`; None when there is none. Checked as :func:`_read_metadata`."""
    fs, root = remote.filesystem(url, storage_options)
    key = f"{root}/{rel}"
    shown = f"{url}/{rel}"
    try:
        data = _remote_call(
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


def _check_remote_target(
    url: str, overwrite: bool, storage_options: Mapping[str, Any] | None
) -> str | None:
    """:func:`check_target` for a store on an object store."""
    meta = _read_remote_metadata(url, "zarr.json", storage_options)
    status = _status_of(meta)
    if meta is None or status is None:
        fs, root = remote.filesystem(url, storage_options)
        try:
            names = _remote_call(url, "list", lambda: fs.ls(root, detail=False))
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


def _clear_remote(url: str, storage_options: Mapping[str, Any] | None) -> None:
    """Empty a store on an object store but keep the writer's lease object."""
    fs, root = remote.filesystem(url, storage_options)
    try:
        keys = _remote_call(url, "list", lambda: fs.find(root))
    except FileNotFoundError:
        return
    doomed = [k for k in keys if not is_lease_file(k.rsplit("/", 1)[-1])]
    if doomed:
        _remote_call(url, "clear", lambda: fs.rm(doomed))


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
        entries = _remote_call(url, "list", lambda node=node: fs.ls(node, detail=True))
        for entry in entries:
            name = entry["name"].rstrip("/").rsplit("/", 1)[-1]
            if entry.get("type") == "directory" and not name.startswith("."):
                todo.append(f"{rel}/{name}" if rel else name)


def one_line(text: str, limit: int = 500) -> str:
    """``text`` on one line (runs of white space as one space), cut to ``limit`` characters."""
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def failure_cause(error: BaseException) -> str:
    """``Type: message`` of ``error``, on one line (a store's ``error`` attribute)."""
    message = one_line(str(error))
    return f"{type(error).__name__}: {message}" if message else type(error).__name__


#: Groups of dense floating-point matrices stored without compression: their values hardly
#: compress, compressing costs as much as computing a block, and matrix-free solvers re-read them.
UNCOMPRESSED_GROUPS = ("kernel",)


def _encoding(group: str, dataset: xr.Dataset) -> dict[Hashable, dict[str, Any]] | None:
    if group not in UNCOMPRESSED_GROUPS:
        return None
    return {
        name: {"compressors": None}
        for name, var in dataset.data_vars.items()
        if var.dtype.kind == "f" and "compressors" not in var.encoding
    }


def _variable_length_strings(dataset: xr.Dataset) -> xr.Dataset:
    """Fixed-width NumPy strings (``<U``) as variable-length ones.

    Zarr v3 has a stable specification only for variable-length UTF-8 strings; fixed-width
    ones raise ``UnstableSpecificationWarning`` and may not be readable elsewhere.
    """
    fixed = [
        name
        for name, var in dataset.variables.items()
        if var.dtype.kind == "U" and not hasattr(var.data, "dask")
    ]
    if not fixed:
        return dataset
    return dataset.assign_coords(
        {n: dataset[n].astype(object) for n in fixed if n in dataset.coords}
    ).assign({n: dataset[n].astype(object) for n in fixed if n in dataset.data_vars})


def relative_paths(text: str) -> str:
    """``text`` (a traceback) with install and home paths shortened: the dkernel checkout,
    the Python installation and site-packages, the working directory and the home
    directory become relative (``dkernel/…``, ``<python>/…``, ``./…``, ``~/…``)."""
    import site
    import sys
    import sysconfig

    prefixes: list[tuple[str, str]] = []
    package_parent = str(Path(__file__).resolve().parents[2])
    prefixes.append((package_parent + os.sep, ""))
    for key in ("purelib", "platlib", "stdlib", "platstdlib"):
        with contextlib.suppress(KeyError):
            prefixes.append((sysconfig.get_paths()[key] + os.sep, "<python>/"))
    with contextlib.suppress(AttributeError):
        for sp in site.getsitepackages():
            prefixes.append((sp + os.sep, "<python>/"))
    for pre in {sys.prefix, sys.base_prefix, sys.exec_prefix}:
        prefixes.append((pre + os.sep, "<python>/"))
    with contextlib.suppress(OSError):
        prefixes.append((os.getcwd() + os.sep, "./"))
    prefixes.append((os.path.expanduser("~") + os.sep, "~/"))
    # longest first, so site-packages wins over the prefix that contains it
    for pre, repl in sorted(set(prefixes), key=lambda p: -len(p[0])):
        if len(pre) > 1:
            text = text.replace(pre, repl)
    return text


def _clear_keeping_lease(path: Path) -> None:
    """Empty a store directory but keep the writer's lease file."""
    for child in path.iterdir():
        if child.name == LEASE_FILE:
            continue
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()


def _existing_status(path: Path) -> str | None:
    """The status of the dkernel store at ``path``: None when there is none (no root
    metadata, or a foreign one); a status that is not text, or missing, as ``<dict>`` or
    ``<missing>``; raises :class:`StoreError` when the root metadata is damaged."""
    return _status_of(_read_metadata(path, path / "zarr.json"))


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
        sizes = _remote_call(url, "list", lambda: fs.find(f"{root}/{array}/c", detail=True))
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
    info: dict[str, Any] = {"path": str(path), "attrs": attrs, "arrays": arrays}
    if "model_order" in tree.children:
        info["model_order"] = _model_order_summary(tree["model_order"].to_dataset(), fits)
    return info


#: Most candidates of ``/model_order`` whose scores :func:`describe_store` reads.
SHOW_CANDIDATES_MAX = 200


def _model_order_summary(ds: xr.Dataset, fits: Callable[[str, str, int], bool]) -> dict:
    """The ``/model_order`` evidence for ``dkernel show``: the rule, the chosen k, and every
    candidate with its score (None where the arrays are missing, too long or damaged)."""
    out: dict[str, Any] = {
        key: ds.attrs.get(key) for key in ("rule", "n_clusters_chosen", "higher_is_better")
    }
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


def _write_scratch_row(
    path: str, row: int, values: np.ndarray, kw: dict[str, Any] | None = None
) -> int:
    """Row ``row`` of a 2-D scratch array (its own Zarr chunk) begins with ``values``."""
    if values.size:
        zarr.open_array(path, mode="r+", **(kw or {}))[row, : values.size] = values
    return int(values.size)


def _read_scratch_row(
    path: str, row: int, count: int, after: Any, kw: dict[str, Any] | None = None
) -> np.ndarray:
    """The ``count`` values of row ``row`` of a scratch array (``after`` only orders the
    read)."""
    return np.asarray(zarr.open_array(path, mode="r", **(kw or {}))[row, :count])
