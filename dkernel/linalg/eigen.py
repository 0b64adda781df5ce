"""Dense symmetric eigen-solver with the conventions used across dkernel.

Conventions: eigenvalues in descending order, each eigenvector's sign fixed so that its
entry of largest magnitude is positive, tiny negative eigenvalues (round-off of a PSD
matrix) clipped to zero with a :class:`~dkernel.errors.NumericalWarning`.
"""

from __future__ import annotations

import numpy as np
from scipy import linalg

from dkernel.errors import InvalidInputError, NumericalWarning, warn_caller

#: Above this fraction of the spectrum one divide-and-conquer solve of every pair (LAPACK
#: syevd) beats the subset solver (syevr), which slows down on the many clustered small
#: eigenvalues of a smooth kernel: all pairs of an RBF kernel of the 1 797 digits take 5.7 s
#: with syevr and 0.6 s with syevd (the leading 80 with syevr, 0.2 s).
_SUBSET_MAX_FRACTION = 0.25


def fix_signs(vectors: np.ndarray) -> np.ndarray:
    """Flip columns so that the entry of largest magnitude in each is positive."""
    idx = np.argmax(np.abs(vectors), axis=0)
    signs = np.sign(vectors[idx, np.arange(vectors.shape[1])])
    signs[signs == 0] = 1
    return vectors * signs


def clip_negative(values: np.ndarray, scale: float, *, tol: float = 1e-8) -> np.ndarray:
    """Clip eigenvalues below zero; warn when any beyond round-off (``tol * scale``) were clipped."""
    neg = values < 0
    if neg.any():
        worst = float(values[neg].min())
        if worst < -tol * max(scale, np.finfo(float).tiny):
            warn_caller(
                f"{int(neg.sum())} negative eigenvalues (most negative {worst:.3g}) were clipped "
                "to zero; the kernel matrix is not positive semi-definite to working precision.",
                NumericalWarning,
            )
        values = np.where(neg, 0.0, values)
    return values


def dense_eigh(
    K: np.ndarray, n_components: int | None = None, *, clip: bool = True
) -> tuple[np.ndarray, np.ndarray]:
    """Top eigenpairs of a symmetric matrix, descending, with signs fixed.

    Parameters
    ----------
    K : ndarray of shape (n, n)
        Symmetric matrix (only the lower triangle is read).
    n_components : int, optional
        Number of leading eigenpairs; all when None.
    clip : bool
        Clip negative eigenvalues to zero (warning when they exceed round-off).

    Returns
    -------
    values : ndarray of shape (k,)
    vectors : ndarray of shape (n, k)

    Notes
    -----
    O(n^3) time and O(n^2) memory: for n beyond a few times 10^4 use a Nyström (landmark)
    embedding. Up to a quarter of the pairs come from a subset solver (LAPACK syevr), more
    from one solve of all (syevd).
    """
    n = K.shape[0]
    k = n if n_components is None else min(int(n_components), n)
    if k > _SUBSET_MAX_FRACTION * n:
        values, vectors = linalg.eigh(K, driver="evd")
        values, vectors = values[n - k :], vectors[:, n - k :]
    else:
        values, vectors = linalg.eigh(K, subset_by_index=[n - k, n - 1], driver="evr")
    order = np.argsort(values)[::-1]
    values, vectors = values[order], vectors[:, order]
    if clip:
        values = clip_negative(values, float(np.abs(values).max(initial=0.0)))
    return values, fix_signs(vectors)


def leading_eigenpairs(
    values: np.ndarray, vectors: np.ndarray, *, rtol: float, degenerate: str
) -> tuple[np.ndarray, np.ndarray]:
    """The eigenpairs of eigenvalue above ``rtol · λ_max`` (values descending, as from
    :func:`dense_eigh`): the numerical range of a PSD matrix.

    Parameters
    ----------
    values : ndarray of shape (k,)
        Eigenvalues, largest first.
    vectors : ndarray of shape (n, k)
    rtol : float
        Relative cutoff.
    degenerate : str
        Message of the :class:`~dkernel.errors.InvalidInputError` raised when no eigenvalue
        is positive.

    Returns
    -------
    values : ndarray of shape (r,)
    vectors : ndarray of shape (n, r)
    """
    top = float(values[0]) if values.size else 0.0
    if not top > 0:
        raise InvalidInputError(degenerate)
    keep = values > rtol * top
    return values[keep], vectors[:, keep]
