"""Rules of thumb for Gaussian kernel widths (NumPy only; no Dask, no I/O).

Two Silverman rules are in use, and they are not the same formula, so each has a name that
says which it is:

* :func:`silverman_normal_reference`: Silverman's multivariate normal-reference rule
  ``(4 / (d + 2))^(1/(d+4)) N^(-1/(d+4)) s`` with ``s`` the mean per-feature standard
  deviation (the width of :class:`~dkernel.KernelDecompositionClustering`'s Gaussian
  density kernel).
* :func:`silverman_thesis`: the rule of seed 001, Eq. 5.1,
  ``sqrt(tr(Σ)/d) (4 / ((2d + 1) N))^(1/(d+4))`` (the mean shift bandwidth of
  :class:`~dkernel.MeanShift` and :class:`~dkernel.MSSC`).

Both reduce to Silverman's one-dimensional rule ``(4/3)^(1/5) σ N^(-1/5)`` for ``d = 1``; for
``d > 1`` the constant and the scale differ (``(2d + 1)`` grows twice as fast as ``d + 2``,
and the root of the mean variance is at least the mean standard deviation).
"""

from __future__ import annotations

import numpy as np

from dkernel.errors import InvalidInputError

__all__ = ["silverman_normal_reference", "silverman_thesis"]


def silverman_normal_reference(X: np.ndarray) -> float:
    """Silverman's multivariate normal-reference rule for a Gaussian kernel density estimate.

    ``sigma = (4 / (d + 2))^(1 / (d + 4)) N^(-1 / (d + 4)) s`` with ``d`` features, ``N``
    samples and ``s`` the mean per-feature standard deviation (``ddof=1``). A starting point
    only: choose the width by held-out likelihood (:func:`dkernel.select_kdc_model`).

    Parameters
    ----------
    X : ndarray of shape (N, d)

    Returns
    -------
    float
        The kernel width ``sigma``.

    Raises
    ------
    InvalidInputError
        When every point coincides (zero spread).

    See Also
    --------
    silverman_thesis : the other rule (seed 001, Eq. 5.1), used by mean shift.

    Notes
    -----
    O(N d) time, O(d) extra memory.
    """
    X = np.asarray(X, dtype=np.float64)
    n, p = X.shape
    s = float(np.mean(np.std(X, axis=0, ddof=1)))
    if not s > 0:
        raise InvalidInputError(
            "All points coincide, so Silverman's rule cannot choose the kernel width; pass "
            "'sigma' explicitly."
        )
    return (4.0 / (p + 2)) ** (1.0 / (p + 4)) * n ** (-1.0 / (p + 4)) * s


def silverman_thesis(X: np.ndarray) -> float:
    """Silverman's rule as written in seed 001, Eq. 5.1: a scalar Gaussian width.

    ``h^2 = tr(Σ_X)/d · (4 / ((2d + 1) N))^{2/(d+4)}`` with ``d`` features and ``N`` samples
    (Eq. 5.1 writes one symbol for both; we read the first as the dimension, which makes
    ``tr(Σ)/d`` the average variance, as in Silverman's multivariate rule).

    Parameters
    ----------
    X : ndarray of shape (N, d)

    Returns
    -------
    float
        The width ``h`` (the mean shift ``bandwidth``).

    Raises
    ------
    InvalidInputError
        With fewer than 2 samples or zero variance.

    See Also
    --------
    silverman_normal_reference : the textbook multivariate rule, used by KDC.

    Notes
    -----
    O(N d) time, O(d) extra memory.
    """
    X = np.asarray(X, dtype=np.float64)
    n, d = X.shape
    if n < 2:
        raise InvalidInputError(f"Silverman's rule needs at least 2 samples; got {n}.")
    avg_var = float(X.var(axis=0, ddof=1).sum()) / d
    if not avg_var > 0:
        raise InvalidInputError(
            "All samples coincide (zero variance), so Silverman's rule cannot choose the "
            "bandwidth; pass bandwidth explicitly."
        )
    return float(np.sqrt(avg_var * (4.0 / ((2 * d + 1) * n)) ** (2.0 / (d + 4))))
