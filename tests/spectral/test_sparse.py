"""The exact sparse self-tuning spectral path of SpectralClustering."""

from __future__ import annotations

import warnings

import dask.array as da
import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import make_blobs, make_circles, make_moons
from sklearn.metrics import adjusted_rand_score

import dkernel.spectral.sparse as sparse
from dkernel import SpectralClustering, clustering_scores
from dkernel.errors import NumericalWarning
from dkernel.graphs.knn import build_index, training_neighbors
from dkernel.kernels.adaptive import tie_inclusive_neighbors
from dkernel.kernels.registry import make_kernel


def _rings(n=900, seed=0):
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(3), n // 3)
    theta = rng.uniform(0, 2 * np.pi, n)
    r = 1.0 + y + rng.normal(0, 0.1, n)
    return np.c_[r * np.cos(theta), r * np.sin(theta)], y


@pytest.mark.parametrize(
    "data, k",
    [
        (make_moons(800, noise=0.07, random_state=0), 2),
        (make_circles(800, factor=0.5, noise=0.05, random_state=0), 2),
        (_rings(), 3),
    ],
)
def test_defaults_separate_non_convex_shapes(data, k):
    X, y = data
    sc = SpectralClustering(k, random_state=0).fit(X)
    assert sc.graph_model_ is not None and sc.nystrom_ is None
    assert clustering_scores(y, sc.labels_)["ari"] > 0.99
    assert np.mean(sc.predict(X) == sc.labels_) >= 0.99


def test_graph_matches_the_dense_local_scaling_kernel():
    """With every neighbour kept, the sparse graph is the dense self-tuning kernel."""
    X, _ = make_moons(120, noise=0.05, random_state=1)
    U, model = sparse.fit_sparse_embedding(X, 2, graph_neighbors=119)
    K = make_kernel("local_scaling", X, n_reference=None)(X)
    d = K.sum(axis=1)
    M = K / np.sqrt(np.outer(d, d))
    values, vectors = np.linalg.eigh(M)
    np.testing.assert_allclose(model.eigenvalues, values[::-1][:2], atol=1e-10)
    np.testing.assert_allclose(np.abs(U.T @ vectors[:, ::-1][:, :2]), np.eye(2), atol=1e-8)
    np.testing.assert_allclose(model.transform(X), U, atol=1e-8)


@pytest.mark.parametrize("lanczos", [True, False], ids=["lanczos", "block"])
def test_sparse_solvers_match_dense_and_are_deterministic(monkeypatch, lanczos):
    X, _ = _rings(600, seed=2)
    dense = SpectralClustering(3, random_state=0).fit(X)
    monkeypatch.setattr(sparse, "_DENSE_EIGEN_MAX", 10)
    if not lanczos:
        monkeypatch.setattr(sparse, "_lanczos_pairs", lambda *args: None)
    a = SpectralClustering(3, random_state=0).fit(X)
    b = SpectralClustering(3, random_state=0).fit(X)
    np.testing.assert_array_equal(a.labels_, b.labels_)
    assert clustering_scores(dense.labels_, a.labels_)["ari"] == 1.0
    np.testing.assert_allclose(a.eigenvalues_, dense.eigenvalues_, atol=1e-5)


def test_dask_input_gives_the_same_labels_and_lazy_predict():
    X, _ = make_moons(500, noise=0.06, random_state=3)
    a = SpectralClustering(2, random_state=0).fit(X)
    b = SpectralClustering(2, random_state=0).fit(da.from_array(X, chunks=(128, 2)))
    np.testing.assert_array_equal(a.labels_, b.labels_)
    pred = a.predict(da.from_array(X, chunks=(100, 2)))
    assert isinstance(pred, da.Array)
    np.testing.assert_array_equal(pred.compute(), a.predict(X))


