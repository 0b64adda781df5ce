"""Polygons of the 4-connected pixel components of a label array, traced with array operations.

``rasterio.features.shapes`` (GDAL's polygonizer) gives the same polygons, one GeoJSON-like
dict per polygon and one Python tuple per vertex; building shapely polygons from those took
most of the segments' time on the demo scene (23 k polygons, 200 k vertices: 0.2 of 0.4 s).
Here the boundary is cut into straight runs of pixel edges, the runs are chained into rings
and the rings into polygons, all on NumPy arrays, which stay ragged arrays
(:class:`dkernel.io.ragged.RaggedPolygons`) until shapely is needed.

The tracing, in pixel coordinates (``x`` = column, ``y`` = row, pixel ``(r, c)`` the unit
square from ``(c, r)`` to ``(c + 1, r + 1)``):

* every pixel edge between a component and anything else (another component, no component,
  the array's border) is a boundary edge of that component, directed so that the component
  is on its right in the picture (rows going down): top edges left to right, right edges
  down, bottom edges right to left, left edges up. A ring around a component then has a
  positive shoelace area and a ring around a hole in it a negative one;
* consecutive edges of one kind and one component on one line form a run (a straight piece
  of boundary); consecutive runs of a ring meet at right angles, so the runs' start points
  are the ring's vertices, with none in the middle of a straight edge;
* a run is followed by the run of its component that starts where it ends. Where a
  component touches itself at a corner (two diagonal pixels, joined elsewhere), two runs
  start there, and the ring goes on along the other pixel's edge: the pixels outside the
  component on either side of that corner are then on two rings (they lie on either side
  of a loop of the component through the corner), the outer ring and a hole meeting at a
  point instead of one ring touching itself, the form OGC (and GEOS) calls valid;
* the runs' successor links form disjoint cycles, the rings: one depth-first pass
  (``scipy.sparse.csgraph``) lists each ring's runs in order;
* each component has one ring of positive area, its exterior; the others are its holes.
"""

from __future__ import annotations

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components, depth_first_order

from dkernel.io.ragged import RaggedPolygons

__all__ = ["component_polygons", "component_rings"]


