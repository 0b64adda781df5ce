"""Issue 32: on the demo scene a land-cover class does not depend on where a pixel lies.

With pixel coordinates among the affinity's features (``coordinates='both'``) at the former demo
setting ``coord_scale: 1.0``, MSSC split the open sea along a straight line: the coordinates,
not the colours, drew that class boundary. The check here is causal rather than geometric: the
scene is cut in two down the middle and its halves swapped, so every pixel keeps its colour and
its neighbours (but for the seam) and moves half a scene across. Classes that follow the colours
come back the same (rolled back, ARI near 1); a boundary drawn by position moves with the
coordinates and the label maps disagree. A straight line through the sea is what a position-drawn
boundary looks like; a coastline stays where the colours are.
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import adjusted_rand_score

from dkernel.io.raster import image_from_array, load_demo_landsat, raster_to_loaded
from dkernel.jobs.demo import LANDSAT_DEMO
from dkernel.meanshift.estimators import MSSC

#: Every third row and column of the scene (about 42 000 valid pixels): the same landscape
#: at a third of the cost.
STEP = 3


def _demo_cube() -> np.ndarray:
    data = load_demo_landsat(scale="none", coord_scale=0)
    cube = np.asarray(data.raster.values, dtype=np.float32)[:, ::STEP, ::STEP]
    valid = np.asarray(data.raster["valid"].values, dtype=bool)[::STEP, ::STEP]
    return np.where(valid[None], cube, np.nan)


def _label_map(cube: np.ndarray, coord_scale: float, **params) -> np.ndarray:
    image = image_from_array(cube.transpose(1, 2, 0), layout="yxb", name="demo")
    data = raster_to_loaded(image, scale=LANDSAT_DEMO["data"]["scale"], coord_scale=coord_scale)
    valid = np.asarray(data.raster["valid"].values, dtype=bool)
    est = MSSC(n_bands=cube.shape[0], random_state=LANDSAT_DEMO["seed"], **params)
    out = np.full(valid.shape, -1, dtype=np.int64)
    out[valid] = est.fit(np.asarray(data.X)).labels_
    return out


def _swap_halves_agreement(cube: np.ndarray, coord_scale: float, **params) -> float:
    half = cube.shape[2] // 2
    a = _label_map(cube, coord_scale, **params)
    b = np.roll(_label_map(np.roll(cube, half, axis=2), coord_scale, **params), -half, axis=1)
    both = (a >= 0) & (b >= 0)
    return adjusted_rand_score(a[both], b[both])


@pytest.mark.slow
def test_demo_classes_follow_colours_not_position():
    cube = _demo_cube()
    keys = set(MSSC().get_params())
    params = {k: v for k, v in LANDSAT_DEMO["params"].items() if k in keys}
    assert "coordinates" not in params  # the demo runs MSSC's default
    # the demo as shipped: its classes come back when the halves swap places
    assert _swap_halves_agreement(cube, LANDSAT_DEMO["data"]["coord_scale"], **params) >= 0.9
    # the former demo (coordinates in the affinity, scaled to [0, 1]): they do not (0.59 here)
    former = _swap_halves_agreement(cube, 1.0, coordinates="both", **params)
    assert former < 0.75
