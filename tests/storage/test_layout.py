"""The store layout: every group's builder gives the variables, dims and attributes it documents."""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pytest
import rioxarray  # noqa: F401  (the .rio accessor)
import xarray as xr

from dkernel.errors import InvalidInputError
from dkernel.storage import ResultsStore, open_results
from dkernel.storage.attributes import lookup
from dkernel.storage.geo import LABEL_NODATA
from dkernel.storage.layout import (
    GROUPS,
    decomposition_dataset,
    embedding_dataset,
    features_dataset,
    gmm_dataset,
    input_dataset,
    kernel_dataset,
    labels_dataset,
    landmarks_dataset,
    metrics_dataset,
    mssc_dataset,
    posteriors_dataset,
    ranking_dataset,
    selection_dataset,
)


def _dims(ds: xr.Dataset) -> dict[str, tuple[str, ...]]:
    return {str(name): tuple(map(str, var.dims)) for name, var in ds.data_vars.items()}


def _image(georeferenced: bool = True) -> xr.DataArray:
    image = xr.DataArray(
        np.zeros((2, 3, 4)),
        dims=("band", "y", "x"),
        coords={"y": 100.0 - 30.0 * np.arange(3), "x": 500.0 + 30.0 * np.arange(4)},
    )
    return image.rio.write_crs("EPSG:32633") if georeferenced else image


def test_input():
    ds = input_dataset(
        n_samples=3,
        n_features=2,
        n_missing=1,
        feature_names=["a", "b"],
        labels_true=[0, 1, 1],
        meta={"reader": "csv"},
    )
    assert _dims(ds) == {"labels_true": ("sample",)}
    assert ds.attrs == {
        "n_samples": 3,
        "n_features": 2,
        "n_missing": 1,
        "feature_names": ["a", "b"],
        "reader": "csv",
    }
    bare = input_dataset(n_samples=3, n_features=2, n_missing=None, feature_names=None)
    assert not bare.data_vars and bare.attrs["feature_names"] == []


def test_labels():
    ds = labels_dataset(
        np.array([0, 1, 1], dtype=np.int32),
        n_clusters=2,
        clustering="k-means",
        centers=np.zeros((2, 3)),
        inertia=0.5,
    )
    assert _dims(ds) == {"labels": ("sample",), "centers": ("cluster", "component")}
    assert ds["labels"].dtype == np.int64
    assert ds.attrs == {"n_clusters": 2, "clustering": "k-means", "inertia": 0.5}
    assert "cluster" not in ds.coords
    jrc = labels_dataset(
        [0, 1, 1],
        n_clusters=2,
        clustering="k-means",
        centers=np.zeros((2, 3)),
        centers_name="cluster_centers",
        cluster_coordinate=True,
    )
    assert set(jrc.data_vars) == {"labels", "cluster_centers"}
    np.testing.assert_array_equal(jrc["cluster"], [0, 1])
    assert "inertia" not in jrc.attrs


def test_lazy_labels_stay_lazy():
    ds = labels_dataset(da.zeros(10, chunks=5, dtype=np.int32), n_clusters=1, clustering="x")
    assert isinstance(ds["labels"].data, da.Array) and ds["labels"].dtype == np.int64


def test_metrics():
    ds = metrics_dataset({"acc": 0.9, "nmi": 0.8})
    assert _dims(ds) == {"acc": (), "nmi": ()}
    assert float(ds["acc"]) == 0.9 and ds.attrs == {"acc": 0.9, "nmi": 0.8}


def test_kernel_and_features():
    K = da.ones((5000, 5000), chunks=(1000, 1000))
    ds = kernel_dataset(K, attrs={"kernel": "pck", "normalized": False}, block_size=2048)
    assert _dims(ds) == {"kernel": ("sample", "sample_")}
    assert ds["kernel"].data.chunks[0][0] == 2048
    assert ds.attrs == {"kernel": "pck", "normalized": False}
    small = kernel_dataset(da.ones((10, 10), chunks=5), attrs={"kernel": "rbf"}, block_size=2048)
    assert small["kernel"].data.chunks == ((10,), (10,))
    kept = kernel_dataset(K, attrs={"kernel": "rbf", "sigma": 1.0})
    assert kept["kernel"].data.chunks == K.chunks

    F = features_dataset(np.ones((4, 6)))
    assert _dims(F) == {"features": ("sample", "feature")}
    assert F.attrs["description"].startswith("Γ/√Z")


