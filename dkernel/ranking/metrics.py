"""Ranking metrics: NDCG@k against a reference (Paper II §4), score cosine (Paper I §4.4)."""

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

    Paper II uses the exact PPR scores as the relevance of each point; DCG@k sums the gains of
    the top-k ranked points discounted by ``1/log2(rank + 1)`` and is divided by the ideal DCG
    (scikit-learn's :func:`~sklearn.metrics.ndcg_score`, ties averaged).

    Parameters
    ----------
    relevance : (n,) non-negative gains (e.g. the exact PPR).
    scores : (n,) predicted scores (e.g. KPPR).
    k : int
    exclude : int or array of int, optional
        Points left out of the ranking (the seed itself, Paper II §4.2).

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


def score_cosine(a: np.ndarray, b: np.ndarray) -> float:
    """Cosine of the angle between two score vectors (Paper I §4.4).

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
