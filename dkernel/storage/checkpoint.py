"""A training checkpoint kept in the job's results store, so that ``dkernel run --resume``
continues a killed training where it stopped, wherever the store lives (a local disk or an
object store).

The deep models save their state after every epoch (``checkpoint=`` of
:class:`~dkernel.DeepKernelizedAutoencoder` and :class:`~dkernel.DeepDivergenceClustering`);
their job steps hand them a :class:`StoreCheckpoint`. It lives in the group ``/checkpoint``,
one uint8 array per save (the bytes the model wrote), and the group's attribute ``latest``
names the array that holds the last save of each checkpoint. A save writes a new array and
only then points ``latest`` at it (each a single atomic object write, :mod:`zarr.storage`'s
local store renaming a temporary file), so a kill at any moment leaves the previous save
readable. The group is not one of the store's registered groups: a killed or failed job
leaves it for ``--resume``, and :meth:`ResultsStore.mark_complete
<dkernel.ResultsStore.mark_complete>` removes it (:func:`remove_checkpoints`), so a finished
store holds the same arrays as one whose training never stopped.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import zarr

from dkernel.storage import remote
from dkernel.storage.metadata import _zarr_kwargs

#: The store's group of checkpoints.
CHECKPOINT_GROUP = "checkpoint"


class StoreCheckpoint:
    """The checkpoint ``name`` in the results store at ``path`` (a directory or an
    object-store URL opened with ``storage_options``): what a deep model's ``checkpoint``
    parameter takes besides a file (``exists``, ``read_bytes``, ``write_bytes``).

    Only the job that holds the store's lease writes it (one writer per store).
    """

    def __init__(self, path: Any, name: str, storage_options: dict[str, Any] | None = None):
        if not name.isidentifier():
            raise ValueError(f"checkpoint name {name!r}: use a single word such as 'dkae'.")
        self.path = path
        self.name = name
        self._zarr = _zarr_kwargs(path, storage_options or {})

    def __str__(self) -> str:
        return f"the checkpoint {self.name!r} in the results store {self.path}"

    def _group(self, *, write: bool = False, create: bool = False) -> zarr.Group | None:
        root = zarr.open_group(
            str(self.path), mode="r+" if write or create else "r", zarr_format=3, **self._zarr
        )
        if CHECKPOINT_GROUP in root:
            group = root[CHECKPOINT_GROUP]
            return group if isinstance(group, zarr.Group) else None
        return root.create_group(CHECKPOINT_GROUP) if create else None

    def _latest(self, group: zarr.Group | None) -> str | None:
        if group is None:
            return None
        key = _entries(group, "latest").get(self.name)
        return key if isinstance(key, str) and key in group else None

    def exists(self) -> bool:
        """Whether a save of this checkpoint is in the store."""
        return self._latest(self._group()) is not None

    def read_bytes(self) -> bytes:
        """The last save's bytes.

        Raises
        ------
        FileNotFoundError
            When there is none (see :meth:`exists`).
        """
        group = self._group()
        key = self._latest(group)
        if group is None or key is None:
            raise FileNotFoundError(f"{self} has not been written")
        array = group[key]
        if not isinstance(array, zarr.Array):
            raise FileNotFoundError(f"{self}: {key} is not an array")
        return np.asarray(array[...], dtype=np.uint8).tobytes()

    def write_bytes(self, data: bytes) -> int:
        """Save ``data``, replacing the previous save once it is written; the number of bytes."""
        group = self._group(create=True)
        assert group is not None
        latest = _entries(group, "latest")
        serial = int(_entries(group, "saves").get(self.name, 0)) + 1
        key = f"{self.name}_{serial}"
        values = np.frombuffer(data, dtype=np.uint8)
        array = group.create_array(
            key,
            shape=values.shape,
            chunks=(max(values.size, 1),),
            dtype=np.uint8,
            dimension_names=(f"{key}_byte",),
            overwrite=True,
        )
        array[...] = values
        saves = _entries(group, "saves")
        saves[self.name] = serial
        latest[self.name] = key
        group.attrs.update({"latest": latest, "saves": saves})
        self._drop_older(group, keep=key)
        return int(values.size)

    def remove(self) -> None:
        """Delete every save of this checkpoint, and the group when nothing else is in it."""
        group = self._group(write=True)
        if group is None:
            return
        self._drop_older(group, keep=None)
        latest = _entries(group, "latest")
        latest.pop(self.name, None)
        if latest:  # another checkpoint's saves stay
            saves = {k: v for k, v in _entries(group, "saves").items() if k in latest}
            group.attrs.update({"latest": latest, "saves": saves})
            return
        root = zarr.open_group(str(self.path), mode="r+", zarr_format=3, **self._zarr)
        del root[CHECKPOINT_GROUP]

    def _drop_older(self, group: zarr.Group, *, keep: str | None) -> None:
        prefix = f"{self.name}_"
        for key in list(group.array_keys()):
            if key != keep and key.startswith(prefix) and key[len(prefix) :].isdigit():
                del group[key]


def remove_checkpoints(path: Any, storage_options: dict[str, Any] | None = None) -> None:
    """Delete the store's ``/checkpoint`` group, every checkpoint in it (nothing when there is
    none): its trainings are over."""
    kwargs = _zarr_kwargs(path, storage_options or {})
    if isinstance(path, str):  # the saves may have been listed before the last of them
        kwargs = {"storage_options": remote.uncached_storage_options(path, storage_options)}
    root = zarr.open_group(str(path), mode="r+", zarr_format=3, **kwargs)
    if CHECKPOINT_GROUP in root:
        del root[CHECKPOINT_GROUP]


def _entries(group: zarr.Group, attribute: str) -> dict[str, Any]:
    """The group's attribute ``attribute``, a mapping from checkpoint names (empty if none)."""
    value = dict(group.attrs).get(attribute)
    return dict(value) if isinstance(value, dict) else {}
