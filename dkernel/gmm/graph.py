"""Dask graphs for the PCK ensemble: fitting split across workers, posteriors per row chunk.

Fitting: one task per initial condition ``q`` fits the models of every ``g`` in ``sizes`` at
once (the batched EM of :mod:`dkernel.gmm.em`). The data is placed on the cluster once (scattered
NumPy input, or the Dask input computed into one future) and every task selects its own rows.
Every random choice of task ``q`` derives from ``(seed, q)`` (its subsample) and
``(seed, q, g)`` (the initialisation of model ``g``), so the result does not depend on the number
of workers, on which worker runs a task, or on retries.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.special import logsumexp

from dkernel._budget import CHUNK_BYTES, KERNEL_BLOCK_BYTES, rows_for_budget
from dkernel._random import derive_rng
from dkernel.gmm.em import (
    MAX_BLOCK_ROWS,
    MIN_BLOCK_ROWS,
    DiagMixtures,
    MissingnessModel,
    design_matrix,
    diag_em,
    diag_resp,
    grouped_posteriors,
    init_diag_mixtures,
    init_full_params,
    posterior_groups,
    split_missing,
)
from dkernel.gmm.full_patterns import full_em, full_log_prob, full_posteriors
from dkernel.gmm.stacked_full import log_joint_weights, stacked_full_em, stacked_posteriors
from dkernel.linalg.elementwise import flush_for
from dkernel.linalg.threads import blas_controller, map_on_cores
from dkernel.runtime.progress import wait_with_progress


@dataclass
class FullMixtures:
    """Full-covariance models: per model ``(means (g, p), covariances (g, p, p), weights (g,))``."""

    models: list[tuple[np.ndarray, np.ndarray, np.ndarray]]

    @property
    def offsets(self) -> np.ndarray:
        return np.concatenate([[0], np.cumsum([len(m[2]) for m in self.models])]).astype(np.int64)

    @property
    def n_models(self) -> int:
        return len(self.models)

    @property
    def means(self) -> np.ndarray:
        """Every component's mean, stacked ``(C, p)`` as in ``DiagMixtures``."""
        return np.concatenate([m[0] for m in self.models])

    @property
    def weights(self) -> np.ndarray:
        """Every component's weight, stacked ``(C,)``."""
        return np.concatenate([m[2] for m in self.models])

    @property
    def covariances(self) -> np.ndarray:
        """Every component's covariance, stacked ``(C, p, p)``."""
        return np.concatenate([m[1] for m in self.models])


def subsample_rows(seed: int | None, q: int, candidates: np.ndarray, n_sub: int) -> np.ndarray:
    """Sorted row indices of initial condition ``q``'s subsample (derived from ``(seed, q)``)."""
    if n_sub >= candidates.size:
        return candidates
    rng = derive_rng(seed, "pck-subsample", q)
    return np.sort(rng.choice(candidates, size=n_sub, replace=False))


def fit_init_batch(
    X: np.ndarray,
    candidates: np.ndarray,
    *,
    q: int,
    sizes: tuple[int, ...],
    n_sub: int,
    seed: int | None,
    n_iter: int,
    reg_covar: float | np.ndarray,
    covariance_type: str,
    limit_blas: bool = True,
    missingness: MissingnessModel | None = None,
) -> DiagMixtures | FullMixtures:
    """Fit the models of initial condition ``q`` (one per ``g`` in ``sizes``) on its subsample.

    Notes
    -----
    Diagonal: ``n_iter`` batched EM iterations over ``C = Σ g`` components,
    O(n_iter · n_sub · p · C). Full: the same batched over all models on a complete subsample
    (``dkernel.gmm.stacked_full``), O(n_iter · n_sub · p² · C); with missing values one model
    at a time by missingness pattern (``dkernel.gmm.full_patterns``).
    """
    rows = subsample_rows(seed, q, candidates, n_sub)
    Xs = X[rows]
    # small problems run faster on one BLAS thread (no thread start-up / contention)
    small = Xs.shape[0] * sum(sizes) * max(1, Xs.shape[1]) < 5e7
    args = (Xs, q, sizes, seed, n_iter, reg_covar, covariance_type, missingness)
    if not (small and limit_blas):
        return _fit_rows(*args)
    with blas_controller().limit(limits=1, user_api="blas"):
        return _fit_rows(*args)


