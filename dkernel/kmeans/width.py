"""The RBF width of ``KernelKMeans(sigma_fraction='auto')``: kernel k-means at a few widths, the
partition kept whose silhouette is highest in the feature space of the narrowest width's kernel.

No one width suits kernel k-means everywhere: a narrow kernel (half the median distance)
follows non-convex groups drawn in the plane, a wide one (twice the median distance, nearly
k-means) keeps the unequal, overlapping classes of real tables together where the narrow one
splits them evenly. Each candidate partition is scored by its silhouette (Rousseeuw 1987
[Rousseeuw1987]) with the distances ``‖φ(x) − φ(y)‖ = √(2 − 2 k(x, y))`` of one fixed
kernel, the narrowest candidate's, so that the scores compare partitions, not kernels.

Measured with ``benchmarks/bench_realdata.py``'s harness (35 real sets × seeds 0-2, 3 000-row
samples; mean ARI / sets ≥ k-means) and the 23-set suite of ``benchmarks/bench_defaults.py``
(2 000 points, seed 0): the width 0.5 alone 0.393 / 17, suite 0.578; 2.0 alone 0.404 / 21,
suite 0.561; the candidates 0.5, 1, 2 scored by the Euclidean silhouette 0.405 / 22, suite
0.568; by the silhouette in the 0.5 kernel's feature space 0.419 / 22, suite 0.589 (k-means:
0.397). NumPy/SciPy/scikit-learn only.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
from sklearn.metrics import silhouette_score

from dkernel._random import derive_rng
from dkernel._validation import as_numpy
from dkernel.kernels.widths import KERNEL_KMEANS_SIGMA_FRACTIONS
from dkernel.rows import take_rows

#: Rows the widths are compared on (a uniform sample above; O(rows²) kernel and distances).
WIDTH_SAMPLE = 3000
#: Score of a partition the silhouette is not defined for (one cluster, or one per point).
UNDEFINED_SILHOUETTE = -1.0


def kernel_silhouette(K: np.ndarray, labels: np.ndarray) -> float:
    """Mean silhouette of ``labels`` in the feature space of a kernel with ``k(x, x) = 1``.

    Parameters
    ----------
    K : ndarray of shape (n, n)
        Kernel matrix of the points (an RBF kernel: unit self-similarity).
    labels : ndarray of shape (n,)

    Returns
    -------
    float
        In [-1, 1]; ``UNDEFINED_SILHOUETTE`` when ``labels`` has one cluster or one per point.
    """
    labels = np.asarray(labels)
    n_labels = np.unique(labels).size
    if n_labels < 2 or n_labels >= labels.size:
        return UNDEFINED_SILHOUETTE
    D = np.sqrt(np.clip(2.0 - 2.0 * np.asarray(K, dtype=np.float64), 0.0, None))
    np.fill_diagonal(D, 0.0)
    return float(silhouette_score(D, labels, metric="precomputed"))


def width_sample(n: int, rng: np.random.Generator) -> np.ndarray | None:
    """Sorted rows the widths are compared on, or None for all ``n``."""
    if n <= WIDTH_SAMPLE:
        return None
    return np.sort(rng.choice(n, size=WIDTH_SAMPLE, replace=False))


def choose_sigma_fraction(
    estimator: Any, X: Any, seed: int | None, **overrides: Any
) -> tuple[float, np.ndarray, np.ndarray]:
    """The fraction of ``KERNEL_KMEANS_SIGMA_FRACTIONS`` whose partition scores highest.

    Parameters
    ----------
    estimator : KernelKMeans
        Its clones, one per fraction (with ``overrides`` set), are fitted on at most
        ``WIDTH_SAMPLE`` rows of ``X``; their warnings are left to the final fit.
    X : ndarray or dask array of shape (n, p)
        Validated training data.
    seed : int, optional
        Seeds the sample and every clone.

    Returns
    -------
    fraction : float
        The first of the highest scores (the narrowest on a tie).
    candidates, scores : ndarray
        Every fraction and its :func:`kernel_silhouette` in the narrowest one's kernel.
    """
    from sklearn.base import clone

    rows = width_sample(int(X.shape[0]), derive_rng(seed, "kernel-kmeans-width"))
    sample = as_numpy(X, np.float64) if rows is None else take_rows(X, rows, np.float64)
    candidates = np.asarray(KERNEL_KMEANS_SIGMA_FRACTIONS, dtype=np.float64)
    fits = []
    for fraction in candidates:
        model = clone(estimator).set_params(
            sigma_fraction=float(fraction), random_state=seed, **overrides
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fits.append(model.fit(sample))
    reference = fits[0].kernel_(sample)
    scores = np.array([kernel_silhouette(reference, fit.labels_) for fit in fits])
    return float(candidates[int(np.argmax(scores))]), candidates, scores
