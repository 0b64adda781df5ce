"""Adaptive kernels (local scaling, k-NN graph) against brute-force references."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from dkernel.errors import InvalidInputError
from dkernel.kernels import adaptive
from dkernel.kernels.adaptive import kth_distinct_distance, neighbor_radius
from dkernel.kernels.registry import make_kernel, neighbor_parameter


def _naive_radius(X, R, k):
    out = []
    for x in X:
        d = np.sort([np.linalg.norm(x - r) for r in R])
        d = d[d > 1e-9]
        out.append(d[min(k, d.size) - 1])
    return np.array(out)


def _naive_local_scaling(X, Y, R, k):
    sx, sy = _naive_radius(X, R, k), _naive_radius(Y, R, k)
    K = np.empty((len(X), len(Y)))
    for i in range(len(X)):
        for j in range(len(Y)):
            K[i, j] = np.exp(-np.sum((X[i] - Y[j]) ** 2) / (sx[i] * sy[j]))
    return K


def _naive_knn(X, Y, R, k):
    rx, ry = _naive_radius(X, R, k), _naive_radius(Y, R, k)
    K = np.zeros((len(X), len(Y)))
    for i in range(len(X)):
        for j in range(len(Y)):
            d = np.linalg.norm(X[i] - Y[j])
            K[i, j] = float(d <= rx[i] or d <= ry[j])
    return K


def test_radius_skips_the_point_itself(rng):
    X = rng.normal(size=(40, 3))
    np.testing.assert_allclose(neighbor_radius(X, X, 5), _naive_radius(X, X, 5), rtol=1e-10)


def test_radius_with_duplicates_and_few_neighbours():
    X = np.array([[0.0, 0.0], [0.0, 0.0], [1.0, 0.0], [3.0, 0.0]])
    np.testing.assert_allclose(neighbor_radius(X, X, 1), [1.0, 1.0, 1.0, 2.0])
    # fewer than k distinct neighbours: the farthest one
    np.testing.assert_allclose(neighbor_radius(X[:1], X, 10), [3.0])


def test_indexed_radius_is_the_brute_force_radius(rng):
    """Through a nearest-neighbour index: copies skipped (rows with more copies than k, so the
    index must list more), few distinct rows, new points, against the obvious loop."""
    from sklearn.neighbors import NearestNeighbors

    X = rng.normal(size=(120, 3))
    X = np.r_[X, X[:30], np.repeat(X[30:32], 14, axis=0), np.zeros((3, 3))]
    index = NearestNeighbors().fit(X)
    for k in (1, 2, 7):
        got = adaptive.indexed_neighbor_radius(X, X, k, index)
        np.testing.assert_allclose(got, _naive_radius(X, X, k), rtol=1e-10)
    Q = rng.normal(size=(25, 3))
    got = adaptive.indexed_neighbor_radius(Q, X, 5, index)
    np.testing.assert_allclose(got, _naive_radius(Q, X, 5), rtol=1e-10)
    few = np.repeat(rng.normal(size=(3, 2)), 10, axis=0)
    got = adaptive.indexed_neighbor_radius(few, few, 7, NearestNeighbors().fit(few))
    np.testing.assert_allclose(got, _naive_radius(few, few, 7), rtol=1e-10)


def test_a_large_reference_takes_the_index_with_the_same_kernel(rng, monkeypatch):
    X = np.r_[rng.normal(size=(300, 2)), np.zeros((4, 2))]
    Q = rng.normal(size=(20, 2))
    brute = make_kernel("knn_mean", X, n_neighbors=6, n_reference=None)
    monkeypatch.setattr(adaptive, "INDEX_MIN_REFERENCE", 100)
    indexed = make_kernel("knn_mean", X, n_neighbors=6, n_reference=None)
    assert indexed.block._index is not None and brute.block._index is None
    np.testing.assert_array_equal(indexed(Q, X), brute(Q, X))
    np.testing.assert_array_equal(indexed(X, X), brute(X, X))
    assert pickle.loads(pickle.dumps(indexed.block))._index is None  # rebuilt where it runs


def test_kth_distinct_distance_matches_radius(rng):
    from sklearn.neighbors import NearestNeighbors

    X = rng.normal(size=(60, 2))
    dist, _ = NearestNeighbors(n_neighbors=12).fit(X).kneighbors(X)
    np.testing.assert_allclose(kth_distinct_distance(dist, 7), neighbor_radius(X, X, 7))


@pytest.mark.parametrize(
    "name, naive", [("local_scaling", _naive_local_scaling), ("knn", _naive_knn)]
)
def test_kernel_against_brute_force(rng, name, naive):
    X = rng.normal(size=(50, 3))
    Y = rng.normal(size=(9, 3))
    k = make_kernel(name, X, **{neighbor_parameter(name): 6})
    np.testing.assert_allclose(k(X, Y), naive(X, Y, X, 6), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(k(X), naive(X, X, X, 6), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", ["local_scaling", "knn", "knn_mean"])
def test_a_large_offset_does_not_change_the_kernel(rng, name):
    """Coordinates far from the origin (metres of a map projection): the GEMM's round-off grew
    with the norms, every neighbour "coincided" (radius 0) and the kernel refused the data."""
    X = rng.normal(size=(60, 3))
    Y = rng.normal(size=(7, 3))
    offset = np.array([5e5, 6e6, 1e8])
    near = make_kernel(name, X, **{neighbor_parameter(name): 6})
    far = make_kernel(name, X + offset, **{neighbor_parameter(name): 6})
    np.testing.assert_allclose(far(X + offset), near(X), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(far(X + offset, Y + offset), near(X, Y), rtol=1e-6, atol=1e-8)
    # with missing entries: the expected distances of the filled rows
    X[::7, 1] = np.nan
    near = make_kernel(name, X, **{neighbor_parameter(name): 6})
    far = make_kernel(name, X + offset, **{neighbor_parameter(name): 6})
    np.testing.assert_allclose(far(X + offset), near(X), rtol=1e-6, atol=1e-8)


def test_knn_graph_is_the_symmetric_knn_graph(rng):
    from sklearn.neighbors import kneighbors_graph

    X = rng.normal(size=(80, 2))
    A = kneighbors_graph(X, 5, include_self=False).toarray()
    expected = np.maximum(A, A.T) + np.eye(80)
    np.testing.assert_array_equal(make_kernel("knn", X, n_neighbors=5)(X), expected)


def test_out_of_sample_is_the_same_function(rng):
    """A training point evaluated as a 'new' point gets the same row."""
    X = rng.normal(size=(70, 2))
    k = make_kernel("local_scaling", X)
    full = k(X, X[:10])
    rows = k(X[:5].copy(), X[:10])
    np.testing.assert_allclose(rows, full[:5], rtol=1e-12)


def test_reference_sample_is_deterministic_and_scales_the_rank(rng):
    X = rng.normal(size=(500, 2))
    a = make_kernel("local_scaling", X, n_reference=100, seed=3)
    b = make_kernel("local_scaling", X, n_reference=100, seed=3)
    assert a.params["reference_neighbors"] == 1  # round(7 * 100 / 500)
    np.testing.assert_array_equal(a(X[:20], X[:30]), b(X[:20], X[:30]))
    pickle.loads(pickle.dumps(a))


@pytest.mark.parametrize(
    "params, match",
    [
        ({"k": 0}, "must be an int >= 1"),
        ({"k": 2.5}, "must be an int >= 1"),
        ({"k": 30}, "must be < the number of training points"),
        ({"n_reference": 1}, "must be an int >= 2 or None"),
    ],
)
@pytest.mark.parametrize("name", ["local_scaling", "knn"])
def test_bad_parameters(rng, name, params, match):
    """k: the neighbour count, local_scaling's scale_neighbors or knn's n_neighbors."""
    params = {neighbor_parameter(name) if key == "k" else key: v for key, v in params.items()}
    with pytest.raises(InvalidInputError, match=match):
        make_kernel(name, rng.normal(size=(30, 2)), **params)


def test_non_finite_and_identical_points(rng):
    X = rng.normal(size=(30, 2))
    X[3, 1] = np.inf
    with pytest.raises(InvalidInputError, match="infinite"):
        make_kernel("local_scaling", X)
    X[3, 1] = np.nan  # a missing value: expected squared distances (kernels/missing.py)
    assert make_kernel("local_scaling", X).params["missing_values"] == "expected"
    with pytest.raises(InvalidInputError, match="coincides"):
        make_kernel("local_scaling", np.ones((30, 2)))
    with pytest.raises(InvalidInputError, match="pass the training data"):
        make_kernel("knn")


@pytest.mark.parametrize("name", ["local_scaling", "knn"])
def test_landmark_reference_fast_path_equals_the_general_formula(rng, name):
    from dkernel.kernels.registry import with_landmark_reference

    X = rng.normal(size=(300, 3))
    L = X[:40].copy()
    k = with_landmark_reference(make_kernel(name, X, **{neighbor_parameter(name): 7}), L, 300)
    assert k.params["reference"] == "landmarks" and k.params["reference_neighbors"] == 7
    fast = k(X[40:90], L)
    general = k(X[40:90], L.copy())
    np.testing.assert_allclose(fast, general, rtol=1e-12, atol=1e-300)
    # landmarks against themselves skip their own copy
    np.testing.assert_allclose(
        k(L, L),
        _naive_local_scaling(L, L, L, 7) if name == "local_scaling" else _naive_knn(L, L, L, 7),
        rtol=1e-10,
    )


def test_rows_that_each_have_more_copies_than_listed_neighbours_get_an_error_naming_the_fix():
    """Not all rows equal, but every row's listed neighbours are its own copies (an integer
    table with few levels): the message must not claim all rows are identical."""
    from dkernel.kernels.adaptive import fill_zero_scales

    with pytest.raises(InvalidInputError, match="at least 7 exact copies.*drop the repeated rows"):
        fill_zero_scales(np.zeros(200), 8)


def test_one_distinct_row_is_called_identical_rows():
    from dkernel.kernels.adaptive import fill_zero_scales

    with pytest.raises(
        InvalidInputError, match="all rows are identical: there is nothing to cluster"
    ):
        fill_zero_scales(np.zeros(50), 1)


def test_indexed_search_searches_each_copy_once(rng, monkeypatch):
    """Rows repeated more often than k: the radii and first lists of every row are those of
    searching every row, from one search per distinct row."""
    from sklearn.neighbors import NearestNeighbors

    X = np.repeat(np.round(rng.normal(size=(40, 2)), 1), rng.integers(1, 30, 40), axis=0)
    index = NearestNeighbors().fit(X)
    queried = []
    original = index.kneighbors

    def counting(Q, n_neighbors):
        queried.append(len(Q))
        return original(Q, n_neighbors=n_neighbors)

    monkeypatch.setattr(index, "kneighbors", counting)
    radii, lists = adaptive._indexed_search(X, X, 5, index)
    once = sum(queried)
    queried.clear()
    with monkeypatch.context() as every_row:
        every_row.setattr(adaptive, "repeated_rows", lambda X: None)
        radii_all, lists_all = adaptive._indexed_search(X, X, 5, index)
    np.testing.assert_array_equal(radii, radii_all)
    np.testing.assert_array_equal(lists, lists_all)
    np.testing.assert_allclose(radii, _naive_radius(X, X, 5), rtol=1e-10)
    assert once < sum(queried) / 5