def _fit_rows(Xs, q, sizes, seed, n_iter, reg_covar, covariance_type, missingness):
    if covariance_type == "diag":
        rngs = [derive_rng(seed, "pck-init", q, g) for g in sizes]
        mix = init_diag_mixtures(Xs, sizes, rngs, reg_covar)
        fitted, _ = diag_em(Xs, mix, n_iter, reg_covar, missingness=missingness)
        return fitted
    starts = [init_full_params(Xs, g, derive_rng(seed, "pck-init", q, g), reg_covar) for g in sizes]
    if np.isnan(Xs).any():
        return FullMixtures([full_em(Xs, *start, n_iter, reg_covar)[:3] for start in starts])
    # complete rows: every model's EM at once (the same updates, tested against full_em)
    start = FullMixtures(starts)
    offsets = start.offsets
    means, covs, weights = stacked_full_em(
        Xs, start.means, start.covariances, start.weights, offsets, n_iter, reg_covar
    )
    return FullMixtures(
        [
            (means[a:b], covs[a:b], weights[a:b])
            for a, b in zip(offsets[:-1], offsets[1:], strict=True)
        ]
    )


def fit_ensemble(
    X: Any,
    candidates: np.ndarray,
    *,
    n_inits: int,
    sizes: tuple[int, ...],
    n_sub: int,
    seed: int | None,
    n_iter: int,
    reg_covar: float | np.ndarray,
    covariance_type: str,
    client: Any = None,
    missingness: MissingnessModel | None = None,
    progress: bool = False,
) -> list[DiagMixtures | FullMixtures]:
    """Fit every (q, g) model; one task per ``q`` on ``client`` (or in-process without one).

    Parameters
    ----------
    X : ndarray or dask.array.Array (N, p)
        Centred data, NaN = missing, in the compute dtype.
    candidates : ndarray of int
        Rows eligible for training (rows with at least one observed value).
    reg_covar : float or ndarray (p,)
        Added to every variance; an array gives one value per column.
    client : distributed.Client, optional
        Where to run; without one the tasks run on a thread pool in this process (one thread
        per core, one BLAS thread each).
    missingness : MissingnessModel, optional
        Fit the informative missingness model as well (diagonal covariance only).

    Returns
    -------
    list, one entry per ``q`` in order.
    """
    kwargs = dict(
        sizes=tuple(int(g) for g in sizes),
        n_sub=int(n_sub),
        seed=seed,
        n_iter=int(n_iter),
        reg_covar=np.asarray(reg_covar, dtype=X.dtype) if np.ndim(reg_covar) else float(reg_covar),
        covariance_type=covariance_type,
        missingness=missingness,
    )
    is_dask = hasattr(X, "dask")
    if client is None:
        Xn = X.compute() if is_dask else X
        n_threads = min(n_inits, os.cpu_count() or 1)
        if n_threads == 1:
            return [fit_init_batch(Xn, candidates, q=q, **kwargs) for q in range(n_inits)]
        # one task per core, each on one BLAS thread (results do not depend on the threads)
        with (
            blas_controller().limit(limits=1, user_api="blas"),
            ThreadPoolExecutor(n_threads) as pool,
        ):
            return list(
                pool.map(
                    lambda q: fit_init_batch(Xn, candidates, q=q, limit_blas=False, **kwargs),
                    range(n_inits),
                )
            )
    if is_dask:
        data = client.compute(X)  # one future holding the whole array, computed on the cluster
    else:
        # replicated on every worker: losing one worker must not lose the only copy. Unique
        # keys (hash=False): a previous fit of the same data releasing its identically-hashed
        # key could otherwise race with this scatter and cancel these tasks.
        data = client.scatter(X, broadcast=True, hash=False)
    cand = client.scatter(candidates, broadcast=True, hash=False)
    futures = [
        client.submit(fit_init_batch, data, cand, q=q, pure=False, **kwargs) for q in range(n_inits)
    ]
    try:
        wait_with_progress(futures, show=progress, what="PCK ensemble (one task per init)")
        return client.gather(futures)
    finally:
        for f in futures:
            f.release()
        data.release()
        cand.release()


# Rows per sub-block of the diagonal posteriors: one group's (M_g g × rows) log-joint then stays
# in cache through the max / exp / sum / scale passes.
POSTERIOR_BLOCK_ROWS = 512


