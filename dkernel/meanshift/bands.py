"""Band normalisation of pixel features: the spectral angle of non-negative spectra.

Mean shift and MSSC cluster the per-pixel band values (plus scaled pixel coordinates). For
multi- and hyperspectral reflectance the direction of a spectrum, not its brightness, tells
materials apart; :func:`unit_spectra` scales each pixel's bands to unit length, so Euclidean
distances become chord lengths of the spectral angle. :class:`~dkernel.meanshift.MSSC`
(``band_norm``) and the ``mssc`` job use the same two functions, :func:`resolve_band_norm` and
:func:`apply_band_norm`.
"""

from __future__ import annotations

from typing import Any

import dask.array as da
import numpy as np

from dkernel._validation import as_numpy
from dkernel.errors import InvalidInputError


def unit_spectra(X: np.ndarray, n_bands: int) -> np.ndarray:
    """Scale the first ``n_bands`` columns of every row to unit Euclidean length.

    The spectral-angle representation of non-negative spectra: ``x / ‖x‖`` keeps each
    pixel's spectral shape and drops its brightness (illumination, shading), so Euclidean
    distances between rows become chord lengths ``2 sin(θ/2)`` of the spectral angle θ.
    Further columns (pixel coordinates) are copied unchanged; an all-zero spectrum stays zero.

    Parameters
    ----------
    X : ndarray of shape (n, d)
    n_bands : int
        Number of leading band columns (``0 < n_bands <= d``).

    Returns
    -------
    ndarray of shape (n, d), the dtype of ``X`` (float64 for integer input)

    Notes
    -----
    O(n d) time, one output array.
    """
    X = np.asarray(X)
    if not 0 < n_bands <= X.shape[1]:
        raise InvalidInputError(
            f"n_bands must be in [1, {X.shape[1]}] for {X.shape[1]} columns; got {n_bands}."
        )
    out = np.array(X, dtype=X.dtype if np.issubdtype(X.dtype, np.floating) else np.float64)
    bands = out[:, :n_bands]
    norm = np.sqrt(np.einsum("ij,ij->i", bands, bands, dtype=np.float64))
    bands /= np.where(norm > 0, norm, 1.0)[:, None].astype(out.dtype)
    return out


#: 'auto' scales spectra to unit length only from this many bands on: the spectral angle suits
#: multi- and hyperspectral reflectance, but an RGB photo reduced to colour directions loses
#: brightness (a white object on grey water becomes the water) and one band becomes 0 or 1.
MIN_SPECTRAL_BANDS = 5
#: What a reader may declare its bands to be (``LoadedData.meta["bands"]``).
BAND_KINDS = ("reflectance", "rgb", "other")


def resolve_band_norm(X: Any, n_bands: int, band_norm: str, bands: str | None = None) -> str:
    """'unit' or 'none' for ``band_norm``.

    'auto' is decided by what the bands are: a reader's ``bands`` hint wins ('reflectance':
    'unit'; 'rgb' or 'other': 'none'); without one, 'unit' iff there are at least
    :data:`MIN_SPECTRAL_BANDS` bands and none is negative. The spectral angle is defined for
    non-negative spectra (reflectance, radiance, digital numbers, min-max scaled bands);
    standardised bands have no meaningful direction. One pass over the band columns.
    """
    if band_norm != "auto":
        return band_norm
    if bands is not None:
        return "unit" if bands == "reflectance" else "none"
    if n_bands < MIN_SPECTRAL_BANDS:
        return "none"
    band_cols = X[:, :n_bands]
    # NaN rows are nodata (MSSC labels them -1): they decide nothing
    low = float(as_numpy(da.nanmin(band_cols) if isinstance(X, da.Array) else np.nanmin(band_cols)))
    return "unit" if low >= 0 else "none"


def apply_band_norm(X: Any, n_bands: int, band_norm: str) -> Any:
    """The features with the first ``n_bands`` columns of each row scaled to unit length.

    Lazy for Dask input (one task per row chunk), eager for NumPy; ``band_norm='none'``
    returns ``X`` itself.
    """
    if band_norm == "none":
        return X
    if isinstance(X, da.Array):
        X = X.rechunk({1: -1})
        return X.map_blocks(unit_spectra, n_bands, dtype=X.dtype)
    return unit_spectra(X, n_bands)
