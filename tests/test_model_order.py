"""``dkernel.model_order``: every rule against a slow, obvious reference on small data."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from sklearn.datasets import make_blobs
from sklearn.metrics import adjusted_rand_score

from dkernel.errors import InvalidInputError
from dkernel.model_order import (
    ModelOrder,
    best_rotation,
    candidate_range,
    choose,
    eigengap_scores,
    information_criterion_model_order,
    knn_graph_spectrum,
    rotation_scores,
    spectrum_model_order,
    stability_model_order,
    subsample_indices,
    timescale_gap_scores,
)


def _spectra(seed: int = 0, count: int = 40):
    rng = np.random.default_rng(seed)
    for _ in range(count):
        size = int(rng.integers(4, 30))
        lam = np.sort(rng.uniform(-0.2, 1.0, size))[::-1]
        lam[: int(rng.integers(1, 4))] = 1.0  # exactly disconnected pieces
        yield lam


def test_candidate_range_derives_the_top_from_the_data():
    assert candidate_range(50).tolist() == list(range(2, 11))  # at least 10
    assert candidate_range(2000)[-1] == 45  # round(sqrt(2000))
    assert candidate_range(10**6)[-1] == 50  # at most 50
    assert candidate_range(6).tolist() == [2, 3, 4, 5]  # never more than n - 1
    assert candidate_range(500, 4).tolist() == [2, 3, 4]


@pytest.mark.parametrize("bad", [1, 0, -3, 2.5, "ten", True])
def test_bad_candidate_ranges_give_clear_errors(bad):
    with pytest.raises(InvalidInputError, match="max_clusters"):
        candidate_range(100, bad)
    with pytest.raises(InvalidInputError, match="at least 3 samples"):
        candidate_range(2)


def test_eigengap_scores_match_a_plain_loop():
    for lam in _spectra():
        c = np.arange(2, lam.size)
        expected = [lam[k - 1] - lam[k] for k in c]
        np.testing.assert_allclose(eigengap_scores(lam, c), expected)


@pytest.mark.parametrize("rng_scale", [1.0, 0.55])
def test_timescale_gap_matches_a_plain_loop(rng_scale):
    for lam in _spectra(1):
        c = np.arange(2, lam.size)
        lam = lam * rng_scale  # a regularized graph: λ₁ < 1
        top = int(c[-1])
        eps = 0.003 * max(0.0, 1 - lam[top] / lam[0])
        expected = []
        for k in c:
            slow = max(0.0, 1 - lam[k] / lam[0]) + eps  # 1 - λ_(k+1) / λ_1
            fast = max(0.0, 1 - lam[k - 1] / lam[0]) + eps  # 1 - λ_k / λ_1
            expected.append(np.log(slow / fast) if eps > 0 else 0.0)
        np.testing.assert_allclose(timescale_gap_scores(lam, c), expected, rtol=1e-12)


def test_timescale_gap_finds_the_separated_groups_where_the_eigengap_does_not():
    # two groups the walk leaves at 1e-8, then a slowly decaying spectrum (long thin shapes)
    lam = np.r_[1.0, 1 - 1e-8, 1 - np.geomspace(1e-4, 5e-3, 12)]
    c = np.arange(2, 12)
    assert spectrum_model_order(lam, c).n_clusters == 2
    assert spectrum_model_order(lam, c, "eigengap").n_clusters == 11


def test_spectrum_rules_refuse_short_or_broken_spectra():
    with pytest.raises(InvalidInputError, match="needs 6 of them"):
        timescale_gap_scores(np.linspace(1, 0, 4), np.arange(2, 6))
    with pytest.raises(InvalidInputError, match="positive leading eigenvalue"):
        timescale_gap_scores(np.linspace(0, -1, 6), np.arange(2, 5))
    with pytest.raises(InvalidInputError, match="NaN"):
        eigengap_scores(np.array([1.0, np.nan, 0.2, 0.1]), np.arange(2, 4))
    with pytest.raises(InvalidInputError, match="not computed from a spectrum"):
        spectrum_model_order(np.linspace(1, 0, 5), np.arange(2, 4), "stability")
    with pytest.raises(InvalidInputError, match="unknown model-order rule"):
        ModelOrder(2, np.arange(2, 4), np.zeros(2), "guess")


def test_choose_takes_the_best_finite_score_and_the_smallest_k_on_a_tie():
    c = np.arange(2, 7)
    assert choose(np.array([0.1, 0.5, np.nan, 0.5, 0.2]), c) == 3
    assert choose(np.array([3.0, 1.0, 2.0, np.inf, 5.0]), c, higher_is_better=False) == 3
    with pytest.raises(InvalidInputError, match="finite score"):
        choose(np.full(5, np.nan), c)


def test_choose_the_finest_level_near_the_best_matches_a_plain_loop(rng):
    c = np.arange(2, 12)
    for _ in range(50):
        s = rng.normal(size=c.size)
        s[rng.random(c.size) < 0.2] = np.nan
        if np.isnan(s).all():
            continue
        for fraction in (0.3, 0.5, 1.0):
            best = np.nanmax(s)
            ref = c[np.nanargmax(s)]
            if best > 0:  # a plain loop: the last candidate at or above fraction × best
                for k, v in zip(c, s, strict=True):
                    if np.isfinite(v) and v >= fraction * best:
                        ref = k
            assert choose(s, c, finest_fraction=fraction) == ref
    # Jasper Ridge's scores (the whole scene): the best is k = 2, k = 3 is above half of it
    jasper = np.array([0.71, 0.38, 0.02, 0.10, 0.01, 0.02])
    assert choose(jasper, np.arange(2, 8)) == 2
    assert choose(jasper, np.arange(2, 8), finest_fraction=0.5) == 3
    order = spectrum_model_order(
        1 - np.array([0, 0.149, 0.606, 0.822, 0.912, 0.95]), np.arange(2, 5), finest_fraction=0.2
    )
    assert order.n_clusters == 3 and order.details["finest_fraction"] == 0.2
    assert "the finest k scoring at least 0.2 × the best, k = 2" in order.summary()
    for bad in (0.0, 1.5, -0.1):
        with pytest.raises(InvalidInputError, match="finest_fraction"):
            choose(jasper, np.arange(2, 8), finest_fraction=bad)
    with pytest.raises(InvalidInputError, match="finest_fraction"):
        choose(jasper, np.arange(2, 8), higher_is_better=False, finest_fraction=0.5)


def _alignment_cost(Z):
    M = np.abs(Z).max(axis=1)
    return float(((Z / M[:, None]) ** 2).sum())


def test_best_rotation_of_two_vectors_matches_a_search_over_angles():
    rng = np.random.default_rng(0)
    blocks = np.zeros((60, 2))
    blocks[:30, 0], blocks[30:, 1] = 1.0, 1.0
    V = np.linalg.qr(blocks + 0.05 * rng.standard_normal(blocks.shape))[0]
    V = V @ np.array([[np.cos(0.7), -np.sin(0.7)], [np.sin(0.7), np.cos(0.7)]])
    R, cost = best_rotation(V)
    np.testing.assert_allclose(R.T @ R, np.eye(2), atol=1e-10)
    assert cost == pytest.approx(_alignment_cost(V @ R))
    angles = np.linspace(0, np.pi / 2, 20001)
    grid = min(
        _alignment_cost(V @ np.array([[np.cos(a), -np.sin(a)], [np.sin(a), np.cos(a)]]))
        for a in angles
    )
    assert cost == pytest.approx(grid, rel=1e-4)


def test_rotation_quality_is_highest_at_the_number_of_blocks():
    rng = np.random.default_rng(1)
    labels = np.repeat(np.arange(3), 40)
    indicator = np.eye(3)[labels] + 0.02 * rng.standard_normal((120, 3))
    extra = rng.standard_normal((120, 2))
    V = np.linalg.qr(np.column_stack([indicator, extra]))[0]
    scores = rotation_scores(V, np.arange(2, 6))
    assert np.argmax(scores) + 2 == 3
    assert scores[1] > 0.95


def test_stability_matches_a_plain_loop_and_is_deterministic():
    X, _ = make_blobs(120, centers=[[0, 0], [10, 0], [5, 8.66]], cluster_std=0.4, random_state=0)

    def cluster(rows, candidates, seed):
        from sklearn.cluster import KMeans

        return {k: KMeans(k, n_init=3, random_state=0).fit_predict(rows) for k in candidates}

    c = np.arange(2, 6)
    order = stability_model_order(X, cluster, c, n_subsamples=3, seed=7)
    again = stability_model_order(X, cluster, c, n_subsamples=3, seed=7)
    np.testing.assert_array_equal(order.scores, again.scores)
    assert order.rule == "stability" and order.n_clusters == 3
    indices = subsample_indices(120, 3, 0.8, 7)
    labels = [cluster(X[i], c, b) for b, i in enumerate(indices)]
    for j, k in enumerate(c):
        pairs = []
        for a, b in itertools.combinations(range(3), 2):
            common = sorted(set(indices[a]) & set(indices[b]))
            la = [labels[a][k][list(indices[a]).index(i)] for i in common]
            lb = [labels[b][k][list(indices[b]).index(i)] for i in common]
            pairs.append(adjusted_rand_score(la, lb))
        assert order.scores[j] == pytest.approx(np.mean(pairs))


def test_information_criteria_choose_the_lowest():
    order = information_criterion_model_order(np.array([5.0, 2.0, 3.0]), np.arange(2, 5), "bic")
    assert order.n_clusters == 3 and not order.higher_is_better
    assert "k = 3 by the bic rule" in order.summary()
    with pytest.raises(InvalidInputError, match="not one of"):
        information_criterion_model_order(np.zeros(3), np.arange(2, 5), "eigengap")


def test_knn_graph_spectrum_sees_separated_blobs():
    X, _ = make_blobs(400, centers=5, cluster_std=0.3, center_box=(-30, 30), random_state=2)
    lam = knn_graph_spectrum(X, 12)
    assert lam[0] == pytest.approx(1.0) and np.all(np.diff(lam) <= 1e-12)
    assert spectrum_model_order(lam, np.arange(2, 12)).n_clusters == 5


def _auto_fit(cls, X, scheduler):
    import dask
    import dask.array as da

    Xd = da.from_array(X, chunks=(100, -1))
    if scheduler is None:  # the session's distributed client (two process workers)
        return cls("auto", random_state=0).fit(Xd)
    with dask.config.set(scheduler=scheduler):
        return cls("auto", random_state=0).fit(Xd)


@pytest.mark.parametrize("name", ["SpectralClustering", "KernelDecompositionClustering"])
def test_auto_is_the_same_on_one_worker_two_threads_and_two_processes(name, client):
    import dkernel

    cls = getattr(dkernel, name)
    X, _ = make_blobs(600, centers=[[0, 0], [10, 0], [0, 10], [10, 10]], random_state=5)
    fits = [_auto_fit(cls, X, s) for s in ("synchronous", "threads", None)]
    for other in fits[1:]:
        assert other.n_clusters_ == fits[0].n_clusters_ == 4
        np.testing.assert_array_equal(other.n_clusters_scores_, fits[0].n_clusters_scores_)
        np.testing.assert_array_equal(other.labels_, fits[0].labels_)


def test_stability_is_the_same_on_one_worker_two_threads_and_two_processes(client):
    import dask

    def kmeans_clusterer(rows, candidates, seed):
        from sklearn.cluster import KMeans

        return {k: KMeans(k, n_init=3, random_state=seed).fit_predict(rows) for k in candidates}

    X, _ = make_blobs(150, centers=[[0, 0], [10, 0], [5, 8.66]], cluster_std=0.4, random_state=1)
    c = np.arange(2, 5)
    scores = []
    for scheduler in ("synchronous", "threads"):
        with dask.config.set(scheduler=scheduler):
            scores.append(stability_model_order(X, kmeans_clusterer, c, n_subsamples=3).scores)
    scores.append(stability_model_order(X, kmeans_clusterer, c, n_subsamples=3).scores)
    for other in scores[1:]:
        np.testing.assert_array_equal(other, scores[0])
