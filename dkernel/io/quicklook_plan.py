"""The quick-look PNG's contents, prepared from an image and its label map: the stretched
panels, a strided label map, the colours and the legend (:func:`quicklook_plan`), drawn by
:func:`dkernel.io.quicklook.draw_quicklook` (:func:`write_quicklook` does both)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import dask
import dask.array as da
import numpy as np
import rioxarray  # noqa: F401  (registers the .rio accessor)
import xarray as xr

from dkernel.io.palette import NODATA_COLOR, class_colors
from dkernel.io.quicklook import OrderEvidence, QuickLook, draw_quicklook
from dkernel.runtime.progress import compute_parts


def _rgb(image: xr.DataArray) -> np.ndarray:
    """The quick-look's RGB (rows, cols, 3) float64 in [0, 1]: three bands, each stretched
    between its 2nd and 98th percentile over the valid pixels; white where not valid.

    Band by band into the output in place: besides the output, one band in its own dtype and
    one float64 band at a time (no float64 copy of the three bands).
    """
    n_bands = int(image.sizes["band"])
    pick = [0, 1, 2] if n_bands >= 3 else [0] * 3
    if n_bands > 3:  # hyperspectral: spread three bands over the spectrum
        pick = [int(n_bands * f) for f in (0.75, 0.5, 0.25)]
    raw = np.asarray(image.isel(band=pick).values)
    valid = np.asarray(image["valid"].values, dtype=bool)
    rgb = np.empty((*raw.shape[1:], 3), dtype=np.float64)
    band = np.empty(raw.shape[1:], dtype=np.float64)
    for i in range(3):
        band[...] = raw[i]
        lo, hi = np.percentile(band[valid], [2, 98]) if valid.any() else (0.0, 1.0)
        band -= lo
        band /= hi - lo if hi > lo else 1.0
        np.clip(band, 0, 1, out=rgb[..., i])
    rgb[~valid] = 1.0
    return rgb


def _axis_labels(crs: Any) -> tuple[str, str]:
    """Quick-look axis titles: easting/northing with unit and CRS, or pixel indices."""
    if crs is None:
        return "column", "row"
    name = crs.to_string()
    if crs.is_geographic:
        return f"longitude (°, {name})", f"latitude (°, {name})"
    unit = crs.linear_units if crs.linear_units not in (None, "unknown") else "map units"
    unit = {"metre": "m", "meter": "m"}.get(unit, unit)
    return f"easting ({unit}, {name})", f"northing ({unit}, {name})"


#: Longest side of the quick-look's panels in pixels: larger scenes are drawn from a strided
#: read (every k-th row and column) of the image and the label map. Each panel of the 12 × 5
#: inch, 90 dpi figure is about 500 px wide, so 1000 is still 2× oversampled, and the
#: figure's memory stops growing with the scene from 10⁶ pixels on.
QUICKLOOK_PIXELS = 1000


def _label_counts(label_map: Any) -> tuple[np.ndarray, int]:
    """Pixels per label and pixels without one (< 0), strip by strip for a lazy map."""
    arr = label_map.data if isinstance(label_map, xr.DataArray) else label_map
    if not isinstance(arr, da.Array):
        arr = np.asarray(arr)
        return np.bincount(arr[arr >= 0].ravel()), int((arr < 0).sum())

    def count(block: np.ndarray) -> np.ndarray:
        return np.bincount(block[block >= 0].ravel())

    parts = compute_parts([dask.delayed(count)(b) for b in arr.to_delayed().ravel()])
    n = max((p.size for p in parts), default=0)
    counts = np.sum([np.pad(p, (0, n - p.size)) for p in parts], axis=0) if parts else np.zeros(0)
    return counts.astype(np.int64), int(arr.size - counts.sum())


def write_quicklook(
    path: str | os.PathLike,
    image: xr.DataArray,
    label_map: Any,
    *,
    title: str = "",
    panels: tuple[tuple[str, Any], ...] = (),
    class_names: tuple[str, ...] = (),
    model_order: Any = None,
) -> Path:
    """PNG with the image (2–98 % stretch) beside the cluster map, in map coordinates, with a
    legend of the clusters (share of the pixels) and of the pixels without a label.

    ``label_map`` is a ``(y, x)`` NumPy or Dask array (or DataArray). A scene longer than
    :data:`QUICKLOOK_PIXELS` on a side is drawn from every k-th row and column (a strided read
    of the image and the map, strip by strip); the legend's shares count every pixel.
    ``panels``: ``(title, band selection)`` pairs drawn instead of the whole image, each from
    ``image.isel(band=selection)`` (e.g. the two dates of a stacked pair); ``class_names``
    name the labels in the legend (``'change'``) instead of their numbers; ``model_order``, a
    store's ``/model_order`` dataset, adds a panel of score against k (the chosen k marked).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    look = quicklook_plan(
        image,
        label_map,
        title=title,
        panels=panels,
        class_names=class_names,
        model_order=model_order,
    )
    return draw_quicklook(path, look)


def quicklook_plan(
    image: xr.DataArray,
    label_map: Any,
    *,
    title: str = "",
    panels: tuple[tuple[str, Any], ...] = (),
    class_names: tuple[str, ...] = (),
    model_order: Any = None,
) -> QuickLook:
    """What :func:`write_quicklook` draws, in arrays and strings: the stretched panels, the
    strided label map, the colours and the legend's shares (see :func:`write_quicklook`).

    ``model_order``: a ``/model_order`` dataset (``n_clusters: auto``), drawn as a last panel
    of score against k with the chosen k marked; None: no such panel."""
    xs, ys = image["x"].values, image["y"].values
    extent = (float(xs[0]), float(xs[-1]), float(ys[-1]), float(ys[0]))
    counts, n_nodata = _label_counts(label_map)
    step = max(1, -(-max(len(ys), len(xs)) // QUICKLOOK_PIXELS))
    lab = label_map.data if isinstance(label_map, xr.DataArray) else label_map
    label_map = np.asarray(lab[::step, ::step])
    image = image.isel(y=slice(None, None, step), x=slice(None, None, step))
    n_lab = max(counts.size, 1)
    views = [(t, image.isel(band=sel)) for t, sel in panels] or [("image (2–98 % stretch)", image)]
    rgbs = []
    for view_title, view in views:
        rgb = _rgb(view)
        rgb[label_map < 0] = NODATA_COLOR[:3]
        # matplotlib's own rounding of float RGB (the same PNG, byte for byte), in an eighth
        # of the bytes that go to the helper process
        rgbs.append((view_title, (rgb * 255).astype(np.uint8)))
    names = [*class_names, *(str(i) for i in range(len(class_names), n_lab))]
    counts = np.pad(counts, (0, n_lab - counts.size))
    share = counts / max(int(counts.sum()), 1)
    legend = [f"{names[i]}: {100 * share[i]:.1f} % ({counts[i]:,} px)" for i in range(n_lab)]
    if n_nodata:
        legend.append(f"no data ({n_nodata:,} px)")
    return QuickLook(
        views=tuple(rgbs),
        labels=label_map,
        extent=extent,
        colors=class_colors(n_lab),
        nodata_color=NODATA_COLOR,
        legend=tuple(legend),
        legend_title="class: share of pixels" if class_names else "cluster: share of pixels",
        map_title=f"clusters ({n_lab})" if not class_names else "map",
        axis_labels=_axis_labels(image.rio.crs),
        title=title,
        model_order=None if model_order is None else OrderEvidence.from_dataset(model_order),
    )
