"""``dkernel.detect_change`` on rasters and the ``change-detection`` job method."""

from __future__ import annotations

import inspect
from pathlib import Path

import numpy as np
import pytest
import rasterio
import rioxarray
import xarray as xr
from rasterio.transform import from_origin

import dkernel
from dkernel.change.detect import calm_rows, fit_change
from dkernel.errors import InvalidInputError
from dkernel.io.cog import validate_cog
from dkernel.jobs.prepare import prepare_job
from dkernel.jobs.runner import run_job
from dkernel.jobs.spec import validate_spec
from dkernel.storage import open_results

ROWS, COLS = 60, 50
TRANSFORM = from_origin(500000.0, 4200000.0, 30.0, 30.0)


def _scene(seed=0):
    """Four flat classes plus noise (3 bands), the after date a gain/offset of it, with a
    changed block (pixels given the spectrum of another class)."""
    rng = np.random.default_rng(seed)
    centres = np.array([[0.1, 0.2, 0.8], [0.8, 0.1, 0.2], [0.3, 0.9, 0.4], [0.9, 0.8, 0.9]])
    region = (np.arange(ROWS)[:, None] >= ROWS // 2) * 2 + (np.arange(COLS)[None] >= COLS // 2)
    before = centres[region].transpose(2, 0, 1) + rng.normal(scale=0.04, size=(3, ROWS, COLS))
    after = 1.3 * before + 0.1 + rng.normal(scale=0.02, size=before.shape)
    truth = np.zeros((ROWS, COLS), bool)
    truth[5:17, 5:17] = True  # class 0 -> class 3
    after[:, truth] = (1.3 * centres[3] + 0.1)[:, None] + rng.normal(
        scale=0.02, size=(3, int(truth.sum()))
    )
    return before.astype(np.float32), after.astype(np.float32), truth


def _tif(path: Path, data: np.ndarray, transform=TRANSFORM, crs="EPSG:32618") -> Path:
    with rasterio.open(
        path, "w", driver="GTiff", width=data.shape[2], height=data.shape[1],
        count=data.shape[0], dtype="float32", crs=crs, transform=transform,
    ) as dst:  # fmt: skip
        dst.write(data)
    return path


@pytest.fixture
def pair(tmp_path):
    before, after, truth = _scene()
    return _tif(tmp_path / "b.tif", before), _tif(tmp_path / "a.tif", after), truth


@pytest.mark.parametrize("method", ["mad", "irmad", "kernel"])
def test_detect_change_finds_the_changed_block(pair, method):
    b, a, truth = pair
    ds = dkernel.detect_change(b, a, method=method, n_landmarks=100, random_state=0)
    assert ds["intensity"].rio.crs.to_epsg() == 32618
    assert ds["labels"].rio.transform() == TRANSFORM
    mask = ds["labels"].values
    assert set(np.unique(mask)) <= {0, 1}
    recall, precision = mask[truth].mean(), truth[mask == 1].mean()
    assert recall > 0.95 and precision > 0.9, (recall, precision)
    assert ds["variates"].shape == (3, ROWS, COLS)


def test_a_band_with_no_value_is_named(pair):
    """One band all NaN leaves no pixel valid at both dates: the error said only that."""
    b, a, _ = pair
    before = rioxarray.open_rasterio(b).load()
    before[1] = np.nan
    with pytest.raises(InvalidInputError, match=r"No value .* in before band 2: drop those"):
        dkernel.detect_change(before, a, method="mad")


def test_paths_and_in_memory_dataarrays_agree(pair):
    b, a, _ = pair
    from_paths = dkernel.detect_change(b, a, method="irmad", random_state=0)
    arrays = [rioxarray.open_rasterio(p).load() for p in (b, a)]
    in_memory = dkernel.detect_change(*arrays, method="irmad", random_state=0, chunk_rows=7)
    np.testing.assert_allclose(
        from_paths["intensity"].values, in_memory["intensity"].values, rtol=1e-5
    )


def test_maps_are_the_transform_of_every_pixel(pair):
    """The strip-by-strip maps equal the fitted transformation applied to all pixels at once."""
    b, a, _ = pair
    ds = dkernel.detect_change(b, a, method="mad", random_state=0, chunk_rows=8)
    X = rasterio.open(b).read().reshape(3, -1).T.astype(float)
    Y = rasterio.open(a).read().reshape(3, -1).T.astype(float)
    from dkernel.change.mad import fit_mad

    # all pixels are sampled (50 000 > 3000), so the fit sees the same rows
    t = fit_mad(X, Y)
    np.testing.assert_allclose(
        ds["intensity"].values.ravel(), t.intensity(t.variates(X, Y)), rtol=1e-4, atol=1e-4
    )
    assert ds["labels"].values.ravel().tolist() == (
        (t.intensity(t.variates(X, Y)) > ds.attrs["threshold"]).astype(int).tolist()
    )


@pytest.mark.parametrize(
    "change, what",
    [
        ({"crs": "EPSG:32619"}, "CRS EPSG:32618 vs EPSG:32619"),
        ({"transform": from_origin(500030.0, 4200000.0, 30.0, 30.0)}, "transform"),
        ({"shape": True}, r"shape \(rows, cols\) \(60, 50\) vs \(59, 50\)"),
    ],
)
def test_different_grids_are_refused_naming_the_difference(tmp_path, change, what):
    before, after, _ = _scene()
    b = _tif(tmp_path / "b.tif", before)
    kwargs = {k: v for k, v in change.items() if k != "shape"}
    a = _tif(tmp_path / "a.tif", after[:, :-1] if "shape" in change else after, **kwargs)
    with pytest.raises(InvalidInputError, match=what):
        dkernel.detect_change(b, a)
    # the job refuses them when the data is read: validation, before any cluster starts
    spec = validate_spec(
        {
            "name": "x",
            "data": {"reader": "geotiff-pair", "path": str(b), "after_path": str(a)},
            "method": "change-detection",
            "output": str(tmp_path / "x.zarr"),
        }
    )
    with pytest.raises(InvalidInputError, match=what):
        prepare_job(spec)


def test_bad_arguments():
    with pytest.raises(InvalidInputError, match="method must be one of"):
        dkernel.detect_change("a", "b", method="pca")
    with pytest.raises(InvalidInputError, match="threshold must be one of"):
        dkernel.detect_change("a", "b", threshold="kittler")
    with pytest.raises(InvalidInputError, match="DataArray"):
        dkernel.detect_change(xr.DataArray(np.ones((3, 3))), xr.DataArray(np.ones((3, 3))))


def test_kernel_fit_draws_no_change_pixels():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(3000, 3))
    Y = 2 * X + 0.05 * rng.normal(size=X.shape)
    Y[:300] = rng.normal(size=(300, 3)) * 4
    t = fit_change(X, Y, method="kernel", n_landmarks=80, kernel_fit_size=500, random_state=0)
    Z = t.intensity(t.variates(X, Y))
    assert np.median(Z[:300]) > 10 * np.median(Z[300:])


