"""The array-traced polygons of pixel components against GDAL's polygonizer
(``rasterio.features.shapes``), the slow, obvious reference."""

import numpy as np
import pytest
import rasterio.features
import shapely
from affine import Affine
from scipy import ndimage

from dkernel.io.pixel_polygons import component_polygons


def components(labels: np.ndarray) -> np.ndarray:
    """4-connected components of equal label (negative: none), numbered from 0."""
    comp = np.full(labels.shape, -1, dtype=np.int32)
    n = 0
    for value in np.unique(labels[labels >= 0]):
        lab, count = ndimage.label(labels == value)
        comp[lab > 0] = lab[lab > 0] - 1 + n
        n += count
    return comp


def reference(comp: np.ndarray, row0: int = 0) -> dict[int, shapely.Polygon]:
    shapes = rasterio.features.shapes(comp, mask=comp >= 0, transform=Affine.translation(0, row0))
    return {int(value): shapely.geometry.shape(geom) for geom, value in shapes}


def check_same(comp: np.ndarray, row0: int = 0) -> np.ndarray:
    polygons, ids = component_polygons(comp, row0)
    expected = reference(comp, row0)
    assert ids.tolist() == sorted(expected)
    want = np.array([expected[i] for i in ids.tolist()], dtype=object)
    assert shapely.is_valid(polygons).all()
    assert shapely.equals(polygons, want).all()
    # corners only: as many vertices as GDAL's polygonizer writes
    assert shapely.get_num_coordinates(polygons).sum() == shapely.get_num_coordinates(want).sum()
    return polygons


@pytest.mark.parametrize("seed", range(40))
def test_random_label_maps_match_gdal(seed):
    rng = np.random.default_rng(seed)
    rows, cols = rng.integers(1, 40, 2)
    labels = rng.integers(-1, int(rng.integers(1, 5)), (rows, cols))
    if seed % 2:  # blobs: larger components with holes
        labels = ndimage.zoom(labels, 3, order=0)[:rows, :cols]
    check_same(components(labels), row0=int(rng.integers(0, 100)))


def test_component_touching_itself_at_a_corner_is_an_exterior_and_a_hole():
    # class 0 surrounds the 1 and touches itself diagonally at the 1's top-left corner
    labels = np.array(
        [
            [9, 9, 0, 0],
            [9, 0, 1, 0],
            [9, 0, 0, 0],
        ]
    )
    polygons = check_same(components(labels))
    # the 1 is a hole meeting the exterior at a point, not an inward fold of one ring
    assert sorted(len(p.interiors) for p in polygons) == [0, 0, 1]


def test_holes_nested_and_nodata():
    labels = np.zeros((9, 9), dtype=int)
    labels[1:8, 1:8] = 1
    labels[2:7, 2:7] = -1  # nodata inside: a hole
    labels[3:6, 3:6] = 2  # an island in the hole
    labels[4, 4] = 0  # and a hole in the island, of the outer class (another component)
    polygons = check_same(components(labels))
    assert sorted(len(p.interiors) for p in polygons) == [0, 1, 1, 1]


def test_no_components_and_single_pixel():
    polygons, ids = component_polygons(np.full((3, 4), -1))
    assert polygons.size == 0 and ids.size == 0
    polygons, ids = component_polygons(np.array([[0]]), row0=5)
    assert ids.tolist() == [0]
    assert shapely.equals(polygons[0], shapely.box(0, 5, 1, 6))


def test_rejects_other_shapes():
    with pytest.raises(ValueError, match="2-d"):
        component_polygons(np.zeros(3, dtype=int))
