"""Input Zarr stores checked before zarr or xarray reads them.

A store is a folder of small files that anyone can edit, and zarr trusts them: a metadata
document that is a FIFO hangs the reader, a truncated one behind consolidated metadata goes
unnoticed, a chunk file that is missing reads as the fill value (silent nodata, or silent
zeros), and a chunk that is a compression bomb (a few KiB of zstd that inflate to GiB) is
decompressed whole before its size is compared with the array's. :func:`scan_zarr_store` and
:func:`check_zarr_chunks` refuse each of these from the files' metadata and the frame headers
of the chunks, before any chunk is decoded.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from dkernel.errors import InvalidInputError
from dkernel.storage.array_limits import (  # noqa: F401  (installs the bounded codecs)
    MAX_CHUNK_BYTES,
    ZSTD_BLOCK,
    blosc_content_bound,
    zstd_content_bound,
)

#: Names of Zarr metadata documents (v3 and v2).
METADATA_FILES = frozenset({"zarr.json", ".zarray", ".zgroup", ".zattrs", ".zmetadata"})
#: Largest metadata document read (bytes): consolidated metadata of a cube of a few hundred
#: variables is a few MiB.
MAX_METADATA_BYTES = 64 << 20
#: Most files and directories an input store may hold (the check lists them all).
MAX_STORE_ENTRIES = 2_000_000
#: Most values an image array may declare (bands × rows × columns): 64 times a 10 980²
#: Sentinel-2 tile of 13 bands. Beyond, even the graph of its row strips would not fit.
MAX_IMAGE_VALUES = 2**37
#: Values of ``data.missing_chunks``.
MISSING_CHUNKS = ("error", "nodata")


#: The reader whose checks these are, unless a caller names another (reader ``zarr``).
RASTER_READER = "zarr-raster"


def store_error(path: str, message: str, reader: str = RASTER_READER) -> InvalidInputError:
    """The refusal of an input store of ``reader`` (the words of the runner's reader
    failures)."""
    return InvalidInputError(f"reader '{reader}' failed on {path}: {message}")


def scan_zarr_store(path: str | os.PathLike, *, reader: str = RASTER_READER) -> list[Path]:
    """Check every entry of a Zarr store on disk before anything reads it; return the links
    found in it (for the data-root check of :func:`zarr_store_links`).

    Every file must be a regular file (a FIFO chunk would hang a worker, a device never
    ends), every metadata document (``zarr.json``, ``.zarray``, …) at most
    :data:`MAX_METADATA_BYTES` and valid JSON (a truncated one is named). Links are followed
    once (a loop is not walked twice).

    Raises
    ------
    InvalidInputError
        Naming the store and the file.
    """
    from dkernel.io.files import check_regular, not_regular_message, read_bounded

    root = Path(path)
    st = check_regular(root, "the Zarr store", allow_dir=True)
    if not stat.S_ISDIR(st.st_mode):
        raise store_error(str(root), "it is a file; a Zarr store is a directory.", reader=reader)
    links: list[Path] = []
    seen: set[tuple[int, int]] = set()
    stack, count = [root], 0
    while stack:
        folder = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError as exc:
            raise store_error(
                str(root), f"{folder} could not be listed: {exc}.", reader=reader
            ) from exc
        for entry in entries:
            count += 1
            if count > MAX_STORE_ENTRIES:
                raise store_error(
                    str(root),
                    f"it holds more than {MAX_STORE_ENTRIES:,} files; rechunk it into fewer, "
                    "larger chunks.",
                    reader=reader,
                )
            entry_path = Path(entry.path)
            if entry.is_symlink():
                links.append(entry_path)
            try:
                est = os.stat(entry_path)
            except OSError as exc:
                raise store_error(
                    str(root), f"{entry_path} could not be read: {exc}.", reader=reader
                ) from exc
            if stat.S_ISDIR(est.st_mode):
                if (est.st_dev, est.st_ino) not in seen:
                    seen.add((est.st_dev, est.st_ino))
                    stack.append(entry_path)
                continue
            if not stat.S_ISREG(est.st_mode):
                raise store_error(
                    str(root), not_regular_message(entry_path, est.st_mode), reader=reader
                )
            if entry.name in METADATA_FILES:
                _check_json(root, entry_path, read_bounded, reader)
    return links


def _check_json(root: Path, file: Path, read_bounded: Any, reader: str) -> None:
    import json

    text = read_bounded(
        file,
        MAX_METADATA_BYTES,
        "the metadata file",
        advice="Zarr metadata is a few kB; this is not a Zarr store written by zarr or xarray.",
    )
    try:
        json.loads(text)
    except (ValueError, UnicodeDecodeError) as exc:
        where = getattr(exc, "lineno", None)
        at = f" at line {where}, column {exc.colno}" if where else ""
        raise store_error(
            str(root),
            f"its metadata file {file} is not valid JSON{at} (truncated or corrupt); rewrite "
            "the store (e.g. cube.to_zarr(path, mode='w')).",
            reader=reader,
        ) from None


def _chunk_files(folder: Path) -> dict[str, Path]:
    """The files below an array's folder by key (``c/0/1/1``), metadata documents left out."""
    return {
        str(Path(dirpath, f).relative_to(folder)).replace(os.sep, "/"): Path(dirpath, f)
        for dirpath, _, files in os.walk(folder, followlinks=True)
        for f in files
        if f not in METADATA_FILES
    }


