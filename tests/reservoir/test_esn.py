"""EchoStateNetwork: the numerics against slow references, the estimator's contracts, Dask."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
from sklearn.decomposition import PCA, KernelPCA
from sklearn.linear_model import Ridge

from dkernel import NystromEmbedding
from dkernel.errors import InvalidInputError
from dkernel.reservoir import (
    EchoStateNetwork,
    forecast_pairs,
    mackey_glass,
    mso,
    narma,
    nrmse,
    predict_series,
)
from dkernel.reservoir._reservoir import (
    harvest_states,
    make_reservoir,
    ridge,
    spectral_radius,
)
from dkernel.reservoir.reduction import fit_kpca, fit_pca


def _reservoir(feedback=0.0, leak=1.0, n=12, p=2, q=1, seed=0):
    return make_reservoir(
        np.random.default_rng(seed),
        n,
        p,
        q,
        spectral_radius_=0.9,
        connectivity=0.3,
        input_scaling=0.7,
        feedback_scaling=feedback,
        leak_rate=leak,
    )


def _slow_states(res, X, teacher=None, noise=None):
    """Eq. 1 neuron by neuron, for one series."""
    N = res.W.shape[0]
    h = [0.0] * N
    out = []
    for t in range(len(X)):
        new = []
        for i in range(N):
            u = sum(res.W[i, j] * h[j] for j in range(N))
            u += sum(res.W_in[i, k] * X[t][k] for k in range(len(X[t])))
            if teacher is not None and t > 0:
                u += sum(res.W_fb[i, k] * teacher[t - 1][k] for k in range(len(teacher[t])))
            if noise is not None:
                u += noise[t][i]
            new.append((1 - res.leak_rate) * h[i] + res.leak_rate * np.tanh(u))
        h = new
        out.append(h)
    return np.array(out)


def test_reservoir_weights_follow_the_recipe():
    res = make_reservoir(
        np.random.default_rng(1),
        200,
        3,
        2,
        spectral_radius_=1.1,
        connectivity=0.2,
        input_scaling=0.5,
        feedback_scaling=0.3,
    )
    assert np.abs(np.linalg.eigvals(res.W)).max() == pytest.approx(1.1, rel=1e-5)
    assert spectral_radius(res.W) == pytest.approx(1.1, rel=1e-5)
    assert np.mean(res.W != 0) == pytest.approx(0.2, abs=0.01)
    assert res.W_in.shape == (200, 3) and np.abs(res.W_in).max() <= 0.5
    assert res.W_fb.shape == (200, 2) and np.abs(res.W_fb).max() <= 0.3


@pytest.mark.parametrize("leak", [1.0, 0.4])
def test_state_update_matches_a_slow_loop(leak):
    rng = np.random.default_rng(2)
    res = _reservoir(feedback=0.5, leak=leak)
    X = rng.normal(size=(3, 15, 2))
    teacher = rng.normal(size=(3, 15, 1))
    H = harvest_states(res, X, teacher)
    for s in range(3):
        np.testing.assert_allclose(H[s], _slow_states(res, X[s], teacher[s]), atol=1e-12)
    # training noise: the same draws in the same order as the batch pass makes them
    H = harvest_states(res, X[:1], noise=0.05, rng=np.random.default_rng(9))
    draws = np.random.default_rng(9)
    noise = [draws.uniform(-0.05, 0.05, (1, 12))[0] for _ in range(15)]
    np.testing.assert_allclose(H[0], _slow_states(res, X[0], noise=noise), atol=1e-12)


def test_ridge_matches_scikit_learn():
    rng = np.random.default_rng(3)
    F, Y = rng.normal(size=(80, 6)), rng.normal(size=(80, 2))
    coef, intercept = ridge(F, Y, 0.7)
    ref = Ridge(alpha=0.7).fit(F, Y)
    np.testing.assert_allclose(coef, ref.coef_.T, atol=1e-10)
    np.testing.assert_allclose(intercept, ref.intercept_, atol=1e-10)


def test_pca_reduction_matches_scikit_learn():
    H = np.random.default_rng(4).normal(size=(60, 9))
    z = fit_pca(H, 4, seed=0).transform(H)
    ref = PCA(4, svd_solver="full").fit_transform(H)
    np.testing.assert_allclose(np.abs(z), np.abs(ref), atol=1e-10)


def test_kpca_reduction_is_nystrom_kpca_and_exact_with_every_state_a_landmark():
    from dkernel.kernels.registry import make_kernel

    H = np.tanh(np.random.default_rng(5).normal(size=(70, 8)))
    kernel = make_kernel("rbf", sigma=1.5)
    exact = fit_kpca(H, 5, kernel, n_landmarks=100, landmarks="uniform", seed=0)
    ref = KernelPCA(5, kernel="rbf", gamma=1 / (2 * 1.5**2)).fit_transform(H)
    np.testing.assert_allclose(np.abs(exact.transform(H)), np.abs(ref), atol=1e-8)
    # with fewer landmarks: NystromEmbedding's kpca on the same landmarks, new points too
    approx = fit_kpca(H, 5, kernel, n_landmarks=30, landmarks="uniform", seed=0)
    emb = NystromEmbedding(
        5, kernel="rbf", sigma=1.5, n_landmarks=30, landmarks="uniform", random_state=0
    ).fit(H)
    new = np.tanh(np.random.default_rng(6).normal(size=(10, 8)))
    for pts in (H, new):
        np.testing.assert_allclose(
            np.abs(approx.transform(pts)), np.abs(emb.transform(pts)), atol=1e-8
        )


@pytest.fixture(scope="module")
def mg():
    X, y = forecast_pairs(mackey_glass(700)[:, None], 6)
    return X, y[:, 0]


@pytest.mark.parametrize("reduction", [None, "pca", "kpca"])
def test_out_of_sample_equals_in_sample_on_the_training_rows(mg, reduction):
    X, y = mg
    esn = EchoStateNetwork(60, reduction=reduction, n_components=20, ridge=1e-4, random_state=0)
    pred = esn.fit(X, y).predict(X)
    assert pred.shape == y.shape
    w = esn.washout_
    resid = y[w:] - pred[w:]
    r2 = 1 - np.sum(resid**2) / np.sum((y[w:] - y[w:].mean()) ** 2)
    assert r2 == pytest.approx(esn.train_score_, abs=1e-10)
    assert esn.train_score_ > 0.85


def test_many_series_equal_one_at_a_time():
    u, y = narma(600, random_state=1)
    X3 = u[:, None].reshape(3, 200, 1)
    Y3 = y.reshape(3, 200)
    esn = EchoStateNetwork(40, n_components=10, washout=20, random_state=0).fit(X3, Y3)
    pred = esn.predict(X3)
    assert pred.shape == (3, 200)
    for s in range(3):
        np.testing.assert_allclose(pred[s], esn.predict(X3[s]), atol=1e-12)
    # the three series train together: the same states as three separate washouts
    assert esn.washout_ == 20
    assert 0 < esn.score(X3, Y3) <= 1


def test_feedback_predicts_in_closed_loop(mg):
    X, y = mg
    esn = EchoStateNetwork(50, feedback_scaling=0.3, reduction="pca", n_components=10)
    esn.set_params(random_state=0).fit(X, y)
    m = esn.model_
    pred = esn.predict(X[:80])
    # slow loop: feed back the previous prediction (standardized), one step at a time
    Xs = (X[:80] - m.x_mean) / m.x_scale
    h, y_prev, out = np.zeros(50), np.zeros(1), []
    for t in range(80):
        h = np.tanh(m.reservoir.W @ h + m.reservoir.W_in @ Xs[t] + m.reservoir.W_fb @ y_prev)
        y_prev = m.readout(h[None], Xs[t][None])[0]
        out.append(y_prev[0] * m.y_scale[0] + m.y_mean[0])
    np.testing.assert_allclose(pred, out, atol=1e-10)


def test_forecast_feeds_each_prediction_back_as_the_next_input():
    s = mso(700)[:, None]
    X, y = forecast_pairs(s, 1)
    esn = EchoStateNetwork(80, n_components=30, ridge=1e-6, random_state=0)
    esn.fit(X[:600], y[:600, 0])
    free = esn.forecast(X[:600], 3)
    assert free.shape == (3,)
    history = X[:600]
    for k in range(3):
        nxt = esn.predict(history)[-1]
        assert free[k] == pytest.approx(nxt, abs=1e-10)
        history = np.vstack([history, [[nxt]]])
    # a one-step model of a sine runs free along it
    wave = np.sin(0.25 * np.arange(700))[:, None]
    Xw, yw = forecast_pairs(wave, 1)
    esn.fit(Xw[:600], yw[:600, 0])
    assert nrmse(wave[600:640, 0], esn.forecast(Xw[:600], 40)) < 0.05


def test_deterministic_under_one_seed(mg):
    X, y = mg
    a = EchoStateNetwork(40, n_components=10, random_state=7).fit(X, y).predict(X)
    b = EchoStateNetwork(40, n_components=10, random_state=7).fit(X, y).predict(X)
    c = EchoStateNetwork(40, n_components=10, random_state=8).fit(X, y).predict(X)
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a, c)


@pytest.fixture(scope="module")
def threads_client():
    """A distributed LocalCluster of two single-threaded workers (threads: quick to start)."""
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False) as cluster:
        with Client(cluster) as client:
            yield client


def test_dask_series_across_workers_equal_numpy(threads_client):
    client = threads_client
    s = mso(400)
    X, y = forecast_pairs(s[:, None], 1)
    esn = EchoStateNetwork(40, n_components=10, washout=20, random_state=0).fit(X, y[:, 0])
    rng = np.random.default_rng(0)
    cube = np.stack([mso(120, start=int(k)) for k in rng.integers(1, 500, 10)])  # (10, 120)
    expected = esn.predict(cube[:, :, None])
    for chunks in (3, 7, 10):
        lazy = predict_series(esn, da.from_array(cube, chunks=(chunks, 60)))
        assert isinstance(lazy, da.Array) and lazy.shape == (10, 120)
        np.testing.assert_allclose(client.compute(lazy).result(), expected, rtol=0, atol=1e-12)
    three_d = esn.predict(da.from_array(cube[:, :, None], chunks=(4, 120, 1)))
    np.testing.assert_allclose(three_d.compute(), expected, rtol=0, atol=1e-12)


@pytest.mark.parametrize(
    ("X", "y", "match"),
    [
        (np.zeros(50), np.zeros(50), "Reshape your data"),
        (np.zeros((2, 3, 4, 1)), np.zeros((2, 3, 4)), "4 dimension"),
        (np.zeros((3, 50, 1)), np.zeros((3, 40)), "does not match"),
        (np.zeros((50, 1)), np.zeros(40), "inconsistent numbers of samples"),
        (np.full((50, 1), np.nan), np.zeros(50), "NaN"),
        # a gap: sklearn's generic message pointed at HistGradientBoosting
        (
            np.r_[np.zeros(20), np.full(3, np.nan), np.zeros(27)][:, None],
            np.zeros(50),
            r"3 NaN or infinite values \(the first at step 20\).*interpolate",
        ),
        (np.zeros((50, 1)), np.r_[np.zeros(7), np.inf, np.zeros(42)], "y holds 1 .* step 7"),
        (
            np.r_[np.zeros((2, 50)), np.r_[np.zeros(9), np.nan, np.zeros(40)][None]][:, :, None],
            np.zeros((3, 50)),
            "step 9 of series 2",
        ),
        (np.zeros((3, 1, 1)), np.zeros((3, 1)), "at least 2 steps"),
    ],
)
def test_bad_shapes_are_clear_errors(X, y, match):
    with pytest.raises(InvalidInputError, match=match):
        EchoStateNetwork(10).fit(X, y)


def test_bad_parameters_and_calls_are_clear_errors(mg):
    X, y = mg
    for params, name in [
        ({"spectral_radius": -1.0}, "spectral_radius"),
        ({"reduction": "ica"}, "reduction"),
        ({"connectivity": 0.0}, "connectivity"),
        ({"leak_rate": 1.5}, "leak_rate"),
    ]:
        with pytest.raises(InvalidInputError, match=name):
            EchoStateNetwork(10, **params).fit(X, y)
    esn = EchoStateNetwork(20, n_components=5, random_state=0).fit(X, y)
    with pytest.raises(InvalidInputError, match="expecting 1 features"):
        esn.predict(np.zeros((30, 2)))
    with pytest.raises(InvalidInputError, match="n_steps"):
        esn.forecast(X, 0)
    two = EchoStateNetwork(20, n_components=5, random_state=0).fit(X, np.c_[y, y])
    with pytest.raises(InvalidInputError, match="as many outputs as input features"):
        two.forecast(X, 5)
    with pytest.raises(InvalidInputError, match="expecting 1 features"):
        predict_series(esn, np.zeros((4, 30, 3)))


def test_reduced_state_never_needs_more_components_than_the_rank():
    X, y = forecast_pairs(mso(60)[:, None], 1)
    esn = EchoStateNetwork(30, n_components=100, reduction="kpca", random_state=0).fit(X, y)
    assert esn.washout_ == 29  # half of the 59 steps
    assert esn.n_components_ <= 30
    assert np.all(np.isfinite(esn.predict(X)))