def test_explicit_landmarks_use_nystrom():
    X, y = make_moons(600, noise=0.05, random_state=0)
    sc = SpectralClustering(2, n_landmarks=300, random_state=0).fit(X)
    assert sc.nystrom_ is not None and sc.nystrom_.kernel_.name == "rbf"
    sc = SpectralClustering(2, kernel="local_scaling", n_landmarks=300, random_state=0).fit(X)
    assert sc.nystrom_.kernel_.name == "local_scaling"
    assert sc.nystrom_.kernel_.params["reference"] == "landmarks"
    assert sc.predict(X[:50]).shape == (50,)


def test_bad_neighbours_and_features():
    X, _ = make_moons(50, random_state=0)
    with pytest.raises(Exception, match="scale_neighbors"):
        SpectralClustering(2, scale_neighbors=50).fit(X)
    sc = SpectralClustering(2, random_state=0).fit(X)
    with pytest.raises(Exception, match="expecting 2 features"):
        sc.predict(np.zeros((3, 3)))


def test_duplicated_rows_get_a_scale_and_predict_consistently():
    rng = np.random.default_rng(0)
    base = np.vstack([rng.normal(0, 0.3, (40, 2)), rng.normal(3, 0.3, (40, 2))])
    X = np.vstack([base, np.repeat(base[:3], 30, axis=0)])  # 90 copies of three rows
    sc = SpectralClustering(2, random_state=0).fit(X)
    assert np.all(sc.graph_model_.sigma > 0)
    assert np.mean(sc.predict(X) == sc.labels_) >= 0.99
    with pytest.raises(Exception, match="all rows identical"):
        SpectralClustering(2).fit(np.ones((50, 2)))


def _brute_lists(P, g):
    """Each distinct point's g nearest others (itself first), by sorting all distances."""
    D = np.sqrt(((P[:, None, :] - P[None, :, :]) ** 2).sum(-1))
    order = np.argsort(D, axis=1, kind="stable")[:, : g + 1]
    return D, order


def test_one_sided_edges_are_scaled_as_a_brute_force_graph():
    rng = np.random.default_rng(4)
    P = rng.normal(size=(60, 3))
    g, k, f = 6, 3, 0.05
    D, order = _brute_lists(P, g)
    sigma = np.sort(D, axis=1)[:, k]
    listed = np.zeros_like(D, dtype=bool)
    np.put_along_axis(listed, order, True, axis=1)
    weight = np.exp(-(D**2) / np.outer(sigma, sigma))
    expected = np.where(listed & listed.T, weight, np.where(listed | listed.T, f * weight, 0))
    dist = np.take_along_axis(D, order, axis=1)
    W, s = sparse._affinity(dist, order, k, one_sided_weight=f)
    np.testing.assert_allclose(s, sigma)
    np.testing.assert_allclose(W.toarray(), expected, atol=1e-12)


@pytest.mark.parametrize("far_point", [False, True], ids=["copies", "copies-and-a-far-point"])
def test_graph_is_the_dense_graph_of_all_rows(far_point):
    """Copies collapse to a node with their multiplicity (copies joined with weight 1), and
    each row's self-loop is at most the weight of its other edges (copies count): the
    eigenpairs and the out-of-sample map are those of the dense self-tuning graph of all
    rows."""
    rng = np.random.default_rng(5)
    P = np.vstack([rng.normal(0, 0.5, (30, 2)), rng.normal(3, 0.5, (30, 2))])
    counts = rng.integers(1, 4, size=len(P))
    if far_point:
        P, counts = np.vstack([P, [[40.0, 40.0]]]), np.r_[counts, 1]
    X = np.repeat(P, counts, axis=0)
    k = 7
    U, model = sparse.fit_sparse_embedding(X, 3, n_neighbors=k, graph_neighbors=len(P) - 1)
    D, _ = _brute_lists(P, len(P) - 1)
    sigma = np.sort(D, axis=1)[:, k]
    rows = np.repeat(np.arange(len(P)), counts)
    K = np.exp(-(D[np.ix_(rows, rows)] ** 2) / np.outer(sigma[rows], sigma[rows]))
    np.fill_diagonal(K, np.minimum(1.0, K.sum(axis=1) - 1.0))
    bounded = K.diagonal() < 1.0
    assert bounded.sum() == int(far_point)  # only the far point's loop, to next to nothing
    assert not far_point or K[-1, -1] < 1e-3
    d = K.sum(axis=1)
    values, vectors = np.linalg.eigh(K / np.sqrt(np.outer(d, d)))
    np.testing.assert_allclose(model.eigenvalues, values[::-1][:3], atol=1e-10)
    np.testing.assert_allclose(np.abs(U.T @ vectors[:, ::-1][:, :3]), np.eye(3), atol=1e-8)
    np.testing.assert_allclose(model.transform(X), U, atol=1e-8)


