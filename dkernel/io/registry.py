"""Registry of data readers: job specs name a reader, never an importable object."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from dkernel.errors import SpecError
from dkernel.io.data import LoadedData
from dkernel.registry import Registry
from dkernel.schema.params import Param


@dataclass(frozen=True)
class Reader:
    """A named reader.

    Parameters
    ----------
    name : str
        The value of ``data.reader`` in a job spec.
    params : tuple of Param
        Reader options (the other keys of ``data``). Options of kind 'str' named ``path`` or
        ending in ``_path`` are file paths: environment variables are expanded and the file
        must exist at validation time.
    load : callable
        ``load(**options) -> LoadedData``.
    description : str
    raster : bool
        The reader returns an image (``LoadedData.raster`` set), as raster methods need.
    """

    name: str
    params: tuple[Param, ...]
    load: Callable[..., LoadedData]
    description: str = ""
    raster: bool = False


#: The data readers; :mod:`dkernel.io.readers` registers the built-ins (and imports the
#: modules that define more) when the registry is first read.
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
