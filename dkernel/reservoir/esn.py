"""The echo state network regularised by dimensionality reduction (Paper V of [Lokse2020],
Løkse, Bianchi & Jenssen 2017 [Lokse2017]).

A fixed random reservoir turns an input series into a series of states; PCA or kernel PCA
(Nyström, :mod:`dkernel.reservoir.reduction`) maps each state to a few components; a ridge
readout maps ``[components, input]`` to the target. Only the reduction and the readout are
fitted. The numerics are NumPy (:mod:`dkernel.reservoir._reservoir`); many series are predicted
in parallel, a chunk of series per Dask task (:func:`dkernel.reservoir.predict_series`).
"""

from __future__ import annotations

from numbers import Integral, Real
from typing import Any

import dask.array as da
import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin, _fit_context
from sklearn.metrics import r2_score
from sklearn.utils._param_validation import Interval, StrOptions

from dkernel._random import derive_rng, seed_from_random_state
from dkernel._validation import (
    ParameterConstraintsMixin,
    as_numpy,
    check_is_fitted,
    refuse_complex,
    validate_data_at_caller,
)
from dkernel.errors import InvalidInputError
from dkernel.kernels.nystrom import landmark_kernel_params
from dkernel.kernels.registry import kernel_input_tags, make_kernel
from dkernel.kernels.widths import ESN_SIGMA_FRACTION
from dkernel.reservoir._reservoir import (
    EchoStateModel,
    Readout,
    harvest_states,
    make_reservoir,
)
from dkernel.reservoir._reservoir import ridge as ridge_fit
from dkernel.reservoir.reduction import fit_kpca, fit_pca
from dkernel.runtime.shared import share, with_shared

REDUCTIONS = ("kpca", "pca")
LANDMARK_METHODS = ("kmeans++", "uniform")


_LAYOUT = (
    "X must be one series (n_steps, n_features) or many series of one length "
    "(n_series, n_steps, n_features); y the matching (n_steps,) / (n_steps, n_outputs) or "
    "(n_series, n_steps) / (n_series, n_steps, n_outputs)."
)


def _refuse_gaps(owner: str, name: str, series: np.ndarray) -> None:
    """An error naming the first NaN or infinite value of ``series`` (n_series, n_steps, ...)
    and the fix: the reservoir cannot step over a gap."""
    bad = ~np.isfinite(series)
    if bad.any():
        first = np.argwhere(bad)[0]
        where = f"step {first[1]}" + (f" of series {first[0]}" if series.shape[0] > 1 else "")
        raise InvalidInputError(
            f"{owner}: {name} holds {int(bad.sum())} NaN or infinite values (the first at "
            f"{where}). "
            + (
                "The reservoir's state carries every earlier input, so it cannot step over a gap"
                if name == "X"
                else "The readout is fitted to every step's target"
            )
            + ": fill the gaps first (for example pandas.Series.interpolate along time), or "
            "split the series at them."
        )


