"""The landmark bipartite graph of a whole data set: its landmarks from a sample, and the
landmark-side sums ``W_Y = Bᵀ D_X⁻¹ B`` and ``D_Y = Bᵀ 1`` accumulated chunk by chunk.

Both the spectral (:mod:`dkernel.spectral.bipartite`) and the kernel-decomposition
(:mod:`dkernel.decomposition.landmark`) large-N paths start here. Dask chunks are tasks whose
partial sums are added pairwise in a fixed order, so the result depends on the chunks, never
on the workers; NumPy input is cut into blocks spread over the cores.
"""

from __future__ import annotations

from typing import Any

import dask
import dask.array as da
import numpy as np

from dkernel._random import derive_rng
from dkernel.errors import InvalidInputError
from dkernel.graphs.landmark import (
    SAMPLE_PER_LANDMARK,
    LandmarkFeatureMap,
    LandmarkGraph,
    check_landmark_sizes,
    fit_landmark_graph,
)
from dkernel.linalg.threads import map_on_cores
from dkernel.rows import take_rows

#: Rows per task of the passes over NumPy input (the Dask input keeps its own chunks).
SUM_ROWS = 65_536


def sample_landmark_graph(
    X: Any, n_landmarks: int, n_neighbors: int, seed: int | None
) -> LandmarkGraph:
    """The landmark graph of ``X``: k-means landmarks of a uniform sample of ``10 p`` rows.

    The sample's rows are taken chunk by chunk from a Dask array (``dkernel.rows.take_rows``).
    Checks the sizes first (:func:`~dkernel.graphs.landmark.check_landmark_sizes`).
    """
    n, p = int(X.shape[0]), int(n_landmarks)
    check_landmark_sizes(n, p, int(n_neighbors))
    rng = derive_rng(seed, "landmark-graph-sample")
    rows = np.sort(rng.choice(n, min(n, SAMPLE_PER_LANDMARK * p), replace=False))
    sample = take_rows(X, rows, np.float64)
    if not np.all(np.isfinite(sample)):
        raise InvalidInputError(
            "The landmark graph needs finite values; X has NaN or infinite entries. Impute "
            "or drop those rows first."
        )
    return fit_landmark_graph(sample, p, int(n_neighbors), int(rng.integers(2**31 - 1)))


def landmark_sums(graph: LandmarkGraph, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """This block's share of ``W_Y = Bᵀ D_X⁻¹ B`` (p × p) and of ``D_Y`` (p)."""
    p = graph.n_landmarks
    indices, weights = graph.links(X)
    share = weights / weights.sum(axis=1, keepdims=True)
    pairs = (indices[:, :, None] * p + indices[:, None, :]).ravel()
    products = (weights[:, :, None] * share[:, None, :]).ravel()
    W = np.bincount(pairs, weights=products, minlength=p * p).reshape(p, p)
    d = np.bincount(indices.ravel(), weights=weights.ravel(), minlength=p)
    return W, d


def _add(a: tuple, b: tuple) -> tuple:
    return a[0] + b[0], a[1] + b[1]


def row_blocks(n: int, rows: int) -> list[slice]:
    return [slice(s, min(s + rows, n)) for s in range(0, n, rows)]


def accumulate_landmark_sums(graph: LandmarkGraph, X: Any) -> tuple[np.ndarray, np.ndarray]:
    """``(W_Y, D_Y)`` over every row of ``X``: Dask chunks as tasks, NumPy blocks on the cores."""
    if isinstance(X, da.Array):
        X = X.rechunk({1: -1})
        fn = dask.delayed(landmark_sums, pure=True)
        g = dask.delayed(graph, pure=True)
        parts = [fn(g, block) for block in X.to_delayed().ravel()]
        add = dask.delayed(_add, pure=True)
        while len(parts) > 1:  # pairwise, in a fixed order
            nxt = [add(parts[i], parts[i + 1]) for i in range(0, len(parts) - 1, 2)]
            parts = nxt + ([parts[-1]] if len(parts) % 2 else [])
        return dask.compute(parts[0])[0]
    X = np.asarray(X, dtype=np.float64)
    parts = map_on_cores(lambda s: landmark_sums(graph, X[s]), row_blocks(len(X), SUM_ROWS))
    W, d = parts[0]
    for part in parts[1:]:
        W, d = _add((W, d), part)
    return W, d


def fit_landmark_features(
    X: Any, n_landmarks: int, n_neighbors: int, seed: int | None
) -> LandmarkFeatureMap:
    """The landmark graph of ``X`` (:func:`sample_landmark_graph`) and its landmark degrees
    over every row of ``X``: the feature map of the landmark kernel."""
    graph = sample_landmark_graph(X, n_landmarks, n_neighbors, seed)
    _, degrees = accumulate_landmark_sums(graph, X)
    return LandmarkFeatureMap(graph, degrees)