def test_noise_features_do_not_join_two_moons():
    """Three uniform noise features of the moons' own range (standardised, 3 of the 5
    dimensions carry nothing): the symmetrised 10-NN graph scored 0.78 here."""
    X, y = make_moons(2000, noise=0.07, random_state=0)
    noise = np.random.default_rng(1).uniform(X.min(), X.max(), (2000, 3))
    X = np.c_[X, noise]
    X = (X - X.mean(axis=0)) / X.std(axis=0)
    sc = SpectralClustering(2, random_state=0).fit(X)
    assert sc.approximation_ == "exact"
    assert clustering_scores(y, sc.labels_)["ari"] >= 0.95
    assert np.mean(sc.predict(X) == sc.labels_) >= 0.99


@pytest.mark.parametrize("n, far", [(300, 60.0), (3000, 1000.0)])
def test_one_far_outlier_does_not_take_a_cluster(n, far):
    """Three blobs and one row far from all: with a self-loop of 1 that row was a cluster of
    its own and two blobs were merged (ARI 0.62 at 300 rows); now it joins a blob. Above the
    dense eigensolver's size (3 000 rows) its degree-0 component gave a 0/0 eigenvector: NaN
    embeddings, and k-means failed on them ("Input X contains NaN")."""
    rng = np.random.default_rng(0)
    centres = rng.normal(scale=5, size=(3, 3))
    y = rng.integers(0, 3, n)
    X = centres[y] + rng.normal(size=(n, 3))
    X[0] = far
    sc = SpectralClustering(3, random_state=0).fit(X)
    assert np.isfinite(sc.embedding_).all()
    assert np.bincount(sc.labels_).min() > 1
    assert clustering_scores(y, sc.labels_)["ari"] >= 0.8
    assert np.mean(sc.predict(X) == sc.labels_) >= 0.99


def _cycles(copies: int, length: int = 50) -> sp.csr_matrix:
    """D^{-1/2} W D^{-1/2} of ``copies`` disjoint cycles with self-loops: eigenvalue 1 once
    per cycle."""
    W = sp.diags([1.0, 1.0, 1.0], [-1, 0, 1], shape=(length, length)).tolil()
    W[0, length - 1] = W[length - 1, 0] = 1.0
    return sp.block_diag([W.tocsr() / 3.0] * copies).tocsr()


def test_lanczos_finds_every_copy_of_eigenvalue_one_or_gives_way(monkeypatch):
    """One copy of the eigenvalue 1 per component: Lanczos finds the three of three disjoint
    cycles; when it returns fewer, the block solver answers instead."""
    M = _cycles(3)
    values, _ = sparse._lanczos_pairs(M, 6, 0)
    assert np.count_nonzero(values > 1 - 1e-8) == 3

    real_eigsh = sparse.eigsh

    def one_copy(*args, **kwargs):
        values, vectors = real_eigsh(*args, **kwargs)
        return np.where(values > 1 - 1e-8, 0.5, values) + np.eye(values.size)[-1] * 0.5, vectors

    monkeypatch.setattr(sparse, "eigsh", one_copy)
    assert sparse._lanczos_pairs(M, 6, 0) is None
    monkeypatch.setattr(sparse, "_DENSE_EIGEN_MAX", 10)
    values = sparse.sparse_leading_eigenpairs(M, 3, 0).values
    assert np.count_nonzero(values > 1 - 1e-6) == 3


def _normalized(W):
    d = np.asarray(W.sum(axis=1)).ravel()
    r = sp.diags(1.0 / np.sqrt(d))
    return sp.csr_matrix(r @ W @ r), np.sqrt(d)


