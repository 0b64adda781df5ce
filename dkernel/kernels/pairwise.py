"""scikit-learn's kernels by their scikit-learn names, evaluated block by block.

Numeric layer: NumPy and scikit-learn on in-memory blocks, no Dask, no I/O.

The names of :data:`sklearn.metrics.pairwise.PAIRWISE_KERNEL_FUNCTIONS` that dkernel has no
kernel of its own for — ``linear``, ``poly`` (``polynomial``), ``sigmoid``, ``laplacian``,
``chi2`` and ``additive_chi2`` — are evaluated by
:func:`sklearn.metrics.pairwise.pairwise_kernels` on each block, with scikit-learn's parameters
(``gamma``, ``degree``, ``coef0``), their meanings and their defaults: ``gamma=None`` is
``1 / n_features`` (``1.0`` for ``chi2``), ``degree=3``, ``coef0=1``. The two names dkernel
already had keep their own faster blocks, with values equal to scikit-learn's:
``cosine`` (:mod:`dkernel.kernels.cosine`) and ``rbf`` (:mod:`dkernel.kernels.rbf`), whose
width is ``sigma`` with ``gamma = 1 / (2 sigma^2)``; ``rbf`` also takes scikit-learn's
``gamma``, but when neither is given its width is dkernel's rule of thumb, not
scikit-learn's ``gamma = 1 / n_features``.

Properties a method may need (checked by the methods that need them, not here):

* values ``>= 0`` (random walks, degrees): ``rbf``, ``laplacian``, ``chi2`` (:data:`POSITIVE`);
  ``linear``, ``poly``, ``sigmoid`` and ``cosine`` can be negative, ``additive_chi2`` is
  ``<= 0``;
* non-negative *data*: ``chi2`` and ``additive_chi2`` (histograms, counts) refuse negative
  entries with an error naming that;
* a log form (row normalisation as a softmax): ``laplacian`` (``-gamma ||x - y||_1``) and
  ``chi2`` (``gamma`` times ``additive_chi2``), here from scikit-learn's own distances.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from numbers import Real
from typing import Any

import numpy as np
from sklearn.metrics.pairwise import (
    KERNEL_PARAMS,
    additive_chi2_kernel,
    manhattan_distances,
    pairwise_kernels,
)

from dkernel.errors import InvalidInputError

#: The scikit-learn kernel names evaluated by scikit-learn (``rbf`` and ``cosine`` are
#: dkernel's own blocks, equal in value).
SKLEARN_KERNELS = ("linear", "poly", "polynomial", "sigmoid", "laplacian", "chi2", "additive_chi2")
#: Kernels of :data:`SKLEARN_KERNELS` whose values are all > 0.
POSITIVE = frozenset({"laplacian", "chi2"})
#: Kernels defined on non-negative data only (histograms, counts).
NONNEGATIVE_DATA = frozenset({"chi2", "additive_chi2"})
#: Kernels of :data:`SKLEARN_KERNELS` with a log form (:func:`pairwise_log_block`).
LOG_FORM = frozenset({"laplacian", "chi2"})
#: Kernels whose ``gamma`` is a width (must be > 0); for ``poly`` and ``sigmoid`` it is a
#: scale (>= 0).
WIDTH_GAMMA = frozenset({"rbf", "laplacian", "chi2"})


def kernel_params(name: str) -> frozenset[str]:
    """The parameters scikit-learn's kernel ``name`` takes (``KERNEL_PARAMS``)."""
    return frozenset(KERNEL_PARAMS[name])


def _check_number(name: str, key: str, value: Any, low: float, closed: bool) -> float:
    ok = isinstance(value, Real) and not isinstance(value, bool) and math.isfinite(value)
    if ok:
        ok = value >= low if closed else value > low
    if not ok:
        bound = f">= {low:g}" if closed else f"> {low:g}"
        raise InvalidInputError(
            f"The {key!r} parameter of the {name} kernel must be a finite number {bound}. Got "
            f"{value!r} instead."
        )
    return float(value)


