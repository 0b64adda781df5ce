"""Feature-map embeddings of a lazy Φ from a row subsample and a single pass over all rows.

When Φ (N × F) cannot be held in memory, every pass of the randomized solver recomputes it
(for PCK: the posteriors of all N rows), and that recomputation, not the solver's algebra, is
what the ``n_power_iter + 3`` passes cost. This route reads Φ once (twice for the normalised
embedding):

1. the rows of a seeded uniform subsample (m ≪ N, held in memory by the caller) give an
   orthonormal F × l basis V of the leading right singular subspace of the sample's
   ``A_s = diag(w_s) (Φ_s - 1 μ_sᵀ)`` by the randomized range finder
   (:func:`~dkernel.spectral.feature_map.right_basis`, l = k + ``n_oversamples``);
2. one pass over all N rows, chunk by chunk, gives ``Y = Φ V`` (N × l) and the exact column
   sum ``Φᵀ 1`` (KPCA), or ``Y`` and the exact degrees ``d = Φ s`` after a first pass for
   ``s = Φᵀ 1`` (normalised);
3. Rayleigh–Ritz on span V for the full data: ``A V = diag(w) (Y - 1 μᵀ V)`` with the full
   mean μ and ``w = d^{-1/2}`` (or 1), then its thin SVD ``A V = U S Wᵀ``; the embedding is
   ``U S`` (KPCA) or ``U`` (normalised), eigenvalues ``S²``, signs by ``fix_signs``: the same
   meaning as :func:`~dkernel.spectral.feature_map.feature_map_kpca` and
   :func:`~dkernel.spectral.feature_map.feature_map_normalized`.

Step 3 is exact for the projected problem: the result is the best rank-k approximation of A
restricted to span V, so only the sample's subspace is approximate (the error of a sample
covariance of m rows, ~ m^{-1/2} over the spectral gap), not the mean, the degrees or the
eigenvalue scale. With m = N it is the randomized solver's result up to its tolerance.
Cost: the sample's solve plus O(N F l) in one pass; memory O(N l + F l) beyond the sample.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.sparse import issparse

from dkernel._validation import check_scalar, is_dask_array
from dkernel.errors import InvalidInputError
from dkernel.linalg.threads import map_on_cores
from dkernel.spectral.feature_map import (
    FeatureMapEmbedding,
    as_row_blocks,
    check_positive_degrees,
    right_basis,
    ritz_pairs,
    row_blocks,
)


def subsample_rows(n: int, m: int, random_state: int | None) -> np.ndarray:
    """Sorted indices of a uniform subsample of ``min(m, n)`` of ``n`` rows, without replacement.

    Parameters
    ----------
    n, m : int
        Rows in all, rows wanted.
    random_state : int, optional
        Seed.

    Returns
    -------
    ndarray of int64
    """
    rng = np.random.default_rng(random_state)
    if m >= n:
        return np.arange(n)
    return np.sort(rng.choice(n, size=m, replace=False))


def _project_block(block: Any, V: np.ndarray, s: np.ndarray | None) -> np.ndarray:
    """``[block V, block s]`` of one row block in float64 (``block V`` in the block's dtype)."""
    dtype = block.dtype if block.dtype in (np.float32, np.float64) else np.float64
    Y = np.asarray(block @ V.astype(dtype)).astype(np.float64)
    if s is None:
        return Y
    return np.concatenate([Y, np.asarray(block @ s).reshape(-1, 1)], axis=1)


def _pass_block(
    block: Any, V: np.ndarray, s: np.ndarray | None, col_sum: bool
) -> tuple[np.ndarray, np.ndarray | None]:
    """Everything one pass needs from a row block: ``[block V, block s]`` and ``blockᵀ 1``."""
    c = np.asarray(block.sum(axis=0, dtype=np.float64)).ravel() if col_sum else None
    return _project_block(block, V, s), c


def _one_pass(
    Phi: Any, V: np.ndarray, *, col_sum: bool, s: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    """One pass over Φ: ``Φ V`` (N × l), and ``Φᵀ 1`` (when ``col_sum``) and ``Φ s`` (given s).

    Every row block (Dask chunk) is computed once and read by a single task that returns all
    of them: with one consumer per chunk the scheduler frees each chunk as soon as it is read
    (two consumers, e.g. a map_blocks and a sum, let chunks pile up waiting for the second).
    """
    l = V.shape[1]
    if is_dask_array(Phi):
        import dask

        V_, s_ = dask.delayed(V), (None if s is None else dask.delayed(s))  # once in the graph
        task = dask.delayed(_pass_block, pure=True)
        blocks = Phi.to_delayed(optimize_graph=False).ravel()
        parts = dask.compute(*[task(b, V_, s_, col_sum) for b in blocks])
    else:
        parts = map_on_cores(
            lambda sl: _pass_block(Phi[sl], V, s, col_sum), row_blocks(Phi.shape[0])
        )
    P = np.concatenate([p for p, _ in parts])
    C = None
    if col_sum:  # in row order: the sum does not depend on the scheduling
        C = parts[0][1].copy()
        for _, c in parts[1:]:
            C += c
    return P[:, :l], C, (P[:, l] if s is not None else None)


def _check(Phi: Any, sample: Any, k: int, who: str) -> None:
    check_scalar(k, "n_components", who, kind=int, low=1)
    if sample.ndim != 2 or sample.shape[1] != Phi.shape[1]:
        raise InvalidInputError(
            f"{who}: the sample has shape {sample.shape}; it must be rows of Φ "
            f"({Phi.shape[1]} columns)."
        )
    if k > min(sample.shape[0], Phi.shape[1]):
        raise InvalidInputError(
            f"The 'n_components' parameter of {who} must be <= min(m, F) = "
            f"{min(sample.shape[0], Phi.shape[1])}. Got {k} instead."
        )


def _in_memory(sample: Any) -> Any:
    if is_dask_array(sample):
        sample = sample.compute()
    return sample.tocsr() if issparse(sample) else np.asarray(sample)


def subsample_kpca(
    Phi: Any,
    sample: Any,
    n_components: int,
    *,
    centered: bool = True,
    n_power_iter: int = 4,
    n_oversamples: int = 20,
    random_state: int | None = None,
) -> FeatureMapEmbedding:
    """KPCA embedding of ``K = Φ Φᵀ`` from the subspace of a row subsample and one pass over Φ.

    Parameters
    ----------
    Phi : ndarray, sparse matrix or dask.array.Array (N, F)
        The feature map; a Dask Φ is streamed once, chunk by chunk.
    sample : ndarray or sparse matrix (m, F)
        Rows of Φ at a uniform random subset (:func:`subsample_rows`), in memory; may be
        computed more cheaply than the rows of Φ (e.g. posteriors below a threshold dropped).
    n_components : int
        k.
    centered : bool
        Centre in feature space (with the exact mean of all N rows).
    n_power_iter, n_oversamples : int
        The range finder on the sample; l = k + ``n_oversamples`` columns.
    random_state : int, optional

    Returns
    -------
    FeatureMapEmbedding
        ``solver='subsample'``.
    """
    _check(Phi, sample, n_components, "subsample_kpca")
    sample = _in_memory(sample)
    m, f = sample.shape
    mean_s = np.asarray(sample.mean(axis=0, dtype=np.float64)).ravel() if centered else None
    V = right_basis(
        sample,
        min(n_components + n_oversamples, m, f),
        mean_s,
        None,
        n_power_iter=n_power_iter,
        random_state=random_state,
    )
    Y, c, _ = _one_pass(as_row_blocks(Phi), V, col_sum=centered, s=None)
    if centered:
        Y -= (c / Phi.shape[0]) @ V
    U, lam = ritz_pairs(Y, n_components)
    return FeatureMapEmbedding(U * np.sqrt(lam)[None, :], lam, U, None, "subsample")


def subsample_normalized(
    Phi: Any,
    sample: Any,
    n_components: int,
    *,
    n_power_iter: int = 4,
    n_oversamples: int = 20,
    random_state: int | None = None,
) -> FeatureMapEmbedding:
    """Leading eigenpairs of ``D^{-1/2} K D^{-1/2}`` from a row subsample and two passes over Φ.

    Parameters are those of :func:`subsample_kpca`. The sample's basis uses its own degrees
    ``Φ_s (Φ_sᵀ 1)`` (the sample estimate of ``Φ_s (Φᵀ 1)`` up to the factor N/m, which does
    not change the subspace); the full data's degrees are exact: a first pass for
    ``s = Φᵀ 1``, then ``d = Φ s`` together with ``Φ V`` in the second.

    Raises
    ------
    InvalidInputError
        When a degree is not positive.
    """
    _check(Phi, sample, n_components, "subsample_normalized")
    sample = _in_memory(sample)
    m, f = sample.shape
    s_s = np.asarray(sample.sum(axis=0, dtype=np.float64)).ravel()
    d_s = np.asarray(sample @ s_s).ravel()
    check_positive_degrees(d_s, "on the sample")
    V = right_basis(
        sample,
        min(n_components + n_oversamples, m, f),
        None,
        1.0 / np.sqrt(d_s),
        n_power_iter=n_power_iter,
        random_state=random_state,
    )
    Phi = as_row_blocks(Phi)
    s = Phi.sum(axis=0, dtype=np.float64)
    s = np.asarray(s.compute() if is_dask_array(s) else s).ravel()
    Y, _, d = _one_pass(Phi, V, col_sum=False, s=s)
    check_positive_degrees(d)
    U, lam = ritz_pairs(Y / np.sqrt(d)[:, None], n_components)
    return FeatureMapEmbedding(U, lam, U, d, "subsample")
