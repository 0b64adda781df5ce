"""Cosine-similarity kernel blocks."""

from __future__ import annotations

import numpy as np


def cosine_block(
    X: np.ndarray, Y: np.ndarray, *, dtype: np.dtype | type = np.float64
) -> np.ndarray:
    """``<x, y> / (||x|| ||y||)`` for every row pair of X and Y.

    Rows of zero norm have similarity 0 with everything (scikit-learn's convention).

    Notes
    -----
    One GEMM: O(n_x n_y p) time, O(n_x n_y) memory for the block.

    Examples
    --------
    >>> import numpy as np
    >>> cosine_block(np.array([[1.0, 0.0]]), np.array([[1.0, 1.0]])).round(4)
    array([[0.7071]])
    """
    X = np.asarray(X, dtype=dtype)
    Y = np.asarray(Y, dtype=dtype)
    nx = np.sqrt(np.einsum("ij,ij->i", X, X))
    ny = np.sqrt(np.einsum("ij,ij->i", Y, Y))
    nx[nx == 0] = 1
    ny[ny == 0] = 1
    G = (X / nx[:, None]) @ (Y / ny[:, None]).T
    np.clip(G, -1, 1, out=G)
    return G


def cosine_log_block(X: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """``log max(cos(x, y), 0)`` for every row pair, in float64 (``-inf`` where the cosine is
    not positive).

    For non-negative rows (counts, histograms) every cosine is >= 0; the log form lets a row
    normalisation ``K / sum(K)`` be computed as a softmax.

    Examples
    --------
    >>> import numpy as np
    >>> cosine_log_block(np.array([[1.0, 0.0]]), np.array([[1.0, 0.0], [0.0, 1.0]]))
    array([[  0., -inf]])
    """
    return _log_positive_part(cosine_block(X, Y, dtype=np.float64))


def cosine_log_of_unit_distance(distances: np.ndarray) -> np.ndarray:
    """``log max(cos, 0)`` from Euclidean distances between unit vectors
    (``|a - b|^2 = 2 - 2 cos``), e.g. a neighbour search on unit-normalised rows.

    Examples
    --------
    >>> import numpy as np
    >>> cosine_log_of_unit_distance(np.array([0.0, 1.0])).round(4)
    array([ 0.    , -0.6931])
    """
    return _log_positive_part(1.0 - 0.5 * np.asarray(distances, dtype=np.float64) ** 2)


def _log_positive_part(cos: np.ndarray) -> np.ndarray:
    """``log max(cos, 0)``, ``-inf`` (without a warning) where the cosine is not positive."""
    with np.errstate(divide="ignore"):
        return np.log(np.clip(cos, 0.0, None))
