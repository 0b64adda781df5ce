"""``dkernel.SpectralClustering``: spectral clustering that also predicts new points.

Pipeline: an embedding — by default the exact embedding of a sparse, nearly mutual self-tuning
k-NN graph
(:mod:`dkernel.spectral.sparse`) up to ``EXACT_MAX_SAMPLES`` points and the embedding of a landmark
bipartite graph above (:mod:`dkernel.spectral.bipartite`); with ``n_landmarks``, a kernel or a
kernel embedding :class:`~dkernel.spectral.nystrom.NystromEmbedding` (KPCA, uncentered KPCA, KECA or
normalized NJW, any registered kernel) — then k-means on the embedding — Euclidean for KPCA,
Euclidean on unit-normalized rows for NJW, angular (KECA initialisation, Agersborg 2012, Eq. 4.17
[Agersborg2012]) for KECA. k-means runs on a uniform sample of at most ``kmeans_max_samples`` embedded
points; every point (training or new) is then assigned to its nearest centre block by block, so
fitting N = 10⁶ points never holds more than the (N, k) embedding.
"""

from __future__ import annotations

from numbers import Integral, Real
from typing import Any

import dask.array as da
import numpy as np
from sklearn.base import (
    BaseEstimator,
    ClassNamePrefixFeaturesOutMixin,
    ClusterMixin,
    TransformerMixin,
    _fit_context,
)
from sklearn.utils._param_validation import Interval, StrOptions

from dkernel._random import derive_rng, derive_seed, seed_from_random_state
from dkernel._validation import (
    ParameterConstraintsMixin,
    as_numpy,
    check_2d_array,
    check_is_fitted,
    validate_input,
)
from dkernel.errors import InvalidInputError
from dkernel.graphs.knn import MissingValueIndex
from dkernel.graphs.landmark import DEFAULT_N_LANDMARKS, default_landmark_count
from dkernel.kernels.aliases import resolve_renamed
from dkernel.kernels.registry import (
    NAN_FIX,
    kernel_allows_nan,
    kernel_input_tags,
    neighbor_parameter,
)
from dkernel.kernels.widths import (
    DEFAULT_LOCAL_SCALING_NEIGHBORS,
    PCKID_SIGMA_FRACTION,
)
from dkernel.linalg.kmeans import angular_kmeans, euclidean_kmeans, normalize_rows
from dkernel.model_order import ModelOrder, candidate_range, spectrum_model_order
from dkernel.rows import DistinctRows, few_distinct_rows, take_rows
from dkernel.spectral.bipartite import fit_bipartite_embedding
from dkernel.spectral.normalized import eigengap_hint
from dkernel.spectral.nystrom import DEGREES, EMBEDDINGS, LANDMARK_METHODS, NystromEmbedding
from dkernel.spectral.sparse import GRAPH_NEIGHBORS, ONE_SIDED_WEIGHT, fit_sparse_embedding

ASSIGN = ("kmeans", "angular")
#: How the embedding is computed (see the ``approximation`` parameter).
APPROXIMATIONS = ("auto", "exact", "bipartite", "nystrom")
#: ``approximation='auto'`` with the default kernel: the exact sparse k-NN path up to this many
#: points, the landmark bipartite graph above (see ``docs/choosing_defaults.md``).
EXACT_MAX_SAMPLES = 5_000
DEFAULT_LANDMARKS = DEFAULT_N_LANDMARKS
#: Landmarks linked to each point on the bipartite path (see ``landmark_neighbors``).
LANDMARK_NEIGHBORS = 3


#: Embeddings of the exact sparse path only.
GRAPH_EMBEDDINGS = ("green",)


def _prepare(Z: np.ndarray, embedding: str) -> np.ndarray:
    return normalize_rows(Z) if embedding == "normalized" else Z


def assign_to_centers(
    Z: np.ndarray, centers: np.ndarray, embedding: str, assign: str
) -> np.ndarray:
    """Nearest centre of each embedded row (``assign``: 'kmeans' Euclidean, 'angular' by
    cosine), after the row normalisation of the 'normalized' embedding."""
    Z = _prepare(np.asarray(Z, dtype=np.float64), embedding)
    if assign == "angular":
        return np.argmax(normalize_rows(Z) @ centers.T, axis=1).astype(np.int64)
    d2 = (Z**2).sum(axis=1)[:, None] - 2 * Z @ centers.T + (centers**2).sum(axis=1)[None, :]
    return np.argmin(d2, axis=1).astype(np.int64)


