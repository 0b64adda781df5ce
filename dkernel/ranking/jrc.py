"""Joint ranking and clustering (Løkse 2014, ch. 8, Alg. 8–10 [Lokse2014]; equation and section
numbers below are the thesis').

With the β-adjusted Laplacian ``L_β = βD + (D − K)`` (β = α/(1−α)) and its eigenpairs in
ascending order, the embedding ``Z_β = √(β Vol) E Λ^{-1/2}`` satisfies
``π(α, s) = D Z_β Z_β^T s / Vol`` with all eigenvectors (Eq. 8.11): the PPR is a projection on
the seed-weighted mean ``m_s = Z_β^T s``. Clustering ``Z_β`` (its first ``n_components``
columns) with k-means and seeding uniformly over a cluster is ranking by projection on that
cluster's centroid (§8.3.2).

The same Green's function factors through the normalized kernel ``𝒦 = D^{-1/2} K D^{-1/2}``
(Løkse 2020, Paper II [Lokse2020]): ``L_β^{-1} = D^{-1/2} ((1+β)I − 𝒦)^{-1} D^{-1/2}``, so
``Z_β = √(β Vol) D^{-1/2} E* ((1+β)I − Λ*)^{-1/2}`` with the eigenpairs ``(λ*, E*)`` of 𝒦 has
the same ``Z_β Z_β^T`` when every eigenvector is kept. The two differ in what a truncation keeps.
The smallest eigenpairs of the unnormalized ``L_β`` localise on the lowest-degree points (the
Rayleigh quotient of a point indicator is ``(1+β) d_i − K_ii``), which is why the RBF embedding
puts a few points along the axes ([Lokse2014], Fig. 10.9) and k-means then returns singleton
clusters (598 / 1 / 1 on three blobs). The largest eigenpairs of 𝒦 are the random-walk eigenvectors
that spectral clustering uses (the first is constant: column 0 of ``Z_β`` is 1), and they
carry the PPR operator's largest part; that truncation is the default (``embedding='normalized'``).

Out of sample, a new point's embedding is the Nyström extension of the kept eigenvectors,
``u(x) = κ(x, X) U / (d̂(x) λ*)`` (normalized) or ``e(x) = κ(x, X) E / ((1+β) d̂(x) − λ)``
(Laplacian), exact for a training point; its score for a seed is ``d̂(x) z(x)·m_s / Vol``.
"""

from __future__ import annotations

from numbers import Integral, Real
from typing import Any

import numpy as np
from scipy import linalg
from sklearn.base import BaseEstimator, ClusterMixin, TransformerMixin, _fit_context
from sklearn.utils._param_validation import Interval, StrOptions

from dkernel._random import derive_seed, seed_from_random_state
from dkernel._validation import (
    ParameterConstraintsMixin,
    ParameterError,
    check_is_fitted,
    is_dask_array,
    resolve_n_components,
)
from dkernel.errors import (
    DegenerateClusterWarning,
    InvalidInputError,
    ResourceLimitError,
    warn_caller,
)
from dkernel.kernels.widths import DEFAULT_KNN_NEIGHBORS, THESIS_SIGMA_FRACTION
from dkernel.linalg import euclidean_kmeans
from dkernel.linalg.copies import repeated_rows
from dkernel.linalg.eigen import fix_signs
from dkernel.model_order import candidate_range, spectrum_model_order
from dkernel.ranking.kernelmap import ADAPTIVE, KERNEL_NAMES, resolve_kernel
from dkernel.ranking.kppr import (
    DENSE_LIMIT_BYTES,
    KERNEL_CONSTRAINT,
    check_n_neighbors,
    kernel_neighbors,
    ranking_tags,
    top_normalized_eigenpairs,
    validate_fit_X,
    validate_new_lazy,
    validate_new_X,
)
from dkernel.ranking.ppr import degrees, normalized_kernel, restart_beta
from dkernel.ranking.seeds import seed_vector
from dkernel.ranking.sparse_graph import (
    jrc_copies_embedding,
    jrc_sparse_embedding,
    sparse_radius_kernel,
)

EMBEDDINGS = ("normalized", "laplacian")
#: A cluster of at most this fraction of an even share (N / n_clusters), or of one point,
#: raises ``DegenerateClusterWarning``.
FRAGMENT_SHARE = 0.01