def _two_pieces(n=600, seed=0):
    """A random geometric graph of two separated groups of points (two components)."""
    rng = np.random.default_rng(seed)
    X = np.r_[rng.uniform(0, 5, size=(n, 2)), rng.uniform(10, 15, size=(n, 2))]
    D2 = ((X[:, None, :] - X[None, :, :]) ** 2).sum(-1)
    return sp.csr_matrix(np.where(D2 < 0.3, np.exp(-D2), 0.0))


@pytest.mark.parametrize("solver", ["lanczos", "block"])
@pytest.mark.parametrize("k", [2, 5])
def test_the_eigenvalue_one_is_taken_exactly_per_component(monkeypatch, solver, k):
    """With the Perron vector and no more pairs wanted than components, the pairs are the
    eigenvalue 1's, one per component, exact; with more wanted, either solver's are LAPACK's."""
    M, perron = _normalized(_two_pieces())
    assert sparse.connected_components(M, directed=False)[0] == 2
    monkeypatch.setattr(sparse, "_DENSE_EIGEN_MAX", 10)
    if solver == "block":
        monkeypatch.setattr(sparse, "_lanczos_pairs", lambda *args: None)
    values, vectors, _ = sparse.sparse_leading_eigenpairs(M, k, 0, perron=perron)
    want_values, want_vectors = np.linalg.eigh(M.toarray())
    want_values, want_vectors = want_values[::-1][:k], want_vectors[:, ::-1][:, :k]
    np.testing.assert_allclose(values[:2], 1.0, atol=1e-12)
    np.testing.assert_allclose(values, want_values, atol=1e-5 if solver == "block" else 1e-10)
    np.testing.assert_allclose(vectors.T @ vectors, np.eye(k), atol=1e-6)
    # the same leading subspace (the eigenvalue 1's copies in any basis)
    cosines = np.linalg.svd(want_vectors.T @ vectors, compute_uv=False)
    np.testing.assert_allclose(cosines, 1.0, atol=1e-5)


@pytest.mark.parametrize("k", [3, 5])
def test_lanczos_takes_k_pairs_and_estimates_the_next_eigenvalue(monkeypatch, k):
    """Lanczos is asked for the k pairs alone, to LANCZOS_TOL (they pass the gap check: no
    second solve); the spectrum's (k+1)-th entry is the next eigenvalue to
    NEXT_EIGENVALUE_TOL, from below (a Ritz value), as LAPACK gives it."""
    X, _ = make_blobs(800, centers=4, cluster_std=2.0, random_state=0)
    K = np.exp(-((X[:, None, :] - X[None, :, :]) ** 2).sum(-1) / 4.0)
    M, perron = _normalized(sp.csr_matrix(np.where(K > 1e-3, K, 0.0)))
    asked = []
    real_eigsh = sparse.eigsh

    def counting(A, k, **kwargs):
        asked.append((k, kwargs["tol"]))
        return real_eigsh(A, k, **kwargs)

    monkeypatch.setattr(sparse, "eigsh", counting)
    monkeypatch.setattr(sparse, "_DENSE_EIGEN_MAX", 10)
    values, vectors, spectrum = sparse.sparse_leading_eigenpairs(M, k, 0, perron=perron)
    assert asked == [(k, sparse.LANCZOS_TOL), (1, sparse.NEXT_EIGENVALUE_TOL)]
    residual = np.linalg.norm(M @ vectors - vectors * values, axis=0)
    assert residual.max() <= sparse.LANCZOS_TOL
    want = np.linalg.eigvalsh(M.toarray())[::-1]
    np.testing.assert_allclose(values, want[:k], atol=1e-10)
    assert spectrum.shape == (k + 1,)
    np.testing.assert_array_equal(spectrum[:k], values)
    assert spectrum[k] <= want[k] + 1e-12
    assert spectrum[k] >= want[k] - sparse.NEXT_EIGENVALUE_TOL * abs(want[k])


