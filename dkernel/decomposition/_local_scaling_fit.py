"""The default self-tuning kernel of
:class:`~dkernel.decomposition.KernelDecompositionClustering` on the exact path: one neighbour
search gives every training scale and (sparse) the kernel rows.

Where most rows repeat more often than the graph has neighbours (integer-valued data,
:data:`~dkernel.decomposition.kernels.COPY_CLIQUE_SHARE`), the graph is built on the distinct
rows (:class:`~dkernel.rows.RowCopies`). Above ``EXACT_MAX_SAMPLES`` rows with at most as many
distinct values, where 'auto' would take the landmark path, the model is fitted on the distinct
rows alone, each standing for its copies (:func:`fit_distinct_rows`). The estimator's
``_local_scaling_kernel`` delegates here, handing itself as ``model`` (typed ``Any``, as in
:mod:`dkernel.decomposition._bipartite_fit`: importing the estimator's module would make an
import circle).
"""

from __future__ import annotations

from typing import Any

import dask.array as da
import numpy as np

from dkernel._validation import validate_input
from dkernel.decomposition._bipartite_fit import EXACT_MAX_SAMPLES
from dkernel.decomposition.kernels import (
    COPY_CLIQUE_SHARE,
    LocalScales,
    density_log_kernel,
    fit_local_scales,
    knn_to_csr,
    local_scaling_log_kernel,
    row_normalize_log,
    spatial_order,
    threaded_kneighbors,
)
from dkernel.graphs.knn import (
    MissingValueIndex,
    knn_search,
    rows_of_points,
    training_neighbors,
)
from dkernel.kernels.adaptive import tie_inclusive_neighbors
from dkernel.linalg.copies import RowCopies
from dkernel.rows import DistinctRows, few_distinct_rows


def local_scaling_kernel(model: Any, Xv: Any, Xn: np.ndarray, is_dask: bool) -> tuple:
    """``(Kcheck, log_norm, Xn)`` of the self-tuning kernel; sets the model's neighbour index,
    scales, ``sigma_`` and ``_copies``. Dask input is searched blockwise."""
    n = Xn.shape[0]
    k = model.n_neighbors
    if k is not None and not np.isnan(Xn).any():
        copies = RowCopies.of(Xn)
        if copies is not None and copies.share_isolated(int(k)) >= COPY_CLIQUE_SHARE:
            model._copies = copies
            return distinct_rows_kernel(model, Xn, copies, int(k))
    g = min(max(int(k or 0) + 1, int(model.scale_neighbors) + 1), n)
    model._index = model._fit_index(Xn)
    if isinstance(model._index, MissingValueIndex):
        # each point first at distance 0 (a new point would be a new draw of its holes)
        dist, ind = training_neighbors(model._index, Xn, g)
    elif is_dask:
        dist, ind = da.compute(*knn_search(model._index, Xv, g))
    else:
        dist, ind = threaded_kneighbors(model._index, Xn, g, order=spatial_order(Xn))
    ind = ind.astype(np.int64)
    model._scales = fit_local_scales(dist, int(model.scale_neighbors))
    model.sigma_ = model._scales.sigma
    if k is None:
        model._check_dense_budget(n)
        model._index = None
        logK = density_log_kernel(Xn, Xn, kernel="local_scaling", sigma=model._scales)
        Kc, log_norm = row_normalize_log(logK)
    else:
        d, i, listed = _tied_lists(model._index, Xn, dist, ind, int(k))
        logK = local_scaling_log_kernel(d, model._scales.sigma, model._scales.sigma[i])
        if listed is not None:
            logK = np.where(listed, logK, -np.inf)
        Kc, log_norm = knn_to_csr(i, logK, n)
    return Kc, log_norm, Xn


def _tied_lists(index: Any, P: np.ndarray, dist: np.ndarray, ind: np.ndarray, k: int) -> tuple:
    """The k-NN lists of the training points ``P`` with every point tied with the k-th kept
    (:func:`dkernel.kernels.adaptive.tie_inclusive_neighbors`), from their search ``dist, ind``."""
    if isinstance(index, MissingValueIndex):  # expected distances do not tie
        return dist[:, :k], ind[:, :k], None
    return tie_inclusive_neighbors(
        lambda rows, count: training_neighbors(index, P[rows], count),
        P.shape[0],
        k,
        P.shape[0],
        first=(dist, ind),
    )


