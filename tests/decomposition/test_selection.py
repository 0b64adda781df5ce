"""Model selection by held-out likelihood: the choice rule, the surface, over-segment merging."""

from __future__ import annotations

import dask
import numpy as np
import pytest
from sklearn.datasets import make_blobs

from dkernel.decomposition.kernels import density_log_kernel, row_normalize_log
from dkernel.decomposition.nmf import merge_by_flow
from dkernel.decomposition.selection import choose, select_model
from dkernel.errors import InvalidInputError
from dkernel.storage.layout import selection_dataset


def test_choose_largest_minimiser_with_paired_standard_error(rng):
    base = rng.normal(0, 0.1, size=(10, 1, 3, 1))  # repeat effect shared by every model
    # h index 1 is best; over C = 1..7 the error is flat up to C = 5 then rises
    shape = np.array([0.0, 0.0, 0.0, 0.0, 0.0, 0.02, 0.05])
    h_shift = np.array([0.3, 0.0, 0.2])[None, None, :, None]
    errors = base + h_shift + shape[None, None, None, :] + rng.normal(0, 1e-4, (10, 1, 3, 7))
    k, h, c = choose(errors)
    assert (k, h, c) == (0, 1, 4)
    k, h, c_min = choose(errors, c_rule="min")
    assert c_min <= 4
    with pytest.raises(InvalidInputError, match="c_rule"):
        choose(errors, c_rule="max")


def test_merge_by_flow_joins_parts_of_the_same_cluster(rng):
    X = np.vstack([rng.normal(0, 0.05, (60, 2)), rng.normal(1, 0.05, (60, 2))])
    Kc, _ = row_normalize_log(density_log_kernel(X, X, sigma=0.05))
    parts = np.concatenate([np.repeat([0, 1, 2], 20), np.repeat([3, 4, 5], 20)])
    perm = rng.permutation(6)
    merged = merge_by_flow(Kc, perm[parts], 2)
    np.testing.assert_array_equal(np.unique(merged[:60]).size, 1)
    assert merged[0] != merged[-1]


@pytest.fixture(scope="module")
def surface():
    X, y = make_blobs(
        n_samples=300, centers=[[0, 0], [3, 0], [0, 3]], cluster_std=0.4, random_state=0
    )
    X = (X - X.min(0)) / (X.max(0) - X.min(0))
    return select_model(
        X,
        y,
        sigmas=[0.003, 0.04, 0.5],
        n_clusters=[1, 2, 3, 4, 5],
        n_repeats=4,
        n_init=2,
        random_state=0,
    )


def test_select_model_interior_width_and_cluster_number(surface):
    res = surface
    assert res.errors.shape == (4, 1, 3, 5)
    hm, hs = res.error_vs_sigma()
    assert np.argmin(hm[0]) == 1 and (hs >= 0).all()
    assert res.chosen["sigma"] == 0.04
    assert res.chosen["n_clusters"] == 3
    acc = res.accuracy[:, 0, 1, 2]
    assert acc.min() >= 0.98
    assert res.confidence[:, 0, 1, 2].mean() > 0.95
    model = res.best_estimator
    assert model.n_clusters == 3 and model.sigma_ == 0.04


def test_surface_as_dataset(surface):
    hm, hs = surface.error_vs_sigma()
    ds = selection_dataset(
        errors=surface.errors,
        error_mean=surface.mean,
        error_sem=surface.sem,
        error_vs_sigma_mean=hm,
        error_vs_sigma_sem=hs,
        confidence=surface.confidence,
        accuracy=surface.accuracy,
        sigmas=surface.sigmas,
        n_neighbors=surface.n_neighbors,
        n_clusters=surface.n_clusters,
        chosen=surface.chosen,
        c_rule=surface.c_rule,
    )
    assert ds["error"].dims == ("repeat", "neighbors", "bandwidth", "n_clusters")
    assert ds.attrs["chosen_n_clusters"] == 3
    np.testing.assert_allclose(ds["error_mean"].values, surface.errors.mean(0))
    assert int(ds["neighbors"][0]) == 0  # dense kernel


