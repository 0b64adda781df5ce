"""Clustering and ranking metrics."""

from __future__ import annotations

from typing import Any

import numpy as np
from dask import is_dask_collection
from scipy.optimize import linear_sum_assignment
from sklearn.metrics import adjusted_rand_score, mutual_info_score, normalized_mutual_info_score


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


def clustering_scores(y_true: Any, y_pred: Any) -> dict[str, float]:
    """ACC (Hungarian), NMI and ARI in one dictionary.

    NumPy labels are scored by scikit-learn; when either is a Dask array, from their
    contingency table accumulated chunk by chunk (:func:`contingency_table`), so that neither
    is ever held whole: the same scores (to rounding), at any N.
    """
    if is_dask_collection(y_true) or is_dask_collection(y_pred):
        return scores_of_contingency(contingency_table(y_true, y_pred))
    return {
        "acc": clustering_accuracy(y_true, y_pred),
        "nmi": float(normalized_mutual_info_score(y_true, y_pred)),
        "ari": float(adjusted_rand_score(y_true, y_pred)),
    }


def contingency_table(y_true: Any, y_pred: Any) -> np.ndarray:
    """Counts ``C[i, j]`` of the samples of the i-th true class in the j-th cluster (classes
    and clusters in sorted order), of NumPy or Dask labels; Dask labels are counted chunk by
    chunk, the classes found in a first pass."""
    import dask.array as da

    y_true, y_pred = da.asarray(y_true), da.asarray(y_pred)
    if y_true.shape != y_pred.shape:
        raise ValueError(f"y_true and y_pred differ in shape: {y_true.shape} vs {y_pred.shape}")
    classes, clusters = da.compute(da.unique(y_true), da.unique(y_pred))
    y_true = y_true.rechunk(y_pred.chunks)
    counts = da.map_blocks(
        _block_counts,
        y_true,
        y_pred,
        classes,
        clusters,
        new_axis=[1, 2],
        chunks=((1,) * y_pred.numblocks[0], (classes.size,), (clusters.size,)),
        dtype=np.int64,
        meta=np.empty((0, 0, 0), dtype=np.int64),
    )
    return np.asarray(counts.sum(axis=0).compute())


def _block_counts(
    y_true: np.ndarray, y_pred: np.ndarray, classes: np.ndarray, clusters: np.ndarray
) -> np.ndarray:
    """One chunk's contingency table, shape (1, classes, clusters)."""
    codes = np.searchsorted(classes, y_true) * clusters.size + np.searchsorted(clusters, y_pred)
    counts = np.bincount(codes, minlength=classes.size * clusters.size)
    return counts.reshape(1, classes.size, clusters.size)


def scores_of_contingency(table: np.ndarray) -> dict[str, float]:
    """:func:`clustering_scores` of labels given by their contingency table (scikit-learn's
    formulas and special cases: ARI of the pair confusion matrix, NMI with the arithmetic
    mean of the entropies)."""
    table = np.asarray(table, dtype=np.int64)
    n = int(table.sum())
    rows, cols = linear_sum_assignment(-table)
    acc = float(table[rows, cols].sum() / n) if n else 0.0
    return {"acc": acc, "nmi": _nmi(table), "ari": _ari(table)}


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
