"""Seed distributions for personalized ranking.

A seed ``s`` is a non-negative vector over the in-sample points with ``sum(s) = 1``. Users give it
as an index, a list of indices, a boolean mask, a weight vector, or a cluster label (uniform over
the points carrying that label; Løkse 2014, §8.3.2 [Lokse2014]); ``None`` means the uniform "global"
seed over all points.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from dkernel.errors import InvalidInputError


def seed_vector(
    seed: Any,
    n: int,
    *,
    cluster: Any = None,
    labels: np.ndarray | None = None,
    owner: str = "seed",
) -> np.ndarray:
    """Turn a user seed into a probability vector of length ``n``.

    Parameters
    ----------
    seed : None, int, sequence of int, bool array or float array
        ``None``: uniform over all points (unless ``cluster`` is given). An int or a sequence
        of ints: uniform over those indices (negative indices count from the end). A boolean
        array of length ``n``: uniform over the ``True`` entries. A float array of length
        ``n``: non-negative weights, normalised to sum to one.
    n : int
        Number of in-sample points.
    cluster : hashable, optional
        A label; the seed is uniform over ``labels == cluster``. Needs ``labels``.
    labels : array of shape (n,), optional
        Cluster (or class) labels of the in-sample points.
    owner : str
        Named in error messages.

    Returns
    -------
    s : ndarray of shape (n,), float64, non-negative, summing to one.

    Examples
    --------
    >>> seed_vector([0, 2], 4)
    array([0.5, 0. , 0.5, 0. ])
    >>> seed_vector(None, 3, cluster=1, labels=np.array([0, 1, 1]))
    array([0. , 0.5, 0.5])
    """
    if cluster is not None:
        if seed is not None:
            raise InvalidInputError(
                f"{owner}: give either a seed or a cluster label, not both (got seed={seed!r}, "
                f"cluster={cluster!r})."
            )
        if labels is None:
            raise InvalidInputError(
                f"{owner}: a cluster seed ({cluster!r}) needs labels; fit a clustering first or "
                "pass labels=."
            )
        labels = np.asarray(labels)
        if labels.shape != (n,):
            raise InvalidInputError(f"{owner}: labels must have shape ({n},); got {labels.shape}.")
        mask = labels == cluster
        if not mask.any():
            valid = ", ".join(repr(v) for v in np.unique(labels)[:20])
            raise InvalidInputError(
                f"{owner}: no point has cluster label {cluster!r}. Valid labels: {valid}."
            )
        return mask / mask.sum()
    if seed is None:
        return np.full(n, 1.0 / n)
    if isinstance(seed, numbers.Integral) and not isinstance(seed, bool | np.bool_):
        return _from_indices(np.asarray([seed]), n, owner)
    arr = np.asarray(seed)
    if arr.ndim != 1 or arr.size == 0:
        raise InvalidInputError(
            f"{owner}: a seed must be an int, a non-empty 1-D list of indices, a boolean mask or "
            f"a weight vector; got an array of shape {arr.shape}."
        )
    if arr.dtype == bool:
        if arr.shape != (n,):
            raise InvalidInputError(
                f"{owner}: a boolean seed mask must have length {n}; got {arr.size}."
            )
        if not arr.any():
            raise InvalidInputError(f"{owner}: the seed mask selects no point.")
        return arr / arr.sum()
    if np.issubdtype(arr.dtype, np.integer):
        return _from_indices(arr, n, owner)
    if np.issubdtype(arr.dtype, np.floating):
        if arr.shape != (n,):
            raise InvalidInputError(
                f"{owner}: a seed weight vector must have length {n}; got {arr.size}. "
                "Pass integer indices to seed on a few points."
            )
        if not np.all(np.isfinite(arr)) or (arr < 0).any() or arr.sum() <= 0:
            raise InvalidInputError(
                f"{owner}: seed weights must be finite, non-negative and not all zero; got "
                f"min {arr.min()!r}, sum {arr.sum()!r}."
            )
        return arr.astype(np.float64) / arr.sum()
    raise InvalidInputError(f"{owner}: cannot use a seed of dtype {arr.dtype}.")


def _from_indices(idx: np.ndarray, n: int, owner: str) -> np.ndarray:
    if (idx < -n).any() or (idx >= n).any():
        raise InvalidInputError(
            f"{owner}: seed indices must lie in [0, {n}); got {idx[(idx < -n) | (idx >= n)][:5]}."
        )
    s = np.zeros(n)
    np.add.at(s, idx % n, 1.0)
    return s / s.sum()