def test_select_model_with_knn_splits_protocol(rng):
    X, y = make_blobs(n_samples=200, centers=[[0, 0], [3, 0]], cluster_std=0.4, random_state=1)
    X = (X - X.min(0)) / (X.max(0) - X.min(0))
    val, tr = X[:100], X[100:]
    splits = [(tr[rng.permutation(100)[:80]], val, y[:100]) for _ in range(3)]
    res = select_model(
        splits=splits,
        sigmas=[0.05],
        n_clusters=[1, 2, 3],
        n_neighbors=[5, 20],
        n_init=2,
        refit=False,
    )
    assert res.errors.shape == (3, 2, 1, 3) and np.isfinite(res.errors).all()
    assert res.best_estimator is None
    assert res.chosen["n_neighbors"] in (5, 20)
    assert res.accuracy[:, :, 0, 1].mean() > 0.95
    with pytest.raises(InvalidInputError, match="splits"):
        select_model(sigmas=[0.1], n_clusters=[2])


def test_select_on_a_subsample_then_refit_on_every_point():
    X, y = make_blobs(n_samples=600, centers=[[0, 0], [3, 0]], cluster_std=0.4, random_state=2)
    X = (X - X.min(0)) / (X.max(0) - X.min(0))
    grid = dict(sigmas=[0.05], n_clusters=[1, 2, 3], n_neighbors=[10], n_init=2, n_repeats=2)
    res = select_model(X, y, max_samples=200, random_state=0, **grid)
    assert res.meta["max_samples"] == 200 and res.chosen["n_neighbors"] == 10
    assert res.best_estimator.W_.shape[0] == 600  # refitted on all points
    # the surface is select_model's on the same subsample (reference: drawn by hand)
    from dkernel._random import derive_rng

    rows = np.sort(derive_rng(0, "select_model", "subsample").choice(600, 200, replace=False))
    ref = select_model(X[rows], y[rows], random_state=0, refit=False, **grid)
    np.testing.assert_array_equal(res.errors, ref.errors)
    with pytest.raises(InvalidInputError, match="max_samples"):
        select_model(splits=[(X[:100], X[100:200])], max_samples=50, **grid)


def test_surface_cells_are_tasks_equal_to_scoring_each_cell_by_hand(client):
    """Reference: every (repeat, K, h) scored one after the other with ``_score_cell``. The
    surface select_model computes cell by cell as Dask tasks, on threads and on process
    workers (arrays sent to them), is the same bit for bit."""
    from distributed import get_task_stream

    from dkernel.decomposition.kernels import fit_neighbors
    from dkernel.decomposition.selection import _score_cell

    X, y = make_blobs(n_samples=160, centers=[[0, 0], [3, 0]], cluster_std=0.4, random_state=3)
    X = (X - X.min(0)) / (X.max(0) - X.min(0))
    grid = dict(sigmas=[0.03, 0.1], n_clusters=[1, 2, 3], n_neighbors=[None, 8])
    model = dict(kernel="rbf", loss="kl-euclidean", n_init=2, max_iter=300, tol=1e-6)
    model["random_state"] = 0
    splits = [(X[i::3], X[(i + 1) % 3 :: 3], y[(i + 1) % 3 :: 3]) for i in range(2)]
    ref = np.array(
        [
            [
                [
                    _score_cell(
                        *s, k, h, None if k is None else fit_neighbors(s[0]), [1, 2, 3], model
                    )
                    for h in grid["sigmas"]
                ]
                for k in grid["n_neighbors"]
            ]
            for s in splits
        ]
    )  # (repeat, K, h, [errors, confidence, accuracy], C)
    kw = dict(splits=splits, refit=False, n_init=2, random_state=0, **grid)
    with dask.config.set(scheduler="threads"):
        local = select_model(**kw)
    with get_task_stream(client) as stream:
        remote = select_model(**kw)
    ran = [t["key"] for t in stream.data if "_score_split" in str(t["key"])]
    assert len(ran) == 2 * 2 * 2  # one task per (repeat, K, h), on the workers
    for res in (local, remote):
        np.testing.assert_array_equal(res.errors, ref[:, :, :, 0])
        np.testing.assert_array_equal(res.confidence, ref[:, :, :, 1])
        np.testing.assert_array_equal(res.accuracy, ref[:, :, :, 2])
