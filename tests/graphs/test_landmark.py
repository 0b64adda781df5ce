"""The landmark bipartite graph against brute force."""

import numpy as np
import pytest

from dkernel.errors import InvalidInputError
from dkernel.graphs.landmark import (
    ARGMIN_NEIGHBORS,
    check_landmark_sizes,
    distinct_rows,
    fit_landmark_graph,
    kmeans_landmarks,
    landmark_scales,
    nearest_landmarks,
)


def _brute_nearest(X, L, k):
    D = ((X[:, None, :] - L[None, :, :]) ** 2).sum(axis=2)
    order = np.argsort(D, axis=1, kind="stable")[:, :k]
    return order, np.take_along_axis(D, order, axis=1)


def test_nearest_landmarks_match_brute_force_far_from_the_origin():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(9000, 3)) + 1e4  # float32 screening must survive the offset
    L = rng.normal(size=(60, 3)) + 1e4
    idx, sq = nearest_landmarks(X, L, 4)
    ref_idx, ref_sq = _brute_nearest(X, L, 4)
    assert np.mean(idx == ref_idx) > 0.999
    np.testing.assert_allclose(sq, ref_sq, rtol=1e-6, atol=1e-9)
    assert np.all(np.diff(sq, axis=1) >= 0)


@pytest.mark.parametrize("k", [1, 3, ARGMIN_NEIGHBORS, ARGMIN_NEIGHBORS + 2])
def test_nearest_landmarks_by_argmin_and_by_partition_match_brute_force(k):
    """Both searches (repeated argmin up to ARGMIN_NEIGHBORS, argpartition beyond, and
    argpartition whenever the data hold NaN) give the brute-force neighbours, nearest first."""
    rng = np.random.default_rng(k)
    X, L = rng.normal(size=(5000, 6)), rng.normal(size=(300, 6))
    idx, sq = nearest_landmarks(X, L, k)
    ref_idx, ref_sq = _brute_nearest(X, L, k)
    np.testing.assert_array_equal(idx, ref_idx)
    np.testing.assert_allclose(sq, ref_sq, rtol=1e-12)
    self_idx, _ = nearest_landmarks(L, L, k, exclude_self=True)
    np.testing.assert_array_equal(self_idx, _brute_nearest(L, L, k + 1)[0][:, 1:])
    X[0, 0] = np.nan  # the partition path; the other rows are unchanged
    idx_nan, _ = nearest_landmarks(X, L, k)
    np.testing.assert_array_equal(idx_nan[1:], ref_idx[1:])


def test_landmark_scales_are_kth_distance_to_other_landmarks():
    rng = np.random.default_rng(1)
    L = rng.normal(size=(40, 2))
    D = np.sqrt(((L[:, None] - L[None]) ** 2).sum(axis=2))
    np.fill_diagonal(D, np.inf)
    np.testing.assert_allclose(landmark_scales(L, 3), np.sort(D, axis=1)[:, 2], rtol=1e-10)


def test_links_are_local_scaling_weights_of_the_nearest_landmarks():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(500, 2))
    graph = fit_landmark_graph(X, 50, 5, seed=0)
    idx, w = graph.links(X[:20])
    ref_idx, ref_sq = _brute_nearest(X[:20], graph.landmarks, 5)
    np.testing.assert_array_equal(idx, ref_idx)
    sigma_x = np.sqrt(ref_sq[:, -1])
    expected = np.exp(-ref_sq / (sigma_x[:, None] * graph.scales[ref_idx]))
    np.testing.assert_allclose(w, expected, rtol=1e-10)


def test_duplicate_points_get_positive_widths():
    X = np.repeat(np.arange(30.0)[:, None], 20, axis=0) @ np.ones((1, 2))
    graph = fit_landmark_graph(X, 30, 3, seed=0)
    _, w = graph.links(X)
    assert np.all(np.isfinite(w)) and np.all(w > 0)


def test_landmarks_are_distinct_rows_in_first_occurrence_order():
    A = np.array([[2.0, 0.0], [1.0, 1.0], [2.0, 0.0], [0.0, 5.0], [1.0, 1.0]])
    np.testing.assert_array_equal(distinct_rows(A), [[2.0, 0.0], [1.0, 1.0], [0.0, 5.0]])
    B = np.arange(6.0).reshape(3, 2)
    assert distinct_rows(B) is B  # no row repeats: the rows themselves, in their order
    # fewer distinct rows than landmarks asked for: every distinct row once
    sample = np.repeat(np.arange(12.0).reshape(6, 2), 7, axis=0)
    np.testing.assert_array_equal(
        kmeans_landmarks(sample, 20, seed=0), np.arange(12.0).reshape(6, 2)
    )
    # more: k-means centres, none repeated
    rng = np.random.default_rng(0)
    lattice = np.rint(rng.normal(scale=3.0, size=(3000, 2)))
    centres = kmeans_landmarks(lattice, 60, seed=0)
    assert len(np.unique(centres, axis=0)) == len(centres)


def test_integer_valued_data_link_each_point_to_neighbouring_values():
    """Every point of a 3 × 3 lattice of repeated values links to K distinct landmarks (its
    own value and its neighbours'), so the graph is one piece, not one per value."""
    import scipy.sparse as sp
    from scipy.sparse.csgraph import connected_components

    X = np.repeat(np.array([[i, j] for i in range(3) for j in range(3)], float), 50, axis=0)
    graph = fit_landmark_graph(X, 100, 3, seed=0)
    assert graph.n_landmarks == 9
    ind, w = graph.links(X)
    assert np.all(w > 1e-3)  # not a share of 1 on one copy and ~0 elsewhere
    B = sp.csr_matrix((w.ravel(), ind.ravel(), np.arange(0, ind.size + 1, 3)), shape=(450, 9))
    assert connected_components(B @ B.T, directed=False)[0] == 1


def test_fewer_distinct_rows_than_landmark_neighbors_are_refused_with_the_fix():
    X = np.repeat(np.eye(3), 10, axis=0)
    with pytest.raises(InvalidInputError, match="only 3 distinct rows"):
        fit_landmark_graph(X, 10, 5, seed=0)


@pytest.mark.parametrize(
    ("n", "p", "k", "match"),
    [
        (100, 200, 5, "n_landmarks .200. must be <= the number of samples"),
        (100, 5, 5, "landmark_neighbors .5. must be < n_landmarks"),
    ],
)
def test_bad_sizes_are_refused_with_the_fix(n, p, k, match):
    with pytest.raises(InvalidInputError, match=match):
        check_landmark_sizes(n, p, k)


def test_a_point_far_from_every_landmark_keeps_finite_shares():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(400, 2))
    graph = fit_landmark_graph(X, 40, 5, seed=0)
    far = np.array([[1e4, 1e4]])
    _, log_w = graph.log_links(far)
    assert log_w.max() < -700  # every weight would underflow
    _, w = graph.links(far)
    assert w.max() > 0 and np.all(np.isfinite(w / w.sum()))
