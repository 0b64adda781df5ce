"""The default self-tuning kernel of
:class:`~dkernel.decomposition.KernelDecompositionClustering` on the exact path: one neighbour
search gives every training scale and (sparse) the kernel rows.

Where most rows repeat more often than the graph has neighbours (integer-valued data,
:data:`~dkernel.decomposition.kernels.COPY_CLIQUE_SHARE`), the graph is built on the distinct
rows (:class:`~dkernel.rows.RowCopies`). The estimator's
``_local_scaling_kernel`` delegates here, handing itself as ``model`` (typed ``Any``, as in
:mod:`dkernel.decomposition._bipartite_fit`: importing the estimator's module would make an
import circle).
"""

from __future__ import annotations

from typing import Any

import dask.array as da
import numpy as np

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
from dkernel.graphs.knn import MissingValueIndex, knn_search, training_neighbors
from dkernel.kernels.adaptive import tie_inclusive_neighbors
from dkernel.rows import RowCopies


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
    Xu = Xn[copies.first]
    m = Xu.shape[0]
    g = min(max(k + 1, int(model.scale_neighbors) + 1), m)
    model._index = model._fit_index(Xu)
    dist, ind = threaded_kneighbors(model._index, Xu, g, order=spatial_order(Xu))
    ind = ind.astype(np.int64)
    scales = fit_local_scales(dist, int(model.scale_neighbors))
    model._scales = LocalScales(scales.sigma, scales.n_neighbors, copies.counts)
    model.sigma_ = scales.sigma[copies.inverse]
    d, i, listed = _tied_lists(model._index, Xu, dist, ind, min(k, m))
    logK = local_scaling_log_kernel(d, scales.sigma, scales.sigma[i])
    logK = logK + np.log(copies.counts[i])
    if listed is not None:
        logK = np.where(listed, logK, -np.inf)
    rows = copies.inverse
    Kc, log_norm = knn_to_csr(copies.first[i][rows], logK[rows], Xn.shape[0])
    return Kc, log_norm, Xn
