"""Ragged polygons (dkernel.io.ragged) against shapely, the slow obvious reference."""

import numpy as np
import shapely

from dkernel.io.pixel_polygons import component_polygons
from dkernel.io.ragged import RaggedPolygons, concat_ranges


def _polygons(rng, n=40):
    # pixel polygons with holes and corner-touching pieces, as the segments are
    comp = rng.integers(0, 4, size=(30, 45))
    comp[rng.random(comp.shape) < 0.1] = -1
    from scipy import ndimage

    labelled = np.full(comp.shape, -1)
    base = 0
    for value in range(4):
        lab, k = ndimage.label(comp == value)
        labelled[lab > 0] = lab[lab > 0] - 1 + base
        base += k
    polygons, _ = component_polygons(labelled)
    return polygons[:n] if n else polygons


def test_wkb_is_shapelys(rng):
    polygons = _polygons(rng, n=0)
    assert any(len(p.interiors) for p in polygons)  # holes are covered
    data, offsets = RaggedPolygons.from_shapely(polygons).wkb()
    expected = shapely.to_wkb(polygons, byte_order=1)
    assert offsets[-1] == data.size == sum(len(b) for b in expected)
    got = [data[a:b].tobytes() for a, b in zip(offsets[:-1], offsets[1:], strict=True)]
    assert got == list(expected)


def test_take_concat_and_round_trip_match_shapely(rng):
    polygons = _polygons(rng)
    ragged = RaggedPolygons.from_shapely(polygons)
    assert shapely.equals_exact(ragged.to_shapely(), polygons, tolerance=0).all()
    index = rng.permutation(len(polygons))[:25]
    taken = ragged.take(index).to_shapely()
    assert shapely.equals_exact(taken, polygons[index], tolerance=0).all()
    both = RaggedPolygons.concat([ragged.take(index[:10]), RaggedPolygons.empty(), ragged])
    expected = np.concatenate([polygons[index[:10]], polygons])
    assert shapely.equals_exact(both.to_shapely(), expected, tolerance=0).all()
    assert len(RaggedPolygons.concat([])) == 0 and len(ragged.take(np.zeros(0, int))) == 0


def test_mapped_is_shapelys_transform(rng):
    polygons = _polygons(rng)
    matrix = np.array([[30.0, 0.5], [-0.25, -30.0]])
    shift = np.array([101985.0, 2826915.0])
    got = RaggedPolygons.from_shapely(polygons).mapped(matrix, shift).to_shapely()
    expected = shapely.transform(polygons, lambda xy: xy @ matrix + shift)
    assert shapely.equals_exact(got, expected, tolerance=0).all()


def test_a_multipolygon_has_no_ragged_form():
    square = shapely.box(0, 0, 1, 1)
    multi = shapely.multipolygons([square, shapely.box(2, 2, 3, 3)])
    assert RaggedPolygons.from_shapely(np.array([square, multi], dtype=object)) is None


def test_concat_ranges_is_the_concatenated_aranges(rng):
    starts = rng.integers(0, 50, 30)
    lengths = rng.integers(0, 4, 30)  # empty ranges included
    expected = np.concatenate([np.arange(s, s + n) for s, n in zip(starts, lengths, strict=True)])
    np.testing.assert_array_equal(concat_ranges(starts, lengths), expected)
    assert concat_ranges(starts[:0], lengths[:0]).size == 0
