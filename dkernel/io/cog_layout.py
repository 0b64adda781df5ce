"""The layout of a (Cloud-Optimized) GeoTIFF, read and checked without GDAL.

:func:`tiff_ifds` reads the TIFF directories (IFDs) of a TIFF or BigTIFF with a small
pure-Python parser; :func:`validate_cog` checks them against the COG layout the way
``rio cogeo validate`` (and GDAL's ``validate_cloud_optimized_geotiff.py``) does (see
:mod:`dkernel.io.cog` for the layout).
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dkernel.errors import InvalidInputError

#: Tile side of the COG (and of its overviews) and rows per written window.
TILE = 512

#: Largest main-IFD offset the validators accept (the ghost header is < 200 bytes).
MAX_MAIN_IFD_OFFSET = 300

# TIFF tags read by :func:`tiff_ifds`
_NEW_SUBFILE_TYPE = 254
_IMAGE_WIDTH = 256
_IMAGE_LENGTH = 257
_BITS_PER_SAMPLE = 258
_COMPRESSION = 259
_STRIP_OFFSETS = 273
_SAMPLES_PER_PIXEL = 277
_ROWS_PER_STRIP = 278
_STRIP_BYTE_COUNTS = 279
_PLANAR_CONFIG = 284
_COLOR_MAP = 320
_TILE_WIDTH = 322
_TILE_LENGTH = 323
_TILE_OFFSETS = 324
_TILE_BYTE_COUNTS = 325

#: TIFF field type -> (struct code, size in bytes); the integer types only (what we decode).
_INT_TYPES = {1: ("B", 1), 3: ("H", 2), 4: ("I", 4), 6: ("b", 1), 8: ("h", 2), 9: ("i", 4)}
_INT_TYPES |= {13: ("I", 4), 16: ("Q", 8), 17: ("q", 8), 18: ("Q", 8)}
#: Size in bytes of every TIFF field type (to skip the ones we do not decode).
_TYPE_SIZES = {2: 1, 5: 8, 7: 1, 10: 8, 11: 4, 12: 8} | {k: v[1] for k, v in _INT_TYPES.items()}


@dataclass(frozen=True)
class TiffIFD:
    """One TIFF image file directory (IFD): where it is and how its pixels are stored.

    Offsets are byte offsets in the file. ``tile_offsets``/``tile_byte_counts`` are empty for
    a stripped image, ``strip_offsets``/``strip_byte_counts`` for a tiled one.
    """

    offset: int
    width: int
    height: int
    subfile_type: int = 0
    tile_width: int | None = None
    tile_height: int | None = None
    tile_offsets: tuple[int, ...] = ()
    tile_byte_counts: tuple[int, ...] = ()
    strip_offsets: tuple[int, ...] = ()
    strip_byte_counts: tuple[int, ...] = ()
    rows_per_strip: int | None = None
    samples_per_pixel: int = 1
    bits_per_sample: tuple[int, ...] = (1,)
    planar_config: int = 1
    compression: int = 1
    has_colormap: bool = False
    tags: tuple[int, ...] = field(default=(), repr=False)

    @property
    def is_tiled(self) -> bool:
        """Tiled (TileOffsets present, no StripOffsets)."""
        return bool(self.tile_offsets) and not self.strip_offsets

    @property
    def is_overview(self) -> bool:
        """A reduced-resolution image (NewSubfileType bit 0)."""
        return bool(self.subfile_type & 1)

    @property
    def is_mask(self) -> bool:
        """A transparency mask (NewSubfileType bit 2)."""
        return bool(self.subfile_type & 4)

    def block_ranges(self) -> list[tuple[int, int]]:
        """``(offset, byte count)`` of every tile (or strip) with data; sparse blocks left out."""
        offs = self.tile_offsets or self.strip_offsets
        counts = self.tile_byte_counts or self.strip_byte_counts
        return [(o, c) for o, c in zip(offs, counts, strict=True) if o > 0 and c > 0]


def tiff_ifds(path: str | os.PathLike) -> list[TiffIFD]:
    """Every IFD of a TIFF or BigTIFF file, in file order (the chain of next-IFD offsets).

    Parameters
    ----------
    path : path of a ``.tif`` file

    Returns
    -------
    list of TiffIFD
        The first is the main image; GDAL then chains overviews and masks.

    Raises
    ------
    InvalidInputError
        The file is not a TIFF (bad magic number) or its IFD chain loops.

    Notes
    -----
    Reads the header, each IFD and the arrays of the tags it decodes (tile and strip offsets
    and byte counts); never the pixel data. Tags of non-integer types are recorded in
    ``tags`` but not decoded.
    """
    path = Path(path)
    with open(path, "rb") as f:
        head = f.read(16)
        if head[:2] not in (b"II", b"MM"):
            raise InvalidInputError(f"{path} is not a TIFF file (it starts with {head[:4]!r}).")
        bo = "<" if head[:2] == b"II" else ">"
        (magic,) = struct.unpack(bo + "H", head[2:4])
        if magic == 42:
            big, (first,) = False, struct.unpack(bo + "I", head[4:8])
        elif magic == 43:
            big, (first,) = True, struct.unpack(bo + "Q", head[8:16])
        else:
            raise InvalidInputError(f"{path} is not a TIFF file (version number {magic}).")
        ifds: list[TiffIFD] = []
        seen: set[int] = set()
        offset = first
        while offset:
            if offset in seen:
                raise InvalidInputError(f"{path}: the IFD chain loops at byte {offset}.")
            seen.add(offset)
            ifd, offset = _read_ifd(f, offset, bo, big)
            ifds.append(ifd)
    return ifds


def _read_ifd(f: Any, offset: int, bo: str, big: bool) -> tuple[TiffIFD, int]:
    count_fmt, entry_size, value_size = ("Q", 20, 8) if big else ("H", 12, 4)
    f.seek(offset)
    (n_entries,) = struct.unpack(bo + count_fmt, f.read(8 if big else 2))
    raw = f.read(n_entries * entry_size)
    (next_offset,) = struct.unpack(bo + ("Q" if big else "I"), f.read(value_size))
    values: dict[int, tuple[int, ...]] = {}
    tags = []
    for i in range(n_entries):
        entry = raw[i * entry_size : (i + 1) * entry_size]
        tag, typ = struct.unpack(bo + "HH", entry[:4])
        (count,) = struct.unpack(bo + ("Q" if big else "I"), entry[4 : 4 + value_size])
        tags.append(tag)
        if typ not in _INT_TYPES:
            continue
        code, size = _INT_TYPES[typ]
        field_bytes = entry[4 + value_size :]
        if count * size <= value_size:
            data = field_bytes[: count * size]
        else:
            (where,) = struct.unpack(bo + ("Q" if big else "I"), field_bytes)
            pos = f.tell()
            f.seek(where)
            data = f.read(count * size)
            f.seek(pos)
        values[tag] = struct.unpack(f"{bo}{count}{code}", data)

    def one(tag: int, default: int | None = None) -> int | None:
        return values[tag][0] if tag in values else default

    ifd = TiffIFD(
        offset=offset,
        width=int(one(_IMAGE_WIDTH, 0) or 0),
        height=int(one(_IMAGE_LENGTH, 0) or 0),
        subfile_type=int(one(_NEW_SUBFILE_TYPE, 0) or 0),
        tile_width=one(_TILE_WIDTH),
        tile_height=one(_TILE_LENGTH),
        tile_offsets=values.get(_TILE_OFFSETS, ()),
        tile_byte_counts=values.get(_TILE_BYTE_COUNTS, ()),
        strip_offsets=values.get(_STRIP_OFFSETS, ()),
        strip_byte_counts=values.get(_STRIP_BYTE_COUNTS, ()),
        rows_per_strip=one(_ROWS_PER_STRIP),
        samples_per_pixel=int(one(_SAMPLES_PER_PIXEL, 1) or 1),
        bits_per_sample=values.get(_BITS_PER_SAMPLE, (1,)),
        planar_config=int(one(_PLANAR_CONFIG, 1) or 1),
        compression=int(one(_COMPRESSION, 1) or 1),
        has_colormap=_COLOR_MAP in tags,
        tags=tuple(tags),
    )
    return ifd, next_offset


def validate_cog(path: str | os.PathLike) -> list[str]:
    """Check that a GeoTIFF is laid out as a Cloud-Optimized GeoTIFF; ``[]`` means valid.

    The checks of ``rio cogeo validate`` (after GDAL's ``validate_cloud_optimized_geotiff.py``),
    read from the TIFF directories (:func:`tiff_ifds`) rather than through GDAL:

    * every image (main, overviews, masks) is tiled: TileOffsets, no StripOffsets;
    * an image larger than 512 px on a side has internal overviews (a warning in rio-cogeo,
      an error here: dkernel's COGs always have them);
    * the main IFD comes first, right after the header and ghost area (offset ≤ 300), and
      the overview IFDs follow it in the chain and in the file with decreasing sizes;
    * every IFD lies before the image data (the first tile of the smallest overview is after
      the last IFD);
    * the tile data go from the smallest overview to the full image: each overview's tiles
      all come before the tiles of the next larger one, the full image's last.

    Parameters
    ----------
    path : path of a ``.tif`` file

    Returns
    -------
    list of str
        One sentence per violation.
    """
    try:
        ifds = tiff_ifds(path)
    except InvalidInputError as exc:
        return [str(exc)]
    except (OSError, struct.error) as exc:
        return [f"{path} could not be read as a TIFF: {exc}"]
    if not ifds:
        return [f"{path} has no image."]
    errors: list[str] = []
    for i, ifd in enumerate(ifds):
        what = "the main image" if i == 0 else f"IFD {i} ({ifd.width} × {ifd.height})"
        if not ifd.is_tiled:
            errors.append(f"{what} is not tiled (it has StripOffsets, no TileOffsets).")
    main = ifds[0]
    if main.is_overview or main.is_mask:
        errors.append(f"the first IFD is not the full-resolution image (type {main.subfile_type}).")
    if main.offset > MAX_MAIN_IFD_OFFSET:
        errors.append(
            f"the main IFD is at byte {main.offset}; it should follow the header and ghost area "
            f"(≤ {MAX_MAIN_IFD_OFFSET})."
        )
    levels = [main, *[d for d in ifds[1:] if d.is_overview and not d.is_mask]]
    overviews = levels[1:]
    if (main.width > TILE or main.height > TILE) and not overviews:
        errors.append(
            f"the image is {main.width} × {main.height} (larger than {TILE} px on a side) "
            "but has no internal overviews."
        )
    for a, b in zip(levels[:-1], levels[1:], strict=True):
        if b.width > a.width or b.height > a.height or (b.width, b.height) == (a.width, a.height):
            errors.append(
                f"overview IFD at byte {b.offset} ({b.width} × {b.height}) should be smaller "
                f"than the one before it ({a.width} × {a.height})."
            )
        if b.offset < a.offset:
            errors.append(
                f"overview IFD at byte {b.offset} comes before the IFD of the larger image "
                f"at byte {a.offset}; IFDs go largest first."
            )
    data = [r for d in ifds for r in d.block_ranges()]
    if data:
        first_data = min(o for o, _ in data)
        late = [d.offset for d in ifds if d.offset > first_data]
        if late:
            errors.append(
                f"IFDs at bytes {late} come after the first image data (byte {first_data}); "
                "every IFD should be before the data."
            )
    for i in range(len(levels) - 1, 0, -1):
        small, large = levels[i].block_ranges(), levels[i - 1].block_ranges()
        if not small or not large:
            continue
        if max(o for o, _ in small) > min(o for o, _ in large):
            name = "the main image" if i == 1 else f"overview {i - 2}"
            errors.append(
                f"tile data of overview {i - 1} should all come before the tile data of {name}."
            )
    return errors
