"""Raster input/output: GeoTIFF (rioxarray), ``.npy`` and Zarr images, pixel features.

An image is an ``xarray.DataArray`` with dims ``(band, y, x)``, its CRS and transform kept
(``image.rio``) when it has them, and a boolean coordinate ``valid`` (y, x) marking pixels that are
not nodata. :func:`raster_features` turns the valid pixels into a Dask array of features (band
values, optionally scaled, plus the pixel coordinates scaled to [0, c]; Agersborg 2012, §6.1.2
[Agersborg2012]) chunked by row strips, so every pixel can be streamed chunk by chunk. Labels come
back to the image grid with :func:`labels_to_raster` (nodata = -1) and are written with
:func:`dkernel.io.cog.write_label_cog` and :func:`write_quicklook`.

This module opens and reads images; the features and the way back to the grid live in
:mod:`dkernel.io.raster_features`, the quick-look's contents in :mod:`dkernel.io.quicklook_plan`
(their names are importable from here as well).
"""

from __future__ import annotations

import operator
import os
from pathlib import Path
from typing import Any

import dask
import dask.array as da
import numpy as np
import rioxarray  # noqa: F401  (registers the .rio accessor)
import xarray as xr
from dask.base import tokenize
from dask.highlevelgraph import HighLevelGraph

from dkernel.errors import InvalidInputError
from dkernel.io.cube import no_crs_message
from dkernel.io.data import (  # noqa: F401  (package_data_path: also read from here)
    MAX_COORD_SCALE,
    SCALES,
    LoadedData,
    expand_data_path,
    package_data_path,
    resolve_path,
)
from dkernel.io.gdal import RASTER_DRIVER, open_local_raster, raster_env
from dkernel.io.palette import NODATA_COLOR, class_colors  # noqa: F401  (also read from here)
from dkernel.io.pixels import STRIP_PIXELS, strip_rows, valid_graph
from dkernel.io.quicklook_plan import (  # noqa: F401  (where they were)
    QUICKLOOK_PIXELS,
    _axis_labels,
    _label_counts,
    _rgb,
    quicklook_plan,
    write_quicklook,
)
from dkernel.io.raster_features import (  # noqa: F401  (where they were)
    _band_labels,
    _row_views,
    check_not_constant,
    check_pixel_dtype,
    image_from_array,
    image_strips,
    labels_on_grid,
    labels_to_raster,
    raster_features,
    raster_to_loaded,
    split_row_chunks,
    strip_counts,
    work_rows,
)

DEMO_LANDSAT = "RGB.byte.tif"


