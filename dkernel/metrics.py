"""Clustering and ranking metrics."""

from __future__ import annotations

import numpy as np
from scipy.optimize import linear_sum_assignment
from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score


def clustering_accuracy(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    """Accuracy under the best one-to-one matching of predicted to true labels ([Kuhn1955]).

    Examples
    --------
    >>> clustering_accuracy([0, 0, 1, 1], [1, 1, 0, 0])
    1.0
    """
    y_true = np.asarray(y_true)
    y_pred = np.asarray(y_pred)
    if y_true.shape != y_pred.shape:
        raise ValueError(f"y_true and y_pred differ in shape: {y_true.shape} vs {y_pred.shape}")
    t_vals, t_idx = np.unique(y_true, return_inverse=True)
    p_vals, p_idx = np.unique(y_pred, return_inverse=True)
    counts = np.zeros((p_vals.size, t_vals.size), dtype=np.int64)
    np.add.at(counts, (p_idx, t_idx), 1)
    rows, cols = linear_sum_assignment(-counts)
    return float(counts[rows, cols].sum() / y_true.size)


def clustering_scores(y_true: np.ndarray, y_pred: np.ndarray) -> dict[str, float]:
    """ACC (Hungarian), NMI and ARI in one dictionary."""
    return {
        "acc": clustering_accuracy(y_true, y_pred),
        "nmi": float(normalized_mutual_info_score(y_true, y_pred)),
        "ari": float(adjusted_rand_score(y_true, y_pred)),
    }