def posterior_block(
    X: np.ndarray, ensemble: DiagMixtures | FullMixtures, scale: float, dtype: Any
) -> np.ndarray:
    """Γ/√Z of one row block: the posteriors of every component of every model, concatenated.

    Notes
    -----
    Diagonal: one GEMM per group of equally sized models and one exp of rows × F
    (:func:`dkernel.gmm.em.grouped_posteriors`), O(rows · p · F), in sub-blocks of
    ``POSTERIOR_BLOCK_ROWS`` rows. The result is Fortran-ordered for diagonal ensembles (the
    posteriors are computed component-major); NumPy and BLAS consume it without a copy.
    Full covariance: complete rows of all models at once (one float64 GEMM with
    ``[x ⊗ x, x, 1]``, O(rows · p² · F), twice the sub-block's bytes), rows with missing
    values one model at a time; sub-blocks of ~64 MiB of the result.
    """
    X = np.asarray(X, dtype=dtype)
    F = int(ensemble.offsets[-1])
    diag = isinstance(ensemble, DiagMixtures)
    out = np.empty((X.shape[0], F), dtype=dtype, order="F" if diag else "C")
    if diag:
        out_t = out.T
        dt = np.dtype(dtype)
        groups = {False: posterior_groups(ensemble, False, dt)}
        if np.isnan(X).any():
            groups[True] = posterior_groups(ensemble, True, dt)
        blocks = [
            slice(a, min(X.shape[0], a + POSTERIOR_BLOCK_ROWS))
            for a in range(0, X.shape[0], POSTERIOR_BLOCK_ROWS)
        ]

        def work(sl: slice) -> None:
            X0, O = split_missing(X[sl])
            D = design_matrix(X0, O)
            rows = D.shape[0]
            if rows == POSTERIOR_BLOCK_ROWS:
                grouped_posteriors(D, groups[O is not None], scale, out_t[:, sl])
                return
            # every GEMM has the same shape, so a row's posteriors do not depend on how many
            # rows it is computed with (BLAS picks other kernels, and another summation order,
            # for other shapes; in float32 the log-joints of ~10^3 then differ by ~10^-4)
            padded = np.zeros((POSTERIOR_BLOCK_ROWS, D.shape[1]), dtype=D.dtype)
            padded[:rows] = D
            block_t = np.empty((F, POSTERIOR_BLOCK_ROWS), dtype=D.dtype)
            grouped_posteriors(padded, groups[O is not None], scale, block_t)
            out_t[:, sl] = block_t[:, :rows]

        # the GEMMs are thin (2p+1 inner dimension): one BLAS thread per sub-block and the
        # sub-blocks spread over the cores is several times faster than threaded BLAS
        map_on_cores(work, blocks)
        return out
    step = rows_for_budget(
        KERNEL_BLOCK_BYTES, F, np.dtype(dtype).itemsize, low=MIN_BLOCK_ROWS, high=MAX_BLOCK_ROWS
    )
    offs = ensemble.offsets
    W = None  # the log-joints' weights of every component, factorised once for all blocks
    for start in range(0, X.shape[0], step):
        sl = slice(start, min(X.shape[0], start + step))
        block = X[sl]
        complete = ~np.isnan(block).any(axis=1)
        if complete.any():
            if W is None:
                W = log_joint_weights(ensemble.means, ensemble.covariances, ensemble.weights)
            out[sl][complete] = stacked_posteriors(block[complete], W, offs)
        if not complete.all():
            for m, (means, covs, w) in enumerate(ensemble.models):
                out[sl, offs[m] : offs[m + 1]][~complete] = flush_for(
                    full_posteriors(block[~complete], means, covs, w), out.dtype
                )
    out *= np.dtype(dtype).type(scale)
    return out


def log_likelihood_block(X: np.ndarray, ensemble: DiagMixtures | FullMixtures) -> np.ndarray:
    """Each row's log-likelihood under every model of the ensemble, averaged over the models (N,).

    A row's missing entries (NaN) are marginalised: its likelihood is that of its observed
    entries (with ``missing_probs``, times that of its missingness pattern).

    Notes
    -----
    Diagonal: one GEMM of rows x (2p + 1) x C in float64, in blocks that keep the rows x C
    log-joint within ``KERNEL_BLOCK_BYTES``. Full covariance: one model at a time.
    """
    X = np.asarray(X, dtype=np.float64)
    out = np.zeros(X.shape[0])
    n_components = int(ensemble.offsets[-1])
    step = rows_for_budget(KERNEL_BLOCK_BYTES, n_components, 8, low=1, high=MAX_BLOCK_ROWS)
    if isinstance(ensemble, DiagMixtures):
        ensemble = ensemble.astype(np.float64)
    for start in range(0, X.shape[0], step):
        sl = slice(start, min(X.shape[0], start + step))
        if isinstance(ensemble, DiagMixtures):
            X0, O = split_missing(X[sl])
            out[sl] = diag_resp(X0, O, ensemble)[1].mean(axis=1)
            continue
        for means, covs, weights in ensemble.models:
            joint = full_log_prob(X[sl], means, covs) + np.log(weights)[None, :]
            out[sl] += logsumexp(joint, axis=1) / ensemble.n_models
    return out


