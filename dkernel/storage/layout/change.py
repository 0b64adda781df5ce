"""The ``/change`` group: change detection between two dates on the before image's grid."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import xarray as xr

from dkernel.storage.geo import LABEL_NODATA, georeference, label_map, valid_mask, with_crs_attrs


def change_dataset(
    *,
    variates: Any,
    intensity: Any,
    labels: Any,
    valid: Any,
    image: xr.DataArray,
    correlations: Any,
    sigma: Any,
    attrs: Mapping[str, Any] | None = None,
) -> xr.Dataset:
    """The ``/change`` group (and what ``dkernel.detect_change`` returns).

    Parameters
    ----------
    variates : array-like or dask.array.Array (component, y, x)
        MAD (or kernel MAD) variates, float32, NaN where a pixel has no data at either date.
    intensity : array-like or dask.array.Array (y, x)
        χ² change intensity ``Σ_i (MAD_i / σ_i)²``, NaN where no data.
    labels : array-like or dask.array.Array (y, x)
        Change mask: 1 change, 0 no change, ``LABEL_NODATA`` (-1) where no data.
    valid : array-like or dask.array.Array of bool (y, x)
        Pixels with data at both dates.
    image : DataArray
        The before image ``(band, y, x)``: its coordinates, CRS and transform go on the maps.
    correlations, sigma : ndarray (component,)
        Canonical correlations (increasing) and no-change standard deviations of the variates.
    attrs : mapping, optional
        The method, threshold and fit diagnostics.

    Returns
    -------
    Dataset
        ================  =========================  ==========================================
        variable          dims                       meaning
        ================  =========================  ==========================================
        ``variates``      ``component``, ``y``, x    MAD variates, least correlated pair first
        ``intensity``     ``y``, ``x``               χ² change intensity
        ``labels``        ``y``, ``x``               change mask (1 change, 0 none, -1 nodata)
        ``valid``         ``y``, ``x``               valid at both dates
        ``correlations``  ``component``              canonical correlations
        ``sigma``         ``component``              no-change std of every variate
        ================  =========================  ==========================================

        The maps are georeferenced as :func:`~dkernel.storage.geo.georeference` describes.
    """
    var = georeference(xr.DataArray(variates, dims=("component", "y", "x"), name="variates"), image)
    z = georeference(xr.DataArray(intensity, dims=("y", "x"), name="intensity"), image)
    ds = xr.Dataset(
        {
            "variates": var.assign_coords(component=np.arange(var.shape[0])),
            "intensity": z,
            "labels": label_map(labels, image),
            "valid": valid_mask(valid, image),
            "correlations": (("component",), np.asarray(correlations, np.float64)),
            "sigma": (("component",), np.asarray(sigma, np.float64)),
        },
        attrs={**(attrs or {}), "nodata": LABEL_NODATA},
    )
    return with_crs_attrs(ds, image)
