"""Spectral embedding of the landmark bipartite graph (transfer cut), chunk by chunk.

The graph (:mod:`dkernel.graphs.landmark`) joins each of N points to its K nearest of p
landmarks with weights ``B`` (N × p, K non-zeros a row). The normalized spectral embedding of
the bipartite graph ``[[0, B], [Bᵀ, 0]]`` needs only the p × p problem on the landmark side
(transfer cut; Li et al., CVPR 2012 [Li2012], as U-SPEC [Huang2020] uses it):

    W_Y = Bᵀ D_X⁻¹ B,   D_Y = diag(Bᵀ 1),   W_Y v = μ D_Y v,

and a point's coordinates are the random-walk eigenvectors of the whole graph on its side,
``f(x) = Σ_j P(j | x) v_j / √μ`` with ``P(j | x) = B_xj / Σ_j B_xj``. ``W_Y`` and ``D_Y`` are
sums over the points, so one pass over the data accumulates them (per block of rows, then
summed in a fixed order: the result depends on the chunks, never on the workers), and the
same formula embeds new points: ``transform`` of a training point is its training embedding,
exactly. Memory O(p² + block · K) per task; never N × N.

The coordinates are weighted as the exact sparse path's default 'green' ones (the Green's
function of the personalized PageRank, ``dkernel.spectral.sparse.GREEN_ALPHA``) and
clustered by k-means without row normalisation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import dask.array as da
import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components

from dkernel.errors import InvalidInputError, NumericalWarning, warn_caller
from dkernel.graphs.bipartite import (
    SUM_ROWS,
    accumulate_landmark_sums,
    row_blocks,
    sample_landmark_graph,
)
from dkernel.graphs.landmark import LandmarkGraph
from dkernel.linalg.eigen import dense_eigh, fix_signs
from dkernel.linalg.threads import map_on_cores
from dkernel.spectral.sparse import GREEN_ALPHA

#: Eigenvalues kept for the eigengap hint.
_SPECTRUM = 51


@dataclass
class BipartiteSpectralModel:
    """The landmark graph and the landmark side of the embedding: all ``transform`` needs."""

    graph: LandmarkGraph
    coefficients: np.ndarray  # (p, k): v / √μ, Green-weighted
    eigenvalues: np.ndarray  # (k,) μ, the eigenvalues of the landmark problem
    spectrum: np.ndarray  # leading μ, for the eigengap hint
    n_graph_components: int

    def embed(self, X: np.ndarray) -> np.ndarray:
        """Coordinates of the rows of ``X`` (NumPy), block by block on the cores."""
        X = np.asarray(X, dtype=np.float64)
        blocks = row_blocks(len(X), SUM_ROWS)
        if not blocks:
            return np.empty((0, self.coefficients.shape[1]))
        return np.concatenate(map_on_cores(lambda s: self._embed_block(X[s]), blocks))

    def _embed_block(self, X: np.ndarray) -> np.ndarray:
        indices, weights = self.graph.links(X)
        share = weights / weights.sum(axis=1, keepdims=True)
        return np.einsum("nk,nkc->nc", share, self.coefficients[indices])

    def transform(self, X: Any) -> Any:
        """Coordinates of new points (lazy, chunk by chunk, for Dask input)."""
        k = self.coefficients.shape[1]
        if isinstance(X, da.Array):
            X = X.rechunk({1: -1})
            return X.map_blocks(
                self._embed_block,
                chunks=(X.chunks[0], (k,)),
                dtype=np.float64,
                meta=np.empty((0, k), dtype=np.float64),
            )
        return self.embed(X)


def transfer_cut(
    W: np.ndarray, d: np.ndarray, n_components: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Leading solutions of ``W v = μ diag(d) v``: ``(μ (k,), V (p, k), spectrum)``.

    Landmarks no point links to (``d = 0``) get zero coordinates. Signs are fixed (each
    vector's largest entry positive) so that the embedding is deterministic.
    """
    active = d > 0
    inv_sqrt = np.zeros_like(d)
    inv_sqrt[active] = 1.0 / np.sqrt(d[active])
    M = inv_sqrt[:, None] * W * inv_sqrt[None, :]
    M = 0.5 * (M + M.T)
    k = int(n_components)
    values, vectors = dense_eigh(M, max(k, _SPECTRUM), clip=False)
    V = fix_signs(inv_sqrt[:, None] * vectors[:, :k])
    return values[:k], V, values[:_SPECTRUM]


def fit_bipartite_embedding(
    X: Any,
    n_components: int,
    *,
    n_landmarks: int,
    n_neighbors: int,
    n_clusters: int | None = None,
    seed: int | None = 0,
) -> tuple[Any, BipartiteSpectralModel]:
    """Landmarks, one pass of sums, the p × p eigenproblem: the embedding of every point.

    Parameters
    ----------
    X : ndarray or dask array (n, d)
    n_components : int
    n_landmarks : int
        p: the k-means centres of a uniform subsample of ``10 p`` points.
    n_neighbors : int
        K: landmarks per point (and the rank of each landmark's width).
    n_clusters : int, optional
        Warn when the graph falls into more connected pieces than this.
    seed : int, optional

    Returns
    -------
    embedding : ndarray or dask array (n, n_components)
        Lazy for Dask input (one more pass computes it).
    model : BipartiteSpectralModel
    """
    p, k = int(n_landmarks), int(n_components)
    if k > p:
        raise InvalidInputError(
            f"n_components ({k}) must be <= n_landmarks ({p}); use more landmarks."
        )
    graph = sample_landmark_graph(X, p, n_neighbors, seed)
    W, d = accumulate_landmark_sums(graph, X)
    mu, V, spectrum = transfer_cut(W, d, k)
    if np.any(mu <= 0):
        raise InvalidInputError(
            "The landmark graph's embedding found non-positive eigenvalues among the kept "
            "components; use fewer components or more landmarks."
        )
    n_pieces = connected_components(csr_matrix(W[d > 0][:, d > 0]), directed=False)[0]
    if n_clusters is not None and n_pieces > n_clusters:
        warn_caller(
            f"The landmark graph falls into {n_pieces} disconnected pieces, more than the "
            f"{n_clusters} clusters asked for, so some clusters may be whole pieces and others "
            "merged. Raise landmark_neighbors (more links per point) or use fewer landmarks.",
            NumericalWarning,
        )
    scale = np.sqrt(mu)
    beta = GREEN_ALPHA / (1.0 - GREEN_ALPHA)
    coefficients = V / scale[None, :] / np.sqrt(1.0 + beta - scale)[None, :]
    model = BipartiteSpectralModel(graph, coefficients, mu, spectrum, int(n_pieces))
    return model.transform(X), model