def test_embedding():
    ds = embedding_dataset(
        np.ones((5, 2)),
        np.array([2.0, 1.0]),
        criterion=np.array([2.0, 1.0]),
        eigen_index=np.array([0, 3], dtype=np.int32),
        degrees=np.ones(5),
        global_rank=np.full(5, 0.2),
        attrs={"method": "kpca"},
    )
    assert _dims(ds) == {
        "embedding": ("sample", "component"),
        "eigenvalues": ("component",),
        "criterion": ("component",),
        "eigen_index": ("component",),
        "degrees": ("sample",),
        "global_rank": ("sample",),
    }
    assert ds["eigen_index"].dtype == np.int64
    np.testing.assert_array_equal(ds["component"], [0, 1])
    assert ds.attrs == {"method": "kpca"}


def test_embedding_of_an_in_sample_subset():
    ds = embedding_dataset(
        np.ones((3, 2)), np.ones(2), degrees=np.ones(3), fit_index=np.array([0, 4, 9])
    )
    assert _dims(ds) == {
        "embedding": ("fit_sample", "component"),
        "eigenvalues": ("component",),
        "degrees": ("fit_sample",),
        "fit_index": ("fit_sample",),
    }
    assert ds["fit_index"].dtype == np.int64


def test_landmarks():
    ds = landmarks_dataset(np.array([3, 1], dtype=np.int32), np.array([1.0, 0.5, 0.1]))
    assert _dims(ds) == {"index": ("landmark",), "spectrum": ("eigen",)}
    assert ds["index"].dtype == np.int64 and "description" in ds.attrs


def _gmm(covariance_type="diag", *, projection=None, missing=False, ratio=True):
    # Q = 2 inits, G = 3: models (q, g) = (0, 2), (0, 3), (1, 2), (1, 3)
    inits, components = np.array([0, 0, 1, 1]), np.array([2, 3, 2, 3])
    p = 2 if projection is None else projection.shape[1]
    second = [
        np.ones((g, p)) if covariance_type == "diag" else np.ones((g, p, p)) for g in components
    ]
    return gmm_dataset(
        inits=inits,
        components=components,
        means=[np.full((g, p), float(m)) for m, g in enumerate(components)],
        second_moments=second,
        weights=[np.full(g, 1.0 / g) for g in components],
        missing_probs=[np.zeros((g, p)) for g in components] if missing else None,
        n_inits=2,
        max_components=3,
        covariance_type=covariance_type,
        location=np.array([10.0, 20.0]),
        feature_index=np.array([0, 2]),
        mean_entropy=np.arange(4.0),
        projection=projection,
        projection_variance_ratio=np.array([1.0]) if projection is not None and ratio else None,
        attrs={"n_iter": 10},
    )


def test_gmm_diag_pads_missing_components_with_nan():
    ds = _gmm(missing=True)
    f = ("init", "n_components", "component", "feature")
    assert _dims(ds) == {
        "means": f,
        "weights": f[:3],
        "mean_entropy": f[:2],
        "location": ("feature",),
        "feature_index": ("feature",),
        "variances": f,
        "missing_probs": f,
    }
    assert ds["means"].shape == (2, 2, 3, 2)
    np.testing.assert_array_equal(ds["n_components"], [2, 3])
    # model 1 is (q=0, g=3), stored shifted back by the location
    np.testing.assert_array_equal(ds["means"][0, 1].values, [[11.0, 21.0]] * 3)
    assert np.isnan(ds["means"][1, 0, 2]).all()  # (q=1, g=2) has no third component
    np.testing.assert_array_equal(ds["mean_entropy"].values, [[0.0, 1.0], [2.0, 3.0]])
    assert ds.attrs["n_estimators"] == ds.attrs["n_inits"] == 2 and ds.attrs["max_components"] == 3
    assert ds.attrs["n_iter"] == 10 and ds.attrs["covariance_type"] == "diag"
    assert "padding components are NaN" in ds.attrs["description"]


def test_gmm_full_covariance_and_projection():
    full = _gmm("full")
    assert full["covariances"].dims == ("init", "n_components", "component", "feature", "feature_")
    assert "variances" not in full and "missing_probs" not in full
    W = np.ones((2, 1))
    proj = _gmm(projection=W)
    assert proj["means"].dims[-1] == "axis"
    assert proj["projection"].dims == ("feature", "axis")
    assert proj["projection_variance_ratio"].dims == ("axis",)
    # with a projection the means stay in the axes' coordinates
    np.testing.assert_array_equal(proj["means"][0, 1].values, [[1.0]] * 3)


def test_gmm_projection_without_its_variance_ratio():
    ds = _gmm(projection=np.ones((2, 1)), ratio=False)
    assert ds["projection"].dims == ("feature", "axis")
    assert "projection_variance_ratio" not in ds


