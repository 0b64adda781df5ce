"""Gaussian (RBF) kernel blocks, in value and in log form.

The rule of thumb for the width sigma is :func:`dkernel.kernels.widths.sigma_rule_of_thumb`
(re-exported here for older imports).
"""

from __future__ import annotations

import numpy as np

from dkernel.kernels.adaptive import squared_distances
from dkernel.kernels.widths import DEFAULT_SIGMA_FRACTION, median_distance, sigma_rule_of_thumb
from dkernel.linalg.elementwise import exp_floored

__all__ = [
    "DEFAULT_SIGMA_FRACTION",
    "median_distance",
    "rbf_block",
    "rbf_log_block",
    "rbf_log_of_distance",
    "sigma_rule_of_thumb",
]


def rbf_block(
    X: np.ndarray, Y: np.ndarray, sigma: float, *, dtype: np.dtype | type = np.float64
) -> np.ndarray:
    """``exp(-||x - y||^2 / (2 sigma^2))`` for every row pair of X and Y.

    One GEMM, then in-place passes that scale by ``2γ``, subtract ``γ||x||²`` and
    ``γ||y||²``, clip at zero (round-off can make a squared distance negative) and
    exponentiate, all in ``dtype`` (no temporaries of the block's size).

    Examples
    --------
    >>> import numpy as np
    >>> rbf_block(np.zeros((1, 2)), np.ones((1, 2)), sigma=1.0).round(4)
    array([[0.3679]])
    """
    dtype = np.dtype(dtype)
    X = np.asarray(X, dtype=dtype)
    Y = np.asarray(Y, dtype=dtype)
    gamma = 0.5 / sigma**2
    xx = np.einsum("ij,ij->i", X, X)
    yy = np.einsum("ij,ij->i", Y, Y)
    xx *= dtype.type(gamma)
    yy *= dtype.type(gamma)
    G = X @ Y.T
    G *= dtype.type(2.0 * gamma)
    G -= xx[:, None]
    G -= yy[None, :]
    np.minimum(G, 0, out=G)
    return exp_floored(G)


def rbf_log_block(X: np.ndarray, Y: np.ndarray, sigma: float) -> np.ndarray:
    """``log K = -||x - y||^2 / (2 sigma^2)`` for every row pair, in float64.

    The log form does not underflow: a point a few widths away from every other point keeps
    finite values, so a row normalisation ``K / sum(K)`` stays a softmax (the kernel
    decomposition's density kernel adds its normalising constant to it).

    Notes
    -----
    One GEMM: O(n_x n_y p) time, O(n_x n_y) memory for the block.

    Examples
    --------
    >>> import numpy as np
    >>> rbf_log_block(np.zeros((1, 2)), np.ones((1, 2)), sigma=1.0)
    array([[-1.]])
    """
    D = squared_distances(X, Y)
    D *= -0.5 / sigma**2
    return D


def rbf_log_of_distance(distances: np.ndarray, sigma: float) -> np.ndarray:
    """``log K = -d^2 / (2 sigma^2)`` from Euclidean distances ``d`` (a neighbour search's).

    Examples
    --------
    >>> import numpy as np
    >>> rbf_log_of_distance(np.array([0.0, 2.0]), sigma=1.0)
    array([-0., -2.])
    """
    return -0.5 * (np.asarray(distances, dtype=np.float64) / sigma) ** 2
