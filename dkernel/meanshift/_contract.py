"""The scikit-learn estimator contract for the mean-shift, ranking and decomposition estimators.

Private to ``dkernel.meanshift``, ``dkernel.ranking`` and ``dkernel.decomposition`` until it
moves to ``dkernel._validation``. Three pieces:

* :class:`ContractMixin` re-raises scikit-learn's parameter errors as
  :class:`ParameterError`, which is both scikit-learn's ``InvalidParameterError`` and dkernel's
  :class:`~dkernel.errors.InvalidInputError` (callers that catch either keep working);
* :func:`validate_X` is ``validate_data`` for NumPy-like input (``n_features_in_``,
  ``feature_names_in_``, complex and sparse input refused, scikit-learn's message for a
  feature-count mismatch) and a metadata-only check for Dask arrays, which stay lazy;
* :func:`check_fitted` raises :class:`NotFittedError`, both scikit-learn's and dkernel's.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.exceptions import NotFittedError as SklearnNotFittedError
from sklearn.utils._param_validation import InvalidParameterError
from sklearn.utils.validation import validate_data

from dkernel import errors
from dkernel._validation import check_2d_array


class ParameterError(errors.InvalidInputError, InvalidParameterError):
    """A constructor parameter outside its declared ``_parameter_constraints``."""


class NotFittedError(errors.NotFittedError, SklearnNotFittedError):
    """An estimator used before ``fit`` (scikit-learn's and dkernel's ``NotFittedError``)."""


def is_dask(X: Any) -> bool:
    return hasattr(X, "dask") and hasattr(X, "chunks")


class ContractMixin:
    """Parameter validation through ``_parameter_constraints`` with dkernel's error class."""

    def _validate_params(self) -> None:
        try:
            super()._validate_params()  # type: ignore[misc]
        except InvalidParameterError as exc:
            raise ParameterError(str(exc)) from None


def check_fitted(estimator: Any, attribute: str) -> None:
    """Raise :class:`NotFittedError` when ``estimator`` lacks the fitted ``attribute``."""
    if not hasattr(estimator, attribute):
        raise NotFittedError(
            f"This {type(estimator).__name__} instance is not fitted yet; call 'fit' first."
        )


def validate_X(
    estimator: Any,
    X: Any,
    *,
    reset: bool,
    allow_nan: bool = False,
    min_samples: int = 2,
    dtype: Any = None,
) -> Any:
    """Validate ``X`` for ``fit`` (``reset=True``) or a later method (``reset=False``).

    NumPy-like input goes through scikit-learn's ``validate_data`` (which records or checks
    ``n_features_in_`` and ``feature_names_in_``) and then :func:`dkernel._validation.check_2d_array`
    (the working dtype — ``float32`` stays ``float32``, integers become ``float64`` unless
    ``dtype`` is given — and dkernel's NaN/inf messages). A Dask array is checked from its
    metadata only and returned lazy. Value errors are :class:`~dkernel.errors.InvalidInputError`.
    """
    owner = type(estimator).__name__
    if is_dask(X):
        if np.issubdtype(X.dtype, np.complexfloating):
            raise errors.InvalidInputError(f"{owner} does not accept complex data.")
        X = check_2d_array(X, owner, allow_nan=allow_nan, min_samples=min_samples, dtype=dtype)
        n_features = int(X.shape[1])
        if reset:
            estimator.n_features_in_ = n_features
            if hasattr(estimator, "feature_names_in_"):
                del estimator.feature_names_in_
        elif n_features != estimator.n_features_in_:
            raise errors.InvalidInputError(
                f"X has {n_features} features, but {owner} is expecting "
                f"{estimator.n_features_in_} features as input."
            )
        return X
    try:
        X = validate_data(
            estimator,
            X,
            reset=reset,
            dtype="numeric",
            ensure_all_finite=False,
            ensure_min_samples=min_samples,
        )
    except TypeError:
        raise
    except ValueError as exc:
        if isinstance(exc, errors.InvalidInputError):
            raise
        raise errors.InvalidInputError(str(exc)) from exc
    return check_2d_array(X, owner, allow_nan=allow_nan, min_samples=min_samples, dtype=dtype)
