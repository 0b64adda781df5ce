"""Ranking metrics: NDCG@k against a reference (Løkse 2020, Paper II, §4 [Lokse2020]; NDCG:
Järvelin & Kekäläinen 2002 [Jarvelin2002]) and the score cosine ([Lokse2020], Paper I, §4.4)."""

from __future__ import annotations

import numpy as np
from sklearn.metrics import ndcg_score

from dkernel.errors import InvalidInputError


def ndcg_at_k(
    relevance: np.ndarray,
    scores: np.ndarray,
    k: int,
    *,
    exclude: np.ndarray | int | None = None,
) -> float:
    """NDCG@k of the ranking induced by ``scores`` with ``relevance`` as graded gains.

    [Lokse2020], Paper II, uses the exact PPR scores as the relevance of each point; DCG@k sums the
    gains of the top-k ranked points discounted by ``1/log2(rank + 1)`` and is divided by the ideal
    DCG (scikit-learn's :func:`~sklearn.metrics.ndcg_score`, ties averaged).

    Parameters
    ----------
    relevance : (n,) non-negative gains (e.g. the exact PPR).
    scores : (n,) predicted scores (e.g. KPPR).
    k : int
    exclude : int or array of int, optional
        Points left out of the ranking (the seed itself, [Lokse2020], Paper II, §4.2).

    Examples
    --------
    >>> ndcg_at_k(np.array([3.0, 2.0, 1.0]), np.array([0.9, 0.5, 0.1]), 2)
    1.0
    """
    relevance = np.asarray(relevance, dtype=np.float64).ravel()
    scores = np.asarray(scores, dtype=np.float64).ravel()
    if relevance.shape != scores.shape:
        raise InvalidInputError(
            f"relevance and scores differ in shape: {relevance.shape} vs {scores.shape}."
        )
    if exclude is not None:
        keep = np.ones(relevance.size, dtype=bool)
        keep[np.atleast_1d(exclude)] = False
        relevance, scores = relevance[keep], scores[keep]
    if (relevance < 0).any():
        raise InvalidInputError(
            "NDCG needs non-negative relevance; shift or clip the reference scores."
        )
    return float(ndcg_score(relevance[None, :], scores[None, :], k=int(k)))


def ndcg_at_k_columns(
    relevance: np.ndarray,
    scores: np.ndarray,
    k: int,
    *,
    exclude: np.ndarray | None = None,
) -> np.ndarray:
    """NDCG@k of many rankings at once, one per column; equals :func:`ndcg_at_k` column by column.

    Parameters
    ----------
    relevance : (n, q) non-negative gains, one query per column (e.g. exact PPR for q seeds).
    scores : (n, q) predicted scores.
    k : int
    exclude : (q,) int array, optional
        One row to leave out of each column's ranking (that query's seed).

    Returns
    -------
    ndcg : ndarray (q,)

    Notes
    -----
    Vectorised: O(q n log n). A column whose top ``k + 1`` scores hold a tie is handed to
    :func:`ndcg_at_k` (scikit-learn averages the gains of tied points), so the results agree
    exactly with the per-column function.

    Examples
    --------
    >>> rel = np.array([[3.0, 1.0], [2.0, 2.0], [1.0, 3.0]])
    >>> ndcg_at_k_columns(rel, rel, 2)
    array([1., 1.])
    """
    relevance = np.asarray(relevance, dtype=np.float64)
    scores = np.asarray(scores, dtype=np.float64)
    if relevance.ndim != 2 or relevance.shape != scores.shape:
        raise InvalidInputError(
            "relevance and scores must be 2-D arrays of the same shape (n, q); got "
            f"{relevance.shape} and {scores.shape}."
        )
    if (relevance < 0).any():
        raise InvalidInputError(
            "NDCG needs non-negative relevance; shift or clip the reference scores."
        )
    n, q = relevance.shape
    cols = np.arange(q)
    rel, sc = relevance, scores
    if exclude is not None:
        exclude = np.asarray(exclude, dtype=np.int64).ravel()
        if exclude.shape != (q,):
            raise InvalidInputError(
                f"exclude must hold one row per column ({q}); got {exclude.shape}."
            )
        keep = np.ones((n, q), dtype=bool)
        keep[exclude, cols] = False
        rel = relevance.T[keep.T].reshape(q, n - 1).T
        sc = scores.T[keep.T].reshape(q, n - 1).T
    kk = min(int(k), rel.shape[0])
    disc = 1.0 / np.log2(np.arange(2, kk + 2))
    order = np.argsort(-sc, axis=0, kind="stable")
    top = order[: kk + 1]
    dcg = np.take_along_axis(rel, top[:kk], axis=0).T @ disc
    idcg = -np.sort(-rel, axis=0)[:kk].T @ disc
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.where(idcg > 0, dcg / idcg, 0.0)
    top_sc = np.take_along_axis(sc, top, axis=0)
    tied = np.flatnonzero((np.diff(top_sc, axis=0) == 0).any(axis=0))
    for j in tied:
        out[j] = ndcg_at_k(rel[:, j], sc[:, j], k)
    return out


def score_cosine(a: np.ndarray, b: np.ndarray) -> float:
    """Cosine of the angle between two score vectors ([Lokse2020], Paper I, §4.4).

    Examples
    --------
    >>> score_cosine(np.array([1.0, 0.0]), np.array([2.0, 0.0]))
    1.0
    """
    a = np.asarray(a, dtype=np.float64).ravel()
    b = np.asarray(b, dtype=np.float64).ravel()
    na, nb = np.linalg.norm(a), np.linalg.norm(b)
    if na == 0 or nb == 0:
        raise InvalidInputError("score_cosine is undefined for a zero score vector.")
    return float(a @ b / (na * nb))
