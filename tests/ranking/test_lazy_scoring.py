"""Lazy scoring of KPPR and JRC on Dask input (issue 33, item 2).

The ``kppr`` job scored every row chunk by chunk with the graph builders of
``dkernel.ranking.graph`` (``scorer_for_seeds`` + ``score_graph``, or ``project_graph`` +
``scores_from_projection``); the estimators now do the same for a Dask ``X`` and must give
those numbers bit for bit, without computing anything until asked.
"""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pytest
from sklearn.datasets import make_blobs

from dkernel import JointRankingClustering, KernelPersonalizedPageRank, ProbabilisticClusterKernel
from dkernel._budget import KERNEL_BLOCK_BYTES
from dkernel.errors import InvalidInputError
from dkernel.ranking.graph import project_graph, score_graph, scorer_for_seeds
from dkernel.ranking.kppr import scoring_chunk_rows


def _no_compute(dsk, keys, **kwargs):
    raise AssertionError("a Dask computation ran while building the lazy result")


@pytest.fixture(scope="module")
def blobs():
    X, y = make_blobs(600, centers=3, n_features=4, random_state=0)
    return X, y


@pytest.fixture(scope="module")
def fitted(blobs):
    X, _ = blobs
    return KernelPersonalizedPageRank(dtype="float32", random_state=0).fit(X[:80])


def _weights(model, n_seeds):
    """Seed weights of the global seed and in-sample row seeds, as the job stacks them."""
    means = [model.mean_vector(None)] + [model.mean_vector(i) for i in range(n_seeds - 1)]
    return model.seed_weights_for_mean(np.stack(means, axis=1))


@pytest.mark.parametrize("n_seeds", [3, 70])  # direct, and projected (more seeds than k + 1)
def test_score_seeds_is_the_job_graph(blobs, fitted, n_seeds):
    X, _ = blobs
    Xd = da.from_array(X, chunks=(128, -1))
    W = _weights(fitted, n_seeds)
    assert (n_seeds > W.shape[0]) == (n_seeds == 70)
    with dask.config.set(scheduler=_no_compute):
        lazy = fitted.score_seeds(Xd, W)
    assert isinstance(lazy, da.Array) and lazy.shape == (600, n_seeds)
    assert lazy.numblocks[0] == Xd.numblocks[0]
    expected = score_graph(Xd, scorer_for_seeds(fitted, W, dtype="float32")).compute()
    got = lazy.compute()
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got.astype(np.float32), expected)
    # the in-memory path: the same scorer on all rows at once
    # float32 kernel rows: rounding relative to the largest score
    atol = 1e-6 * np.abs(got).max()
    np.testing.assert_allclose(fitted.score_seeds(X, W), got, rtol=1e-5, atol=atol)


def test_score_samples_and_project_are_lazy_for_dask(blobs):
    X, _ = blobs
    model = KernelPersonalizedPageRank(random_state=0).fit(X[:80])
    Xd = da.from_array(X, chunks=(100, -1))
    with dask.config.set(scheduler=_no_compute):
        s = model.score_samples(Xd, seed=3)
        Z = model.project(Xd)
        base = model.score_samples(Xd, component="base")
    assert isinstance(s, da.Array) and s.shape == (600,)
    close = {"rtol": 1e-10, "atol": 1e-12 * float(np.abs(s).max().compute())}
    np.testing.assert_allclose(s.compute(), model.score_samples(X, seed=3), **close)
    np.testing.assert_allclose(base.compute(), model.score_samples(X, component="base"), **close)
    np.testing.assert_array_equal(Z.compute(), project_graph(Xd, model, dtype="float64").compute())
    np.testing.assert_allclose(Z.compute(), model.project(X), rtol=1e-10)
    # a training point gets its in-sample score
    np.testing.assert_allclose(s[:80].compute(), model.rank(3), rtol=1e-8, atol=close["atol"])


