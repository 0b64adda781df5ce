"""Rows of a NumPy or Dask array, taken without moving whole chunks."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import dask
import dask.array
import numpy as np
from dask.base import tokenize
from dask.delayed import Delayed
from dask.highlevelgraph import HighLevelGraph
from dask.utils import funcname

from dkernel._cache import LRUCache
from dkernel.linalg.copies import DISTINCT_PROBE_ROWS
from dkernel.runtime.shared import share, with_shared


def joint_blocks(*arrays: Any) -> list[np.ndarray]:
    """Each Dask array's blocks as ``Delayed`` objects (object ndarrays shaped like its
    ``numblocks``), unoptimised, for tasks that pair blocks of several arrays.

    ``to_delayed()`` optimises each array alone (so does ``dask.optimize``: one expression,
    one low-level optimisation, per collection), fusing the work its chunks derive from into
    its own tasks: two arrays that share a source (an image's bands and its valid mask, a
    table and the partitions read after it) then compute the source twice, in tasks that
    the scheduler places apart, and the task pairing their blocks moves one of them between
    workers. Unoptimised, a shared chunk stays one task, and the graph of the task that pairs
    the blocks is optimised as a whole when it is computed.
    """
    return [a.to_delayed(optimize_graph=False) for a in arrays]


def take_rows(X: Any, idx: np.ndarray, dtype: Any = None) -> np.ndarray:
    """Rows ``idx`` of ``X`` (in the order given) as a NumPy array.

    For a Dask array only the row chunks holding some of the rows are computed, each giving
    its own rows in its own task, which drops the rest of the chunk at once: memory O(rows
    taken + one chunk per worker). Dask's own fancy indexing moves whole chunks through a
    shuffle and held ~50 chunks of an MSSC scene's features on one worker at 3 · 10⁷ pixels.
    The picks are one graph layer (:func:`chunk_tasks`): a layer per chunk made building the
    graph quadratic in the number of chunks (109 s at 12 000 chunks, ``bench_graph_scale.py``).
    """
    idx = np.asarray(idx, dtype=np.int64)
    if not (hasattr(X, "dask") and hasattr(X, "blocks")):
        return np.asarray(np.asarray(X)[idx], dtype=dtype)
    order = np.argsort(idx, kind="stable")
    wanted = idx[order]
    bounds = np.cumsum((0, *X.chunks[0]))
    cuts = np.searchsorted(wanted, bounds)
    needed = np.flatnonzero(np.diff(cuts))
    if needed.size == 0:
        return np.empty((0, *X.shape[1:]), dtype=dtype or X.dtype)
    # each task gets its own chunk's rows only: a closure over every chunk's rows would be
    # copied into every task, and kept by the workers until the pass ends
    parts = chunk_tasks(
        X, _pick_rows, needed, [(wanted[cuts[i] : cuts[i + 1]] - bounds[i],) for i in needed]
    )
    out = np.empty((int(wanted.size), *X.shape[1:]), dtype=dtype or X.dtype)
    out[order] = np.concatenate(dask.compute(*parts))
    return out


def chunk_tasks(
    X: Any,
    func: Any,
    chunks: Sequence[int] | np.ndarray,
    per_chunk: Sequence[tuple] | None = None,
    shared: tuple = (),
) -> list[Any]:
    """``func(block, *per_chunk[j], *shared)`` for the row chunks ``chunks[j]`` of the Dask
    array ``X`` (its other axes joined into one chunk), as ``Delayed`` values of ONE graph
    layer; each object of ``shared`` is put on every worker once
    (``dkernel.runtime.shared.share``), so a chunk's task has its chunk as its only input
    and runs where the chunk is (as a graph key held by one worker, it made the scheduler move
    the chunks: 27 bytes per row of a 10-column table between 2 workers).

    ``dask.delayed`` over ``X.to_delayed()`` makes a layer per chunk, and the optimiser culls
    every layer against the whole graph: building grows with the square of the chunks.
    """
    if any(n > 1 for n in X.numblocks[1:]):
        X = X.rechunk({axis: -1 for axis in range(1, X.ndim)})
    chunks = [int(i) for i in chunks]
    per_chunk = per_chunk if per_chunk is not None else [()] * len(chunks)
    token = tokenize(X, func, chunks, per_chunk, shared)
    name = f"{funcname(func)}-{token}"
    layer: dict[Any, Any] = {}
    handles = [share(obj, funcname(func)) for obj in shared]
    call = with_shared(func) if handles else func
    zeros = (0,) * (X.ndim - 1)
    for j, (i, extra) in enumerate(zip(chunks, per_chunk, strict=True)):
        layer[(name, j)] = (call, (X.name, i, *zeros), *extra, *handles)
    graph = HighLevelGraph.from_collections(name, layer, dependencies=[X])
    return [Delayed((name, j), graph, layer=name) for j in range(len(chunks))]


def tree_sum(parts: list[Any], add: Any) -> Any:
    """``add`` applied pairwise over ``parts`` (``Delayed`` of one graph) in a fixed order,
    (0 + 1) + (2 + 3) …, an odd last one carried up: the sum depends on the parts, never on
    the workers. One graph layer."""
    if not parts:
        raise ValueError("tree_sum of no parts")
    keys = [part.key for part in parts]
    token = tokenize(keys, add)
    name = f"{funcname(add)}-tree-{token}"
    layer: dict[Any, Any] = {}
    level = 0
    while len(keys) > 1:
        nxt = []
        for i in range(0, len(keys) - 1, 2):
            key = (name, level, i // 2)
            layer[key] = (add, keys[i], keys[i + 1])
            nxt.append(key)
        keys = nxt + ([keys[-1]] if len(keys) % 2 else [])
        level += 1
    if not layer:
        return parts[0]
    graphs = {id(part.dask): part for part in parts}  # chunk_tasks' parts share one graph
    graph = HighLevelGraph.from_collections(name, layer, dependencies=list(graphs.values()))
    return Delayed(keys[0], graph, layer=name)


def _pick_rows(block: np.ndarray, rows: np.ndarray) -> np.ndarray:
    return block[rows]


def delayed_array(X: Any) -> Any:
    """A Dask array as one ``Delayed`` of the whole NumPy array (its blocks joined by
    ``np.block`` in the task), to pass to ``dask.delayed`` functions; anything else as it is.

    Handing the array itself to a delayed function gives the same task, but Dask wraps it in
    an expression that imports ``distributed`` (0.1–0.2 s on 2 CPUs) in a process that had
    no need of it.
    """
    if not isinstance(X, dask.array.Array):
        return X
    return dask.delayed(np.block, pure=True)(X.to_delayed().tolist())


def chunked_contingency_table(y_true: Any, y_pred: Any) -> np.ndarray:
    """The contingency table (``dkernel.metrics.contingency_counts``; classes and clusters
    in sorted order) of two label arrays, NumPy or Dask, counted chunk by chunk: a first pass
    finds the classes, a second counts each chunk and adds the tables, so neither array is
    ever held whole."""
    y_true, y_pred = dask.array.asarray(y_true), dask.array.asarray(y_pred)
    if y_true.shape != y_pred.shape:
        raise ValueError(f"y_true and y_pred differ in shape: {y_true.shape} vs {y_pred.shape}")
    classes, clusters = dask.compute(dask.array.unique(y_true), dask.array.unique(y_pred))
    counts = dask.array.map_blocks(
        _chunk_counts,
        y_true.rechunk(y_pred.chunks),
        y_pred,
        classes,
        clusters,
        new_axis=[1, 2],
        chunks=((1,) * y_pred.numblocks[0], (classes.size,), (clusters.size,)),
        dtype=np.int64,
        meta=np.empty((0, 0, 0), dtype=np.int64),
    )
    return np.asarray(counts.sum(axis=0).compute())


def _chunk_counts(y_true, y_pred, classes, clusters) -> np.ndarray:
    """One chunk's table, shape (1, classes, clusters)."""
    from dkernel.metrics import contingency_counts

    return contingency_counts(y_true, y_pred, classes, clusters)[None]


