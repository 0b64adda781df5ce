"""The landmark bipartite graph path of SpectralClustering against dense references."""

import warnings

import dask.array as da
import numpy as np
import pytest
from distributed import Client, LocalCluster
from sklearn.datasets import make_blobs, make_moons
from sklearn.metrics import adjusted_rand_score

from dkernel import SpectralClustering
from dkernel.errors import InvalidInputError, NumericalWarning
from dkernel.graphs.bipartite import accumulate_landmark_sums, landmark_sums
from dkernel.graphs.landmark import fit_landmark_graph
from dkernel.spectral.bipartite import fit_bipartite_embedding, transfer_cut
from dkernel.spectral.clustering import EXACT_MAX_SAMPLES
from dkernel.spectral.sparse import GREEN_ALPHA


def _dense_B(graph, X):
    idx, w = graph.links(X)
    B = np.zeros((X.shape[0], graph.n_landmarks))
    np.put_along_axis(B, idx, w, axis=1)
    return B


@pytest.fixture(scope="module")
def small():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(700, 2))
    return X, fit_landmark_graph(X, 60, 5, seed=0)


def test_landmark_sums_are_bt_dinv_b(small):
    X, graph = small
    B = _dense_B(graph, X)
    W, d = landmark_sums(graph, X)
    np.testing.assert_allclose(W, B.T @ (B / B.sum(axis=1, keepdims=True)), atol=1e-12)
    np.testing.assert_allclose(d, B.sum(axis=0), atol=1e-12)
    Wd, dd = accumulate_landmark_sums(graph, da.from_array(X, chunks=(128, 2)))
    np.testing.assert_allclose(Wd, W, atol=1e-12)
    np.testing.assert_allclose(dd, d, atol=1e-12)


def test_transfer_cut_is_the_spectral_embedding_of_the_whole_bipartite_graph(small):
    X, graph = small
    B = _dense_B(graph, X)
    n, p = B.shape
    # the slow, obvious reference: eigenvectors of the (n + p) normalized adjacency
    A = np.block([[np.zeros((n, n)), B], [B.T, np.zeros((p, p))]])
    inv = 1 / np.sqrt(A.sum(axis=1))
    values, vectors = np.linalg.eigh(inv[:, None] * A * inv[None, :])
    top = np.argsort(-values)[:3]
    f_ref = (inv[:, None] * vectors[:, top])[:n]  # random-walk vectors on the point side
    mu, V, _ = transfer_cut(*landmark_sums(graph, X), 3)
    np.testing.assert_allclose(np.sqrt(mu), values[top], rtol=1e-8)
    f = (B / B.sum(axis=1, keepdims=True)) @ V / np.sqrt(mu)
    for j in range(3):  # the same vectors up to sign and scale
        cos = abs(f[:, j] @ f_ref[:, j]) / np.linalg.norm(f[:, j]) / np.linalg.norm(f_ref[:, j])
        assert cos > 1 - 1e-8
    Z, model = fit_bipartite_embedding(X, 3, n_landmarks=60, n_neighbors=5, seed=0)
    mu, V, _ = transfer_cut(*landmark_sums(model.graph, X), 3)
    s = np.sqrt(mu)
    beta = GREEN_ALPHA / (1 - GREEN_ALPHA)
    np.testing.assert_allclose(model.coefficients, V / s / np.sqrt(1 + beta - s), rtol=1e-9)
    idx, w = model.graph.links(X)
    share = w / w.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(Z, np.einsum("nk,nkc->nc", share, model.coefficients[idx]))


@pytest.fixture(scope="module")
def moons():
    X, y = make_moons(22_000, noise=0.07, random_state=1)
    return (X - X.mean(axis=0)) / X.std(axis=0), y


def test_default_above_the_exact_size_is_bipartite_and_predict_reproduces_labels(moons):
    X, y = moons[0][:20_000], moons[1][:20_000]
    new, y_new = moons[0][20_000:], moons[1][20_000:]
    sc = SpectralClustering(2, random_state=0).fit(X)
    assert X.shape[0] > EXACT_MAX_SAMPLES and sc.approximation_ == "bipartite"
    assert sc.nystrom_ is None and sc.landmark_indices_ is None
    assert adjusted_rand_score(y, sc.labels_) > 0.99
    np.testing.assert_array_equal(sc.predict(X), sc.labels_)
    assert adjusted_rand_score(y_new, sc.predict(new)) > 0.99
    small = SpectralClustering(2, random_state=0).fit(X[:2000])
    assert small.approximation_ == "exact"


def test_same_embedding_bit_for_bit_on_one_or_two_workers(moons):
    X, _ = moons
    Xd = da.from_array(X[:8000], chunks=(1000, 2))
    results = []
    for n_workers in (1, 2):
        with (
            LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=False) as cluster,
            Client(cluster),
        ):
            sc = SpectralClustering(2, approximation="bipartite", random_state=3).fit(Xd)
            results.append((np.asarray(sc.embedding_), sc.labels_))
    np.testing.assert_array_equal(results[0][0], results[1][0])
    np.testing.assert_array_equal(results[0][1], results[1][1])
    # NumPy input sums in other blocks: the same graph to rounding, but two separate moons
    # make eigenvalue 1 double, whose basis rounding may turn; the clustering is the same
    local = SpectralClustering(2, approximation="bipartite", random_state=3).fit(X[:8000])
    assert adjusted_rand_score(local.labels_, results[0][1]) == 1.0


