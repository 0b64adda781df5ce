"""The NaN-aware neighbour index against the obvious reference: every pair's expected squared
distance (dkernel.kernels.missing.expected_sq_distances), sorted."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
from sklearn.neighbors import NearestNeighbors

from dkernel.graphs.knn import MissingValueIndex, build_index, knn_search, training_neighbors
from dkernel.kernels.missing import MissingValueModel, expected_sq_distances


def _holes(n: int, p: int, frac: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p)) * rng.uniform(0.5, 3.0, p)
    holes = rng.random((n, p)) < frac
    holes[holes.all(axis=1), 0] = False
    X[holes] = np.nan
    return X


def _reference(D: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    order = np.argsort(D, axis=1, kind="stable")[:, :k]
    return np.sqrt(np.take_along_axis(D, order, axis=1)), order


@pytest.mark.parametrize("p", [3, 40])  # a k-d tree, and brute force
def test_training_neighbors_match_brute_force(p):
    X = _holes(300, p, 0.3, 0)
    index = build_index(X)
    assert isinstance(index, MissingValueIndex)
    dist, ind = training_neighbors(index, X, 9)
    ref_d, ref_i = _reference(expected_sq_distances(X), 9)
    np.testing.assert_array_equal(ind[:, 0], np.arange(300))
    np.testing.assert_array_equal(dist[:, 0], 0.0)
    np.testing.assert_allclose(dist, ref_d, rtol=1e-9, atol=1e-9)
    np.testing.assert_array_equal(ind, ref_i)


def test_new_points_match_brute_force_with_the_training_model():
    X = _holes(250, 5, 0.25, 1)
    Q = _holes(60, 5, 0.4, 2) + 0.3
    index = build_index(X)
    model = MissingValueModel.fit(X)
    D = expected_sq_distances(Q, X, model=model)
    ref_d, ref_i = _reference(D, 7)
    dist, ind = index.kneighbors(Q, n_neighbors=7)
    np.testing.assert_allclose(dist, ref_d, rtol=1e-9, atol=1e-9)
    np.testing.assert_array_equal(ind, ref_i)
    # the model is the training data's, whatever the queries hold
    np.testing.assert_array_equal(index.model_.mean, model.mean)
    np.testing.assert_array_equal(index.model_.covariance, model.covariance)
    # chunk by chunk through Dask, the same lists
    d2, i2 = knn_search(index, da.from_array(Q, chunks=(17, 5)), 7)
    np.testing.assert_allclose(d2.compute(), dist)
    np.testing.assert_array_equal(i2.compute(), ind)


def test_a_row_with_a_large_hole_still_lists_itself_first():
    rng = np.random.default_rng(3)
    X = rng.standard_normal((100, 4))
    X[0, :3] = np.nan  # r large: its tree distance to itself is beyond its neighbours'
    dist, ind = training_neighbors(build_index(X), X, 5)
    assert ind[0, 0] == 0 and dist[0, 0] == 0.0
    assert 0 not in ind[0, 1:]
    ref_d, ref_i = _reference(expected_sq_distances(X), 5)
    np.testing.assert_array_equal(ind, ref_i)
    np.testing.assert_allclose(dist, ref_d, rtol=1e-9, atol=1e-9)


def test_complete_data_keep_scikit_learn_index():
    X = np.random.default_rng(4).standard_normal((50, 3))
    index = build_index(X)
    assert isinstance(index, NearestNeighbors)
    dist, ind = training_neighbors(index, X, 4)
    ref = NearestNeighbors().fit(X).kneighbors(X, 4)
    np.testing.assert_array_equal(dist, ref[0])
    np.testing.assert_array_equal(ind, ref[1])