def component_polygons(comp: np.ndarray, row0: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Polygons of the 4-connected components of ``comp``, in pixel coordinates, as shapely
    Polygons (:func:`component_rings` as shapely objects; see there)."""
    polygons, ids = component_rings(comp, row0)
    return polygons.to_shapely(), ids


def component_rings(comp: np.ndarray, row0: int = 0) -> tuple[RaggedPolygons, np.ndarray]:
    """Polygons of the 4-connected components of ``comp``, in pixel coordinates.

    Parameters
    ----------
    comp : ndarray (rows, cols) of int
        Component of every pixel, ``>= 0``; negative: no component. Pixels of one component
        must be 4-connected (``scipy.ndimage.label`` with its default structure gives that).
    row0 : int
        Added to every y coordinate (the row of ``comp[0]`` in a larger image).

    Returns
    -------
    polygons : RaggedPolygons
        One polygon per component present, pixel edges as its boundary, holes included.
    ids : ndarray of int64
        The component of each polygon, in increasing order.

    Notes
    -----
    The polygons equal those of ``rasterio.features.shapes(comp, mask=comp >= 0)`` (the same
    point sets; vertices at the corners only, rings starting elsewhere). O(pixels) time and
    memory.
    """
    comp = np.asarray(comp)
    if comp.ndim != 2:
        raise ValueError(f"comp must be 2-d; got shape {comp.shape}.")
    n_rows, n_cols = comp.shape
    padded = np.full((n_rows + 2, n_cols + 2), -1, dtype=np.int64)
    padded[1:-1, 1:-1] = comp
    runs = _Runs.of(padded)
    if runs.size == 0:
        return RaggedPolygons.empty(), np.zeros(0, dtype=np.int64)
    successor = _successors(runs, n_rows, n_cols)
    ring, order = _rings_in_order(successor)
    return _assemble(runs, ring, order, row0)


class _Runs:
    """Straight runs of boundary edges: component, start and end vertex, and the pixel
    beside the first and the last edge (flat index into the padded array)."""

    def __init__(self, parts: list[tuple[np.ndarray, ...]]) -> None:
        fields = [np.concatenate(f) for f in zip(*parts, strict=True)]
        self.comp, self.x0, self.y0, self.x1, self.y1, self.first, self.last = fields
        self.size = self.comp.size

    @classmethod
    def of(cls, padded: np.ndarray) -> _Runs:
        rows, cols = padded.shape
        parts = []
        # horizontal lines y = 0..n_rows between padded rows y and y + 1
        above, below = padded[:-1, 1:-1], padded[1:, 1:-1]
        # top edges of the pixels below, left to right
        parts.append(_line_runs(below, above, cols, row_major=True, forward=True, side=1))
        # bottom edges of the pixels above, right to left
        parts.append(_line_runs(above, below, cols, row_major=True, forward=False, side=0))
        # vertical lines x = 0..n_cols between padded columns x and x + 1
        left, right = padded[1:-1, :-1].T, padded[1:-1, 1:].T
        # right edges of the pixels on the left, downwards
        parts.append(_line_runs(left, right, cols, row_major=False, forward=True, side=0))
        # left edges of the pixels on the right, upwards
        parts.append(_line_runs(right, left, cols, row_major=False, forward=False, side=1))
        return cls(parts)


def _line_runs(
    own: np.ndarray,
    other: np.ndarray,
    cols: int,
    *,
    row_major: bool,
    forward: bool,
    side: int,
) -> tuple[np.ndarray, ...]:
    """Runs of the edges of ``own``'s components along lines: ``own[k, i]`` is the pixel on
    one side of unit edge ``i`` of line ``k``, ``other[k, i]`` the one across. ``row_major``:
    the lines are horizontal (``k`` = y, ``i`` = x) or vertical (``k`` = x, ``i`` = y);
    ``forward``: the runs go towards increasing ``i``; ``side``: which of the line's two
    padded neighbours (0: lower index, 1: higher) the own pixels are."""
    n_lines, n_edges = own.shape
    edge = (own >= 0) & (own != other)
    # a run starts at an edge whose predecessor on the line is not an edge of the same
    # component (and ends symmetrically)
    cont = np.zeros_like(edge)
    cont[:, 1:] = edge[:, 1:] & edge[:, :-1] & (own[:, 1:] == own[:, :-1])
    cont_next = np.zeros_like(edge)
    cont_next[:, :-1] = cont[:, 1:]
    k_start, i_start = np.nonzero(edge & ~cont)
    k_end, i_end = np.nonzero(edge & ~cont_next)
    comp = own[k_start, i_start]
    # the pixels beside the first and the last edge, in padded (row, col)
    line = k_start + side  # padded index across the line
    lo, hi = i_start + 1, i_end + 1  # padded index along the line
    if row_major:
        pix_lo, pix_hi = line * cols + lo, line * cols + hi
    else:
        pix_lo, pix_hi = lo * cols + line, hi * cols + line
    k = k_start.astype(np.int64)
    a, b = i_start.astype(np.int64), i_end.astype(np.int64) + 1  # vertex coordinates along
    if forward:
        start, end, first, last = a, b, pix_lo, pix_hi
    else:
        start, end, first, last = b, a, pix_hi, pix_lo
    if row_major:
        return comp, start, k, end, k, first, last
    return comp, k, start, k, end, first, last


def _successors(runs: _Runs, n_rows: int, n_cols: int) -> np.ndarray:
    """The run that follows each run on its ring."""
    span_x, span_y = n_cols + 1, n_rows + 1

    def key(comp: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        return (comp * span_y + y) * span_x + x

    start_key = key(runs.comp, runs.x0, runs.y0)
    by_start = np.argsort(start_key, kind="stable")
    sorted_keys = start_key[by_start]
    end_key = key(runs.comp, runs.x1, runs.y1)
    pos = np.searchsorted(sorted_keys, end_key)
    successor = by_start[pos]
    # a component touching itself at a corner: two runs start there; go on along the other
    # pixel's edge (see the module's docstring)
    alt = pos + 1
    two = alt < sorted_keys.size
    two[two] = sorted_keys[alt[two]] == end_key[two]
    if two.any():
        other = by_start[alt[two]]
        take_other = runs.first[other] != runs.last[two]
        successor[np.flatnonzero(two)[take_other]] = other[take_other]
    return successor


def _rings_in_order(successor: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Ring of each run, and the runs ring by ring, each ring in its order."""
    n = successor.size
    nodes = np.arange(n)
    links = csr_matrix((np.ones(n, dtype=np.int8), (nodes, successor)), shape=(n, n))
    _, ring = connected_components(links, directed=True, connection="weak")
    # each ring's lowest run is its head; the link into a head goes to the next ring's head
    # instead (none after the last): one path through every ring, each in its order
    heads = np.unique(ring, return_index=True)[1]
    is_head = np.zeros(n, dtype=bool)
    is_head[heads] = True
    tails = np.flatnonzero(is_head[successor])  # the runs that close a ring
    tails = tails[np.argsort(ring[tails], kind="stable")]
    path = successor.copy()
    path[tails[:-1]] = heads[1:]
    src = np.delete(nodes, tails[-1])
    chain = csr_matrix((np.ones(n - 1, dtype=np.int8), (src, path[src])), shape=(n, n))
    order = depth_first_order(chain, int(heads[0]), directed=True, return_predecessors=False)
    return ring, order


def _assemble(
    runs: _Runs, ring: np.ndarray, order: np.ndarray, row0: int
) -> tuple[RaggedPolygons, np.ndarray]:
    """Closed rings, exterior first then holes, component by component."""
    x, y = runs.x0[order].astype(np.float64), runs.y0[order].astype(np.float64)
    ring_of = ring[order]
    starts = np.flatnonzero(np.r_[True, ring_of[1:] != ring_of[:-1]])
    counts = np.diff(np.r_[starts, order.size])
    # shoelace area of each ring (the next vertex wraps around within the ring)
    local = np.arange(order.size) - np.repeat(starts, counts)
    nxt = np.repeat(starts, counts) + (local + 1) % np.repeat(counts, counts)
    area = np.add.reduceat(x * y[nxt] - x[nxt] * y, starts)
    hole = area < 0
    comp = runs.comp[order[starts]]
    rings = np.lexsort((hole, comp))  # by component, its exterior first
    counts = counts[rings]
    closed = counts + 1
    ring_stops = np.r_[0, np.cumsum(closed)]
    local = np.arange(int(ring_stops[-1])) - np.repeat(ring_stops[:-1], closed)
    src = np.repeat(starts[rings], closed) + local % np.repeat(counts, closed)
    xy = np.column_stack([x[src], y[src] + row0])
    comp = comp[rings]
    exterior = np.flatnonzero(~hole[rings])
    polygon_stops = np.r_[exterior, rings.size].astype(np.int64)
    polygons = RaggedPolygons(xy, ring_stops.astype(np.int64), polygon_stops)
    return polygons, comp[exterior].astype(np.int64)
