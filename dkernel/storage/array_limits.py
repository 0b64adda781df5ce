"""Zarr arrays read within bounds: declared sizes checked from the metadata, chunks decoded
no larger than they are declared.

A store is a folder (or bucket) of small documents anyone can edit, and Zarr trusts them. An
array's ``zarr.json`` may declare a shape of 10¹² × 10¹² (xarray then fails in NumPy with an
empty message, or builds a task graph of 10²² chunks), and a chunk of a few KiB of zstd may
inflate to gigabytes: the zstd, blosc and gzip decoders allocate what the chunk's own header
declares, before Zarr compares the result with the chunk's shape.

* :func:`declared_array_problem` reads what an array's metadata declares (shape, chunks,
  data type) and names what is beyond :data:`MAX_ARRAY_CHUNKS` chunks or
  :data:`MAX_CHUNK_BYTES` per chunk. ``dkernel.storage.store`` runs it on every metadata
  document it parses, consolidated metadata included, before xarray or Zarr sees them.
* :func:`install_bounded_codecs` makes Zarr decode zstd, blosc and gzip chunks through
  subclasses of its codecs that first bound the decoded size from the chunk's headers (zstd,
  blosc) or decode incrementally up to it (gzip): a chunk that would decode to more than its
  declared shape is refused before anything is allocated. Encoding is Zarr's own. Installed
  in every process that imports this module (results stores and input cubes alike).
"""

from __future__ import annotations

import io
import os
import zlib
from collections.abc import Mapping
from typing import Any

import numpy as np
import zarr
from zarr.codecs import BloscCodec, GzipCodec, ZstdCodec
from zarr.registry import fully_qualified_name, register_codec

#: Largest chunk read (bytes, decoded): a task decodes whole chunks. dkernel writes chunks of
#: at most 128 MiB; an input cube's chunks may be larger.
MAX_CHUNK_BYTES = 1 << 30
#: Most chunks one array may declare: Dask builds one task per chunk, and xarray a tuple of
#: chunk sizes per dimension (10⁷ tasks is a graph of gigabytes already).
MAX_ARRAY_CHUNKS = 10_000_000


class ChunkTooLarge(ValueError):
    """A chunk whose headers declare more bytes than its chunk shape holds."""


def _itemsize(data_type: Any) -> int | None:
    """Bytes per value of a Zarr v3 ``data_type`` (or v2 ``dtype``); None for variable-length
    types (strings, objects), whose size the metadata does not tell."""
    name = data_type.get("name") if isinstance(data_type, Mapping) else data_type
    if not isinstance(name, str):
        return None
    try:
        dtype = np.dtype(name)
    except TypeError:
        return None
    return None if dtype.kind in "OUSV" and dtype.itemsize == 0 else dtype.itemsize


def _ints(value: Any) -> list[int] | None:
    if not isinstance(value, list) or not all(
        isinstance(v, int) and not isinstance(v, bool) for v in value
    ):
        return None
    return value


