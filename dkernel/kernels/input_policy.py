"""What data a registered kernel takes as X: NaN (missing values), or rows of a precomputed
kernel matrix; the estimators' input checks and scikit-learn tags follow from it.

Re-exported by :mod:`dkernel.kernels.registry`, where the kernels themselves live.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dkernel.errors import InvalidInputError

#: Kernels whose data may hold NaN (missing values): the PCK models them (PCKID); the rbf and
#: radius kernels of data with NaN are those of the expected squared distances
#: (``dkernel.kernels.missing.MissingValueRBF``, ``MissingValueRadiusBlock``).
MISSING_VALUE_KERNELS = frozenset({"pck", "rbf", "local_scaling", "knn", "knn_mean"})


#: Kernels of distances that take NaN through expected squared distances when fitted on data
#: with NaN (whose missing-value model they keep).
_EXPECTED_DISTANCE_KERNELS = frozenset({"rbf", "local_scaling", "knn", "knn_mean"})


def _refuse_new_nan(name: str, *arrays: Any) -> None:
    """A distance kernel fitted on complete rows has no missing-value model for NaN in new rows."""
    for A in arrays:
        if isinstance(A, np.ndarray) and A.dtype.kind == "f" and np.isnan(A).any():
            raise InvalidInputError(
                f"The {name} kernel got non-finite values (NaN or inf) in X: it was fitted on "
                "complete rows, so it has no missing-value model to take the expectation of missing "
                "entries over; impute them, or fit on data with NaN."
            )


def is_precomputed(kernel: Any) -> bool:
    """Whether an estimator's ``kernel`` parameter asks for a precomputed kernel matrix."""
    return isinstance(kernel, str) and kernel == "precomputed"


def kernel_allows_nan(kernel: Any) -> bool:
    """Whether an estimator's ``kernel`` takes NaN (missing values) in X: the kernels of
    ``MISSING_VALUE_KERNELS`` (PCK's missingness, PCKID; the rbf kernel of the expected
    squared distances, ``dkernel.kernels.missing.MissingValueRBF``) and fitted feature
    maps (a PCK)."""
    return (isinstance(kernel, str) and kernel in MISSING_VALUE_KERNELS) or hasattr(
        kernel, "transform"
    )


#: The fix a NaN error names for an estimator whose ``kernel`` could take missing values.
NAN_FIX = (
    "Impute them first (e.g. sklearn.impute.SimpleImputer) or use kernel='pck', which models "
    "missing values (PCKID), or kernel='rbf' (expected squared distances)."
)


def kernel_nan_args(kernel: Any) -> dict[str, Any]:
    """``validate_input`` arguments of an estimator whose ``kernel`` decides whether X may hold
    NaN: allowed with :func:`kernel_allows_nan`, otherwise refused naming :data:`NAN_FIX`."""
    return {"allow_nan": kernel_allows_nan(kernel), "nan_fix": NAN_FIX}


def kernel_input_tags(tags: Any, kernel: Any, *, nan: bool = False) -> Any:
    """An estimator's scikit-learn ``tags`` with ``input_tags.pairwise`` set from its ``kernel``;
    with ``nan``, also ``input_tags.allow_nan`` (:func:`kernel_allows_nan`), for the estimators
    that pass X to the kernel as it is (:func:`kernel_nan_args`)."""
    tags.input_tags.pairwise = is_precomputed(kernel)
    if nan:
        tags.input_tags.allow_nan = kernel_allows_nan(kernel)
    return tags
