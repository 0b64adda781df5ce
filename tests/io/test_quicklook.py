"""The quick-look's drawing (dkernel.io.quicklook)."""

import numpy as np

from dkernel.io.palette import class_colors
from dkernel.io.quicklook import label_rgba


def _render(image_args: dict) -> np.ndarray:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(3, 2))
    canvas = FigureCanvasAgg(fig)
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_axis_off()
    ax.imshow(extent=(0, 37, 0, 23), interpolation="nearest", **image_args)
    canvas.draw()
    return np.asarray(canvas.buffer_rgba()).copy()


def test_label_rgba_draws_the_pixels_of_the_masked_colormap(rng):
    # the reference: the label map masked below 0 through a colormap of the class colours
    # with the nodata colour for masked pixels, which the map panel was drawn with before
    from matplotlib.colors import ListedColormap

    labels = rng.integers(-1, 7, size=(23, 37))
    colors = class_colors(7)
    nodata = (0.85, 0.85, 0.85, 1.0)
    cmap = ListedColormap(colors).with_extremes(bad=nodata)
    reference = _render(
        {"X": np.ma.masked_less(labels, 0), "cmap": cmap, "vmin": -0.5, "vmax": 6.5}
    )
    fast = _render({"X": label_rgba(labels, colors, nodata)})
    np.testing.assert_array_equal(fast, reference)
