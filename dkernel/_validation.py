"""Parameter and array validation shared by estimators and job steps.

Messages follow one template: ``The 'bandwidth' parameter of MeanShift must be a
float > 0. Got -1 instead.``
"""

from __future__ import annotations

import numbers
import threading
import warnings
from typing import Any

import numpy as np
from sklearn.exceptions import NotFittedError as SklearnNotFittedError
from sklearn.utils._param_validation import InvalidParameterError
from sklearn.utils.validation import validate_data

from dkernel.errors import InvalidInputError, NotFittedError, warn_caller


class EstimatorNotFittedError(NotFittedError, SklearnNotFittedError):
    """dkernel's :class:`~dkernel.errors.NotFittedError` that is also scikit-learn's.

    ``except sklearn.exceptions.NotFittedError`` (meta-estimators, the common checks) and
    ``except dkernel.errors.NotFittedError`` both catch it.
    """


class ParameterError(InvalidInputError, InvalidParameterError):
    """A constructor parameter outside its declared ``_parameter_constraints``.

    Both dkernel's :class:`~dkernel.errors.InvalidInputError` and scikit-learn's
    ``InvalidParameterError``, with scikit-learn's message.
    """


class ParameterConstraintsMixin:
    """Re-raise scikit-learn's parameter-validation errors as :class:`ParameterError`.

    Put it before ``BaseEstimator``; ``sklearn.base._fit_context`` calls
    ``_validate_params`` against the class's ``_parameter_constraints``.
    """

    def _validate_params(self) -> None:
        try:
            super()._validate_params()  # type: ignore[misc]
        except InvalidParameterError as exc:
            if isinstance(exc, ParameterError):
                raise
            raise ParameterError(str(exc)) from None


def is_dask_array(X: Any) -> bool:
    """Whether ``X`` is a Dask array (checked by duck typing, without importing Dask)."""
    return hasattr(X, "dask") and hasattr(X, "chunks")


def as_numpy(X: Any, dtype: Any = None) -> np.ndarray:
    """``X`` as a NumPy array: a Dask array (or other lazy collection) is computed first.

    The one Dask → NumPy conversion of the package; callers use it only where the data is
    known to fit in memory (samples, per-partition or per-seed results).
    """
    if hasattr(X, "dask") and hasattr(X, "compute"):
        X = X.compute()
    return np.asarray(X, dtype=dtype)


def validate_input(
    estimator: Any,
    X: Any,
    *,
    reset: bool,
    allow_nan: bool = False,
    min_samples: int = 1,
    dtype: Any = None,
    nan_fix: str | None = None,
) -> Any:
    """Validate ``X`` for ``fit`` (``reset=True``) or ``predict`` / ``transform``.

    NumPy-like input goes through scikit-learn's ``validate_data`` (which sets or checks
    ``n_features_in_`` and ``feature_names_in_`` and refuses complex, sparse and 1-D data),
    then through :func:`check_2d_array` for dkernel's own dtype rule (float32 stays float32,
    integers up to 16 bits become float32, others float64) and messages. Dask arrays are
    checked from metadata only and stay lazy: ``validate_data`` would convert them to NumPy.
    ``dtype`` overrides the working dtype and ``nan_fix`` the fix a NaN error names (see
    :func:`check_2d_array`).
    """
    owner = type(estimator).__name__
    refuse_complex(X, owner)
    if is_dask_array(X):
        X = check_2d_array(
            X, owner, allow_nan=allow_nan, min_samples=min_samples, dtype=dtype, nan_fix=nan_fix
        )
        try:
            validate_data_at_caller(estimator, X, reset=reset, skip_check_array=True)
        except ValueError as exc:
            raise InvalidInputError(str(exc)) from exc
        return X
    try:
        X = validate_data_at_caller(
            estimator,
            X,
            reset=reset,
            dtype="numeric",
            ensure_all_finite=False,
            ensure_min_samples=min_samples,
        )
    except ValueError as exc:
        if isinstance(exc, InvalidInputError):
            raise
        # scikit-learn's message, as dkernel's exception (still a ValueError)
        raise InvalidInputError(str(exc)) from exc
    return check_2d_array(
        X, owner, allow_nan=allow_nan, min_samples=min_samples, dtype=dtype, nan_fix=nan_fix
    )


