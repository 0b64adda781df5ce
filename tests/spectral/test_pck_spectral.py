"""PCKSpectralClustering: the ``pck-spectral`` job's pipeline as an estimator (issue 33, item 2).

The reference is the pipeline written out as the job step computed it before it called the
estimator (PCK fit → Γ held or lazy → solver → embedding → k-means, each seed derived from the
job seed), so the estimator must give the job's numbers bit for bit.
"""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
from sklearn.datasets import load_wine
from sklearn.metrics import adjusted_rand_score
from sklearn.preprocessing import StandardScaler

from dkernel import PCKSpectralClustering, ProbabilisticClusterKernel
from dkernel._random import derive_seed
from dkernel.errors import InvalidInputError
from dkernel.linalg.kmeans import euclidean_kmeans, normalize_rows
from dkernel.rows import take_rows
from dkernel.spectral.feature_map import choose_solver, feature_map_kpca, feature_map_normalized
from dkernel.spectral.pck import SPARSE_CUT, default_chunk_rows, model_entropy
from dkernel.spectral.pck_memory import GAMMA_MEMORY_LIMIT, gamma_placement, subsample_size
from dkernel.spectral.subsample import subsample_kpca, subsample_normalized, subsample_rows

SEED = 0


@pytest.fixture(scope="module")
def wine():
    data = load_wine()
    return StandardScaler().fit_transform(data.data), data.target


def small_pck(**kw):
    # diagonal: the identities tested here do not depend on the covariance, and wine's three
    # leading eigenvalues are distinct under it (full covariances make them nearly equal, so
    # the eigenvectors of two solvers may differ by a rotation)
    kw = {"covariance_type": "diag"} | kw
    return ProbabilisticClusterKernel(n_estimators=4, max_components=5, random_state=SEED, **kw)


def step_reference(X, n_clusters, *, embedding, solver, placement, chunk_rows=None, n_init=10):
    """What the job step computed, written out (pck-spectral ``run`` before issue 33)."""
    est = small_pck().fit(X)
    n = X.shape[0]
    k = n_clusters
    F = est.n_features_out_
    rows = chunk_rows or default_chunk_rows(n, F)
    if placement != "lazy":
        Xn = X.compute() if isinstance(X, da.Array) else np.asarray(X)
        Gamma = est.transform(Xn, sparse_threshold=SPARSE_CUT if placement == "sparse" else None)
    else:
        Xd = (
            X.rechunk({0: rows, 1: -1}) if isinstance(X, da.Array) else da.from_array(X, (rows, -1))
        )
        Gamma = est.transform(Xd)
    m = subsample_size(n, F, 4) if placement == "lazy" and solver == "auto" else None
    chosen, _ = choose_solver(Gamma.shape, k, is_dask=placement == "lazy", sample_rows=m)
    seed = derive_seed(SEED, "pck-spectral", "svd")
    if chosen == "subsample":
        rows_s = subsample_rows(n, m, derive_seed(SEED, "pck-spectral", "subsample"))
        sample = est.transform(take_rows(X, rows_s))
        route = subsample_kpca if embedding == "kpca" else subsample_normalized
        emb = route(Gamma, sample, k, random_state=seed)
    elif embedding == "kpca":
        emb = feature_map_kpca(Gamma, k, solver=solver, random_state=seed)
    else:
        emb = feature_map_normalized(Gamma, k, solver=solver, random_state=seed)
    Z = emb.embedding if embedding == "kpca" else normalize_rows(emb.embedding)
    labels, centers, inertia = euclidean_kmeans(
        Z, n_clusters, n_init=n_init, random_state=derive_seed(SEED, "kmeans")
    )
    entropy = model_entropy(Gamma, est.ensemble_.offsets, np.sqrt(est.normalizer_))
    return emb, labels, centers, inertia, entropy


