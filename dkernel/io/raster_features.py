"""An image's pixels as features, and per-pixel results back on its grid.

An image (see :mod:`dkernel.io.raster`) is cut into full-width row strips; the features of
its valid pixels (:func:`raster_features`) are a Dask array with one chunk per strip, and
per-pixel labels or scores go back onto the ``(y, x)`` grid one strip per task
(:func:`labels_on_grid`), or at once for labels in memory (:func:`labels_to_raster`).
"""

from __future__ import annotations

import operator
from typing import Any

import dask.array as da
import numpy as np
import rioxarray  # noqa: F401  (registers the .rio accessor)
import xarray as xr
from dask.base import tokenize
from dask.highlevelgraph import HighLevelGraph

from dkernel.errors import InvalidInputError
from dkernel.io.data import MAX_COORD_SCALE, SCALES, LoadedData
from dkernel.io.pixels import (
    STRIP_PIXELS,
    features_graph,
    grid_graph,
    strip_rows,
    summaries,
    valid_graph,
)
from dkernel.runtime.progress import compute_parts


def image_from_array(
    cube: Any,
    *,
    layout: str = "yxb",
    nodata: float | None = None,
    chunk_rows: int | None = None,
    name: str = "image",
) -> xr.DataArray:
    """Wrap an in-memory or Dask array as a ``(band, y, x)`` image without georeferencing.

    ``layout`` is ``'yxb'`` (rows, cols, bands) or ``'byx'``; ``y``/``x`` are pixel indices.
    """
    if layout not in ("yxb", "byx"):
        raise InvalidInputError(f"layout must be 'yxb' or 'byx'; got {layout!r}.")
    arr = cube if isinstance(cube, da.Array) else np.asarray(cube)
    if arr.ndim == 2:
        arr = arr[..., None] if layout == "yxb" else arr[None]
    if arr.ndim != 3:
        raise InvalidInputError(f"an image must be 2-D or 3-D; got shape {arr.shape}.")
    if layout == "yxb":
        arr = arr.transpose(2, 0, 1)
    n_rows, n_cols = int(arr.shape[1]), int(arr.shape[2])
    rows = chunk_rows or strip_rows(n_rows, n_cols)
    arr = da.asarray(arr).rechunk((-1, rows, -1))
    valid = valid_graph(arr, nodata)
    image = xr.DataArray(
        arr,
        dims=("band", "y", "x"),
        coords={
            "band": np.arange(1, arr.shape[0] + 1),
            "y": np.arange(n_rows, dtype=np.float64),
            "x": np.arange(n_cols, dtype=np.float64),
            "valid": (("y", "x"), valid),
        },
        name=name,
    )
    return image


def raster_features(
    image: xr.DataArray, *, scale: str = "minmax", coord_scale: float = 0.25
) -> tuple[da.Array, list[str], dict[str, Any]]:
    """Features of the valid pixels: scaled band values plus pixel coordinates in [0, c].

    Parameters
    ----------
    image : DataArray (band, y, x) with a ``valid`` coordinate
    scale : {'minmax', 'standardize', 'none'}
        Per-band scaling over the valid pixels: to [0, 1], to zero mean / unit variance, or
        raw values.
    coord_scale : float
        c: the column and row indices are multiplied by ``c / (max(rows, cols) - 1)`` (the
        longer side spans [0, c], aspect kept). 0 drops the coordinates.

    Returns
    -------
    X : dask array (n_valid, n_bands [+ 2]) float32, chunked by row strips of the image
    names : list of str
    stats : dict
        Per-band offsets and scales used (JSON-serialisable).

    Raises
    ------
    InvalidInputError
        An unknown ``scale``, ``coord_scale`` outside [0, 10⁶], pixels that are not real
        numbers (complex values are never cast silently), no valid pixel, one valid pixel,
        or a constant image (every valid pixel holds the same band values).

    Notes
    -----
    One pass over the image for the band statistics; the features themselves stay lazy.
    Memory per chunk O(strip pixels · features).
    """
    if scale not in SCALES:
        raise InvalidInputError(f"scale must be one of {', '.join(SCALES)}; got {scale!r}.")
    if not 0 <= coord_scale <= MAX_COORD_SCALE:  # NaN fails too
        raise InvalidInputError(
            f"coord_scale must be in [0, {MAX_COORD_SCALE:g}] (the bands span about [0, 1]); "
            f"got {coord_scale!r}."
        )
    if "valid" not in image.coords:
        raise InvalidInputError(
            "the image has no 'valid' mask coordinate; open it with dkernel.io."
        )
    check_pixel_dtype(image)
    n_bands, n_rows, n_cols = (int(s) for s in image.shape)
    data, valid = image_strips(image)
    counts, summary = summaries(data, valid)
    if summary["n"] == 0:
        raise InvalidInputError("every pixel of the image is nodata; nothing to cluster.")
    check_not_constant(image, summary)
    if scale == "minmax":
        lo, hi = summary["min"], summary["max"]
        offset, width = lo.astype(np.float64), (hi - lo).astype(np.float64)
    elif scale == "standardize":
        offset, width = summary["mean"], summary["std"]
    else:
        offset, width = np.zeros(n_bands), np.ones(n_bands)
    width = np.where(width > 0, width, 1.0)
    names = [f"band_{b}" if not isinstance(b, str) else str(b) for b in _band_labels(image)]
    factor = 0.0
    if coord_scale > 0:
        factor = float(np.float32(coord_scale / max(1, max(n_rows, n_cols) - 1)))
        names += ["col_scaled", "row_scaled"]
    X = features_graph(data, valid, counts, offset, width, factor)
    stats = {
        "scale": scale,
        "offset": offset.tolist(),
        "width": width.tolist(),
        "coord_scale": float(coord_scale),
        "n_valid": int(summary["n"]),
    }
    return X, names, stats


