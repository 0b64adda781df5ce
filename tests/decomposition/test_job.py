"""``method: kernel-decomposition`` end to end through the job runner."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dkernel.decomposition import KernelDecompositionClustering
from dkernel.errors import InvalidInputError, SpecError
from dkernel.jobs.runner import run_job
from dkernel.jobs.spec import load_spec, validate_spec
from dkernel.storage import open_results

REPO = Path(__file__).resolve().parents[2]


def _spec(out, **params):
    return validate_spec(
        {
            "name": "kdc-test",
            "seed": 0,
            "data": {"reader": "sklearn", "name": "iris"},
            "method": "kernel-decomposition",
            "params": params,
            "output": str(out),
        }
    )


def test_selection_job_writes_surface_factors_and_posteriors(tmp_path, client):
    spec = _spec(
        tmp_path / "s.zarr",
        kernel="rbf",
        sigmas=[0.02, 0.1, 0.6],
        n_clusters=[2, 3],
        n_repeats=2,
        n_init=2,
    )
    out = run_job(spec, client=client, progress=False, quiet=True)
    tree = open_results(out)
    assert tree.attrs["status"] == "complete"
    sel = tree["selection"]
    assert sel["error"].shape == (2, 1, 3, 2)
    assert sel.attrs["chosen_bandwidth"] in (0.02, 0.1, 0.6)  # the key before sigma, kept
    assert sel.attrs["chosen_sigma"] == sel.attrs["chosen_bandwidth"]
    hm = sel["error_vs_bandwidth_mean"].values[0]
    assert np.argmin(hm) == 1  # too narrow and too wide both generalise worse
    dec = tree["decomposition"]
    C = int(dec.attrs["n_clusters"])
    np.testing.assert_allclose(dec["W"].values.sum(0), 1.0, atol=1e-8)
    np.testing.assert_allclose(dec["H"].values.sum(0), 1.0, atol=1e-8)
    P = tree["posteriors"]["posteriors"].values
    assert P.shape == (150, C) and (P >= 0).all()
    np.testing.assert_allclose(P.sum(1), 1.0, atol=1e-10)
    np.testing.assert_array_equal(tree["labels"]["labels"].values, P.argmax(1))
    assert {"model_selection", "fit"} <= set(tree.attrs["timings"])
    assert float(tree["metrics"]["acc"]) > 0.8


def test_single_knn_model_job(tmp_path, client):
    spec = _spec(tmp_path / "k.zarr", kernel="rbf", sigmas=[0.1], n_clusters=[3], n_neighbors=[15])
    tree = open_results(run_job(spec, client=client, progress=False, quiet=True))
    assert "selection" not in tree.children
    assert int(tree["decomposition"].attrs["n_neighbors"]) == 15
    assert float(tree["metrics"]["acc"]) > 0.8


def test_invalid_params_are_refused(tmp_path):
    with pytest.raises(SpecError, match="n_clusters"):
        _spec(tmp_path / "x.zarr", n_clusters=[])
    with pytest.raises(SpecError, match="loss"):
        _spec(tmp_path / "x.zarr", n_clusters=[2], loss="l2")
    with pytest.raises(InvalidInputError, match="n_clusters"):
        run_job(
            _spec(tmp_path / "x.zarr", n_clusters=[500]),
            progress=False,
            quiet=True,
        )


def test_example_spec_validates(data_dir):
    spec = load_spec(REPO / "jobs" / "kdc-shapes-jain.yaml")
    assert spec.method == "kernel-decomposition"


def test_default_job_is_the_estimators_default_model(tmp_path, client):
    tree = open_results(
        run_job(
            _spec(tmp_path / "d.zarr", n_clusters=[3]),
            client=client,
            progress=False,
            quiet=True,
        )
    )
    dec = tree["decomposition"]
    assert dec.attrs["kernel"] == "local_scaling"
    assert "sigma" not in dec.attrs and "bandwidth" not in dec.attrs
    assert dec.attrs["median_sigma"] > 0
    assert float(tree["metrics"]["acc"]) > 0.8
    np.testing.assert_allclose(tree["posteriors"]["posteriors"].values.sum(1), 1.0, atol=1e-10)


def test_local_scaling_job_refuses_widths_and_grids(tmp_path):
    for params, match in (
        ({"n_clusters": [3], "sigmas": [0.1]}, "sigmas"),
        ({"n_clusters": [2, 3]}, "kernel: rbf"),
        ({"n_clusters": [3], "n_neighbors": [150]}, "n_neighbors"),
    ):
        with pytest.raises(InvalidInputError, match=match):
            run_job(
                _spec(tmp_path / "x.zarr", **params),
                progress=False,
                quiet=True,
            )


def test_job_defaults_equal_the_estimator_defaults():
    import inspect

    from dkernel.jobs.steps.kernel_decomposition import PARAMS

    defaults = {
        name: p.default
        for name, p in inspect.signature(KernelDecompositionClustering).parameters.items()
        if p.default is not inspect.Parameter.empty
    }
    job = {p.name: p.default for p in PARAMS}
    # list-valued job parameters hold one entry per model of the grid; 0 neighbours = dense
    assert job["n_neighbors"] == [defaults["n_neighbors"] or 0]
    assert job["sigmas"] is None and defaults["sigma"] is None
    shared = [
        name for name in job if name in defaults and name not in ("n_clusters", "n_neighbors")
    ]
    assert set(shared) >= {"kernel", "scale_neighbors", "loss", "n_init", "max_iter", "tol"}
    for name in shared:
        assert job[name] == defaults[name], name


def test_landmark_path_job_writes_landmark_factors(tmp_path, client):
    spec = _spec(
        tmp_path / "b.zarr", n_clusters=[3], approximation="bipartite", n_landmarks=30, n_init=2
    )
    tree = open_results(run_job(spec, client=client, progress=False, quiet=True))
    assert tree.attrs["status"] == "complete"
    dec = tree["decomposition"]
    p = dec.attrs["n_landmarks"]  # at most 30: isolated sample points hold no landmark
    assert dec.attrs["approximation"] == "bipartite" and 20 <= p <= 30
    assert dec["W"].shape == (p, 3) and dec["H"].shape == (3, p)
    P = tree["posteriors"]["posteriors"].values
    assert P.shape == (150, 3)
    np.testing.assert_allclose(P.sum(1), 1.0, atol=1e-10)
    np.testing.assert_array_equal(tree["labels"]["labels"].values, P.argmax(1))


def _run_on_zarr_table(tmp_path, client, X, y, name):
    """The results of a default kernel-decomposition job (k = 3, blocks of 1 500 rows) on X
    and labels y written to a Zarr table of 1 000-row chunks."""
    import zarr

    group = zarr.open_group(tmp_path / "table.zarr", mode="w")
    group.create_array("X", shape=X.shape, chunks=(1000, X.shape[1]), dtype="float64")[...] = X
    group.create_array("y", shape=y.shape, chunks=(y.size,), dtype="int64")[...] = y
    data = {"reader": "zarr", "path": str(tmp_path / "table.zarr"), "array": "X"}
    spec = validate_spec(
        {
            "name": name,
            "seed": 0,
            "data": {**data, "label_array": "y"},
            "method": "kernel-decomposition",
            "params": {"n_clusters": [3], "block_rows": 1500},
            "output": str(tmp_path / f"{name}.zarr"),
        }
    )
    return open_results(run_job(spec, client=client, progress=False, quiet=True))


def test_large_table_is_fitted_chunk_by_chunk_as_the_estimator_fits_it(tmp_path, client):
    # above 5 000 rows of a Zarr table: the landmark path on row chunks read where they are
    # stored, the posteriors written chunk by chunk, the labels and priors read back
    from sklearn.datasets import make_blobs

    X, y = make_blobs(6000, n_features=4, centers=3, cluster_std=1.5, random_state=0)
    tree = _run_on_zarr_table(tmp_path, client, X, y, "kdc-chunks")
    assert tree.attrs["status"] == "complete"
    assert "sample" not in tree["posteriors"].coords  # written lazily: no index of length N
    lo, hi = X.min(axis=0), X.max(axis=0)
    est = KernelDecompositionClustering(3, random_state=0).fit((X - lo) / (hi - lo))
    dec = tree["decomposition"]
    assert dec.attrs["approximation"] == est.approximation_ == "bipartite"
    np.testing.assert_allclose(dec["W"].values, est.W_, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(dec["priors"].values, est.priors_, rtol=1e-9)
    np.testing.assert_allclose(
        tree["posteriors"]["posteriors"].values, est.posteriors_, rtol=1e-9, atol=1e-12
    )
    np.testing.assert_array_equal(tree["labels"]["labels"].values, est.labels_)
    np.testing.assert_allclose(dec.attrs["scale_min"], lo)
    assert float(tree["metrics"]["ari"]) > 0.9


def test_large_integer_table_takes_the_exact_path_on_its_distinct_rows(tmp_path, client):
    # 6 000 rows of 4 features on 1..5 (about 300 distinct rows): the job fits the exact kernel
    # of the distinct rows as the estimator does, and writes every row's posteriors lazily
    rng = np.random.default_rng(0)
    centres = rng.uniform(1.5, 4.5, size=(3, 4))
    y = rng.integers(0, 3, 6000)
    X = np.clip(np.rint(centres[y] + rng.normal(0, 0.7, (6000, 4))), 1, 5)
    tree = _run_on_zarr_table(tmp_path, client, X, y, "kdc-integers")
    assert tree.attrs["status"] == "complete"
    est = KernelDecompositionClustering(3, random_state=0).fit((X - 1.0) / 4.0)
    dec = tree["decomposition"]
    m = dec.attrs["n_distinct_rows"]
    assert dec.attrs["approximation"] == est.approximation_ == "exact"
    assert m == est.W_.shape[0] == np.unique(X, axis=0).shape[0]
    np.testing.assert_allclose(dec["W"].values, est.W_, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(dec["priors"].values, est.priors_, rtol=1e-9)
    np.testing.assert_allclose(
        tree["posteriors"]["posteriors"].values, est.posteriors_, rtol=1e-9, atol=1e-12
    )
    np.testing.assert_array_equal(tree["labels"]["labels"].values, est.labels_)
    assert float(tree["metrics"]["ari"]) > 0.7


def test_minmax_scaling_leaves_a_column_with_no_observed_value_alone():
    """An all-NaN column raised NumPy's "All-NaN slice encountered" from the job's scaling
    and stored NaN as its minimum."""
    import warnings

    from dkernel.jobs.steps.kernel_decomposition import _scale

    X = np.array([[1.0, np.nan, 5.0], [3.0, np.nan, 5.0], [2.0, np.nan, np.nan]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        scaled, attrs = _scale(X, "minmax")
    np.testing.assert_allclose(scaled[:, 0], [0.0, 1.0, 0.5])
    assert np.isnan(scaled[:, 1]).all()
    np.testing.assert_allclose(scaled[:2, 2], 0.0)
    assert np.isfinite(attrs["scale_min"]).all() and np.isfinite(attrs["scale_span"]).all()