def _green_inputs(
    K: np.ndarray, alpha: float, n_components: int | None, owner: str
) -> tuple[np.ndarray, float, np.ndarray, int]:
    """``K`` as float64, ``β`` of the restart probability, the degrees and the pairs kept."""
    K = np.asarray(K, dtype=np.float64)
    beta = restart_beta(alpha, owner)
    d = degrees(K)
    k = d.size if n_components is None else min(int(n_components), d.size)
    return K, beta, d, k


def jrc_embedding(
    K: np.ndarray, alpha: float, n_components: int | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """JRC embedding ([Lokse2014], Alg. 8): ``Z_β = √(β Vol) E Λ^{-1/2}``, smallest pairs of L_β.

    Returns
    -------
    Z : (N, k), eigenvalues : (k,) ascending, d : (N,)

    Notes
    -----
    O(N^3) time (O(N^2 k) with a subset eigen-solver), O(N^2) memory.
    """
    K, beta, d, k = _green_inputs(K, alpha, n_components, "jrc_embedding")
    L = -K
    L[np.diag_indices_from(L)] += (1.0 + beta) * d
    L = 0.5 * (L + L.T)
    values, vectors = linalg.eigh(L, subset_by_index=[0, k - 1], check_finite=False)
    Z = np.sqrt(beta * d.sum()) * fix_signs(vectors) / np.sqrt(values)[None, :]
    return Z, values, d


def jrc_normalized_embedding(
    K: np.ndarray, alpha: float, n_components: int | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``Z_β = √(β Vol) D^{-1/2} E* ((1+β)I − Λ*)^{-1/2}``, largest eigenpairs of 𝒦 = D^{-1/2}KD^{-1/2}.

    Parameters
    ----------
    K : ndarray (N, N)
        Symmetric non-negative affinity matrix.
    alpha : float
        Restart probability, 0 < α < 1.
    n_components : int, optional
        Eigenpairs kept (all when None).

    Returns
    -------
    Z : (N, k), eigenvalues : (k,) descending λ* of 𝒦, U : (N, k) random-walk eigenvectors
    ``D^{-1/2} E*`` (``K U = D U Λ*``), d : (N,)

    Notes
    -----
    With every eigenpair ``Z Z^T = β Vol L_β^{-1}``, the same Gram matrix as
    :func:`jrc_embedding`, so :meth:`JointRankingClustering.rank` is the exact PPR.
    O(N^3) time (O(N^2 k) with a subset eigen-solver), O(N^2) memory.
    """
    K, beta, d, k = _green_inputs(K, alpha, n_components, "jrc_normalized_embedding")
    Kn, r = normalized_kernel(K, d)
    values, vectors = top_normalized_eigenpairs(Kn, d, k)
    U = vectors * r[:, None]
    Z = np.sqrt(beta * d.sum()) * U / np.sqrt(1.0 + beta - values)[None, :]
    return Z, values, U, d


def _normalized_spectrum(K: np.ndarray, n_values: int) -> np.ndarray:
    """The ``n_values`` largest eigenvalues of ``D^{-1/2} K D^{-1/2}``, descending (λ₁ = 1).

    Notes
    -----
    O(N^2 k) with a subset eigen-solver, one more N × N array.
    """
    K = np.asarray(K, dtype=np.float64)
    d = degrees(K)
    Kn, _ = normalized_kernel(K, d)
    values, _ = top_normalized_eigenpairs(Kn, d, n_values)
    return values


class JointRankingClustering(
    ParameterConstraintsMixin, ClusterMixin, TransformerMixin, BaseEstimator
):
    """Joint ranking and clustering on the Green's-kernel embedding ([Lokse2014], Alg. 8–10).

    Defaults chosen on 23 data sets (standardised, only ``n_clusters`` given): half-weighted 10-NN
    graph + normalized truncation + ``n_clusters`` components, mean ARI 0.765 (0.763–0.765 over
    random_state 0–2) against 0.095 for the RBF / Laplacian / 3-component setting of [Lokse2014],
    0.752 for scikit-learn's k-NN spectral clustering and 0.581 for k-means
    (``docs/choosing_defaults.md``).

    Parameters
    ----------
    n_clusters : int or 'auto', default=3
        Number of k-means clusters. 'auto': the number of eigenvalues of the transition matrix
        ``P = D^{-1} K`` (those of ``D^{-1/2} K D^{-1/2}``) close to 1 with a gap to the next
        ([Lokse2014], ch. 10: one slowly mixing set of the walk per cluster), scored by
        :mod:`dkernel.model_order`'s timescale-gap rule — the largest ratio
        ``(1 − λ_{k+1}) / (1 − λ_k)`` — over k = 2 .. ``max_clusters``, from the
        ``max_clusters + 1`` leading eigenvalues. The evidence: ``n_clusters_``,
        ``n_clusters_candidates_``, ``n_clusters_scores_``, ``model_order_``.
    max_clusters : int, optional
        Largest k compared by ``n_clusters='auto'``. None (default): derived from the data,
        ``round(√N)`` clipped to [10, 50] and at most N − 1
        (:func:`dkernel.model_order.candidate_range`).
    kernel : {'knn_mean', 'knn', 'local_scaling', 'landmark', 'rbf', 'precomputed', 'pck'}, \
callable or transformer, default='knn_mean'
        Affinity kernel (knn_mean, knn and local_scaling adapt to each point's neighbours).
        'knn_mean': 1 between mutual ``n_neighbors``-nearest neighbours, ½ one way, 0 otherwise
        (``dkernel.ranking.affinity``; scikit-learn's k-NN affinity). 'knn' and
        'local_scaling': the registry's adaptive kernels. Every kernel but 'precomputed' is a
        fixed function κ(x, y), so :meth:`transform`, :meth:`predict` and
        :meth:`score_samples` extend to new points. Others as for
        :class:`~dkernel.KernelPersonalizedPageRank`; the thesis ([Lokse2014], §10.2) uses 'pck' or
        'rbf' with ``embedding='laplacian'`` and ``n_components=3``.
        X with NaN (missing values): ``'pck'`` models them (PCKID); ``'rbf'`` and the adaptive
        kernels fitted on data with NaN compare rows by their expected squared distance ``‖x̃ −
        ỹ‖² + r_x + r_y`` (missing entries at their conditional means given the observed ones,
        plus their conditional variance, under a Gaussian of the training rows fitted by EM,
        :mod:`dkernel.kernels.missing`), and new rows with the same model; every
        other kernel refuses them. So the default 'knn_mean' takes NaN.
    n_neighbors : int, default=10
        k of the k-NN graph kernels ('knn_mean', 'knn'): the neighbours joined to each point
        (scikit-learn's k-NN spectral clustering uses 10 counting the point itself).
    scale_neighbors : int, default=10
        Rank of the self-tuning widths of ``kernel='local_scaling'`` (each point's σ the
        distance to its ``scale_neighbors``-th neighbour). 10, the rank this kernel had here
        when ``n_neighbors`` set it (formerly ``n_neighbors`` with 'local_scaling').
    kernel_params : dict, optional
        ``n_reference`` for the adaptive kernels (reference sample for the neighbour radii;
        beyond the dense limit every training row unless given, so the sparse graph keeps
        ``n_neighbors`` per row at any N); ``n_landmarks`` and ``n_neighbors`` for 'landmark'
        (as for :class:`~dkernel.KernelPersonalizedPageRank`).
    alpha : float, default=0.15
        Restart probability of the random walk ([Lokse2014], §9.1.2, uses 0.15; it only
        reweights the kept components, and 0.01 to 0.9 move the suite's mean ARI by under 0.01).
    embedding : {'normalized', 'laplacian'}, default='normalized'
        Which eigenpairs the truncated ``Z_β`` keeps: the largest of ``D^{-1/2} K D^{-1/2}``
        (default) or the smallest of ``L_β`` ([Lokse2014], Alg. 8, which localise on low-degree
        points; mean ARI 0.725 against 0.758 with the default kernel). Identical with all
        eigenpairs.
    n_components : int, optional
        Embedding dimensions used for clustering and ranking; ``n_clusters`` when None ([Lokse2014]
        used 3: with 10 or 31 clusters that loses clusters, mean ARI 0.719).
    n_init : int, default=10
        k-means restarts (best by inertia; [Lokse2014] used 100, which costs seconds, not
        quality, here).
    sigma : float, optional
        RBF width (``kernel='rbf'`` only); ``sigma_fraction`` × median distance when None.
    sigma_fraction : float, default=0.15
        RBF rule of thumb: this fraction of the median pairwise distance ([Lokse2014], §10.2.2,
        uses 0.15; ``dkernel.kernels.widths.THESIS_SIGMA_FRACTION``).
    random_state : int, optional

    Attributes
    ----------
    embedding_ : ndarray (N, n_components)
        ``Z_β``.
    eigenvalues_ : ndarray (n_components,)
        λ* of ``D^{-1/2} K D^{-1/2}`` descending ('normalized') or λ of ``L_β`` ascending
        ('laplacian').
    eigenvectors_ : ndarray (N, n_components)
        ``D^{-1/2} E*`` ('normalized') or ``E`` ('laplacian').
    labels_ : ndarray (N,)
        Cluster labels.
    n_clusters_ : int
        The number of clusters: ``n_clusters``, or the one chosen by 'auto'.
    n_clusters_candidates_ : ndarray of int or None
        The k compared by 'auto' (None for an integer ``n_clusters``).
    n_clusters_scores_ : ndarray or None
        The timescale-gap score of every candidate (the highest wins; None for an integer
        ``n_clusters``).
    model_order_ : dkernel.model_order.ModelOrder or None
        The whole evidence of 'auto' (rule, candidates, scores and, in ``details['spectrum']``,
        the leading eigenvalues of ``D^{-1/2} K D^{-1/2}``); None for an integer ``n_clusters``.
    cluster_centers_ : ndarray (k, n_components)
    cluster_sizes_ : ndarray (k,)
    degrees_ : ndarray (N,)
    volume_ : float
    global_rank_ : ndarray (N,)
        ``d/Vol``.
    kernel_ : object
        The resolved kernel.
    kernel_params_ : dict
    n_features_in_ : int
        Number of features seen in ``fit`` (N for a precomputed N × N kernel).
    feature_names_in_ : ndarray of str
        Column names of a DataFrame passed to ``fit`` (absent for other input).

    Warns
    -----
    DegenerateClusterWarning
        When a cluster is empty, holds one point, or holds at most 1 % of an even share
        (``FRAGMENT_SHARE`` of N / n_clusters: a part the graph cut off); the message names
        the fix.

    See Also
    --------
    dkernel.KernelPersonalizedPageRank : Ranking alone, with out-of-sample scores at scale.
    dkernel.SpectralClustering : Clustering alone, on a sparse graph at any N.
    dkernel.ProbabilisticClusterKernel : The PCK, usable as this estimator's kernel.

    Notes
    -----
    Up to the dense limit (about 13 000 points in ``DENSE_LIMIT_BYTES``): O(N^3) time and
    O(N^2) memory (dense kernel and eigen-solver). Beyond it the k-NN graph kernels ('knn_mean',
    'knn') with the normalized embedding run on the same kernel as a sparse matrix, data
    with NaN too (``dkernel.ranking.sparse_graph``: a nearest-neighbour search, a sparse
    eigen-solver, O(N k) memory, each row's radius among all the rows; 2·10⁵ points in 2 s
    (moons) to 10-17 s (overlapping blobs) and 18-19 s (the blobs with a quarter of the
    entries missing, whose graph mixes slowly), about 0.5 GiB here); other
    settings are refused there with this fix. Rows that repeat (integer-valued data) are
    searched once per distinct row and the graph is that of the distinct rows, each standing
    for its copies (``sparse_graph.jrc_copies_embedding``, the same embedding): on all rows
    every copy within a row's radius is a neighbour, and three 4-D blobs rounded to 1..5
    at 6·10⁴ rows (453 distinct) took 196 s and 12.7 GiB; now 2.8 s and 0.3 GiB.
    k-means O(N k n_init).
    New points: O(n N p) kernel rows in blocks of at most 4096 rows and 64 MiB. ``fit_transform`` (scikit-learn's
    ``TransformerMixin``) is ``fit`` then :meth:`transform` of the same points, which equals
    ``embedding_`` to rounding. scikit-learn has no joint ranking and clustering.

    References
    ----------
    - Løkse (2014), *Joint ranking and clustering based on Markov Chain transition
      probabilities learned from data*, MSc thesis [Lokse2014]: ch. 8, Alg. 8–10 (embedding,
      clustering, ranking), §9.1.2 (``alpha = 0.15``), §10.2 (Frey faces; Fig. 10.8 and 10.9).
    - Løkse & Jenssen, "Kernel Personalized PageRank", Paper II of Løkse (2020) [Lokse2020]:
      the Green's function through the normalized kernel (the ``'normalized'`` truncation).

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> X = load_iris().data
    >>> jrc = JointRankingClustering(n_clusters=3, n_init=5, random_state=0).fit(X)
    >>> jrc.rank(cluster=0).shape
    (150,)
    >>> bool((jrc.predict(X) == jrc.labels_).all())
    True
    """

    def __init__(
        self,
        n_clusters: int | str = 3,
        *,
        max_clusters: int | None = None,
        kernel: Any = "knn_mean",
        n_neighbors: int = DEFAULT_KNN_NEIGHBORS,
        scale_neighbors: int = DEFAULT_KNN_NEIGHBORS,
        kernel_params: dict | None = None,
        alpha: float = 0.15,
        embedding: str = "normalized",
        n_components: int | None = None,
        n_init: int = 10,
        sigma: float | None = None,
        sigma_fraction: float = THESIS_SIGMA_FRACTION,
        random_state: int | None = None,
    ) -> None:
        self.n_clusters = n_clusters
        self.max_clusters = max_clusters
        self.kernel = kernel
        self.n_neighbors = n_neighbors
        self.scale_neighbors = scale_neighbors
        self.kernel_params = kernel_params
        self.alpha = alpha
        self.embedding = embedding
        self.n_components = n_components
        self.n_init = n_init
        self.sigma = sigma
        self.sigma_fraction = sigma_fraction
        self.random_state = random_state

    #: scikit-learn's checks that fail by design, with the reason (tests/test_estimator_checks.py)
    _expected_failed_checks = {
        "check_fit2d_1feature": "the default 10-NN graph needs more than the check's 10 rows",
    }

    _parameter_constraints: dict = {
        "kernel": KERNEL_CONSTRAINT,
        "n_neighbors": [Interval(Integral, 1, None, closed="left")],
        "scale_neighbors": [Interval(Integral, 1, None, closed="left")],
        "kernel_params": [dict, None],
        "alpha": [Interval(Real, 0, 1, closed="neither")],
        "embedding": [StrOptions(set(EMBEDDINGS))],
        "n_components": [Interval(Integral, 1, None, closed="left"), None],
        "n_clusters": [Interval(Integral, 1, None, closed="left"), StrOptions({"auto"})],
        "max_clusters": [Interval(Integral, 2, None, closed="left"), None],
        "n_init": [Interval(Integral, 1, None, closed="left")],
        "sigma": [Interval(Real, 0, None, closed="neither"), None],
        "sigma_fraction": [Interval(Real, 0, None, closed="neither")],
        "random_state": ["random_state", np.random.Generator],
    }

    def __sklearn_tags__(self) -> Any:
        return ranking_tags(self, super().__sklearn_tags__())

    def _validate_params(self) -> None:
        # n_clusters became the first positional argument (as on every other clusterer);
        # a kernel in its place is code written for the former order
        value = self.n_clusters
        if value in KERNEL_NAMES or callable(value) or hasattr(value, "fit"):
            raise ParameterError(
                f"JointRankingClustering's first argument is n_clusters (an int or 'auto'); got "
                f"{value!r}. Pass the kernel by name: "
                f"JointRankingClustering(n_clusters, kernel={value!r})."
            )
        super()._validate_params()

    def _check_sizes(self, n: int) -> np.ndarray | None:
        """The candidates of 'auto' (None for an integer ``n_clusters``), after checking the
        sizes against ``n`` samples."""
        owner = type(self).__name__
        candidates = None
        if self.n_clusters == "auto":
            candidates = candidate_range(n, self.max_clusters, owner=f"{owner}(n_clusters='auto')")
            resolve_n_components(owner, n, 1, self.n_components)
        else:
            resolve_n_components(owner, n, self.n_clusters, self.n_components)
        check_n_neighbors(self, n)
        return candidates

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X: Any, y: Any = None) -> JointRankingClustering:
        """Embed (Alg. 8) and cluster (Alg. 9) the data.

        Parameters
        ----------
        X : array-like (N, p), or (N, N) affinity matrix when ``kernel='precomputed'``
        y : ignored
        """
        owner = type(self).__name__
        self.beta_ = restart_beta(self.alpha, owner)
        X = validate_fit_X(self, X)
        n = X.shape[0]
        candidates = self._check_sizes(n)
        dense = 3.0 * 8 * n * n <= DENSE_LIMIT_BYTES
        if not dense and not self._sparse_graph(X):
            raise ResourceLimitError(
                f"{owner} on N={n} points with kernel={self.kernel!r}, "
                f"embedding={self.embedding!r} needs a dense N×N kernel "
                f"(~{24 * n * n / 2**30:.1f} GiB). The k-NN graph kernels ('knn_mean', the "
                "default, or 'knn') with embedding='normalized' run on a sparse graph at any "
                "N; or cluster a sample of a few thousand points and predict the rest."
            )
        seed = seed_from_random_state(self.random_state)
        kernel_params = self.kernel_params
        if not dense and "n_reference" not in (kernel_params or {}):
            # the sparse graph's radii among all the rows (through an index): a reference
            # sample's first neighbour stands for N/2 000 of them and the graph densified with N
            kernel_params = {**(kernel_params or {}), "n_reference": None}
        self.kernel_, self.kernel_params_ = resolve_kernel(
            self.kernel,
            X,
            sigma=self.sigma,
            sigma_fraction=self.sigma_fraction,
            dtype="float64",
            seed=seed,
            owner=owner,
            n_neighbors=kernel_neighbors(self)[1],
            kernel_params=kernel_params,
        )
        self.model_order_ = None
        self.n_clusters_candidates_ = self.n_clusters_scores_ = None
        if candidates is None:
            self.n_clusters_ = int(self.n_clusters)
            n_components = int(self.n_components or self.n_clusters_)
            n_eig = n_components
        else:
            # the max_clusters + 1 leading eigenvalues of D^-1/2 K D^-1/2 (those of P = D^-1 K);
            # the normalized embedding's columns are one per eigenpair, so it is computed once
            # with as many pairs and truncated at the chosen k
            top = int(candidates[-1]) + 1
            n_eig = max(top, int(self.n_components or 0))
        if not dense:
            block, X_fit = self.kernel_.fn.kernel.block, self.kernel_.X_fit
            copies = repeated_rows(X_fit)
            if copies is None:
                W = sparse_radius_kernel(block, X_fit)
                Z, values, vectors, d = jrc_sparse_embedding(W, self.alpha, n_eig, seed)
            else:  # integer-valued rows: the same embedding from the distinct rows' graph
                Z, values, vectors, d = jrc_copies_embedding(
                    block, X_fit, copies, self.alpha, n_eig, seed
                )
            spectrum = values[:n_eig]
        elif self.embedding == "normalized":
            Z, values, vectors, d = jrc_normalized_embedding(self.kernel_.gram(), self.alpha, n_eig)
            spectrum = values[:n_eig]
        else:
            K = self.kernel_.gram()
            if candidates is not None:
                spectrum = _normalized_spectrum(K, n_eig)
            Z, values, d = jrc_embedding(K, self.alpha, n_eig)
            vectors = Z * np.sqrt(values)[None, :] / np.sqrt(self.beta_ * d.sum())
            del K
        if candidates is not None:
            order = spectrum_model_order(spectrum, candidates)
            self.model_order_ = order
            self.n_clusters_ = order.n_clusters
            self.n_clusters_candidates_ = order.candidates
            self.n_clusters_scores_ = order.scores
            n_components = int(self.n_components or self.n_clusters_)
            Z, values, vectors = (
                Z[:, :n_components],
                values[:n_components],
                vectors[:, :n_components],
            )
        self.embedding_, self.eigenvalues_, self.eigenvectors_ = Z, values, vectors
        self.degrees_ = d
        self.volume_ = float(d.sum())
        self.global_rank_ = d / self.volume_
        labels, centers, inertia = euclidean_kmeans(
            Z, self.n_clusters_, n_init=self.n_init, random_state=derive_seed(seed, "jrc-kmeans")
        )
        self.labels_, self.cluster_centers_, self.inertia_ = labels, centers, inertia
        self.cluster_sizes_ = np.bincount(labels, minlength=self.n_clusters_)
        self._warn_degenerate()
        return self

    def _sparse_graph(self, X: Any) -> bool:
        """Whether the fit can run on the sparse k-NN graph: a k-NN graph kernel and the
        normalized embedding (rows with NaN at their expected distances, as in the dense
        kernel)."""
        return (
            isinstance(self.kernel, str)
            and self.kernel in ("knn", "knn_mean")
            and self.embedding == "normalized"
            and isinstance(X, np.ndarray)
        )

    def _warn_degenerate(self) -> None:
        sizes = self.cluster_sizes_
        # under 1 % of an even share: a fragment the graph cut off (3 points of two moons of
        # 5·10⁴ that had no edge to the rest took one of the two clusters), not a group
        tiny = max(1.0, FRAGMENT_SHARE * sizes.sum() / sizes.size)
        bad = np.flatnonzero(sizes <= tiny)
        if bad.size == 0:
            return
        if self.embedding == "laplacian":
            fix = (
                "embedding='normalized' (the default; the smallest eigenvectors of the "
                "unnormalized L_beta isolate low-degree points)"
            )
        elif not (isinstance(self.kernel, str) and self.kernel in ADAPTIVE):
            fix = "kernel='knn_mean' (the default), whose degrees are at least n_neighbors"
        else:
            fix = "a larger n_neighbors (the graph has a tiny, nearly separate part)"
        warn_caller(
            f"{type(self).__name__}: {bad.size} of {sizes.size} clusters are empty or hold "
            f"at most {int(tiny)} point{'s' if int(tiny) != 1 else ''} (cluster sizes "
            f"{sizes.tolist()}). Use {fix}, or a smaller n_clusters.",
            DegenerateClusterWarning,
        )

    # -- out of sample --------------------------------------------------------------------
    def _degrees_and_rows(self, X: Any) -> tuple[np.ndarray, np.ndarray]:
        """``d̂(x) = κ(x, X) 1`` and ``κ(x, X) V`` (V the kept eigenvectors) of validated
        in-memory rows, in row blocks."""
        n = self.degrees_.size
        basis = np.concatenate([np.ones((n, 1)), self.eigenvectors_], axis=1)
        M = np.atleast_2d(np.asarray(self.kernel_.apply(X, self.kernel_.weights(basis))))
        dh = M[:, 0].astype(np.float64)
        if not np.all(dh > 0):
            bad = int(np.sum(~(dh > 0)))
            raise InvalidInputError(
                f"{bad} new points have zero affinity to every training point, so they have no "
                "embedding; use an adaptive kernel (knn_mean, knn, local_scaling) or a wider rbf."
            )
        return dh, M[:, 1:].astype(np.float64)

    def _out_of_sample(self, X: Any, what: str, mean: np.ndarray | None = None) -> np.ndarray:
        """:meth:`transform`, :meth:`predict` or :meth:`score_samples` (``what``) of validated
        in-memory rows: one block of a Dask ``X``."""
        dh, rows = self._degrees_and_rows(X)
        Z = self._embed_rows(dh, rows)
        if what == "transform":
            return Z
        if what == "predict":
            C = self.cluster_centers_
            d2 = (Z**2).sum(axis=1)[:, None] - 2.0 * Z @ C.T + (C**2).sum(axis=1)[None, :]
            return np.argmin(d2, axis=1).astype(np.int64)
        return dh * (Z @ mean) / self.volume_

    def _apply(self, X: Any, what: str, mean: np.ndarray | None = None) -> Any:
        """``what`` of new points: in memory, or lazily one task per row chunk of a Dask X."""
        check_is_fitted(self, "embedding_")
        if not is_dask_array(X):
            return self._out_of_sample(validate_new_X(self, X), what, mean)

        X = validate_new_lazy(self, X).rechunk({1: -1})
        from dkernel.runtime.shared import share, with_shared

        model = share(self, "joint-ranking-model")  # on every worker once, not a graph key
        if what == "transform":
            k = self.embedding_.shape[1]
            return X.map_blocks(
                with_shared(_out_of_sample_block),
                model,
                what,
                mean,
                chunks=(X.chunks[0], (k,)),
                dtype=np.float64,
                meta=np.empty((0, k), dtype=np.float64),
            )
        dtype = np.int64 if what == "predict" else np.float64
        return X.map_blocks(
            with_shared(_out_of_sample_block),
            model,
            what,
            mean,
            drop_axis=1,
            dtype=dtype,
            meta=np.empty((0,), dtype=dtype),
        )

    def transform(self, X: Any) -> Any:
        """Out-of-sample embedding ``z(x)`` (n, n_components); a training point gets its row of
        ``embedding_`` (to rounding).

        Parameters
        ----------
        X : array-like or dask.array.Array (n, p), or (n, N) kernel rows κ(x, X_fit) for
            ``kernel='precomputed'``
            A Dask array is embedded lazily, one task per row chunk (memory per task: its
            chunk's kernel rows against the N training points, in blocks of 4096 rows).

        Returns
        -------
        ndarray or dask.array.Array (n, n_components)
            Lazy for Dask input.

        Raises
        ------
        InvalidInputError
            Points with zero affinity to the training points, a kept eigenvalue ~0
            ('normalized'; lower n_components), or a non-positive Nyström denominator
            ``(1+β) d̂(x) − λ`` ('laplacian'; the point is too far from the data). For Dask
            input, when the chunk is computed.
        """
        return self._apply(X, "transform")

    def _embed_rows(self, dh: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """The Nyström extension ``z(x)`` from ``d̂(x)`` and ``κ(x, X) V``."""
        lam = self.eigenvalues_
        beta, vol = self.beta_, self.volume_
        if self.embedding == "normalized":
            if np.any(np.abs(lam) < 1e-10):
                raise InvalidInputError(
                    "the out-of-sample embedding divides by the kept eigenvalues of "
                    "D^-1/2 K D^-1/2 and one is ~0; use a smaller n_components."
                )
            U = rows / (dh[:, None] * lam[None, :])
            return np.sqrt(beta * vol) * U / np.sqrt(1.0 + beta - lam)[None, :]
        den = (1.0 + beta) * dh[:, None] - lam[None, :]
        if not np.all(den > 0):
            raise InvalidInputError(
                f"{int(np.sum(~np.all(den > 0, axis=1)))} new points have too small a degree "
                "for the Nyström extension of the L_beta eigenvectors ((1+beta) d(x) <= lambda); "
                "use embedding='normalized' or an adaptive kernel."
            )
        return np.sqrt(beta * vol) * (rows / den) / np.sqrt(lam)[None, :]

    def predict(self, X: Any) -> Any:
        """Cluster of each new point: the nearest k-means centre of its :meth:`transform`.

        For the training points this is ``labels_``. Lazy, chunk by chunk, for Dask input.
        """
        return self._apply(X, "predict")

    def score_samples(
        self, X: Any, seed: Any = None, *, cluster: Any = None, labels: Any = None
    ) -> Any:
        """Out-of-sample PPR scores ``d̂(x) z(x)·m_s / Vol`` for an in-sample seed or a cluster.

        A training point gets its :meth:`rank` score (to rounding). For a Dask ``X`` the
        scores are lazy, one task per row chunk (memory independent of n).
        """
        check_is_fitted(self, "embedding_")
        return self._apply(X, "score", self._seed_mean(seed, cluster, labels))

    # -- ranking --------------------------------------------------------------------------
    def _seed_mean(self, seed: Any, cluster: Any, labels: Any) -> np.ndarray:
        check_is_fitted(self, "embedding_")
        n = self.degrees_.size
        if cluster is not None and labels is None:
            labels = self.labels_
        s = seed_vector(seed, n, cluster=cluster, labels=labels, owner=type(self).__name__)
        return self.embedding_.T @ s

    def rank(self, seed: Any = None, *, cluster: Any = None, labels: Any = None) -> np.ndarray:
        """PPR scores ``π = D Z_β m_s / Vol`` (Alg. 10) for a seed or a cluster.

        A cluster seed (uniform over ``labels_ == cluster``) uses the k-means centroid as ``m_s``.
        ``seed=None`` with no cluster is the global uniform seed.
        """
        m = self._seed_mean(seed, cluster, labels)
        return self.degrees_ * (self.embedding_ @ m) / self.volume_

    def cluster_ranking(self, top_k: int = 10) -> tuple[list[str], np.ndarray, np.ndarray]:
        """In-sample scores for the global seed and every cluster seed, and each cluster's best.

        What the ``jrc`` job stores in ``/ranking`` ([Lokse2014], Fig. 10.8).

        Parameters
        ----------
        top_k : int
            Points listed per cluster and seed.

        Returns
        -------
        names : list of str
            ``'global'``, then ``'cluster_c'`` for c = 0 .. k - 1, k = ``n_clusters_``.
        scores : ndarray (N, 1 + k)
            :meth:`rank` for each seed.
        cluster_top : ndarray of int64 (1 + k, k, top_k)
            ``cluster_top[j, c]``: the ``top_k`` best-scored points of cluster c for seed j
            (score descending, then index ascending), padded with -1.
        """
        check_is_fitted(self, "embedding_")
        clusters = np.arange(self.n_clusters_)
        names = ["global"] + [f"cluster_{c}" for c in clusters]
        scores = np.stack([self.rank()] + [self.rank(cluster=int(c)) for c in clusters], axis=1)
        k = int(top_k)
        top = np.full((len(names), clusters.size, k), -1, dtype=np.int64)
        for j in range(len(names)):
            for c in clusters:
                idx = np.flatnonzero(self.labels_ == c)
                best = idx[np.lexsort((idx, -scores[idx, j]))[:k]]
                top[j, c, : best.size] = best
        return names, scores, top

    def top_k_per_cluster(
        self, k: int = 10, seed: Any = None, *, cluster: Any = None
    ) -> dict[int, np.ndarray]:
        """The ``k`` best-ranked points of each cluster for one seed ([Lokse2014], Fig. 10.8)."""
        scores = self.rank(seed, cluster=cluster)
        out = {}
        for c in np.unique(self.labels_):
            idx = np.flatnonzero(self.labels_ == c)
            out[int(c)] = idx[np.argsort(-scores[idx], kind="stable")[:k]]
        return out


def _out_of_sample_block(
    block: np.ndarray, model: JointRankingClustering, what: str, mean: np.ndarray | None
) -> np.ndarray:
    return model._out_of_sample(block, what, mean)
