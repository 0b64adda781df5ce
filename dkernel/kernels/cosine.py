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