@pytest.mark.parametrize(
    "embedding, solver, placement",
    [
        ("kpca", "auto", "dense"),
        ("normalized", "randomized", "dense"),
        ("kpca", "exact", "sparse"),
        ("normalized", "randomized", "sparse"),
        ("kpca", "auto", "lazy"),
        ("normalized", "auto", "lazy"),
        ("kpca", "randomized", "lazy"),
    ],
)
def test_reproduces_the_job_step(wine, embedding, solver, placement):
    X, _ = wine
    est = PCKSpectralClustering(
        3,
        pck=small_pck(),
        embedding=embedding,
        solver=solver,
        placement=placement,
        chunk_rows=64,
        random_state=SEED,
    ).fit(X)
    emb, labels, centers, inertia, entropy = step_reference(
        X, 3, embedding=embedding, solver=solver, placement=placement, chunk_rows=64
    )
    assert est.placement_ == placement and est.solver_ == emb.solver
    # the lazy placement recomputes float32 PCK rows chunk by chunk, on whatever BLAS threads
    # the scheduler gives each task (a suite run differs from a lone run by ~1e-9): close there,
    # identical where the rows are computed once
    same = (
        np.testing.assert_array_equal
        if placement != "lazy"
        else lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-8)
    )
    same(est.embedding_, emb.embedding)
    same(est.eigenvalues_, emb.eigenvalues)
    if embedding == "normalized":
        same(est.degrees_, emb.degrees)
    else:
        assert est.degrees_ is None
    np.testing.assert_array_equal(est.labels_, labels)
    same(est.cluster_centers_, centers)
    same(est.inertia_, inertia)
    same(est.model_entropy_, entropy)
    assert (est.subsample_rows_ is not None) == (emb.solver == "subsample")


def test_dask_input_gives_the_numpy_result(wine):
    X, y = wine
    a = PCKSpectralClustering(3, pck=small_pck(), random_state=SEED).fit(X)
    b = PCKSpectralClustering(3, pck=small_pck(), random_state=SEED).fit(
        da.from_array(X, chunks=(50, -1))
    )
    np.testing.assert_array_equal(a.labels_, b.labels_)
    np.testing.assert_array_equal(a.embedding_, b.embedding_)
    assert adjusted_rand_score(y, a.labels_) > 0.8
    lazy = PCKSpectralClustering(3, pck=small_pck(), placement="lazy", random_state=SEED)
    lazy.fit(da.from_array(X, chunks=(50, -1)))
    assert lazy.placement_ == "lazy" and lazy.chunk_rows_ == 256  # at least 256
    assert adjusted_rand_score(a.labels_, lazy.labels_) > 0.9
    # full covariances ('auto' on complete data with few columns): the same on Dask
    a = PCKSpectralClustering(3, pck=small_pck(covariance_type="full"), random_state=SEED)
    b = PCKSpectralClustering(3, pck=small_pck(covariance_type="full"), random_state=SEED)
    a.fit(X), b.fit(da.from_array(X, chunks=(50, -1)))
    np.testing.assert_array_equal(a.labels_, b.labels_)
    np.testing.assert_array_equal(a.embedding_, b.embedding_)


def test_missing_values_make_pckid(wine):
    X, _ = wine
    Xm = X.copy()
    Xm[np.random.default_rng(0).random(X.shape) < 0.1] = np.nan
    est = PCKSpectralClustering(3, pck=small_pck(), random_state=SEED).fit(Xm)
    assert est.variant_ == "PCKID" and est.n_missing_ == int(np.isnan(Xm).sum())
    assert PCKSpectralClustering(3, pck=small_pck(), random_state=SEED).fit(X).variant_ == "PCK"


def test_the_kernel_is_cloned_and_seeded(wine):
    X, _ = wine
    pck = ProbabilisticClusterKernel(n_estimators=2, max_components=3)
    est = PCKSpectralClustering(2, pck=pck, random_state=7).fit(X)
    assert not hasattr(pck, "ensemble_")
    assert est.pck_.random_state == 7 and est.pck_.n_estimators == 2
    assert est.model_entropy_.shape == (2 * 2,)


