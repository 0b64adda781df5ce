"""Georeferenced maps in a results store, as CF-1.10 and rioxarray readers expect them.

A map variable (``labels``, ``partition``, ``valid``, score maps) has dims ``(y, x)`` (plus a
leading dimension for stacks), the image's coordinates with CF attributes
(``standard_name: projection_x_coordinate`` …, units from the CRS) and, when the image has a
CRS, a ``spatial_ref`` coordinate holding the CRS (``crs_wkt``) and the transform
(``GeoTransform``), named by the variable's ``grid_mapping``. Written with the variable's
``coordinates`` encoding, ``spatial_ref`` comes back as a *coordinate* of the variable itself,
so ``labels.rio.crs`` and ``labels.rio.transform()`` work on the DataArray opened at xarray's
defaults (``xr.open_datatree(path, engine="zarr")``), not only on its Dataset.

Integer label maps mark pixels without a label with :data:`LABEL_NODATA` as their CF
``_FillValue`` (and Zarr ``fill_value``): xarray's default decoding turns them into NaN
(floats); :func:`dkernel.open_results` keeps the integers (``mask_and_scale=False``) and
``labels.rio.nodata`` is -1.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import xarray as xr

#: The value of integer label maps where a pixel has no label (nodata collar, masked pixels).
LABEL_NODATA = -1

#: The CF version the store's metadata follows (root attribute ``Conventions``).
CONVENTIONS = "CF-1.10"

_PIXEL_AXES = {
    "x": {"long_name": "column index", "units": "1", "axis": "X"},
    "y": {"long_name": "row index", "units": "1", "axis": "Y"},
}


def is_georeferenced(image: xr.DataArray) -> bool:
    """Whether ``image`` has a CRS (a map can be placed on the Earth)."""
    # registers the .rio accessor that every use below follows; imported here, not at the
    # top, so that a job without an image does not pay ~1 s for it
    import rioxarray  # noqa: F401

    return image.rio.crs is not None


def georeference(var: xr.DataArray, image: xr.DataArray) -> xr.DataArray:
    """``var`` (dims ending in ``y, x``) with ``image``'s coordinates, CRS and transform.

    Parameters
    ----------
    var : DataArray
        A map on ``image``'s grid (NumPy- or Dask-backed; it stays lazy).
    image : DataArray
        The source image ``(band, y, x)`` (see :func:`dkernel.io.raster.open_geotiff`).

    Returns
    -------
    DataArray
        With ``x``/``y`` coordinates carrying CF attributes and, for a georeferenced image,
        the ``spatial_ref`` coordinate named by ``grid_mapping``.
    """
    var = var.assign_coords(y=image["y"].values, x=image["x"].values)
    if is_georeferenced(image):
        var = var.rio.write_crs(image.rio.crs)
        var = var.rio.write_transform(image.rio.transform())
        var = var.rio.write_coordinate_system()
        # the variable lists spatial_ref among its coordinates, so readers attach it to the
        # DataArray (xarray writes scalar coordinates into no variable's attribute otherwise)
        var.encoding["coordinates"] = "spatial_ref"
    else:
        for axis, attrs in _PIXEL_AXES.items():
            var[axis].attrs.update(attrs)
    for axis in ("x", "y"):  # CF: coordinate variables have no missing values
        var[axis].encoding["_FillValue"] = None
    return var


def label_map(
    labels: Any, image: xr.DataArray, *, name: str = "labels", nodata: int = LABEL_NODATA
) -> xr.DataArray:
    """An integer ``(y, x)`` map as a georeferenced DataArray with ``_FillValue = nodata``.

    ``labels`` is a NumPy or Dask array on ``image``'s grid, ``nodata`` where no label. Its
    ``long_name`` / ``description`` come from :mod:`dkernel.storage.attributes` on writing.
    """
    var = xr.DataArray(labels, dims=("y", "x"), name=name)
    if var.dtype != np.int32:
        var = var.astype(np.int32)
    var.encoding.update({"_FillValue": np.int32(nodata), "fill_value": np.int32(nodata)})
    return georeference(var, image)


def valid_mask(valid: Any, image: xr.DataArray) -> xr.DataArray:
    """The boolean ``(y, x)`` mask of the pixels that were clustered (not nodata)."""
    var = xr.DataArray(valid, dims=("y", "x"), name="valid")
    return georeference(var, image)


def map_dataset(
    labels: Any, valid: Any, image: xr.DataArray, *, attrs: dict[str, Any] | None = None
) -> xr.Dataset:
    """The ``/map`` group: ``labels`` and ``valid`` on the image grid, with its CRS.

    Every clustering job run on a raster reader writes it (MSSC keeps its maps in ``/mssc``).
    """
    ds = xr.Dataset(
        {"labels": label_map(labels, image), "valid": valid_mask(valid, image)},
        attrs=dict(attrs or {}),
    )
    ds.attrs["nodata"] = LABEL_NODATA
    return with_crs_attrs(ds, image)


def score_map_dataset(scores: Any, valid: Any, image: xr.DataArray, seeds: list[str]) -> xr.Dataset:
    """The ``/map`` group of a ranking job: ``score_map (seed, y, x)``, NaN where no data.

    ``scores`` is the ``(seed, y, x)`` stack on ``image``'s grid (NumPy or Dask).
    """
    var = georeference(xr.DataArray(scores, dims=("seed", "y", "x"), name="score_map"), image)
    var = var.assign_coords(seed=np.asarray(seeds, dtype=object))
    ds = xr.Dataset({"score_map": var, "valid": valid_mask(valid, image)})
    return with_crs_attrs(ds, image)


def with_crs_attrs(ds: xr.Dataset, image: xr.DataArray) -> xr.Dataset:
    """The group attributes ``crs`` and ``transform`` (as the ``/mssc`` group has always had)."""
    if is_georeferenced(image):
        ds.attrs["crs"] = image.rio.crs.to_string()
        ds.attrs["transform"] = list(image.rio.transform())[:6]
    return ds