def refuse_complex(X: Any, owner: str, name: str = "X") -> None:
    """Refuse complex input by name and dtype, with the fix (scikit-learn's message, whose
    first words these are, prints the whole array); checked from the dtype alone, so a Dask array
    stays lazy and a list is left to scikit-learn's check."""
    dtype = getattr(X, "dtype", None)
    if dtype is not None and np.issubdtype(dtype, np.complexfloating):
        raise InvalidInputError(
            f"Complex data not supported: {owner} got {name} of dtype {dtype}. Pass real "
            f"values: the real part ({name}.real) or the magnitude (np.abs({name})), "
            "whichever you mean."
        )


def validate_data_at_caller(estimator: Any, *args: Any, **kwargs: Any) -> Any:
    """scikit-learn's ``validate_data``, with its warnings ("X does not have valid feature
    names, but ... was fitted with feature names") raised at the user's line
    (:func:`~dkernel.errors.warn_caller`), not at ``sklearn/utils/validation.py``.

    Only in the main thread: ``warnings.catch_warnings`` swaps process-wide state, and a Dask
    task validating its block in a worker thread would catch (and move) the warnings of every
    other thread.
    """
    if threading.current_thread() is not threading.main_thread():
        return validate_data(estimator, *args, **kwargs)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        validated = validate_data(estimator, *args, **kwargs)
    for w in caught:
        warn_caller(str(w.message), w.category)
    return validated


def check_scalar(
    value: Any,
    name: str,
    owner: str,
    *,
    kind: type | tuple[type, ...] = numbers.Real,
    low: float | None = None,
    high: float | None = None,
    low_inclusive: bool = True,
    high_inclusive: bool = True,
    allow_none: bool = False,
) -> Any:
    """Check a scalar parameter and raise :class:`InvalidInputError` with a clear message."""
    if value is None and allow_none:
        return value
    kinds = kind if isinstance(kind, tuple) else (kind,)
    is_bool = isinstance(value, bool | np.bool_)
    if is_bool or not isinstance(value, kinds):
        raise InvalidInputError(
            f"The '{name}' parameter of {owner} must be {_describe(kinds, low, high, low_inclusive, high_inclusive)}. "
            f"Got {value!r} instead."
        )
    bad = (
        (low is not None and (value < low if low_inclusive else value <= low))
        or (high is not None and (value > high if high_inclusive else value >= high))
        or (isinstance(value, numbers.Real) and not np.isfinite(value))
    )
    if bad:
        raise InvalidInputError(
            f"The '{name}' parameter of {owner} must be {_describe(kinds, low, high, low_inclusive, high_inclusive)}. "
            f"Got {value!r} instead."
        )
    return value


def check_options(value: Any, name: str, owner: str, options: tuple | list) -> Any:
    """Check that ``value`` is one of ``options``."""
    if value not in options:
        listed = ", ".join(repr(o) for o in options)
        raise InvalidInputError(
            f"The '{name}' parameter of {owner} must be one of {listed}. Got {value!r} instead."
        )
    return value


def resolve_n_components(
    owner: str, n_samples: int, n_clusters: int, n_components: int | None
) -> int:
    """``n_components`` (``n_clusters`` when None), after checking both against ``n_samples``.

    Raises
    ------
    InvalidInputError
        When either exceeds ``n_samples``.
    """
    k = n_clusters if n_components is None else n_components
    for name, value in (("n_clusters", n_clusters), ("n_components", k)):
        if value > n_samples:
            raise InvalidInputError(
                f"The '{name}' parameter of {owner} must be <= n_samples ({n_samples}). "
                f"Got {value} instead."
            )
    return k


def _describe(kinds, low, high, low_inclusive, high_inclusive) -> str:
    if all(issubclass(k, numbers.Integral) for k in kinds):
        what = "an int"
    else:
        what = "a float"
    parts = []
    if low is not None:
        parts.append(f"{'>=' if low_inclusive else '>'} {low}")
    if high is not None:
        parts.append(f"{'<=' if high_inclusive else '<'} {high}")
    return what + (" " + " and ".join(parts) if parts else "")


