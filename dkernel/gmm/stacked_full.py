"""Full-covariance EM for many mixtures at once, on complete data (NumPy only).

The per-model, per-missingness-pattern EM of :func:`dkernel.gmm.full_patterns.full_em` (Alg. 1 of
[Lokse2020] Paper I) spends its time in Python and small LAPACK calls when an ensemble holds
hundreds of models. On rows without missing values every component of every model can be
scored together: a log-density is linear in ``[x ⊗ x, x, 1]`` (the precision, ``−2Pμ`` and
the constant are its weights), so the E-step is one GEMM of ``n × (p² + p + 1) × C``, the
M-step one more, ``R [x ⊗ x, x, 1]``, and a batched Cholesky of the ``C`` covariances. The
expansion cancels digits when a component is tight and far from the origin, so it runs in
float64 (cheap at the small ``p`` this path is for).

The components are stacked as in :class:`dkernel.gmm.em.DiagMixtures`: model ``m`` owns rows
``offsets[m]:offsets[m+1]`` and is normalised on its own (one posterior per model). The
parameters stay float64 whatever the data's dtype (they are small; the posteriors take it).
"""

from __future__ import annotations

import numpy as np

from dkernel.gmm.em import LOG_2PI, _normalize_segments_t, full_variance_floor
from dkernel.linalg.elementwise import flush_for


def quadratic_design(X: np.ndarray) -> np.ndarray:
    """``[x ⊗ x, x, 1]`` per row, float64 ``(n, p² + p + 1)``: a full-covariance log-density is
    linear in it."""
    X = np.asarray(X, dtype=np.float64)
    n, p = X.shape
    return np.concatenate(
        [(X[:, :, None] * X[:, None, :]).reshape(n, p * p), X, np.ones((n, 1))], axis=1
    )


def log_joint_weights(means: np.ndarray, covs: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """``W (C, p² + p + 1)`` with ``quadratic_design(X) @ Wᵀ`` the log-joints
    ``log w_c + log N(x | μ_c, Σ_c)`` ``(n, C)``.

    ``log N(x | μ, Σ) = −½ [xᵀPx − 2 μᵀP x + μᵀPμ + log det Σ + p log 2π]``, ``P = Σ⁻¹``
    from the Cholesky factor (float64). One factorisation per component, whatever the rows.
    """
    means = np.asarray(means, dtype=np.float64)
    covs = np.asarray(covs, dtype=np.float64)
    C, p = means.shape
    chol = np.linalg.cholesky(covs)
    inv_chol = np.linalg.solve(chol, np.broadcast_to(np.eye(p), covs.shape))  # L⁻¹
    precision = np.transpose(inv_chol, (0, 2, 1)) @ inv_chol  # L⁻ᵀ L⁻¹ = Σ⁻¹
    logdet = 2.0 * np.sum(np.log(np.diagonal(chol, axis1=1, axis2=2)), axis=1)
    p_mu = np.einsum("cpq,cq->cp", precision, means)
    const = np.einsum("cp,cp->c", means, p_mu) + logdet + p * LOG_2PI
    W = -0.5 * np.concatenate([precision.reshape(C, p * p), -2.0 * p_mu, const[:, None]], axis=1)
    W[:, -1] += np.log(np.asarray(weights, dtype=np.float64))
    return W


#: Rows per GEMM of :func:`stacked_posteriors`; the last block is zero-padded to it.
POSTERIOR_ROWS = 512


def stacked_posteriors(X: np.ndarray, W: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Posteriors ``(n, C)`` of complete rows under every model (each model's sum to 1), in
    the dtype of ``X``; ``W`` from :func:`log_joint_weights`.

    Every GEMM has ``POSTERIOR_ROWS`` rows, so a row's posteriors are bit-identical in any
    batch (BLAS sums in another order for another shape, and a float64 log-joint rounded to
    float32 can then differ in its last bit). Posteriors that ``X``'s dtype would hold as
    subnormal numbers are zero (:func:`~dkernel.linalg.elementwise.flush_for`).
    """
    n = X.shape[0]
    Lt = np.empty((W.shape[0], n))  # (C, n) log-joints, then posteriors in place
    full = n - n % POSTERIOR_ROWS
    for start in range(0, full, POSTERIOR_ROWS):  # straight into Lt (BLAS takes its stride)
        sl = slice(start, start + POSTERIOR_ROWS)
        np.matmul(W, quadratic_design(X[sl]).T, out=Lt[:, sl])
    if full < n:  # the rest zero-padded to a whole block
        padded = np.zeros((POSTERIOR_ROWS, X.shape[1]))
        padded[: n - full] = X[full:]
        Lt[:, full:] = (W @ quadratic_design(padded).T)[:, : n - full]
    _normalize_segments_t(Lt, offsets)  # column by column: the same in any batch
    return flush_for(Lt, X.dtype).T.astype(X.dtype, copy=False)


def stacked_full_em(
    X: np.ndarray,
    means: np.ndarray,
    covs: np.ndarray,
    weights: np.ndarray,
    offsets: np.ndarray,
    n_iter: int,
    reg_covar: float | np.ndarray = 1e-6,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``n_iter`` EM iterations of the stacked full-covariance mixtures on complete ``X``.

    The same updates as :func:`dkernel.gmm.full_patterns.full_em` on every model (tested against it),
    computed in float64 and returned in the dtype of ``X``.

    Parameters
    ----------
    X : ndarray (n, p)
        No NaN.
    means, covs, weights : ndarray (C, p), (C, p, p), (C,)
        The stacked components' starting values.
    offsets : ndarray (M + 1,)
        Model ``m`` owns components ``offsets[m]:offsets[m+1]``.
    n_iter : int
    reg_covar : float or ndarray (p,)
        Added to every variance after each M-step (with
        :func:`~dkernel.gmm.em.full_variance_floor`'s jitter).

    Returns
    -------
    means (C, p), covs (C, p, p), weights (C,)
        float64 whatever the dtype of ``X``: rounded to float32 the covariance of a component on
        fewer points than columns can turn indefinite.

    Notes
    -----
    Per iteration three GEMMs with the design ``D = [x ⊗ x, x, 1]`` (``n × (p² + p + 1)``):
    the E-step's ``W Dᵀ`` and the M-step's ``R D``, which holds ``Σ r x xᵀ``, ``Σ r x`` and
    ``N_k`` together; O(n p² C) time, O(n C) memory for the responsibilities.
    """
    n, p = X.shape
    floor = full_variance_floor(X, reg_covar)
    design = quadratic_design(X)
    means = np.asarray(means, dtype=np.float64)
    covs = np.asarray(covs, dtype=np.float64)
    weights = np.asarray(weights, dtype=np.float64)
    eps = 10 * np.finfo(X.dtype).eps
    diag = np.arange(p)
    for _ in range(n_iter):
        R = (
            log_joint_weights(means, covs, weights) @ design.T
        )  # (C, n) log-joint, then responsibilities in place
        _normalize_segments_t(R, offsets)
        moments = R @ design  # (C, p² + p + 1): Σ r x xᵀ, Σ r x, Σ r
        nk = moments[:, -1] + eps
        means = moments[:, p * p : p * p + p] / nk[:, None]
        covs = moments[:, : p * p].reshape(-1, p, p) / nk[:, None, None]
        covs -= means[:, :, None] * means[:, None, :]
        covs = 0.5 * (covs + np.transpose(covs, (0, 2, 1)))
        covs[:, diag, diag] += floor
        weights = nk / n
    return means, covs, weights
