"""Images from xarray cubes: a ``DataArray`` / ``Dataset`` (y, x, band) or a Zarr cube.

What a Pangeo user has in hand is an xarray cube, lazily backed by Dask, with its CRS in a
``spatial_ref`` coordinate (rioxarray, odc-stac, stackstac, ``xr.open_zarr``).
:func:`image_from_xarray` turns one into dkernel's image, a ``(band, y, x)`` DataArray with the
CRS, transform and a ``valid`` mask, without computing anything: the mask stays a Dask array
until the features are built (:func:`dkernel.io.raster.raster_to_loaded`). Band names (the
band coordinate's values) are kept.

A Sentinel-2-like layout of one file per band is built with xarray and passed in, e.g.::

    bands = [rioxarray.open_rasterio(f, chunks=True).squeeze("band", drop=True) for f in files]
    bands = [b.rio.reproject_match(bands[0]) for b in bands]   # one common grid
    cube = xr.concat(bands, dim=xr.Variable("band", names))
"""

from __future__ import annotations

from typing import Any

import dask.array as da
import numpy as np
import rioxarray  # noqa: F401  (registers the .rio accessor)
import xarray as xr

from dkernel.errors import InvalidInputError
from dkernel.io.pixels import strip_rows, valid_graph

_SPATIAL_NAMES = (("y", "x"), ("latitude", "longitude"), ("lat", "lon"), ("northing", "easting"))


def no_crs_message(what: str) -> str:
    """The refusal of an image without CRS (GeoTIFFs and cubes say the same)."""
    return (
        f"{what} has no CRS (it is not georeferenced), so its label map could not be placed "
        "on a map. Assign one (a GeoTIFF: gdal_edit.py -a_srs EPSG:32618 FILE; an xarray "
        "cube: cube.rio.write_crs('EPSG:32618')), or in a job spec set data.crs: EPSG:… to "
        "assign one or data.crs: none to cluster it in pixel coordinates (the label map is "
        "then written without CRS)."
    )


def _spatial_dims(var: xr.DataArray) -> tuple[str, str]:
    for y, x in _SPATIAL_NAMES:
        if y in var.dims and x in var.dims:
            return y, x
    try:
        return var.rio.y_dim, var.rio.x_dim
    except Exception as exc:  # rioxarray: MissingSpatialDimensionError
        raise InvalidInputError(
            f"the cube's dims {tuple(var.dims)} have no spatial pair (y, x); name them "
            "'y' and 'x' (cube.rename(...)) or set them with cube.rio.set_spatial_dims()."
        ) from exc


def grid_mapping_names(ds: xr.Dataset) -> list[str]:
    """The data variables of ``ds`` that hold its CRS rather than data: those its variables
    name in ``grid_mapping`` (CF), ``spatial_ref``, and 0-d variables carrying ``crs_wkt`` /
    ``spatial_ref`` attributes. ``xr.open_zarr`` without ``decode_coords='all'`` leaves them
    data variables."""
    named = {"spatial_ref"}
    for var in ds.data_vars.values():
        for source in (var.attrs, var.encoding):
            if isinstance(source.get("grid_mapping"), str):
                named.update(source["grid_mapping"].split())
    return [
        str(n)
        for n, v in ds.data_vars.items()
        if n in named or (v.ndim == 0 and ({"crs_wkt", "spatial_ref"} & set(v.attrs)))
    ]


def decode_grid_mapping(ds: xr.Dataset) -> xr.Dataset:
    """``ds`` with its CRS variables (:func:`grid_mapping_names`) as coordinates, as
    ``decode_coords='all'`` reads them, so that ``rio.crs`` finds the CRS."""
    names = grid_mapping_names(ds)
    return ds.set_coords(names) if names else ds