@pytest.mark.parametrize("needed_gap", [1e-6, 1e-3])
def test_the_next_eigenvalue_is_refined_only_as_far_as_the_warning_needs(monkeypatch, needed_gap):
    """A next eigenvalue 5e-5 below the k-th, inside the first estimate's error: refined once
    from its vector, to the accuracy that tells the gap from a narrower ``needed_gap`` (not to
    working precision); a wider ``needed_gap`` is decided by the first estimate, a Ritz value,
    at most the eigenvalue. (An exactly repeated one goes on to working precision: the cycle
    below.)"""
    rng = np.random.default_rng(0)
    top = np.array([1.0, 0.99, 0.98])
    following = top[-1] - 5e-5
    diagonal = np.r_[top, following, rng.uniform(0.0, 0.979, 3000)]
    M = sp.diags(diagonal).tocsr()
    vectors = np.eye(diagonal.size)[:, :3]
    tolerances = []
    real = sparse._next_ritz_pair

    def recording(*args, **kwargs):
        tolerances.append(args[4])
        return real(*args, **kwargs)

    monkeypatch.setattr(sparse, "_next_ritz_pair", recording)
    estimate = sparse._next_eigenvalue(M, top, vectors, 0, needed_gap)
    assert estimate <= following + 1e-12
    assert tolerances[0] == sparse.NEXT_EIGENVALUE_TOL
    if needed_gap < 5e-5:
        assert top[-1] - estimate > needed_gap
        assert len(tolerances) == 2 and 0.0 < tolerances[1] < sparse.NEXT_EIGENVALUE_TOL
    else:
        assert top[-1] - estimate <= needed_gap
        assert len(tolerances) == 1


def test_a_kth_eigenvalue_shared_with_the_next_is_warned_about(monkeypatch):
    """A cycle's eigenvalues below 1 come in equal pairs: its 2 leading eigenvectors are not
    determined (the second could be any of a plane), its 3 are. The pairs that fail the gap
    check at LANCZOS_TOL are solved again to working precision before the warning."""
    M = _cycles(1, length=100)
    monkeypatch.setattr(sparse, "_DENSE_EIGEN_MAX", 10)
    perron = np.ones(M.shape[0])
    tolerances = []
    real = sparse._lanczos_pairs

    def recording(*args):
        tolerances.append(args[5])
        return real(*args)

    monkeypatch.setattr(sparse, "_lanczos_pairs", recording)
    with pytest.warns(NumericalWarning, match="did not separate the 2 leading"):
        sparse.sparse_leading_eigenpairs(M, 2, 0, perron=perron)
    assert tolerances == [sparse.LANCZOS_TOL, 0.0]
    with warnings.catch_warnings():
        warnings.simplefilter("error", NumericalWarning)
        sparse.sparse_leading_eigenpairs(M, 3, 0, perron=perron)


def test_more_components_than_pairs_leave_no_component_out(monkeypatch):
    """Four separated cycles and two pairs wanted: the eigenvalue 1's eigenspace, in a basis
    that gives every row a non-zero embedding (the first two indicators would not), the
    same for a seed."""
    M = _cycles(4)
    monkeypatch.setattr(sparse, "_DENSE_EIGEN_MAX", 10)
    perron = np.ones(M.shape[0])
    with pytest.warns(NumericalWarning, match="4 separate components"):
        values, vectors, _ = sparse.sparse_leading_eigenpairs(M, 2, 0, perron=perron)
    np.testing.assert_allclose(values, 1.0)
    np.testing.assert_allclose(M @ vectors, vectors, atol=1e-12)
    np.testing.assert_allclose(vectors.T @ vectors, np.eye(4), atol=1e-12)
    assert np.all(np.linalg.norm(vectors[:, :2], axis=1) > 1e-6)
    with pytest.warns(NumericalWarning):
        again = sparse.sparse_leading_eigenpairs(M, 2, 0, perron=perron).vectors
    np.testing.assert_array_equal(vectors, again)


