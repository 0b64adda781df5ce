"""Exact Personalized PageRank on a kernel graph (NumPy/SciPy only).

With ``P = D^{-1} K`` (K symmetric, non-negative; ``d = K 1``), restart probability α and
seed ``s``, the PPR is the fixed point of ``r <- (1 - α) P^T r + α s``. Chung and Zhao (2010)
[Chung2010] give it in closed form (Løkse 2020, Paper II, Eq. 2 [Lokse2020])

    π(α, s) = β D^{1/2} G_β D^{-1/2} s,   G_β = ((1 + β) I - 𝒦)^{-1},  𝒦 = D^{-1/2} K D^{-1/2},

with β = α / (1 - α). :func:`ppr_exact` solves the symmetric positive definite system (no
inverse is formed); :func:`ppr_power` runs the power iteration as a cross-check and for
kernels given as an explicit feature map (``K = Γ Γ^T``), where only mat-vecs are needed.
The global rank of Løkse (2014), Alg. 7 [Lokse2014] is the stationary distribution without
restarts, ``d / Vol``.
"""

from __future__ import annotations

import numpy as np
from scipy import linalg

from dkernel._validation import check_scalar
from dkernel.errors import InvalidInputError


def restart_beta(alpha: float, owner: str = "PPR") -> float:
    """``β = α / (1 - α)`` after checking ``0 < α < 1``."""
    check_scalar(
        alpha, "alpha", owner, low=0.0, high=1.0, low_inclusive=False, high_inclusive=False
    )
    return float(alpha) / (1.0 - float(alpha))


def _check_square(K: np.ndarray, owner: str) -> np.ndarray:
    K = np.asarray(K, dtype=np.float64)
    if K.ndim != 2 or K.shape[0] != K.shape[1]:
        raise InvalidInputError(f"{owner} needs a square kernel matrix; got shape {K.shape}.")
    return K


def degrees(K: np.ndarray | None = None, *, features: np.ndarray | None = None) -> np.ndarray:
    """Degrees ``d = K 1``; with ``features`` (``K = Γ Γ^T``) computed as ``Γ (Γ^T 1)`` in O(NF).

    Raises
    ------
    InvalidInputError
        When a degree is not strictly positive (an isolated point: the walk is undefined).
    """
    if features is not None:
        G = np.asarray(features, dtype=np.float64)
        d = G @ G.sum(axis=0)
    else:
        d = _check_square(K, "degrees").sum(axis=1)
    if not np.all(d > 0):
        bad = np.flatnonzero(~(d > 0))
        raise InvalidInputError(
            f"{bad.size} points have a non-positive degree (first: index {bad[0]}, "
            f"d={d[bad[0]]!r}); "
            "the random walk is undefined there. Use a wider kernel or drop isolated points."
        )
    return d


def normalized_kernel(K: np.ndarray, d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``𝒦 = D^{-1/2} K D^{-1/2}`` (a new array) and ``r = d^{-1/2}``, for degrees ``d``."""
    r = 1.0 / np.sqrt(d)
    Kn = K * r[:, None]
    Kn *= r[None, :]
    return Kn, r


def global_rank(K: np.ndarray | None = None, *, features: np.ndarray | None = None) -> np.ndarray:
    """Global rank ([Lokse2014], Alg. 7): the stationary ``π = d / Vol`` of ``P = D^{-1} K``.

    Notes
    -----
    O(N^2) for a dense K; O(NF) for a feature map.
    """
    d = degrees(K, features=features)
    return d / d.sum()


def _seed_matrix(s: np.ndarray, n: int) -> np.ndarray:
    s = np.asarray(s, dtype=np.float64)
    if s.shape[0] != n or s.ndim not in (1, 2):
        raise InvalidInputError(
            f"the seed must have shape ({n},) or ({n}, n_seeds); got {s.shape}. Build one with "
            "dkernel.ranking.seed_vector."
        )
    if (s < 0).any():
        raise InvalidInputError("seed distributions must be non-negative.")
    return s


def ppr_exact(K: np.ndarray, s: np.ndarray, alpha: float) -> np.ndarray:
    """Exact PPR by one Cholesky solve in the Chung–Zhao form [Chung2010].

    Parameters
    ----------
    K : ndarray of shape (N, N)
        Symmetric non-negative affinity (kernel) matrix.
    s : ndarray of shape (N,) or (N, m)
        Seed distribution(s), each summing to one.
    alpha : float
        Restart probability, ``0 < alpha < 1``.

    Returns
    -------
    pi : ndarray of shape (N,) or (N, m)
        PPR scores; each column sums to one.

    Notes
    -----
    O(N^3) time and O(N^2) memory (one Cholesky factorisation of ``(1+β)I - 𝒦``, which is
    positive definite for every symmetric non-negative K: [Lokse2020], Paper II, Prop. 1).
    """
    K = _check_square(K, "ppr_exact")
    beta = restart_beta(alpha, "ppr_exact")
    s = _seed_matrix(s, K.shape[0])
    d = degrees(K)
    M, r = normalized_kernel(K, d)
    M *= -1.0
    M[np.diag_indices_from(M)] += 1.0 + beta
    rhs = s * (r if s.ndim == 1 else r[:, None])
    y = linalg.solve(M, rhs, assume_a="pos", check_finite=False)
    sq = np.sqrt(d)
    return beta * (y * (sq if s.ndim == 1 else sq[:, None]))


def ppr_power(
    K: np.ndarray | None,
    s: np.ndarray,
    alpha: float,
    *,
    features: np.ndarray | None = None,
    tol: float = 1e-13,
    max_iter: int = 20000,
) -> np.ndarray:
    """PPR by power iteration ``r <- (1 - α) K D^{-1} r + α s`` ([Lokse2020], Paper II, Eq. 1).

    Parameters
    ----------
    K : ndarray of shape (N, N) or None
        Affinity matrix; None when ``features`` is given.
    s : ndarray of shape (N,) or (N, m)
    alpha : float
    features : ndarray of shape (N, F), optional
        Explicit feature map with ``K = Γ Γ^T``; mat-vecs cost O(NF) and K is never formed.
    tol : float
        Stop when the L1 change of every column falls below ``tol``.
    max_iter : int

    Notes
    -----
    Each iteration costs one mat-vec (O(N^2), or O(NF)); the error shrinks by ``1 - α`` per
    iteration, so ``log(tol) / log(1 - α)`` iterations are needed (≈ 280 for α = 0.1, 1e-13).
    """
    beta_unused = restart_beta(alpha, "ppr_power")  # noqa: F841  (validates alpha)
    if features is not None:
        G = np.asarray(features, dtype=np.float64)
        n = G.shape[0]

        def matvec(v):
            return G @ (G.T @ v)

    else:
        K = _check_square(K, "ppr_power")
        n = K.shape[0]

        def matvec(v):
            return K @ v

    s = _seed_matrix(s, n)
    d = degrees(K, features=features)
    dinv = 1.0 / d if s.ndim == 1 else (1.0 / d)[:, None]
    r = s.copy()
    for _ in range(max_iter):
        new = (1.0 - alpha) * matvec(r * dinv) + alpha * s
        change = np.abs(new - r).sum(axis=0)
        r = new
        if np.all(change < tol):
            return r
    raise InvalidInputError(
        f"ppr_power did not converge to tol={tol} in {max_iter} iterations; raise max_iter or "
        "use ppr_exact."
    )
