"""Dense symmetric eigen-solver with the conventions used across dkernel.

Conventions: eigenvalues in descending order, each eigenvector's sign fixed so that its
entry of largest magnitude is positive, tiny negative eigenvalues (round-off of a PSD
matrix) clipped to zero with a :class:`~dkernel.errors.NumericalWarning`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import linalg

from dkernel.errors import InvalidInputError, NumericalWarning, warn_caller

#: Above this fraction of the spectrum one divide-and-conquer solve of every pair (LAPACK
#: syevd) beats the subset solver (syevr), which slows down on the many clustered small
#: eigenvalues of a smooth kernel: all pairs of an RBF kernel of the 1 797 digits take 5.7 s
#: with syevr and 0.6 s with syevd (the leading 80 with syevr, 0.2 s).
_SUBSET_MAX_FRACTION = 0.25
#: ``dense_eigh(..., iterative=True)`` takes the leading pairs from Lanczos (ARPACK) from this
#: many rows, when at most ``LANCZOS_MAX_FRACTION`` of them are wanted: a LAPACK solve reduces
#: the whole matrix to tridiagonal form (O(n³)), Lanczos needs a few dozen products with it
#: (O(n²) each). The leading 12 pairs of a centred RBF kernel of 6 000 rows: 8.4 s (syevr)
#: against 0.75 s, equal to 2·10⁻¹⁵; KPCA of Samson's 9 025 pixels spent 58 of its 65 s in
#: four such solves.
LANCZOS_MIN_ROWS = 2000
LANCZOS_MAX_FRACTION = 0.05
#: Restarts ARPACK may take before LAPACK (dense) or the block solver (sparse,
#: ``dkernel.spectral.sparse``) takes over. Converging matrices take a few hundred (the
#: 3 000-row samples of ``bench_realdata.py``: at most ~250); ARPACK's default, 10 n, let a
#: graph whose leading eigenvalues crowd at 1 (the email counts: six components, 2 922 rows)
#: run 409 101 products, 24 s, before LOBPCG solved it in 0.5 s.
LANCZOS_MAX_RESTARTS = 1000
#: Products with K that Lanczos may take on a dense K, per row of K, before LAPACK takes over:
#: a subset solve of 3 000 rows costs about as much as 500-600 of them (1.5 s). The leading 64
#: pairs of the RBF kernels of 3 000-row real samples took 130-244 products; of one feature
#: in four groups, whose eigenvalues come in near-equal fours, 1 600-2 200 (up to 6.5 s each,
#: KECA's width search 27 s).
LANCZOS_PRODUCTS_PER_ROW = 0.2


class _OverBudget(Exception):
    """Lanczos took more products than a LAPACK solve costs."""


def _budgeted(K: np.ndarray, products: int) -> Any:
    """K as a linear operator that raises :class:`_OverBudget` on its ``products + 1``-th
    product."""
    from scipy.sparse.linalg import LinearOperator

    taken = [0]

    def product(x: np.ndarray) -> np.ndarray:
        taken[0] += 1
        if taken[0] > products:
            raise _OverBudget
        return K @ x

    return LinearOperator(K.shape, matvec=product, matmat=product, dtype=np.float64)


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


def deflated(K: Any, values: np.ndarray, vectors: np.ndarray) -> Any:
    """``K − V Λ Vᵀ`` as a linear operator: the symmetric ``K`` (dense or sparse) with the
    orthonormal eigenpairs ``(values, vectors)`` moved to the eigenvalue 0, so that its largest
    eigenvalue is the largest of the others."""
    from scipy.sparse.linalg import LinearOperator

    n = K.shape[0]

    def product(x: np.ndarray) -> np.ndarray:
        x = x.reshape(n, -1)
        return K @ x - vectors @ (values[:, None] * (vectors.T @ x))

    return LinearOperator((n, n), matvec=product, matmat=product, dtype=np.float64)


def lanczos_leading(
    K: np.ndarray, k: int, *, start: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray] | None:
    """The ``k`` largest eigenpairs of the symmetric ``K`` by Lanczos (ARPACK, to working
    precision), ascending; None when a check finds that Lanczos missed one.

    Lanczos from one start vector sees each eigenvalue once in exact arithmetic, so a
    repeated eigenvalue's copies come only from round-off and restarts. The largest eigenvalue
    of ``K`` with the found pairs removed is therefore computed too: above the k-th found
    (beyond 10⁻⁶ relative), a pair was missed, and the caller solves with LAPACK instead;
    so it does when ARPACK has not converged within ``LANCZOS_MAX_RESTARTS`` restarts or
    ``LANCZOS_PRODUCTS_PER_ROW`` products per row.
    ``start``: the first Lanczos vector (default: a fixed pseudo-random one, with a component
    along every eigenvector).
    """
    from scipy.sparse.linalg import ArpackError, ArpackNoConvergence, eigsh

    n = K.shape[0]
    v0 = np.random.default_rng(0).uniform(-1.0, 1.0, n) if start is None else start
    bound = {"which": "LA", "maxiter": LANCZOS_MAX_RESTARTS}
    budget = max(int(LANCZOS_PRODUCTS_PER_ROW * n), 4 * k)
    try:
        values, vectors = eigsh(_budgeted(K, budget), k=k, v0=v0, tol=0, **bound)
    except (ArpackNoConvergence, ArpackError, _OverBudget):
        return None

    rest = deflated(K, values, vectors)
    # its own start: one alike on the missed directions would miss them again
    check = np.random.default_rng(1).uniform(-1.0, 1.0, n)
    try:
        top = float(eigsh(rest, k=1, v0=check, tol=1e-8, return_eigenvectors=False, **bound)[0])
    except (ArpackNoConvergence, ArpackError):
        return None
    scale = max(float(np.abs(values).max()), np.finfo(float).tiny)
    if top > float(values.min()) + 1e-6 * scale:
        return None
    return values, vectors


def dense_eigh(
    K: np.ndarray, n_components: int | None = None, *, clip: bool = True, iterative: bool = False
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
    iterative : bool
        Few leading pairs of a large matrix (from ``LANCZOS_MIN_ROWS`` rows, at most
        ``LANCZOS_MAX_FRACTION`` of the pairs) by Lanczos (``lanczos_leading``), LAPACK
        otherwise or when Lanczos missed a pair: the same pairs to working precision, an
        order of magnitude faster at a few thousand rows.

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
    found = None
    if iterative and n >= LANCZOS_MIN_ROWS and 0 < k <= LANCZOS_MAX_FRACTION * n:
        found = lanczos_leading(K, k)
    if found is not None:
        values, vectors = found
    elif k > _SUBSET_MAX_FRACTION * n:
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
