"""Dask graphs for the kernel-decomposition clustering: blockwise k-NN kernels and
out-of-sample posteriors / log-likelihoods, one task per row block of the query points; the
cells of a model-selection grid, one task per (repeat, K, h).

The training points (and the fitted factors) enter the graph once, as a single
``dask.delayed`` object every block task depends on, so a distributed scheduler ships them to
each worker once instead of once per task. Nothing here calls ``compute``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import dask
import dask.array as da
import numpy as np

from dkernel.decomposition.kernels import fit_neighbors, knn_log_kernel
from dkernel.decomposition.nmf_posteriors import out_of_sample_rows
from dkernel.graphs.blocked import as_row_chunked


def _row_chunked(X: Any, block_rows: int | None) -> da.Array:
    if isinstance(X, da.Array):
        return X.rechunk({0: block_rows, 1: -1}) if block_rows else X.rechunk({1: -1})
    X = np.asarray(X)
    return as_row_chunked(X, block_rows or max(1, min(X.shape[0], 10_000)))


def _knn_block(xb, index, *, kernel, sigma, n_neighbors):
    ind, logK = knn_log_kernel(
        xb, None, kernel=kernel, sigma=sigma, n_neighbors=n_neighbors, index=index
    )
    return np.stack([ind.astype(np.float64), logK], axis=-1)


def knn_log_kernel_graph(
    Xq: Any,
    Xt: np.ndarray,
    *,
    kernel: str,
    sigma: float | None,
    n_neighbors: int,
    block_rows: int | None = None,
    approximate: bool = False,
    random_state: int | np.random.Generator | None = None,
) -> tuple[da.Array, da.Array]:
    """Lazy k-NN kernel rows of ``Xq`` against training points ``Xt``.

    Parameters
    ----------
    Xq : array-like or dask.array.Array (n_query, p)
    Xt : ndarray (n_train, p)
        Training points; one neighbour index is built over them (a single task).
    kernel, sigma, n_neighbors
        As in :func:`dkernel.decomposition.kernels.knn_log_kernel`.
    block_rows : int, optional
        Query rows per task (default: the chunks of a Dask ``Xq``, else 10 000).
    approximate, random_state
        As in :func:`dkernel.decomposition.kernels.fit_neighbors`.

    Returns
    -------
    indices : dask array of int64 (n_query, n_neighbors)
    logK : dask array of float64 (n_query, n_neighbors)

    Notes
    -----
    Memory O(n_query k) for the result plus the neighbour index O(n_train p) per worker;
    no n_query x n_train block is ever formed for the tree-based search.
    """
    Xq = _row_chunked(Xq, block_rows)
    index = dask.delayed(fit_neighbors, pure=True)(
        np.asarray(Xt, dtype=np.float64),
        kernel=kernel,
        approximate=approximate,
        random_state=random_state,
    )
    packed = da.map_blocks(
        _knn_block,
        Xq,
        index,
        kernel=kernel,
        sigma=sigma,
        n_neighbors=n_neighbors,
        dtype=np.float64,
        chunks=(Xq.chunks[0], (n_neighbors,), (2,)),
        new_axis=2,
    )
    return packed[..., 0].astype(np.int64), packed[..., 1]


def _oos_block(xb, model, *, what):
    return out_of_sample_rows(xb, model, what=what)


def out_of_sample_graph(
    Xq: Any,
    model: tuple,
    *,
    what: str,
    n_clusters: int,
    block_rows: int | None = None,
) -> da.Array:
    """Lazy out-of-sample posteriors (Eq. 8-10) or log-densities (Eq. 14) of ``Xq``.

    Parameters
    ----------
    model : tuple
        ``(Xt, W, H, kernel, sigma, n_neighbors, index)`` as held by the estimator.
    what : {'posteriors', 'loglik'}

    Returns
    -------
    dask array (n_query, n_clusters) for posteriors, (n_query,) for log-densities.
    """
    Xq = _row_chunked(Xq, block_rows)
    shared = dask.delayed(model, pure=True, traverse=False)
    if what == "loglik":
        layout = {"chunks": (Xq.chunks[0],), "drop_axis": 1}
    else:
        layout = {"chunks": (Xq.chunks[0], (n_clusters,))}
    return da.map_blocks(_oos_block, Xq, shared, what=what, dtype=np.float64, **layout)


def selection_cell_tasks(
    splits: Sequence[tuple],
    n_neighbors: Sequence[int | None],
    sigmas: Sequence[float],
    score: Callable[..., Any],
    fit_index: Callable[[np.ndarray], Any],
) -> list:
    """Lazy ``score(split, k, h, index)`` of every grid cell, repeat-major then ``K`` then
    ``h``: one task per cell, so the cells of a model-selection grid run side by side.

    Each split enters the graph once (a distributed scheduler ships it to a worker once, not
    once per cell), and the cells of one (repeat, ``K``) share one neighbour index,
    ``fit_index(X_train)`` (``None`` for the dense kernel, ``K = None``).
    """
    tasks = []
    for split in splits:
        shared = dask.delayed(split, pure=True, traverse=False)
        for k in n_neighbors:
            index = None if k is None else dask.delayed(fit_index, pure=True)(shared[0])
            tasks += [dask.delayed(score, pure=True)(shared, k, h, index) for h in sigmas]
    return tasks