def distinct_rows_kernel(model: Any, Xn: np.ndarray, copies: RowCopies, k: int) -> tuple:
    """The self-tuning k-NN kernel of X with repeated rows, built on its distinct rows: each
    row lists its k nearest distinct rows, their kernel values weighted by their copies, at
    the columns of their first copies."""
    ind, logK = _distinct_kernel_rows(model, Xn[copies.first], copies.counts, k)
    model.sigma_ = model._scales.sigma[copies.inverse]
    rows = copies.inverse
    Kc, log_norm = knn_to_csr(copies.first[ind][rows], logK[rows], Xn.shape[0])
    return Kc, log_norm, Xn


def _distinct_kernel_rows(model: Any, points: np.ndarray, counts: np.ndarray, k: int) -> tuple:
    """``(ind, logK)``: each distinct point's k nearest distinct points (ties kept) and their
    log kernel values times their copies; sets the model's index and scales over the points."""
    m = points.shape[0]
    g = min(max(k + 1, int(model.scale_neighbors) + 1), m)
    model._index = model._fit_index(points)
    dist, ind = threaded_kneighbors(model._index, points, g, order=spatial_order(points))
    ind = ind.astype(np.int64)
    scales = fit_local_scales(dist, int(model.scale_neighbors))
    model._scales = LocalScales(scales.sigma, scales.n_neighbors, counts)
    d, i, listed = _tied_lists(model._index, points, dist, ind, min(k, m))
    logK = local_scaling_log_kernel(d, scales.sigma, scales.sigma[i]) + np.log(counts[i])
    if listed is not None:
        logK = np.where(listed, logK, -np.inf)
    return i, logK


def few_distinct_training_rows(model: Any, X: Any) -> tuple[Any, DistinctRows] | None:
    """X (validated) and its distinct rows when 'auto' chose the landmark path for their
    number but they are few enough for the exact path (``EXACT_MAX_SAMPLES``), and more than
    the clusters need; else None (also with NaN, which the landmark path refuses)."""
    if model.approximation != "auto" or model.n_landmarks is not None:
        return None
    Xv = validate_input(model, X, reset=True, min_samples=2, dtype=np.float64, allow_nan=True)
    distinct = few_distinct_rows(Xv, EXACT_MAX_SAMPLES)
    if distinct is None:
        return None
    k = model.n_clusters
    needed = int(model._candidates(distinct.points.shape[0])[-1]) if k == "auto" else int(k)
    enough = distinct.points.shape[0] > max(needed, int(model.n_neighbors)) + 1
    return (Xv, distinct) if enough else None


def fit_distinct_rows(
    model: Any, Xv: Any, distinct: DistinctRows, *, posteriors: bool = True
) -> Any:
    """The exact k-NN model of all rows of Xv, fitted on its distinct rows, each standing for
    its copies (:func:`~dkernel.decomposition.nmf.fit_aggregate_markov`'s ``copies``):
    ``X_fit_``, ``W_``, ``H_`` and ``sigma_`` are over the distinct rows, and every row takes
    its own point's posteriors (:func:`distinct_rows_posteriors`).

    The factorisation has the distinct rows' size, so its cost and memory do not grow with the
    rows. ``posteriors=False`` stops before the rows' posteriors and labels (a job writes the
    lazy ones chunk by chunk)."""
    points, counts = distinct.points, distinct.counts
    ind, logK = _distinct_kernel_rows(model, points, counts, int(model.n_neighbors))
    Kc, log_norm = knn_to_csr(ind, logK, points.shape[0])
    model.fit_kernel(Kc, log_norm, points, copies=counts.astype(np.float64))
    model._copies = None  # X_fit_ holds the distinct rows themselves; _scales their copies
    model._point_posteriors = model.posteriors_
    model.sigma_ = model._scales.sigma
    del model.posteriors_, model.labels_
    if posteriors:
        rows = distinct_rows_posteriors(model, Xv)
        model.posteriors_ = np.asarray(rows.compute() if isinstance(rows, da.Array) else rows)
        model.labels_ = np.argmax(model.posteriors_, axis=1).astype(np.int64)
    return model


def distinct_rows_posteriors(model: Any, Xv: Any) -> Any:
    """The posteriors of the training rows Xv after :func:`fit_distinct_rows`: each row's
    point's; lazily, chunk by chunk, for Dask input."""
    return rows_of_points(Xv, model._index, model._point_posteriors)