def check_pixel_dtype(image: xr.DataArray) -> None:
    """Refuse an image whose values are not real numbers (complex, text, dates, objects):
    casting complex pixels to float32 would drop their imaginary part silently.

    Raises
    ------
    InvalidInputError
        Naming the dtype and the fix.
    """
    dtype = np.dtype(image.dtype)
    if dtype.kind in "biuf":
        return
    source = image.attrs.get("source", "the image")
    fix = (
        "Choose what to cluster and write it as real bands first, e.g. numpy.abs(z) and "
        "numpy.angle(z), or z.real and z.imag, as separate bands."
        if dtype.kind == "c"
        else "Convert it to integer or floating-point bands."
    )
    raise InvalidInputError(
        f"{source} holds {dtype.name} pixels; dkernel reads real-valued bands (integer or "
        f"floating point) and does not cast {dtype.name} silently. {fix}"
    )


def check_not_constant(image: xr.DataArray, summary: dict[str, Any]) -> None:
    """Refuse an image whose valid pixels all hold the same band values (or that has one
    valid pixel): there is nothing to cluster, and the methods would fail later, inside the
    cluster, with a message about their numerics."""
    source = image.attrs.get("source", "the image")
    n = int(summary["n"])
    if n == 1:
        raise InvalidInputError(
            f"{source} has one valid pixel; there is nothing to cluster. Check the image and "
            "its nodata value."
        )
    if np.all(np.asarray(summary["max"]) == np.asarray(summary["min"])):
        values = ", ".join(f"{float(v):g}" for v in np.asarray(summary["min"])[:8])
        raise InvalidInputError(
            f"{source} is constant: all {n:,} valid pixels hold the same band values "
            f"({values}), so there is nothing to cluster. Check the image, its bands and its "
            "nodata value."
        )


def _band_labels(image: xr.DataArray) -> list[Any]:
    return [int(b) if isinstance(b, np.integer | int) else b for b in image["band"].values]


