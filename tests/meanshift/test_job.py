"""The ``mssc`` job method end to end on a small GeoTIFF cut from the vendored scene."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import rioxarray

from dkernel.cli import main
from dkernel.io import raster as R
from dkernel.jobs.runner import prepare_job, run_job
from dkernel.meanshift.stage_two import SILHOUETTE_MARGIN
from dkernel.storage.store import open_results, recorded_path

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def small_tif(tmp_path_factory):
    """A 90 x 120 corner of RGB.byte.tif that contains part of the nodata collar."""
    img = rioxarray.open_rasterio(R.package_data_path("RGB.byte.tif"))
    cut = img.isel(y=slice(300, 390), x=slice(0, 120))
    path = tmp_path_factory.mktemp("tif") / "small.tif"
    cut.rio.to_raster(path)
    return path


def _spec(tmp_path, tif, **params):
    lines = (
        [
            "name: small-mssc",
            "seed: 3",
            "data:",
            "  reader: geotiff",
            f"  path: {tif}",
            "  scale: standardize",
            "  coord_scale: 1.0",
            "method: mssc",
            "params:",
            "  n_clusters: 3",
            "  n_seeds: 100",
            "  n_init: 10",
        ]
        + [f"  {k}: {v}" for k, v in params.items()]
        + [f"output: {tmp_path / 'out.zarr'}"]
    )
    path = tmp_path / "job.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("affinity", ["exact", "rff", "sample"])
def test_mssc_job_end_to_end(tmp_path, small_tif, client, affinity, capsys):
    out = run_job(
        _spec(tmp_path, small_tif, affinity=affinity),
        client=client,
        progress=False,
        quiet=True,
    )
    tree = open_results(out)
    ms = tree["mssc"].to_dataset()
    src = rioxarray.open_rasterio(small_tif)
    valid = (src.values != 0).any(axis=0)
    labels = ms["labels"].values
    assert labels.shape == (90, 120) and ms["labels"].dims == ("y", "x")
    np.testing.assert_allclose(ms["x"].values, src["x"].values)
    assert (labels[~valid] == -1).all() and (labels[valid] >= 0).all()
    assert (~valid).any()  # the cut really has a collar
    assert set(np.unique(labels[valid])) == {0, 1, 2}
    assert ms.attrs["crs"] == "EPSG:32618"
    assert ms.attrs["affinity_method"] == affinity
    # stage two's choice and its evidence: the smaller eigengap ratio
    at_sigma, at_limit = ms.attrs["eigengap_ratios"]
    assert 0 < at_sigma < 1 and 0 < at_limit < 1
    assert ms.attrs["wide_limit"] == "auto"
    assert ms.attrs["wide_limit_chosen"] is bool(at_limit < at_sigma)
    # the partition graph kept and its evidence (none where the rff affinity holds no rows)
    assert ms.attrs["normalization"] == "auto"
    silhouettes = ms.attrs["normalization_silhouettes"]
    if affinity == "rff":
        assert silhouettes is None and ms.attrs["normalization_chosen"] == "size"
    else:
        assert set(silhouettes) == {"size", "cs"}
        best = max(silhouettes, key=lambda g: silhouettes[g] - SILHOUETTE_MARGIN * (g != "size"))
        assert ms.attrs["normalization_chosen"] == best
        # `dkernel show` prints both choices of stage two with their evidence
        assert main(["show", str(out)]) == 0
        shown = capsys.readouterr().out
        size, cs = silhouettes["size"], silhouettes["cs"]
        assert f"partition graph: {best} (silhouettes size {size:.3f}, cs {cs:.3f})" in shown
        kept = "the wide limit of the affinity" if at_limit < at_sigma else "the affinity at sigma"
        assert f"stage two: {kept} (eigengap ratios {at_sigma:.3f} at sigma, " in shown
    m = ms.attrs["n_partitions"]
    assert ms["affinity"].shape == (m, m) and ms["modes"].shape == (m, 5)
    part = ms["partition"].values
    np.testing.assert_array_equal(labels[valid], ms["partition_labels"].values[part[valid]])
    np.testing.assert_array_equal(
        ms["partition_sizes"].values, np.bincount(part[valid], minlength=m)
    )
    assert not (out.parent / f".{out.name}.scratch").exists()  # the partitions' scratch array
    assert ms.attrs["label_geotiff"] == "../out.labels.tif"  # relative to the store
    tif = recorded_path(out, ms.attrs["label_geotiff"])
    assert tif == out.parent / "out.labels.tif"
    back = rioxarray.open_rasterio(tif)
    assert back.rio.crs == src.rio.crs and back.rio.transform() == src.rio.transform()
    assert back.rio.nodata == ms.attrs["label_geotiff_nodata"] == 255  # the store keeps -1
    np.testing.assert_array_equal(back.values[0], np.where(labels < 0, 255, labels))
    table = recorded_path(out, ms.attrs["class_table_csv"])
    assert table == out.parent / "out.labels.classes.csv" and table.is_file()
    assert recorded_path(out, ms.attrs["quicklook_png"]).read_bytes()[:4] == b"\x89PNG"


def test_mssc_job_unit_bands(tmp_path, small_tif, client):
    """Min-max scaled (non-negative) bands of a 3-band image: 'auto' keeps them (an RGB photo
    reduced to colour directions loses brightness); band_norm: unit clusters spectral angles."""
    spec = _spec(tmp_path, small_tif).read_text().replace("scale: standardize", "scale: minmax")
    (tmp_path / "job.yaml").write_text(spec)
    job = prepare_job(tmp_path / "job.yaml")
    assert job[1].meta.get("bands") is None
    from dkernel.meanshift.bands import resolve_band_norm

    assert resolve_band_norm(job[1].X, 3, "auto") == "none"
    (tmp_path / "job.yaml").write_text(spec.replace("params:\n", "params:\n  band_norm: unit\n"))
    out = run_job(tmp_path / "job.yaml", client=client, progress=False, quiet=True)
    ms = open_results(out)["mssc"].to_dataset()
    assert ms.attrs["band_norm"] == "unit" and ms.attrs["embedding"] == "normalized"
    # stored modes live in the normalised space: band part of unit length
    norms = np.linalg.norm(ms["modes"].values[:, :3], axis=1)
    assert (norms <= 1 + 1e-5).all() and (norms > 0.8).all()
    labels = ms["labels"].values
    assert set(np.unique(labels[labels >= 0])) == {0, 1, 2}


def test_example_jobs_validate(monkeypatch, data_dir):
    monkeypatch.setenv("DKERNEL_DATA", str(data_dir))
    for job in sorted((REPO / "jobs").glob("*mssc*.yaml")):
        spec, data = prepare_job(job)
        assert spec.method == "mssc" and data.raster is not None


def test_job_defaults_equal_the_estimator_defaults():
    """One set of defaults (issue 15): the job passes its parameters to MSSC unchanged."""
    import inspect

    from dkernel.jobs.steps.mssc import PARAMS
    from dkernel.meanshift.estimators import MSSC

    defaults = {
        name: p.default
        for name, p in inspect.signature(MSSC).parameters.items()
        if p.default is not inspect.Parameter.empty
    }
    # random_state is the job's seed; progress the runner's switch (neither is a parameter)
    shared = [p for p in PARAMS if p.name in defaults]
    assert len(shared) >= 18
    for param in shared:
        assert param.default == defaults[param.name], param.name