@dataclass(frozen=True)
class DistinctRows:
    """The distinct rows of a (possibly chunked) matrix, counted without holding its rows.

    Attributes
    ----------
    points : ndarray (m, p)
        The distinct rows, in order of first appearance.
    counts : ndarray of int64 (m,)
        Copies of each.
    first : ndarray of int64 (m,)
        Row index of each one's first occurrence, increasing.
    """

    points: np.ndarray
    counts: np.ndarray
    first: np.ndarray


def few_distinct_rows(X: Any, limit: int) -> DistinctRows | None:
    """The distinct rows of ``X`` (NumPy or Dask) when there are at most ``limit``; else None.

    The first ``DISTINCT_PROBE_ROWS`` rows (``dkernel.linalg.copies``) are looked at first
    (continuous data end the count there, for the price of one sort of those rows); then each
    chunk counts its own
    distinct rows where it is, giving up above ``limit``, and the counts are merged pairwise
    in a fixed order (:func:`tree_sum`), so the answer never depends on the workers. Memory:
    at most ``limit`` rows per chunk; X with NaN gives None (a NaN is no value to repeat).
    """
    limit = int(limit)
    head = np.asarray(X[: min(DISTINCT_PROBE_ROWS, int(X.shape[0]))], dtype=np.float64)
    if _distinct_of_block(head, 0, limit) is None:
        return None
    if not isinstance(X, dask.array.Array):
        found = _distinct_of_block(np.asarray(X, dtype=np.float64), 0, limit)
    else:
        if any(n > 1 for n in X.numblocks[1:]):
            X = X.rechunk({axis: -1 for axis in range(1, X.ndim)})
        offsets = np.cumsum((0, *X.chunks[0][:-1]))
        parts = chunk_tasks(
            X,
            _distinct_of_block,
            range(X.numblocks[0]),
            [(int(o), limit) for o in offsets],
        )
        found = tree_sum(parts, partial(_merge_distinct, limit=limit)).compute()
    if found is None:
        return None
    order = np.argsort(found.first, kind="stable")
    return DistinctRows(found.points[order], found.counts[order], found.first[order])


