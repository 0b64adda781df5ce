"""Row-normalised kernels of the aggregate Markov model (Szymkowiak-Have et al. 2006, Eq. 4, 15, 16
[SzymkowiakHave2006]) and the self-tuning kernel of the estimator's default.

Numeric layer: NumPy/SciPy/scikit-learn on in-memory blocks, no Dask, no I/O.

The kernels are the kernel registry's (``dkernel.kernels.registry``): ``'rbf'`` (the Gaussian
density kernel of Eq. 15, here with its normalising constant; formerly ``'gaussian'``, still
accepted), ``'cosine'`` (Eq. 16) and ``'local_scaling'``, evaluated by their log forms
(``dkernel.kernels.rbf``, ``dkernel.kernels.cosine``, ``dkernel.kernels.adaptive``: the
registry entries' ``log_block``). Every kernel is handled in the log domain. The Gaussian
density kernel with a small width ``h`` underflows to exactly zero for every training point
when evaluated at a point a few widths away (``exp(-d^2 / 2h^2)`` with ``d / h > 39``), which
would turn the row normalisation ``K / sum(K)`` into ``0 / 0``; in log space the normaliser is
a log-sum-exp and the normalised row is a softmax, exact at any width.

``'local_scaling'`` is Zelnik-Manor & Perona's ``exp(-||x - y||^2 / (sigma_x sigma_y))`` with
``sigma`` the distance to the k-th neighbour among the training points, measured as in
:mod:`dkernel.kernels.adaptive` (:func:`~dkernel.kernels.adaptive.kth_distinct_distance`:
coinciding points are skipped, so a training point's scale is its k-th *other* neighbour and a
new point's its k-th training point). Its width "parameter" is a :class:`LocalScales` holding
every training point's sigma; a query's own sigma comes from the same neighbour search that
finds its kernel row, so ``predict`` on a training point reproduces its training row exactly.
It is not a normalised density: there is no ``(sigma_x sigma_y)^(-p/2)`` factor, which would
re-weight every row by its neighbours' density (not tried as a clustering default).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import sparse
from scipy.sparse.csgraph import connected_components
from scipy.special import logsumexp
from sklearn.neighbors import KDTree, NearestNeighbors

from dkernel.errors import InvalidInputError
from dkernel.graphs.approximate_knn import CellIndex
from dkernel.kernels.adaptive import (
    fill_zero_scales,
    kth_distinct_distance,
    local_scaling_log_kernel,
    squared_distances,
    tie_inclusive_neighbors,
)
from dkernel.kernels.cosine import cosine_log_block, cosine_log_of_unit_distance
from dkernel.kernels.rbf import rbf_log_block, rbf_log_of_distance
from dkernel.linalg.components import single_linkage_links
from dkernel.linalg.threads import map_on_cores

#: The kernels of the kernel decomposition (names of the kernel registry).
KERNELS = ("local_scaling", "rbf", "cosine")
#: Former kernel names, still accepted (the estimators warn once; see ``dkernel.kernels.aliases``).
KERNEL_ALIASES = {"gaussian": "rbf"}
#: The fix a NaN error of KernelDecompositionClustering names.
NAN_FIX = (
    "Impute them first (e.g. sklearn.impute.SimpleImputer), or keep the default self-tuning "
    "k-NN kernel (kernel='local_scaling' with n_neighbors) on the exact path "
    "(approximation='auto' up to 5 000 points, or 'exact'), which compares rows with NaN by "
    "their expected squared distance."
)
NEIGHBOR_SEARCHES = ("auto", "exact", "approximate")
#: ``neighbor_search='auto'`` searches training sets of at least this many points
#: approximately (:class:`~dkernel.graphs.approximate_knn.CellIndex`), smaller ones exactly:
#: the exact 8-NN graph of the 10-D blobs took 22 CPU s at 10^5 points (kept: the 10^5
#: benchmark rows and every smaller fit are unchanged) and 78 CPU s at 2·10^5, the
#: approximate one 13 CPU s there (98-100 % recall, see the module).
APPROXIMATE_MIN_SAMPLES = 200_000

#: A neighbour index: scikit-learn's exact one or the approximate cell index.
NeighborIndex = NearestNeighbors | CellIndex


@dataclass(frozen=True)
class LocalScales:
    """Widths of the self-tuning kernel ``exp(-||x - y||^2 / (sigma_x sigma_y))``.

    Attributes
    ----------
    sigma : ndarray (n_train,)
        Each training point's distance to its ``n_neighbors``-th other training point.
    n_neighbors : int
        The neighbour rank k of the scales (a new point's sigma is the distance to its k-th
        nearest training point).
    copies : ndarray (n_train,) or None
        Copies of each indexed point when repeated rows were collapsed.
    """

    sigma: np.ndarray
    n_neighbors: int
    #: Training rows each indexed point stands for (its copies, see
    #: :class:`dkernel.rows.RowCopies`); None when every training row is indexed itself.
    copies: np.ndarray | None = None

    def search_size(self, n_graph: int) -> int:
        """Neighbours to search per row: the graph's and one more than the scale rank (a
        training point finds itself first, at distance 0, and does not count)."""
        return max(int(n_graph), int(self.n_neighbors) + 1)

    def query_scales(self, dist: np.ndarray, ind: np.ndarray) -> np.ndarray:
        """sigma of query points from their sorted distances ``dist`` to the training points
        ``ind``; a point that coincides with all of them takes its nearest one's sigma."""
        s = kth_distinct_distance(dist, self.n_neighbors)
        return np.where(s > 0, s, self.sigma[ind[:, 0]])