def test_model_entropy_against_a_loop(wine, monkeypatch):
    X, _ = wine
    pck = small_pck().fit(X)
    G = pck.transform(X)
    scale = np.sqrt(pck.normalizer_)
    offs = pck.ensemble_.offsets
    expected = []
    for a, b in zip(offs[:-1], offs[1:], strict=True):
        P = G[:, a:b].astype(np.float64) * scale
        expected.append(np.mean([-sum(p * np.log(p) for p in row if p > 0) for row in P]))
    np.testing.assert_allclose(model_entropy(G, offs, scale), expected, rtol=1e-12)
    lazy = model_entropy(da.from_array(G, chunks=(40, -1)), offs, scale)
    np.testing.assert_allclose(lazy, expected, rtol=1e-12)
    sparse = model_entropy(pck.transform(X, sparse_threshold=0.0), offs, scale)
    np.testing.assert_allclose(sparse, expected, rtol=1e-12)
    # a held Γ is read in row blocks of KERNEL_BLOCK_BYTES float64 rows: here 7 rows each
    import dkernel.spectral.pck as pck_module

    monkeypatch.setattr(pck_module, "KERNEL_BLOCK_BYTES", 7 * 8 * G.shape[1])
    np.testing.assert_allclose(model_entropy(G, offs, scale), expected, rtol=1e-12)


def test_gamma_placement_rule():
    F, models = 13_920, 30 * 29
    fits = GAMMA_MEMORY_LIMIT // (4 * F)
    assert gamma_placement(fits, F, models, 4) == "dense"
    assert gamma_placement(fits + 1, F, models, 4) == "sparse"
    assert gamma_placement(fits + 1, F, models, 4, allow_sparse=False) == "lazy"
    assert gamma_placement(fits + 1, F, models, 4, solver="exact") == "dense"
    assert gamma_placement(10**7, F, models, 4) == "lazy"
    assert subsample_size(10**7, F, 4) == 20_000
    assert subsample_size(10**7, 10**6, 8) == GAMMA_MEMORY_LIMIT // (8 * 10**6)
    assert default_chunk_rows(10**7, F) == 64 * 2**20 // (4 * F)


def test_sizes_are_checked(wine):
    X, _ = wine
    with pytest.raises(InvalidInputError, match="'n_clusters' parameter of PCKSpectralClustering"):
        PCKSpectralClustering(5, pck=small_pck()).fit(X[:4])
    with pytest.raises(InvalidInputError, match="'n_components'"):
        PCKSpectralClustering(2, n_components=5, pck=small_pck()).fit(X[:4])


def _blobs(n, k, seed):
    from sklearn.datasets import make_blobs

    return make_blobs(n, centers=k, cluster_std=0.5, center_box=(-12, 12), random_state=seed)


@pytest.mark.parametrize(("k", "seed"), [(3, 1), (5, 6)])
def test_auto_finds_the_number_of_separated_blobs(k, seed):
    X, y = _blobs(300, k, seed)  # centres >= 4 apart (8 σ)
    est = PCKSpectralClustering("auto", random_state=0).fit(X)  # the default PCK
    assert est.n_clusters_ == k and adjusted_rand_score(y, est.labels_) > 0.99
    order = est.model_order_
    assert order.rule == "eigengap" and order.higher_is_better
    # max_clusters=None: candidate_range's 2 .. clip(round(sqrt 300), 10, 50) = 2 .. 17
    np.testing.assert_array_equal(est.n_clusters_candidates_, np.arange(2, 18))
    np.testing.assert_array_equal(est.n_clusters_scores_, order.scores)
    assert est.embedding_.shape == (300, k) and est.cluster_centers_.shape == (k, k)


