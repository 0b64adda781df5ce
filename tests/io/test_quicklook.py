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


def _look(model_order=None):
    from dkernel.io.quicklook import QuickLook

    labels = np.arange(12).reshape(3, 4) % 3
    return QuickLook(
        views=(("image", np.zeros((3, 4, 3), np.uint8)),),
        labels=labels,
        extent=(0.0, 4.0, 0.0, 3.0),
        colors=class_colors(3),
        nodata_color=(0.85, 0.85, 0.85, 1.0),
        legend=("0", "1", "2"),
        legend_title="cluster",
        map_title="clusters (3)",
        axis_labels=("x", "y"),
        model_order=model_order,
    )


def test_the_model_order_panel_is_drawn_only_with_evidence(tmp_path):
    from dkernel.io.quicklook import OrderEvidence, draw_quicklook, quicklook_figure

    order = OrderEvidence(np.arange(2, 7), np.array([0.1, 2.0, 0.3, np.nan, 0.2]), 3, "eigengap")
    plain, with_order = quicklook_figure(_look()), quicklook_figure(_look(order))
    assert len(plain.axes) == 2 and len(with_order.axes) == 3
    panel = with_order.axes[-1]
    assert panel.get_title() == "k = 3 (eigengap)"
    np.testing.assert_array_equal(panel.lines[0].get_xdata(), order.candidates)
    assert panel.lines[-1].get_xdata().tolist() == [3]  # the chosen k, marked
    assert [ax.get_title() for ax in with_order.axes[:2]] == [a.get_title() for a in plain.axes]
    a, b = (
        draw_quicklook(tmp_path / "a.png", _look()),
        draw_quicklook(tmp_path / "b.png", _look(order)),
    )
    assert a.read_bytes() != b.read_bytes()