#: ``KernelDecompositionClustering`` builds its k-NN graph on the distinct rows
#: (:class:`dkernel.rows.RowCopies`) when at least this share of the rows have k or more
#: copies, so that their neighbour lists hold nothing but copies: rounded blobs (75-88 % of
#: rows) went from ARI 0.02-0.23 to 0.58-0.79. Below it the graph of all rows is kept: on
#: Wisconsin (27 % of rows in such cliques) it scored 0.88 over five seeds against 0.72-0.78 on
#: the distinct rows, and the benchmark sets with a few copies keep their results.
COPY_CLIQUE_SHARE = 0.5


def fit_local_scales(dist: np.ndarray, n_neighbors: int) -> LocalScales:
    """Training scales from each training point's sorted distances to its nearest training
    points (itself included, first).

    Points whose listed neighbours all coincide with them (duplicated rows) get the median
    scale of the others (:func:`dkernel.kernels.adaptive.fill_zero_scales`).
    """
    sigma = fill_zero_scales(kth_distinct_distance(dist, n_neighbors), dist.shape[1])
    if not np.all(np.isfinite(sigma)):
        raise InvalidInputError(
            "the self-tuning kernel got non-finite neighbour distances; remove NaN or infinite "
            "values from X."
        )
    return LocalScales(np.asarray(sigma, dtype=np.float64), int(n_neighbors))


def canonical_kernel(kernel: str) -> str:
    """``kernel`` with a former name replaced (``'gaussian'`` -> ``'rbf'``); no warning."""
    return KERNEL_ALIASES.get(kernel, kernel)


def gaussian_log_normalizer(n_features: int, sigma: float) -> float:
    """``log((2 pi)^(-p/2) h^(-p))``, the log normalising constant of Eq. 15."""
    return -0.5 * n_features * np.log(2.0 * np.pi) - n_features * np.log(sigma)


def unit_normalize(X: np.ndarray, owner: str = "cosine kernel") -> np.ndarray:
    """Rows scaled to unit L2 norm; rejects empty (all-zero) rows as Eq. 16 is undefined there."""
    X = np.asarray(X, dtype=np.float64)
    norms = _check_nonzero_rows(X, owner)
    return X / norms[:, None]


def _check_nonzero_rows(X: np.ndarray, owner: str = "cosine kernel") -> np.ndarray:
    """The rows' L2 norms, after refusing all-zero rows (Eq. 16 is undefined there)."""
    norms = np.linalg.norm(np.asarray(X, dtype=np.float64), axis=1)
    if np.any(norms == 0):
        bad = int(np.sum(norms == 0))
        raise InvalidInputError(
            f"{owner}: {bad} rows are all zero; the cosine kernel (Eq. 16) is undefined for empty "
            "vectors. Remove them before fitting (the paper excludes empty documents)."
        )
    return norms


