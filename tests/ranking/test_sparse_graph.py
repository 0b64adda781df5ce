"""``JointRankingClustering`` beyond the dense limit: the k-NN graph kernels as a sparse matrix
(against the dense blocks), and the fit on it against the dense fit."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import make_blobs

from dkernel import JointRankingClustering
from dkernel.errors import ResourceLimitError
from dkernel.ranking import jrc
from dkernel.ranking.sparse_graph import sparse_normalized_eigenpairs, sparse_radius_kernel


def _blobs(n: int, seed: int = 0) -> np.ndarray:
    return make_blobs(n, centers=4, n_features=3, cluster_std=1.5, random_state=seed)[0]


def _fitted(X: np.ndarray, **params) -> JointRankingClustering:
    return JointRankingClustering(n_clusters=4, random_state=0, **params).fit(X)


@pytest.mark.parametrize("kernel", ["knn_mean", "knn"])
@pytest.mark.parametrize("n", [300, 2500])  # every row the reference; a sample of 2 000
def test_sparse_kernel_equals_the_dense_blocks(kernel, n):
    X = _blobs(n)
    X[:5] = X[5]  # copies: coinciding points, ties at the radius
    model = _fitted(X, kernel=kernel)
    block, X_fit = model.kernel_.fn.kernel.block, model.kernel_.X_fit
    W = sparse_radius_kernel(block, X_fit)
    np.testing.assert_array_equal(W.toarray(), block(X_fit, X_fit))


def _holed(n: int) -> np.ndarray:
    """Blobs with a fifth of the entries missing (and one row missing all but one column)."""
    X = _blobs(n)
    holes = np.random.default_rng(1).random(X.shape) < 0.2
    holes[holes.all(axis=1), 0] = False  # every row keeps a value (an empty row is warned of)
    X[holes] = np.nan
    X[7, 1:] = np.nan
    return X


@pytest.mark.parametrize("kernel", ["knn_mean", "knn"])
@pytest.mark.parametrize("n", [300, 2500])
def test_sparse_kernel_with_missing_values_equals_the_dense_blocks(kernel, n):
    """Expected squared distances: a row is 1 with itself (its two draws may be beyond its
    radius) and otherwise as the dense blocks of ``dkernel.kernels.missing``."""
    X = _holed(n)
    model = _fitted(X, kernel=kernel)
    block, X_fit = model.kernel_.fn.kernel.block, model.kernel_.X_fit
    W = sparse_radius_kernel(block, X_fit)
    np.testing.assert_array_equal(W.toarray(), block(X_fit, X_fit))


@pytest.mark.parametrize("holed", [False, True])
def test_sparse_kernel_starts_from_the_radius_search_lists(monkeypatch, holed):
    """Radii measured among every row through an index: the graph starts from the lists that
    measured them (no index, no search of its own on the first pass) and is still the dense
    blocks' kernel; without them (taken already) it searches and gives the same."""
    from dkernel.kernels import adaptive
    from dkernel.ranking import sparse_graph

    monkeypatch.setattr(adaptive, "INDEX_MIN_REFERENCE", 1000)
    X = _holed(2500) if holed else _blobs(2500)
    if not holed:
        X[:5] = X[5]
    model = _fitted(X, kernel="knn_mean", kernel_params={"n_reference": None})
    block, X_fit = model.kernel_.fn.kernel.block, model.kernel_.X_fit
    dense = block(X_fit, X_fit)
    with monkeypatch.context() as patched:
        patched.setattr(sparse_graph, "NearestNeighbors", None)  # building an index would fail
        W = sparse_radius_kernel(block, X_fit)
    np.testing.assert_array_equal(W.toarray(), dense)
    assert block.take_neighbor_lists(X_fit) is None  # handed over once
    np.testing.assert_array_equal(sparse_radius_kernel(block, X_fit).toarray(), dense)


