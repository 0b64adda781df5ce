"""The results store: one Zarr v3 store per job, one group per stage, written via xarray.

Layout: root attributes hold the provenance (``job`` spec, ``versions``,
``git_revision``, ``seed``, ``timings``, ``status``); groups such as ``/input``, ``/kernel``,
``/embedding``, ``/labels``, ``/metrics``, ``/gmm``, ``/features``, ``/ranking``, ``/mssc``
hold the arrays, each built by its builder in :mod:`dkernel.storage.layout`. ``status`` goes
``running`` → ``complete`` (written last, only after every array is written) or ``failed``
(with the error). This module writes stores; :mod:`dkernel.storage.reader` opens them,
:mod:`dkernel.storage.targets` checks a target before a job starts and
:mod:`dkernel.storage.metadata` reads their metadata safely. The names of those modules are
importable from here as well.

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
import logging
import os
import traceback
import warnings
from collections.abc import Callable, Hashable, Mapping
from functools import partial
from pathlib import Path
from typing import Any, Literal

import numpy as np
import xarray as xr
import zarr

from dkernel._validation import is_dask_array
from dkernel.errors import StoreError
from dkernel.runtime.progress import active_client
from dkernel.storage import remote
from dkernel.storage.attributes import describe_variables
from dkernel.storage.checkpoint import StoreCheckpoint, remove_checkpoints
from dkernel.storage.geo import CONVENTIONS
from dkernel.storage.local_target import _clear_keeping_lease  # noqa: F401  (where it was)
from dkernel.storage.manifest import MANIFEST_ATTR, manifest_of
from dkernel.storage.metadata import (  # noqa: F401  (where they were)
    GROUP_MARKER,
    MAX_METADATA_BYTES,
    STATUSES,
    STORE_FORMAT,
    _read_remote_metadata,
    _zarr_kwargs,
    check_metadata,
)
from dkernel.storage.paths import check_writable  # noqa: F401  (where it was)
from dkernel.storage.provenance import (  # noqa: F401  (where they were)
    _jsonable,
    _now,
    failure_cause,
    git_revision,
    one_line,
    package_versions,
    relative_paths,
)
from dkernel.storage.reader import (  # noqa: F401  (where they were)
    SHOW_CANDIDATES_MAX,
    SHOW_CHUNK_SLACK,
    SHOW_VALUES_MAX,
    describe_store,
    open_results,
    recorded_path,
)
from dkernel.storage.remote import as_location
from dkernel.storage.remote_target import _clear_remote, _strings  # noqa: F401  (where they were)
from dkernel.storage.side_files import (
    SIDE_FILES_ATTR,
    remove_scratch_dir,
    scratch_entry,
)
from dkernel.storage.targets import (  # noqa: F401  (where they were)
    check_resumable,
    check_target,
    store_target,
)

logger = logging.getLogger(__name__)


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
        target = store_target(path, storage_options)
        # under the job's lease, once more: what was put there since the lease stage's check
        # (while the cluster started) is refused, not emptied
        target.check(overwrite=overwrite)
        side_files = target.empty()
        store = cls(target.path, storage_options)
        try:
            group = zarr.open_group(str(target.path), mode="a", zarr_format=3, **store._zarr)
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
                target.clear()
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
        remove_checkpoints(self.path, self.storage_options)  # no training left to resume
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

        from dkernel.rows import joint_blocks

        path = f"{self.scratch_dir}/{name}.zarr"
        stored = zarr.open_array(path, mode="r", **self._zarr)
        counts = [int(c) for c in _attrs(stored)["counts"]]
        # unoptimised, so that after's chunks stay the tasks its other uses follow
        blocks = [None] * len(counts) if after is None else list(joint_blocks(after)[0].ravel())
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

    def checkpoint(self, name: str) -> StoreCheckpoint:
        """The training checkpoint ``name`` kept in this store (a deep model's ``checkpoint``):
        it outlives a killed or failed job, so that :meth:`resume` continues the training."""
        return StoreCheckpoint(self.path, name, self.storage_options)

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
        ``compute=False`` the delayed write is returned (one ``Delayed`` over every chunk's
        write); :meth:`write_parts` gives the chunks' writes one by one instead. The group is
        marked written (attribute ``dkernel_write``) only after its last chunk lands;
        :meth:`mark_complete` refuses a store with an unfinished group.

        In a resumed store (:meth:`resume`), a group already written is not written again
        (a no-op is returned), and a group whose write was interrupted keeps the chunks that
        reached disk and writes only the missing ones.

        Notes
        -----
        Memory: one chunk per running task. Writes are atomic per chunk (the Zarr local store
        writes a temporary file and renames it).
        """
        if compute and active_client() is None and not self.resuming:
            # on dask's local scheduler: written now. Handed to ``dask.delayed`` (below), the
            # write gets keys of its own, which a distributed scheduler needs (another client
            # releasing the same keys of the same data cancelled it: "lost dependencies"), but
            # dask imports distributed to make them, 0.1-0.2 s, in a process without it
            prepared, options = self._begin_write(group, dataset)
            prepared.to_zarr(str(self.path), compute=True, **options)
            _mark_group(str(self.path), group, None, self._zarr)
            return None
        import dask

        parts, finish = self.write_parts(group, dataset)
        done = dask.delayed(_finish_parts, pure=False)(parts, finish)
        if compute:
            done.compute()
            return None
        return done

    def write_parts(self, group: str, dataset: xr.Dataset) -> tuple[list[Any], Callable[[], None]]:
        """``/group`` made, its in-memory variables written, and ``(parts, finish)``: one
        ``Delayed`` write per chunk of its Dask variables, and the call that marks the group
        written, to make once every part is computed.

        Computed with :func:`dkernel.runtime.compute_parts` (one future per chunk, released
        as soon as it is written), a worker forgets each written chunk and the tasks behind
        it at once: computed as one future, the records of every task of the pass stayed on
        the workers until the last chunk, and a worker writing a 10⁸-row embedding grew by
        about 200 KiB per chunk (0.8 GiB). A resumed store's finished group gives no parts,
        an interrupted one the parts of its missing chunks (see :meth:`write`).
        """
        if self.resuming:
            resumed = self._resume_parts(group, dataset)
            if resumed is not _NOT_RESUMABLE:
                return resumed
        prepared, options = self._begin_write(group, dataset)
        # the arrays and the in-memory variables; the Dask variables' own write is not used
        prepared.to_zarr(str(self.path), compute=False, **options)
        parts = self._chunk_writes(group, prepared, missing_only=False)
        return parts, partial(_mark_group, str(self.path), group, None, self._zarr)

    def _chunk_writes(self, group: str, dataset: xr.Dataset, *, missing_only: bool) -> list:
        """One ``Delayed`` write per chunk of the Dask variables of ``dataset`` (with
        ``missing_only``: of the chunks not yet stored)."""
        lazy = {
            name: var.data
            for name, var in dataset.variables.items()
            if is_dask_array(var.data) and var.ndim
        }
        if not lazy:
            return []
        import dask

        # optimised together, so that the tasks variables share (a valid mask) keep one name
        # in every part
        arrays = dask.optimize(*lazy.values())
        parts = []
        for name, data in zip(lazy, arrays, strict=True):
            target = f"{group}/{name}"
            parts.extend(
                _block_writes(data, str(self.path), target, self._zarr, missing_only=missing_only)
            )
        return parts

    def _begin_write(self, group: str, dataset: xr.Dataset) -> tuple[xr.Dataset, dict[str, Any]]:
        """The dataset as it is stored, the group registered as being written, and the
        ``to_zarr`` options."""
        if not group or "/" in group.strip("/") or group.startswith("."):
            raise StoreError(f"invalid group name {group!r}: use a single word such as 'kernel'.")
        dataset = _stored_form(group, dataset)
        dataset.attrs = _jsonable(dict(dataset.attrs))
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
        return dataset, options

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
        store_target(store.path, storage_options).check_resumable(job=job, seed=seed)
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

    def _resume_parts(self, group: str, dataset: xr.Dataset) -> Any:
        """A finished group: no parts; an interrupted one: the writes of its missing chunks
        (its in-memory variables written again now, they are cheap); another layout:
        ``_NOT_RESUMABLE`` (written anew)."""
        dataset = _stored_form(group, dataset)
        root = self._root("r")
        if group not in root:
            return _NOT_RESUMABLE
        node = root[group]
        if not isinstance(node, zarr.Group) or not _same_layout(node, dataset):
            return _NOT_RESUMABLE
        path, kw = str(self.path), self._zarr
        if node.attrs.get(GROUP_MARKER) == "complete":
            return [], _nothing
        for name, var in dataset.variables.items():
            if not is_dask_array(var.data) or not var.ndim:
                arr = zarr.open_array(path, path=f"{group}/{name}", mode="r+", zarr_format=3, **kw)
                arr[...] = np.asarray(var.values)
        tasks = self._chunk_writes(group, dataset, missing_only=True)
        return tasks, partial(_mark_group, path, group, None, kw)

    def read_array(self, group: str, name: str) -> Any:
        """A stored array as a lazy Dask array (computed by whatever scheduler is active), its
        values as stored (integer label maps keep their -1 fill value)."""
        zarr_kwargs = self._zarr
        if self.remote:  # the group may have been written by the workers just now
            options = remote.uncached_storage_options(self.path, self.storage_options)
            zarr_kwargs = {"storage_options": options}
        ds = xr.open_zarr(
            str(self.path),
            group=group,
            consolidated=False,
            zarr_format=3,
            mask_and_scale=False,
            **zarr_kwargs,
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


def _stored_form(group: str, dataset: xr.Dataset) -> xr.Dataset:
    """``dataset`` as ``/group`` stores it: regular chunks, variable-length strings, the
    variables described."""
    return describe_variables(group, _variable_length_strings(_regular_chunks(dataset.copy())))


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
            options = remote.uncached_storage_options(path, storage_options)
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


def _finish_parts(_parts: Any, finish: Callable[[], None]) -> None:
    """After every part (its dependencies): mark the group written."""
    finish()


def _nothing() -> None:
    return None


def _mark_group(path: str, group: str, _done: Any, kw: dict[str, Any] | None = None) -> None:
    """Runs after the group's last chunk is written (a dependency of the write)."""
    node = zarr.open_group(path, path=group, mode="r+", zarr_format=3, **(kw or {}))
    node.attrs[GROUP_MARKER] = "complete"


def _attrs(node: zarr.Group | zarr.Array) -> dict[str, Any]:
    """A node's attributes (a copy); their values are dkernel's JSON layout, not typed by zarr."""
    return node.attrs.asdict()


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


def _block_writes(
    x: Any, path: str, target: str, kw: dict[str, Any] | None = None, *, missing_only: bool = False
) -> list[Any]:
    """One delayed write per block of ``x`` into the array ``target`` (its Zarr chunk);
    ``missing_only``: only of the blocks whose chunk is not in the store yet."""
    import dask

    kw = kw or {}
    present: set[str] = set()
    if missing_only:
        arr = zarr.open_array(path, path=target, mode="r", zarr_format=3, **kw)
        prefix = f"{target}/" if target else ""
        present = {k[len(prefix) :] for k in _list_keys(arr) if k.startswith(prefix)}
    blocks = x.to_delayed(optimize_graph=False)  # optimised by the caller, with its siblings
    starts = [np.cumsum((0, *c[:-1])) for c in x.chunks]
    put = dask.delayed(_put_block, pure=False)
    tasks = []
    for idx in np.ndindex(*x.numblocks):
        if missing_only and "c/" + "/".join(str(i) for i in idx) in present:
            continue
        region = tuple(
            slice(int(st[i]), int(st[i]) + c[i])
            for st, c, i in zip(starts, x.chunks, idx, strict=True)
        )
        tasks.append(put(blocks[idx], path, target, region, kw))
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
