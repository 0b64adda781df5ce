"""``n_clusters: auto`` in the jobs: the chosen number of clusters and its eigengap evidence
are stored in the method's group."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import make_blobs

from dkernel.errors import InvalidInputError
from dkernel.jobs.runner import run_job
from dkernel.jobs.spec import validate_spec
from dkernel.model_order import candidate_range, spectrum_model_order
from dkernel.storage import open_results


@pytest.fixture(scope="module")
def blobs_csv(tmp_path_factory):
    X, _ = make_blobs(300, centers=4, cluster_std=0.5, random_state=0)
    path = tmp_path_factory.mktemp("data") / "blobs.csv"
    path.write_text("\n".join(",".join(f"{v:.6f}" for v in row) for row in X) + "\n")
    return path


def _spec(path, method, params):
    return validate_spec(
        {
            "name": "auto-k",
            "seed": 0,
            "data": {"reader": "csv", "path": str(path)},
            "method": method,
            "params": params,
            "output": "unused.zarr",
        }
    )


def _check_evidence(group, n_labels):
    # the candidates are 2 .. clip(sqrt n, 10, 50) (max_clusters: null, the default); the
    # rule's scores are in /model_order (tests/jobs/test_model_order_store.py)
    spectrum = group["spectrum"].values
    assert group["spectrum"].dims == ("rank",) and spectrum.size >= 11
    assert group.attrs["n_clusters_chosen"] == 4
    assert n_labels == 4


def test_spectral_clustering_job_stores_the_chosen_k_and_spectrum(tmp_path, blobs_csv, client):
    spec = _spec(blobs_csv, "spectral-clustering", {"n_clusters": "auto"})
    tree = open_results(
        run_job(spec, output=tmp_path / "s.zarr", client=client, progress=False, quiet=True)
    )
    emb = tree["embedding"]
    assert emb.attrs["n_clusters"] == "auto"
    _check_evidence(emb, np.unique(tree["labels"]["labels"].values).size)
    assert int(tree["labels"].attrs["n_clusters"]) == 4


def test_kernel_decomposition_job_stores_the_chosen_k_and_spectrum(tmp_path, blobs_csv, client):
    spec = _spec(blobs_csv, "kernel-decomposition", {"n_clusters": "auto", "scale": "none"})
    tree = open_results(
        run_job(spec, output=tmp_path / "k.zarr", client=client, progress=False, quiet=True)
    )
    dec = tree["decomposition"]
    assert dec.attrs["n_clusters_requested"] == "auto" and int(dec.attrs["n_clusters"]) == 4
    assert tree["posteriors"]["posteriors"].shape == (300, 4)
    _check_evidence(dec, np.unique(tree["labels"]["labels"].values).size)


def test_kernel_decomposition_auto_with_a_selection_grid_is_refused(blobs_csv):
    from dkernel.jobs.steps.kernel_decomposition import check_data

    spec = _spec(
        blobs_csv,
        "kernel-decomposition",
        {"n_clusters": "auto", "kernel": "rbf", "sigmas": [0.1, 0.2]},
    )

    class _Data:
        n_samples = 300

    with pytest.raises(InvalidInputError, match="cannot be combined with a selection grid"):
        check_data(spec.params, _Data())


def test_mssc_job_stores_the_chosen_k_and_spectrum(tmp_path, client):
    rioxarray = pytest.importorskip("rioxarray")
    from dkernel.io import raster

    img = rioxarray.open_rasterio(raster.package_data_path("RGB.byte.tif"))
    tif = tmp_path / "small.tif"
    img.isel(y=slice(300, 390), x=slice(0, 120)).rio.to_raster(tif)
    spec = validate_spec(
        {
            "name": "auto-k-mssc",
            "seed": 3,
            "data": {"reader": "geotiff", "path": str(tif), "scale": "standardize"},
            "method": "mssc",
            "params": {"n_clusters": "auto", "n_seeds": 100, "n_init": 10},
            "output": "unused.zarr",
        }
    )
    tree = open_results(
        run_job(spec, output=tmp_path / "m.zarr", client=client, progress=False, quiet=True)
    )
    ms = tree["mssc"]
    chosen = ms.attrs["n_clusters_chosen"]
    assert ms.attrs["n_clusters"] == "auto" and 2 <= chosen <= 10
    assert ms["spectrum"].dims == ("rank",)
    spectrum = ms["spectrum"].values
    candidates = candidate_range(int(ms.attrs["n_partitions"]))
    assert (
        chosen == spectrum_model_order(spectrum, candidates[candidates < spectrum.size]).n_clusters
    )
    labels = ms["labels"].values
    assert np.unique(labels[labels >= 0]).size == chosen
