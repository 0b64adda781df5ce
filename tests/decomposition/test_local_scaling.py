"""The default self-tuning k-NN kernel of KernelDecompositionClustering: against brute force,
out of sample, determinism, bad parameters and the five synthetic shapes of issue 15."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
from sklearn import datasets
from sklearn.metrics import adjusted_rand_score
from sklearn.preprocessing import StandardScaler
from threadpoolctl import threadpool_limits

from dkernel.decomposition import KernelDecompositionClustering
from dkernel.errors import InvalidInputError


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    # k-means on a few hundred points: OpenMP threads only wait for each other on a busy
    # machine (5x slower on 2 shared cores), and the results do not depend on them
    with threadpool_limits(1):
        yield


def _kth_other(d_row: np.ndarray, k: int) -> float:
    """Distance to the k-th nearest point that does not coincide with the query (brute)."""
    return float(np.sort(d_row[d_row > 1e-12])[k - 1])


def _brute_scales(X, Z, k_scale):
    D_tr = np.sqrt(((X[:, None, :] - X[None, :, :]) ** 2).sum(-1))
    D_q = np.sqrt(((Z[:, None, :] - X[None, :, :]) ** 2).sum(-1))
    s_tr = np.array([_kth_other(r, k_scale) for r in D_tr])
    s_q = np.array([_kth_other(r, k_scale) for r in D_q])
    return D_tr, D_q, s_tr, s_q


def _brute_rows(D, s_rows, s_tr, k):
    """Row-normalised self-tuning kernel kept on each row's k nearest (k=None: all)."""
    K = np.zeros_like(D)
    for i in range(D.shape[0]):
        keep = np.argsort(D[i], kind="stable")[: k or D.shape[1]]
        K[i, keep] = [np.exp(-(D[i, j] ** 2) / (s_rows[i] * s_tr[j])) for j in keep]
    return K


@pytest.fixture(scope="module")
def small():
    rng = np.random.default_rng(7)
    X = np.vstack([rng.normal(0, 0.3, (25, 2)), rng.normal((2, 1), 0.5, (25, 2))])
    Z = rng.normal((1, 0.5), 1.0, (12, 2))
    return X, Z


@pytest.mark.parametrize("n_neighbors", [6, 10, None])
def test_kernel_posteriors_and_scores_match_brute_force(small, n_neighbors):
    X, Z = small
    model = KernelDecompositionClustering(
        2, n_neighbors=n_neighbors, scale_neighbors=4, random_state=0
    ).fit(X)
    D_tr, D_q, s_tr, s_q = _brute_scales(X, Z, 4)
    np.testing.assert_allclose(model.sigma_, s_tr, rtol=1e-10)
    K_tr = _brute_rows(D_tr, s_tr, s_tr, n_neighbors)
    Kc_tr = K_tr / K_tr.sum(1, keepdims=True)
    np.testing.assert_allclose(model.posteriors_, Kc_tr @ model.H_.T, rtol=1e-10, atol=1e-14)
    K_q = _brute_rows(D_q, s_q, s_tr, n_neighbors)
    Kc_q = K_q / K_q.sum(1, keepdims=True)
    np.testing.assert_allclose(model.predict_proba(Z), Kc_q @ model.H_.T, rtol=1e-10, atol=1e-14)
    m = model.W_ @ model.H_.mean(1)  # Eq. 14: p(z) = sum_l K(z, x_l) m_l
    np.testing.assert_allclose(model.score_samples(Z), np.log(K_q @ m), rtol=1e-10)


def test_duplicated_points_take_their_twins_scale(small):
    X, _ = small
    Xd = np.vstack([X, X[:3], X[:3]])  # three points present three times
    model = KernelDecompositionClustering(2, n_neighbors=8, scale_neighbors=3, random_state=0)
    model.fit(Xd)
    assert np.all(np.isfinite(model.sigma_)) and np.all(model.sigma_ > 0)
    np.testing.assert_allclose(model.sigma_[50:53], model.sigma_[:3])
    np.testing.assert_array_equal(model.predict(Xd), model.labels_)