def test_ranking_is_lazy_and_keeps_the_top_k():
    scores = da.from_array(np.array([[0.1, 0.9], [0.5, 0.2], [0.3, 0.4]]), chunks=(2, 2))
    with dask.config.set(scheduler="sync"):
        ds = ranking_dataset(
            scores,
            ["a", "b"],
            k=2,
            attrs={"method": "kppr", "beta": 0.1},
            projection=da.ones((3, 4), chunks=(2, 4)),
            in_sample=np.array([True, False, True]),
        )
    assert _dims(ds) == {
        "score": ("sample", "seed"),
        "top_index": ("seed", "rank"),
        "top_score": ("seed", "rank"),
        "projection": ("sample", "basis"),
        "in_sample": ("sample",),
    }
    assert all(isinstance(ds[v].data, da.Array) for v in ds.data_vars)
    assert ds["in_sample"].data.chunks == ((2, 1),)  # chunked like the scores
    np.testing.assert_array_equal(ds["top_index"].values, [[1, 2], [0, 2]])
    np.testing.assert_array_equal(ds["rank"], [1, 2])
    assert list(ds["seed"].values) == ["a", "b"]
    assert ds.attrs == {"method": "kppr", "beta": 0.1}
    assert "dkernel.seed_scores" in ds["projection"].attrs["description"]
    with pytest.raises(InvalidInputError, match="2 score columns but 1 seed names"):
        ranking_dataset(scores, ["a"])


def test_ranking_with_clusters():
    per_cluster = np.full((2, 3, 4), -1, dtype=np.int64)
    ds = ranking_dataset(
        np.ones((5, 2)), ["global", "cluster_0"], k=3, cluster_top_index=per_cluster
    )
    assert ds["cluster_top_index"].dims == ("seed", "cluster", "cluster_rank")
    np.testing.assert_array_equal(ds["cluster"], [0, 1, 2])
    np.testing.assert_array_equal(ds["cluster_rank"], [1, 2, 3, 4])
    assert "-1 pads" in ds["cluster_top_index"].attrs["description"]


# rioxarray's transform() multiplies affine.Affine objects with `*`, which affine deprecates
@pytest.mark.filterwarnings("ignore:Use `@` matmul:PendingDeprecationWarning")
@pytest.mark.parametrize("georeferenced", [True, False])
def test_mssc(georeferenced):
    image = _image(georeferenced)
    grid = np.array([[0, 1, 1, -1]] * 3)
    m, f, c = 2, 3, 2
    ds = mssc_dataset(
        labels=grid,
        partition=grid,
        valid=grid >= 0,
        image=image,
        modes=np.ones((m, f)),
        partition_labels=np.arange(m),
        partition_sizes=np.array([3, 6]),
        affinity=np.eye(m),
        embedding=np.ones((m, c)),
        eigenvalues=np.ones(c),
        density=np.ones((7, f)),
        seeds=np.ones((4, f)),
        seed_partition=np.zeros(4, dtype=np.int64),
        attrs={"bandwidth": 0.5},
    )
    assert _dims(ds) == {
        "labels": ("y", "x"),
        "partition": ("y", "x"),
        "valid": ("y", "x"),
        "modes": ("partition_id", "feature"),
        "partition_labels": ("partition_id",),
        "partition_sizes": ("partition_id",),
        "affinity": ("partition_id", "partition_id_"),
        "embedding": ("partition_id", "component"),
        "eigenvalues": ("component",),
        "density": ("density_point", "feature"),
        "seeds": ("seed", "feature"),
        "seed_partition": ("seed",),
    }
    assert ds["labels"].dtype == np.int32
    assert ds["labels"].encoding["_FillValue"] == LABEL_NODATA
    assert ds.attrs["bandwidth"] == 0.5 and ds.attrs["nodata"] == LABEL_NODATA
    assert ("crs" in ds.attrs) == georeferenced == ("spatial_ref" in ds["labels"].coords)
    if georeferenced:
        assert ds.attrs["crs"] == "EPSG:32633" and len(ds.attrs["transform"]) == 6


def test_decomposition_and_posteriors():
    W, H, priors = np.full((4, 2), 0.25), np.full((2, 4), 0.5), np.array([0.5, 0.5])
    ds = decomposition_dataset(W, H, priors, attrs={"kernel": "gaussian"})
    assert _dims(ds) == {
        "W": ("sample", "cluster"),
        "H": ("cluster", "sample"),
        "priors": ("cluster",),
    }
    np.testing.assert_array_equal(ds["sample"], np.arange(4))
    assert ds.attrs["kernel"] == "gaussian" and ds.attrs["W"].startswith("P(x_i | c)")
    post = posteriors_dataset(np.full((4, 2), 0.5))
    assert _dims(post) == {"posteriors": ("sample", "cluster")}
    np.testing.assert_array_equal(post["cluster"], [0, 1])
    assert "Eq. 9" in post.attrs["posteriors"]