def check_2d_array(
    X: Any,
    owner: str,
    *,
    allow_nan: bool = False,
    min_samples: int = 2,
    dtype: Any = None,
    nan_fix: str | None = None,
) -> Any:
    """Validate a 2-D numeric NumPy or Dask array from metadata, without computing (a Dask
    array split along its features is joined into whole rows).

    NaN/inf are checked only for NumPy input (checking Dask input would need a pass over the
    data; the graph builders check per chunk where it matters). ``nan_fix``: the fix a NaN
    error names (default: impute, or a method that handles missing values).
    """
    if is_dask_array(X):
        if X.ndim != 2:
            raise InvalidInputError(
                f"{owner} expects a 2-D array of shape (n_samples, n_features); got {X.ndim}-D "
                f"with shape {X.shape}. Reshape 1-D data with X.reshape(-1, 1)."
            )
        if any(np.isnan(c) for c in X.shape):
            raise InvalidInputError(
                f"{owner} needs a Dask array with known chunk sizes; call X.compute_chunk_sizes() first."
            )
        if len(X.chunks[1]) != 1:
            # every method reads whole rows: the row blocks keep their sizes
            X = X.rechunk({1: -1})
        _check_dtype_and_size(X.dtype, X.shape, owner, min_samples)
        return X if dtype is None else X.astype(dtype)
    try:
        arr = np.asarray(X)
    except Exception as exc:  # pragma: no cover - exotic containers
        raise InvalidInputError(f"{owner} could not convert the input to an array: {exc}") from exc
    if arr.ndim != 2:
        raise InvalidInputError(
            f"{owner} expects a 2-D array of shape (n_samples, n_features); got {arr.ndim}-D "
            f"with shape {arr.shape}. Reshape 1-D data with X.reshape(-1, 1)."
        )
    _check_dtype_and_size(arr.dtype, arr.shape, owner, min_samples)
    arr = arr.astype(dtype if dtype is not None else np.result_type(arr.dtype, np.float32))
    if np.isinf(arr).any():
        fix = "replace them or mark them NaN (nodata)" if allow_nan else "replace them"
        raise InvalidInputError(f"{owner} got infinite values in X; {fix}.")
    if not allow_nan and np.isnan(arr).any():
        raise InvalidInputError(
            f"{owner} does not accept missing values (NaN); {int(np.isnan(arr).sum())} found. "
            + (nan_fix or "Impute them first or use a method that handles them (pck-spectral).")
        )
    return arr


def _check_dtype_and_size(dtype, shape, owner, min_samples) -> None:
    if not (np.issubdtype(dtype, np.number) or np.issubdtype(dtype, np.bool_)):
        raise InvalidInputError(
            f"{owner} needs numeric data; got dtype {dtype}. Convert or drop non-numeric columns."
        )
    if shape[0] < min_samples:
        raise InvalidInputError(f"{owner} needs at least {min_samples} samples; got {shape[0]}.")
    if shape[1] < 1:
        raise InvalidInputError(f"{owner} needs at least one feature; got shape {shape}.")


def check_is_fitted(estimator: Any, attribute: str) -> None:
    """Raise :class:`EstimatorNotFittedError` when ``estimator`` lacks the fitted ``attribute``."""
    if not hasattr(estimator, attribute):
        raise EstimatorNotFittedError(
            f"This {type(estimator).__name__} instance is not fitted yet; call 'fit' first."
        )


def aligned(a: Any) -> Any:
    """``a`` itself, or an aligned copy when its buffer is not aligned to its item size.

    Arrays that come back from ``dask.distributed`` (results, or chunks moved between
    workers) may sit at any byte offset in a message buffer. NumPy's matmul hands only
    aligned arrays to BLAS and multiplies unaligned ones with its own loop, whose rounding
    differs, so the same inputs would give results that differ in the last bits depending
    on how they travelled. Non-arrays pass through unchanged.
    """
    if isinstance(a, np.ndarray) and not a.flags.aligned:
        return np.require(a, requirements="A")
    return a


def max_samples_constraint(least: int = 1) -> list:
    """scikit-learn's ``max_samples`` constraints: a count (an int >= ``least``) or a fraction
    of the rows (a float in (0, 1]); ``1`` is one row, ``1.0`` all of them."""
    from numbers import Integral

    from sklearn.utils._param_validation import Interval, RealNotInt

    return [
        Interval(Integral, least, None, closed="left"),
        Interval(RealNotInt, 0, 1, closed="right"),
    ]
