"""Cloud-Optimized GeoTIFF label maps: writer, class table and a structural validator.

:func:`write_label_cog` writes a label map as a COG (GDAL's COG driver: 512 × 512 tiles,
DEFLATE, internal overviews by the MODE of the labels, a colour table equal to the quick-look
palette :func:`dkernel.io.palette.class_colors`) window by window, so the label map may be a
NumPy array, a Dask array or a lazy ``(y, x)`` DataArray (e.g. read back from a Zarr store).
:func:`write_class_table` writes the per-class pixel counts, shares, colours and band means
as a CSV sidecar, computed strip by strip. :func:`validate_cog` checks the file layout the
way ``rio cogeo validate`` (and GDAL's ``validate_cloud_optimized_geotiff.py``) does, from the
TIFF directories read by :func:`tiff_ifds`, a small pure-Python TIFF/BigTIFF parser (both in
:mod:`dkernel.io.cog_layout`, importable from here as well).

Files as the COG spec lays them out (GDAL COG driver documentation, "File layout")::

    header | ghost area (GDAL_STRUCTURAL_METADATA) | IFD of the full image | IFDs of the
    overviews, largest first | tile data of the smallest overview | ... | tile data of the
    full image

so a reader fetches every directory with the first request and a zoomed-out view without
touching the full-resolution tiles.
"""

from __future__ import annotations

import csv
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dask
import dask.array as da
import numpy as np
import xarray as xr

from dkernel._validation import as_numpy
from dkernel.errors import InvalidInputError
from dkernel.io.cog_layout import (  # noqa: F401  (where they were)
    MAX_MAIN_IFD_OFFSET,
    TILE,
    TiffIFD,
    tiff_ifds,
    validate_cog,
)
from dkernel.io.gdal import GDAL_CACHE_MB
from dkernel.linalg import label_sums
from dkernel.rows import delayed_array
from dkernel.runtime.progress import compute_parts
from dkernel.storage.side_files import check_side_file, side_file

#: Columns per written window at most (4 tiles): a window is at most 512 × 2048 labels, so the
#: writer's memory does not grow with the width of the scene.
WINDOW_COLS = 4 * TILE
# ---------------------------------------------------------------------------------------
# writer
# ---------------------------------------------------------------------------------------


def label_file_dtype(max_label: int) -> tuple[np.dtype, int]:
    """The file's data type and nodata value for labels ``0 … max_label``.

    GDAL colour tables need Byte or UInt16 bands: ``uint8`` with nodata 255 while the
    largest label is < 255, else ``uint16`` with nodata 65535.
    """
    if max_label < 255:
        return np.dtype(np.uint8), 255
    if max_label < 65535:
        return np.dtype(np.uint16), 65535
    raise InvalidInputError(
        f"the largest label is {max_label}; a label GeoTIFF with a colour table holds labels "
        "up to 65534."
    )


@dataclass(frozen=True)
class LabelCOG:
    """What :func:`write_label_cog` wrote; usable as a path (``os.fspath``) to the COG.

    Attributes
    ----------
    path : Path
        The COG.
    nodata : int
        The file's nodata value (255 or 65535), not the store's -1.
    dtype : str
        ``'uint8'`` or ``'uint16'``.
    n_classes : int
        Colour-table entries for labels (largest label + 1).
    class_table : Path or None
        The ``<stem>.classes.csv`` sidecar, when written.
    """

    path: Path
    nodata: int
    dtype: str
    n_classes: int
    class_table: Path | None = None

    def __fspath__(self) -> str:
        return str(self.path)


def class_table_path(path: str | os.PathLike) -> Path:
    """The class table beside a label GeoTIFF: ``demo.labels.tif`` → ``demo.labels.classes.csv``."""
    path = Path(path)
    return path.with_name(f"{path.stem}.classes.csv")


def _as_lazy(label_map: Any) -> np.ndarray | da.Array:
    """A 2-D NumPy or Dask array from a NumPy/Dask array or a ``(y, x)`` DataArray."""
    if isinstance(label_map, xr.DataArray):
        if label_map.ndim != 2:
            raise InvalidInputError(
                f"a label map must be (y, x); got a DataArray with dims {label_map.dims}."
            )
        label_map = label_map.data
    arr = label_map if isinstance(label_map, da.Array) else np.asarray(label_map)
    if arr.ndim != 2:
        raise InvalidInputError(f"a label map must be 2-D (y, x); got shape {arr.shape}.")
    if not np.issubdtype(arr.dtype, np.integer):
        raise InvalidInputError(f"labels must be integers; got dtype {arr.dtype}.")
    return arr