def test_selection():
    shape = (3, 2, 2, 4)  # repeat, neighbors, bandwidth, n_clusters
    errors = np.arange(np.prod(shape), dtype=float).reshape(shape)
    ds = selection_dataset(
        errors=errors,
        error_mean=errors.mean(0),
        error_sem=errors.std(0),
        error_vs_sigma_mean=np.zeros((2, 2)),
        error_vs_sigma_sem=np.zeros((2, 2)),
        confidence=np.ones(shape),
        accuracy=None,
        sigmas=[0.1, 0.2],
        n_neighbors=[None, 10],
        n_clusters=[1, 2, 3, 4],
        chosen={"sigma": 0.2, "n_neighbors": None, "n_clusters": 3, "sigma_index": 1},
        c_rule="min",
        attrs={"n_selection_samples": 100},
    )
    grid = ("repeat", "neighbors", "bandwidth", "n_clusters")
    assert _dims(ds) == {
        "error": grid,
        "error_mean": grid[1:],
        "error_sem": grid[1:],
        "confidence": grid,
        "error_vs_bandwidth_mean": ("neighbors", "bandwidth"),
        "error_vs_bandwidth_sem": ("neighbors", "bandwidth"),
    }
    np.testing.assert_array_equal(ds["neighbors"], [0, 10])  # None: the dense kernel
    np.testing.assert_array_equal(ds["repeat"], [0, 1, 2])
    assert ds.attrs["chosen_n_neighbors"] == 0 and ds.attrs["chosen_n_clusters"] == 3
    # the width is stored under its new and its old name
    assert ds.attrs["chosen_sigma"] == ds.attrs["chosen_bandwidth"] == 0.2
    assert ds.attrs["chosen_sigma_index"] == ds.attrs["chosen_bandwidth_index"] == 1
    assert ds.attrs["c_rule"] == "min" and ds.attrs["n_selection_samples"] == 100


def test_every_group_has_a_builder_and_every_variable_a_description():
    """The layout and the attribute catalogue (storage/attributes.py) agree."""
    datasets = {
        "input": input_dataset(
            n_samples=2, n_features=1, n_missing=0, feature_names=None, labels_true=[0, 1]
        ),
        "kernel": kernel_dataset(np.eye(2), attrs={"kernel": "rbf"}),
        "features": features_dataset(np.ones((2, 3))),
        "embedding": embedding_dataset(
            np.ones((2, 1)),
            np.ones(1),
            criterion=np.ones(1),
            eigen_index=[0],
            degrees=np.ones(2),
            global_rank=np.ones(2),
        ),
        "landmarks": landmarks_dataset([0], [1.0]),
        "labels": labels_dataset(
            [0, 1], n_clusters=2, clustering="k-means", centers=np.ones((2, 1))
        ),
        "metrics": metrics_dataset({"acc": 1.0, "nmi": 1.0, "ari": 1.0}),
        "gmm": _gmm(missing=True),
        "ranking": ranking_dataset(
            np.ones((2, 1)),
            ["s"],
            k=1,
            projection=np.ones((2, 2)),
            in_sample=[True, False],
            cluster_top_index=np.zeros((1, 1, 1)),
        ),
        "decomposition": decomposition_dataset(np.ones((2, 1)), np.ones((1, 2)), np.ones(1)),
        "posteriors": posteriors_dataset(np.ones((2, 1))),
    }
    assert set(datasets) <= set(GROUPS)
    undescribed = [
        f"{group}/{name}"
        for group, ds in datasets.items()
        for name in ds.data_vars
        if lookup(group, str(name)) is None
    ]
    assert not undescribed, f"add these to dkernel/storage/attributes.py: {undescribed}"


def test_groups_round_trip_through_the_store(tmp_path):
    store = ResultsStore.create(tmp_path / "s.zarr", job={"method": "test"}, seed=0)
    written = {
        "embedding": embedding_dataset(np.ones((3, 2)), np.ones(2), fit_index=[0, 1, 2]),
        "labels": labels_dataset([0, 1, 0], n_clusters=2, clustering="k-means"),
        "ranking": ranking_dataset(np.ones((3, 1)), ["s"], k=2),
    }
    with dask.config.set(scheduler="sync"):
        for group, ds in written.items():
            store.write(group, ds)
    store.mark_complete()
    tree = open_results(tmp_path / "s.zarr")
    for group, ds in written.items():
        assert _dims(tree[group].to_dataset()) == _dims(ds)
