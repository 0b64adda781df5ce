"""Dask graphs for scoring many out-of-sample points with a fitted KPPR and taking top-k.

One small *scorer* (the kernel's block function or feature map plus the Prop. 8 weights of
every seed) is put in the graph once; each row chunk of X becomes one task
``κ(chunk, X_fit) @ α`` (or ``γ(chunk) @ Γ^T α`` for a feature map). Top-k is a per-chunk
``argpartition`` followed by one merge task, so nothing but the (n, n_seeds) scores and
k candidates per chunk is ever materialised.

A *projected* scorer (:func:`make_projected_scorer`) instead applies the seed-independent
basis ``[1/Vol, A]`` (Prop. 8; ``Γ^T [1/Vol, A]`` for a feature map) and then each seed's
``[1; m'_s]``: a chunk costs O(b F (k+1)) + O(b k m) instead of O(b F m), which is cheaper
with more seeds than components, and :func:`project_graph` gives the (n, k+1) coordinates
themselves, from which any later seed is scored in O(k) per point.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import dask
import dask.array as da
import numpy as np

from dkernel._budget import KERNEL_BLOCK_BYTES, rows_for_budget
from dkernel._validation import check_2d_array, check_is_fitted
from dkernel.errors import InvalidInputError
from dkernel.ranking.kernelmap import BlockKernel, FeatureMapKernel, PrecomputedKernel
from dkernel.runtime.shared import share, with_shared


@dataclass
class Scorer:
    """Everything a worker needs to score a block of new points for several seeds."""

    kind: str
    weights: np.ndarray  # (N, m) Prop. 8 α, or (F, m) Γ^T α for a feature map
    fn: Any = None
    X_fit: np.ndarray | None = None
    transformer: Any = None
    dtype: str = "float32"
    rows: int = 4096
    head: np.ndarray | None = None  # (r, m): scores = (rows @ weights) @ head (projected)

    @property
    def n_outputs(self) -> int:
        """Number of output columns (seeds, or projection coordinates)."""
        return int((self.weights if self.head is None else self.head).shape[1])

    def _finish(self, part: np.ndarray) -> np.ndarray:
        if self.head is None:
            return part
        return part @ self.head.astype(part.dtype, copy=False)

    def __call__(self, Y: np.ndarray) -> np.ndarray:
        Y = np.asarray(Y)
        out_dtype = np.dtype(self.dtype)
        out = np.empty((Y.shape[0], self.n_outputs), dtype=out_dtype)
        if self.kind == "feature-map":
            # float32 posteriors of a sub-block at a time, whatever F is
            step = rows_for_budget(KERNEL_BLOCK_BYTES, self.weights.shape[0], 4, low=64)
            for start in range(0, Y.shape[0], step):
                G = np.asarray(self.transformer.transform(Y[start : start + step]))
                out[start : start + step] = self._finish(
                    G @ self.weights.astype(G.dtype, copy=False)
                )
            return out
        w = self.weights.astype(np.result_type(out_dtype, np.float32), copy=False)
        for start in range(0, Y.shape[0], self.rows):
            stop = min(start + self.rows, Y.shape[0])
            if self.kind == "precomputed":
                block = Y[start:stop]
            else:
                block = self.fn(Y[start:stop], self.X_fit)
            out[start:stop] = self._finish(block @ w.astype(block.dtype, copy=False))
        return out


def make_scorer(model: Any, coefficients: np.ndarray, *, dtype: str = "float32") -> Scorer:
    """A :class:`Scorer` from a fitted KPPR and Prop. 8 coefficients ``(N,)`` or ``(N, m)``."""
    check_is_fitted(model, "degrees_")
    coef = np.asarray(coefficients, dtype=np.float64)
    if coef.ndim == 1:
        coef = coef[:, None]
    kern = model.kernel_
    if isinstance(kern, FeatureMapKernel):
        return Scorer("feature-map", kern.weights(coef), transformer=kern.transformer, dtype=dtype)
    if isinstance(kern, PrecomputedKernel):
        return Scorer("precomputed", coef, dtype=dtype)
    if isinstance(kern, BlockKernel):
        return Scorer("block", coef, fn=kern.fn, X_fit=kern.X_fit, dtype=dtype)
    raise InvalidInputError(f"cannot build a scorer for kernel {kern!r}.")


def make_projector(model: Any, *, dtype: str = "float32") -> Scorer:
    """A :class:`Scorer` whose output is :meth:`~dkernel.KernelPersonalizedPageRank.project`: (n, k+1).

    Scores of any seed are then ``Z @ model.seed_weights(seed)`` (O(k) per point).
    """
    check_is_fitted(model, "degrees_")
    return make_scorer(model, model.score_basis(), dtype=dtype)


def make_projected_scorer(
    model: Any, seed_weights: np.ndarray, *, dtype: str = "float32"
) -> Scorer:
    """A :class:`Scorer` that projects each point once and scores every seed from it.

    Parameters
    ----------
    model : fitted KernelPersonalizedPageRank
    seed_weights : ndarray (k+1,) or (k+1, m)
        ``[1; m'_s]`` per seed (:meth:`~dkernel.KernelPersonalizedPageRank.seed_weights`).

    Notes
    -----
    Gives the same scores as :func:`make_scorer` with ``model.score_basis() @ seed_weights``
    (to rounding); per point O(F (k+1) + k m) instead of O(F m) for a feature map.
    """
    W = np.asarray(seed_weights, dtype=np.float64)
    if W.ndim == 1:
        W = W[:, None]
    scorer = make_projector(model, dtype=dtype)
    if W.shape[0] != scorer.weights.shape[1]:
        raise InvalidInputError(
            f"seed weights must have {scorer.weights.shape[1]} rows (1 + n_components); got "
            f"shape {W.shape}."
        )
    scorer.head = W
    return scorer


def scorer_for_seeds(model: Any, seed_weights: np.ndarray, *, dtype: str = "float32") -> Scorer:
    """The cheaper of the direct (O(F m) per point) and projected (O(F (k+1))) scorers.

    Both give the same scores; the projected one wins when there are more seeds than
    ``n_components + 1``.
    """
    W = np.asarray(seed_weights, dtype=np.float64)
    if W.ndim == 1:
        W = W[:, None]
    if W.shape[1] > W.shape[0]:
        return make_projected_scorer(model, W, dtype=dtype)
    return make_scorer(model, model.score_basis() @ W, dtype=dtype)


def score_graph(X: Any, scorer: Scorer) -> da.Array:
    """Lazy ``(n, m)`` scores of the rows of ``X`` (NumPy or Dask, row-chunked).

    Parameters
    ----------
    X : ndarray or dask.array.Array (n, p)
    scorer : Scorer

    Notes
    -----
    Per chunk of b rows: O(b N p) for a block kernel (memory b' × N with b' = ``scorer.rows``),
    O(b F) for a feature map once its posteriors are computed. The scorer (megabytes for a
    default PCK: its Prop. 8 weights and the ensemble) is put on every worker once
    (``dkernel.runtime.shared.share``), so each chunk's task has its chunk as its only
    input and runs where the chunk is.
    """
    X = check_2d_array(X, "score_graph", allow_nan=scorer.kind == "feature-map")
    if not isinstance(X, da.Array):
        X = da.from_array(X, chunks=(max(1, min(X.shape[0], 100_000)), X.shape[1]))
    m = scorer.n_outputs
    payload = share(scorer, "scorer")
    apply = dask.delayed(with_shared(_apply), pure=True)
    parts = []
    for blk, rows in zip(X.to_delayed().ravel(), X.chunks[0], strict=True):
        part = apply(payload, blk)
        parts.append(da.from_delayed(part, shape=(rows, m), dtype=np.dtype(scorer.dtype)))
    return da.concatenate(parts, axis=0)


def _apply(scorer: Scorer, block: np.ndarray) -> np.ndarray:
    return scorer(block)


def project_graph(X: Any, model: Any, *, dtype: str = "float32") -> da.Array:
    """Lazy score coordinates ``z(x) = [d̂/Vol, β√d̂ ẑ']`` (n, k+1) of the rows of ``X``.

    Any seed's scores are then ``Z @ [1; m'_s]`` (:meth:`~dkernel.KernelPersonalizedPageRank.project`),
    O(k) per point; stored in ``/ranking`` they let :func:`dkernel.seed_scores`
    rank for seeds chosen after the job.
    """
    return score_graph(X, make_projector(model, dtype=dtype))


def scores_from_projection(Z: da.Array, seed_weights: np.ndarray) -> da.Array:
    """Lazy ``Z @ W`` per row chunk for seed weights ``W`` (k+1, m)."""
    W = np.asarray(seed_weights, dtype=np.float64)
    W = W[:, None] if W.ndim == 1 else W
    if W.shape[0] != Z.shape[1]:
        raise InvalidInputError(
            f"seed weights must have {Z.shape[1]} rows (1 + n_components); got shape {W.shape}."
        )
    return Z.map_blocks(
        _times,
        W.astype(Z.dtype),
        chunks=(Z.chunks[0], (W.shape[1],)),
        dtype=Z.dtype,
        meta=np.empty((0, 0), Z.dtype),
    )


def _times(block: np.ndarray, W: np.ndarray) -> np.ndarray:
    return block @ W


def _chunk_top(block: np.ndarray, offset: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    n, m = block.shape
    kk = min(k, n)
    part = (
        np.argpartition(-block, kk - 1, axis=0)[:kk]
        if kk < n
        else np.tile(np.arange(n)[:, None], (1, m))
    )
    vals = np.take_along_axis(block, part, axis=0)
    return part + offset, vals


def _merge_top(parts: list[tuple[np.ndarray, np.ndarray]], k: int) -> np.ndarray:
    idx = np.concatenate([p[0] for p in parts], axis=0)
    val = np.concatenate([p[1] for p in parts], axis=0).astype(np.float64)
    kk = min(k, idx.shape[0])
    out_i = np.empty((idx.shape[1], kk), dtype=np.int64)
    out_v = np.empty((idx.shape[1], kk), dtype=np.float64)
    for j in range(idx.shape[1]):
        order = np.lexsort((idx[:, j], -val[:, j]))[:kk]  # score descending, index ascending
        out_i[j] = idx[order, j]
        out_v[j] = val[order, j]
    return np.concatenate([out_i.astype(np.float64), out_v], axis=1)


def top_k_graph(scores: da.Array, k: int) -> tuple[da.Array, da.Array]:
    """Lazy top-k of every column of ``(n, m)`` scores: indices and scores, each ``(m, k)``.

    Ties are broken by the smaller index. O(n) work per column, O(k × n_chunks) merge.
    """
    if scores.ndim != 2:
        raise InvalidInputError(f"top_k_graph needs (n, n_seeds) scores; got shape {scores.shape}.")
    k = int(min(k, scores.shape[0]))
    offsets = np.concatenate([[0], np.cumsum(scores.chunks[0])[:-1]])
    blocks = scores.rechunk({1: scores.shape[1]}).to_delayed()[:, 0]
    parts = [
        dask.delayed(_chunk_top, nout=2)(b, int(o), k) for b, o in zip(blocks, offsets, strict=True)
    ]
    merged = da.from_delayed(
        dask.delayed(_merge_top)([list(p) for p in parts], k),
        shape=(scores.shape[1], 2 * k),
        dtype=np.float64,
    )
    return merged[:, :k].astype(np.int64), merged[:, k:]
