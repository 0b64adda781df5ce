"""Sums of rows by label (NumPy only)."""

from __future__ import annotations

import numpy as np

__all__ = ["label_sums"]


def label_sums(
    values: np.ndarray, labels: np.ndarray, n_labels: int
) -> tuple[np.ndarray, np.ndarray]:
    """``(Σ_{labels_i = j} values_i, count of label j)`` for ``j < n_labels``, in float64.

    Rows with a label < 0 (nodata, no partition) or >= ``n_labels`` are ignored, NaN in them
    included.

    Notes
    -----
    O(n d): one ``np.bincount`` per column.
    """
    labels = np.asarray(labels, dtype=np.int64).ravel()
    values = np.asarray(values).reshape(labels.size, -1)
    keep = (labels >= 0) & (labels < n_labels)
    lab = labels[keep]
    counts = np.bincount(lab, minlength=n_labels).astype(np.int64)
    sums = np.empty((n_labels, values.shape[1]), dtype=np.float64)
    for j in range(values.shape[1]):
        sums[:, j] = np.bincount(
            lab, weights=values[keep, j].astype(np.float64), minlength=n_labels
        )
    return sums, counts
