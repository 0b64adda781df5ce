"""The k-NN graph kernels (``knn``, ``knn_mean``) of the training points as a sparse matrix, and
the leading eigenpairs of its normalized form: ``JointRankingClustering`` beyond the dense limit.

The two kernels are 0 beyond each point's neighbour radius (the distance to its
``n_neighbors``-th other training point), so ``κ(X, X)`` has about ``n_neighbors`` non-zeros
per row: ``knn_mean`` is ``½ (A + Aᵀ)`` and ``knn`` ``[A + Aᵀ > 0]`` with
``A_ij = [‖x_i − x_j‖ ≤ r_i]`` for ``i ≠ j`` and ``A_ii = 1``. The candidate pairs come
from a nearest-neighbour search (scikit-learn's tree or blocked brute force), O(N k) memory,
never N × N; the radii are the kernel's own (``JointRankingClustering`` measures them among all
the training rows here, through an index, so each row keeps about ``n_neighbors`` non-zeros
at any N). Equal to the dense kernel: that of
``dkernel.kernels.adaptive`` on complete data, and on data with NaN that of
``dkernel.kernels.missing`` (the k-NN graphs rank by ``‖x̃ − ỹ‖``, the rows filled with their
conditional means). The search that measured the radii lists each row's nearest rows; the
graph starts from those lists (``dkernel.kernels.adaptive.NeighborLists``).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from sklearn.neighbors import NearestNeighbors

from dkernel._budget import SCRATCH_BLOCK_BYTES, rows_for_budget
from dkernel.kernels.adaptive import RADIUS_SLACK, RadiusKernelBlock, listed_squared_distances
from dkernel.linalg.copies import RowCopies
from dkernel.linalg.eigen import fix_signs
from dkernel.ranking.ppr import restart_beta
from dkernel.spectral.sparse import sparse_leading_eigenpairs

#: Peak memory per training row of a fit on the sparse graph, the jobs' cost estimate: measured
#: 1.1–1.4 KiB above the interpreter's own 0.3 GiB at 2·10⁵ rows (blobs, blobs with a quarter
#: missing, moons; ``benchmarks/results/jrc_scale.md``), with room for wider data.
SPARSE_BYTES_PER_ROW = 2 * 2**10
#: What the eigen-solver's warning proposes when it cannot separate the leading pairs.
EIGEN_FIX = "Use a larger n_neighbors (a better connected graph) or fewer n_components."


def sparse_radius_kernel(block: RadiusKernelBlock, X: np.ndarray) -> sp.csr_matrix:
    """``κ(X, X)`` of a ``knn`` or ``knn_mean`` block, as a sparse matrix.

    Parameters
    ----------
    block : RadiusKernelBlock or MissingValueRadiusBlock
        Of kind ``'knn'`` or ``'knn_mean'``; each point's radius is measured among its
        reference rows (every training row, or the registry's uniform sample of them).
    X : ndarray of shape (n, p)
        The training rows (with NaN for a ``MissingValueRadiusBlock``).

    Returns
    -------
    scipy.sparse.csr_matrix of shape (n, n), symmetric, float64
        Equal to ``block(X, X)``: the candidate pairs come from a nearest-neighbour search,
        listing more neighbours for a row until its farthest listed one is beyond its radius,
        but whether a pair is within a radius is decided with the dense blocks' distances and
        radii.
    """
    if block.kind not in ("knn", "knn_mean"):
        raise ValueError(f"a sparse kernel needs a k-NN graph kernel, not {block.kind!r}")
    X = np.asarray(X, dtype=np.float64)
    radius2 = block.radius(X) ** 2 * (1.0 + RADIUS_SLACK)
    left, right = block.sides(X)
    norms = np.einsum("ij,ij->i", left, left), np.einsum("ij,ij->i", right, right)
    n = left.shape[0]
    # the lists that measured the radii, when the reference is X itself: the first pass is free
    searched = block.take_neighbor_lists(X)
    if searched is None:
        index, columns = NearestNeighbors().fit(right), None
        width = min(n, 2 * int(block.n_neighbors) + 1)
    else:
        index, columns = searched.index, searched.lists
        width = columns.shape[1]
    pending = np.arange(n)
    rows_of, columns_of = [np.arange(n)], [np.arange(n)]  # A_ii = 1
    while pending.size:
        if columns is None:
            _, columns = index.kneighbors(left[pending], n_neighbors=width)
        within = _within(left, right, norms, radius2, pending, columns)
        # a row whose farthest listed point is within its radius may have more (ties, copies)
        done = ~within[:, -1] if width < n else np.ones(pending.size, dtype=bool)
        within &= columns != pending[:, None]  # the point itself: the diagonal, set above
        rows_of.append(np.repeat(pending[done], within[done].sum(axis=1)))
        columns_of.append(columns[done][within[done]])
        pending, columns = pending[~done], None
        width = min(n, 2 * width)
    rows, columns = np.concatenate(rows_of), np.concatenate(columns_of)
    A = sp.csr_matrix((np.ones(rows.size), (rows, columns)), shape=(n, n))
    if block.kind == "knn_mean":
        W = 0.5 * (A + A.T)
    else:
        W = A + A.T
        W.data[:] = 1.0
    return sp.csr_matrix(W)


def _within(
    left: np.ndarray,
    right: np.ndarray,
    norms: tuple[np.ndarray, np.ndarray],
    radius2: np.ndarray,
    rows: np.ndarray,
    columns: np.ndarray,
) -> np.ndarray:
    """``‖l_i − r_j‖² ≤ r_i²`` for each listed pair, with the dense blocks' distances
    ``|l|² + |r|² − 2 l·r`` (clipped at 0; ``norms`` the rows' ``|l|²`` and ``|r|²``), in
    blocks of bounded memory."""
    within = np.empty(columns.shape, dtype=bool)
    step = rows_for_budget(SCRATCH_BLOCK_BYTES, columns.shape[1] * left.shape[1], 8)
    for r0 in range(0, rows.size, step):
        part = slice(r0, r0 + step)
        squared = listed_squared_distances(left, right, norms, rows[part], columns[part])
        within[part] = squared <= radius2[rows[part], None]
    return within


def sparse_normalized_eigenpairs(
    W: sp.csr_matrix,
    d: np.ndarray,
    n_components: int,
    seed: int | None,
    counts: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """The ``n_components`` largest eigenpairs of ``D^{-1/2} W D^{-1/2}``, descending, the first
    the exact trivial pair ``(1, D^{1/2} 1 / √Vol)`` and the others orthogonal to it (as
    ``dkernel.ranking.kppr.top_normalized_eigenpairs`` gives them for a dense kernel).

    ``counts``: W is the graph of distinct rows, row u standing for ``counts[u]`` identical
    rows and ``d`` the degree of each of them (:func:`jrc_copies_embedding`); the pairs are
    those of ``C^{1/2} D^{-1/2} W D^{-1/2} C^{1/2}`` (C = diag(counts)), whose vectors ``z``
    are those of the whole graph's, ``z_u / √c_u`` on each copy of u.
    """
    scale = np.sqrt(1.0 / d) if counts is None else np.sqrt(counts / d)
    M = sp.csr_matrix(sp.diags(scale) @ W @ sp.diags(scale))
    mass = d if counts is None else counts * d
    pairs = sparse_leading_eigenpairs(M, n_components, seed, perron=np.sqrt(mass), fix=EIGEN_FIX)
    values, vectors = pairs.values[:n_components], pairs.vectors[:, :n_components]
    e1 = np.sqrt(mass / mass.sum())
    rest = vectors[:, 1:] - np.outer(e1, e1 @ vectors[:, 1:])
    rest = fix_signs(np.linalg.qr(rest)[0])
    return np.concatenate([[1.0], values[1:]]), np.concatenate([e1[:, None], rest], axis=1)


def jrc_sparse_embedding(
    W: sp.csr_matrix, alpha: float, n_components: int, seed: int | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``jrc_normalized_embedding`` of a sparse affinity: ``Z_β = √(β Vol) D^{-1/2} E*
    ((1+β)I − Λ*)^{-1/2}`` from the ``n_components`` largest eigenpairs of ``D^{-1/2} W D^{-1/2}``.

    Returns
    -------
    Z : (N, k), eigenvalues : (k,) descending, U : (N, k) ``D^{-1/2} E*``, d : (N,)
    """
    beta = restart_beta(alpha, "JointRankingClustering")
    d = np.asarray(W.sum(axis=1), dtype=np.float64).ravel()
    k = min(int(n_components), d.size)
    values, vectors = sparse_normalized_eigenpairs(W, d, k, seed)
    U = vectors / np.sqrt(d)[:, None]
    Z = np.sqrt(beta * d.sum()) * U / np.sqrt(1.0 + beta - values)[None, :]
    return Z, values, U, d


def jrc_copies_embedding(
    block: RadiusKernelBlock,
    X: np.ndarray,
    copies: RowCopies,
    alpha: float,
    n_components: int,
    seed: int | None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """:func:`jrc_sparse_embedding` of ``sparse_radius_kernel(block, X)`` for rows that repeat,
    built on the distinct rows: the same Z, eigenvalues, U and d, up to the signs of columns.

    Copies of one row have the same radius and lie within it of each other, so the kernel of
    all rows is ``P W̃ Pᵀ`` with ``W̃`` the kernel of the distinct rows (``P`` the n × m
    membership of each row): its nonzero eigenpairs are those of an m × m problem
    (:func:`sparse_normalized_eigenpairs` with ``counts``). On all rows every copy of a row
    within another's radius is a neighbour, so the graph holds ``Σ c_u Σ_{v near u} c_v``
    non-zeros: 3·10⁷ for three 4-D blobs rounded to integers at 6·10⁴ rows (453 distinct),
    12.7 GiB and 196 s, where the distinct rows' graph is a few thousand.
    """
    X = np.asarray(X, dtype=np.float64)
    beta = restart_beta(alpha, "JointRankingClustering")
    W = sparse_radius_kernel(block, X[copies.first])
    counts = copies.counts.astype(np.float64)
    d_distinct = np.asarray(W @ counts, dtype=np.float64).ravel()
    k = min(int(n_components), copies.first.size)
    values, z = sparse_normalized_eigenpairs(W, d_distinct, k, seed, counts=counts)
    U = (z / np.sqrt(counts * d_distinct)[:, None])[copies.inverse]
    d = d_distinct[copies.inverse]
    Z = np.sqrt(beta * d.sum()) * U / np.sqrt(1.0 + beta - values)[None, :]
    return Z, values, U, d
