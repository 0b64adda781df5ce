"""Out-of-sample scoring through Dask, the /ranking group and dkernel.top_k."""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pytest

import dkernel
from dkernel.errors import InvalidInputError, StoreError
from dkernel.ranking import (
    KernelPersonalizedPageRank,
    make_projected_scorer,
    make_projector,
    make_scorer,
    score_graph,
    scorer_for_seeds,
    top_k_graph,
)
from dkernel.storage import ResultsStore, top_k
from dkernel.storage.layout import ranking_dataset


@pytest.fixture(scope="module")
def fitted(iris):
    X, _ = iris
    return KernelPersonalizedPageRank(sigma=0.8, n_components=20).fit(X[::3])


def big_points(iris, n=5000, seed=0):
    X, _ = iris
    rng = np.random.default_rng(seed)
    return X[rng.integers(0, X.shape[0], n)] + 0.05 * rng.standard_normal((n, X.shape[1]))


def test_score_graph_matches_estimator(iris, fitted):
    Y = big_points(iris)
    coefs = np.stack([fitted.coefficients(s) for s in (0, 7, None)], axis=1)
    scorer = make_scorer(fitted, coefs, dtype="float64")
    lazy = score_graph(da.from_array(Y, chunks=(700, 4)), scorer)
    assert lazy.shape == (5000, 3) and lazy.chunks[0][0] == 700
    with dask.config.set(scheduler="threads"):
        got = lazy.compute()
    for j, s in enumerate((0, 7, None)):
        np.testing.assert_allclose(got[:, j], fitted.score_samples(Y, s), rtol=1e-10)
    f32 = score_graph(Y, make_scorer(fitted, coefs)).compute(scheduler="threads")
    assert f32.dtype == np.float32
    np.testing.assert_allclose(f32, got, rtol=2e-4, atol=1e-9)


def test_projected_scorer_matches_direct_scorer(iris, fitted, soft_assign):
    """Projecting each point once ([1/Vol, A] basis) and scoring every seed in O(k) gives the
    direct Prop. 8 scores, for a block kernel and a feature map; the projector's output is
    KernelPersonalizedPageRank.project."""
    X, _ = iris
    Y = big_points(iris, 2000, seed=2)
    fmap = KernelPersonalizedPageRank(kernel=soft_assign(12, 1.0).fit(X[::3])).fit(X[::3])
    for model in (fitted, fmap):
        seeds = (0, 7, None, [1, 2])
        W = np.stack([model.seed_weights(s) for s in seeds], axis=1)
        direct = score_graph(Y, make_scorer(model, model.score_basis() @ W, dtype="float64"))
        proj = score_graph(Y, make_projected_scorer(model, W, dtype="float64"))
        with dask.config.set(scheduler="threads"):
            d, p = direct.compute(), proj.compute()
            Z = score_graph(Y, make_projector(model, dtype="float64")).compute()
        assert p.shape == (2000, 4) and Z.shape == (2000, model.n_components_ + 1)
        assert np.abs(p - d).max() <= 1e-10 * np.abs(d).max()
        assert np.abs(Z @ W - d).max() <= 1e-10 * np.abs(d).max()
        np.testing.assert_allclose(Z, model.project(Y), rtol=1e-10, atol=1e-15)
        # float32 projection: same scores to float32 rounding
        p32 = score_graph(Y, make_projected_scorer(model, W)).compute(scheduler="threads")
        assert p32.dtype == np.float32
        assert np.abs(p32 - d).max() <= 1e-5 * np.abs(d).max()
        # the cheaper path: direct for few seeds, projected for more seeds than components+1
        assert scorer_for_seeds(model, W).head is None
        many = np.tile(W, (1, model.n_components_))
        assert scorer_for_seeds(model, many).head is not None
    with pytest.raises(InvalidInputError, match="rows"):
        make_projected_scorer(fitted, np.ones(3))


def test_score_graph_on_distributed_client(iris, fitted, client):
    Y = big_points(iris, 3000, seed=1)
    scorer = make_scorer(fitted, fitted.coefficients(4)[:, None], dtype="float64")
    got = client.compute(score_graph(da.from_array(Y, chunks=(500, 4)), scorer)).result()
    np.testing.assert_allclose(got[:, 0], fitted.score_samples(Y, 4), rtol=1e-10)


def test_top_k_graph_matches_sort(rng):
    S = rng.random((1003, 3))
    S[10, 1] = S[11, 1] = 5.0  # a tie: the smaller index first
    idx, val = top_k_graph(da.from_array(S, chunks=(100, 3)), 7)
    idx, val = dask.compute(idx, val, scheduler="sync")
    for j in range(3):
        order = np.lexsort((np.arange(1003), -S[:, j]))[:7]
        np.testing.assert_array_equal(idx[j], order)
        np.testing.assert_allclose(val[j], S[order, j])
    assert list(idx[1][:2]) == [10, 11]


def test_store_roundtrip_and_top_k(tmp_path, iris, fitted):
    Y = big_points(iris, 2000, seed=2)
    names = ["point_0", "global"]
    coefs = np.stack([fitted.coefficients(0), fitted.coefficients(None)], axis=1)
    scores = score_graph(da.from_array(Y, chunks=(400, 4)), make_scorer(fitted, coefs))
    ds = ranking_dataset(scores, names, k=25, attrs={"alpha": 0.1})
    store = ResultsStore.create(tmp_path / "r.zarr", job={"method": "test"}, seed=0)
    with dask.config.set(scheduler="threads"):
        store.write("ranking", ds)
    store.mark_complete()
    ref = fitted.score_samples(Y, 0)
    order = np.lexsort((np.arange(Y.shape[0]), -ref))
    top = dkernel.top_k(tmp_path / "r.zarr", "point_0", 10)
    assert list(top.index) == list(range(1, 11))
    np.testing.assert_array_equal(top["index"].to_numpy(), order[:10])
    np.testing.assert_allclose(top["score"].to_numpy(), ref[order[:10]], rtol=2e-4)
    # more than the stored 25: falls back to the score column
    top40 = top_k(tmp_path / "r.zarr", "point_0", 40)
    np.testing.assert_array_equal(top40["index"].to_numpy()[:25], order[:25])
    assert len(top40) == 40
    with pytest.raises(InvalidInputError, match="Stored seeds: point_0, global"):
        top_k(tmp_path / "r.zarr", "nope", 3)


def test_top_k_without_ranking_group(tmp_path):
    store = ResultsStore.create(tmp_path / "e.zarr", job={}, seed=0)
    store.mark_complete()
    with pytest.raises(StoreError, match="no /ranking group"):
        top_k(tmp_path / "e.zarr", "x", 3)
