"""Registry of data readers: job specs name a reader, never an importable object."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from dkernel.errors import SpecError
from dkernel.io.data import LoadedData
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


READERS: dict[str, Reader] = {}


def register_reader(reader: Reader) -> Reader:
    """Add a reader to the registry (module import time)."""
    if reader.name in READERS:
        raise ValueError(f"reader {reader.name!r} is already registered")
    READERS[reader.name] = reader
    return reader


def get_reader(name: Any) -> Reader:
    """Look a reader up by name; unknown names list the valid ones."""
    from dkernel.io import readers  # noqa: F401  (registers the built-in readers)

    if not isinstance(name, str) or name not in READERS:
        valid = ", ".join(sorted(READERS))
        raise SpecError(f"unknown reader {name!r}. Valid readers: {valid}.", "data.reader")
    return READERS[name]