def declared_array_problem(meta: Mapping[str, Any]) -> str | None:
    """What is wrong with the sizes an array's metadata (one ``zarr.json``, v3, or a v2
    ``.zarray``) declares, or None (also for a group, or a layout this does not know).

    Examples
    --------
    >>> declared_array_problem({"node_type": "array", "shape": [10, 2], "data_type": "float64",
    ...     "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [10, 2]}}})
    >>> declared_array_problem({"node_type": "array", "shape": [10**12, 10**12],
    ...     "data_type": "float64",
    ...     "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [10, 2]}}})[:45]
    'declares shape (1000000000000, 1000000000000)'
    """
    if meta.get("node_type", "array") != "array" or "shape" not in meta:
        return None
    shape = _ints(meta.get("shape"))
    if shape is None or any(s < 0 for s in shape):
        return f"declares shape {meta.get('shape')!r}, not a list of sizes"
    grid = meta.get("chunk_grid")
    if isinstance(grid, Mapping):
        chunks = _ints((grid.get("configuration") or {}).get("chunk_shape"))
    else:
        chunks = _ints(meta.get("chunks"))  # v2
    if chunks is None or len(chunks) != len(shape) or any(c < 1 for c in chunks):
        return None  # another chunk grid (or a damaged one): Zarr's own message
    n_chunks = float(np.prod([-(-s // c) for s, c in zip(shape, chunks, strict=True)], dtype=float))
    shown = f"shape {tuple(shape)} in chunks of {tuple(chunks)}"
    if n_chunks > MAX_ARRAY_CHUNKS:
        return (
            f"declares {shown}: {n_chunks:.3g} chunks, more than the {MAX_ARRAY_CHUNKS:,} an "
            "array may have to be read"
        )
    itemsize = _itemsize(meta.get("data_type", meta.get("dtype")))
    chunk_bytes = float(np.prod(chunks, dtype=float)) * (itemsize or 0)
    if chunk_bytes > MAX_CHUNK_BYTES:
        return (
            f"declares {shown} of {itemsize}-byte values: {chunk_bytes / 2**30:.3g} GiB per "
            f"chunk once decoded, more than the {MAX_CHUNK_BYTES / 2**30:.0f} GiB a chunk may "
            "take to be read"
        )
    return None


#: Room a stored chunk may take beyond its decoded size: headers, checksums, a shard's index.
STORED_CHUNK_SLACK = 64 * 1024
#: Bytes allowed per value of a variable-length type (strings), whose size no metadata tells.
VARIABLE_ITEM_BYTES = 4096


def stored_chunk_limit(meta: Mapping[str, Any]) -> int | None:
    """The most bytes one stored chunk of the array whose metadata is ``meta`` (a v3
    ``zarr.json`` or v2 ``.zarray``) may take: twice its decoded size (data that does not
    compress grows a little under every codec) plus :data:`STORED_CHUNK_SLACK`, at most
    twice :data:`MAX_CHUNK_BYTES`. None when ``meta`` is not an array or its chunk grid is
    not regular.

    Examples
    --------
    >>> stored_chunk_limit({"node_type": "array", "shape": [10, 2], "data_type": "float64",
    ...     "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [5, 2]}}})
    65696
    """
    if meta.get("node_type", "array") != "array" or "shape" not in meta:
        return None
    grid = meta.get("chunk_grid")
    if isinstance(grid, Mapping):
        chunks = _ints((grid.get("configuration") or {}).get("chunk_shape"))
    else:
        chunks = _ints(meta.get("chunks"))  # v2
    if chunks is None or any(c < 1 for c in chunks):
        return None
    itemsize = _itemsize(meta.get("data_type", meta.get("dtype"))) or VARIABLE_ITEM_BYTES
    decoded = min(float(np.prod(chunks, dtype=float)) * itemsize, MAX_CHUNK_BYTES)
    return int(2 * decoded) + STORED_CHUNK_SLACK


# ---------------------------------------------------------------------------------------
# decoded sizes bounded from the chunks' headers
# ---------------------------------------------------------------------------------------

#: A zstd block regenerates at most this many bytes (the format's Block_Maximum_Size).
ZSTD_BLOCK = 128 * 1024
_ZSTD_MAGIC = 0xFD2FB528
_FCS_BYTES = {0: 0, 1: 2, 2: 4, 3: 8}


def zstd_content_bound(fh: Any, limit: int) -> int:
    """An upper bound of what the zstd frames read from ``fh`` decompress to, from their
    headers only (``fh`` is seeked past each block, never read whole); stops once above
    ``limit``.

    A frame that declares its content size counts that size (a decoder allocates it and
    refuses more); otherwise raw and RLE blocks count their stated size and a compressed
    block :data:`ZSTD_BLOCK`. Skippable frames count nothing.

    Raises
    ------
    ValueError
        Not zstd frames (the caller leaves such chunks to the decoder).
    """
    total = 0
    while total <= limit:
        head = fh.read(4)
        if not head:
            return total
        if len(head) < 4:
            raise ValueError("truncated frame")
        magic = int.from_bytes(head, "little")
        if magic & 0xFFFFFFF0 == 0x184D2A50:  # skippable frame
            size = int.from_bytes(fh.read(4), "little")
            fh.seek(size, os.SEEK_CUR)
            continue
        if magic != _ZSTD_MAGIC:
            raise ValueError("not a zstd frame")
        descriptor = fh.read(1)[0]
        single = (descriptor >> 5) & 1
        fcs_bytes = _FCS_BYTES[descriptor >> 6] or (1 if single else 0)
        skip = (0 if single else 1) + (0, 1, 2, 4)[descriptor & 3]
        fh.seek(skip, os.SEEK_CUR)
        declared = None
        if fcs_bytes:
            declared = int.from_bytes(fh.read(fcs_bytes), "little") + (256 if fcs_bytes == 2 else 0)
            if total + declared > limit:
                return total + declared
        blocks = 0
        while True:
            raw = fh.read(3)
            if len(raw) < 3:
                raise ValueError("truncated block")
            header = int.from_bytes(raw, "little")
            last, kind, size = header & 1, (header >> 1) & 3, header >> 3
            if kind == 3:
                raise ValueError("reserved block type")
            blocks += size if kind in (0, 1) else ZSTD_BLOCK
            fh.seek(1 if kind == 1 else size, os.SEEK_CUR)
            if last or (declared is None and total + blocks > limit):
                break
        if descriptor & 0b100:  # content checksum
            fh.seek(4, os.SEEK_CUR)
        total += declared if declared is not None else blocks
    return total


def blosc_content_bound(fh: Any) -> int:
    """What a blosc chunk decompresses to, from its 16-byte header (``nbytes``)."""
    head = fh.read(16)
    if len(head) < 16:
        raise ValueError("truncated blosc header")
    return int.from_bytes(head[4:8], "little")


def _chunk_limit(chunk_spec: Any) -> int | None:
    """Bytes a chunk of ``chunk_spec`` (Zarr's ``ArraySpec``) may decode to, None when its
    data type has no fixed size."""
    try:
        native = chunk_spec.dtype.to_native_dtype()
    except AttributeError:
        native = np.dtype(chunk_spec.dtype)
    if native.kind in "OUSV" and native.itemsize == 0 or native.kind == "O":
        return None
    return int(np.prod(chunk_spec.shape, dtype=np.int64)) * native.itemsize


def _refuse(codec: str, bound: int, limit: int, chunk_spec: Any, *, more: bool) -> ChunkTooLarge:
    return ChunkTooLarge(
        f"a {codec} chunk would decode to {'more than ' if more else ''}{bound:,} bytes, but a "
        f"chunk of {tuple(chunk_spec.shape)} values is {limit:,} bytes: a compression bomb or "
        "a damaged chunk (nothing was decoded). Rewrite the store, or run the job again"
    )


class BoundedZstdCodec(ZstdCodec):
    """Zarr's zstd codec; a chunk is decoded only when its frame headers bound its decoded
    size by the chunk's (:func:`zstd_content_bound`)."""

    def _decode_sync(self, chunk_bytes: Any, chunk_spec: Any) -> Any:
        limit = _chunk_limit(chunk_spec)
        if limit is not None:
            most = limit + ZSTD_BLOCK
            try:
                bound = zstd_content_bound(io.BytesIO(chunk_bytes.to_bytes()), most)
            except (ValueError, IndexError):
                bound = 0  # not zstd frames: the decoder's own error
            if bound > most:
                raise _refuse("zstd", bound, limit, chunk_spec, more=True)
        return super()._decode_sync(chunk_bytes, chunk_spec)


class BoundedBloscCodec(BloscCodec):
    """Zarr's blosc codec; a chunk is decoded only when its header's ``nbytes`` is at most
    the chunk's."""

    def _decode_sync(self, chunk_bytes: Any, chunk_spec: Any) -> Any:
        limit = _chunk_limit(chunk_spec)
        if limit is not None:
            try:
                bound = blosc_content_bound(io.BytesIO(chunk_bytes.to_bytes()))
            except ValueError:
                bound = 0
            if bound > limit:
                raise _refuse("blosc", bound, limit, chunk_spec, more=False)
        return super()._decode_sync(chunk_bytes, chunk_spec)


class BoundedGzipCodec(GzipCodec):
    """Zarr's gzip codec, decoded incrementally up to the chunk's size (a gzip header does
    not tell the decoded size)."""

    def _decode_sync(self, chunk_bytes: Any, chunk_spec: Any) -> Any:
        limit = _chunk_limit(chunk_spec)
        data = chunk_bytes.to_bytes()
        if limit is None or not data.startswith(b"\x1f\x8b"):
            return super()._decode_sync(chunk_bytes, chunk_spec)
        inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)  # gzip framing
        try:
            out = inflate.decompress(data, limit + 1)
        except zlib.error:
            return super()._decode_sync(chunk_bytes, chunk_spec)  # its own error
        if len(out) > limit:
            raise _refuse("gzip", limit, limit, chunk_spec, more=True)
        if not inflate.eof or inflate.unused_data:
            return super()._decode_sync(chunk_bytes, chunk_spec)  # several members, or cut
        return chunk_spec.prototype.buffer.from_bytes(out)


_INSTALLED = False


def install_bounded_codecs() -> None:
    """Make Zarr decode zstd, blosc and gzip chunks through :class:`BoundedZstdCodec`,
    :class:`BoundedBloscCodec` and :class:`BoundedGzipCodec` (this process, from now on;
    Zarr's configuration ``codecs.zstd`` and so on). Idempotent."""
    global _INSTALLED
    if _INSTALLED:
        return
    settings = {}
    for key, cls in (
        ("zstd", BoundedZstdCodec),
        ("blosc", BoundedBloscCodec),
        ("gzip", BoundedGzipCodec),
    ):
        register_codec(key, cls)
        settings[f"codecs.{key}"] = fully_qualified_name(cls)
    zarr.config.set(settings)
    _INSTALLED = True


install_bounded_codecs()
