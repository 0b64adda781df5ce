"""Clustering and ranking metrics."""

from __future__ import annotations

import numpy as np
from scipy.optimize import linear_sum_assignment
from sklearn.metrics import (
    adjusted_rand_score,
    mutual_info_score,
    normalized_mutual_info_score,
    silhouette_samples,
)


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
    return _matched_fraction(
        contingency_counts(y_true, y_pred, np.unique(y_true), np.unique(y_pred))
    )


def _matched_fraction(table: np.ndarray) -> float:
    """The fraction of samples on the best one-to-one matching of a contingency table."""
    n = int(table.sum())
    rows, cols = linear_sum_assignment(-table)
    return float(table[rows, cols].sum() / n) if n else 0.0


def clustering_scores(y_true: np.ndarray, y_pred: np.ndarray) -> dict[str, float]:
    """ACC (Hungarian), NMI and ARI in one dictionary.

    For labels too long to hold, ``scores_of_contingency`` gives the same scores from their
    contingency table (counted chunk by chunk by ``dkernel.rows.chunked_contingency_table``).
    """
    return {
        "acc": clustering_accuracy(y_true, y_pred),
        "nmi": float(normalized_mutual_info_score(y_true, y_pred)),
        "ari": float(adjusted_rand_score(y_true, y_pred)),
    }


def contingency_counts(
    y_true: np.ndarray, y_pred: np.ndarray, classes: np.ndarray, clusters: np.ndarray
) -> np.ndarray:
    """Counts ``C[i, j]`` of the samples of class ``classes[i]`` in cluster ``clusters[j]``
    (both sorted, holding every value of ``y_true`` and ``y_pred``)."""
    codes = np.searchsorted(classes, y_true) * clusters.size + np.searchsorted(clusters, y_pred)
    counts = np.bincount(codes, minlength=classes.size * clusters.size)
    return counts.reshape(classes.size, clusters.size)


def scores_of_contingency(table: np.ndarray) -> dict[str, float]:
    """:func:`clustering_scores` of labels given by their contingency table (scikit-learn's
    formulas and special cases: ARI of the pair confusion matrix, NMI with the arithmetic
    mean of the entropies).

    Examples
    --------
    >>> scores_of_contingency(np.array([[2, 0], [0, 2]]))["ari"]
    1.0
    """
    table = np.asarray(table, dtype=np.int64)
    return {"acc": _matched_fraction(table), "nmi": _nmi(table), "ari": _ari(table)}


def _ari(table: np.ndarray) -> float:
    # Python ints: the products of pair counts overflow int64 from about 10^5 samples
    n = int(table.sum())
    squares = int((table.astype(object) ** 2).sum())
    true_sizes = [int(v) for v in table.sum(axis=1)]
    pred_sizes = [int(v) for v in table.sum(axis=0)]
    tp = squares - n
    fp = sum(v * v for v in pred_sizes) - squares
    fn = sum(v * v for v in true_sizes) - squares
    tn = n * n - fp - fn - squares
    if fn == 0 and fp == 0:
        return 1.0
    return 2.0 * (tp * tn - fn * fp) / ((tp + fn) * (fn + tn) + (tp + fp) * (fp + tn))


def _nmi(table: np.ndarray) -> float:
    true_sizes, pred_sizes = table.sum(axis=1), table.sum(axis=0)
    n_classes, n_clusters = np.count_nonzero(true_sizes), np.count_nonzero(pred_sizes)
    if n_classes == n_clusters == 1 or n_classes == n_clusters == 0:
        return 1.0
    mi = float(mutual_info_score(None, None, contingency=table))
    if mi == 0:
        return 0.0
    return float(mi / ((_entropy(true_sizes) + _entropy(pred_sizes)) / 2))


def _entropy(sizes: np.ndarray) -> float:
    sizes = sizes[sizes > 0].astype(np.float64)
    total = sizes.sum()
    return float(-np.sum((sizes / total) * (np.log(sizes) - np.log(total))))


#: The silhouette of a labelling it is not defined for (one cluster, or one per point).
UNDEFINED_SILHOUETTE = -1.0


def mean_silhouette(
    X: np.ndarray,
    labels: np.ndarray,
    *,
    weights: np.ndarray | None = None,
    metric: str = "euclidean",
) -> float:
    """Mean silhouette ([Rousseeuw1987]) of ``labels``, each point's weighted by ``weights``
    (None: equally); ``X`` are points, or distances with ``metric='precomputed'``.
    ``UNDEFINED_SILHOUETTE`` for one cluster or one per point.

    Notes
    -----
    O(n² d) for n points of d columns.
    """
    labels = np.asarray(labels)
    n_labels = np.unique(labels).size
    if n_labels < 2 or n_labels >= labels.size:
        return UNDEFINED_SILHOUETTE
    values = silhouette_samples(np.asarray(X, dtype=np.float64), labels, metric=metric)
    return float(np.average(values, weights=weights))