def test_lanczos_that_runs_out_of_restarts_gives_way_to_the_block_solver(monkeypatch):
    """ARPACK stopped at ``LANCZOS_MAX_RESTARTS`` (here 1, too few for these cycles) is a
    failure: the block solver answers, with every copy of the eigenvalue 1."""
    M = _cycles(3)
    monkeypatch.setattr(sparse, "LANCZOS_MAX_RESTARTS", 1)
    assert sparse._lanczos_pairs(M, 6, 0) is None
    monkeypatch.setattr(sparse, "_DENSE_EIGEN_MAX", 10)
    values = sparse.sparse_leading_eigenpairs(M, 3, 0).values
    assert np.count_nonzero(values > 1 - 1e-6) == 3


def test_neighbour_lists_keep_every_point_tied_with_the_last_as_a_brute_force_search():
    """Binary rows tie: 12 others at Hamming distance 1. A list keeps all points at most as
    far as its k-th, and the others of a longer search are not listed."""
    rng = np.random.default_rng(0)
    P = np.unique((rng.uniform(size=(400, 10)) < 0.5) * 1.0, axis=0)
    index = build_index(P)
    k = 9
    dist, ind, listed = tie_inclusive_neighbors(
        lambda rows, count: training_neighbors(index, P[rows], count), len(P), k, len(P)
    )
    D = np.sqrt(((P[:, None, :] - P[None, :, :]) ** 2).sum(-1))
    kth = np.sort(D, axis=1)[:, k - 1]
    for i in range(len(P)):
        expected = set(np.flatnonzero(D[i] <= kth[i] + 1e-12))
        got = set(ind[i][listed[i]].tolist())
        if len(expected) <= 64:
            assert got == expected
        else:  # a tie longer than the cap: the nearest cap points, all within the k-th
            assert got <= expected and len(got) == 64
    # continuous data never tie: the plain k nearest
    Q = rng.normal(size=(200, 3))
    qi = build_index(Q)
    d2, i2, l2 = tie_inclusive_neighbors(
        lambda rows, count: training_neighbors(qi, Q[rows], count), len(Q), k, len(Q)
    )
    assert l2 is None and d2.shape == (200, k)


def test_binary_rows_are_clustered_and_predicted_through_their_ties():
    """Three groups of 12 binary features: ARI 0.159 with lists cut among ties, 0.530 with
    the ties kept (k-means 0.570); predict follows the training lists' rule (it agreed with
    the labels on 97.7 % of the rows before)."""
    rng = np.random.default_rng(3)
    y = rng.integers(0, 3, 3000)
    X = (rng.uniform(size=(3000, 12)) < rng.uniform(0.1, 0.9, (3, 12))[y]) * 1.0
    sc = SpectralClustering(3, random_state=0).fit(X)
    assert adjusted_rand_score(y, sc.labels_) > 0.45
    assert np.mean(sc.predict(X) == sc.labels_) >= 0.995


def test_fewer_distinct_rows_than_the_scale_neighbour_take_the_farthest_with_a_warning():
    """A table of a few values and many copies (a survey's answers: 909 rows, 7 distinct in
    ``pscl/vote92`` of bench_heldout.py) has fewer other points than the widths' rank: each
    width is the distance to the farthest, as the graph's size is clamped to them, and a
    warning says so (it was an error that the defaults met on such tables)."""
    X = np.repeat(np.random.default_rng(0).normal(size=(5, 3)), 200, axis=0)
    with pytest.warns(NumericalWarning, match=r"only 5 distinct rows.*scale_neighbors=4\)"):
        clamped = SpectralClustering(n_clusters=3, random_state=0).fit(X)
    assert clamped.graph_model_.n_neighbors == 4
    labels = SpectralClustering(n_clusters=3, scale_neighbors=4, random_state=0).fit(X).labels_
    np.testing.assert_array_equal(clamped.labels_, labels)
    assert np.unique(labels).size == 3
    assert all(np.unique(labels[i * 200 : (i + 1) * 200]).size == 1 for i in range(5))


