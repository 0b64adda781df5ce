"""The large-N path of KernelDecompositionClustering against the slow, obvious code on small N:
deflated subspace-iteration eigenvectors, subsampled k-means, threaded neighbour search, the
approximate neighbour search."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import sparse
from sklearn.metrics import adjusted_rand_score
from sklearn.neighbors import NearestNeighbors
from threadpoolctl import threadpool_limits

from dkernel.decomposition import KernelDecompositionClustering, kernels, nmf
from dkernel.decomposition.kernels import spatial_order, threaded_kneighbors
from dkernel.errors import InvalidInputError
from dkernel.graphs.approximate_knn import CellIndex


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    with threadpool_limits(1):
        yield


def _blobs(rng, n_per=60, centres=((0, 0), (3, 0), (0, 3), (3, 3)), spread=0.4):
    X = np.vstack([rng.normal(c, spread, (n_per, 2)) for c in centres])
    return X, np.repeat(np.arange(len(centres)), n_per)


def _normalised_graph(X, k=7):
    """S = D^-1/2 W D^-1/2 of the symmetrised 0/1 k-NN graph, written out densely."""
    D = ((X[:, None] - X[None]) ** 2).sum(-1)
    nn = np.argsort(D, axis=1, kind="stable")[:, :k]
    A = np.zeros_like(D)
    A[np.arange(len(X))[:, None], nn] = 1.0
    W = (A + A.T) / 2
    d = W.sum(1)
    return W / np.sqrt(d)[:, None] / np.sqrt(d)[None, :], d


def _projector(U):
    Q, _ = np.linalg.qr(U)
    return Q @ Q.T


def test_deflated_eigenvectors_span_the_leading_eigenspace(rng):
    # Two separate groups (eigenvalue 1 twice) and, inside the first, two touching blobs.
    X = np.vstack([rng.normal((0, 0), 0.3, (80, 2)), rng.normal((1.6, 0), 0.3, (80, 2))])
    X = np.vstack([X, rng.normal((10, 10), 0.3, (60, 2))])
    S, d = _normalised_graph(X)
    vals, vecs = np.linalg.eigh(S)
    order = np.argsort(vals)[::-1]
    assert np.isclose(vals[order[1]], 1.0) and vals[order[2]] < 1 - 1e-6
    U = nmf.deflated_eigenvectors(sparse.csr_matrix(S), d, 3, seed=0, n_iter=400)
    # eigenvalue-1 space exactly; the third vector where the gap to the fourth is clear
    assert np.allclose(_projector(U[:, :2]), _projector(vecs[:, order[:2]]), atol=1e-10)
    gap = vals[order[2]] - vals[order[3]]
    assert gap > 0.01
    assert np.allclose(_projector(U), _projector(vecs[:, order[:3]]), atol=1e-6)
    ritz = np.einsum("ij,ij->j", U, S @ U)
    assert np.allclose(ritz, vals[order[:3]], atol=1e-8)


def test_more_components_than_vectors_gives_the_largest_components(rng):
    X = np.vstack([rng.normal((10 * i, 0), 0.2, (20 + 5 * i, 2)) for i in range(4)])
    S, d = _normalised_graph(X)
    U = nmf.deflated_eigenvectors(sparse.csr_matrix(S), d, 2, seed=0)
    sizes = [20, 25, 30, 35]
    labels = np.repeat(np.arange(4), sizes)
    for col, part in zip(U.T, (3, 2), strict=True):  # the two largest, largest first
        assert np.all(col[labels != part] == 0) and np.all(np.abs(col[labels == part]) > 0)


@pytest.mark.parametrize(
    "centres", [((0, 0), (3, 0), (0, 3), (3, 3)), ((0, 0), (1.5, 0)), ((0, 0), (1.2, 0), (0, 1.2))]
)
def test_subspace_embedding_clusters_at_least_as_well_as_shift_invert(rng, centres):
    # separate blobs (eigenvalue 1 per blob) and touching ones (one connected graph)
    X, y = _blobs(rng, centres=centres, spread=0.3)
    C = len(centres)
    ind = NearestNeighbors().fit(X).kneighbors(X, 7, return_distance=False)
    K = sparse.csr_matrix(
        (np.ones(ind.size), ind.ravel(), np.arange(0, ind.size + 1, 7)), shape=(len(X),) * 2
    )
    ln = np.zeros(len(X))
    labels = []
    for solver in ("shift-invert", "subspace"):
        U = nmf.spectral_embedding(K, ln, C, seed=0, solver=solver)
        labels.append(nmf._embedding_kmeans(U, C, seed=0, restart=0))
    # (with four components shift-invert ARPACK returns an incomplete eigenvalue-1 space here)
    assert adjusted_rand_score(y, labels[1]) >= adjusted_rand_score(y, labels[0]) - 0.05
    assert adjusted_rand_score(y, labels[1]) > 0.9
    with pytest.raises(InvalidInputError, match="solver must be one of"):
        nmf.spectral_embedding(K, ln, C, solver="lobpcg")


def test_subsampled_kmeans_assigns_every_row_to_its_nearest_centre(rng, monkeypatch):
    Z = np.vstack([rng.normal(c, 0.1, (100, 3)) for c in np.eye(3)])
    full = nmf._embedding_kmeans(Z, 3, seed=0, restart=1)
    monkeypatch.setattr(nmf, "KMEANS_MAX_N", 50)
    sub = nmf._embedding_kmeans(Z, 3, seed=0, restart=1)
    assert adjusted_rand_score(full, sub) == 1.0
    # nearest centre, brute force: the centres are the means of the parts
    centres = np.stack([Z[sub == c].mean(0) for c in range(3)])
    nearest = np.argmin(((Z[:, None] - centres[None]) ** 2).sum(-1), axis=1)
    assert np.array_equal(nearest, sub)
    assert np.array_equal(sub, nmf._embedding_kmeans(Z, 3, seed=0, restart=1))


@pytest.mark.parametrize("threads", [1, 2])
def test_threaded_tree_order_search_equals_plain_kneighbors(rng, threads):
    X = rng.normal(size=(500, 4))
    index = NearestNeighbors().fit(X)
    dist, ind = index.kneighbors(X, 6)
    order = spatial_order(X)
    assert np.array_equal(np.sort(order), np.arange(500))
    d2, i2 = threaded_kneighbors(index, X, 6, order=order, block_rows=37, n_threads=threads)
    assert np.array_equal(i2, ind) and np.array_equal(d2, dist)
    brute = NearestNeighbors(algorithm="brute").fit(X)
    d3, i3 = threaded_kneighbors(brute, X, 6, block_rows=64, n_threads=threads)
    assert np.array_equal(i3, ind) and np.allclose(d3, dist, atol=1e-6)  # brute: sqrt of ~0


def test_large_n_path_fits_like_the_small_n_path(rng, monkeypatch):
    X, y = _blobs(rng, n_per=80)
    small = KernelDecompositionClustering(4, random_state=0).fit(X)
    monkeypatch.setattr(nmf, "SHIFT_INVERT_MAX_N", 10)
    monkeypatch.setattr(nmf, "KMEANS_MAX_N", 100)
    large = KernelDecompositionClustering(4, random_state=0).fit(X)
    assert adjusted_rand_score(small.labels_, large.labels_) == 1.0
    assert adjusted_rand_score(y, large.labels_) == 1.0
    again = KernelDecompositionClustering(4, random_state=0).fit(X)
    assert np.array_equal(again.labels_, large.labels_)
    assert np.array_equal(again.W_, large.W_)
    # out of sample on threads, in blocks: the training rows' posteriors
    model = KernelDecompositionClustering(4, random_state=0, block_rows=50).fit(X)
    assert np.allclose(model.predict_proba(X), model.posteriors_, atol=1e-12)


@pytest.mark.parametrize("kernel", ["local_scaling", "rbf"])
def test_approximate_search_fits_like_the_exact_search(rng, kernel):
    X, y = _blobs(rng, n_per=150)
    exact = KernelDecompositionClustering(4, kernel=kernel, random_state=0).fit(X)
    assert isinstance(exact._index, NearestNeighbors)
    approx = KernelDecompositionClustering(
        4, kernel=kernel, neighbor_search="approximate", random_state=0
    ).fit(X)
    assert isinstance(approx._index, CellIndex)
    # a few points between the blobs may go either way
    assert adjusted_rand_score(y, approx.labels_) >= adjusted_rand_score(y, exact.labels_) - 0.01
    assert adjusted_rand_score(exact.labels_, approx.labels_) >= 0.98
    # predict searches the training points as the training graph did: the same rows
    np.testing.assert_allclose(approx.predict_proba(X), approx.posteriors_, atol=1e-12)
    again = KernelDecompositionClustering(
        4, kernel=kernel, neighbor_search="approximate", random_state=0
    ).fit(X)
    np.testing.assert_array_equal(again.W_, approx.W_)


def test_auto_search_is_exact_below_the_threshold(rng, monkeypatch):
    X, _ = _blobs(rng, n_per=50)
    auto = KernelDecompositionClustering(4, random_state=0).fit(X)
    exact = KernelDecompositionClustering(4, neighbor_search="exact", random_state=0).fit(X)
    assert isinstance(auto._index, NearestNeighbors)
    np.testing.assert_array_equal(auto.W_, exact.W_)
    monkeypatch.setattr(kernels, "APPROXIMATE_MIN_SAMPLES", X.shape[0])
    assert isinstance(KernelDecompositionClustering(4, random_state=0).fit(X)._index, CellIndex)
    with pytest.raises(InvalidInputError, match="neighbor_search"):
        KernelDecompositionClustering(4, neighbor_search="fast").fit(X)


@pytest.mark.parametrize("kernel", ["local_scaling", "rbf"])
def test_approximate_search_of_dask_input_equals_numpy_input(rng, kernel):
    import dask.array as da

    X, _ = _blobs(rng, n_per=100)
    params = dict(kernel=kernel, neighbor_search="approximate", random_state=0)
    a = KernelDecompositionClustering(4, **params).fit(X)
    b = KernelDecompositionClustering(4, **params).fit(da.from_array(X, chunks=(97, 2)))
    np.testing.assert_array_equal(a.W_, b.W_)
    np.testing.assert_allclose(b.predict_proba(X), a.posteriors_, atol=1e-12)
