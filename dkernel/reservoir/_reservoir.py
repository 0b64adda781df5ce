"""Echo state network numerics: the random reservoir, its state update, the ridge readout and the
open-loop, closed-loop and free-running passes (Paper V of [Lokse2020], Eq. 1–4).

Numeric layer: NumPy/SciPy on in-memory arrays, no Dask. Every pass runs a batch of independent
series at once, the series along the first axis: ``X`` is (n_series, n_steps, n_inputs) and the
states (n_series, n_steps, n_reservoir). The state update is

``h[t] = (1 - a) h[t-1] + a tanh(W h[t-1] + W_in x[t] + W_fb y[t-1] + ξ[t])``

with leak rate ``a`` (1 in the paper), ``y[t-1]`` the previous target (teacher forcing, in
training) or the previous prediction (closed loop), and ``ξ`` uniform noise in training only.
The readout is linear in ``[z(h[t]), x[t]]``, ``z`` the identity or a fitted reduction (PCA or
kernel PCA) given as any object with ``transform``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import ArpackNoConvergence, eigs


@dataclass(frozen=True)
class Reservoir:
    """The fixed random weights: ``W`` (N, N), ``W_in`` (N, n_inputs), ``W_fb`` (N, n_outputs).

    ``W_in`` and ``W_fb`` already carry the input and feedback scalings.
    """

    W: np.ndarray
    W_in: np.ndarray
    W_fb: np.ndarray
    leak_rate: float

    @property
    def n_reservoir(self) -> int:
        return int(self.W.shape[0])

    def drive(self, h: np.ndarray, x: np.ndarray, y_prev: np.ndarray | None) -> np.ndarray:
        """The pre-activation ``W h + W_in x (+ W_fb y_prev)`` of a batch (rows are series)."""
        u = h @ self.W.T + x @ self.W_in.T
        if y_prev is not None:
            u += y_prev @ self.W_fb.T
        return u

    def step(
        self, h: np.ndarray, x: np.ndarray, y_prev: np.ndarray | None, noise: Any = None
    ) -> np.ndarray:
        """One state update of a batch of series: (b, N), (b, n_inputs), (b, n_outputs)."""
        u = self.drive(h, x, y_prev)
        if noise is not None:
            u += noise
        new = np.tanh(u)
        if self.leak_rate != 1.0:
            new = (1.0 - self.leak_rate) * h + self.leak_rate * new
        return new


def spectral_radius(W: np.ndarray) -> float:
    """Largest eigenvalue modulus of ``W`` (ARPACK from a fixed start; dense ``eigvals`` if
    that does not converge), so a seed gives the same reservoir on every machine."""
    n = W.shape[0]
    if n > 32:
        try:
            values = eigs(W, k=1, which="LM", v0=np.ones(n), return_eigenvectors=False, tol=1e-6)
            return float(np.abs(values).max())
        except ArpackNoConvergence:
            pass
    return float(np.abs(np.linalg.eigvals(W)).max())


def make_reservoir(
    rng: np.random.Generator,
    n_reservoir: int,
    n_inputs: int,
    n_outputs: int,
    *,
    spectral_radius_: float,
    connectivity: float,
    input_scaling: float,
    feedback_scaling: float,
    leak_rate: float = 1.0,
) -> Reservoir:
    """Draw a reservoir as Paper V of [Lokse2020] (and the authors' code) does.

    ``W``: a fraction ``connectivity`` of entries non-zero, uniform on [-0.5, 0.5], rescaled to
    the spectral radius ``spectral_radius_``; ``W_in``, ``W_fb``: dense, uniform on [-1, 1],
    times ``input_scaling`` and ``feedback_scaling``.
    """
    mask = sp.random(
        n_reservoir, n_reservoir, density=connectivity, random_state=rng, data_rvs=np.ones
    ).toarray()
    W = mask * rng.uniform(-0.5, 0.5, (n_reservoir, n_reservoir))
    rho = spectral_radius(W)
    if rho > 0:
        W *= spectral_radius_ / rho
    W_in = input_scaling * rng.uniform(-1.0, 1.0, (n_reservoir, n_inputs))
    W_fb = feedback_scaling * rng.uniform(-1.0, 1.0, (n_reservoir, n_outputs))
    return Reservoir(W, W_in, W_fb, float(leak_rate))


def harvest_states(
    reservoir: Reservoir,
    X: np.ndarray,
    teacher: np.ndarray | None = None,
    *,
    noise: float = 0.0,
    rng: np.random.Generator | None = None,
) -> np.ndarray:
    """States of a batch of series driven by ``X`` (and by ``teacher`` as feedback).

    Parameters
    ----------
    reservoir : Reservoir
    X : ndarray (n_series, n_steps, n_inputs)
    teacher : ndarray (n_series, n_steps, n_outputs), optional
        Targets fed back one step late (teacher forcing); None without feedback.
    noise : float
        Half-width of the uniform state noise (training only); 0 for none.
    rng : Generator, optional
        Source of the noise.

    Returns
    -------
    ndarray (n_series, n_steps, N)
    """
    b, T, _ = X.shape
    N = reservoir.n_reservoir
    H = np.empty((b, T, N))
    h = np.zeros((b, N))
    y_prev = None if teacher is None else np.zeros((b, teacher.shape[2]))
    for t in range(T):
        xi = rng.uniform(-noise, noise, (b, N)) if noise > 0 else None
        h = reservoir.step(h, X[:, t], y_prev, xi)
        H[:, t] = h
        if teacher is not None:
            y_prev = teacher[:, t]
    return H


@dataclass(frozen=True)
class Readout:
    """``y = [z(h), s x] W + c``: the reduction ``z`` (None = identity), the input scaling ``s``
    (None = the input is not a readout feature), the coefficients and the intercept."""

    reduction: Any
    input_scaling: float | None
    coef: np.ndarray
    intercept: np.ndarray

    def features(self, H: np.ndarray, X: np.ndarray) -> np.ndarray:
        """Readout features of a block of states (rows) and their inputs."""
        Z = H if self.reduction is None else np.asarray(self.reduction.transform(H))
        if self.input_scaling is None:
            return Z
        return np.concatenate([Z, self.input_scaling * X], axis=1)

    def __call__(self, H: np.ndarray, X: np.ndarray) -> np.ndarray:
        return self.features(H, X) @ self.coef + self.intercept


def ridge(F: np.ndarray, Y: np.ndarray, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """Ridge regression with an unpenalized intercept ([Lokse2020], Paper V, Eq. 4, on centred data).

    Returns ``coef`` (p, n_outputs) and ``intercept`` (n_outputs,) minimizing
    ``||F coef + intercept - Y||² + alpha ||coef||²``.
    """
    f_mean = F.mean(axis=0)
    y_mean = Y.mean(axis=0)
    Fc = F - f_mean
    G = np.ascontiguousarray(Fc.T) @ Fc
    G = 0.5 * (G + G.T)
    G[np.diag_indices_from(G)] += alpha
    coef = np.linalg.solve(G, Fc.T @ (Y - y_mean))
    return coef, y_mean - f_mean @ coef


def open_loop(reservoir: Reservoir, readout: Readout, X: np.ndarray) -> np.ndarray:
    """Predictions of a reservoir without feedback: all states first, then the readout.

    X (n_series, n_steps, n_inputs) -> (n_series, n_steps, n_outputs).
    """
    b, T, p = X.shape
    H = harvest_states(reservoir, X)
    Y = readout(H.reshape(b * T, -1), X.reshape(b * T, p))
    return Y.reshape(b, T, -1)


def closed_loop(
    reservoir: Reservoir,
    readout: Readout,
    X: np.ndarray,
    *,
    n_free: int = 0,
    to_input: tuple[np.ndarray, np.ndarray] | None = None,
) -> np.ndarray:
    """Predictions fed back as the next step's feedback (and, for ``n_free`` more steps, as
    the next input: the free run of a one-step-ahead model).

    Parameters
    ----------
    reservoir, readout
    X : ndarray (n_series, n_steps, n_inputs)
        Driving inputs.
    n_free : int
        Steps generated after ``X`` with ``x[t+1] = a y[t] + c`` (needs n_outputs ==
        n_inputs).
    to_input : (a, c), optional
        The map from a prediction to the next input (identity when None): the targets and the
        inputs are standardized apart.

    Returns
    -------
    ndarray (n_series, n_steps + n_free, n_outputs)
    """
    b, T, _ = X.shape
    q = readout.coef.shape[1]
    a, c = (1.0, 0.0) if to_input is None else to_input
    h = np.zeros((b, reservoir.n_reservoir))
    y = np.zeros((b, q))
    feedback = bool(np.any(reservoir.W_fb != 0))
    out = np.empty((b, T + n_free, q))
    for t in range(T + n_free):
        x = X[:, t] if t < T else a * y + c
        h = reservoir.step(h, x, y if feedback else None)
        y = readout(h, x)
        out[:, t] = y
    return out


@dataclass(frozen=True)
class EchoStateModel:
    """A fitted network: the reservoir, the readout and the standardization of inputs and
    targets. It holds only arrays and small objects, so it pickles to Dask workers, and its
    methods work on any batch of series independently of the others.
    """

    reservoir: Reservoir
    readout: Readout
    x_mean: np.ndarray
    x_scale: np.ndarray
    y_mean: np.ndarray
    y_scale: np.ndarray

    @property
    def feedback(self) -> bool:
        return bool(np.any(self.reservoir.W_fb != 0))

    def predict(self, X: np.ndarray) -> np.ndarray:
        """(n_series, n_steps, n_inputs) -> (n_series, n_steps, n_outputs), each series from
        the zero state; with feedback, the previous prediction is fed back."""
        Xs = (np.asarray(X, dtype=np.float64) - self.x_mean) / self.x_scale
        if self.feedback:
            Ys = closed_loop(self.reservoir, self.readout, Xs)
        else:
            Ys = open_loop(self.reservoir, self.readout, Xs)
        return Ys * self.y_scale + self.y_mean

    def forecast(self, X: np.ndarray, n_steps: int) -> np.ndarray:
        """Drive the reservoir with the history ``X``, then run free for ``n_steps``, each
        prediction being the next input. Returns (n_series, n_steps, n_outputs)."""
        Xs = (np.asarray(X, dtype=np.float64) - self.x_mean) / self.x_scale
        # a prediction (standardized as a target) -> the next input (standardized as an input)
        to_input = (self.y_scale / self.x_scale, (self.y_mean - self.x_mean) / self.x_scale)
        # the last history step predicts the first new value, each later step the next one
        Ys = closed_loop(self.reservoir, self.readout, Xs, n_free=n_steps - 1, to_input=to_input)
        return Ys[:, Xs.shape[1] - 1 :] * self.y_scale + self.y_mean