@pytest.mark.parametrize("embedding", ["normalized", "green"])
def test_a_point_no_kernel_weight_reaches_sits_at_the_origin(embedding):
    rng = np.random.default_rng(0)
    X = np.vstack([rng.normal(size=(299, 3)), [[1e6, 1e6, 1e6]]])  # degree 0 in the graph
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no division by a zero degree
        est = SpectralClustering(n_clusters=3, embedding=embedding, random_state=0).fit(X)
        new = est.predict(np.array([[1e6, 1e6, 1e6], [-1e6, 0.0, 0.0], [0.0, 0.0, 0.0]]))
    assert est.graph_model_.degrees[-1] == 0
    assert np.all(np.isfinite(est.embedding_)) and not est.embedding_[-1].any()
    assert new[0] == new[1] == est.labels_[-1]  # far new points sit there too


@pytest.mark.parametrize("n", [2000, 3000])  # the dense eigensolver and the exact pairs
def test_more_components_than_clusters_are_joined_by_single_linkage(n):
    """Four groups of one feature, 8 standard deviations apart: the k-NN graph falls into
    more components than clusters (a group's tail beyond a gap), and which of them shared a
    cluster was the eigensolver's arbitrary basis (ARI 0.59 at 2 000 points, 0.46 at 3 000,
    with a warning only at 3 000); joined at their closest points, the tail goes with its
    group."""
    rng = np.random.default_rng(2)
    y = rng.integers(0, 4, n)
    X = (8.0 * y + rng.normal(size=n))[:, None]
    # SpectralClustering's graph: 8 neighbours kept, the width the 7th's distance
    index = build_index(X)
    dist, ind = training_neighbors(index, X, sparse.GRAPH_NEIGHBORS + 1)
    W, _ = sparse._affinity(dist, ind, 7, one_sided_weight=sparse.ONE_SIDED_WEIGHT)
    assert sp.csgraph.connected_components(W)[0] > 4
    with warnings.catch_warnings():
        warnings.simplefilter("error", NumericalWarning)
        sc = SpectralClustering(4, random_state=0).fit(X)
    assert adjusted_rand_score(y, sc.labels_) == 1.0
    np.testing.assert_array_equal(sc.predict(X), sc.labels_)
    np.testing.assert_allclose(sc.eigenvalues_, 1.0)


def test_joining_edges_leave_a_graph_of_as_many_components_as_wanted():
    rng = np.random.default_rng(0)
    points = np.r_[
        rng.normal(size=(30, 2)), rng.normal(size=(5, 2)) + 40, rng.normal(size=(3, 2)) + 4000
    ]
    index = build_index(points)
    dist, ind = training_neighbors(index, points, 3)
    W, sigma = sparse._affinity(dist, ind, 2, one_sided_weight=1.0)
    assert sp.csgraph.connected_components(W)[0] == 3
    mass = np.ones(len(points))
    assert sparse.join_components(W, points, index, sigma, mass, 3) is W
    joined = sparse.join_components(W, points, index, sigma, mass, 2)
    count, labels = sp.csgraph.connected_components(joined)
    assert count == 2
    assert labels[0] == labels[30] != labels[35]  # single linkage: the nearest groups first
    added = (joined - W).tocoo()
    assert added.nnz == 2  # one edge, both ways, at the groups' closest points
    assert 0 < added.data[0] <= 1.0
    np.testing.assert_allclose((joined - joined.T).toarray(), 0.0)
    # a point with no edge but to itself is not a piece: it stays out, as without joining
    alone = np.r_[points[:35], [[9000.0, 0.0]]]
    index = build_index(alone)
    dist, ind = training_neighbors(index, alone, 3)
    W, sigma = sparse._affinity(dist, ind, 2, one_sided_weight=1.0)
    assert sp.csgraph.connected_components(W)[0] == 3
    assert sparse.join_components(W, alone, index, sigma, np.ones(36), 2) is W
    # with copies it keeps its self-loop and degree: a piece like the others
    copies = np.r_[np.ones(35), 3.0]
    count, labels = sp.csgraph.connected_components(
        sparse.join_components(W, alone, index, sigma, copies, 2)
    )
    assert count == 2 and labels[0] == labels[30] != labels[35]
