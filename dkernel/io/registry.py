"""Registry of data readers: job specs name a reader, never an importable object.

The built-in readers live in the modules of ``dkernel.io.readers``, found by :data:`READERS`
on its first lookup (as the job methods are): no list of modules to edit.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dkernel.errors import SpecError
from dkernel.io.data import LoadedData
from dkernel.registry import Registry
from dkernel.schema.params import Param

#: The ``storage_options`` of every reader that takes a URL: one declaration.
STORAGE_OPTIONS = Param(
    "storage_options",
    "mapping",
    default=None,
    nullable=True,
    doc="fsspec/GDAL options of a remote path (endpoint, region, anon, key, secret, profile); "
    "never logged nor stored with the results.",
)


@dataclass(frozen=True)
class Reader:
    """A named reader.

    Parameters
    ----------
    name : str
        The value of ``data.reader`` in a job spec.
    params : tuple of Param
        Reader options (the other keys of ``data``). Options of kind 'str' named ``path``,
        ``data_dir`` or ending in ``_path`` / ``_dir`` are paths: environment variables are
        expanded, the file or folder must exist at validation time, and it must lie in the
        data root when one is set.
    load : callable
        ``load(**options) -> LoadedData``.
    description : str
    raster : bool
        The reader returns an image (``LoadedData.raster`` set), as raster methods need.
    files : callable, optional
        ``files(**options) -> iterable of paths or URLs``: the files ``load`` reads besides
        the path options themselves (a dataset folder's files, a GeoTIFF's sidecars, the
        links inside a Zarr store, a STAC item's asset hrefs, a Parquet folder's members).
        When a data root confines the job, each must resolve inside it and none may be remote
        (``dkernel.io.files.confine``).
        Options that name a folder (``data_dir``, ``*_dir``) are confined like ``path``.
    urls : tuple of str
        The path options that may also be URLs (``s3://``, ``http(s)://``, GDAL's
        ``/vsis3/``, …: ``dkernel.io.remote``); validation checks such an input exists and
        answers instead of looking for a local file.
    """

    name: str
    params: tuple[Param, ...]
    load: Callable[..., LoadedData]
    description: str = ""
    raster: bool = False
    files: Callable[..., Iterable[Path | str]] | None = None
    urls: tuple[str, ...] = ()


#: The data readers; every module of ``dkernel.io.readers`` registers its own when the registry
#: is first read.
READERS: Registry[Reader] = Registry(
    "reader",
    error=lambda message: SpecError(message, "data.reader"),
    discover="dkernel.io.readers",
)


def register_reader(reader: Reader) -> Reader:
    """Add a reader to the registry (module import time)."""
    return READERS.register(reader.name, reader)


def get_reader(name: Any) -> Reader:
    """Look a reader up by name; unknown names suggest a close one and list the valid ones."""
    return READERS.lookup(name)
