"""Dask graphs that stream every pixel (row) chunk by chunk through the mean-shift model.

The fitted model (density, trajectory cache, modes) is put on every worker once
(``dkernel.runtime.shared.share``), not into the graph as a key; each row chunk becomes one
task, with its chunk as its only input, that runs
:func:`dkernel.meanshift.kernels.assign_to_modes` against it. Random-Fourier-feature
partition sums and counts are per-chunk partial sums reduced with a tree sum. Nothing here
calls ``compute``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import dask
import dask.array as da
import numpy as np

from dkernel._validation import aligned
from dkernel.kernels.missing_model import MissingValueModel
from dkernel.linalg import label_sums
from dkernel.meanshift import kernels as K
from dkernel.rows import joint_blocks
from dkernel.runtime.shared import share, with_shared


@dataclass
class AssignModel:
    """What streaming assignment needs: the stored density and the seeds' trajectories."""

    density: np.ndarray
    weights: np.ndarray | None
    bandwidth: float
    path_points: np.ndarray
    path_labels: np.ndarray
    path_radius: float
    max_iter: int
    tol: float
    dtype: Any = np.float32
    #: what missing entries are expected to be (a row with some NaN starts at its conditional
    #: means, ``dkernel.kernels.missing.MissingValueModel``); None: such rows are nodata
    fill: MissingValueModel | None = None
    #: the principal axes mean shift ran on (rows are centred on ``location`` and projected);
    #: None: the input columns
    location: np.ndarray | None = None
    components: np.ndarray | None = None

    def assign(self, X: np.ndarray) -> np.ndarray:
        """Label rows of X (nodata rows get -1: every entry NaN, or any with ``fill`` None).
        O(n · steps · n_density · d)."""
        X = np.asarray(X, dtype=np.float64)
        out = np.full(X.shape[0], -1, dtype=np.int64)
        missing = np.isnan(X)
        if self.fill is None:
            ok = ~missing.any(axis=1)
        else:
            ok = ~missing.all(axis=1)
            X = self.fill.fill(X)[0]
        if self.components is not None:
            X = (X - self.location) @ self.components  # nodata rows stay NaN, left out
        if ok.any():
            out[ok] = K.assign_to_modes(
                X[ok],
                self.density,
                self.bandwidth,
                self.path_points,
                self.path_labels,
                weights=self.weights,
                path_radius=self.path_radius,
                max_iter=self.max_iter,
                tol=self.tol,
                dtype=self.dtype,
                tree=self._tree(),
            )
        return out

    def _tree(self):
        tree = getattr(self, "_cached_tree", None)
        if tree is None:
            from scipy.spatial import cKDTree

            tree = cKDTree(self.path_points)
            self._cached_tree = tree
        return tree

    def __getstate__(self):
        state = dict(self.__dict__)
        state.pop("_cached_tree", None)
        return state


def _row_chunks(X: da.Array, *aligned_with: da.Array) -> list:
    """X's row chunks (its columns joined), and those of each of ``aligned_with`` (1-D,
    rechunked like X's rows), as ``Delayed`` lists whose shared work stays one task
    (``dkernel.rows.joint_blocks``)."""
    if len(X.chunks[1]) != 1:
        X = X.rechunk({1: X.shape[1]})
    others = [a.rechunk((X.chunks[0],)) for a in aligned_with]
    return [list(b.ravel()) for b in joint_blocks(X, *others)]


def stream_assign(X: da.Array, model: AssignModel) -> da.Array:
    """Partition label of every row of a Dask array (one task per row chunk).

    Returns
    -------
    dask.array.Array of shape (n,), int64, chunked like X's rows; nodata rows get -1.

    Notes
    -----
    Memory per task O(chunk rows · n_density); the model travels once to each worker.
    """
    shared = share(model, "mean-shift-model")
    (blocks,) = _row_chunks(X)
    parts = [
        da.from_delayed(dask.delayed(with_shared(_assign))(blk, shared), shape=(n,), dtype=np.int64)
        for blk, n in zip(blocks, X.chunks[0], strict=True)
    ]
    return da.concatenate(parts) if parts else da.zeros((0,), dtype=np.int64)


def _assign(block: np.ndarray, model: AssignModel) -> np.ndarray:
    return model.assign(aligned(block))


def stream_feature_sums(
    X: da.Array, labels: da.Array, n_partitions: int, W: np.ndarray, b: np.ndarray
) -> Any:
    """Delayed ``(S, counts, rows)``: random-Fourier-feature sums, sizes and row sums of each
    partition.

    One pass over the rows; per-chunk partial sums are tree-reduced.

    Notes
    -----
    O(N d D) work, O(chunk · D + m · D) memory per task.
    """
    params = share((W, b), "random-features")
    if not isinstance(labels, da.Array):
        labels = da.from_array(np.asarray(labels), chunks=(X.chunks[0],))
    blocks, lab_chunks = _row_chunks(X, labels)
    partials = [
        dask.delayed(with_shared(_feature_sums))(blk, lab, n_partitions, params)
        for blk, lab in zip(blocks, lab_chunks, strict=True)
    ]
    while len(partials) > 1:
        partials = [
            dask.delayed(_add_pairs)(*partials[i : i + 4]) for i in range(0, len(partials), 4)
        ]
    return partials[0]


def _feature_sums(block, lab, m, params):
    W, b = params
    lab = np.asarray(lab)
    block = aligned(np.asarray(block))
    S = K.partition_feature_sums(block, lab, m, W, b)
    rows, counts = label_sums(block, lab, m)
    return S, counts, rows


def _add_pairs(*parts):
    return tuple(sum(p[i] for p in parts) for i in range(len(parts[0])))


def stream_stratified_sample(
    X: da.Array, labels: da.Array, take: np.ndarray, salt: int, *, fan_in: int = 8
) -> Any:
    """Delayed ``(index, labels, rows)``: MSSC's partition-stratified sample of X's rows.

    One pass; each chunk keeps its ``take[i]`` smallest-key rows per partition and the
    candidates are merged in a tree (:mod:`dkernel.meanshift.sampling`), so no task holds
    more than ``fan_in`` × the sample.
    """
    from dkernel.meanshift import sampling

    # by value: a few integers per partition, and no input shared by the strips' tasks
    take_d = np.asarray(take, dtype=np.int64)
    blocks, lab_chunks = _row_chunks(X, labels)
    starts = np.cumsum((0, *X.chunks[0]))[:-1]
    parts = [
        dask.delayed(sampling.chunk_candidates)(blk, lab, int(s), take_d, salt)
        for blk, lab, s in zip(blocks, lab_chunks, starts, strict=True)
    ]
    while len(parts) > 1:
        parts = [
            dask.delayed(sampling.merge_candidates)(parts[i : i + fan_in], take_d)
            for i in range(0, len(parts), fan_in)
        ]
    return dask.delayed(sampling.finish_sample)(parts[0], take_d)


def stream_partition_sizes(labels: da.Array, n_partitions: int) -> Any:
    """Delayed pixel count of every partition (negative labels: no partition, not counted)."""
    counts = [
        dask.delayed(_partition_counts)(lab, n_partitions) for lab in labels.to_delayed().ravel()
    ]
    while len(counts) > 1:
        counts = [dask.delayed(sum)(counts[i : i + 8]) for i in range(0, len(counts), 8)]
    return counts[0]


def _partition_counts(lab: np.ndarray, n_partitions: int) -> np.ndarray:
    lab = np.asarray(lab)
    return np.bincount(lab[lab >= 0], minlength=n_partitions).astype(np.int64)