def test_repeated_rows_list_distinct_neighbours_weighted_by_their_copies(small):
    """Brute force of the graph on distinct rows: every row's k nearest *distinct* rows, each
    once, with its kernel value times its copies, at the column of its first copy."""
    X, Z = small
    # rows 0-29 six times, 30-49 once: 90 % of the rows have k copies (COPY_CLIQUE_SHARE)
    Xd = np.vstack([X] + [X[:30]] * 5)
    k, k_scale = 6, 3
    model = KernelDecompositionClustering(
        2, n_neighbors=k, scale_neighbors=k_scale, random_state=0
    ).fit(Xd)
    first = np.arange(50)  # the distinct rows are X, in order
    counts = np.r_[np.full(30, 6.0), np.ones(20)]
    inverse = np.r_[np.arange(50), np.tile(np.arange(30), 5)]
    D_u, D_q, s_u, s_q = _brute_scales(X, Z, k_scale)
    np.testing.assert_allclose(model.sigma_, s_u[inverse], rtol=1e-10)
    K_u = _brute_rows(D_u, s_u, s_u, k) * counts[None, :]
    Kc = (K_u / K_u.sum(1, keepdims=True))[inverse]  # (n, distinct) at the first copies
    H_first = model.H_[:, first]
    np.testing.assert_allclose(model.posteriors_, Kc @ H_first.T, rtol=1e-10, atol=1e-14)
    # copies share their posteriors; only first copies carry probability mass
    np.testing.assert_allclose(model.H_[:, 50:80], model.H_[:, :30], rtol=1e-8, atol=1e-12)
    assert np.abs(model.W_[50:]).max() < 1e-12
    np.testing.assert_array_equal(model.predict(Xd), model.labels_)
    np.testing.assert_allclose(model.predict_proba(Xd), model.posteriors_, atol=1e-12)
    K_q = _brute_rows(D_q, s_q, s_u, k)
    Kc_q = K_q * counts[None, :] / (K_q * counts[None, :]).sum(1, keepdims=True)
    np.testing.assert_allclose(model.predict_proba(Z), Kc_q @ H_first.T, rtol=1e-10, atol=1e-14)
    m = (model.W_ @ model.H_.mean(1))[first]  # Eq. 14 over all rows; copies' mass is first's
    np.testing.assert_allclose(model.score_samples(Z), np.log(K_q @ m), rtol=1e-10)


def test_integer_valued_data_are_clustered():
    """Rows repeated more often than the graph has neighbours were cliques of their own copies
    (ARI 0.04 where k-means scores 0.83)."""
    rng = np.random.default_rng(0)
    centres = rng.uniform(1.5, 4.5, size=(3, 4))
    y = rng.integers(0, 3, 3000)
    X = np.clip(np.rint(centres[y] + rng.normal(0, 0.7, (3000, 4))), 1, 5)
    model = KernelDecompositionClustering(3, random_state=0).fit(X)
    assert model.approximation_ == "exact"
    assert adjusted_rand_score(y, model.labels_) > 0.7
    np.testing.assert_array_equal(model.predict(X), model.labels_)


@pytest.fixture(scope="module")
def moons():
    X, y = datasets.make_moons(600, noise=0.07, random_state=0)
    return StandardScaler().fit_transform(X), y


