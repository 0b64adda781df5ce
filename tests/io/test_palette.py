"""The class palette (dkernel.io.palette): matplotlib's colours without matplotlib."""

from __future__ import annotations

import numpy as np
import pytest

from dkernel.io.palette import class_colors


def _matplotlib_class_colors(n):
    """The palette as first written, from matplotlib's colormaps (the reference)."""
    import matplotlib
    from matplotlib.colors import hsv_to_rgb

    if n <= 10:
        return matplotlib.colormaps["tab10"](np.arange(n))
    if n <= 20:
        order = np.r_[np.arange(0, 20, 2), np.arange(1, 20, 2)][:n]
        return matplotlib.colormaps["tab20"](order)
    hue = (np.arange(n) * 0.618033988749895) % 1.0
    sat = np.where(np.arange(n) % 2 == 0, 0.75, 0.5)
    val = np.where(np.arange(n) % 3 == 0, 0.95, 0.75)
    return np.c_[hsv_to_rgb(np.c_[hue, sat, val]), np.ones(n)]


@pytest.mark.parametrize("n", [1, 2, 5, 10, 11, 19, 20, 21, 40, 257])
def test_class_colors_are_matplotlibs(n):
    np.testing.assert_allclose(class_colors(n), _matplotlib_class_colors(n), rtol=0, atol=1e-12)


def test_class_colors_keep_neighbouring_clusters_apart():
    for n in (2, 5, 12, 20, 40):
        rgb = class_colors(n)[:, :3]
        assert rgb.shape == (n, 3)
        step = np.linalg.norm(np.diff(rgb, axis=0), axis=1)
        # tab20 in order gives clusters 0/1 a blue and its own pale shade
        assert step[0] > 0.6 and np.min(step) > 0.15, n
        assert len({tuple(np.round(c, 3)) for c in rgb}) == n
