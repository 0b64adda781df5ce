"""Out-of-sample use of the aggregate Markov model (Szymkowiak-Have et al. 2006
[SzymkowiakHave2006], Eq. 8-14): class posteriors and log-densities of new points from the
factors ``dkernel.decomposition.nmf.fit_aggregate_markov`` fitted.

Numeric layer: NumPy/SciPy on in-memory arrays, no Dask, no I/O.
"""

from __future__ import annotations

import numpy as np
from scipy.special import logsumexp

from dkernel.decomposition.kernels import density_log_kernel, knn_log_kernel, row_normalize_log


def posteriors(Kcheck_q, H: np.ndarray) -> np.ndarray:
    """Out-of-sample class posteriors, Eq. 8-10: ``P(c|z) = sum_n P(c|x_n) Kcheck(z, x_n)``.

    Parameters
    ----------
    Kcheck_q : ndarray or CSR (n_query, n)
        Row-normalised kernel between query and training points.
    H : ndarray (C, n)

    Returns
    -------
    ndarray (n_query, C); non-negative, rows sum to 1.

    Notes
    -----
    O(n_query n C) dense, O(nnz C) sparse.
    """
    return np.asarray(Kcheck_q @ H.T)


def point_weights(W: np.ndarray, H: np.ndarray, copies: np.ndarray | None = None) -> np.ndarray:
    """``m_l = sum_c P(x_l | c) P(c)`` with ``P(c) = mean_n P(c | x_n)`` (Eq. 14 collapsed).

    ``copies`` (n,): the columns of ``H`` stand for that many rows each (distinct rows of a
    training set with repeated rows), so ``P(c)`` is their weighted mean.
    """
    if copies is None:
        return W @ H.mean(axis=1)
    return W @ (H @ copies / copies.sum())


def log_likelihood(
    logK_q: np.ndarray,
    W: np.ndarray,
    H: np.ndarray,
    indices: np.ndarray | None = None,
    copies: np.ndarray | None = None,
) -> np.ndarray:
    """Out-of-sample log-density ``log p(z)`` of Eq. 14.

    ``p(z) = 1/N sum_n sum_l sum_c K(z, x_l) P(x_l|c) P(c|x_n) = sum_l K(z, x_l) m_l`` with
    ``m = W (H 1 / N)``; evaluated as a log-sum-exp so small widths never underflow.

    Parameters
    ----------
    logK_q : ndarray (n_query, n) dense, or (n_query, k) with ``indices``
        ``log K(z, x_l)`` (un-normalised kernel).
    indices : ndarray (n_query, k), optional
        Training indices of ``logK_q`` columns (k-NN kernel).
    copies : ndarray (n,), optional
        Rows each training point stands for (:func:`point_weights`).

    Notes
    -----
    O(n_query n) dense or O(n_query k) for the k-NN kernel, after O(n C) for ``m``.
    """
    with np.errstate(divide="ignore"):
        log_m = np.log(np.maximum(point_weights(W, H, copies), 0.0))
    terms = logK_q + (log_m[indices] if indices is not None else log_m[None, :])
    return logsumexp(terms, axis=1)


def out_of_sample_rows(Xq: np.ndarray, model: tuple, *, what: str) -> np.ndarray:
    """Posteriors (Eq. 8-10) or log-densities (Eq. 14) of one block of query points.

    Parameters
    ----------
    Xq : ndarray (n_query, p)
    model : tuple
        ``(Xt, W, H, kernel, sigma, n_neighbors, index)``: training points, factors,
        kernel settings and (k-NN kernel) the neighbour index over ``Xt``.
    what : {'posteriors', 'loglik'}

    Notes
    -----
    Dense kernel: O(n_query n p) time, O(n_query n) memory; k-NN: O(n_query k C) after the
    neighbour search.
    """
    Xt, W, H, kernel, sigma, n_neighbors, index = model
    if n_neighbors is None:
        logK = density_log_kernel(Xq, Xt, kernel=kernel, sigma=sigma)
        ind = None
    else:
        ind, logK = knn_log_kernel(
            Xq, Xt, kernel=kernel, sigma=sigma, n_neighbors=n_neighbors, index=index
        )
    copies = getattr(sigma, "copies", None)
    if what == "loglik":
        # W's row of a distinct row already holds the mass of all its copies
        return log_likelihood(logK, W, H, indices=ind, copies=copies)
    if copies is not None and ind is not None:
        # a neighbour stands for its copies (RowCopies): its share of P(x_l | z) is theirs
        logK = logK + np.log(copies[ind])
    Kc, _ = row_normalize_log(logK)
    if ind is None:
        return posteriors(Kc, H)
    return np.einsum("qk,qkc->qc", Kc, H.T[ind])