def _as_dataarray(cube: Any, variable: str | None) -> xr.DataArray:
    if isinstance(cube, xr.DataArray):
        return cube
    if not isinstance(cube, xr.Dataset):
        raise InvalidInputError(
            f"expected an xarray DataArray or Dataset cube; got {type(cube).__name__}. "
            "Wrap NumPy arrays with dkernel.io.raster.image_from_array."
        )
    cube = decode_grid_mapping(cube)
    names = [str(n) for n in cube.data_vars if n != "spatial_ref"]
    if variable is not None:
        if variable not in cube.data_vars:
            raise InvalidInputError(
                f"the cube has no variable {variable!r}; it has {', '.join(names) or 'none'}."
            )
        return cube[variable]
    if len(names) == 1:
        return cube[names[0]]
    two_d = [n for n in names if cube[n].ndim == 2]
    if names and len(two_d) == len(names):  # one variable per band (Sentinel-2 style)
        return cube[names].to_dataarray(dim="band")
    raise InvalidInputError(
        f"the cube has several variables ({', '.join(names)}); name the image with "
        "variable=… (data.variable in a job spec)."
    )


def image_from_xarray(
    cube: xr.DataArray | xr.Dataset,
    *,
    variable: str | None = None,
    nodata: float | None = None,
    chunk_rows: int | None = None,
    require_crs: bool = True,
) -> xr.DataArray:
    """An xarray cube as dkernel's ``(band, y, x)`` image, lazily.

    Parameters
    ----------
    cube : DataArray or Dataset
        Dims ``(y, x)`` plus at most one other (the bands, any name, any order); a Dataset
        holds the image as ``variable`` or as one 2-D variable per band. NumPy- or
        Dask-backed; nothing is computed here.
    variable : str, optional
        The Dataset variable holding the image.
    nodata : float, optional
        A pixel whose every band equals it is nodata (default: the cube's ``rio.nodata``
        / ``_FillValue``); NaN in any band is nodata too.
    chunk_rows : int, optional
        Rows per chunk (full-width strips). Default: the cube's own row chunks when it is
        Dask-backed, else strips of about 2^18 pixels.
    require_crs : bool
        Refuse a cube without CRS (its labels could not be placed on a map).

    Returns
    -------
    DataArray
        ``(band, y, x)`` with the cube's coordinates, band names, CRS and transform, and a
        lazy boolean ``valid`` coordinate.

    Raises
    ------
    InvalidInputError
        No spatial dims, more than one non-spatial dim, or no CRS when ``require_crs``.
    """
    var = _as_dataarray(cube, variable)
    y_dim, x_dim = _spatial_dims(var)
    others = [d for d in var.dims if d not in (y_dim, x_dim)]
    if len(others) > 1:
        raise InvalidInputError(
            f"the cube has dims {tuple(var.dims)}: besides {y_dim}/{x_dim} only one band "
            f"dimension may remain; select or stack {', '.join(others[1:])} first."
        )
    crs = var.rio.crs
    if crs is None and isinstance(cube, xr.Dataset):
        crs = decode_grid_mapping(cube).rio.crs
    if require_crs and crs is None:
        raise InvalidInputError(no_crs_message("the cube"))
    if nodata is None:
        nodata = var.rio.nodata if var.rio.nodata is not None else var.rio.encoded_nodata
    if others:
        var = var.transpose(others[0], y_dim, x_dim)
        band_dim = others[0]
    else:
        var = var.expand_dims("band").transpose("band", y_dim, x_dim)
        band_dim = "band"
    band_values = (
        var[band_dim].values if band_dim in var.coords else np.arange(1, var.sizes[band_dim] + 1)
    )
    n_rows, n_cols = int(var.sizes[y_dim]), int(var.sizes[x_dim])
    data = var.data
    if isinstance(data, da.Array):
        rows = chunk_rows or max(data.chunks[1][0], 1)
    else:
        rows = chunk_rows or strip_rows(n_rows, n_cols)
        data = da.from_array(np.asarray(data), chunks=(-1, rows, -1))
    data = data.rechunk((-1, rows, -1))
    valid = valid_graph(data, nodata)
    image = xr.DataArray(
        data,
        dims=("band", "y", "x"),
        coords={
            "band": band_values,
            "y": var[y_dim].values if y_dim in var.coords else np.arange(n_rows, dtype=float),
            "x": var[x_dim].values if x_dim in var.coords else np.arange(n_cols, dtype=float),
            "valid": (("y", "x"), valid),
        },
        name=var.name if var.name is not None else "image",
    )
    if crs is not None:
        image = image.rio.write_crs(crs)
        image = image.rio.write_transform(_transform(var))
    if nodata is not None:
        image = image.rio.write_nodata(nodata, encoded=False)
    return image