def label_windows(
    n_rows: int, n_cols: int, *, max_cols: int | None = None
) -> list[tuple[int, int, int, int]]:
    """The windows the label COG is written in, ``(r0, r1, c0, c1)``, row strip by row strip.

    Strips of ``TILE`` (512) rows, each split into column spans of ``max_cols // TILE`` whole
    tiles (``max_cols`` default :data:`WINDOW_COLS`; the last span what remains), so a window
    holds at most ``TILE × max_cols`` labels whatever the scene's size.

    Parameters
    ----------
    n_rows, n_cols : int
        Shape of the label map.
    max_cols : int, optional
        Columns per window at most; at least ``TILE``.

    Returns
    -------
    list of tuple of int
        ``(r0, r1, c0, c1)`` of every window, rows then columns.

    Examples
    --------
    >>> label_windows(1000, 1000)
    [(0, 512, 0, 1000), (512, 1000, 0, 1000)]
    >>> [(c0, c1) for _, _, c0, c1 in label_windows(512, 10980)]
    [(0, 2048), (2048, 4096), (4096, 6144), (6144, 8192), (8192, 10240), (10240, 10980)]
    """
    max_cols = WINDOW_COLS if max_cols is None else int(max_cols)
    if max_cols < TILE:
        raise InvalidInputError(f"max_cols must be at least {TILE}; got {max_cols}.")
    tiles = -(-n_cols // TILE)
    per = max(1, max_cols // TILE)
    spans = [(t * TILE, min((t + per) * TILE, n_cols)) for t in range(0, tiles, per)]
    return [
        (r0, min(r0 + TILE, n_rows), c0, c1) for r0 in range(0, n_rows, TILE) for c0, c1 in spans
    ]


def _window(arr: np.ndarray | da.Array, r0: int, r1: int, c0: int, c1: int) -> np.ndarray:
    return as_numpy(arr[r0:r1, c0:c1])


def file_block(
    block: np.ndarray, *, nodata: int, file_nodata: int, dtype: np.dtype, n_classes: int
) -> np.ndarray:
    """One window of labels as the file stores it: ``dtype``, unlabelled pixels ``file_nodata``.

    Unlabelled are the negative values and ``nodata``. Converted straight to ``dtype`` (no
    wider temporary: one output array and one boolean mask the size of the window).

    Parameters
    ----------
    block : ndarray (rows, cols) of int
        Labels of one window of the label map.
    nodata : int
        The label map's marker of unlabelled pixels (the store's -1).
    file_nodata : int
        The file's nodata value (:func:`label_file_dtype`).
    dtype : numpy dtype
        The file's data type (``uint8`` or ``uint16``).
    n_classes : int
        Largest label + 1.

    Returns
    -------
    ndarray (rows, cols) of ``dtype``

    Raises
    ------
    InvalidInputError
        A label is ``n_classes`` or more.
    """
    unlabelled = block < 0
    if nodata >= 0:
        unlabelled |= block == nodata
    labelled = ~unlabelled
    top = int(np.max(block, initial=0, where=labelled)) if labelled.any() else -1
    if top >= n_classes:
        raise InvalidInputError(f"n_classes={n_classes} but the label map holds label {top}.")
    out = block.astype(dtype)  # labels < n_classes fit; the unlabelled are overwritten
    out[unlabelled] = file_nodata
    return out


def _max_label(arr: np.ndarray | da.Array) -> int:
    if isinstance(arr, da.Array):
        return int(arr.max().compute()) if arr.size else -1
    return int(arr.max()) if arr.size else -1


def _palette(n_classes: int, nodata: int) -> dict[int, tuple[int, int, int, int]]:
    from dkernel.io.palette import class_colors

    rgba = np.round(np.asarray(class_colors(max(n_classes, 1)))[:n_classes] * 255).astype(int)
    table = {i: (int(c[0]), int(c[1]), int(c[2]), 255) for i, c in enumerate(rgba)}
    table[nodata] = (0, 0, 0, 0)
    return table


def write_label_cog(
    path: str | os.PathLike,
    label_map: Any,
    image: xr.DataArray,
    *,
    nodata: int = -1,
    class_table: bool = True,
    n_classes: int | None = None,
    replace: bool = True,
    root: str | os.PathLike | None = None,
) -> LabelCOG:
    """Write a label map as a Cloud-Optimized GeoTIFF with a colour table.

    Parameters
    ----------
    path : path of the ``.tif`` to write (its folder is created)
    label_map : ndarray, dask array or DataArray (y, x) of int
        Labels ``0 … k-1``; ``nodata`` (and any negative value) marks unlabelled pixels.
    image : DataArray (band, y, x)
        The clustered image: its CRS and transform georeference the file, its bands give the
        class table's means.
    nodata : int
        The label map's marker of unlabelled pixels (the store's -1).
    class_table : bool
        Also write :func:`write_class_table` to :func:`class_table_path` ``(path)``.
    n_classes : int, optional
        Largest label + 1 when known (saves one pass over a lazy label map).
    replace : bool
        An existing regular file at ``path`` (and at the class table's path) may be replaced.
    root : path, optional
        The folder the files must lie in (see :func:`dkernel.storage.side_files.side_file`).

    Returns
    -------
    LabelCOG
        Path (the object is path-like), the file's nodata value and dtype, the class count
        and the class table's path.

    Raises
    ------
    InvalidInputError
        The label map does not fit the image, or holds labels beyond ``n_classes``.
    StoreError
        ``path`` (or the class table's) is a link, a directory or another non-regular file,
        or a regular file while ``replace`` is False (nothing is written then).

    Notes
    -----
    The file is ``uint8`` with nodata **255** when the largest label is < 255, else
    ``uint16`` with nodata **65535** (GDAL palettes need Byte/UInt16 bands); labels keep
    their values, unlabelled pixels get the file's nodata, which therefore differs from the
    store's -1. The colour table is :func:`dkernel.io.palette.class_colors` (the quick-look
    palette) with the nodata entry transparent (alpha 0; TIFF palettes keep no alpha, so
    readers see it through the nodata value). COG driver options: 512 × 512 tiles, DEFLATE,
    overviews resampled by MODE (the most frequent label; NEAREST if this GDAL lacks MODE)
    until smaller than 512 px, ``BIGTIFF=IF_SAFER``.

    The label map is written in windows of 512 rows and at most :data:`WINDOW_COLS` columns
    (:func:`label_windows`) to a temporary tiled GTiff, then copied by GDAL's COG driver
    (block cache bounded to ``dkernel.io.gdal.GDAL_CACHE_MB``): memory is one window,
    whatever the scene's size (plus GDAL's overview computation, which reads the temporary
    file). A lazy label map is computed window by window; one more pass finds the largest
    label unless ``n_classes`` is given.

    Both files go through :func:`dkernel.storage.side_files.side_file`: written in a private
    temporary folder beside ``path`` (removed on every exit) and moved into place, so a link
    at ``path`` is never written through and an interrupted write leaves the old file.
    """
    import rasterio

    path = Path(path)
    labels = _as_lazy(label_map)
    n_rows, n_cols = (int(s) for s in labels.shape)
    if (int(image.sizes["y"]), int(image.sizes["x"])) != (n_rows, n_cols):
        raise InvalidInputError(
            f"the label map is {n_rows} × {n_cols} but the image is "
            f"{int(image.sizes['y'])} × {int(image.sizes['x'])}; they must match."
        )
    if n_classes is None:
        n_classes = max(_max_label(labels), -1) + 1
    dtype, file_nodata = label_file_dtype(max(n_classes - 1, 0))
    profile = _tiled_profile(image, n_rows, n_cols, 1, dtype.name, file_nodata)
    if class_table:  # refused before anything is written
        check_side_file(class_table_path(path), replace=replace, root=root, what="class table")
    with side_file(path, replace=replace, root=root, what="label GeoTIFF") as out:
        # the tiled GTiff beside the COG, in side_file's private folder
        tmp = out.with_name(f".{out.name}.tiled.tif")
        with rasterio.open(tmp, "w", **profile) as dst:
            for r0, r1, c0, c1 in label_windows(n_rows, n_cols):
                block = file_block(
                    _window(labels, r0, r1, c0, c1),
                    nodata=nodata,
                    file_nodata=file_nodata,
                    dtype=dtype,
                    n_classes=n_classes,
                )
                dst.write(block, 1, window=((r0, r1), (c0, c1)))
            dst.write_colormap(1, _palette(n_classes, file_nodata))
        _tiled_to_cog(tmp, out, "MODE")
    table = None
    if class_table:
        table = write_class_table(
            class_table_path(path), labels, image, n_classes=n_classes, replace=replace, root=root
        )
    return LabelCOG(path, file_nodata, dtype.name, n_classes, table)


def _tiled_profile(
    image: xr.DataArray, n_rows: int, n_cols: int, count: int, dtype: str, nodata: float
) -> dict[str, Any]:
    """The profile of the temporary tiled GTiff a COG is copied from, georeferenced as
    ``image`` (no CRS where it has none)."""
    profile = {
        "driver": "GTiff",
        "width": n_cols,
        "height": n_rows,
        "count": count,
        "dtype": dtype,
        "nodata": nodata,
        "tiled": True,
        "blockxsize": TILE,
        "blockysize": TILE,
        "compress": "deflate",
        "BIGTIFF": "IF_SAFER",
        "transform": image.rio.transform(),
    }
    if image.rio.crs is not None:
        profile["crs"] = image.rio.crs
    return profile


def _tiled_to_cog(tmp: Path, out: Path, resampling: str) -> None:
    """Copy the tiled GTiff ``tmp`` to the COG ``out`` (overviews by ``resampling``; NEAREST
    where this GDAL lacks it) and remove ``tmp``."""
    import rasterio
    import rasterio.shutil

    options = {
        "BLOCKSIZE": TILE,
        "COMPRESS": "DEFLATE",
        "OVERVIEW_RESAMPLING": resampling,
        "BIGTIFF": "IF_SAFER",
    }
    # GDAL's block cache defaults to 5 % of the RAM: bounded, the copy's memory no longer
    # grows with the scene
    with rasterio.Env(GDAL_CACHEMAX=GDAL_CACHE_MB):
        try:
            rasterio.shutil.copy(tmp, out, driver="COG", **options)
        except rasterio.errors.RasterioIOError:  # pragma: no cover - GDAL without the method
            rasterio.shutil.copy(
                tmp, out, driver="COG", **{**options, "OVERVIEW_RESAMPLING": "NEAREST"}
            )
    tmp.unlink()


def write_float_cog(
    path: str | os.PathLike,
    bands: dict[str, Any],
    image: xr.DataArray,
    *,
    replace: bool = True,
    root: str | os.PathLike | None = None,
) -> Path:
    """Write float maps as one multi-band float32 Cloud-Optimized GeoTIFF.

    Parameters
    ----------
    path : path of the ``.tif`` to write
    bands : mapping of str to array (y, x)
        The bands in order, by name (the bands' descriptions); NumPy, Dask or DataArray, NaN
        where there is no value (the file's nodata).
    image : DataArray (band, y, x)
        The image the maps lie on: its CRS and transform georeference the file.
    replace, root
        As :func:`write_label_cog`.

    Returns
    -------
    Path

    Notes
    -----
    Written window by window (:func:`label_windows`) to a temporary tiled GTiff, then copied
    by GDAL's COG driver with overviews averaged; memory is one window of every band.
    """
    import rasterio

    path = Path(path)
    arrays = [
        a.data if isinstance(a, xr.DataArray) else a if isinstance(a, da.Array) else np.asarray(a)
        for a in bands.values()
    ]
    n_rows, n_cols = (int(image.sizes["y"]), int(image.sizes["x"]))
    for name, arr in zip(bands, arrays, strict=True):
        if tuple(int(s) for s in arr.shape) != (n_rows, n_cols):
            raise InvalidInputError(
                f"the map {name!r} is {arr.shape} but the image is {n_rows} × {n_cols}; "
                "they must match."
            )
    profile = _tiled_profile(image, n_rows, n_cols, len(arrays), "float32", float("nan"))
    with side_file(path, replace=replace, root=root, what="GeoTIFF") as out:
        tmp = out.with_name(f".{out.name}.tiled.tif")
        with rasterio.open(tmp, "w", **profile) as dst:
            for r0, r1, c0, c1 in label_windows(n_rows, n_cols):
                blocks = [_window(a, r0, r1, c0, c1) for a in arrays]
                dst.write(np.stack(blocks).astype(np.float32), window=((r0, r1), (c0, c1)))
            for i, name in enumerate(bands, start=1):
                dst.set_band_description(i, name)
        _tiled_to_cog(tmp, out, "AVERAGE")
    return path


# ---------------------------------------------------------------------------------------
# class table
# ---------------------------------------------------------------------------------------


def _strip_sums(labels: np.ndarray, pixels: np.ndarray, n: int) -> np.ndarray:
    """``(n, 1 + bands)``: pixel count and per-band sums of each class in one strip."""
    pixels = np.asarray(pixels)
    sums, counts = label_sums(pixels.reshape(pixels.shape[0], -1).T, labels, n)
    return np.column_stack([counts.astype(np.float64), sums])


def _band_column(band: Any) -> str:
    value = band.item() if hasattr(band, "item") else band
    if isinstance(value, (int, np.integer)) or (isinstance(value, float) and value.is_integer()):
        return f"mean_band_{int(value)}"
    return f"mean_{value}"


def class_statistics(
    label_map: Any, image: xr.DataArray, *, n_classes: int | None = None
) -> dict[str, np.ndarray]:
    """Pixel count and raw band means of every class, computed strip by strip.

    Returns a dict with ``pixels`` (n,) int64 and ``means`` (n, bands) float64 (NaN for a
    class without pixels). Strips follow the image's row chunks (512 rows for an in-memory
    image); each adds ``np.bincount`` of its labels, weighted by each band, so memory is one
    strip of the image and the label map.
    """
    labels = _as_lazy(label_map)
    if n_classes is None:
        n_classes = max(_max_label(labels), -1) + 1
    n = max(int(n_classes), 0)
    data = image.data
    n_bands = int(image.sizes["band"])
    if isinstance(data, da.Array):
        rows = data.chunks[1]
    else:
        rows = tuple(min(TILE, labels.shape[0] - r) for r in range(0, labels.shape[0], TILE))
    bounds = np.cumsum((0, *rows))
    parts = []
    for r0, r1 in zip(bounds[:-1], bounds[1:], strict=True):
        lab = labels[r0:r1]
        pix = data[:, r0:r1]
        if isinstance(lab, da.Array) or isinstance(pix, da.Array):
            parts.append(dask.delayed(_strip_sums)(delayed_array(lab), delayed_array(pix), n))
        else:
            parts.append(_strip_sums(lab, pix, n))
    parts = compute_parts(parts) if parts else [np.zeros((n, 1 + n_bands))]
    total = np.sum(parts, axis=0) if parts else np.zeros((n, 1 + n_bands))
    counts = total[:, 0]
    with np.errstate(invalid="ignore", divide="ignore"):
        means = total[:, 1:] / counts[:, None]
    means[counts == 0] = np.nan
    return {"pixels": counts.astype(np.int64), "means": means}


def write_class_table(
    path: str | os.PathLike,
    label_map: Any,
    image: xr.DataArray,
    *,
    n_classes: int | None = None,
    replace: bool = True,
    root: str | os.PathLike | None = None,
) -> Path:
    """Write the class table CSV: ``class, pixels, share, color, mean_<band>...``.

    Parameters
    ----------
    path : path of the CSV (the label COG's sidecar is :func:`class_table_path`)
    label_map : ndarray, dask array or DataArray (y, x); negative values are unlabelled
    image : DataArray (band, y, x), the clustered image (raw band values)
    n_classes : int, optional
        Rows of the table (default largest label + 1; classes without pixels get a row).
    replace, root
        As in :func:`write_label_cog` (the file goes through
        :func:`dkernel.storage.side_files.side_file`).

    Returns
    -------
    Path

    Notes
    -----
    ``share`` is the class's fraction of the labelled pixels; ``color`` the ``#rrggbb`` of
    :func:`dkernel.io.palette.class_colors` (the COG's colour table and the quick-look); the
    mean columns are named from the band coordinate (``mean_band_1`` for band 1, ``mean_red``
    for a band named ``red``). Computed by :func:`class_statistics`, strip by strip.
    """
    from dkernel.io.palette import class_colors

    path = Path(path)
    stats = class_statistics(label_map, image, n_classes=n_classes)
    counts, means = stats["pixels"], stats["means"]
    n = counts.shape[0]
    colors = np.round(np.asarray(class_colors(max(n, 1)))[:n, :3] * 255).astype(int)
    total = int(counts.sum())
    bands = [_band_column(b) for b in image["band"].values]
    with (
        side_file(path, replace=replace, root=root, what="class table") as out,
        open(out, "w", newline="") as f,
    ):
        writer = csv.writer(f)
        writer.writerow(["class", "pixels", "share", "color", *bands])
        for i in range(n):
            share = counts[i] / total if total else 0.0
            color = "#{:02x}{:02x}{:02x}".format(*colors[i])
            writer.writerow(
                [i, int(counts[i]), f"{share:.6g}", color, *(f"{m:.6g}" for m in means[i])]
            )
    return path
