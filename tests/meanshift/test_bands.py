"""Band normalisation of pixel features (unit-length spectra, band-norm choice) against obvious
references."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest

from dkernel.errors import InvalidInputError
from dkernel.meanshift.bands import apply_band_norm, resolve_band_norm, unit_spectra


def test_unit_spectra_matches_reference(rng):
    X = rng.uniform(0, 1, (50, 7)).astype(np.float32)
    X[3, :5] = 0.0  # an all-zero spectrum stays zero
    out = unit_spectra(X, 5)
    ref = X.astype(np.float64).copy()
    for i in range(X.shape[0]):  # slow obvious reference: one row at a time
        norm = np.sqrt(sum(float(v) ** 2 for v in X[i, :5]))
        if norm > 0:
            ref[i, :5] = X[i, :5] / norm
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, ref, rtol=1e-6, atol=1e-7)
    np.testing.assert_array_equal(out[:, 5:], X[:, 5:])  # coordinates untouched
    np.testing.assert_array_equal(out[3, :5], 0.0)
    # brightness drops out: a scaled spectrum maps to the same point
    np.testing.assert_allclose(unit_spectra(3.0 * X[:, :5], 5), out[:, :5], rtol=1e-6)
    assert np.shares_memory(out, X) is False
    with pytest.raises(InvalidInputError, match="n_bands"):
        unit_spectra(X, 0)


def test_band_norm_auto_and_unit(rng):
    """'auto' picks the spectral angle only for non-negative bands; coordinates stay."""
    X = rng.uniform(0, 2, (300, 5)).astype(np.float32)  # 3 bands + 2 coordinates
    Xd = da.from_array(X, chunks=(64, 3))
    assert resolve_band_norm(Xd, 3, "auto") == "none"
    Z = X.copy()
    Z[7, 1] = -0.1
    assert resolve_band_norm(Z, 3, "auto") == "none"
    assert resolve_band_norm(Z, 3, "unit") == "unit"
    Z[7, 1], Z[9, 4] = 0.5, -1.0  # a negative coordinate does not count
    assert resolve_band_norm(Z, 3, "auto") == "none"  # three bands: a colour photo
    assert resolve_band_norm(Z, 3, "auto", bands="reflectance") == "unit"
    out = apply_band_norm(Xd, 3, "unit")
    assert isinstance(out, da.Array)
    np.testing.assert_allclose(out.compute(), unit_spectra(X, 3))
    assert apply_band_norm(Xd, 3, "none") is Xd


def test_band_norm_auto_follows_what_the_bands_are(rng):
    many = np.abs(rng.normal(size=(50, 8)))
    assert resolve_band_norm(many, 6, "auto") == "unit"  # multispectral reflectance
    assert resolve_band_norm(many, 3, "auto") == "none"  # RGB
    assert resolve_band_norm(many, 1, "auto") == "none"  # one band: would become 0 or 1
    assert resolve_band_norm(many, 6, "auto", bands="rgb") == "none"  # the reader's hint wins
    assert resolve_band_norm(many, 3, "auto", bands="reflectance") == "unit"
    assert resolve_band_norm(-many, 6, "auto") == "none"  # standardised bands


def test_the_band_normalisation_has_one_home():
    """The mssc job and MSSC import it from here; io keeps no copy or alias of it."""
    from dkernel.io import preprocess

    assert not hasattr(preprocess, "resolve_band_norm")
    assert not hasattr(preprocess, "apply_band_norm")