def test_sparse_eigenpairs_of_a_disconnected_graph_keep_the_trivial_pair_first():
    rng = np.random.default_rng(0)
    X = np.r_[rng.normal(size=(60, 2)), rng.normal(size=(60, 2)) + 100.0]
    model = _fitted(X, kernel="knn")
    W = sparse_radius_kernel(model.kernel_.fn.kernel.block, model.kernel_.X_fit)
    d = np.asarray(W.sum(axis=1)).ravel()
    values, vectors = sparse_normalized_eigenpairs(W, d, 4, 0)
    np.testing.assert_allclose(values[:2], 1.0, atol=1e-10)  # two components
    np.testing.assert_allclose(vectors[:, 0], np.sqrt(d / d.sum()))
    np.testing.assert_allclose(vectors.T @ vectors, np.eye(4), atol=1e-10)
    Wn = W.toarray() / np.sqrt(np.outer(d, d))
    np.testing.assert_allclose(Wn @ vectors, vectors * values, atol=1e-8)


@pytest.mark.parametrize("kernel", ["knn_mean", "knn"])
@pytest.mark.parametrize("n_clusters", [4, "auto"])
def test_sparse_fit_equals_the_dense_fit(monkeypatch, kernel, n_clusters):
    X = _blobs(2500)
    every_row = {"n_reference": None}  # the sparse path's radii (a dense fit samples 2 000)
    dense = JointRankingClustering(
        kernel=kernel, n_clusters=n_clusters, kernel_params=every_row, random_state=0
    ).fit(X)
    monkeypatch.setattr(jrc, "DENSE_LIMIT_BYTES", 1)
    sparse = JointRankingClustering(kernel=kernel, n_clusters=n_clusters, random_state=0).fit(X)
    assert sparse.n_clusters_ == dense.n_clusters_
    _assert_same_fit(sparse, dense)
    np.testing.assert_array_equal(sparse.predict(X[:200]), sparse.labels_[:200])


def _assert_same_fit(got: JointRankingClustering, expected: JointRankingClustering) -> None:
    """The same labels, spectrum, embedding (up to the signs of columns), degrees and ranks."""
    np.testing.assert_array_equal(got.labels_, expected.labels_)
    np.testing.assert_allclose(got.eigenvalues_, expected.eigenvalues_, atol=1e-10)
    np.testing.assert_allclose(np.abs(got.embedding_), np.abs(expected.embedding_), atol=1e-8)
    np.testing.assert_allclose(got.degrees_, expected.degrees_)
    np.testing.assert_allclose(got.rank(cluster=0), expected.rank(cluster=0), atol=1e-12)


@pytest.mark.parametrize(
    "params", [{"kernel": "rbf"}, {"embedding": "laplacian"}, {"kernel": "local_scaling"}]
)
def test_beyond_the_dense_limit_other_settings_are_refused_with_the_fix(monkeypatch, params):
    monkeypatch.setattr(jrc, "DENSE_LIMIT_BYTES", 1)
    with pytest.raises(ResourceLimitError, match="sparse graph at any N"):
        _fitted(_blobs(300), **params)


def test_beyond_the_dense_limit_missing_values_take_the_sparse_graph(monkeypatch):
    X = _holed(1200)
    dense = _fitted(X)
    monkeypatch.setattr(jrc, "DENSE_LIMIT_BYTES", 1)
    sparse = _fitted(X)
    np.testing.assert_array_equal(sparse.labels_, dense.labels_)
    np.testing.assert_allclose(sparse.eigenvalues_, dense.eigenvalues_, atol=1e-10)
    np.testing.assert_allclose(sparse.degrees_, dense.degrees_)
    np.testing.assert_array_equal(sparse.predict(X[:100]), dense.predict(X[:100]))