class EchoStateNetwork(ParameterConstraintsMixin, RegressorMixin, BaseEstimator):
    """Echo state network whose readout sees a PCA or kernel PCA of the reservoir states.

    Rows are time steps: ``fit(X, y)`` learns ``y[t]`` from ``x[0..t]`` (to forecast ``h``
    steps ahead, ``y[t] = x[t + h]``, see :func:`dkernel.reservoir.series.forecast_pairs`). Every
    series starts from the zero state; its first ``washout`` steps train nothing.

    Parameters
    ----------
    n_reservoir : int
        Reservoir neurons N_r.
    spectral_radius : float
        Spectral radius ρ the reservoir matrix is scaled to.
    connectivity : float
        Fraction of non-zero reservoir weights.
    input_scaling : float
        ω_i: scale of the input weights (on standardized inputs); also the input's scale as a
        readout feature.
    feedback_scaling : float
        ω_f: scale of the output-to-reservoir weights. 0 (default) for none; > 0 feeds the
        target back one step late in training (teacher forcing) and the network's own
        prediction in ``predict`` (a step-by-step loop: slower, above all with kernel PCA).
    leak_rate : float
        a in ``h = (1 - a) h + a tanh(...)``; 1 (the paper's) is no leak.
    noise : float
        Half-width of the uniform noise added to the states in training only (ξ).
    washout : int
        Steps dropped from the start of every training series (the transient); at most half
        of a series.
    reduction : {'kpca', 'pca'} or None
        The states' reduction; None feeds the readout the states themselves (a plain ESN).
    n_components : int
        Components kept by the reduction (at most the rank the states allow).
    kernel : str or callable
        Kernel of the kernel PCA (see :func:`dkernel.kernels.registry.make_kernel`).
    kernel_params : dict, optional
    sigma : float, optional
        RBF width; ``sigma_fraction`` × the median distance between states when None.
    sigma_fraction : float
        See ``sigma``.
    n_landmarks : int
        Nyström landmarks among the training states (every state when there are fewer: exact
        kernel PCA).
    landmarks : {'kmeans++', 'uniform'}
    ridge : float
        Ridge penalty λ of the readout (scikit-learn's ``Ridge(alpha=...)``; ``alpha`` is the
        restart probability elsewhere in dkernel).
    include_input : bool
        Whether the input is a readout feature besides the (reduced) state ([Lokse2020], Paper V, Eq. 2).
    random_state : int, optional
        Seed of the reservoir, the noise and the landmarks.

    Attributes
    ----------
    model_ : EchoStateModel
        The fitted network (reservoir, reduction, readout, standardization).
    n_features_in_ : int
    n_outputs_ : int
    n_components_ : int or None
        Components actually kept.
    washout_ : int
        Steps actually dropped per training series.
    train_score_ : float
        R² of the teacher-forced in-sample fit (after the washout).

    See Also
    --------
    dkernel.reservoir.predict_series : Every row of a Dask array of series, a chunk per task.
    dkernel.NystromEmbedding : The same Nyström kernel PCA as a transformer.

    References
    ----------
    Løkse, Bianchi & Jenssen (2017), "Training echo state networks with regularization through
    dimensionality reduction", *Cognitive Computation* 9(3) [Lokse2017], Paper V of [Lokse2020]; Jaeger (2001)
    [Jaeger2001]: echo state networks.

    Examples
    --------
    >>> from dkernel.reservoir import EchoStateNetwork, forecast_pairs, mso
    >>> X, y = forecast_pairs(mso(1200)[:, None], 1)
    >>> esn = EchoStateNetwork(200, n_components=60, random_state=0).fit(X[:1000], y[:1000])
    >>> esn.predict(X[1000:]).shape
    (199, 1)
    """

    #: scikit-learn's checks that fail by design (tests/test_estimator_checks.py)
    _expected_failed_checks = {
        "check_methods_sample_order_invariance": "rows are time steps: a step's prediction "
        "depends on the steps before it",
        "check_methods_subset_invariance": "rows are time steps: a step's prediction depends "
        "on the steps before it",
    }

    _parameter_constraints: dict = {
        "n_reservoir": [Interval(Integral, 1, None, closed="left")],
        "spectral_radius": [Interval(Real, 0, None, closed="neither")],
        "connectivity": [Interval(Real, 0, 1, closed="right")],
        "input_scaling": [Interval(Real, 0, None, closed="left")],
        "feedback_scaling": [Interval(Real, 0, None, closed="left")],
        "leak_rate": [Interval(Real, 0, 1, closed="right")],
        "noise": [Interval(Real, 0, None, closed="left")],
        "washout": [Interval(Integral, 0, None, closed="left")],
        "reduction": [StrOptions(set(REDUCTIONS)), None],
        "n_components": [Interval(Integral, 1, None, closed="left")],
        # names are checked by make_kernel, whose message lists the registered ones
        "kernel": [str, callable],
        "kernel_params": [dict, None],
        "sigma": [Interval(Real, 0, None, closed="neither"), None],
        "sigma_fraction": [Interval(Real, 0, None, closed="neither")],
        "n_landmarks": [Interval(Integral, 1, None, closed="left")],
        "landmarks": [StrOptions(set(LANDMARK_METHODS))],
        "ridge": [Interval(Real, 0, None, closed="left")],
        "include_input": ["boolean"],
        "random_state": ["random_state", np.random.Generator],
    }

    def __init__(
        self,
        n_reservoir: int = 400,
        *,
        spectral_radius: float = 1.0,
        connectivity: float = 0.25,
        input_scaling: float = 0.2,
        feedback_scaling: float = 0.0,
        leak_rate: float = 1.0,
        noise: float = 0.0,
        washout: int = 100,
        reduction: str | None = "kpca",
        n_components: int = 300,
        kernel: Any = "rbf",
        kernel_params: dict | None = None,
        sigma: float | None = None,
        sigma_fraction: float = ESN_SIGMA_FRACTION,
        n_landmarks: int = 1000,
        landmarks: str = "uniform",
        ridge: float = 1e-3,
        include_input: bool = True,
        random_state: int | None = None,
    ) -> None:
        self.n_reservoir = n_reservoir
        self.spectral_radius = spectral_radius
        self.connectivity = connectivity
        self.input_scaling = input_scaling
        self.feedback_scaling = feedback_scaling
        self.leak_rate = leak_rate
        self.noise = noise
        self.washout = washout
        self.reduction = reduction
        self.n_components = n_components
        self.kernel = kernel
        self.kernel_params = kernel_params
        self.sigma = sigma
        self.sigma_fraction = sigma_fraction
        self.n_landmarks = n_landmarks
        self.landmarks = landmarks
        self.ridge = ridge
        self.include_input = include_input
        self.random_state = random_state

    def __sklearn_tags__(self):
        tags = kernel_input_tags(super().__sklearn_tags__(), self.kernel)
        tags.target_tags.multi_output = True
        tags.target_tags.single_output = True
        return tags

    # -- validation ------------------------------------------------------------------------
    def _series(self, X: Any, y: Any = None, *, reset: bool) -> tuple:
        """``X`` as (n_series, n_steps, n_features) and ``y`` as (n_series, n_steps, n_outputs)
        (None when not given), plus whether the input was one 2-D series."""
        owner = type(self).__name__
        X = as_numpy(X) if hasattr(X, "dask") else X
        ndim = X.ndim if hasattr(X, "ndim") else np.asarray(X).ndim
        if ndim == 3:
            X = np.asarray(X)
            if not np.issubdtype(X.dtype, np.number) or np.issubdtype(X.dtype, np.complexfloating):
                raise InvalidInputError(f"{owner} needs real numeric series; got dtype {X.dtype}.")
            X = X.astype(np.float64)
            if min(X.shape) < 1 or X.shape[1] < 2:
                raise InvalidInputError(
                    f"{owner} needs series of at least 2 steps; got shape {X.shape}. {_LAYOUT}"
                )
            _refuse_gaps(owner, "X", X)
            if reset:
                self.n_features_in_ = X.shape[2]
            elif X.shape[2] != self.n_features_in_:
                raise InvalidInputError(
                    f"X has {X.shape[2]} features, but {owner} is expecting "
                    f"{self.n_features_in_} features as input."
                )
            if y is None:
                return X, None, False
            y = np.asarray(y, dtype=np.float64)
            if y.ndim == 2:
                y = y[:, :, None]
            if y.ndim != 3 or y.shape[:2] != X.shape[:2]:
                raise InvalidInputError(
                    f"{owner}: y of shape {y.shape} does not match X of shape {X.shape}. {_LAYOUT}"
                )
            _refuse_gaps(owner, "y", y)
            return X, y, False
        if ndim == 1:
            raise InvalidInputError(
                f"Expected 2D array, got 1D array instead. Reshape your data with "
                f"X.reshape(-1, 1) for one univariate series. {_LAYOUT}"
            )
        if ndim != 2:
            raise InvalidInputError(f"{owner} got X with {ndim} dimension(s). {_LAYOUT}")
        for name, A in (("X", X), ("y", y)):
            refuse_complex(A, owner, name)
            try:
                values = None if A is None else np.asarray(A, dtype=np.float64)
            except (TypeError, ValueError):  # not numbers: validate_data names the problem
                values = None
            if values is not None:
                _refuse_gaps(owner, name, values[None] if values.ndim <= 2 else values)
        try:
            if y is None and not reset:
                X = validate_data_at_caller(
                    self, X, reset=False, dtype=np.float64, ensure_min_samples=2
                )
            else:
                X, y = validate_data_at_caller(
                    self,
                    X,
                    y,
                    reset=reset,
                    dtype=np.float64,
                    multi_output=True,
                    y_numeric=True,
                    ensure_min_samples=2,
                )
        except ValueError as exc:
            if isinstance(exc, InvalidInputError):
                raise
            raise InvalidInputError(str(exc)) from exc
        if y is None:
            return X[None], None, True
        y = np.asarray(y, dtype=np.float64)
        return X[None], y.reshape(1, X.shape[0], -1), True

    # -- fit -------------------------------------------------------------------------------
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X: Any, y: Any) -> EchoStateNetwork:
        """Harvest the states of the training series, fit the reduction and the readout.

        Parameters
        ----------
        X : array (n_steps, n_features) or (n_series, n_steps, n_features)
            Input series (a Dask array is read into memory).
        y : array (n_steps,), (n_steps, n_outputs), (n_series, n_steps) or
            (n_series, n_steps, n_outputs)
            Targets, aligned with X step by step.
        """
        y_ndim = None if y is None else np.asarray(y).ndim
        X, Y, single = self._series(X, y, reset=True)
        self._single_output = y_ndim == (1 if single else 2)
        seed = seed_from_random_state(self.random_state)
        b, T, p = X.shape
        q = Y.shape[2]
        x_mean, x_scale = _standardizer(X)
        y_mean, y_scale = _standardizer(Y)
        Xs, Ys = (X - x_mean) / x_scale, (Y - y_mean) / y_scale
        reservoir = make_reservoir(
            derive_rng(seed, "reservoir"),
            self.n_reservoir,
            p,
            q,
            spectral_radius_=self.spectral_radius,
            connectivity=self.connectivity,
            input_scaling=self.input_scaling,
            feedback_scaling=self.feedback_scaling,
            leak_rate=self.leak_rate,
        )
        H = harvest_states(
            reservoir,
            Xs,
            Ys if self.feedback_scaling > 0 else None,
            noise=self.noise,
            rng=derive_rng(seed, "noise"),
        )
        w = min(self.washout, T // 2)
        H = H[:, w:].reshape(-1, self.n_reservoir)
        Xt = Xs[:, w:].reshape(-1, p)
        Yt = Ys[:, w:].reshape(-1, q)
        reduction = self._fit_reduction(H, seed)
        scaling = self.input_scaling if self.include_input else None
        F = Readout(reduction, scaling, np.empty(0), np.empty(0)).features(H, Xt)
        coef, intercept = ridge_fit(F, Yt, self.ridge)
        readout = Readout(reduction, scaling, coef, intercept)
        self.model_ = EchoStateModel(reservoir, readout, x_mean, x_scale, y_mean, y_scale)
        self.n_outputs_ = q
        self.washout_ = w
        self.n_components_ = None if reduction is None else int(reduction.components.shape[1])
        self.train_score_ = float(r2_score(Yt, F @ coef + intercept))
        return self

    def _fit_reduction(self, H: np.ndarray, seed: int | None) -> Any:
        if self.reduction is None:
            return None
        if self.reduction == "pca":
            return fit_pca(H, self.n_components, seed=seed)
        params = landmark_kernel_params(
            self.kernel,
            self.kernel_params,
            seed=seed,
            sigma_fraction=self.sigma_fraction,
            sigma=self.sigma,
        )
        try:
            kernel = make_kernel(self.kernel, H, **params)
            return fit_kpca(
                H,
                self.n_components,
                kernel,
                n_landmarks=self.n_landmarks,
                landmarks=self.landmarks,
                seed=seed,
            )
        except InvalidInputError as exc:
            # the kernel sees the states, not the user's X
            raise InvalidInputError(
                f"The kernel PCA of {type(self).__name__} runs on the reservoir states, which lie "
                f"in (-1, 1) (X here means them): {exc}"
            ) from exc

    # -- prediction ------------------------------------------------------------------------
    def _shape_out(self, Y: np.ndarray, single: bool) -> np.ndarray:
        Y = Y[0] if single else Y
        return Y[..., 0] if self._single_output else Y

    def predict(self, X: Any) -> Any:
        """Predict the target at every step of new series (each from the zero state).

        Parameters
        ----------
        X : array (n_steps, n_features) or (n_series, n_steps, n_features)
            A Dask array of many series stays lazy: one task per chunk of series
            (:func:`dkernel.reservoir.predict_series`).

        Returns
        -------
        ndarray or dask array
            (n_steps,) or (n_steps, n_outputs); (n_series, n_steps[, n_outputs]) for many.
        """
        check_is_fitted(self, "model_")
        if hasattr(X, "dask") and X.ndim == 3:
            out = predict_series(self, X)
            return out[..., 0] if self._single_output else out
        X, _, single = self._series(X, reset=False)
        return self._shape_out(self.model_.predict(X), single)

    def forecast(self, X: Any, n_steps: int) -> np.ndarray:
        """Run free for ``n_steps`` after the history ``X``, each prediction the next input.

        For a network fitted to predict the next step (``y[t] = x[t + 1]``, so
        n_outputs == n_features); the history warms the reservoir up (give at least
        ``washout`` steps).

        Parameters
        ----------
        X : array (n_steps_history, n_features) or (n_series, n_steps_history, n_features)
        n_steps : int

        Returns
        -------
        ndarray (n_steps,) / (n_steps, n_outputs), or (n_series, n_steps[, n_outputs])
        """
        check_is_fitted(self, "model_")
        if isinstance(n_steps, bool) or not isinstance(n_steps, Integral) or n_steps < 1:
            raise InvalidInputError(
                f"The 'n_steps' argument of forecast must be an int >= 1. Got {n_steps!r}."
            )
        if self.n_outputs_ != self.n_features_in_:
            raise InvalidInputError(
                f"forecast feeds each prediction back as the next input, so it needs as many "
                f"outputs as input features; this network has {self.n_outputs_} output(s) and "
                f"{self.n_features_in_} feature(s). Fit it with y[t] = X[t + 1]."
            )
        X, _, single = self._series(X, reset=False)
        return self._shape_out(self.model_.forecast(X, int(n_steps)), single)

    def score(self, X: Any, y: Any, sample_weight: Any = None) -> float:
        """R² of ``predict(X)`` against ``y`` over every step (and series).

        Parameters
        ----------
        X, y : arrays as in :meth:`fit`
        sample_weight : array, optional
            One weight per step (2-D X only).
        """
        pred = np.asarray(self.predict(X))
        y = np.asarray(y, dtype=np.float64)
        if pred.ndim == 3 or (pred.ndim == 2 and np.asarray(X).ndim == 3):
            pred, y = pred.reshape(-1, self.n_outputs_), y.reshape(-1, self.n_outputs_)
        return float(r2_score(y, pred, sample_weight=sample_weight))


def _standardizer(A: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and standard deviation of every channel over all series and steps (1 when 0)."""
    flat = A.reshape(-1, A.shape[2])
    mean, scale = flat.mean(axis=0), flat.std(axis=0)
    return mean, np.where(scale > 0, scale, 1.0)


def _predict_block(block: np.ndarray, model: EchoStateModel) -> np.ndarray:
    return model.predict(block)


def predict_series(esn: EchoStateNetwork, X: Any) -> Any:
    """Predict every series (row) of a Dask array, one task per chunk of rows.

    The series are independent and each starts from the zero state, so the result does not
    depend on the chunking or on the workers (to the last bits of BLAS blocking).

    Parameters
    ----------
    esn : EchoStateNetwork
        Fitted.
    X : dask array or ndarray (n_series, n_steps) or (n_series, n_steps, n_features)
        Rows are series (every pixel's time series of a cube, flattened); 2-D for univariate
        series. Chunks along the rows are kept; the time axis is made one chunk.

    Returns
    -------
    dask array (n_series, n_steps) or (n_series, n_steps, n_outputs)
        Lazy; 2-D for univariate input and a single-output network.
    """
    check_is_fitted(esn, "model_")
    X = X if isinstance(X, da.Array) else da.from_array(np.asarray(X))
    univariate = X.ndim == 2
    if univariate:
        X = X[:, :, None]
    if X.ndim != 3:
        raise InvalidInputError(
            f"predict_series needs a (n_series, n_steps[, n_features]) array; got {X.ndim} "
            "dimension(s)."
        )
    if X.shape[2] != esn.n_features_in_:
        raise InvalidInputError(
            f"X has {X.shape[2]} features, but {type(esn).__name__} is expecting "
            f"{esn.n_features_in_} features as input."
        )
    if not np.issubdtype(X.dtype, np.number) or np.issubdtype(X.dtype, np.complexfloating):
        raise InvalidInputError(f"predict_series needs real numeric series; got {X.dtype}.")
    X = X.rechunk({1: -1, 2: -1})
    q = esn.n_outputs_
    out = X.map_blocks(
        with_shared(_predict_block),
        share(esn.model_, "esn-model"),
        chunks=(X.chunks[0], X.chunks[1], (q,)),
        dtype=np.float64,
        meta=np.empty((0, 0, 0), dtype=np.float64),
    )
    return out[:, :, 0] if univariate and q == 1 else out