def work_rows(read_rows: tuple[int, ...], n_cols: int) -> tuple[int, ...]:
    """Row strips to compute on: every read strip split into near-equal parts of at most
    about :data:`STRIP_PIXELS` pixels.

    Reads follow the file's tiles (a 512-row strip of a 10 980-wide scene is 5.6 · 10⁶
    pixels); splitting a read strip after it is read keeps one decode per tile while the work
    per task, and so a worker's memory, no longer grows with the scene's width.

    >>> len(work_rows((512, 512), 10980)), max(work_rows((512, 512), 10980))  # 22 per tile row
    (44, 24)
    >>> work_rows((512, 512), 1000)
    (256, 256, 256, 256)
    >>> work_rows((330, 330, 58), 791)  # the demo scene: already small enough
    (330, 330, 58)
    """
    out: list[int] = []
    for rows in read_rows:
        parts = max(1, -(-int(rows) * max(1, n_cols) // STRIP_PIXELS))
        parts = min(parts, int(rows))
        base, extra = divmod(int(rows), parts)
        out.extend(base + (1 if i < extra else 0) for i in range(parts))
    return tuple(out)


def image_strips(image: xr.DataArray) -> tuple[da.Array, da.Array]:
    """The image's bands and its valid mask as Dask arrays chunked in the same row strips
    (:func:`work_rows` of the image's read strips).

    A read strip is split by :func:`split_row_chunks`: each work strip is a key of its own,
    so a worker that computes on a strip fetches that strip, not the whole read strip.
    """
    data = image.data if isinstance(image.data, da.Array) else da.asarray(image.data)
    data = data.rechunk((-1, data.chunks[1], -1))
    valid = image["valid"].data
    valid = valid if isinstance(valid, da.Array) else da.from_array(np.asarray(valid, dtype=bool))
    valid = valid.rechunk((data.chunks[1], -1))
    parts = [work_rows((rows,), int(data.shape[2])) for rows in data.chunks[1]]
    return split_row_chunks(data, parts), split_row_chunks(valid, parts)


def _row_views(block: np.ndarray, parts: tuple[int, ...]) -> list[np.ndarray]:
    """Consecutive row ranges (the second-to-last axis) of ``block``, as views."""
    edges = np.cumsum((0, *parts))
    return [block[..., a:b, :] for a, b in zip(edges[:-1], edges[1:], strict=True)]


def split_row_chunks(arr: da.Array, parts: list[tuple[int, ...]]) -> da.Array:
    """``arr`` (rows on its second-to-last axis, one chunk on every other axis) with its
    row chunk ``j`` split into chunks of ``parts[j]`` rows.

    Unlike ``rechunk``, which gives every new chunk a task that slices the old chunk (fused
    into whatever consumes it, so a consumer on another worker fetches the whole old chunk),
    one task per old chunk cuts it into views and every new chunk is a key of its own: only
    that chunk moves between workers. ``arr`` itself when nothing is split.
    """
    axis = arr.ndim - 2
    if all(len(p) == 1 for p in parts):
        return arr
    token = tokenize(arr.name, parts)
    cut, name = f"cut-rows-{token}", f"row-part-{token}"
    lead = (0,) * axis
    graph: dict = {}
    i = 0
    for j, rows in enumerate(parts):
        graph[(cut, j)] = (_row_views, (arr.name, *lead, j, 0), tuple(rows))
        for k in range(len(rows)):
            graph[(name, *lead, i, 0)] = (operator.getitem, (cut, j), k)
            i += 1
    chunks = (*arr.chunks[:axis], tuple(r for rows in parts for r in rows), arr.chunks[-1])
    layers = HighLevelGraph.from_collections(name, graph, dependencies=[arr])
    return da.Array(layers, name, chunks, dtype=arr.dtype, meta=arr._meta)


def strip_counts(image: xr.DataArray, X: Any = None) -> list[int]:
    """Valid pixels per row strip: ``X``'s row chunks when it is the image's feature array,
    else one pass over the mask."""
    data, valid = image_strips(image)
    if isinstance(X, da.Array) and len(X.chunks[0]) == len(data.chunks[1]):
        return [int(c) for c in X.chunks[0]]
    return [int(c) for c in compute_parts([m.sum() for m in valid.blocks])]


def labels_on_grid(
    values: Any,
    image: xr.DataArray,
    counts: list[int] | None = None,
    *,
    nodata: Any = -1,
    dtype: Any = np.int32,
) -> da.Array:
    """Per-valid-pixel ``values`` (labels, scores) as a lazy ``(y, x)`` Dask array, one task
    per row strip (``nodata`` where a pixel has no data); nothing the size of the scene is
    built in the client. ``counts``: valid pixels per strip (:func:`strip_counts`)."""
    data, valid = image_strips(image)
    counts = strip_counts(image) if counts is None else counts
    return grid_graph(values, data, valid, counts, nodata=nodata, dtype=dtype)


def raster_to_loaded(
    image: xr.DataArray,
    *,
    scale: str = "minmax",
    coord_scale: float = 0.25,
    labels: np.ndarray | None = None,
    meta: dict[str, Any] | None = None,
) -> LoadedData:
    """A :class:`LoadedData` for raster methods: X = features of the valid pixels.

    ``labels`` (rows, cols), if given, become ``y`` for the valid pixels (metrics only). The
    ``valid`` mask stays lazy.
    """
    X, names, stats = raster_features(image, scale=scale, coord_scale=coord_scale)
    y = None
    if labels is not None:
        y = np.asarray(labels)[np.asarray(image["valid"].values, dtype=bool)]
    info = {
        "shape": [int(s) for s in image.shape],
        "n_valid": stats.pop("n_valid"),
        "features": stats,
        **(meta or {}),
    }
    if image.rio.crs is not None:
        info["crs"] = image.rio.crs.to_string()
        info["transform"] = list(image.rio.transform())[:6]
    return LoadedData(X=X, y=y, feature_names=names, meta=info, raster=image)


def labels_to_raster(labels: np.ndarray, valid: np.ndarray, *, nodata: int = -1) -> np.ndarray:
    """Scatter per-valid-pixel labels back onto the image grid (nodata elsewhere)."""
    valid = np.asarray(valid, dtype=bool)
    labels = np.asarray(labels)
    if labels.shape[0] != int(valid.sum()):
        raise InvalidInputError(
            f"{labels.shape[0]} labels for {int(valid.sum())} valid pixels; they must match."
        )
    out = np.full(valid.shape, nodata, dtype=np.int32)
    out[valid] = labels
    return out
