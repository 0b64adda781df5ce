"""The approximate cell-index k-NN search against brute force written out on small data."""

from __future__ import annotations

import numpy as np
import pytest

from dkernel.errors import InvalidInputError
from dkernel.graphs.approximate_knn import CellIndex, knn_recall, nearest_cells, smallest_within


def _brute(Q, X, k):
    """Every distance, sorted by (distance, index): the obvious reference."""
    D = np.sqrt(((Q[:, None, :] - X[None, :, :]) ** 2).sum(-1))
    order = np.lexsort((np.broadcast_to(np.arange(X.shape[0]), D.shape), D), axis=1)[:, :k]
    return np.take_along_axis(D, order, axis=1), order


def _blobs(rng, n, p=10, C=5):
    centres = rng.normal(0.0, 4.0, (C, p))
    return centres[rng.integers(0, C, n)] + rng.standard_normal((n, p))


def test_probing_every_cell_is_the_exact_search(rng):
    X = rng.standard_normal((1500, 6))
    Q = rng.standard_normal((200, 6))
    index = CellIndex(cell_size=50, n_probe=10**6, random_state=0).fit(X)
    dist, ind = index.kneighbors(Q, 9)
    d_ref, i_ref = _brute(Q, X, 9)
    np.testing.assert_array_equal(ind, i_ref)
    np.testing.assert_allclose(dist, d_ref, rtol=0, atol=1e-12)
    assert knn_recall(ind, i_ref) == 1.0


def test_training_points_find_themselves_first_at_distance_zero(rng):
    X = _blobs(rng, 3000)
    dist, ind = CellIndex(cell_size=64, n_probe=4, random_state=1).fit(X).kneighbors(X, 8)
    np.testing.assert_array_equal(ind[:, 0], np.arange(X.shape[0]))
    assert np.all(dist[:, 0] == 0.0)
    assert np.all(np.diff(dist, axis=1) >= 0)


def test_recall_on_blobs_at_the_defaults(rng):
    X = _blobs(rng, 20_000)
    index = CellIndex(random_state=0).fit(X)
    q = rng.choice(X.shape[0], 500, replace=False)
    dist, ind = index.kneighbors(X[q], 8)
    d_ref, i_ref = _brute(X[q], X, 8)
    assert knn_recall(ind, i_ref, dist, d_ref) >= 0.97
    # the kept distances are the exact distances to the points returned
    np.testing.assert_allclose(dist, np.linalg.norm(X[ind] - X[q][:, None], axis=2), atol=1e-12)


def test_recall_grows_with_the_cells_probed(rng):
    X = rng.random((4000, 8))
    q = rng.choice(X.shape[0], 300, replace=False)
    d_ref, i_ref = _brute(X[q], X, 8)
    recalls = []
    for n_probe in (1, 4, 16):
        dist, ind = (
            CellIndex(cell_size=32, n_probe=n_probe, random_state=0).fit(X).kneighbors(X[q], 8)
        )
        recalls.append(knn_recall(ind, i_ref, dist, d_ref))
    assert recalls[0] < recalls[1] < recalls[2]


def test_same_seed_same_graph_whatever_the_threads(rng):
    X = _blobs(rng, 5000)
    runs = [
        CellIndex(cell_size=40, n_probe=5, random_state=3, n_threads=t).fit(X).kneighbors(X, 8)
        for t in (1, 3, 1)
    ]
    for dist, ind in runs[1:]:
        np.testing.assert_array_equal(ind, runs[0][1])
        np.testing.assert_array_equal(dist, runs[0][0])
    other = CellIndex(cell_size=40, n_probe=5, random_state=4).fit(X)
    assert not np.array_equal(
        other.cluster_centers_, CellIndex(40, 5, random_state=3).fit(X).cluster_centers_
    )


def test_cells_too_small_for_k_are_widened(rng):
    X = rng.standard_normal((300, 3))
    dist, ind = CellIndex(cell_size=3, n_probe=1, random_state=0).fit(X).kneighbors(X[:50], 25)
    assert all(np.unique(row).size == 25 for row in ind)
    assert np.all(np.diff(dist, axis=1) >= 0)
    np.testing.assert_array_equal(ind[:, 0], np.arange(50))


def test_duplicated_points_are_found_and_tied_by_index():
    X = np.repeat(np.arange(40.0).reshape(-1, 1), 5, axis=0)  # 5 copies of each of 40 values
    dist, ind = CellIndex(cell_size=10, n_probe=3, random_state=0).fit(X).kneighbors(X, 5)
    np.testing.assert_array_equal(dist, 0.0)
    np.testing.assert_array_equal(ind, np.repeat(np.arange(0, 200, 5), 5)[:, None] + np.arange(5))


def test_nearest_cells_matches_the_argmin(rng):
    X, C = rng.standard_normal((700, 4)), rng.standard_normal((30, 4))
    ref = np.argmin(((X[:, None] - C[None]) ** 2).sum(-1), axis=1)
    np.testing.assert_array_equal(nearest_cells(X, C, block_rows=64)[:, 0], ref)
    near5 = np.sort(nearest_cells(X, C, 5, block_rows=64), axis=1)
    ref5 = np.sort(np.argsort(((X[:, None] - C[None]) ** 2).sum(-1), axis=1)[:, :5], axis=1)
    np.testing.assert_array_equal(near5, ref5)


def test_knn_recall_counts_sets_and_ties():
    exact = np.array([[0, 1, 2], [3, 4, 5]])
    assert knn_recall(np.array([[2, 1, 0], [3, 4, 9]]), exact) == pytest.approx(5 / 6)
    d_exact = np.array([[0.0, 1.0, 2.0], [0.0, 1.0, 1.0]])
    d_found = np.array([[0.0, 1.0, 2.0], [0.0, 1.0, 1.0]])  # 9 ties with 5
    assert knn_recall(np.array([[0, 1, 2], [3, 4, 9]]), exact, d_found, d_exact) == 1.0
    with pytest.raises(InvalidInputError):
        knn_recall(exact[:, :2], exact)


def test_bad_arguments_raise(rng):
    X = rng.standard_normal((20, 2))
    with pytest.raises(InvalidInputError):
        CellIndex(n_probe=0).fit(X)
    with pytest.raises(InvalidInputError):
        CellIndex(random_state=0).fit(X).kneighbors(X, 21)


def test_probes_are_the_nearest_centres(rng):
    X = _blobs(rng, 6000, p=5)
    index = CellIndex(cell_size=20, n_probe=6, random_state=0).fit(X)
    Q = X[:400] + 0.1 * rng.standard_normal((400, 5))
    found = np.sort(index.probes(Q, 6), axis=1)
    exact = np.sort(nearest_cells(Q, index.cluster_centers_, 6), axis=1)
    np.testing.assert_array_equal(found, exact)


def test_smallest_within_a_bound_is_the_sorted_head(rng):
    D = rng.random((50, 300))
    D[:, 7] = D[:, 3]  # a tie, broken by column
    head = np.argsort(D, axis=1, kind="stable")[:, :6]
    for bound in (np.sort(D, axis=1)[:, 5], np.sort(D, axis=1)[:, 40], np.full(50, 2.0)):
        np.testing.assert_array_equal(smallest_within(D, bound, 6), head)