def _distinct_of_block(block: np.ndarray, offset: int, limit: int) -> DistinctRows | None:
    block = np.asarray(block, dtype=np.float64)
    if np.isnan(block).any():
        return None
    points, first, counts = np.unique(block, axis=0, return_index=True, return_counts=True)
    if points.shape[0] > limit:
        return None
    return DistinctRows(points, counts.astype(np.int64), first.astype(np.int64) + offset)


def _merge_distinct(
    a: DistinctRows | None, b: DistinctRows | None, limit: int
) -> DistinctRows | None:
    if a is None or b is None:
        return None
    both = np.concatenate([a.points, b.points])
    points, inverse = np.unique(both, axis=0, return_inverse=True)
    inverse = np.ravel(inverse)
    if points.shape[0] > limit:
        return None
    counts = np.bincount(inverse, np.concatenate([a.counts, b.counts]), points.shape[0])
    first = np.full(points.shape[0], np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(first, inverse, np.concatenate([a.first, b.first]))
    return DistinctRows(points, counts.astype(np.int64), first)


#: Dask arrays already searched for NaN, by their graph name (a token of the data's source and
#: operations): the answer of one pass each, so that kernels built again on the same array
#: (the widths an 'auto' rule compares) do not read it again.
_NAN_SEARCHED: LRUCache[bool] = LRUCache(64)


def holds_nan(X: Any, sample: np.ndarray | None = None) -> bool:
    """Whether ``X`` (NumPy or Dask) has a NaN anywhere.

    ``sample``, rows of ``X`` already in memory, is looked at first. Dask input is then
    searched in one pass (``da.isnan(X).any()``), remembered by the array's name: a NaN
    outside a sample must not reach a kernel of complete rows, which would refuse it in the
    middle of the computation.
    """
    if sample is not None and np.isnan(sample).any():
        return True
    if not isinstance(X, dask.array.Array):
        A = np.asarray(X)
        return A.dtype.kind in "fc" and bool(np.isnan(A).any())
    if X.dtype.kind not in "fc":
        return False
    return _NAN_SEARCHED.get(X.name, lambda: bool(dask.array.isnan(X).any().compute()))
