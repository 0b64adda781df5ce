"""The one landmark stage, ``dkernel.graphs.bipartite.select_landmarks`` (issue 33, item 2)."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
from sklearn.datasets import make_blobs

from dkernel._random import derive_rng
from dkernel.errors import InvalidInputError
from dkernel.graphs.bipartite import LANDMARK_METHODS, sample_landmark_graph, select_landmarks
from dkernel.graphs.landmark import SAMPLE_PER_LANDMARK, kmeans_landmarks


@pytest.fixture(scope="module")
def X():
    return make_blobs(1200, centers=4, n_features=3, random_state=0)[0]


@pytest.mark.parametrize("method", LANDMARK_METHODS)
def test_numpy_and_dask_give_the_same_landmarks(X, method):
    a = select_landmarks(X, 40, method=method, random_state=3)
    b = select_landmarks(da.from_array(X, chunks=(250, -1)), 40, method=method, random_state=3)
    np.testing.assert_array_equal(a.points, b.points)
    # k-means keeps the centres of two or more sample points only
    expected = range(30, 41) if method == "kmeans" else [40]
    assert a.n_landmarks in expected and a.points.shape == (a.n_landmarks, 3)
    if method == "kmeans":
        assert a.indices is None and b.indices is None
    else:
        np.testing.assert_array_equal(a.indices, b.indices)
        assert np.all(np.diff(a.indices) > 0) and a.indices[-1] < len(X)
        np.testing.assert_array_equal(a.points, X[a.indices])
    c = select_landmarks(X, 40, method=method, random_state=4)
    assert not np.array_equal(a.points, c.points)


def test_kmeans_landmarks_are_the_bipartite_graphs(X):
    """The bipartite graph's landmarks: k-means centres of a sample of 10 p rows, drawn from
    the stream the graph has always used (the written-out reference)."""
    got = select_landmarks(X, 30, method="kmeans", random_state=5).points
    rng = derive_rng(5, "landmark-graph-sample")
    rows = np.sort(rng.choice(len(X), SAMPLE_PER_LANDMARK * 30, replace=False))
    expected = kmeans_landmarks(X[rows], 30, int(rng.integers(2**31 - 1)))
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(sample_landmark_graph(X, 30, 3, 5).landmarks, expected)


def test_uniform_is_a_sorted_sample_and_all_rows_when_too_many(X):
    lm = select_landmarks(X, 50, method="uniform", random_state=0)
    assert np.unique(lm.indices).size == 50
    everything = select_landmarks(X[:30], 50, method="kmeans++", random_state=0)
    np.testing.assert_array_equal(everything.indices, np.arange(30))


def test_precomputed_kmeanspp_uses_kernel_distances(X):
    """On a linear kernel the kernel-induced distance is the squared Euclidean one, so the
    landmarks spread over the four blobs as k-means++ does in input space."""
    K = X[:400] @ X[:400].T
    lm = select_landmarks(K, 4, method="kmeans++", random_state=0, precomputed=True)
    labels = make_blobs(1200, centers=4, n_features=3, random_state=0)[1][:400]
    assert len(set(labels[lm.indices])) >= 3
    np.testing.assert_array_equal(lm.points, K[lm.indices])


def test_refusals(X):
    with pytest.raises(InvalidInputError, match="Unknown landmark method 'grid'"):
        select_landmarks(X, 10, method="grid")
    with pytest.raises(InvalidInputError, match="precomputed kernel has none"):
        select_landmarks(X[:50] @ X[:50].T, 10, method="kmeans", precomputed=True)
    bad = X.copy()
    bad[:, 0] = np.nan
    with pytest.raises(InvalidInputError, match="finite values"):
        select_landmarks(bad, 10, method="kmeans")
