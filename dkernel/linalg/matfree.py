"""Matrix-free symmetric eigen-solvers: Lanczos, LOBPCG and randomized subspace iteration.

The matrix is only touched through ``apply(V) -> A @ V`` on an ``(n, b)`` block of vectors,
so it can live anywhere: a Zarr-stored kernel read block by block
(:class:`dkernel.storage.kernel_operator.ZarrKernelOperator`), a Dask array, or an implicit
product ``B (B^T V)`` of an explicit feature map. Every call to ``apply`` counts as one *pass*
over the matrix; for an out-of-core kernel the cost is dominated by the number of passes,
so block methods (subspace iteration, LOBPCG) that use one pass for many vectors are the
default.

Conventions match :func:`dkernel.linalg.dense_eigh`: eigenvalues descending, signs fixed so
each eigenvector's entry of largest magnitude is positive, tiny negative eigenvalues clipped
with a :class:`~dkernel.errors.NumericalWarning`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy import linalg
from scipy.sparse.linalg import LinearOperator, eigsh, lobpcg

from dkernel.errors import InvalidInputError
from dkernel.linalg.eigen import clip_negative, fix_signs

METHODS = ("subspace", "lobpcg", "lanczos")


@dataclass(frozen=True)
class EigenResult:
    """Leading eigenpairs found by a matrix-free solver.

    Attributes
    ----------
    values : ndarray (k,)
        Descending eigenvalues.
    vectors : ndarray (n, k)
        Orthonormal eigenvectors, signs fixed.
    residuals : ndarray (k,)
        Relative residuals ``||A v - λ v|| / |λ|`` (against the operator itself).
    n_passes : int
        Number of ``apply`` calls (passes over the matrix), including the final residual check.
    converged : bool
        Whether every residual is below the requested tolerance.
    method : str
    """

    values: np.ndarray
    vectors: np.ndarray
    residuals: np.ndarray
    n_passes: int
    converged: bool
    method: str


class _Counter:
    def __init__(self, apply: Callable[[np.ndarray], np.ndarray], n: int) -> None:
        self.apply = apply
        self.n = n
        self.passes = 0

    def __call__(self, V: np.ndarray) -> np.ndarray:
        V = np.asarray(V, dtype=np.float64)
        one = V.ndim == 1
        V2 = V[:, None] if one else V
        self.passes += 1
        out = np.asarray(self.apply(np.ascontiguousarray(V2)), dtype=np.float64)
        if out.shape != V2.shape:
            raise InvalidInputError(
                f"apply(V) must return an array of shape {V2.shape}; got {out.shape}."
            )
        return out[:, 0] if one else out


def _rayleigh_ritz(Q: np.ndarray, AQ: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    T = Q.T @ AQ
    T = 0.5 * (T + T.T)
    theta, W = linalg.eigh(T)
    order = np.argsort(theta)[::-1]
    theta, W = theta[order], W[:, order]
    return theta, Q @ W, AQ @ W


def _relative_residuals(values: np.ndarray, V: np.ndarray, AV: np.ndarray) -> np.ndarray:
    R = AV - V * values[None, :]
    scale = np.maximum(np.abs(values), np.finfo(float).tiny)
    return np.linalg.norm(R, axis=0) / scale


def _subspace(op: _Counter, n: int, k: int, block: int, tol: float, max_passes: int, rng):
    Q, _ = linalg.qr(rng.standard_normal((n, block)), mode="economic")
    theta = V = AV = None
    while op.passes < max_passes:
        AQ = op(Q)
        theta, V, AV = _rayleigh_ritz(Q, AQ)
        res = _relative_residuals(theta[:k], V[:, :k], AV[:, :k])
        if np.all(res < tol):
            return theta[:k], V[:, :k], res
        Q, _ = linalg.qr(AV, mode="economic")
    res = _relative_residuals(theta[:k], V[:, :k], AV[:, :k])
    return theta[:k], V[:, :k], res


def matrix_free_eigh(
    apply: Callable[[np.ndarray], np.ndarray],
    n: int,
    n_components: int,
    *,
    method: str = "subspace",
    tol: float = 1e-8,
    block_size: int | None = None,
    max_passes: int = 300,
    seed: int | None = 0,
    clip: bool = True,
) -> EigenResult:
    """Top eigenpairs of a symmetric (PSD) operator known only through ``apply(V) = A V``.

    Parameters
    ----------
    apply : callable
        ``apply(V)`` with V of shape (n, b) returns ``A @ V`` of shape (n, b).
    n : int
        Order of A.
    n_components : int
        Number of leading eigenpairs k.
    method : {'subspace', 'lobpcg', 'lanczos'}
        ``'subspace'``: randomized block subspace iteration with Rayleigh–Ritz (one pass per
        iteration for ``block_size`` vectors; robust, the default for out-of-core kernels).
        ``'lobpcg'``: scipy's LOBPCG (one pass per iteration, usually fewer iterations).
        ``'lanczos'``: scipy's implicitly restarted Lanczos (ARPACK); one pass per *vector*, best
        when the matrix is in memory or cheap to apply.
    tol : float
        Target relative residual ``||A v - λ v|| / |λ|`` for each of the k pairs.
    block_size : int, optional
        Vectors per pass for the block methods; default ``max(2k, k + 10)``.
    max_passes : int
        Upper bound on passes over A.
    seed : int, optional
        Seed of the random start block.
    clip : bool
        Clip negative eigenvalues to zero (warning beyond round-off).

    Returns
    -------
    EigenResult

    Notes
    -----
    Memory O(n b) besides whatever ``apply`` holds; time (passes) × cost of one ``apply``
    plus O(n b^2) per pass for orthogonalisation. Subspace iteration converges like
    ``(λ_{b+1}/λ_k)^passes``, so a larger block pays off when passes are expensive (I/O-bound
    kernels read from disk); the final residuals are computed from the last pass.

    Examples
    --------
    >>> import numpy as np
    >>> A = np.diag(np.arange(1.0, 51.0))
    >>> res = matrix_free_eigh(lambda V: A @ V, 50, 3)
    >>> np.round(res.values, 6)
    array([50., 49., 48.])
    """
    if method not in METHODS:
        raise InvalidInputError(
            f"The 'method' parameter of matrix_free_eigh must be one of "
            f"{', '.join(repr(m) for m in METHODS)}. Got {method!r} instead."
        )
    if not (isinstance(n_components, int | np.integer) and 1 <= n_components < n):
        raise InvalidInputError(
            f"The 'n_components' parameter of matrix_free_eigh must be an int in [1, n - 1] "
            f"(n = {n}). Got {n_components!r} instead; use dense_eigh for all eigenpairs."
        )
    k = int(n_components)
    block = int(block_size) if block_size is not None else max(2 * k, k + 10)
    block = min(max(block, k), n)
    rng = np.random.default_rng(seed)
    op = _Counter(apply, n)
    if method == "subspace":
        values, vectors, res = _subspace(op, n, k, block, tol, max_passes, rng)
    elif method == "lobpcg":
        X0 = rng.standard_normal((n, block))
        lin = LinearOperator((n, n), matvec=op, matmat=op, dtype=np.float64)
        _, vecs = lobpcg(
            lin, X0, largest=True, tol=tol * 1e-2, maxiter=max_passes, verbosityLevel=0
        )
        Q = linalg.qr(vecs, mode="economic")[0]
        values, vectors, AV = _rayleigh_ritz(Q, op(Q))
        values, vectors, AV = values[:k], vectors[:, :k], AV[:, :k]
        res = _relative_residuals(values, vectors, AV)
    else:
        lin = LinearOperator((n, n), matvec=op, matmat=op, dtype=np.float64)
        v0 = rng.standard_normal(n)
        vals, vecs = eigsh(
            lin,
            k=k,
            which="LA",
            tol=tol * 1e-2,
            v0=v0,
            maxiter=max_passes * 10,
            ncv=min(n, max(2 * k + 1, 20)),
        )
        order = np.argsort(vals)[::-1]
        values, vectors = vals[order], vecs[:, order]
        res = _relative_residuals(values, vectors, op(vectors))
    if clip:
        values = clip_negative(values, float(np.abs(values).max(initial=0.0)))
    signed = fix_signs(vectors)
    return EigenResult(
        values=np.asarray(values, dtype=np.float64),
        vectors=signed,
        residuals=np.asarray(res, dtype=np.float64),
        n_passes=op.passes,
        converged=bool(np.all(res < tol)),
        method=method,
    )