def block_rows(n_rows: int, n_cols: int, block_height: int, chunk_rows: int | None = None) -> int:
    """Rows per full-width strip: a multiple of the file's block (tile or strip) height.

    Default ``block_height · max(1, round(STRIP_PIXELS / (block_height · n_cols)))`` (≈ 2^18
    pixels); an explicit ``chunk_rows`` is rounded up to a multiple of ``block_height``. Either
    way at most the image's rows.

    >>> block_rows(10980, 10980, 512)  # a Sentinel-2 tile in 512 × 512 tiles
    512
    >>> block_rows(10980, 10980, 512, chunk_rows=23)
    512
    >>> block_rows(718, 791, 3)  # the demo scene, 3-row strips
    330
    """
    block_height = max(1, int(block_height))
    if chunk_rows is None:
        blocks = max(1, round(STRIP_PIXELS / (block_height * max(1, n_cols))))
    else:
        blocks = -(-int(chunk_rows) // block_height)
    return int(max(1, min(n_rows, blocks * block_height)))


def open_geotiff(
    path: str | os.PathLike,
    *,
    bands: list[int] | None = None,
    chunk_rows: int | None = None,
    storage_options: dict[str, Any] | None = None,
) -> xr.DataArray:
    """Open a GeoTIFF lazily as ``(band, y, x)`` with CRS, transform and a ``valid`` mask.

    Parameters
    ----------
    path : path, URL or ``package:NAME``
        A local file, or a URL (``s3://``, ``gs://``, ``az://``, ``http(s)://``, GDAL's
        ``/vsis3/``, ``/vsicurl/``, …) read through GDAL's network file systems.
    bands : list of int, optional
        1-based band numbers to keep (all by default).
    chunk_rows : int, optional
        Rows per chunk (full-width strips), rounded up to a multiple of the file's block
        height; default the multiple of the block height nearest to ≈ 2^18 pixels per chunk
        (:func:`block_rows`).
    storage_options : dict, optional
        Options of a remote file (endpoint, keys, anonymous access); the environment's
        ``AWS_*`` variables are read too.

    Notes
    -----
    Chunks are full-width strips whose row boundaries fall on the file's internal blocks
    (``rasterio``'s ``block_shapes``; 512-row tiles for a typical COG), so each pass over the
    image decodes every tile once instead of once per strip crossing it; a chunk is therefore
    at least one row of blocks (512 × width pixels for a 512-tiled COG). A remote COG is thus
    read in tile-aligned range requests. The mask needs one pass over the image (1 byte per
    pixel is kept in memory). A pixel is invalid when every band equals the nodata value (the
    dataset mask of GDAL/rasterio: a dark pixel with one zero band is still data) or any band
    is NaN.

    Only GeoTIFFs are read: a local file with GDAL's network access off
    (``dkernel.io.gdal.open_local_raster``), a remote one through its own URL only
    (``dkernel.io.gdal.open_remote_raster``); a VRT or any other indirection is refused,
    whatever its name.
    """
    from dkernel.io.remote import to_gdal, version_token
    from dkernel.storage.remote import is_remote, local_path

    if is_remote(str(path)):
        from dkernel.io.gdal import open_remote_raster

        url = str(path)
        with open_remote_raster(url, storage_options) as src:
            n_rows, n_cols, block_h = src.height, src.width, src.block_shapes[0][0]
        rows = block_rows(n_rows, n_cols, block_h, chunk_rows)
        image = _open_strips(
            to_gdal(url),
            rows,
            bands=bands,
            storage_options=storage_options,
            version=version_token(url, storage_options),
        )
        image.attrs["source"] = url
        return image
    path = resolve_path(local_path(str(path)) if isinstance(path, str) else path)
    zarr_store_refusal(path)
    if not path.exists():
        raise InvalidInputError(f"GeoTIFF {str(path)!r} does not exist.")
    with open_local_raster(path) as src:
        n_rows, n_cols, block_h = src.height, src.width, src.block_shapes[0][0]
    rows = block_rows(n_rows, n_cols, block_h, chunk_rows)
    return _open_strips(path, rows, bands=bands)


def zarr_store_refusal(path: Path) -> None:
    """Refuse a Zarr store handed to the GeoTIFF reader, pointing at ``zarr-raster``."""
    if path.is_dir() and any((path / n).is_file() for n in ("zarr.json", ".zgroup", ".zarray")):
        raise InvalidInputError(
            f"{path} is a Zarr store, not a GeoTIFF; read it with reader: zarr-raster "
            "(data.variable names the image when the store holds several arrays)."
        )


def _open_strips(
    path: Path | str,
    rows: int,
    *,
    bands: list[int] | None = None,
    storage_options: dict[str, Any] | None = None,
    version: str | None = None,
    **open_kwargs: Any,
) -> xr.DataArray:
    """:func:`open_geotiff` reading ``rows`` rows at a time as given (``open_kwargs`` go to
    ``rasterio.open``, e.g. an ``opener``; the tile-read benchmark uses both). A GDAL network
    path (``/vsis3/…``) is read with ``storage_options`` and named by ``version`` in the
    task names.

    The image is chunked in work strips (:func:`work_rows` of the reads): one task reads
    ``rows`` rows and returns them as separate strips, each a key of its own (see
    :func:`read_strips`)."""
    import rasterio

    open_kwargs.setdefault("driver", RASTER_DRIVER)
    from dkernel.storage.remote import is_remote

    if not is_remote(path):
        from dkernel.io.files import at_open

        path = at_open(path, "data.path")  # the data root, at the point of opening
    with raster_env(path, storage_options):
        image = rioxarray.open_rasterio(path, **open_kwargs)  # lazy: coordinates and metadata
    if bands:
        missing = [b for b in bands if b not in image["band"].values.tolist()]
        if missing:
            raise InvalidInputError(
                f"{path} has bands {image['band'].values.tolist()}; bands {missing} do not exist."
            )
        image = image.sel(band=bands)
    with raster_env(path, storage_options), rasterio.open(path, **open_kwargs) as src:
        block_width = int(src.block_shapes[0][1])
    indexes = [int(b) for b in image["band"].values]
    n_rows, n_cols = int(image.shape[1]), int(image.shape[2])
    reads = tuple(min(rows, n_rows - r0) for r0 in range(0, n_rows, rows))
    data = read_strips(
        str(path),
        indexes,
        reads,
        n_cols,
        image.dtype,
        block_width=block_width,
        storage_options=storage_options,
        version=version,
        **open_kwargs,
    )
    image = image.copy(data=data)
    image = image.assign_coords(valid=(("y", "x"), valid_graph(image.data, image.rio.nodata)))
    image.attrs["source"] = str(path)
    return image


#: Columns per window of a read (a multiple of the file's block width): a strip's read
#: holds its output strips plus one window of decoded pixels, not the whole read twice.
READ_WINDOW_COLUMNS = 2048


def read_strips(
    path: str,
    indexes: list[int],
    reads: tuple[int, ...],
    n_cols: int,
    dtype: Any,
    *,
    block_width: int = 512,
    storage_options: dict[str, Any] | None = None,
    version: str | None = None,
    **open_kwargs: Any,
) -> da.Array:
    """A raster's bands ``indexes`` as a ``(band, y, x)`` Dask array chunked in work strips.

    Every read covers ``reads[j]`` whole rows (full width, a whole row of the file's blocks,
    so each block is decoded once) and is one task returning its :func:`work_rows` strips;
    each strip is then a key of its own. A strip computed on another worker moves alone
    (a slice of the read fused into the strip's consumer would move the whole read).
    A remote ``path`` (GDAL's ``/vsis3/…``) is named by ``version`` (its ETag) instead of
    a modification time and read with ``storage_options``.
    """
    parts = [work_rows((r,), n_cols) for r in reads]
    if len(parts) < _rootish_reads():
        # so few reads that the scheduler takes their strips for root tasks and hands them to
        # any free worker, moving the whole read there (79 bytes per pixel between 2 workers
        # at 2 000² pixels, 4 reads); one read per strip keeps every strip where it is read,
        # at the price of decoding a small scene's tiles once per strip crossing them
        parts = [(n,) for rows in parts for n in rows]
    stamp = version if version is not None else os.path.getmtime(path)
    token = tokenize(path, stamp, indexes, reads, n_cols, sorted(open_kwargs))
    read, name = f"read-rows-{token}", f"read-strip-{token}"
    window = max(1, READ_WINDOW_COLUMNS // max(1, block_width)) * max(1, block_width)
    graph: dict = {}
    row0, i = 0, 0
    for j, rows in enumerate(parts):
        graph[(read, j)] = (
            _read_rows,
            path,
            indexes,
            row0,
            rows,
            n_cols,
            window,
            np.dtype(dtype).str,
            open_kwargs,
            storage_options,
        )
        for k, n in enumerate(rows):
            graph[(name, 0, i, 0)] = (operator.getitem, (read, j), k)
            row0 += n
            i += 1
    chunks = ((len(indexes),), tuple(r for rows in parts for r in rows), (n_cols,))
    return da.Array(HighLevelGraph.from_collections(name, graph), name, chunks, dtype=dtype)


def _rootish_reads() -> int:
    """Fewest tasks a group's dependencies must have for the scheduler not to take the group
    for root tasks (``distributed.scheduler.rootish-taskgroup-dependencies``)."""
    return int(dask.config.get("distributed.scheduler.rootish-taskgroup-dependencies", 5))


def _read_rows(
    path: str,
    indexes: list[int],
    row0: int,
    parts: tuple[int, ...],
    n_cols: int,
    window: int,
    dtype: str,
    open_kwargs: dict,
    storage_options: dict | None = None,
) -> list[np.ndarray]:
    """Rows ``row0 …`` (``sum(parts)`` of them) as separate strips of ``parts`` rows, read
    ``window`` columns at a time."""
    import rasterio
    from rasterio.windows import Window

    from dkernel.io.files import at_open
    from dkernel.storage.remote import is_remote

    if not is_remote(path) and not str(path).startswith("/vsi"):  # in a worker: the env root
        path = at_open(path, "data.path", task=True)
    strips = [np.empty((len(indexes), r, n_cols), dtype=dtype) for r in parts]
    edges = np.cumsum((0, *parts))
    with raster_env(path, storage_options), rasterio.open(path, **open_kwargs) as src:
        for c0 in range(0, n_cols, window):
            width = min(window, n_cols - c0)
            block = src.read(indexes, window=Window(c0, row0, width, int(edges[-1])))
            for strip, a, b in zip(strips, edges[:-1], edges[1:], strict=True):
                strip[:, :, c0 : c0 + width] = block[:, a:b]
    return strips


def _npy_strip(path: str, start: int, stop: int) -> np.ndarray:
    from dkernel.io.files import at_open

    path = at_open(path, "data.path", task=True)  # in a worker: $DKERNEL_DATA_ROOT
    return np.asarray(np.load(path, mmap_mode="r", allow_pickle=False)[start:stop])


def _lazy_npy(path: Path, layout: str) -> da.Array:
    """A ``.npy`` file as a Dask array read strip by strip (the graph holds only the path)."""
    from dkernel.io.files import load_npy

    head = load_npy(path, "data.path")
    shape, dtype = head.shape, head.dtype
    if layout != "yxb" or len(shape) != 3:
        return da.from_array(np.asarray(head))
    rows = strip_rows(shape[0], shape[1])
    parts = [
        da.from_delayed(
            dask.delayed(_npy_strip)(str(path), r, min(r + rows, shape[0])),
            shape=(min(r + rows, shape[0]) - r, *shape[1:]),
            dtype=dtype,
        )
        for r in range(0, shape[0], rows)
    ]
    return da.concatenate(parts, axis=0)


# ---------------------------------------------------------------------------------------
# readers
# ---------------------------------------------------------------------------------------


def load_geotiff(
    path: str,
    bands: list[int] | None = None,
    scale: str = "minmax",
    coord_scale: float = 0.25,
    chunk_rows: int | None = None,
    crs: str | None = None,
    roi: dict[str, Any] | None = None,
    storage_options: dict[str, Any] | None = None,
) -> LoadedData:
    """Reader ``geotiff``: a GeoTIFF's valid pixels as features, the image kept for output.

    ``path`` may be a URL (``s3://``, ``https://``, ``/vsis3/``, …). A GeoTIFF without CRS is
    refused unless ``crs`` says what to do: ``'none'`` reads it in pixel coordinates (with a
    warning; the label map is written without CRS), any other value (``'EPSG:32618'``) is the
    CRS to assign. ``roi`` keeps a region (:func:`apply_roi`).
    """
    from dkernel.storage.remote import is_remote

    image = open_geotiff(path, bands=bands, chunk_rows=chunk_rows, storage_options=storage_options)
    image = assign_missing_crs(image, crs, f"GeoTIFF {path}")
    image = apply_roi(image, roi)
    source = str(path) if is_remote(str(path)) else str(resolve_path(path))
    return raster_to_loaded(image, scale=scale, coord_scale=coord_scale, meta={"source": source})


def assign_missing_crs(image: xr.DataArray, crs: str | None, what: str) -> xr.DataArray:
    """``image`` with a CRS: its own; else ``crs`` assigned; else, with ``crs='none'``, none
    (a warning: the label map is placed in pixel coordinates).

    Raises
    ------
    InvalidInputError
        No CRS and no ``crs`` option, or a ``crs`` that is not a CRS.
    """
    import warnings

    from dkernel.errors import DKernelWarning

    if image.rio.crs is not None:
        return image
    if crs is None:
        raise InvalidInputError(no_crs_message(what))
    if str(crs).lower() == "none":
        warnings.warn(
            f"{what} has no CRS; it is read in pixel coordinates (data.crs: none) and its "
            "label map is written without a CRS.",
            DKernelWarning,
            stacklevel=2,
        )
        return image
    try:
        return image.rio.write_crs(crs)
    except Exception as exc:  # noqa: BLE001  (pyproj's CRSError and friends)
        raise InvalidInputError(
            f"data.crs: {str(crs)[:80]!r} is not a CRS ({type(exc).__name__}); use 'none' or "
            "an EPSG code such as 'EPSG:32618'."
        ) from None


#: The keys of a region of interest (``data.roi``).
ROI_KEYS = ("bounds", "window")


def apply_roi(image: xr.DataArray, roi: dict[str, Any] | None) -> xr.DataArray:
    """The part of a lazy ``(band, y, x)`` image in a region of interest, as OTB's
    ``ExtractROI`` gives (nothing is read: the image stays lazy).

    Parameters
    ----------
    image : DataArray
        With coordinates ``y`` and ``x`` (and a ``valid`` mask).
    roi : dict, optional
        ``{'bounds': [xmin, ymin, xmax, ymax]}`` in the image's CRS (pixel centres inside
        are kept), or ``{'window': [col_off, row_off, width, height]}`` in pixels.

    Raises
    ------
    InvalidInputError
        An unknown key, a malformed region, or one that holds no pixel.
    """
    if not roi:
        return image
    rows, cols = roi_slices(image, roi)
    out = image.isel(x=cols, y=rows)
    if image.rio.crs is not None:
        affine = image.rio.transform()
        out = out.rio.write_transform(affine @ affine.translation(cols.start, rows.start))
    return out


def roi_slices(image: xr.DataArray, roi: dict[str, Any]) -> tuple[slice, slice]:
    """The ``(rows, cols)`` slices of the region of interest ``roi`` (:func:`apply_roi`).

    Raises
    ------
    InvalidInputError
        An unknown key, a malformed region, or one that holds no pixel.
    """
    if not isinstance(roi, dict) or len(roi) != 1 or next(iter(roi)) not in ROI_KEYS:
        raise InvalidInputError(
            "data.roi: give one of {bounds: [xmin, ymin, xmax, ymax]} (in the raster's CRS) "
            f"or {{window: [col_off, row_off, width, height]}} (pixels); got {str(roi)[:120]}."
        )
    key, value = next(iter(roi.items()))
    if (
        not isinstance(value, list | tuple)
        or len(value) != 4
        or not all(isinstance(v, int | float) and not isinstance(v, bool) for v in value)
    ):
        raise InvalidInputError(f"data.roi.{key}: four numbers are expected; got {value!r}.")
    n_rows, n_cols = int(image.sizes["y"]), int(image.sizes["x"])
    if key == "window":
        c0, r0, width, height = (int(v) for v in value)
        if min(c0, r0) < 0 or width < 1 or height < 1 or c0 >= n_cols or r0 >= n_rows:
            raise InvalidInputError(
                f"data.roi.window {list(value)} lies outside the image ({n_cols} columns × "
                f"{n_rows} rows) or is empty."
            )
        cols, rows = slice(c0, min(n_cols, c0 + width)), slice(r0, min(n_rows, r0 + height))
    else:
        xmin, ymin, xmax, ymax = (float(v) for v in value)
        x, y = np.asarray(image["x"].values), np.asarray(image["y"].values)
        xs = np.flatnonzero((x >= xmin) & (x <= xmax))
        ys = np.flatnonzero((y >= ymin) & (y <= ymax))
        if xmin >= xmax or ymin >= ymax or xs.size == 0 or ys.size == 0:
            raise InvalidInputError(
                f"data.roi.bounds {list(value)} hold no pixel of the image, which spans x "
                f"{x.min():g} … {x.max():g}, y {y.min():g} … {y.max():g}"
                f"{' (' + image.rio.crs.to_string() + ')' if image.rio.crs else ''}."
            )
        cols, rows = slice(int(xs[0]), int(xs[-1]) + 1), slice(int(ys[0]), int(ys[-1]) + 1)
    return rows, cols


def load_demo_landsat(
    scale: str = "minmax",
    coord_scale: float = 0.25,
    chunk_rows: int | None = None,
    roi: dict[str, Any] | None = None,
) -> LoadedData:
    """Reader ``demo-landsat``: the vendored CC0 Landsat 7 scene (718 × 791 × 3, EPSG:32618)."""
    return load_geotiff(
        f"package:{DEMO_LANDSAT}",
        scale=scale,
        coord_scale=coord_scale,
        chunk_rows=chunk_rows,
        roi=roi,
    )


def load_npy_raster(
    path: str,
    layout: str = "yxb",
    nodata: float | None = None,
    labels_path: str | None = None,
    scale: str = "minmax",
    coord_scale: float = 0.25,
    roi: dict[str, Any] | None = None,
) -> LoadedData:
    """Reader ``npy-raster``: a 3-D ``.npy`` image (memory-mapped), optional label image,
    ``roi`` a region of both (:func:`apply_roi`)."""
    from dkernel.io.files import load_npy

    try:
        cube = _lazy_npy(resolve_path(path), layout)
    except (OSError, ValueError) as exc:
        raise InvalidInputError(f"could not read {path} as a .npy array: {exc}") from exc
    image = image_from_array(cube, layout=layout, nodata=nodata)
    image.attrs["source"] = str(path)
    labels = None
    if labels_path:
        labels = load_npy(resolve_path(labels_path), "data.labels_path")  # the shape first
        if labels.shape != image.shape[1:]:
            raise InvalidInputError(
                f"data.labels_path: the label image {labels_path} has shape {labels.shape}; "
                f"the image {path} has {image.shape[1]} rows × {image.shape[2]} columns."
            )
        labels = np.array(labels)
    if roi:
        rows, cols = roi_slices(image, roi)
        image = apply_roi(image, roi)
        labels = None if labels is None else labels[rows, cols]
    return raster_to_loaded(
        image, scale=scale, coord_scale=coord_scale, labels=labels, meta={"source": str(path)}
    )


def load_zarr_raster(
    path: str,
    variable: str | None = None,
    layout: str = "byx",
    nodata: float | None = None,
    scale: str = "minmax",
    coord_scale: float = 0.25,
    missing_chunks: str = "error",
    crs: str | None = None,
    roi: dict[str, Any] | None = None,
    storage_options: dict[str, Any] | None = None,
) -> LoadedData:
    """Reader ``zarr-raster``: an xarray/rioxarray cube in a Zarr store (CRS, coordinates and
    band names kept; ``variable`` names it when the store holds several), or a plain 3-D Zarr
    array without dimension names (``layout`` gives its axis order; no CRS).

    A cube written by xarray (``cube.to_zarr(path)``) must have a CRS, like a GeoTIFF (its
    ``spatial_ref`` / CF ``grid_mapping`` variable, as ``decode_coords='all'`` reads it), or
    ``crs`` says what to do (:func:`assign_missing_crs`). ``roi`` keeps a region
    (:func:`apply_roi`).

    ``path`` may be a URL (``s3://bucket/cube.zarr``, …) read through fsspec with
    ``storage_options``. Before zarr reads a local store, every file of it is checked
    (:func:`dkernel.io.zarr_inputs.scan_zarr_store`: regular files, metadata that is valid
    JSON), and image arrays too large, with chunks too large, or with missing chunks are refused
    (:func:`dkernel.io.zarr_inputs.check_zarr_chunks`; missing chunks are read as nodata with
    ``missing_chunks='nodata'`` when their fill value is nodata). Every file is then read
    through :class:`dkernel.io.zarr_inputs.ConfinedStore`, checked against the data root
    again where it is opened, in the workers too. A remote store has no local files to
    check: its chunks are read as the object store serves them.
    """
    import zarr

    from dkernel.io.cube import image_from_xarray, open_zarr_cube, zarr_arrays
    from dkernel.io.zarr_inputs import (
        check_missing_reads_as_nodata,
        check_zarr_chunks,
        confined_store,
        scan_zarr_store,
    )
    from dkernel.storage.remote import is_remote, to_fsspec
    from dkernel.storage.remote import storage_options as resolve_options

    remote = is_remote(path)
    if remote:
        resolved = to_fsspec(path)
        gaps: list = []
        open_options: dict[str, Any] = {
            "storage_options": resolve_options(resolved, storage_options, purpose="input")
        }
        store: Any = resolved
    else:
        resolved = str(resolve_path(path))
        scan_zarr_store(resolved)
        gaps = check_zarr_chunks(resolved, zarr_arrays(resolved), missing_chunks=missing_chunks)
        open_options = {}
        store = confined_store(resolved)  # every file checked again where it is opened
    cube = open_zarr_cube(resolved, variable=variable, storage_options=storage_options)
    if cube is not None:
        image = image_from_xarray(cube, variable=None, nodata=nodata, require_crs=False)
        image = assign_missing_crs(image, crs, f"the Zarr cube {path}")
        image.attrs["source"] = resolved
        nodata = image.rio.nodata
    else:
        try:
            node = zarr.open(store, mode="r", **open_options)
        except Exception as exc:  # noqa: BLE001  (zarr raises many types for a broken store)
            raise InvalidInputError(
                f"could not open {path} as a Zarr store: {str(exc)[:200]} ({type(exc).__name__})."
            ) from None
        if isinstance(node, zarr.Group):
            if variable is None:
                names = [k for k, _ in node.arrays()]
                raise InvalidInputError(
                    f"{path} is a Zarr group; set data.variable to one of {', '.join(names)}."
                )
            node = node[variable]
        image = image_from_array(da.from_zarr(node), layout=layout, nodata=nodata)
        image.attrs["source"] = resolved
    if not remote:
        check_missing_reads_as_nodata(resolved, gaps, nodata)
    image = apply_roi(image, roi)
    return raster_to_loaded(image, scale=scale, coord_scale=coord_scale, meta={"source": str(path)})


def load_hyperspectral(
    scene: str, path: str | None = None, scale: str = "none", coord_scale: float = 0.25
) -> LoadedData:
    """Readers ``samson`` / ``jasper``: the unmixing scenes, argmax-abundance ground truth."""
    from dkernel.io.hyperspectral import JASPER_CLASSES, SAMSON_CLASSES, load_jasper, load_samson

    loader = load_samson if scene == "samson" else load_jasper
    cube, labels = loader(path)
    image = image_from_array(cube, layout="yxb", name=scene)
    classes = SAMSON_CLASSES if scene == "samson" else JASPER_CLASSES
    return raster_to_loaded(
        image,
        scale=scale,
        coord_scale=coord_scale,
        labels=labels,
        meta={"source": scene, "classes": list(classes), "bands": "reflectance"},
    )
