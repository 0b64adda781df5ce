"""Gaussian (RBF) kernel blocks, in value and in log form.

The rule of thumb for the width sigma is :func:`dkernel.kernels.widths.sigma_rule_of_thumb`
(re-exported here for older imports).
"""

from __future__ import annotations

import numpy as np

from dkernel.kernels.adaptive import squared_distances
from dkernel.kernels.widths import DEFAULT_SIGMA_FRACTION, median_distance, sigma_rule_of_thumb
from dkernel.linalg.elementwise import exp_flushed

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

    One GEMM of ``2γX`` with ``Y``, then in-place passes that subtract ``γ||x||²`` and
    ``γ||y||²``, clip to ``[floor, 0]`` (round-off can make a squared distance negative; the
    floor keeps ``exp`` out of the subnormal numbers, ``dkernel.linalg.elementwise.exp_flushed``)
    and exponentiate, all in ``dtype`` (no temporaries of the block's size).

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
    G = (X * dtype.type(2.0 * gamma)) @ Y.T
    G -= xx[:, None]
    G -= yy[None, :]
    return exp_flushed(G, ceiling=0.0)


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
