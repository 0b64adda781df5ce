"""Full-covariance EM for one mixture on incomplete data (Alg. 1 of [Lokse2020] Paper I).

Points are grouped by missingness pattern so that the Cholesky factors of the observed blocks
are shared by every point with that pattern. Computed and returned in float64 whatever the data's
dtype. On complete rows :mod:`dkernel.gmm.stacked_full` fits many models at once.
"""

from __future__ import annotations

import numpy as np

from dkernel.gmm.em import LOG_2PI, full_variance_floor
from dkernel.linalg.elementwise import exp_flushed


def missingness_patterns(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Unique observed-masks (P, p) of bool and the pattern index of every row (N,)."""
    obs = ~np.isnan(X)
    patterns, inverse = np.unique(obs, axis=0, return_inverse=True)
    return patterns, inverse.reshape(-1)


def _full_pattern_stats(X, means, covs, patterns, inverse):
    """Yield (rows, obs, mis, log_prob (n_rows, g), yhat (g, n_rows, p), corr (g, p, p))."""
    g, p = means.shape
    for pi, obs in enumerate(patterns):
        rows = np.flatnonzero(inverse == pi)
        mis = ~obs
        n_o = int(obs.sum())
        if n_o == 0:
            yhat = np.broadcast_to(means[:, None, :], (g, rows.size, p)).copy()
            yield rows, obs, mis, np.zeros((rows.size, g)), yhat, covs.copy()
            continue
        xo = X[np.ix_(rows, np.flatnonzero(obs))]  # (n, o)
        S_oo = covs[:, obs][:, :, obs]  # (g, o, o)
        chol = np.linalg.cholesky(S_oo)
        diff = xo[None, :, :] - means[:, None, obs]  # (g, n, o)
        # solve L z = diff^T for each component
        z = np.linalg.solve(chol, np.transpose(diff, (0, 2, 1)))  # (g, o, n)
        maha = np.sum(z * z, axis=1)  # (g, n)
        logdet = 2.0 * np.sum(np.log(np.diagonal(chol, axis1=1, axis2=2)), axis=1)
        log_prob = -0.5 * (maha + logdet[:, None] + n_o * LOG_2PI)
        yhat = np.empty((g, rows.size, p), dtype=X.dtype)
        yhat[:, :, obs] = xo[None, :, :]
        corr = np.zeros((g, p, p), dtype=X.dtype)
        if mis.any():
            # alpha = S_oo^{-1} (x_o - mu_o): solve L^T alpha = z
            alpha = np.linalg.solve(np.transpose(chol, (0, 2, 1)), z)  # (g, o, n)
            S_mo = covs[:, mis][:, :, obs]  # (g, m, o)
            yhat[:, :, mis] = means[:, None, mis] + np.transpose(S_mo @ alpha, (0, 2, 1))
            # conditional covariance of the missing block: S_mm - S_mo S_oo^{-1} S_om
            W = np.linalg.solve(chol, np.transpose(S_mo, (0, 2, 1)))  # (g, o, m)
            cond = covs[:, mis][:, :, mis] - np.transpose(W, (0, 2, 1)) @ W
            idx = np.flatnonzero(mis)
            corr[:, idx[:, None], idx[None, :]] = cond
        yield rows, obs, mis, log_prob.T, yhat, corr


def full_log_prob(X: np.ndarray, means: np.ndarray, covs: np.ndarray) -> np.ndarray:
    """Log-density (N, g) of each point's observed part under each full-covariance component.

    Notes
    -----
    O(P g o³ + N g o²) for P missingness patterns with o observed coordinates.
    """
    patterns, inverse = missingness_patterns(X)
    out = np.empty((X.shape[0], means.shape[0]), dtype=X.dtype)
    # float64 factors: a tight component's observed block is not positive definite in float32
    X64, means, covs = (np.asarray(a, dtype=np.float64) for a in (X, means, covs))
    for rows, _o, _m, log_prob, _y, _c in _full_pattern_stats(X64, means, covs, patterns, inverse):
        out[rows] = log_prob
    return out


def full_posteriors(X: np.ndarray, means, covs, weights) -> np.ndarray:
    """Posterior probabilities (N, g) under one full-covariance mixture (NaN = missing)."""
    L = full_log_prob(X, means, covs) + np.log(weights)[None, :]
    L -= L.max(axis=1, keepdims=True)
    exp_flushed(L)
    L /= L.sum(axis=1, keepdims=True)
    return L


def full_em(
    X: np.ndarray,
    means: np.ndarray,
    covs: np.ndarray,
    weights: np.ndarray,
    n_iter: int,
    reg_covar: float = 1e-6,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``n_iter`` EM iterations of one full-covariance mixture on incomplete data (Alg. 1).

    Returns
    -------
    means (g, p), covs (g, p, p), weights (g,), loglik (n_iter,)
        float64 whatever the dtype of ``X``.

    Notes
    -----
    Per iteration O(P g o³ + N g p²) with P distinct missingness patterns; memory O(N g p)
    for one pattern's conditional expectations.
    """
    # computed and returned in float64 whatever X's dtype: in float32 the covariance of a
    # component with fewer points than columns can lose positive definiteness
    dtype = X.dtype
    floor = full_variance_floor(X, reg_covar)
    X = X.astype(np.float64)
    means = means.astype(np.float64)
    covs = covs.astype(np.float64)
    weights = weights.astype(np.float64)
    g, p = means.shape
    n = X.shape[0]
    patterns, inverse = missingness_patterns(X)
    eps = 10 * np.finfo(dtype).eps
    history = np.empty(n_iter)
    for it in range(n_iter):
        stats = list(_full_pattern_stats(X, means, covs, patterns, inverse))
        L = np.empty((n, g))
        for rows, _o, _m, log_prob, _y, _c in stats:
            L[rows] = log_prob
        L += np.log(weights)[None, :]
        mx = L.max(axis=1, keepdims=True)
        lse = np.log(np.exp(L - mx).sum(axis=1, keepdims=True)) + mx
        history[it] = float(lse.mean())
        R = np.exp(L - lse)
        nk = R.sum(axis=0) + eps
        sum_y = np.zeros((g, p))
        for rows, _o, _m, _lp, yhat, _c in stats:
            sum_y += np.einsum("nk,knp->kp", R[rows], yhat)
        new_means = sum_y / nk[:, None]
        new_covs = np.zeros((g, p, p))
        for rows, _o, _m, _lp, yhat, corr in stats:
            r = R[rows]  # (n, g)
            d = yhat - new_means[:, None, :]  # (g, n, p)
            new_covs += np.einsum("nk,knp,knq->kpq", r, d, d)
            new_covs += r.sum(axis=0)[:, None, None] * corr
        new_covs /= nk[:, None, None]
        new_covs[:, np.arange(p), np.arange(p)] += floor
        means, covs, weights = new_means, new_covs, nk / n
    return means, covs, weights, history