def resolve_params(name: str, n_features: int | None, **params: Any) -> dict[str, Any]:
    """scikit-learn's parameters of kernel ``name``, checked, with its defaults filled in.

    ``gamma=None`` becomes ``1 / n_features`` (``1.0`` for ``chi2``), as scikit-learn does,
    when ``n_features`` is known; otherwise it stays None for scikit-learn to fill per block
    (the same value, as every block has the training data's features).

    Raises
    ------
    InvalidInputError
        A parameter the kernel does not take, or a value out of its range.
    """
    allowed = kernel_params(name)
    unknown = sorted(set(params) - allowed)
    if unknown:
        raise InvalidInputError(
            f"unknown parameters {unknown} for the {name!r} kernel. Valid parameters: "
            f"{', '.join(sorted(allowed)) or '(none)'} (scikit-learn's)."
        )
    out: dict[str, Any] = {}
    if "gamma" in allowed:
        gamma = params.get("gamma")
        if gamma is None and name == "chi2":
            gamma = 1.0
        elif gamma is None and n_features:
            gamma = 1.0 / n_features
        if gamma is not None:
            gamma = _check_number(name, "gamma", gamma, 0.0, closed=name not in WIDTH_GAMMA)
        out["gamma"] = gamma
    # degree and coef0 keep their type (an int stays an int in the fitted kernel's params)
    if "degree" in allowed:
        out["degree"] = params.get("degree", 3)
        _check_number(name, "degree", out["degree"], 1.0, closed=True)
    if "coef0" in allowed:
        out["coef0"] = params.get("coef0", 1)
        _check_number(name, "coef0", out["coef0"], -np.inf, closed=False)
    return out


def check_nonnegative_data(name: str, *arrays: Any) -> None:
    """Refuse negative entries for the kernels defined on non-negative data."""
    if name not in NONNEGATIVE_DATA:
        return
    for A in arrays:
        A = np.asarray(A)
        if A.size and np.nanmin(A) < 0:
            raise InvalidInputError(
                f"The {name} kernel is defined for non-negative data (histograms, counts), but X "
                f"has negative values (smallest {float(np.nanmin(A)):.6g}). Shift or rescale "
                "the features to be >= 0, or use another kernel."
            )


def pairwise_block(
    A: Any,
    B: Any,
    *,
    name: str,
    params: Mapping[str, Any],
    dtype: Any = np.float64,
) -> np.ndarray:
    """``k(a, b)`` for every row pair of ``A`` and ``B`` by scikit-learn's ``pairwise_kernels``.

    Examples
    --------
    >>> import numpy as np
    >>> pairwise_block(np.ones((1, 2)), np.ones((1, 2)), name="linear", params={})
    array([[2.]])
    """
    check_nonnegative_data(name, A, B)
    metric = "poly" if name == "polynomial" else name
    out = pairwise_kernels(np.asarray(A), np.asarray(B), metric=metric, **params)
    return np.asarray(out, dtype=dtype)


def pairwise_log_block(A: Any, B: Any, *, name: str, gamma: float | None) -> np.ndarray:
    """``log k(a, b)`` in float64 for the kernels with a log form (:data:`LOG_FORM`).

    ``laplacian``: ``-gamma ||a - b||_1``; ``chi2``: ``gamma`` times scikit-learn's
    ``additive_chi2_kernel`` (``-sum (a - b)^2 / (a + b)``).

    Examples
    --------
    >>> import numpy as np
    >>> pairwise_log_block(np.zeros((1, 2)), np.ones((1, 2)), name="laplacian", gamma=0.5)
    array([[-1.]])
    """
    if name not in LOG_FORM:
        raise InvalidInputError(f"the {name} kernel has no log form.")
    A = np.asarray(A, dtype=np.float64)
    B = np.asarray(B, dtype=np.float64)
    if gamma is None:
        gamma = 1.0 if name == "chi2" else 1.0 / A.shape[1]
    if name == "laplacian":
        return -gamma * manhattan_distances(A, B)
    check_nonnegative_data(name, A, B)
    return gamma * additive_chi2_kernel(A, B)