def _dense_normalized_spectrum(Phi):
    """The slow reference: every eigenvalue of the dense D^-1/2 Φ Φᵀ D^-1/2, descending."""
    K = Phi @ Phi.T
    d = K.sum(axis=1)
    return np.sort(np.linalg.eigvalsh(K / np.sqrt(np.outer(d, d))))[::-1]


@pytest.mark.parametrize("embedding", ["kpca", "normalized"])
def test_auto_spectrum_is_that_of_the_dense_normalized_gram(embedding):
    from dkernel.model_order import eigengap_scores

    X, _ = _blobs(100, 3, 1)
    pck = small_pck(dtype="float64")
    auto = PCKSpectralClustering(
        "auto", max_clusters=6, pck=pck, embedding=embedding, random_state=SEED
    ).fit(X)
    Phi = np.asarray(auto.pck_.transform(X), dtype=np.float64)
    reference = _dense_normalized_spectrum(Phi)[:7]
    # the small-matrix identity the estimator relies on: Φ̃ᵀΦ̃ (F × F), Φ̃ = D^-1/2 Φ
    Phi_n = Phi / np.sqrt(Phi @ Phi.sum(axis=0))[:, None]
    small = np.sort(np.linalg.eigvalsh(Phi_n.T @ Phi_n))[::-1][:7]
    np.testing.assert_allclose(small, reference, atol=1e-10)
    np.testing.assert_allclose(auto.model_order_.details["spectrum"], reference, atol=1e-8)
    cands = np.arange(2, 7)
    np.testing.assert_array_equal(auto.n_clusters_candidates_, cands)
    np.testing.assert_allclose(
        auto.n_clusters_scores_, eigengap_scores(reference, cands), atol=1e-8
    )
    k = int(cands[np.argmax(eigengap_scores(reference, cands))])
    assert auto.n_clusters_ == k == 3
    # the embedding and clustering at the chosen k are those of the integer n_clusters
    fixed = PCKSpectralClustering(3, pck=pck, embedding=embedding, random_state=SEED).fit(X)
    assert fixed.model_order_ is None and fixed.n_clusters_candidates_ is None
    assert fixed.n_clusters_scores_ is None and fixed.n_clusters_ == 3
    np.testing.assert_allclose(auto.eigenvalues_, fixed.eigenvalues_, atol=1e-8)
    np.testing.assert_allclose(np.abs(auto.embedding_), np.abs(fixed.embedding_), atol=1e-6)
    assert adjusted_rand_score(fixed.labels_, auto.labels_) == 1.0


def test_auto_drops_candidates_beyond_the_kernel_rank():
    # F = 2 + 3 = 5 features: K has rank <= 5, so k <= 4 is compared (5 eigenvalues)
    X, _ = _blobs(100, 3, 1)
    pck = ProbabilisticClusterKernel(n_estimators=1, max_components=3, random_state=SEED)
    est = PCKSpectralClustering("auto", pck=pck, random_state=SEED).fit(X)
    assert est.pck_.n_features_out_ == 5
    np.testing.assert_array_equal(est.n_clusters_candidates_, [2, 3, 4])


@pytest.mark.parametrize(
    ("params", "n", "match"),
    [
        ({"max_clusters": 1}, 50, "'max_clusters' parameter of PCKSpectralClustering"),
        ({"max_clusters": 2.5}, 50, "'max_clusters' parameter of PCKSpectralClustering"),
        ({"n_clusters": "many"}, 50, "'n_clusters' parameter of PCKSpectralClustering"),
        ({}, 2, "pass an integer n_clusters"),
        ({"n_components": 60}, 50, "'n_components' parameter"),
    ],
)
def test_bad_auto_parameters(params, n, match):
    X, _ = _blobs(n, 2, 2)
    with pytest.raises(InvalidInputError, match=match):
        PCKSpectralClustering(**({"n_clusters": "auto", "pck": small_pck()} | params)).fit(X)


