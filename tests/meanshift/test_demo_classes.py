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

import ast
import inspect
from pathlib import Path

import numpy as np
import pytest
from sklearn.metrics import adjusted_rand_score

import dkernel
from dkernel.io.raster import image_from_array, load_demo_landsat, raster_to_loaded
from dkernel.io.registry import get_reader
from dkernel.jobs.demo import LANDSAT_DEMO
from dkernel.meanshift.estimators import MSSC

README = Path(__file__).resolve().parents[2] / "README.md"

#: Every third row and column of the scene (about 42 000 valid pixels): the same landscape
#: at a third of the cost.
STEP = 3


def _demo_cube() -> np.ndarray:
    data = load_demo_landsat(scale="none", coord_scale=0)
    cube = np.asarray(data.raster.values, dtype=np.float32)[:, ::STEP, ::STEP]
    valid = np.asarray(data.raster["valid"].values, dtype=bool)[::STEP, ::STEP]
    return np.where(valid[None], cube, np.nan)


def _demo_data(name: str):
    """The demo job's reader setting ``name``: from its spec, else the reader's default."""
    if name in LANDSAT_DEMO["data"]:
        return LANDSAT_DEMO["data"][name]
    reader = get_reader(LANDSAT_DEMO["data"]["reader"])
    return next(p.default for p in reader.params if p.name == name)


def _label_map(cube: np.ndarray, coord_scale: float, **params) -> np.ndarray:
    image = image_from_array(cube.transpose(1, 2, 0), layout="yxb", name="demo")
    data = raster_to_loaded(image, scale=_demo_data("scale"), coord_scale=coord_scale)
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
    assert _swap_halves_agreement(cube, _demo_data("coord_scale"), **params) >= 0.9
    # the former demo (coordinates in the affinity, scaled to [0, 1], 5 classes): they do not
    former = _swap_halves_agreement(cube, 1.0, coordinates="both", n_clusters=5, **params)
    assert former < 0.75


def _keywords(call: ast.Call) -> dict:
    return {k.arg: ast.literal_eval(k.value) for k in call.keywords}


def _readme_call() -> tuple[dict, dict]:
    """The keywords of the README's ``dkernel.cluster_image(cube, dkernel.MSSC(...), ...)``."""
    line = next(x for x in README.read_text().splitlines() if "dkernel.cluster_image(cube" in x)
    call = ast.parse(line.split("#")[0].strip()).body[0].value
    assert isinstance(call, ast.Call) and ast.unparse(call.func) == "dkernel.cluster_image"
    est = call.args[1]
    assert ast.unparse(est.func) == "dkernel.MSSC" and not est.args
    return _keywords(est), _keywords(call)


def test_cluster_image_defaults_are_the_image_readers():
    defaults = inspect.signature(dkernel.cluster_image).parameters
    for reader in ("demo-landsat", "geotiff", "zarr-raster"):
        params = {p.name: p.default for p in get_reader(reader).params}
        for name in ("scale", "coord_scale"):
            assert defaults[name].default == params[name], (reader, name)


@pytest.mark.slow
def test_readme_cluster_image_draws_the_demo_map():
    """The README's ``cluster_image`` block and ``dkernel demo`` give the same classes."""
    rioxarray = pytest.importorskip("rioxarray")
    from dkernel.io.raster import package_data_path

    est_kw, image_kw = _readme_call()
    # the same choices: classes, band scaling, coordinates; MSSC's defaults otherwise
    # the number of classes chosen by both ('auto', the default), not written in either
    assert "n_clusters" not in est_kw and "n_clusters" not in LANDSAT_DEMO["params"]
    defaults = inspect.signature(dkernel.cluster_image).parameters
    for name in ("scale", "coord_scale"):
        assert image_kw.get(name, defaults[name].default) == _demo_data(name), name
    keys = set(MSSC().get_params())
    params = {k: v for k, v in LANDSAT_DEMO["params"].items() if k in keys}
    assert params == {k: v for k, v in est_kw.items() if k != "random_state"}

    # both on the same strided subscene: the demo's features and estimator, and the README call
    cube = _demo_cube()
    demo = _label_map(cube, _demo_data("coord_scale"), **params)
    scene = rioxarray.open_rasterio(package_data_path("RGB.byte.tif"))
    sub = scene.isel(y=slice(None, None, STEP), x=slice(None, None, STEP))
    est_kw.setdefault("random_state", LANDSAT_DEMO["seed"])
    readme = dkernel.cluster_image(sub, dkernel.MSSC(**est_kw), **image_kw).values
    assert readme.shape == demo.shape
    both = (demo >= 0) & (readme >= 0)
    assert both.sum() >= 0.99 * max((demo >= 0).sum(), (readme >= 0).sum())
    assert np.unique(readme[readme >= 0]).size == np.unique(demo[demo >= 0]).size >= 2
    assert adjusted_rand_score(demo[both], readme[both]) > 0.99
    assert adjusted_rand_score(demo[both], readme[both]) >= 0.95