def test_calm_rows_are_a_uniform_draw_from_the_least_changed_half():
    rng = np.random.default_rng(1)
    intensity = rng.permutation(np.r_[np.arange(100.0), np.full(20, 5.0)])
    rows = calm_rows(intensity, size=30, min_rows=4, seed=0)
    order = sorted(range(intensity.size), key=lambda i: (intensity[i], i))  # stable by row
    assert rows.size == 30 and np.all(np.diff(rows) > 0)
    assert set(rows) <= set(order[:60])
    assert np.array_equal(rows, calm_rows(intensity, size=30, min_rows=4, seed=0))
    # a sample smaller than the fit size gives the whole calm half; min_rows floors it
    assert np.array_equal(calm_rows(intensity, size=500, min_rows=4, seed=3), np.sort(order[:60]))
    assert calm_rows(intensity[:6], size=500, min_rows=5, seed=0).size == 5


def test_kernel_mad_on_a_small_sample_of_taizhou_keeps_changed_pixels_out_of_its_fit(
    taizhou_sample,
):
    """On 3 000 pixels IR-MAD's no-change probabilities collapse onto a few pixels (its
    correlations reach 1); drawing the kernel fit by them had fallen back to every pixel,
    changed ones included (ARI 0.68 on this sample); the calm half by intensity gives 0.92."""
    from sklearn.metrics import adjusted_rand_score

    table, change = taizhou_sample
    est = dkernel.ChangeDetection(random_state=0).fit(table)
    assert adjusted_rand_score(change, np.asarray(est.predict(table))) > 0.85