@pytest.mark.parametrize(
    "embedding, placement, solver",
    [
        ("normalized", "dense", "exact"),
        ("normalized", "lazy", "randomized"),
        ("kpca", "sparse", "exact"),
        ("kpca", "lazy", "randomized"),
    ],
)
def test_transform_extends_the_embedding_to_the_training_rows(wine, embedding, placement, solver):
    """The Nyström extension of a training row is its row of embedding_, and predict gives
    labels_ (NumPy and Dask input alike)."""
    X, _ = wine
    est = PCKSpectralClustering(
        3,
        pck=small_pck(),
        embedding=embedding,
        placement=placement,
        solver=solver,
        random_state=SEED,
    ).fit(X)
    np.testing.assert_allclose(est.transform(X), est.embedding_, atol=1e-5)
    np.testing.assert_array_equal(est.predict(X), est.labels_)
    lazy = est.predict(da.from_array(X, chunks=(40, -1)))
    assert isinstance(lazy, da.Array)
    np.testing.assert_array_equal(lazy.compute(), est.labels_)


def test_extension_against_the_dense_kernel(wine):
    """u(x) = κ(x, X) D^{-1/2} U / (sqrt(d(x)) λ), with κ the PCK kernel of Γ, for new rows."""
    X, _ = wine
    est = PCKSpectralClustering(3, pck=small_pck(), solver="exact", random_state=SEED).fit(X[:150])
    G = np.asarray(est.pck_.transform(X[:150]), dtype=np.float64)
    g = np.asarray(est.pck_.transform(X[150:]), dtype=np.float64)
    d, dx = (G @ G.T).sum(axis=1), (g @ G.T).sum(axis=1)
    U, lam = est.embedding_, est.eigenvalues_
    expected = (g @ G.T) @ (U / np.sqrt(d)[:, None]) / (np.sqrt(dx)[:, None] * lam[None, :])
    np.testing.assert_allclose(est.transform(X[150:]), expected, rtol=1e-6, atol=1e-9)


def test_new_rows_with_missing_values_are_predicted(wine):
    X, y = wine
    rng = np.random.default_rng(0)
    Xm = np.where(rng.random(X.shape) < 0.1, np.nan, X)
    train, test = np.arange(0, 178, 2), np.arange(1, 178, 2)
    est = PCKSpectralClustering(3, pck=small_pck(), random_state=SEED).fit(Xm[train])
    np.testing.assert_array_equal(est.predict(Xm[train]), est.labels_)
    assert adjusted_rand_score(y[test], est.predict(Xm[test])) > 0.7
    with pytest.raises(InvalidInputError, match="features"):
        est.predict(Xm[:, :5])


def test_lazy_rows_in_memory_go_to_the_workers_once(client, wine):
    # a lazy Γ is recomputed every pass: from NumPy rows in its graph, each pass sent them to
    # the cluster again (distributed warned of every graph above its threshold)
    import warnings

    import dask

    from dkernel.runtime.persist import LARGE_GRAPH_SETTING
    from dkernel.runtime.shared import SHARED_PREFIX

    X, _ = wine
    X = np.tile(X, (8, 1))  # 1 424 rows, 148 kB
    with dask.config.set({LARGE_GRAPH_SETTING: "100kB"}), warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        lazy = PCKSpectralClustering(3, pck=small_pck(), placement="lazy", random_state=SEED)
        lazy.fit(X)
    assert not [m for m in w if "large graph" in str(m.message)]
    on_dask = PCKSpectralClustering(3, pck=small_pck(), placement="lazy", random_state=SEED)
    on_dask.fit(da.from_array(X, chunks=(lazy.chunk_rows_, -1)))
    np.testing.assert_array_equal(lazy.labels_, on_dask.labels_)
    np.testing.assert_array_equal(lazy.embedding_, on_dask.embedding_)
    plugins = client.run_on_scheduler(lambda dask_scheduler: list(dask_scheduler.worker_plugins))
    assert not [p for p in plugins if p.startswith(SHARED_PREFIX + "rows-")]  # released
