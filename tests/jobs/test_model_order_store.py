"""The evidence of ``n_clusters: auto`` reaches the store (``/model_order``), ``dkernel show``
and the quick-look of image jobs; a job given its number of clusters writes none of it."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from sklearn.datasets import make_blobs

from dkernel.cli import main
from dkernel.jobs.runner import run_job
from dkernel.jobs.spec import validate_spec
from dkernel.storage import open_results, read_model_order


@pytest.fixture(scope="module")
def blobs_csv(tmp_path_factory):
    X, _ = make_blobs(300, centers=4, cluster_std=0.5, random_state=0)
    path = tmp_path_factory.mktemp("data") / "blobs.csv"
    path.write_text("\n".join(",".join(f"{v:.6f}" for v in row) for row in X) + "\n")
    return path


def _spec(data, method, params):
    return validate_spec(
        {
            "name": "model-order",
            "seed": 0,
            "data": data,
            "method": method,
            "params": params,
            "output": "unused.zarr",
        }
    )


def _run(spec, out, client):
    return run_job(spec, output=out, client=client, progress=False, quiet=True)


def test_spectral_clustering_auto_writes_and_shows_the_evidence(
    tmp_path, blobs_csv, client, capsys
):
    spec = _spec(
        {"reader": "csv", "path": str(blobs_csv)}, "spectral-clustering", {"n_clusters": "auto"}
    )
    store = _run(spec, tmp_path / "s.zarr", client)
    tree = open_results(store)
    order = read_model_order(store)
    assert order is not None and order.rule == "timescale-gap"
    k = int(tree["labels"].attrs["n_clusters"])
    assert order.n_clusters == k == tree["embedding"].attrs["n_clusters_chosen"]
    np.testing.assert_array_equal(order.candidates, np.arange(2, order.candidates[-1] + 1))
    assert order.scores.shape == order.candidates.shape
    # the spectrum the scores came from is the embedding's stored one
    group = tree["model_order"]
    assert group["spectrum"].dims == ("rank",)
    np.testing.assert_allclose(
        order.details["spectrum"], tree["embedding"]["spectrum"].values[: group.sizes["rank"]]
    )
    assert main(["show", str(store)]) == 0
    out = capsys.readouterr().out
    assert f"model order: k = {k} by the timescale-gap rule, higher wins" in out
    chosen = order.scores[order.candidates == k][0]
    assert f"[{k}: {chosen:.4g}]" in out


def test_a_given_number_of_clusters_writes_no_evidence(tmp_path, blobs_csv, client, capsys):
    spec = _spec(
        {"reader": "csv", "path": str(blobs_csv)}, "spectral-clustering", {"n_clusters": 4}
    )
    store = _run(spec, tmp_path / "s.zarr", client)
    assert "model_order" not in open_results(store).children
    assert read_model_order(store) is None
    assert main(["show", str(store)]) == 0
    assert "model order" not in capsys.readouterr().out


def _png_size(path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", head[16:24])


def test_image_job_quicklook_draws_the_evidence_only_with_auto(tmp_path, client):
    rioxarray = pytest.importorskip("rioxarray")
    from dkernel.io import raster

    img = rioxarray.open_rasterio(raster.package_data_path("RGB.byte.tif"))
    tif = tmp_path / "small.tif"
    img.isel(y=slice(330, 370), x=slice(380, 430)).rio.to_raster(tif)
    data = {"reader": "geotiff", "path": str(tif), "scale": "standardize"}
    sizes = {}
    for k in ("auto", 3):
        params = {"n_clusters": k, "write_geotiff": False}
        store = _run(_spec(data, "spectral-clustering", params), tmp_path / f"{k}.zarr", client)
        png = tmp_path / f"{k}.quicklook.png"
        assert png.exists()
        sizes[k] = _png_size(png)
        assert ("model_order" in open_results(store).children) == (k == "auto")
    # the evidence panel widens the figure (by 4 inches at 90 dpi); the maps are the same
    assert sizes["auto"][0] - sizes[3][0] == 4 * 90
    assert sizes["auto"][1] == sizes[3][1]


@pytest.mark.parametrize(
    ("method", "params", "rule"),
    [
        ("kernel-kmeans", {"n_clusters": "auto", "max_clusters": 6}, "timescale-gap"),
        ("jrc", {"n_clusters": "auto"}, "timescale-gap"),
    ],
)
def test_auto_jobs_of_other_methods_store_their_evidence(
    tmp_path, blobs_csv, client, method, params, rule
):
    spec = _spec({"reader": "csv", "path": str(blobs_csv)}, method, params)
    store = _run(spec, tmp_path / "s.zarr", client)
    order = read_model_order(store)
    assert order is not None and order.rule == rule
    assert order.n_clusters == int(open_results(store)["labels"].attrs["n_clusters"])
