"""The colours of the class maps: the label COG's colour table, the class table and the
quick-look share one palette.

NumPy only: the COG and the class table are written without importing a plotting library
(matplotlib takes 0.5 s to import, and the quick-look is drawn in a process of its own,
:mod:`dkernel.io.quicklook`). The values are matplotlib's qualitative ``tab20`` colormap
(``tab10`` is its strong half), which a test checks against matplotlib itself.
"""

from __future__ import annotations

import numpy as np

__all__ = ["NODATA_COLOR", "class_colors"]

#: matplotlib's ``tab20``: each ``tab10`` colour followed by its lighter shade.
_TAB20 = (
    "1f77b4 aec7e8 ff7f0e ffbb78 2ca02c 98df8a d62728 ff9896 9467bd c5b0d5 "
    "8c564b c49c94 e377c2 f7b6d2 7f7f7f c7c7c7 bcbd22 dbdb8d 17becf 9edae5"
).split()

#: What the quick-look draws where a pixel has no label (outside the scene, or masked).
NODATA_COLOR = (0.82, 0.82, 0.82, 1.0)


def _rgba(hex_colors: list[str]) -> np.ndarray:
    rgb = np.array([[int(h[i : i + 2], 16) for i in (0, 2, 4)] for h in hex_colors]) / 255.0
    return np.c_[rgb, np.ones(len(hex_colors))]


def _hsv_to_rgb(hsv: np.ndarray) -> np.ndarray:
    """RGB of ``(n, 3)`` hue, saturation, value in [0, 1] (the hexcone model)."""
    h, s, v = hsv.T
    sector = np.floor(h * 6.0).astype(int) % 6
    f = h * 6.0 - np.floor(h * 6.0)
    p, q, t = v * (1 - s), v * (1 - s * f), v * (1 - s * (1 - f))
    table = np.stack([(v, t, p), (q, v, p), (p, v, t), (p, q, v), (t, p, v), (v, p, q)])
    return np.stack([table[sector, c, np.arange(h.size)] for c in range(3)], axis=1)


def class_colors(n: int) -> np.ndarray:
    """``n`` RGBA colours (``(n, 4)``, in [0, 1]), neighbouring classes far apart in hue.

    tab10 up to 10 classes; then tab20's strong shades before its pale ones (tab20 in order
    pairs a colour with its own lighter shade, so clusters 0/1 would be two blues); beyond 20,
    hues spaced by the golden angle.
    """
    if n <= 20:
        order = np.r_[np.arange(0, 20, 2), np.arange(1, 20, 2)][:n]
        return _rgba([_TAB20[i] for i in order])
    i = np.arange(n)
    hue = (i * 0.618033988749895) % 1.0
    sat = np.where(i % 2 == 0, 0.75, 0.5)
    val = np.where(i % 3 == 0, 0.95, 0.75)
    return np.c_[_hsv_to_rgb(np.c_[hue, sat, val]), np.ones(n)]
