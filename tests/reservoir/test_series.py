"""The benchmark series against their defining equations, recomputed by plain loops."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from dkernel.errors import InvalidInputError
from dkernel.reservoir import (
    first_autocorrelation_zero,
    forecast_pairs,
    mackey_glass,
    mso,
    narma,
    nrmse,
)
from dkernel.reservoir.series import MSO_FREQUENCIES


def test_mackey_glass_satisfies_the_euler_step_of_the_delay_equation():
    dt, a, b = 0.1, 0.2, 0.1
    x = mackey_glass(600, dt=dt, sample_every=1, transient=0)
    D = 170  # tau / dt = 17 / 0.1
    assert x[0] == 1.2
    for i in range(len(x) - 1):
        lagged = x[i - D] if i >= D else 1.2  # the constant history
        rate = a * lagged / (1 + lagged**10) - b * x[i]
        assert x[i + 1] == pytest.approx(x[i] + dt * rate, rel=1e-13, abs=1e-15)


def test_mackey_glass_samples_the_fine_grid():
    fine = mackey_glass(1 + 300 + 20 * 9, sample_every=1, transient=0)
    coarse = mackey_glass(10, sample_every=20, transient=300)
    np.testing.assert_array_equal(coarse, fine[300::20][:10])


def test_mackey_glass_at_tau_17_is_the_familiar_attractor():
    x = mackey_glass(3000)
    assert 0.3 < x.min() < 0.5 and 1.2 < x.max() < 1.4
    # chaotic, not periodic: no lag up to 200 samples repeats the series
    centred = x - x.mean()
    acf = [np.dot(centred[:-k], centred[k:]) / np.dot(centred, centred) for k in range(1, 200)]
    assert max(acf[20:]) < 0.9


def test_narma_satisfies_its_recurrence():
    order, (a, b, c, d) = 10, (0.3, 0.05, 1.5, 0.1)
    u, y = narma(400, order=order, transient=0, random_state=3)
    assert u.min() >= 0 and u.max() <= 0.5
    assert y[0] == 0
    for t in range(len(y) - 1):
        past = sum(y[t - i] for i in range(order) if t - i >= 0)
        lagged = u[t - order + 1] if t - order + 1 >= 0 else 0.0
        assert y[t + 1] == pytest.approx(a * y[t] + b * y[t] * past + c * lagged * u[t] + d)


def test_narma_transient_and_seed():
    u0, y0 = narma(300, transient=0, random_state=1)
    u1, y1 = narma(100, transient=200, random_state=1)
    np.testing.assert_array_equal(u1, u0[200:])
    np.testing.assert_array_equal(y1, y0[200:])
    u2, _ = narma(100, transient=200, random_state=2)
    assert not np.array_equal(u1, u2)


def test_narma_divergence_is_a_clear_error():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the error, not NumPy's overflow warning before it
        with pytest.raises(InvalidInputError, match="diverges"):
            narma(2000, order=20, coefficients=(0.3, 0.05, 1.5, 0.1), input_range=(0, 1))
    with pytest.raises(InvalidInputError, match="4 numbers"):
        narma(10, coefficients=(0.3, 0.05))


def test_mso_is_the_sum_of_six_sines():
    y = mso(50, start=1)
    for t in (1, 7, 50):
        assert y[t - 1] == pytest.approx(sum(np.sin(f * t) for f in MSO_FREQUENCIES))


def test_forecast_pairs_and_autocorrelation_zero():
    s = np.arange(10.0)
    X, y = forecast_pairs(s, 3)
    np.testing.assert_array_equal(X, s[:7])
    np.testing.assert_array_equal(y, s[3:])
    # a cosine of period 40 first turns negative just past a quarter period
    wave = np.cos(2 * np.pi * np.arange(4000) / 40)
    assert first_autocorrelation_zero(wave) == 10
    with pytest.raises(InvalidInputError, match="horizon"):
        forecast_pairs(s, 0)
    with pytest.raises(InvalidInputError, match="stays positive"):
        first_autocorrelation_zero(np.arange(100.0), max_lag=5)


def test_nrmse_is_rmse_over_the_standard_deviation():
    rng = np.random.default_rng(0)
    y, p = rng.normal(size=200), rng.normal(size=200)
    assert nrmse(y, p) == pytest.approx(np.sqrt(np.mean((y - p) ** 2)) / np.std(y))
    assert nrmse(y, np.full_like(y, y.mean())) == pytest.approx(1.0)
    assert nrmse(y, y) == 0.0
    with pytest.raises(InvalidInputError, match="same shape"):
        nrmse(y, p[:10])
    with pytest.raises(InvalidInputError, match="constant"):
        nrmse(np.ones(5), np.zeros(5))