def density_log_kernel(
    Xq: np.ndarray, Xt: np.ndarray, *, kernel: str = "rbf", sigma: float | None = None
) -> np.ndarray:
    """``log K(x_q, x_t)`` for every query/training pair.

    Parameters
    ----------
    Xq : ndarray of shape (n_query, p)
    Xt : ndarray of shape (n_train, p)
    kernel : {'rbf', 'cosine', 'local_scaling'}
        ``'rbf'``: the isotropic Gaussian density kernel of Eq. 15 (normalised, so that
        ``K`` integrates to 1 and likelihoods of different widths compare; formerly
        ``'gaussian'``). ``'cosine'``: Eq. 16 on rows assumed non-negative (count data);
        negative cosines are clipped to 0 (log = -inf). ``'local_scaling'``: the self-tuning
        kernel, ``sigma`` the training scales.
    sigma : float or LocalScales
        The width ``h`` (rbf), or the training scales (local_scaling).

    Returns
    -------
    ndarray of shape (n_query, n_train)

    Notes
    -----
    O(n_query n_train p) time and O(n_query n_train) memory: call it on row blocks.
    """
    kernel = canonical_kernel(kernel)
    if kernel == "rbf":
        D = rbf_log_block(Xq, Xt, sigma)
        D += gaussian_log_normalizer(Xt.shape[1], sigma)
        return D
    if kernel == "cosine":
        _check_nonzero_rows(Xq)
        _check_nonzero_rows(Xt)
        return cosine_log_block(Xq, Xt)
    if kernel == "local_scaling":
        scales = _check_scales(sigma)
        D = np.sqrt(squared_distances(Xq, Xt))
        g = min(scales.search_size(1), D.shape[1])
        part = np.argpartition(D, g - 1, axis=1)[:, :g]
        near = np.take_along_axis(D, part, axis=1)
        order = np.argsort(near, axis=1, kind="stable")
        near = np.take_along_axis(near, order, axis=1)
        sigma_q = scales.query_scales(near, np.take_along_axis(part, order, axis=1))
        return local_scaling_log_kernel(D, sigma_q, scales.sigma)
    raise InvalidInputError(f"kernel must be one of {KERNELS}; got {kernel!r}.")


def _check_scales(sigma) -> LocalScales:
    if not isinstance(sigma, LocalScales):
        raise InvalidInputError(
            "kernel='local_scaling' needs the training scales (LocalScales from "
            f"fit_local_scales) as its width; got {sigma!r}."
        )
    return sigma