class SpectralClustering(
    ParameterConstraintsMixin,
    ClassNamePrefixFeaturesOutMixin,
    ClusterMixin,
    TransformerMixin,
    BaseEstimator,
):
    """Spectral clustering with Nyström landmarks, on NumPy or Dask input, with ``predict``.

    Parameters
    ----------
    n_clusters : int or 'auto'
        Number of clusters. 'auto': chosen by :mod:`dkernel.model_order`'s timescale-gap rule
        — the largest ratio ``(1 − λ_{k+1}) / (1 − λ_k)`` of consecutive relaxation times of
        the random walk on the graph of the path that runs (the normalized graph's on the exact
        and bipartite paths, the Nyström problem's otherwise) — over k = 2..``max_clusters``,
        from an embedding with ``max_clusters + 1`` components; the embedding is then
        recomputed at the chosen k. The evidence: ``n_clusters_``, ``n_clusters_candidates_``,
        ``n_clusters_scores_`` and ``model_order_`` (with the rule). On the 23 sets of
        ``benchmarks/bench_defaults.py --auto-k`` see ``docs/choosing_defaults.md``.
    max_clusters : int, optional
        Largest k compared by ``n_clusters='auto'``. None (default): derived from the data,
        ``round(√n)`` clipped to [10, 50] (:func:`dkernel.model_order.candidate_range`).
    embedding : {'green', 'normalized', 'kpca', 'uncentered', 'keca'}, optional
        Spectral embedding clustered: random-walk eigenvectors weighted by the PageRank Green's
        function, NJW, centered or uncentered KPCA, or KECA (angular k-means). None (default):
        'normalized' (NJW: the leading eigenvectors of ``D^{-1/2} W D^{-1/2}``, rows scaled to
        unit length, then k-means) on the exact sparse and Nyström paths, and 'green' on the
        bipartite path. On the exact path NJW is 0.008 below 'green' on the 23 mostly synthetic
        sets of ``benchmarks/bench_defaults.py`` (mean ARI 0.814 against 0.822) and above it on the 35
        real sets of ``benchmarks/bench_realdata.py`` (0.446 against 0.440; at least k-means'
        ARI on 21 sets against 20): 'green' coordinates divide by ``√degree``, so a few
        weakly linked rows far out in the embedding take a cluster of their own
        (``docs/choosing_defaults.md``).
    n_components : int, optional
        Embedding dimension; ``n_clusters`` by default.
    kernel : str, callable or Kernel, optional
        Kernel by name (default: local_scaling, self-tuning widths, for the normalized embedding;
        rbf for kpca/keca or when sigma is given). ``'local_scaling'``, ``'knn'``, ``'rbf'``,
        ``'cosine'``, ``'pck'``, ``'precomputed'`` or ``f(X, Y)``. None (default):
        ``'local_scaling'`` for the normalized embedding (self-tuning widths, each point's σ the
        distance to its ``scale_neighbors``-th neighbour; best mean ARI in
        ``benchmarks/bench_defaults.py``, see ``docs/choosing_defaults.md``) and ``'rbf'`` for KPCA
        / KECA, whose leading components need one global width, when ``sigma`` is given, and on the
        Nyström path: the self-tuning kernel is not positive semi-definite, and its Nyström degree
        estimates can turn negative with few landmarks. X with NaN (missing values): ``'pck'``
        models them (PCKID); the default exact graph path (up to ``EXACT_MAX_SAMPLES`` points)
        compares rows by the expected squared distance ``‖x̃ − ỹ‖² + r_x + r_y``
        (missing entries at their conditional means plus their conditional variance, under a
        Gaussian of the training rows fitted by EM, :mod:`dkernel.kernels.missing`, ``dkernel.graphs.knn.MissingValueIndex``), and so
        does the Nyström path with ``'rbf'`` or an adaptive kernel; the bipartite path (the
        default above ``EXACT_MAX_SAMPLES``) and kernels without a distance (``'linear'``, ...)
        refuse them, naming the fixes.
    kernel_params : dict, optional
    scale_neighbors : int
        Rank of the self-tuning widths: each point's σ is the distance to its
        ``scale_neighbors``-th neighbour (the exact path's graph, the ``local_scaling`` kernel;
        the ``knn`` kernel's k unless ``kernel_params`` gives ``n_neighbors``); 7 is the
        self-tuning paper's choice. On the exact path, when X has fewer other distinct rows
        than that (a table of a few values: 909 voters with 7 distinct answers), each σ is
        the distance to the farthest of them, and a ``NumericalWarning`` says so. Formerly
        ``n_neighbors``.
    graph_neighbors : int
        Exact sparse path: distinct neighbours listed per point in the self-tuning graph
        (the graph's size), raised to ``scale_neighbors`` when smaller (so a search over
        ``scale_neighbors`` alone never fails). An edge only one end point lists keeps 5 % of its weight
        (``dkernel.spectral.sparse.ONE_SIDED_WEIGHT``), so the graph is nearly the mutual
        k-NN graph: edges through noise dimensions and hubs, which join clusters, are
        one-sided. 8 gave the best mean ARI on the 23 sets of ``bench_defaults.py`` (0.822;
        7: 0.804, 10: 0.809; the symmetrised 10-NN graph: 0.741) and two moons with three
        noise features 0.982 at 2 000 points (the symmetrised graph: 0.778). A graph of more
        connected components than ``n_clusters`` (data of one feature or low intrinsic
        dimension, a group's tail beyond a gap) is joined by single linkage: the components
        nearest each other by their closest points share a cluster
        (``dkernel.spectral.sparse.join_components``).
    sigma : float, optional
        RBF width; ``sigma_fraction`` × median pairwise distance when None.
    sigma_fraction : float
        Fraction of the median pairwise distance for the RBF rule of thumb. 0.2 (the PCKID
        baseline's local width, ``dkernel.kernels.widths.PCKID_SIGMA_FRACTION``) rather than
        KernelPCAEmbedding's 1/√2: clustering needs the kernel to separate groups, and the
        wider median heuristic merges blobs for KECA.
    approximation : {'auto', 'exact', 'bipartite', 'nystrom'}
        How the embedding is computed. ``'exact'``: the sparse self-tuning k-NN graph of all
        points (a k-NN search and a block eigensolver over N). ``'bipartite'``: each point
        joined to its ``landmark_neighbors`` nearest of ``n_landmarks`` k-means landmarks with
        self-tuning weights, the eigenproblem solved on the landmark side (U-SPEC's transfer
        cut, :mod:`dkernel.spectral.bipartite`): one pass over the data, memory
        O(N K + p²), and ``predict`` through the same links. ``'nystrom'``: the Nyström
        embedding of a kernel (:class:`NystromEmbedding`). ``'auto'`` (default): Nyström when a
        kernel, ``sigma``, ``kernel_params``, a kernel embedding or ``n_landmarks`` is given;
        otherwise exact up to ``EXACT_MAX_SAMPLES`` (5 000) points and bipartite above, where the
        exact path's k-NN graph and eigensolver grow slow and, with a fixed k, lose the gap
        between thin clusters (see ``docs/choosing_defaults.md``). Above 5 000 points, rows
        with few distinct values (integer-valued data: answers on a scale, counts, 8-bit
        pixels in few bands) take the exact path on their distinct rows, each weighted by its
        copies, when there are at most 5 000 of them (``dkernel.rows.few_distinct_rows``
        counts them chunk by chunk, after a look at the first 20 000 rows): the landmarks of
        such data sit on a lattice of values, each row on or near one and linked to neighbours
        chosen among equal distances. Three rounded 4-D blobs scored ARI 0.727 / 0.505 on the
        bipartite path at 2·10⁴ / 2·10⁵ points, 0.840 / 0.837 on their distinct rows (k-means
        0.84, ``benchmarks/bench_repeated_rows.py``; more in ``docs/choosing_defaults.md``).
        Which path ran is in ``approximation_``.
    n_landmarks : int, optional
        Landmarks of the bipartite or Nyström path (every point when m >= n for Nyström);
        ``DEFAULT_LANDMARKS`` (1000, U-SPEC's p) when None. The bipartite path keeps at most
        this many: the k-means centres that gather two or more sample points (an isolated
        point holds no landmark), none repeated. Given with
        ``approximation='auto'``, it selects Nyström.
    landmark_neighbors : int
        Bipartite path: landmarks linked to each point, also the rank of each point's and
        each landmark's self-tuning width. Must be < ``n_landmarks``. 3 rather than U-SPEC's
        5: two moons with three noise features scored 0.971 / 0.988 / 0.988 at 5·10³ / 10⁴ /
        2·10⁴ points against 0.935 / 0.960 / 0.959 (worst of three draws at 6·10³: 0.976
        against 0.917), Statlog 0.562 against 0.513, Samson and Jasper 0.728 / 0.661 against
        0.736 / 0.667; moons, circles, rings, varied, anisotropic and 10-D blobs the same
        (``docs/choosing_defaults.md``). Fewer links make narrower widths and a more local
        graph; with 3 links the graph fell apart at two points per landmark (2 000 points),
        where the exact path runs.
    landmarks : {'kmeans++', 'uniform'}
        How the Nyström landmarks are drawn: k-means++ seeding or uniformly.
    degrees : {'nystrom', 'landmarks'}
        Degree estimate of the normalized embedding (see :class:`NystromEmbedding`).
    assign : {'kmeans', 'angular'}, optional
        Clustering of the embedding; by default 'angular' for KECA and for training data with
        NaN on the exact path (rows missing many entries are weakly attached and their long
        random-walk coordinates drew k-means centres of their own: digits with a 4×4 hole
        0.21 mean ARI with 'kmeans', 0.46 with 'angular', ``benchmarks/bench_missing.py``),
        'kmeans' otherwise.
    n_init : int
        k-means restarts (best by cost).
    kmeans_max_samples : int
        k-means is fitted on at most this many embedded points (uniform sample). Formerly
        ``kmeans_sample``.
    block_rows : int, optional
        Rows per kernel sub-block.
    random_state : int, optional
    n_neighbors : int, optional
        Deprecated: the former name of ``scale_neighbors`` (a ``FutureWarning``), kept for one
        release; ``n_neighbors`` is the size of a k-NN graph elsewhere (scikit-learn's meaning).
    kmeans_sample : int, optional
        Deprecated: the former name of ``kmeans_max_samples`` (a ``FutureWarning``), kept for
        one release.

    Attributes
    ----------
    labels_ : ndarray (n,)
    cluster_centers_ : ndarray (n_clusters, n_components)
        In the clustered space (unit-norm rows for NJW / angular).
    embedding_ : ndarray or dask array (n, n_components)
    embedding_method_ : str
        The embedding used (``embedding`` with its default resolved).
    assign_ : str
        The clustering of the embedding (``assign`` with its default resolved).
    eigenvalues_ : ndarray
    eigengap_hint_ : int or None
        Number of clusters suggested by the eigengap (normalized embedding).
    n_clusters_ : int
        The number of clusters (``n_clusters``, or what 'auto' chose).
    n_clusters_candidates_ : ndarray of int or None
        The k compared by ``n_clusters='auto'`` (None for an integer ``n_clusters``).
    n_clusters_scores_ : ndarray or None
        The model-order rule's score of every candidate (the highest wins).
    model_order_ : dkernel.model_order.ModelOrder or None
        The whole evidence of 'auto': candidates, scores, rule (``model_order_.rule``).
    spectrum_ : ndarray
        Leading eigenvalues of the path's eigenproblem, descending (up to
        ``max_clusters + 1`` of them with 'auto').
    approximation_ : {'exact', 'bipartite', 'nystrom'}
        The path that ran.
    nystrom_ : NystromEmbedding or None
        The Nyström model (None on the graph paths).
    graph_model_ : SparseSpectralModel, BipartiteSpectralModel or None
        The sparse k-NN graph model or the landmark bipartite graph model (None on the
        Nyström path).
    landmark_indices_ : ndarray or None
        Nyström landmarks (every training point on the exact sparse path, or the first copy of
        each distinct row when it ran on those; None on the bipartite path, whose landmarks
        are k-means centres, ``graph_model_.graph.landmarks``).

    See Also
    --------
    dkernel.NystromEmbedding : The kernel embedding of the Nyström path, without clustering.
    dkernel.PCKSpectralClustering : Spectral clustering on the probabilistic cluster kernel.
    dkernel.KernelDecompositionClustering : Probabilistic clusters from the same kind of graph.
    dkernel.MSSC : Spectral clustering of mean-shift partitions, for images.
    sklearn.cluster.SpectralClustering : scikit-learn's dense spectral clustering (no predict).

    Notes
    -----
    Bipartite path: the landmark k-means on ``10 p`` points, one pass of O(N p d) distance
    blocks (float32 GEMM) accumulating the p × p problem, one pass embedding every point.
    Exact sparse path: a k-NN search (tree in low dimension, chunked brute force above),
    O(n · 3k) memory and a block eigensolver. Nyström: the Nyström passes, O(n m (p + r)) each, plus k-means on ≤ ``kmeans_max_samples`` rows and
    one assignment pass O(n k^2). Memory: O(block_rows · m + m^2) per worker and the (n, k)
    embedding; never n × n.

    References
    ----------
    - Ng, Jordan & Weiss (2002), "On spectral clustering: analysis and an algorithm", *NIPS 14*
      [Ng2002]: the normalized embedding.
    - Zelnik-Manor & Perona (2005), "Self-tuning spectral clustering", *NIPS 17*
      [ZelnikManor2005]: the local-scaling weights of the graphs.
    - Huang et al. (2020), "Ultra-scalable spectral clustering and ensemble clustering", *IEEE
      TKDE* 32(6) [Huang2020] (U-SPEC): the landmark bipartite path, solved by the transfer cut
      of Li, Wu & Chang (2012) [Li2012].
    - Williams & Seeger (2001) [Williams2001]: the Nyström path; Bengio et al. (2004)
      [Bengio2004]: out-of-sample extension of the exact path.
    - Løkse (2020), Paper II, §3 [Lokse2020]: the personalized-PageRank Green's function that
      weights the ``'green'`` embedding.

    Examples
    --------
    >>> from sklearn.datasets import make_blobs
    >>> X, y = make_blobs(500, centers=3, random_state=0)
    >>> sc = SpectralClustering(3, random_state=0).fit(X)
    >>> sc.predict(X[:5]).shape
    (5,)
    """

    _parameter_constraints: dict = {
        "n_clusters": [Interval(Integral, 1, None, closed="left"), StrOptions({"auto"})],
        "max_clusters": [Interval(Integral, 2, None, closed="left"), None],
        "embedding": [StrOptions(set(EMBEDDINGS + GRAPH_EMBEDDINGS)), None],
        "n_components": [Interval(Integral, 1, None, closed="left"), None],
        # names are checked by make_kernel, whose message lists the registered ones
        "kernel": [str, callable, None],
        "kernel_params": [dict, None],
        "scale_neighbors": [Interval(Integral, 1, None, closed="left")],
        "graph_neighbors": [Interval(Integral, 1, None, closed="left")],
        "sigma": [Interval(Real, 0, None, closed="neither"), None],
        "sigma_fraction": [Interval(Real, 0, None, closed="neither")],
        "approximation": [StrOptions(set(APPROXIMATIONS))],
        "n_landmarks": [Interval(Integral, 1, None, closed="left"), None],
        "landmark_neighbors": [Interval(Integral, 1, None, closed="left")],
        "landmarks": [StrOptions(set(LANDMARK_METHODS))],
        "degrees": [StrOptions(set(DEGREES))],
        "assign": [StrOptions(set(ASSIGN)), None],
        "n_init": [Interval(Integral, 1, None, closed="left")],
        "kmeans_max_samples": [Interval(Integral, 2, None, closed="left")],
        "block_rows": [Interval(Integral, 1, None, closed="left"), None],
        "random_state": ["random_state", np.random.Generator],
        # the former name of scale_neighbors (dkernel.kernels.aliases.RENAMED_PARAMETERS)
        "n_neighbors": [Interval(Integral, 1, None, closed="left"), None],
        # the former name of kmeans_max_samples
        "kmeans_sample": [Interval(Integral, 2, None, closed="left"), None],
    }

    def __init__(
        self,
        n_clusters: int | str = 2,
        *,
        max_clusters: int | None = None,
        embedding: str | None = None,
        n_components: int | None = None,
        kernel: Any = None,
        kernel_params: dict | None = None,
        scale_neighbors: int = DEFAULT_LOCAL_SCALING_NEIGHBORS,
        graph_neighbors: int = GRAPH_NEIGHBORS,
        sigma: float | None = None,
        sigma_fraction: float = PCKID_SIGMA_FRACTION,
        approximation: str = "auto",
        n_landmarks: int | None = None,
        landmark_neighbors: int = LANDMARK_NEIGHBORS,
        landmarks: str = "kmeans++",
        degrees: str = "nystrom",
        assign: str | None = None,
        n_init: int = 10,
        kmeans_max_samples: int = 100_000,
        block_rows: int | None = None,
        random_state: int | None = None,
        n_neighbors: int | None = None,
        kmeans_sample: int | None = None,
    ) -> None:
        self.n_clusters = n_clusters
        self.max_clusters = max_clusters
        self.embedding = embedding
        self.n_components = n_components
        self.kernel = kernel
        self.kernel_params = kernel_params
        self.scale_neighbors = scale_neighbors
        self.graph_neighbors = graph_neighbors
        self.sigma = sigma
        self.sigma_fraction = sigma_fraction
        self.approximation = approximation
        self.n_landmarks = n_landmarks
        self.landmark_neighbors = landmark_neighbors
        self.landmarks = landmarks
        self.degrees = degrees
        self.assign = assign
        self.n_init = n_init
        self.kmeans_max_samples = kmeans_max_samples
        self.block_rows = block_rows
        self.random_state = random_state
        self.n_neighbors = n_neighbors
        self.kmeans_sample = kmeans_sample

    def _scale_neighbors(self) -> int:
        """``scale_neighbors``, or its former name ``n_neighbors`` when given (warns)."""
        return int(resolve_renamed(self, "scale_neighbors"))

    def _assign_mode(self) -> str:
        """``assign`` resolved: 'angular' for KECA and for a graph of rows with NaN, whose
        weakly attached rows (many entries missing) have long random-walk coordinates that
        plain k-means gives clusters of their own; 'kmeans' otherwise."""
        if self.assign is not None:
            return self.assign
        model = getattr(self, "graph_model_", None)
        incomplete = model is not None and isinstance(
            getattr(model, "index", None), MissingValueIndex
        )
        return "angular" if self.embedding == "keca" or incomplete else "kmeans"

    def __sklearn_tags__(self):
        tags = kernel_input_tags(super().__sklearn_tags__(), self.kernel, nan=True)
        tags.input_tags.allow_nan = self._takes_nan()
        return tags

    def _takes_nan(self) -> bool:
        """Whether X may hold NaN: the exact graph path (expected squared distances,
        ``dkernel.graphs.knn.MissingValueIndex``), which the default runs up to
        ``EXACT_MAX_SAMPLES`` points, and the Nyström path with a kernel that takes them
        (``'pck'``, the distance kernels of :mod:`dkernel.kernels.missing`); not the bipartite
        path."""
        if self.kernel is not None:
            return kernel_allows_nan(self.kernel)
        return self.approximation != "bipartite"

    def _path_takes_nan(self, path: str, n: int) -> bool:
        """Whether the fit of ``n`` rows on ``path`` models NaN once the input has been let
        through (:meth:`_takes_nan`): the exact path, or Nyström with a kernel that does."""
        return path == "exact" or (
            path == "nystrom" and kernel_allows_nan(self._resolved_kernel(n))
        )

    def _refuse_nan(self, X: Any, n: int) -> None:
        """After the path is chosen: the bipartite path, or a kernel that cannot take NaN,
        refuses them (in-memory input; Dask input is checked by shape only), naming the
        fixes, before any work."""
        if self._path_takes_nan(self.approximation_, n):
            return
        if isinstance(X, da.Array):
            return
        fix = (
            f"The exact k-NN graph path takes them (expected distances), which "
            f"approximation='auto' runs up to {EXACT_MAX_SAMPLES} points; this fit runs "
            f"approximation={self.approximation_!r}. " + NAN_FIX
        )
        check_2d_array(X, type(self).__name__, allow_nan=False, nan_fix=fix)

    @property
    def _n_features_out(self) -> int:
        """Embedding dimension (names of ``get_feature_names_out``)."""
        return int(self.cluster_centers_.shape[1])

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X: Any, y: Any = None) -> SpectralClustering:
        """Embed with Nyström, cluster a sample of the embedding, label every point.

        Parameters
        ----------
        X : ndarray or dask array (n, p)
        y : ignored
        """
        Z, seed = self._fit_embedding_only(X)
        if isinstance(Z, da.Array) and Z.shape[0] <= 5_000_000:
            Z = Z.persist()  # read by the k-means sample and the labels: embedded once
        self._fit_centers(Z, seed)
        self.labels_ = as_numpy(self._assign(Z))
        return self

    @_fit_context(prefer_skip_nested_validation=True)
    def _fit_embedding_only(self, X: Any) -> tuple[Any, int | None]:
        """The first half of :meth:`fit`: the spectral model and the embedding of ``X`` (lazy
        and not persisted for Dask input; ``embedding_``), with the seed the second half,
        :meth:`_fit_centers`, takes. A job writes the embedding chunk by chunk in between and
        gives the second half the stored embedding, so that the data are embedded once."""
        owner = type(self).__name__
        X = validate_input(
            self, X, reset=True, min_samples=2, allow_nan=self._takes_nan(), nan_fix=NAN_FIX
        )
        n = int(X.shape[0])
        if self.n_clusters != "auto" and self.n_clusters > n:
            raise InvalidInputError(
                f"The 'n_clusters' parameter of {owner} must be <= n_samples ({n}). "
                f"Got {self.n_clusters} instead."
            )
        seed = seed_from_random_state(self.random_state)
        self.approximation_ = self._approximation(n)
        self._refuse_nan(X, n)
        self._distinct_rows = self._few_distinct_rows(X)
        if self._distinct_rows is not None:
            self.approximation_ = "exact"
        self.model_order_ = None
        self.n_clusters_candidates_ = self.n_clusters_scores_ = None
        if self.n_clusters == "auto":
            # the spectrum of an embedding with max_clusters (+ 1) components, then the
            # embedding at the chosen k: the models keep no more vectors than they use
            candidates = candidate_range(n, self.max_clusters, owner=f"{owner}(n_clusters='auto')")
            top = min(int(candidates[-1]) + 1, self._graph_points(n) - 1)
            self._fit_embedding(X, n, top, top, seed)
            candidates = candidates[candidates < self.spectrum_.size]
            self._set_model_order(spectrum_model_order(self.spectrum_, candidates))
        else:
            self.n_clusters_ = int(self.n_clusters)
        n_components = self.n_components or self.n_clusters_
        self.embedding_ = self._fit_embedding(X, n, n_components, self.n_clusters_, seed)
        return self.embedding_, seed

    def _fit_centers(self, Z: Any, seed: int | None) -> SpectralClustering:
        """The second half of :meth:`fit`: k-means on (a sample of) the embedding ``Z`` (the
        first half's, or the same values read back from a store), which becomes
        ``embedding_``."""
        n = int(Z.shape[0])
        size = int(resolve_renamed(self, "kmeans_max_samples"))
        if n > size:
            idx = np.sort(derive_rng(seed, "kmeans-sample").choice(n, size, False))
            Zs = take_rows(Z, idx)
        else:
            Zs = as_numpy(Z)
        Zs = _prepare(Zs, self.embedding_method_)
        km_seed = derive_seed(seed, "kmeans")
        self.assign_ = self._assign_mode()
        if self.assign_ == "angular":
            _, centers, _ = angular_kmeans(
                Zs, self.n_clusters_, n_init=self.n_init, random_state=km_seed
            )
        else:
            _, centers, _ = euclidean_kmeans(
                Zs, self.n_clusters_, n_init=self.n_init, random_state=km_seed
            )
        self.cluster_centers_ = centers
        self.embedding_ = Z
        return self

    def _set_model_order(self, order: ModelOrder) -> None:
        self.model_order_ = order
        self.n_clusters_ = order.n_clusters
        self.n_clusters_candidates_ = order.candidates
        self.n_clusters_scores_ = order.scores

    def _fit_embedding(self, X: Any, n: int, n_components: int, n_clusters: int, seed: Any) -> Any:
        """The embedding of the chosen path; sets the model and spectrum attributes."""
        owner = type(self).__name__
        self.graph_model_ = None
        self.nystrom_ = None
        self.sigma_ = None
        if self.approximation_ == "exact":
            k = self._scale_neighbors()
            if k >= n:
                raise InvalidInputError(
                    f"The 'scale_neighbors' parameter of {owner} must be < n_samples ({n}). "
                    f"Got {k} instead."
                )
            self.embedding_method_ = self.embedding or "normalized"
            distinct = self._distinct_rows
            Z, self.graph_model_ = fit_sparse_embedding(
                X,
                n_components,
                n_neighbors=k,
                graph_neighbors=min(max(self.graph_neighbors, k), self._graph_points(n) - 1),
                seed=seed,
                coordinates="green" if self.embedding_method_ == "green" else "njw",
                one_sided_weight=ONE_SIDED_WEIGHT,
                distinct=distinct,
                neighbors_name="scale_neighbors",
                max_pieces=n_clusters,
            )
            self.eigenvalues_ = self.graph_model_.eigenvalues
            self.eigengap_hint_ = eigengap_hint(self.graph_model_.spectrum)
            self.spectrum_ = self.graph_model_.spectrum
            self.landmark_indices_ = np.arange(n) if distinct is None else distinct.first
        elif self.approximation_ == "bipartite":
            self.embedding_method_ = "green"
            Z, self.graph_model_ = fit_bipartite_embedding(
                X,
                n_components,
                n_landmarks=self.n_landmarks or default_landmark_count(n),
                n_neighbors=self.landmark_neighbors,
                n_clusters=n_clusters,
                seed=seed,
            )
            self.eigenvalues_ = self.graph_model_.eigenvalues
            self.eigengap_hint_ = eigengap_hint(self.graph_model_.spectrum)
            self.spectrum_ = self.graph_model_.spectrum
            self.landmark_indices_ = None
        else:
            self.embedding_method_ = self.embedding or "normalized"
            self.nystrom_ = NystromEmbedding(
                n_components,
                embedding=self.embedding_method_,
                kernel=self._resolved_kernel(n),
                kernel_params=self._kernel_params(n),
                sigma=self.sigma,
                sigma_fraction=self.sigma_fraction,
                n_landmarks=self.n_landmarks or DEFAULT_LANDMARKS,
                landmarks=self.landmarks,
                degrees=self.degrees,
                block_rows=self.block_rows,
                random_state=seed,
            ).fit(X)
            Z = self.nystrom_.embedding_
            self.eigenvalues_ = self.nystrom_.eigenvalues_
            self.eigengap_hint_ = self.nystrom_.eigengap_hint_
            self.spectrum_ = self.nystrom_.all_eigenvalues_
            self.landmark_indices_ = self.nystrom_.landmark_indices_
            self.sigma_ = self.nystrom_.kernel_.params.get("sigma")
        self.spectrum_ = np.asarray(self.spectrum_, dtype=np.float64)
        return Z

    def _few_distinct_rows(self, X: Any) -> DistinctRows | None:
        """X's distinct rows when 'auto' chose the bipartite path for their number but they
        are few enough for the exact one (and more than its graph and embedding need)."""
        if self.approximation != "auto" or self.approximation_ != "bipartite":
            return None
        # as many points as the exact path takes anyway, each a node weighted by its copies
        distinct = few_distinct_rows(X, EXACT_MAX_SAMPLES)
        if distinct is None:
            return None
        needed = max(self._scale_neighbors(), GRAPH_NEIGHBORS)
        if self.n_clusters != "auto":
            needed = max(needed, self.n_components or self.n_clusters)
        return distinct if distinct.points.shape[0] > needed + 1 else None

    def _graph_points(self, n: int) -> int:
        """Points of the exact path's graph: the rows, or their distinct values."""
        distinct = self._distinct_rows
        return n if distinct is None else int(distinct.points.shape[0])

    def _resolved_kernel(self, n: int) -> Any:
        if self.kernel is not None:
            return self.kernel
        if self.sigma is not None or self.n_landmarks is not None or n > EXACT_MAX_SAMPLES:
            return "rbf"
        if self.embedding not in (None, "normalized", *GRAPH_EMBEDDINGS):
            return "rbf"
        return "local_scaling"

    def _kernel_requested(self) -> bool:
        """A kernel, a width or a kernel embedding was asked for: only Nyström has them."""
        return (
            (self.kernel is not None and self.kernel != "local_scaling")
            or self.sigma is not None
            or bool(self.kernel_params)
            or self.embedding not in (None, "normalized", *GRAPH_EMBEDDINGS)
        )

    def _approximation(self, n: int) -> str:
        """The path that runs on ``n`` points, checked against the other parameters."""
        owner = type(self).__name__
        chosen = self.approximation
        if chosen == "auto":
            if self._kernel_requested() or self.n_landmarks is not None:
                chosen = "nystrom"
            elif n <= EXACT_MAX_SAMPLES:
                chosen = "exact"
            else:
                chosen = "bipartite" if self.embedding in (None, "green") else "nystrom"
        if chosen in ("exact", "bipartite") and self._kernel_requested():
            raise InvalidInputError(
                f"approximation={chosen!r} of {owner} builds its own self-tuning graph, so it "
                "takes no kernel, sigma, kernel_params or kernel embedding; use "
                "approximation='nystrom' for those."
            )
        if chosen == "bipartite" and self.embedding == "normalized":
            raise InvalidInputError(
                f"approximation='bipartite' of {owner} gives the 'green' embedding; use "
                "embedding=None (or 'green'), or approximation='nystrom' for 'normalized'."
            )
        if chosen == "nystrom" and self.embedding in GRAPH_EMBEDDINGS:
            raise InvalidInputError(
                f"embedding={self.embedding!r} exists on the graph paths only "
                "(approximation='exact' or 'bipartite'); use embedding='normalized' with "
                "Nyström."
            )
        return chosen

    def _kernel_params(self, n: int) -> dict | None:
        kernel = self._resolved_kernel(n)
        if kernel in ("local_scaling", "knn"):
            # the widths' rank; the knn kernel's graph size unless kernel_params give one
            given = self.kernel_params or {}
            if kernel == "local_scaling" and "n_neighbors" in given:
                return dict(given)  # the kernel's former name wins (it warns)
            return {neighbor_parameter(kernel): self._scale_neighbors(), **given}
        return self.kernel_params

    def _assign(self, Z: Any) -> Any:
        mode = self.assign_
        if isinstance(Z, da.Array):
            return Z.map_blocks(
                assign_to_centers,
                self.cluster_centers_,
                self.embedding_method_,
                mode,
                drop_axis=1,
                dtype=np.int64,
                meta=np.empty((0,), dtype=np.int64),
            )
        return assign_to_centers(Z, self.cluster_centers_, self.embedding_method_, mode)

    def transform(self, X: Any) -> Any:
        """Out-of-sample spectral embedding of new points (lazy for Dask input)."""
        check_is_fitted(self, "embedding_")
        # the fitted kernel or graph refuses NaN it has no missing-value model for
        takes_nan = self.approximation_ != "bipartite" and (
            self.approximation_ == "exact"
            or kernel_allows_nan(self.kernel)
            or kernel_allows_nan(self.nystrom_.kernel_.name)
        )
        return self._embed(
            validate_input(self, X, reset=False, allow_nan=takes_nan, nan_fix=NAN_FIX)
        )

    def _embed(self, X: Any) -> Any:
        """Out-of-sample embedding of validated input."""
        if self.graph_model_ is not None:
            return self.graph_model_.transform(X)
        return self.nystrom_.transform(X)

    def predict(self, X: Any) -> Any:
        """Cluster of new points: embed with the Nyström formula, nearest centre.

        Returns a NumPy array for NumPy input and a lazy Dask array for Dask input.
        """
        check_is_fitted(self, "cluster_centers_")
        return self._assign(self.transform(X))

    def fit_predict(self, X: Any, y: Any = None, **kwargs: Any) -> np.ndarray:
        """Fit and return ``labels_``."""
        return self.fit(X).labels_
