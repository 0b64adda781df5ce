"""``ChangeDetection`` on a pixel table (issue 53): the same model as on the rasters it comes
from, a scikit-learn transformer (Pipeline, Dask input), and clear errors for what it refuses."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
import xarray as xr
from rasterio.transform import from_origin
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer

import dkernel
from dkernel.errors import InvalidInputError

ROWS, COLS = 40, 30


def _scene(bands_after: int = 3):
    """Three bands; the after date a gain and offset of the before one (or of its first
    bands, plus noise bands), with a changed block."""
    rng = np.random.default_rng(4)
    centres = rng.random((4, 3))
    region = (np.arange(ROWS)[:, None] >= ROWS // 2) * 2 + (np.arange(COLS)[None] >= COLS // 2)
    before = centres[region].transpose(2, 0, 1) + rng.normal(scale=0.03, size=(3, ROWS, COLS))
    after = 1.2 * before + 0.1 + rng.normal(scale=0.02, size=before.shape)
    truth = np.zeros((ROWS, COLS), bool)
    truth[3:12, 4:13] = True
    after[:, truth] = (1.2 * centres[3] + 0.1)[:, None] + rng.normal(
        scale=0.02, size=(3, int(truth.sum()))
    )
    if bands_after > 3:
        extra = after[:1] * 0.5 + rng.normal(scale=0.02, size=(bands_after - 3, ROWS, COLS))
        after = np.concatenate([after, extra])
    return before, after, truth


def _raster(data):
    arr = xr.DataArray(data.astype(np.float32), dims=("band", "y", "x"))
    return arr.rio.write_crs("EPSG:32618").rio.write_transform(from_origin(0, 0, 30, 30))


def _table(before, after):
    return np.hstack([before.reshape(before.shape[0], -1).T, after.reshape(after.shape[0], -1).T])


@pytest.mark.parametrize("method", ["mad", "irmad", "kernel"])
def test_a_pixel_table_fits_the_model_of_its_rasters(method):
    """Every pixel is in the raster fit's sample (1 200 < max_samples), in row order, so the
    table of the same pixels gives the same model and the same change mask."""
    before, after, truth = _scene()
    kw = {"method": method, "n_landmarks": 80, "random_state": 0}
    rasters = dkernel.ChangeDetection(**kw)
    maps = rasters.fit_transform(_raster(before), _raster(after))
    table = _table(before.astype(np.float32), after.astype(np.float32))
    est = dkernel.ChangeDetection(**kw).fit(table)
    np.testing.assert_allclose(est.correlations_, rasters.correlations_, rtol=1e-6)
    # IR-MAD's canonical correlations are near 1 here: its chi-square threshold divides by
    # sqrt(1 - rho) and carries the rounding of the two paths' float32 sums at ~1e-5, which
    # the OpenBLAS kernel chosen for the CPU decides; the mask below must still be equal
    assert est.threshold_ == pytest.approx(rasters.threshold_, rel=1e-4)
    labels = est.predict(table)
    np.testing.assert_array_equal(labels, maps["labels"].values.ravel())
    np.testing.assert_allclose(
        est.transform(table), maps["variates"].values.reshape(-1, ROWS * COLS).T, atol=1e-4
    )
    # plain MAD over-flags a little on this scene; the point here is the equality above
    assert labels[truth.ravel()].mean() > 0.95 and truth.ravel()[labels == 1].mean() > 0.8


def test_dates_of_different_band_counts():
    """The before date's bands are the first p // 2 columns: an odd width gives the after date
    one band more, and MAD has min(p, q) variates."""
    before, after, truth = _scene(bands_after=4)
    table = _table(before, after)
    assert table.shape[1] == 7
    est = dkernel.ChangeDetection(method="irmad", random_state=0).fit(table)
    assert est.transform(table).shape == (ROWS * COLS, 3)
    assert est.predict(table)[truth.ravel()].mean() > 0.95


def test_transformer_in_a_pipeline_and_on_dask():
    before, after, _ = _scene()
    table = _table(before, after)
    est = dkernel.ChangeDetection(method="mad", random_state=0)
    pipe = make_pipeline(FunctionTransformer(), est).fit(table)
    np.testing.assert_allclose(pipe.transform(table), est.transform(table))
    lazy = da.from_array(table, chunks=(500, -1))
    variates, labels = est.transform(lazy), est.predict(lazy)
    assert isinstance(variates, da.Array) and isinstance(labels, da.Array)
    np.testing.assert_allclose(variates.compute(), est.transform(table))
    np.testing.assert_array_equal(labels.compute(), est.predict(table))
    assert list(est.get_feature_names_out()) == [f"changedetection{i}" for i in range(3)]


def test_what_a_pixel_table_cannot_be():
    before, after, _ = _scene()
    est = dkernel.ChangeDetection(method="mad")
    with pytest.raises(InvalidInputError, match="at least 2 columns; got n_features = 1"):
        est.fit(np.ones((50, 1)))
    with pytest.raises(InvalidInputError, match="NaN"):
        est.fit(np.full((50, 4), np.nan))
    est.fit(_table(before, after))
    with pytest.raises(InvalidInputError, match="6 features"):
        est.transform(np.ones((5, 4)))
    with pytest.raises(InvalidInputError, match="needs the after raster"):
        est.fit(_raster(before))


def test_max_samples_is_a_count_or_a_fraction_of_the_pixels():
    before, after, _ = _scene()
    table = _table(before, after)
    n = table.shape[0]

    def fitted(max_samples):
        return dkernel.ChangeDetection(method="mad", max_samples=max_samples, random_state=0).fit(
            table
        )

    half = fitted(0.5).transform(table)
    np.testing.assert_array_equal(half, fitted(n // 2).transform(table))
    assert not np.array_equal(half, fitted(1.0).transform(table))
    # a count above the pixels is all of them, as the fraction 1.0
    np.testing.assert_array_equal(fitted(1.0).transform(table), fitted(10 * n).transform(table))
    with pytest.raises(ValueError, match="max_samples"):
        fitted(1.5)
