"""Euclidean and angular k-means, best of ``n_init`` by cost.

Euclidean k-means is scikit-learn's. Angular k-means (KECA's clustering, Jenssen 2010 [Jenssen2010];
Agersborg 2012, Eq. 4.17 [Agersborg2012]) maximises the summed cosine between points and their
centre; its deterministic initialisation takes the pair of points of smallest cosine, then greedily
the point minimising the summed cosine to the chosen centres. Further restarts use random seeds.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
from sklearn.cluster import KMeans
from sklearn.exceptions import ConvergenceWarning

from dkernel.errors import warn_if_clusters_lost


@contextmanager
def without_lost_clusters_warning() -> Iterator[None]:
    """Silence scikit-learn's KMeans warning that some clusters ended empty ("Number of
    distinct clusters ... found smaller than n_clusters"), which points at ``sklearn/base.py``:
    the caller warns at the user's line instead, or drops the empty clusters."""
    with warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore", message="Number of distinct clusters", category=ConvergenceWarning
        )
        yield


def euclidean_kmeans(
    Z: np.ndarray,
    n_clusters: int,
    *,
    n_init: int = 10,
    random_state: int | None = None,
    sample_weight: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, float]:
    """k-means (k-means++ seeds), best of ``n_init``; returns labels, centres and inertia
    (each row counted ``sample_weight`` times). Fewer distinct clusters than ``n_clusters``
    warn at the user's line (``dkernel.errors.warn_if_clusters_lost``), not at scikit-learn's."""
    km = KMeans(n_clusters=n_clusters, n_init=n_init, random_state=random_state)
    with without_lost_clusters_warning():
        km.fit(Z, sample_weight=sample_weight)
    labels = km.labels_.astype(np.int64)
    warn_if_clusters_lost(int(np.unique(labels).size), n_clusters)
    return labels, km.cluster_centers_, float(km.inertia_)


def normalize_rows(Z: np.ndarray) -> np.ndarray:
    """Rows scaled to unit Euclidean norm (the NJW step before k-means); zero rows stay zero."""
    norms = np.linalg.norm(Z, axis=1, keepdims=True)
    return Z / np.where(norms > 0, norms, 1.0)


def keca_initial_centers(U: np.ndarray, n_clusters: int) -> np.ndarray:
    """KECA initialisation on unit-norm rows ``U``: returns indices of the chosen points.

    Notes
    -----
    O(n^2) only for the first pair when n is small; for large n the pair is searched on the
    row of the globally most extreme point, which is O(n k).
    """
    n = U.shape[0]
    if n <= 4000:
        C = U @ U.T
        i, j = np.unravel_index(np.argmin(C), C.shape)
    else:  # avoid an n x n matrix: anchor on the point farthest (in cosine) from the mean
        mean = U.mean(axis=0)
        i = int(np.argmin(U @ mean))
        j = int(np.argmin(U @ U[i]))
    chosen = [int(i), int(j)]
    summed = U @ U[i] + U @ U[j]
    while len(chosen) < n_clusters:
        summed_masked = summed.copy()
        summed_masked[chosen] = np.inf
        nxt = int(np.argmin(summed_masked))
        chosen.append(nxt)
        summed += U @ U[nxt]
    return np.asarray(chosen[:n_clusters])


def _angular_lloyd(U, centers, max_iter, tol):
    labels = None
    for _ in range(max_iter):
        sims = U @ centers.T
        new_labels = np.argmax(sims, axis=1)
        if labels is not None and np.array_equal(new_labels, labels):
            break
        labels = new_labels
        sums = np.zeros_like(centers)
        np.add.at(sums, labels, U)
        norms = np.linalg.norm(sums, axis=1, keepdims=True)
        empty = norms[:, 0] == 0
        moved = np.where(empty[:, None], centers, sums / np.where(norms > 0, norms, 1.0))
        shift = float(np.sum((moved - centers) ** 2))
        centers = moved
        if shift <= tol:
            break
    sims = U @ centers.T
    labels = np.argmax(sims, axis=1)
    cost = float(np.sum(1.0 - sims[np.arange(U.shape[0]), labels]))
    return labels, centers, cost


def angular_kmeans(
    Z: np.ndarray,
    n_clusters: int,
    *,
    n_init: int = 10,
    max_iter: int = 300,
    tol: float = 0.0,
    random_state: int | None = None,
) -> tuple[np.ndarray, np.ndarray, float]:
    """Angular (cosine) k-means; first start from the KECA initialisation, others random.

    A run stops when no label changes, after ``max_iter`` Lloyd steps, or when the centres
    move by at most ``tol`` in all (sum of squared shifts of the unit-norm centres).

    Returns labels, unit-norm centres and the cost ``sum(1 - cos(z_i, m_c(i)))``.
    """
    U = normalize_rows(np.asarray(Z, dtype=np.float64))
    rng = np.random.default_rng(random_state)
    best = None
    for run in range(max(1, n_init)):
        if run == 0:
            idx = keca_initial_centers(U, n_clusters)
        else:
            idx = rng.choice(U.shape[0], size=n_clusters, replace=False)
        result = _angular_lloyd(U, U[idx].copy(), max_iter, tol)
        if best is None or result[2] < best[2] - 1e-12:
            best = result
    labels, centers, cost = best
    return labels.astype(np.int64), centers, cost