def test_feature_map_kernel_scores_missing_values_lazily(blobs):
    X, _ = blobs
    Xm = X.copy()
    Xm[::7, 1] = np.nan
    pck = ProbabilisticClusterKernel(n_estimators=3, max_components=4, random_state=0)
    model = KernelPersonalizedPageRank(kernel=pck, dtype="float32", random_state=0).fit(X[:100])
    Xd = da.from_array(Xm, chunks=(150, -1))
    W = _weights(model, 4)
    got = model.score_seeds(Xd, W).compute()
    expected = score_graph(Xd, scorer_for_seeds(model, W, dtype="float32")).compute()
    np.testing.assert_array_equal(got.astype(np.float32), expected)
    assert np.isfinite(got).all()


def test_precomputed_kernel_rows(blobs):
    X, _ = blobs
    K = np.exp(-((X[:, None] - X[None, :80]) ** 2).sum(-1) / 8.0)
    model = KernelPersonalizedPageRank(kernel="precomputed").fit(K[:80])
    lazy = model.score_samples(da.from_array(K, chunks=(200, -1)), seed=1).compute()
    expected = model.score_samples(K, seed=1)
    np.testing.assert_allclose(lazy, expected, rtol=1e-10, atol=1e-12 * np.abs(expected).max())
    with pytest.raises(InvalidInputError, match=r"shape \(n_new, 80\)"):
        model.score_samples(da.from_array(K[:, :50]), seed=1)


def test_bad_seed_weights_and_features(blobs, fitted):
    X, _ = blobs
    with pytest.raises(InvalidInputError, match="seed_weights must have"):
        fitted.score_seeds(da.from_array(X), np.ones(3))
    with pytest.raises(InvalidInputError):
        fitted.score_samples(da.from_array(X[:, :3]))


def test_scoring_chunk_rows(fitted):
    assert scoring_chunk_rows(fitted, 50_000) == 50_000
    assert scoring_chunk_rows(fitted, 10**8) == KERNEL_BLOCK_BYTES // (8 * 80)
    assert scoring_chunk_rows(fitted, 10) == 1024  # at least 1024


@pytest.fixture(scope="module")
def jrc(blobs):
    X, _ = blobs
    return JointRankingClustering(n_clusters=3, random_state=0).fit(X[:300])


def test_jrc_out_of_sample_is_lazy_for_dask(blobs, jrc):
    X, _ = blobs
    Xd = da.from_array(X, chunks=(128, -1))
    with dask.config.set(scheduler=_no_compute):
        Z = jrc.transform(Xd)
        labels = jrc.predict(Xd)
        scores = jrc.score_samples(Xd, cluster=1)
    assert Z.shape == (600, 3) and labels.shape == (600,) and scores.shape == (600,)
    np.testing.assert_allclose(Z.compute(), jrc.transform(X), rtol=1e-10, atol=1e-12)
    np.testing.assert_array_equal(labels.compute(), jrc.predict(X))
    np.testing.assert_array_equal(labels[:300].compute(), jrc.labels_)
    expected = jrc.score_samples(X, cluster=1)
    atol = 1e-12 * np.abs(expected).max()
    np.testing.assert_allclose(scores.compute(), expected, rtol=1e-10, atol=atol)
    np.testing.assert_allclose(scores[:300].compute(), jrc.rank(cluster=1), rtol=1e-8, atol=atol)


def test_jrc_cluster_ranking_is_the_job_table(jrc):
    names, scores, top = jrc.cluster_ranking(7)
    assert names == ["global", "cluster_0", "cluster_1", "cluster_2"]
    np.testing.assert_array_equal(scores[:, 0], jrc.rank())
    for c in range(3):
        np.testing.assert_array_equal(scores[:, 1 + c], jrc.rank(cluster=c))
    for j in range(4):
        for c in range(3):
            idx = np.flatnonzero(jrc.labels_ == c)
            # score descending, index ascending among ties (a slow sort by key pairs)
            expected = sorted(idx, key=lambda i: (-scores[i, j], i))[:7]
            np.testing.assert_array_equal(top[j, c], expected)
    assert top.shape == (4, 3, 7)
    _, _, padded = jrc.cluster_ranking(400)
    assert (padded == -1).any() and set(padded[0, 0][padded[0, 0] >= 0]) == set(
        np.flatnonzero(jrc.labels_ == 0)
    )
