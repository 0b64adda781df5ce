"""Preprocessing applied by the job runner after reading (NumPy or Dask)."""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from dkernel.errors import InvalidInputError


def _is_dask(X: Any) -> bool:
    """Whether ``X`` is a Dask array; without importing Dask (an array from a reader that
    used it has imported it already)."""
    da = sys.modules.get("dask.array")
    return da is not None and isinstance(X, da.Array)


def standardize(X: Any, feature_names: list[str] | None = None) -> Any:
    """Zero mean, unit variance per feature, ignoring NaN (missing values stay NaN).

    Raises
    ------
    InvalidInputError
        When a feature is constant or entirely missing (its variance is 0 or undefined).
    """
    if _is_dask(X):
        import dask.array as da

        mean, std = da.compute(da.nanmean(X, axis=0), da.nanstd(X, axis=0))
    else:
        with np.errstate(all="ignore"):
            mean, std = np.nanmean(X, axis=0), np.nanstd(X, axis=0)
    bad = np.flatnonzero(~(std > 0))
    if bad.size:
        names = [feature_names[i] if feature_names else str(i) for i in bad[:10]]
        raise InvalidInputError(
            f"cannot standardize: feature(s) {', '.join(names)} are constant or entirely missing "
            "(zero variance). Drop those columns or set data.standardize: false."
        )
    return (X - mean) / std