def log_likelihood_dask(X: Any, ensemble: Any) -> Any:
    """Lazy :func:`log_likelihood_block` of a Dask array (rows chunked as ``X``).

    The ensemble parameters are on every worker once (``dkernel.runtime.shared.share``), as
    for :func:`posterior_feature_map_dask`.
    """
    import dask.array as da

    from dkernel.runtime.shared import share, with_shared

    return da.map_blocks(
        with_shared(log_likelihood_block),
        X,
        share(ensemble, "pck-ensemble"),
        drop_axis=1,
        dtype=np.float64,
        meta=np.empty((0,), dtype=np.float64),
    )


def _threshold_to_csr(block: np.ndarray, threshold: float) -> Any:
    """CSR of the entries of ``block`` at or above ``threshold``.

    A diagonal ensemble's block is Fortran-ordered: its transpose is scanned in memory order
    and read as the CSR of the transpose (i.e. the CSC of the block), then converted, several
    times faster than ``csr_matrix(block)`` on a Fortran-ordered array.
    """
    from scipy.sparse import csc_matrix, csr_matrix

    if not block.flags.f_contiguous:
        block = np.where(block >= threshold, block, 0)
        return csr_matrix(block)
    bt = block.T  # (F, rows), C-ordered
    keep = bt >= threshold
    flat = np.flatnonzero(keep)
    indptr = np.concatenate([[0], np.cumsum(np.count_nonzero(keep, axis=1))])
    rows = bt.shape[1]
    csc = csc_matrix((bt.ravel()[flat], flat % rows, indptr), shape=block.shape)
    return csc.tocsr()


def sparse_posteriors(
    X: np.ndarray, ensemble: DiagMixtures | FullMixtures, scale: float, dtype: Any, threshold: float
) -> Any:
    """Γ/√Z of the rows of ``X`` as a CSR matrix without its entries below ``threshold``.

    Notes
    -----
    Diagonal ensembles: blocks of ``POSTERIOR_BLOCK_ROWS`` rows computed and thresholded on
    the cores in parallel, memory O(cores · block · F + non-zeros); full covariance: blocks
    of ~64 MiB one at a time. The entries kept equal those of :func:`posterior_block` on all
    rows at once, bit for bit.
    """
    from scipy.sparse import csr_matrix, vstack

    X = np.asarray(X, dtype=dtype)
    F = int(ensemble.offsets[-1])
    if isinstance(ensemble, DiagMixtures):
        # the sub-blocks of posterior_block (the same GEMM shapes, so the same bits as the
        # dense transform), each computed and thresholded by one thread, in cache
        step = POSTERIOR_BLOCK_ROWS
        blocks = [slice(a, a + step) for a in range(0, X.shape[0], step)]
        parts = map_on_cores(
            lambda sl: _threshold_to_csr(posterior_block(X[sl], ensemble, scale, dtype), threshold),
            blocks,
        )
    else:
        step = rows_for_budget(
            KERNEL_BLOCK_BYTES, F, np.dtype(dtype).itemsize, low=MIN_BLOCK_ROWS, high=MAX_BLOCK_ROWS
        )
        parts = [
            _threshold_to_csr(posterior_block(X[a : a + step], ensemble, scale, dtype), threshold)
            for a in range(0, X.shape[0], step)
        ]
    if not parts:
        return csr_matrix((0, F), dtype=dtype)
    return vstack(parts, format="csr")


def posterior_feature_map_dask(X: Any, ensemble: Any, scale: float, dtype: Any) -> Any:
    """Lazy Γ/√Z of a Dask array (rows chunked as ``X``, one chunk along the F features).

    The ensemble parameters are on every worker once (``dkernel.runtime.shared.share``), not
    a graph key or a copy per chunk.
    """
    import dask.array as da

    from dkernel.runtime.shared import share, with_shared

    F = int(ensemble.offsets[-1])
    rows = rows_for_budget(
        CHUNK_BYTES, F, np.dtype(dtype).itemsize, low=MIN_BLOCK_ROWS, high=MAX_BLOCK_ROWS
    )
    if max(X.chunks[0]) > rows:
        X = X.rechunk({0: rows})
    ens = share(ensemble, "pck-ensemble")
    return da.map_blocks(
        with_shared(posterior_block),
        X,
        ens,
        scale,
        np.dtype(dtype),
        dtype=np.dtype(dtype),
        chunks=(X.chunks[0], (F,)),
        meta=np.empty((0, 0), dtype=dtype),
    )