def test_detect_change_keywords_are_the_estimators():
    """detect_change is ChangeDetection in one call: same keywords, same defaults (its
    threshold also takes a number, the estimator's threshold_value)."""
    function = inspect.signature(dkernel.detect_change).parameters
    estimator = inspect.signature(dkernel.ChangeDetection).parameters
    assert set(function) - {"before", "after"} == set(estimator) - {"threshold_value"}
    for name, param in function.items():
        if name in estimator:
            assert param.default == estimator[name].default, name


def test_detect_change_equals_the_estimator(pair):
    b, a, _ = pair
    once = dkernel.detect_change(b, a, method="irmad", threshold=3.0, random_state=0)
    est = dkernel.ChangeDetection(method="irmad", threshold_value=3.0, random_state=0)
    fitted = est.fit(b, a).transform(b, a)
    again = est.fit_transform(b, a)
    for ds in (fitted, again):
        for name in ("variates", "intensity", "labels"):
            np.testing.assert_array_equal(ds[name].values, once[name].values)
    assert est.threshold_ == 3.0 and once.attrs["threshold"] == 3.0
    np.testing.assert_array_equal(est.correlations_, once["correlations"].values)


def test_estimator_refuses_bad_parameters(pair):
    b, a, _ = pair
    with pytest.raises(ValueError, match="method"):
        dkernel.ChangeDetection(method="cva").fit(b, a)


def test_change_detection_job(pair, tmp_path, client):
    b, a, truth = pair
    spec = validate_spec(
        {
            "name": "cd",
            "seed": 0,
            "data": {"reader": "geotiff-pair", "path": str(b), "after_path": str(a)},
            "method": "change-detection",
            "params": {"method": "irmad"},
            "output": str(tmp_path / "cd.zarr"),
        }
    )
    store = run_job(spec, output=tmp_path / "cd.zarr", client=client, progress=False)
    res = open_results(store)
    change = res["change"].to_dataset()
    assert change["labels"].rio.crs.to_epsg() == 32618
    expected = dkernel.detect_change(b, a, method="irmad", random_state=0)
    np.testing.assert_array_equal(change["labels"].values, expected["labels"].values)
    cog = tmp_path / "cd.labels.tif"
    with rasterio.open(cog) as src:
        assert src.crs.to_epsg() == 32618 and src.transform == TRANSFORM
        assert (src.read(1) == 1).sum() == (expected["labels"].values == 1).sum()
    assert (tmp_path / "cd.quicklook.png").stat().st_size > 0
    # the intensity and the variates as one float32 COG with the source's CRS
    with rasterio.open(tmp_path / "cd.values.tif") as src:
        k = expected.sizes["component"]
        assert src.crs.to_epsg() == 32618 and src.transform == TRANSFORM
        assert src.count == 1 + k and src.dtypes[0] == "float32"
        assert src.descriptions == ("intensity", *(f"variates_{i + 1}" for i in range(k)))
        np.testing.assert_allclose(src.read(1), expected["intensity"].values, rtol=1e-6)
        np.testing.assert_allclose(src.read(2), expected["variates"].values[0], rtol=1e-6)
    assert change.attrs["values_geotiff"].endswith("cd.values.tif")
    assert not validate_cog(tmp_path / "cd.values.tif")