def _transform(var: xr.DataArray) -> Any:
    """The stored GeoTransform when it agrees with the coordinates (exact, as written by
    GDAL), else the one computed from them (a cropped cube keeps its parent's)."""
    stored, computed = var.rio.transform(), var.rio.transform(recalc=True)
    pixel = max(abs(computed.a), abs(computed.e), 1e-300)
    if np.allclose(list(stored)[:6], list(computed)[:6], rtol=0, atol=1e-6 * pixel):
        return stored
    return computed


def open_zarr_cube(
    path: str, *, variable: str | None = None, storage_options: dict[str, Any] | None = None
) -> xr.DataArray | xr.Dataset | None:
    """A Zarr store (a folder or a URL read through fsspec with ``storage_options``) as an
    xarray cube (CRS decoded), or ``None`` when it holds plain arrays without dimension names
    (then the caller reads it as a pixel image)."""
    from dkernel.storage.remote import is_remote, to_fsspec
    from dkernel.storage.remote import storage_options as resolve_options

    remote: dict[str, Any] = {}
    store: Any = path
    if is_remote(path):
        store = to_fsspec(path)
        remote = {"storage_options": resolve_options(store, storage_options, purpose="input")}
    else:
        from dkernel.io.zarr_inputs import confined_store

        store = confined_store(path)  # every file checked where it is opened, tasks included
    ds = None
    # consolidated metadata first, else each group's own: xarray's consolidated=None does the
    # same but warns the user to pass a consolidated= they cannot reach through dkernel
    for consolidated in (True, False):
        try:
            ds = xr.open_zarr(
                store,
                chunks={},
                consolidated=consolidated,
                decode_coords="all",
                mask_and_scale=False,
                **remote,
            )
            break
        except Exception:  # noqa: BLE001, S112  (a plain zarr array or group: not a cube)
            continue
    if ds is None:
        return None
    ds = decode_grid_mapping(ds)
    if variable is not None and variable not in ds.data_vars:
        return None
    names = [n for n in ds.data_vars if n != "spatial_ref"]
    if not names:
        return None
    target = ds[variable] if variable is not None else (ds[names[0]] if len(names) == 1 else ds)
    try:
        _spatial_dims(target if isinstance(target, xr.DataArray) else ds[names[0]])
    except InvalidInputError:
        return None
    return ds if variable is None and len(names) > 1 else target


def zarr_arrays(path: str, *, reader: str = "zarr-raster") -> list[tuple[str, Any]]:
    """Every array of the local Zarr store ``path`` as (name, array), each read from its own
    metadata (not the consolidated copy, which may disagree with it); a plain array store
    is one array named ``''``. Read through :func:`dkernel.io.zarr_inputs.confined_store`;
    refusals name ``reader``."""
    import zarr

    from dkernel.io.zarr_inputs import confined_store, store_error

    try:
        node = zarr.open(confined_store(path, reader=reader), mode="r", use_consolidated=False)
    except Exception as exc:  # noqa: BLE001  (zarr raises many types for a broken store)
        message = f"{type(exc).__name__}: {str(exc)[:300]}."
        raise store_error(str(path), message, reader) from exc
    if isinstance(node, zarr.Group):
        return [(n, a) for n, a in node.members(max_depth=None) if isinstance(a, zarr.Array)]
    return [("", node)]