def test_a_graph_in_more_pieces_than_clusters_warns():
    X, _ = make_blobs(6000, centers=[[-50, 0], [0, 0], [50, 0]], random_state=0)
    with pytest.warns(NumericalWarning, match="3 disconnected pieces"):
        SpectralClustering(2, approximation="bipartite", random_state=0).fit(X)


def test_exact_path_joins_more_components_than_clusters_by_distance():
    # three separate blobs and two clusters: the eigenvalue 1 is triple, and which blobs
    # shared a cluster was arbitrary (a warning said so); the two nearer blobs share one now
    X, y = make_blobs(3000, centers=[[-50, 0], [0, 0], [60, 0]], random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", NumericalWarning)
        sc = SpectralClustering(2, approximation="exact", random_state=0).fit(X)
    assert adjusted_rand_score(y == 2, sc.labels_) == 1.0


@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"landmark_neighbors": 50, "n_landmarks": 50}, "landmark_neighbors .50. must be <"),
        ({"n_landmarks": 900}, "n_landmarks .900. must be <= the number of samples .800."),
        ({"kernel": "rbf"}, "takes no kernel"),
        ({"embedding": "normalized"}, "gives the 'green' embedding"),
    ],
)
def test_bad_parameters_are_refused_with_the_fix(params, match):
    X, _ = make_moons(800, noise=0.05, random_state=0)
    with pytest.raises(InvalidInputError, match=match):
        SpectralClustering(2, approximation="bipartite", **params).fit(X)


def rounded_blobs(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Three 4-D blobs rounded to integers 1..5 (answers on a five-point scale): a few
    hundred distinct rows, each repeated tens of times."""
    rng = np.random.default_rng(seed)
    centres = rng.uniform(1.5, 4.5, size=(3, 4))
    y = rng.integers(0, 3, n)
    return np.clip(np.rint(centres[y] + rng.normal(0, 0.7, (n, 4))), 1, 5), y


@pytest.mark.parametrize(
    ("estimator", "params"),
    [
        ("SpectralClustering", {"approximation": "bipartite"}),
        ("KernelDecompositionClustering", {"approximation": "bipartite"}),
    ],
)
def test_integer_valued_data_above_the_exact_size_are_clustered(estimator, params):
    """Landmarks on repeated rows were copies of one another, so each point linked to its own
    value alone (ARI 0.002 for SpectralClustering, 0.33 for KDC, against 0.84 for k-means).
    (Both estimators' 'auto' takes the exact path on such data's distinct rows.)"""
    import dkernel

    X, y = rounded_blobs(EXACT_MAX_SAMPLES + 1000)
    model = getattr(dkernel, estimator)(3, random_state=0, **params).fit(X)
    assert model.approximation_ == "bipartite"
    assert adjusted_rand_score(y, model.labels_) > 0.6


def test_few_distinct_rows_above_the_exact_size_take_the_exact_path_on_them():
    """Rounded blobs at 2·10⁴ points: 0.727 on the bipartite path, 0.840 on the exact graph
    of their 412 distinct rows (k-means 0.842); Dask input in any chunking gives the same labels, and every
    row's embedding is its distinct row's."""
    X, y = rounded_blobs(4 * EXACT_MAX_SAMPLES)
    model = SpectralClustering(3, random_state=0).fit(X)
    assert model.approximation_ == "exact"
    first = model.landmark_indices_
    assert np.array_equal(first, np.sort(np.unique(X, axis=0, return_index=True)[1]))
    assert first.size < EXACT_MAX_SAMPLES
    assert adjusted_rand_score(y, model.labels_) > 0.8
    _, idx, inverse = np.unique(X, axis=0, return_index=True, return_inverse=True)
    Z = np.asarray(model.embedding_)
    np.testing.assert_array_equal(Z, Z[idx[inverse.ravel()]])
    for rows in (3000, 7001):
        lazy = SpectralClustering(3, random_state=0).fit(da.from_array(X, chunks=(rows, 4)))
        assert lazy.approximation_ == "exact"
        np.testing.assert_array_equal(lazy.labels_, model.labels_)
    # more distinct rows than the exact path takes: the landmarks
    wide = np.rint(np.random.default_rng(0).normal(0, 30, (4 * EXACT_MAX_SAMPLES, 2)))
    assert np.unique(wide, axis=0).shape[0] > EXACT_MAX_SAMPLES
    assert SpectralClustering(3, random_state=0).fit(wide).approximation_ == "bipartite"


@pytest.mark.parametrize("n_far", [5, 60])
def test_far_outliers_do_not_take_clusters_above_the_exact_size(n_far):
    """Five far points among 2·10⁴ held landmarks of their own, a weakly attached piece of the
    graph that took two of three clusters (ARI 0.000); 1 % uniform noise, landmarks of two or
    three noise points each (0.571)."""
    X, y = make_blobs(EXACT_MAX_SAMPLES + 1000, n_features=5, centers=3, random_state=0)
    far = np.random.default_rng(0).uniform(-200, 200, (n_far, 5))
    model = SpectralClustering(3, random_state=0).fit(np.vstack([X, far]))
    assert model.approximation_ == "bipartite"
    assert adjusted_rand_score(y, model.labels_[: len(X)]) == 1.0