def test_out_of_sample_consistency_and_dask(moons):
    X, y = moons
    model = KernelDecompositionClustering(2, random_state=0).fit(X)
    assert adjusted_rand_score(y, model.labels_) == 1.0
    np.testing.assert_array_equal(model.predict(X), model.labels_)
    np.testing.assert_allclose(model.predict_proba(X), model.posteriors_, atol=1e-12)
    Z = X[::7] + 0.05
    P = model.predict_proba(Z)
    np.testing.assert_allclose(P.sum(1), 1.0, atol=1e-12)
    assert (P >= 0).all()
    s = model.score_samples(Z)
    assert s.shape == (Z.shape[0],) and np.isfinite(s).all()
    Xd = da.from_array(X, chunks=(150, 2))
    dmodel = KernelDecompositionClustering(2, random_state=0).fit(Xd)
    np.testing.assert_array_equal(dmodel.labels_, model.labels_)
    np.testing.assert_allclose(dmodel.sigma_, model.sigma_, rtol=1e-12)
    Zd = da.from_array(Z, chunks=(30, 2))
    np.testing.assert_allclose(dmodel.predict_proba(Zd).compute(), P, rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(dmodel.score_samples(Zd).compute(), s, rtol=1e-10)


def test_same_seed_same_labels(moons):
    X, _ = moons
    a = KernelDecompositionClustering(3, random_state=5).fit(X)
    b = KernelDecompositionClustering(3, random_state=5).fit(X)
    np.testing.assert_array_equal(a.labels_, b.labels_)
    np.testing.assert_array_equal(a.H_, b.H_)


def test_bad_parameters_raise_clear_errors(small):
    X, _ = small
    n = X.shape[0]
    bad = [
        ({"n_neighbors": n}, "n_neighbors"),
        ({"n_neighbors": n + 5}, "n_neighbors"),
        ({"n_neighbors": 0}, "n_neighbors"),
        ({"scale_neighbors": n}, "scale_neighbors"),
        ({"scale_neighbors": 0}, "scale_neighbors"),
        ({"scale_neighbors": 2.5}, "scale_neighbors"),
        ({"sigma": 0.1}, "sigma"),
        ({"kernel": "rbf", "sigma": np.inf}, "sigma"),
        ({"kernel": "rbf", "sigma": np.nan}, "sigma"),
        ({"kernel": "rbf", "sigma": 0.0}, "sigma"),
    ]
    for params, match in bad:
        with pytest.raises(InvalidInputError, match=match):
            KernelDecompositionClustering(2, **params).fit(X)
    with pytest.raises(InvalidInputError, match="infinite values"):
        KernelDecompositionClustering(2).fit(np.where(X > 1.5, np.inf, X))
    with pytest.raises(
        InvalidInputError, match="all rows are identical: there is nothing to cluster"
    ):
        KernelDecompositionClustering(2).fit(np.ones((20, 2)))


def _rings(n, seed=0):
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(3), n // 3 + 1)[:n]
    r = 1.0 + y + rng.normal(0, 0.1, n)
    t = rng.uniform(0, 2 * np.pi, n)
    return np.c_[r * np.cos(t), r * np.sin(t)], y


SHAPES = {
    "moons": lambda n: datasets.make_moons(n, noise=0.07, random_state=0),
    "circles": lambda n: datasets.make_circles(n, factor=0.5, noise=0.05, random_state=0),
    "rings3": _rings,
    "varied": lambda n: datasets.make_blobs(n, cluster_std=[0.3, 1.5, 0.8], random_state=170),
    "aniso": lambda n: (lambda X, y: (X @ np.array([[0.6, -0.6], [-0.4, 0.8]]), y))(
        *datasets.make_blobs(n, random_state=170)
    ),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_five_shapes_at_defaults(name):
    X, y = SHAPES[name](1000)
    X = StandardScaler().fit_transform(X)
    k = int(np.unique(y).size)
    model = KernelDecompositionClustering(k, random_state=0).fit(X)
    assert adjusted_rand_score(y, model.labels_) >= 0.95
    assert np.mean(model.predict(X) == model.labels_) >= 0.99


def test_binary_rows_keep_their_tied_neighbours_in_fit_and_predict():
    """Three groups of 12 binary features: a row has 12 others at Hamming distance 1, and a
    7-NN list kept 7 of them by index order (ARI 0.252, k-means 0.654); with the ties kept
    0.621, and predict on the training rows gives the labels."""
    from sklearn.cluster import KMeans

    rng = np.random.default_rng(0)  # benchmarks/bench_repeated_rows.py's binary_groups
    y = rng.integers(0, 3, 3000)
    X = (rng.uniform(size=(3000, 12)) < rng.uniform(0.1, 0.9, size=(3, 12))[y]) * 1.0
    model = KernelDecompositionClustering(3, random_state=0).fit(X)
    kmeans = adjusted_rand_score(y, KMeans(3, random_state=0).fit(X).labels_)
    assert adjusted_rand_score(y, model.labels_) > 0.8 * kmeans
    np.testing.assert_array_equal(model.predict(X), model.labels_)


def test_few_distinct_rows_above_the_exact_limit_fit_the_exact_kernel_on_them(small):
    """Above 5 000 rows 'auto' takes the landmark path, but rows with few distinct values
    (integer-valued tables) are fitted exactly on their distinct rows, each standing for its
    copies: brute force of that kernel, out of sample, and the same fit from Dask input."""
    X, Z = small
    rng = np.random.default_rng(1)
    counts = rng.integers(60, 200, 50)
    source = rng.permutation(np.repeat(np.arange(50), counts))
    Xd = X[source]  # > 5 000 rows, 50 distinct, shuffled
    _, at = np.unique(source, return_index=True)
    ids = source[np.sort(at)]  # distinct rows in order of first appearance
    P, c = X[ids], counts[ids].astype(np.float64)
    inverse = np.argsort(ids)[source]
    model = KernelDecompositionClustering(2, n_neighbors=6, scale_neighbors=3, random_state=0)
    model.fit(Xd)
    assert model.approximation_ == "exact" and model.W_.shape == (50, 2)
    np.testing.assert_array_equal(model.X_fit_, P)
    D_u, D_q, s_u, s_q = _brute_scales(P, Z, 3)
    np.testing.assert_allclose(model.sigma_, s_u, rtol=1e-10)  # one per distinct row
    K_u = _brute_rows(D_u, s_u, s_u, 6) * c[None, :]
    Kc = K_u / K_u.sum(1, keepdims=True)
    np.testing.assert_allclose(
        model.posteriors_, (Kc @ model.H_.T)[inverse], rtol=1e-10, atol=1e-14
    )
    np.testing.assert_allclose(model.priors_, model.H_ @ c / c.sum())
    np.testing.assert_array_equal(model.predict(Xd), model.labels_)
    np.testing.assert_allclose(model.predict_proba(Xd), model.posteriors_, atol=1e-12)
    K_q = _brute_rows(D_q, s_q, s_u, 6)
    Kc_q = K_q * c[None, :] / (K_q * c[None, :]).sum(1, keepdims=True)
    np.testing.assert_allclose(model.predict_proba(Z), Kc_q @ model.H_.T, rtol=1e-10, atol=1e-14)
    m = model.W_ @ model.priors_  # Eq. 14 over all rows
    np.testing.assert_allclose(model.score_samples(Z), np.log(K_q @ m), rtol=1e-10)
    lazy = KernelDecompositionClustering(2, n_neighbors=6, scale_neighbors=3, random_state=0)
    lazy.fit(da.from_array(Xd, chunks=(1500, 2)))
    np.testing.assert_array_equal(lazy.labels_, model.labels_)
    np.testing.assert_allclose(lazy.posteriors_, model.posteriors_, rtol=1e-12)
    # 'auto' chooses k on the graph of all rows (copies of a point joined to its neighbours')
    from dkernel.model_order import knn_graph_spectrum

    np.testing.assert_allclose(
        knn_graph_spectrum(P, 6, copies=c), knn_graph_spectrum(Xd, 6), rtol=1e-9, atol=1e-12
    )
    auto = KernelDecompositionClustering("auto", n_neighbors=6, scale_neighbors=3).fit(Xd)
    assert auto.approximation_ == "exact" and auto.n_clusters_ == 2
    # above the limit of distinct rows, or asked for, the landmark path runs
    bipartite = KernelDecompositionClustering(2, approximation="bipartite", n_landmarks=40)
    assert bipartite.fit(Xd).approximation_ == "bipartite"
