"""Polygons as ragged arrays: selection, affine maps and WKB, in NumPy.

The segments of a label map are tens of thousands of polygons (the demo scene: 22 818 with
about 200 000 vertices). Made into shapely objects, mapped to the CRS by ``shapely.transform``
and encoded by ``shapely.to_wkb`` only to be written, they took 0.2 s; kept as the arrays
shapely's ``from_ragged_array`` takes (coordinates, ring offsets, polygon offsets) they are
mapped and encoded in a few passes over those arrays, and the WKB goes to the writer as one
buffer with its offsets.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import shapely

__all__ = ["RaggedPolygons", "concat_ranges"]

#: WKB of a polygon: byte order (1: little-endian), geometry type (3: Polygon), ring count.
_POLYGON_HEADER = 9
_RING_HEADER = 4  # point count
_POINT = 16  # x, y as float64


@dataclass(frozen=True)
class RaggedPolygons:
    """Polygons as ragged arrays, in the layout of ``shapely.to_ragged_array``.

    Attributes
    ----------
    xy : ndarray (n_vertices, 2) of float64
        The vertices, ring after ring, each ring closed (its first vertex repeated last).
    ring_stops : ndarray (n_rings + 1,) of int64
        Ring ``i`` is ``xy[ring_stops[i]:ring_stops[i + 1]]``.
    polygon_stops : ndarray (n_polygons + 1,) of int64
        Polygon ``j`` has rings ``polygon_stops[j]:polygon_stops[j + 1]``, the exterior first.
    """

    xy: np.ndarray
    ring_stops: np.ndarray
    polygon_stops: np.ndarray

    def __len__(self) -> int:
        return int(self.polygon_stops.size) - 1

    @classmethod
    def empty(cls) -> RaggedPolygons:
        """No polygon."""
        zero = np.zeros(1, dtype=np.int64)
        return cls(np.zeros((0, 2)), zero, zero.copy())

    @classmethod
    def from_shapely(cls, polygons: np.ndarray) -> RaggedPolygons | None:
        """The polygons of an array of shapely geometries; None when one is not a Polygon."""
        if len(polygons) == 0:
            return cls.empty()
        if not np.all(shapely.get_type_id(polygons) == shapely.GeometryType.POLYGON):
            return None
        _, xy, (ring_stops, polygon_stops) = shapely.to_ragged_array(polygons)
        return cls(xy, ring_stops.astype(np.int64), polygon_stops.astype(np.int64))

    def to_shapely(self) -> np.ndarray:
        """An object array of shapely Polygons."""
        if len(self) == 0:
            return np.empty(0, dtype=object)
        return shapely.from_ragged_array(
            shapely.GeometryType.POLYGON, self.xy, (self.ring_stops, self.polygon_stops)
        )

    @classmethod
    def concat(cls, parts: Sequence[RaggedPolygons]) -> RaggedPolygons:
        """The polygons of ``parts``, one after the other."""
        parts = [p for p in parts if len(p)]
        if not parts:
            return cls.empty()
        vertex_base = np.cumsum([0] + [p.xy.shape[0] for p in parts[:-1]])
        ring_base = np.cumsum([0] + [p.ring_stops.size - 1 for p in parts[:-1]])
        ring_stops = [parts[0].ring_stops[:1]]
        ring_stops += [p.ring_stops[1:] + b for p, b in zip(parts, vertex_base, strict=True)]
        polygon_stops = [parts[0].polygon_stops[:1]]
        polygon_stops += [p.polygon_stops[1:] + b for p, b in zip(parts, ring_base, strict=True)]
        return cls(
            np.concatenate([p.xy for p in parts]),
            np.concatenate(ring_stops),
            np.concatenate(polygon_stops),
        )

    def take(self, index: np.ndarray) -> RaggedPolygons:
        """The polygons ``index`` (ints), in that order."""
        index = np.asarray(index, dtype=np.int64)
        rings_per = np.diff(self.polygon_stops)[index]
        rings = concat_ranges(self.polygon_stops[index], rings_per)
        vertices_per = np.diff(self.ring_stops)[rings]
        vertices = concat_ranges(self.ring_stops[rings], vertices_per)
        return RaggedPolygons(
            self.xy[vertices],
            np.concatenate([[0], np.cumsum(vertices_per)]),
            np.concatenate([[0], np.cumsum(rings_per)]),
        )

    def mapped(self, matrix: np.ndarray, shift: np.ndarray) -> RaggedPolygons:
        """The polygons under the affine map ``xy @ matrix + shift`` (what
        ``shapely.transform`` with that function gives)."""
        return RaggedPolygons(self.xy @ matrix + shift, self.ring_stops, self.polygon_stops)

    def wkb(self) -> tuple[np.ndarray, np.ndarray]:
        """Little-endian WKB of each polygon, as ``shapely.to_wkb`` writes it for 2-d
        polygons: one ``uint8`` buffer and the ``int64`` offsets of the polygons in it
        (``n + 1``, the last its length)."""
        n_rings = np.diff(self.polygon_stops)
        n_points = np.diff(self.ring_stops)
        ring_bytes = _RING_HEADER + _POINT * n_points
        ring_sums = np.concatenate([[0], np.cumsum(ring_bytes)])
        polygon_bytes = _POLYGON_HEADER + ring_sums[self.polygon_stops[1:]]
        polygon_bytes -= ring_sums[self.polygon_stops[:-1]]
        offsets = np.concatenate([[0], np.cumsum(polygon_bytes)]).astype(np.int64)
        # the output is a run of pieces, polygon header, then per ring its header and its
        # points; every piece is copied from one source array by one gather
        headers = np.zeros((len(self), _POLYGON_HEADER), dtype=np.uint8)
        headers[:, 0] = 1
        headers[:, 1:5] = np.frombuffer(np.uint32(3).astype("<u4").tobytes(), np.uint8)
        headers[:, 5:9] = n_rings.astype("<u4").view(np.uint8).reshape(-1, 4)
        ring_headers = n_points.astype("<u4").view(np.uint8)
        points = np.ascontiguousarray(self.xy, dtype="<f8").view(np.uint8).ravel()
        source = np.concatenate([headers.ravel(), ring_headers, points])
        ring_header_base = headers.size
        point_base = ring_header_base + ring_headers.size

        ring_polygon = np.repeat(np.arange(len(self)), n_rings)
        ring_first = np.repeat(self.polygon_stops[:-1], n_rings)
        # where each ring starts in the output: its polygon's start, the header, the rings
        # before it in the polygon
        ring_out = (
            offsets[:-1][ring_polygon]
            + _POLYGON_HEADER
            + ring_sums[np.arange(n_rings.sum())]
            - ring_sums[ring_first]
        )
        n_pieces = len(self) + 2 * ring_out.size
        piece_out = np.empty(n_pieces, dtype=np.int64)
        piece_src = np.empty(n_pieces, dtype=np.int64)
        piece_len = np.empty(n_pieces, dtype=np.int64)
        piece_out[: len(self)] = offsets[:-1]
        piece_src[: len(self)] = np.arange(len(self)) * _POLYGON_HEADER
        piece_len[: len(self)] = _POLYGON_HEADER
        rings = slice(len(self), len(self) + ring_out.size)
        piece_out[rings] = ring_out
        piece_src[rings] = ring_header_base + _RING_HEADER * np.arange(ring_out.size)
        piece_len[rings] = _RING_HEADER
        coords = slice(len(self) + ring_out.size, n_pieces)
        piece_out[coords] = ring_out + _RING_HEADER
        piece_src[coords] = point_base + _POINT * self.ring_stops[:-1]
        piece_len[coords] = _POINT * n_points
        order = np.argsort(piece_out, kind="stable")
        piece_src, piece_len = piece_src[order], piece_len[order]
        # byte k of a piece starting at output o comes from its source start + (k - o)
        gather = np.repeat(piece_src - piece_out[order], piece_len)
        gather += np.arange(gather.size)
        return source[gather], offsets


def concat_ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """``concatenate([arange(s, s + n) for s, n in zip(starts, lengths)])``."""
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    ends = np.cumsum(lengths)
    out = np.ones(total, dtype=np.int64)
    nonempty = lengths > 0
    first = (ends - lengths)[nonempty]
    out[first] = starts[nonempty]
    out[first[1:]] -= (starts + lengths - 1)[nonempty][:-1]
    return np.cumsum(out)
