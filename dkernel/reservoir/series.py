"""The benchmark series of Paper V of [Lokse2020]: Mackey–Glass, NARMA and multiple superimposed
oscillators, the forecast pairs built from a series and the error measure (NRMSE).

Numeric layer: NumPy only. Every generator is deterministic (NARMA draws its input from one
seed) and is tested against its defining equation.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from dkernel._validation import check_scalar
from dkernel.errors import InvalidInputError

#: The six frequencies of the multiple superimposed oscillator ([Lokse2020], Paper V, "Multiple
#: Superimposed Oscillator").
MSO_FREQUENCIES = (0.2, 0.311, 0.42, 0.51, 0.63, 0.74)


def mackey_glass(
    n_samples: int = 5000,
    *,
    tau: float = 17.0,
    alpha: float = 0.2,
    beta: float = 0.1,
    power: int = 10,
    x0: float = 1.2,
    dt: float = 0.1,
    sample_every: int = 20,
    transient: int = 50_000,
) -> np.ndarray:
    """The Mackey–Glass delay equation, integrated by Euler steps and sampled.

    ``dx/dt = α x(t-τ) / (1 + x(t-τ)^power) - β x(t)``, with the constant history
    ``x(t) = x0`` for ``t <= 0``; one Euler step of ``dt`` is
    ``x[i+1] = x[i] + dt (α x[i-D] / (1 + x[i-D]^power) - β x[i])`` with ``D = round(τ/dt)``.

    The defaults are those of [Lokse2020], Paper V (τ = 17, α = 0.2, β = 0.1, x(0) = 1.2, step 0.1, 150 000 steps:
    a transient of 50 000 steps dropped and every 20th of the remaining 100 000 kept, which gives
    the 5 000 samples, 2 time units apart, of the authors' data files).

    Parameters
    ----------
    n_samples : int
        Samples returned.
    tau, alpha, beta : float
        Delay and the equation's two rates.
    power : int
        Exponent of the production term.
    x0 : float
        Constant history and initial value.
    dt : float
        Integration step (time units).
    sample_every : int
        Integration steps between two returned samples.
    transient : int
        Integration steps dropped before the first sample.

    Returns
    -------
    ndarray (n_samples,)
    """
    check_scalar(n_samples, "n_samples", "mackey_glass", kind=int, low=1)
    check_scalar(tau, "tau", "mackey_glass", low=0, low_inclusive=False)
    check_scalar(dt, "dt", "mackey_glass", low=0, low_inclusive=False)
    check_scalar(sample_every, "sample_every", "mackey_glass", kind=int, low=1)
    check_scalar(transient, "transient", "mackey_glass", kind=int, low=0)
    delay = int(round(tau / dt))
    if delay < 1:
        raise InvalidInputError(
            f"mackey_glass needs tau >= dt (a delay of at least one step); got tau={tau}, "
            f"dt={dt}. Use a smaller dt."
        )
    steps = transient + (n_samples - 1) * sample_every
    # x[0 .. delay] is the history (x0), x[delay + i] is x(i dt)
    x = np.empty(delay + steps + 1)
    x[: delay + 1] = x0
    for i in range(delay, delay + steps):
        lagged = x[i - delay]
        x[i + 1] = x[i] + dt * (alpha * lagged / (1.0 + lagged**power) - beta * x[i])
    return x[delay + transient :: sample_every][:n_samples].copy()


def narma(
    n_samples: int = 10_000,
    *,
    order: int = 10,
    coefficients: Sequence[float] = (0.3, 0.05, 1.5, 0.1),
    input_range: tuple[float, float] = (0.0, 0.5),
    transient: int = 200,
    random_state: int | None = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """A NARMA system driven by uniform noise: the input ``u`` and the output ``y``.

    ``y(t+1) = a y(t) + b y(t) Σ_{i=0}^{order-1} y(t-i) + c u(t-order+1) u(t) + d`` with
    ``(a, b, c, d) = coefficients`` and ``u(t)`` uniform on ``input_range`` (Atiya & Parlos
    2000 [Atiya2000]; the defaults are its tenth-order system, NARMA-10). ``y`` starts at 0 and
    the first ``transient`` steps are dropped.

    Paper V of [Lokse2020] trains the ESN to give ``y(t)`` from ``u(0..t)`` (its text says ``r = 20``; the
    authors' data file is tenth order with ``b = 0.005`` and ``u`` on [0, 1], which is what
    ``benchmarks/bench_esn.py`` generates).

    Parameters
    ----------
    n_samples : int
    order : int
        Memory of the system: the number of past outputs summed, and the input lag + 1.
    coefficients : sequence of 4 floats
        ``(a, b, c, d)``.
    input_range : (float, float)
        Bounds of the uniform input.
    transient : int
        Steps dropped at the start.
    random_state : int, optional
        Seed of the input.

    Returns
    -------
    u, y : ndarray (n_samples,)

    Raises
    ------
    InvalidInputError
        When the output diverges (some coefficient and input range combinations do).
    """
    check_scalar(n_samples, "n_samples", "narma", kind=int, low=1)
    check_scalar(order, "order", "narma", kind=int, low=1)
    check_scalar(transient, "transient", "narma", kind=int, low=0)
    if len(coefficients) != 4:
        raise InvalidInputError(
            f"The 'coefficients' parameter of narma must be 4 numbers (a, b, c, d). Got "
            f"{coefficients!r} instead."
        )
    a, b, c, d = (float(v) for v in coefficients)
    low, high = (float(v) for v in input_range)
    total = n_samples + transient
    u = np.random.default_rng(random_state).uniform(low, high, total)
    y = np.zeros(total)
    window = 0.0  # Σ y(t-i), i < order, kept as a running sum
    # a diverging recursion overflows: the clear error below says so, not NumPy's warning
    with np.errstate(over="ignore", invalid="ignore"):
        for t in range(total - 1):
            window += y[t] - (y[t - order] if t >= order else 0.0)
            lagged = u[t - order + 1] if t >= order - 1 else 0.0
            y[t + 1] = a * y[t] + b * y[t] * window + c * lagged * u[t] + d
    if not np.all(np.isfinite(y)) or np.abs(y).max() > 1e6:
        raise InvalidInputError(
            f"The NARMA output diverges for coefficients={tuple(coefficients)} and "
            f"input_range={tuple(input_range)}; use smaller coefficients or a narrower input range."
        )
    return u[transient:].copy(), y[transient:].copy()


def mso(
    n_samples: int = 5000,
    *,
    frequencies: Sequence[float] = MSO_FREQUENCIES,
    start: int = 1,
) -> np.ndarray:
    """Multiple superimposed oscillators: ``y(t) = Σ_k sin(f_k t)`` at ``t = start, start+1, ...``.

    Parameters
    ----------
    n_samples : int
    frequencies : sequence of float
        [Lokse2020] Paper V's six by default (:data:`MSO_FREQUENCIES`).
    start : int
        First time index.

    Returns
    -------
    ndarray (n_samples,)
    """
    check_scalar(n_samples, "n_samples", "mso", kind=int, low=1)
    t = np.arange(start, start + n_samples, dtype=np.float64)
    return np.sin(np.outer(t, np.asarray(frequencies, dtype=np.float64))).sum(axis=1)


def forecast_pairs(series: np.ndarray, horizon: int) -> tuple[np.ndarray, np.ndarray]:
    """Inputs and targets for forecasting ``horizon`` steps ahead: ``x[t]`` -> ``x[t + horizon]``.

    Parameters
    ----------
    series : ndarray (n,) or (n, d)
    horizon : int

    Returns
    -------
    X, y : ndarray (n - horizon, ...)
    """
    series = np.asarray(series)
    check_scalar(horizon, "horizon", "forecast_pairs", kind=int, low=1, high=len(series) - 1)
    return series[:-horizon], series[horizon:]


def first_autocorrelation_zero(series: np.ndarray, max_lag: int | None = None) -> int:
    """The smallest lag at which the sample autocorrelation is <= 0.

    Paper V of [Lokse2020] sets each task's forecast step this way (the smallest lag that makes the samples
    linearly uncorrelated).

    Parameters
    ----------
    series : ndarray (n,)
    max_lag : int, optional
        Largest lag tried (default n - 1).

    Raises
    ------
    InvalidInputError
        When the autocorrelation stays positive up to ``max_lag``.
    """
    x = np.asarray(series, dtype=np.float64).ravel()
    x = x - x.mean()
    top = len(x) - 1 if max_lag is None else min(max_lag, len(x) - 1)
    for lag in range(1, top + 1):
        if np.dot(x[:-lag], x[lag:]) <= 0:
            return lag
    raise InvalidInputError(
        f"The autocorrelation stays positive up to lag {top}; give a longer series or max_lag."
    )


def nrmse(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    """Normalized root mean squared error: ``RMSE / std(y_true)`` ([Lokse2020], Paper V's measure).

    Multi-output targets are pooled (the numerator and the variance over all entries, the
    variance about each output's mean).

    Parameters
    ----------
    y_true, y_pred : ndarray of the same shape
    """
    y_true = np.asarray(y_true, dtype=np.float64)
    y_pred = np.asarray(y_pred, dtype=np.float64)
    if y_true.shape != y_pred.shape:
        raise InvalidInputError(
            f"nrmse needs y_true and y_pred of the same shape; got {y_true.shape} and "
            f"{y_pred.shape}."
        )
    spread = np.mean((y_true - y_true.mean(axis=0)) ** 2)
    if not spread > 0:
        raise InvalidInputError("nrmse is undefined for a constant y_true (zero variance).")
    return float(np.sqrt(np.mean((y_true - y_pred) ** 2) / spread))