def _first_missing(array: Any, present: dict[str, Path]) -> str | None:
    """The key of the first chunk of ``array`` with no file among ``present``."""
    import itertools

    encode = getattr(array.metadata, "encode_chunk_key", None)
    if encode is None:
        return None
    grid = [-(-s // max(c, 1)) for s, c in zip(array.shape, array.chunks, strict=True)]
    for coords in itertools.product(*(range(g) for g in grid)):
        key = encode(coords)
        if key not in present:
            return key
    return None


@dataclass(frozen=True)
class MissingChunks:
    """Chunks of an image array with no file: they read as the array's ``fill`` value."""

    array: str
    missing: int
    total: int
    first: str | None
    fill: Any

    def describe(self) -> str:
        shown = f"array {self.array!r}" if self.array else "the array"
        where = f" (the first: {self.first})" if self.first else ""
        return f"{shown} has {self.missing:,} of {self.total:,} chunks missing{where}"


def check_zarr_chunks(
    path: str | os.PathLike,
    arrays: list[tuple[str, Any]],
    *,
    missing_chunks: str = "error",
    reader: str = RASTER_READER,
) -> list[MissingChunks]:
    """Check the image arrays (2-D and more) among ``arrays`` (name, opened zarr array) of
    the store ``path`` from their metadata and the chunk files present: declared size, chunk
    size, chunk files that could decompress past the chunk (:func:`check_chunk_files`) and
    missing chunks. ``arrays`` come from :func:`dkernel.io.cube.zarr_arrays`.

    A chunk with no file reads as the array's fill value: a deleted or never-written chunk
    would become silent nodata (or, with a fill value that is data, silent zeros). Missing
    chunks are therefore an error, unless ``missing_chunks='nodata'`` says they are meant
    (zarr leaves out chunks that hold only the fill value); then they are returned, for
    :func:`check_missing_reads_as_nodata` once the image's nodata value is known.

    Returns
    -------
    list of MissingChunks
        Arrays with missing chunks (empty unless ``missing_chunks='nodata'``).

    Raises
    ------
    InvalidInputError
        An array declared larger than :data:`MAX_IMAGE_VALUES` values, chunks larger than
        :data:`MAX_CHUNK_BYTES`, a chunk bomb, or missing chunks: naming the array, how many
        and the first.
    """
    if missing_chunks not in MISSING_CHUNKS:
        raise InvalidInputError(
            f"missing_chunks must be one of {', '.join(MISSING_CHUNKS)}; got {missing_chunks!r}."
        )
    root = Path(path)
    gaps = []
    for name, array in arrays:
        if array.ndim < 2:
            continue
        _check_sizes(root, name, array, reader)
        files = _chunk_files(root / name if name else root)
        check_chunk_files(root, name, array, files, reader)
        total, present = int(array.nchunks), int(array.nchunks_initialized)
        if present >= total:
            continue
        gap = MissingChunks(
            name,
            total - present,
            total,
            _first_missing(array, files),
            array.fill_value.item() if hasattr(array.fill_value, "item") else array.fill_value,
        )
        if missing_chunks == "error":
            raise store_error(
                str(root),
                f"{gap.describe()}; they would read as its fill value {gap.fill!r}, silently. "
                "Rewrite the store, or set data.missing_chunks: nodata if it was written "
                "without its empty chunks (zarr's write_empty_chunks=False) and those pixels "
                "are nodata.",
                reader=reader,
            )
        gaps.append(gap)
    return gaps


def _check_sizes(root: Path, name: str, array: Any, reader: str) -> None:
    shown = f"array {name!r}" if name else "the array"
    values = float(np.prod(array.shape, dtype=np.float64))
    if values > MAX_IMAGE_VALUES:
        raise store_error(
            str(root),
            f"{shown} declares shape {tuple(array.shape)} ({values:.3g} values); at most "
            f"{MAX_IMAGE_VALUES:.3g} are read as one image. Crop or split it first.",
            reader=reader,
        )
    itemsize = np.dtype(array.dtype).itemsize if array.dtype.kind != "O" else 8
    chunk_bytes = float(np.prod(array.chunks, dtype=np.float64)) * itemsize
    if chunk_bytes > MAX_CHUNK_BYTES:
        raise store_error(
            str(root),
            f"{shown} has chunks of {tuple(array.chunks)} {array.dtype} values "
            f"({chunk_bytes / 2**30:.1f} GiB each once decompressed); at most "
            f"{MAX_CHUNK_BYTES / 2**30:.0f} GiB per chunk are read. Rechunk it (e.g. "
            "cube.chunk({'y': 512, 'x': 512}).to_zarr(...)).",
            reader=reader,
        )


# ---------------------------------------------------------------------------------------
# compression bombs: the decompressed size of every chunk, bounded from its headers
# ---------------------------------------------------------------------------------------


def _compressor(array: Any) -> str | None:
    """'zstd' or 'blosc' when the array's chunks are that compressor's output of the raw
    chunk bytes (no filter, no sharding); None otherwise."""
    meta = array.metadata
    if getattr(meta, "zarr_format", 3) == 2:
        if meta.filters:
            return None
        name = type(meta.compressor).__name__.lower() if meta.compressor is not None else ""
    else:
        # by the names the metadata gives (the classes may be dkernel's bounded ones)
        codecs = [str(c.to_dict().get("name", "")) for c in meta.codecs]
        if len(codecs) != 2 or codecs[0] != "bytes":
            return None
        name = codecs[1]
    return name if name in ("zstd", "blosc") else None


def check_chunk_files(
    root: Path, name: str, array: Any, files: dict[str, Path], reader: str = RASTER_READER
) -> None:
    """Refuse chunk files of ``array`` that could decompress past its chunk size.

    Every chunk file may be at most a little larger than the chunk itself (compressors
    expand incompressible data by a fraction of a percent); a zstd or blosc chunk may
    decompress to at most the chunk's bytes (plus one zstd block), bounded from its headers
    (:func:`zstd_content_bound`). Other compressors (gzip, …) are left to zarr.

    Raises
    ------
    InvalidInputError
        Naming the chunk file, the bound and the chunk size.
    """
    if getattr(array, "shards", None) is not None or array.dtype.kind in "OUSV":
        return
    from dkernel.io.files import at_open

    chunk = int(np.prod(array.chunks, dtype=np.int64)) * np.dtype(array.dtype).itemsize
    most_file = int(chunk * 1.05) + (64 << 10)
    most_content = chunk + ZSTD_BLOCK
    compressor = _compressor(array)
    for found in files.values():
        path = Path(at_open(found, "data.path"))  # the data root, where it is opened
        size = path.stat().st_size
        if size > most_file:
            raise store_error(
                str(root),
                f"the chunk file {path} is {size:,} bytes, more than a chunk of "
                f"{tuple(array.chunks)} {array.dtype} values can take ({chunk:,} bytes); "
                "rewrite the store.",
                reader=reader,
            )
        if compressor is None:
            continue
        try:
            with open(path, "rb") as fh:
                bound = (
                    zstd_content_bound(fh, most_content)
                    if compressor == "zstd"
                    else blosc_content_bound(fh)
                )
        except (ValueError, IndexError, OSError):
            continue  # not what the metadata says: zarr's decoder will refuse it
        if bound > most_content:
            raise store_error(
                str(root),
                f"the chunk file {path} ({size:,} bytes of {compressor}) would decompress to "
                f"{'more than ' if compressor == 'zstd' else ''}{bound:,} bytes, but a chunk "
                f"of {tuple(array.chunks)} {array.dtype} values is {chunk:,} bytes: a "
                "compression bomb or a damaged chunk. Rewrite the store.",
                reader=reader,
            )


def check_missing_reads_as_nodata(
    path: str | os.PathLike,
    gaps: list[MissingChunks],
    nodata: float | None,
    reader: str = RASTER_READER,
) -> None:
    """With ``missing_chunks='nodata'``: refuse missing chunks whose fill value is data (not
    NaN and not ``nodata``), which would read as valid pixels."""
    for gap in gaps:
        fill = gap.fill
        if fill is not None and (
            (isinstance(fill, float | np.floating) and np.isnan(fill))
            or (nodata is not None and fill == nodata)
        ):
            continue
        raise store_error(
            str(path),
            f"{gap.describe()}, and they read as its fill value {fill!r}, which is not nodata "
            f"(nodata: {nodata!r}). Set data.nodata to {fill!r} if that value marks nodata, "
            "or rewrite the missing chunks.",
            reader=reader,
        )


def zarr_store_links(
    path: str | os.PathLike, *, reader: str = RASTER_READER, **_: Any
) -> list[Path]:
    """The links inside a Zarr store (each must resolve inside the data root)."""
    return scan_zarr_store(path, reader=reader)


# ---------------------------------------------------------------------------------------
# every file of a local input store checked where it is opened
# ---------------------------------------------------------------------------------------


def _read_checked(store: ConfinedStore, key: str, prototype: Any, byte_range: Any) -> Any | None:
    """The bytes of ``key`` in ``store`` (``byte_range`` of them), the file checked where it
    is opened: against the data root (:func:`dkernel.io.files.at_open`, the check of every
    single-file reader) and as a regular file (from ``fstat`` of the opened descriptor: a
    FIFO chunk would block a worker). None where there is no such file (a missing chunk,
    which :func:`check_zarr_chunks` judged already)."""
    import io

    from zarr.abc.store import OffsetByteRequest, RangeByteRequest, SuffixByteRequest

    from dkernel._files import FileRefused, open_regular_fd
    from dkernel.io.files import at_open, not_regular_message

    opened = at_open(store.root / key, "data.path", task=True, root=store.data_root)
    try:
        fd, _ = open_regular_fd(opened)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except FileRefused as exc:
        if exc.mode is not None and stat.S_ISDIR(exc.mode):
            return None  # a folder of the store, no key's bytes (as zarr's LocalStore)
        raise store_error(
            str(store.root), not_regular_message(opened, exc.mode or 0), store.reader
        ) from None
    with os.fdopen(fd, "rb") as fh:
        if byte_range is None:
            return prototype.buffer.from_bytes(fh.read())
        size = fh.seek(0, io.SEEK_END)
        if isinstance(byte_range, RangeByteRequest):
            fh.seek(byte_range.start)
            return prototype.buffer.from_bytes(fh.read(byte_range.end - byte_range.start))
        if isinstance(byte_range, OffsetByteRequest):
            fh.seek(byte_range.offset)
        elif isinstance(byte_range, SuffixByteRequest):
            fh.seek(max(0, size - byte_range.suffix))
        else:
            raise TypeError(f"Unexpected byte_range, got {byte_range}.")
        return prototype.buffer.from_bytes(fh.read())


def _local_store_class() -> type:
    from zarr.storage import LocalStore

    return LocalStore


class ConfinedStore(_local_store_class()):  # type: ignore[misc]
    """A local input Zarr store, read only, whose every file (metadata and chunks) is checked
    where it is opened (:func:`_read_checked`), in this process and in the job's workers:
    a chunk swapped for a link to outside the data root after the store was checked is
    refused, not read. ``data_root`` is the root in force when the store was opened
    (:func:`dkernel.io.files.data_root_now`), carried with the store into the tasks that
    read its chunks; None: a task's ``$DKERNEL_DATA_ROOT``."""

    def __init__(
        self,
        root: Path | str,
        *,
        read_only: bool = True,
        data_root: Path | None = None,
        reader: str = RASTER_READER,
    ) -> None:
        super().__init__(root, read_only=True)
        self.data_root = data_root
        self.reader = reader

    def with_read_only(self, read_only: bool = True) -> ConfinedStore:
        return type(self)(self.root, data_root=self.data_root, reader=self.reader)

    async def get(self, key: str, prototype: Any = None, byte_range: Any = None) -> Any:
        import asyncio

        from zarr.core.buffer import default_buffer_prototype

        if not self._is_open:
            await self._open()
        prototype = prototype or default_buffer_prototype()
        return await asyncio.to_thread(_read_checked, self, key, prototype, byte_range)

    def get_sync(self, key: str, *, prototype: Any = None, byte_range: Any = None) -> Any:
        from zarr.core.buffer import default_buffer_prototype

        self._ensure_open_sync()
        prototype = prototype or default_buffer_prototype()
        return _read_checked(self, key, prototype, byte_range)

    async def get_partial_values(self, prototype: Any, key_ranges: Any) -> list[Any]:
        import asyncio

        return list(
            await asyncio.gather(
                *(
                    asyncio.to_thread(_read_checked, self, key, prototype, byte_range)
                    for key, byte_range in key_ranges
                )
            )
        )


def confined_store(path: str | os.PathLike, *, reader: str = RASTER_READER) -> ConfinedStore:
    """The local Zarr store ``path`` of ``reader`` as a :class:`ConfinedStore` checked
    against the data root in force now (the job's, else ``$DKERNEL_DATA_ROOT``)."""
    from dkernel.io.files import data_root_now

    return ConfinedStore(Path(path), data_root=data_root_now(task=True), reader=reader)