def row_normalize_log(logK: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Row-normalised kernel ``K / sum_n K`` (Eq. 4) from ``log K``, computed as a softmax.

    Returns
    -------
    Kcheck : ndarray, same shape; rows sum to 1.
    log_norm : ndarray of shape (n_rows,)
        ``log sum_n K(x, x_n)``.

    Raises
    ------
    InvalidInputError
        When a row has no positive kernel value (a cosine row orthogonal to every training
        point).
    """
    log_norm = logsumexp(logK, axis=1)
    if not np.all(np.isfinite(log_norm)):
        bad = int(np.sum(~np.isfinite(log_norm)))
        raise InvalidInputError(
            f"{bad} points have zero kernel value with every training point, so the row "
            "normalisation (Eq. 4) is undefined. With the cosine kernel this means a point "
            "orthogonal to all training points; use a larger training set or more neighbours."
        )
    Kcheck = np.exp(logK - log_norm[:, None])
    return Kcheck, log_norm


def use_approximate(n_train: int, neighbor_search: str = "auto") -> bool:
    """Whether ``neighbor_search`` (``'auto'``, ``'exact'`` or ``'approximate'``) searches
    ``n_train`` training points approximately (``'auto'``: from
    :data:`APPROXIMATE_MIN_SAMPLES` points on)."""
    if neighbor_search not in NEIGHBOR_SEARCHES:
        raise InvalidInputError(
            f"neighbor_search must be one of {NEIGHBOR_SEARCHES}; got {neighbor_search!r}."
        )
    if neighbor_search == "auto":
        return int(n_train) >= APPROXIMATE_MIN_SAMPLES
    return neighbor_search == "approximate"


def fit_neighbors(
    Xt: np.ndarray,
    *,
    kernel: str = "rbf",
    approximate: bool = False,
    random_state: int | np.random.Generator | None = None,
) -> NeighborIndex:
    """A neighbour index over the training points for the k-NN kernel.

    Exact (default): scikit-learn's; rbf and self-tuning kernels: Euclidean k-d tree/ball
    tree ("auto"); cosine: brute force on unit rows (the nearest in Euclidean distance on the
    unit sphere are the most cosine-similar). ``approximate``: a
    :class:`~dkernel.graphs.approximate_knn.CellIndex` (on the unit rows for cosine) seeded by
    ``random_state``.
    """
    Xt = np.asarray(Xt, dtype=np.float64)
    kernel = canonical_kernel(kernel)
    if kernel == "cosine":
        Xt = unit_normalize(Xt)
    if approximate:
        return CellIndex(random_state=random_state).fit(Xt)
    if kernel == "cosine":
        return NearestNeighbors(algorithm="brute").fit(Xt)
    return NearestNeighbors(algorithm="auto").fit(Xt)


def threaded_kneighbors(
    index: NeighborIndex,
    Xq: np.ndarray,
    n_neighbors: int,
    *,
    order: np.ndarray | None = None,
    block_rows: int = 16_384,
    n_threads: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """``index.kneighbors(Xq, n_neighbors)`` in row blocks on a thread pool.

    ``order`` (a permutation of the rows) is the order in which rows are queried; the result
    is in the order of ``Xq`` either way. Querying the training points in the tree's own
    point order (:func:`spatial_order`) makes consecutive queries visit the same leaves, about
    twice as fast at N = 10^5 in 10-D. Each row's neighbours do not depend on the blocks,
    the order or the threads. A :class:`~dkernel.graphs.approximate_knn.CellIndex` is queried
    in one call (it groups the rows by cell and runs on threads itself).

    Returns
    -------
    dist : ndarray (n_query, n_neighbors)
    ind : ndarray of int64 (n_query, n_neighbors)
    """
    Xq = np.asarray(Xq, dtype=np.float64)
    if isinstance(index, CellIndex):
        return index.kneighbors(Xq, n_neighbors, return_distance=True)
    n = Xq.shape[0]
    rows = np.arange(n) if order is None else np.asarray(order)
    dist = np.empty((n, int(n_neighbors)))
    ind = np.empty((n, int(n_neighbors)), dtype=np.int64)

    def query(start: int) -> None:
        r = rows[start : start + block_rows]
        dist[r], ind[r] = index.kneighbors(Xq[r], n_neighbors=n_neighbors, return_distance=True)

    map_on_cores(query, range(0, n, block_rows), n_threads)  # tree queries release the GIL
    return dist, ind


def spatial_order(X: np.ndarray) -> np.ndarray:
    """A permutation of the rows of ``X`` that keeps nearby points together: the point order
    of a k-d tree over ``X`` (its leaves, left to right).

    Neighbour queries issued in this order visit the same parts of the training tree one
    after the other (cache hits), about twice as fast as in random order at N = 10^5, 10-D.

    Notes
    -----
    O(n log n) time, O(n) memory.
    """
    X = np.asarray(X, dtype=np.float64)
    return np.asarray(KDTree(X, leaf_size=40).get_arrays()[1], dtype=np.int64)


def knn_log_kernel(
    Xq: np.ndarray,
    Xt: np.ndarray | None,
    *,
    kernel: str = "rbf",
    sigma: float | None = None,
    n_neighbors: int,
    index: NeighborIndex | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """k-nearest-neighbour ("K-connected graph") kernel rows: ``K(x, x_n)`` kept for the
    ``n_neighbors`` training points closest to ``x``, zero elsewhere.

    Parameters
    ----------
    Xq : ndarray of shape (n_query, p)
    Xt : ndarray of shape (n_train, p) or None
        Training points (may be None when ``index`` is given).
    kernel, sigma
        As in :func:`density_log_kernel` (``sigma`` is a :class:`LocalScales` for
        ``'local_scaling'``: the query's own scale is measured in the same search).
    n_neighbors : int
        Neighbours kept per row (a training point is its own nearest neighbour).
    index : NearestNeighbors or CellIndex, optional
        From :func:`fit_neighbors` on ``Xt``; built (exact) when not given.

    Returns
    -------
    indices : ndarray of int64, shape (n_query, n_neighbors)
        Training indices, nearest first.
    logK : ndarray of shape (n_query, n_neighbors)
        ``log K`` at those indices.

    Notes
    -----
    Tree search: about O(n_query k log n_train) for low-dimensional data, O(n_query n_train p)
    brute force otherwise (scikit-learn chunks it); approximate cell index: O(n_query
    (n_train / cell_size + n_probe cell_size) p); memory O(n_query k).
    """
    kernel = canonical_kernel(kernel)
    if index is None:
        index = fit_neighbors(Xt, kernel=kernel)
    Xq = np.asarray(Xq, dtype=np.float64)
    p = int(index.n_features_in_)
    Q = unit_normalize(Xq) if kernel == "cosine" else Xq
    if kernel == "local_scaling":
        scales = _check_scales(sigma)
        m = scales.sigma.size
        g = min(scales.search_size(n_neighbors + 1), m)
        dist, ind = index.kneighbors(Q, n_neighbors=g, return_distance=True)
        sigma_q = scales.query_scales(dist, ind)
        # the training lists' rule: points tied with the k-th are kept
        dist, ind, listed = tie_inclusive_neighbors(
            lambda rows, count: index.kneighbors(Q[rows], n_neighbors=count),
            Q.shape[0],
            min(n_neighbors, m),
            m,
            first=(dist, ind),
        )
        logK = local_scaling_log_kernel(dist, sigma_q, scales.sigma[ind])
        if listed is not None:
            logK = np.where(listed, logK, -np.inf)
        return ind.astype(np.int64), logK
    dist, ind = index.kneighbors(Q, n_neighbors=n_neighbors, return_distance=True)
    if kernel == "rbf":
        logK = rbf_log_of_distance(dist, sigma) + gaussian_log_normalizer(p, sigma)
    elif kernel == "cosine":
        logK = cosine_log_of_unit_distance(dist)
    else:
        raise InvalidInputError(f"kernel must be one of {KERNELS}; got {kernel!r}.")
    return ind.astype(np.int64), logK


def knn_to_csr(
    indices: np.ndarray, logK: np.ndarray, n_train: int
) -> tuple[sparse.csr_matrix, np.ndarray]:
    """Row-normalised sparse kernel (CSR, rows sum to 1) and log row sums from k-NN rows."""
    Kcheck, log_norm = row_normalize_log(logK)
    n, k = indices.shape
    indptr = np.arange(0, n * k + 1, k, dtype=np.int64)
    M = sparse.csr_matrix((Kcheck.ravel(), indices.ravel(), indptr), shape=(n, n_train))
    M.sum_duplicates()
    return M, log_norm


#: Transition probability of an edge that joins two components of the k-NN graph
#: (:func:`join_components`): enough to link them in the connectivity graph the
#: factorisation starts from, too little to move the factorisation.
JOIN_PROBABILITY = 1e-6


def join_components(
    Kcheck: sparse.csr_matrix | np.ndarray,
    log_norm: np.ndarray,
    X: np.ndarray,
    index: object,
    pieces: int,
) -> tuple[sparse.csr_matrix | np.ndarray, np.ndarray]:
    """A k-NN kernel of more connected components than ``pieces`` clusters, joined by single
    linkage on the components' closest points (:mod:`dkernel.linalg.components`).

    Otherwise the initialisation's eigenvectors (one per component, eigenvalue 1, any basis)
    and their merging decide which components share a cluster, arbitrarily: four groups of
    one feature, 3 000 points, 16 components, ARI 0.29. Each join is an edge of probability
    :data:`JOIN_PROBABILITY` both ways, its rows renormalised (``log_norm`` grows by their
    new sum's log). Dense kernels and graphs of at most ``pieces`` components are returned
    as they are.
    """
    if not sparse.issparse(Kcheck):
        return Kcheck, log_norm
    count, labels = connected_components(Kcheck, directed=False)
    if count <= pieces:
        return Kcheck, log_norm
    # rows with NaN are at their conditional means under the index's missing-value model
    # (dkernel.graphs.knn.MissingValueIndex, not imported: that module needs Dask)
    fill = getattr(index, "fill", None)
    features, extra = fill(X) if fill is not None else (X, None)
    i, j, _ = single_linkage_links(features, labels, pieces, extra)
    n = Kcheck.shape[0]
    joins = sparse.csr_matrix(
        (np.full(2 * i.size, JOIN_PROBABILITY), (np.r_[i, j], np.r_[j, i])), shape=(n, n)
    )
    joined = (Kcheck + joins).tocsr()
    sums = np.asarray(joined.sum(axis=1)).ravel()
    return (sparse.diags(1.0 / sums) @ joined).tocsr(), log_norm + np.log(sums)