def test_beyond_the_dense_limit_the_graph_keeps_n_neighbors_per_row(monkeypatch):
    """Each radius is the distance to the 10th other row of all of them, so the half-weighted
    graph's degrees average n_neighbors + 1 at any N (a reference sample's first neighbour
    stood for N / 2 000 rows and the graph densified with N); a given n_reference is kept."""
    from dkernel.kernels import adaptive

    monkeypatch.setattr(jrc, "DENSE_LIMIT_BYTES", 1)
    monkeypatch.setattr(adaptive, "INDEX_MIN_REFERENCE", 1000)
    X = _blobs(4000)
    model = _fitted(X)
    assert model.kernel_params_["n_reference"] == 4000
    assert model.kernel_params_["reference_neighbors"] == 10
    assert model.degrees_.mean() == pytest.approx(11.0, abs=1e-9)
    sampled = _fitted(X, kernel_params={"n_reference": 100})
    assert sampled.kernel_params_["n_reference"] == 100
    assert sampled.degrees_.mean() > 25  # the first of 100 rows: about the 40th of 4 000


def test_beyond_the_dense_limit_rows_with_nan_keep_n_neighbors_too(monkeypatch):
    from dkernel.kernels import adaptive

    monkeypatch.setattr(jrc, "DENSE_LIMIT_BYTES", 1)
    monkeypatch.setattr(adaptive, "INDEX_MIN_REFERENCE", 1000)
    X = _holed(3000)
    # rows with no value are copies of one another at the model's mean (the k-NN graphs rank
    # by the conditional means), whose ties add edges to every row that reaches them
    X = X[~np.isnan(X).all(axis=1)]
    model = _fitted(X)
    assert model.kernel_params_["n_reference"] == X.shape[0]
    assert model.degrees_.mean() == pytest.approx(11.0, abs=0.05)
    np.testing.assert_array_equal(model.predict(X[:100]), model.labels_[:100])


def _rounded(n: int, seed: int = 0) -> np.ndarray:
    """Four 3-D blobs on a grid of step 2: a few hundred distinct rows, most repeated."""
    return 2.0 * np.round(_blobs(n, seed) / 2.0)


def test_repeated_rows_embed_through_the_distinct_rows_graph():
    """``jrc_copies_embedding`` against the graph of every row (``P W̃ Pᵀ``): the same Z,
    eigenvalues, U and degrees, up to the signs of columns."""
    from dkernel.linalg.copies import repeated_rows
    from dkernel.ranking.sparse_graph import jrc_copies_embedding, jrc_sparse_embedding

    X = _rounded(1500)
    model = _fitted(X, kernel_params={"n_reference": None})
    block, X_fit = model.kernel_.fn.kernel.block, model.kernel_.X_fit
    copies = repeated_rows(X_fit)
    assert copies is not None and copies.first.size < len(X) / 5
    every = jrc_sparse_embedding(sparse_radius_kernel(block, X_fit), 0.15, 6, 0)
    distinct = jrc_copies_embedding(block, X_fit, copies, 0.15, 6, 0)
    np.testing.assert_allclose(distinct[1], every[1], atol=1e-10)
    np.testing.assert_array_equal(distinct[3], every[3])
    for got, expected in zip((distinct[0], distinct[2]), (every[0], every[2]), strict=True):
        signs = np.sign(np.sum(got * expected, axis=0))
        np.testing.assert_allclose(got * signs, expected, atol=1e-8)


def test_repeated_rows_beyond_the_dense_limit_fit_as_the_dense_path(monkeypatch):
    """Integer-valued rows on the sparse path take the distinct rows' graph: the fit of the
    dense path (every row the reference), and of the sparse graph of every row."""
    X = _rounded(2500)
    dense = _fitted(X, kernel_params={"n_reference": None})
    monkeypatch.setattr(jrc, "DENSE_LIMIT_BYTES", 1)
    sparse = _fitted(X)
    with monkeypatch.context() as every_row:
        every_row.setattr(jrc, "repeated_rows", lambda X: None)
        unreduced = _fitted(X)
    _assert_same_fit(sparse, dense)
    _assert_same_fit(sparse, unreduced)
    np.testing.assert_array_equal(sparse.predict(X[:200]), sparse.labels_[:200])
