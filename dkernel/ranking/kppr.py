"""Kernel Personalized PageRank: spectral PPR with out-of-sample scores.

Løkse & Jenssen, "Kernel Personalized PageRank", Paper II of Løkse (2020) [Lokse2020]; the
proposition, definition and section numbers below are that paper's. Numerics (§3): with
eigenpairs ``(λ*_j, e_j)`` of ``𝒦 = D^{-1/2} K D^{-1/2}`` and β = α/(1-α):

* Green's-kernel embedding ``Z_β = E((1+β)I - Λ*)^{-1/2}`` and
  ``π(α, s) = β D^{1/2} Z Z^T D^{-1/2} s``
  (Prop. 3).
* The top eigenvector ``e_1 = D^{1/2}1/√Vol`` (λ* = 1) gives the **base score** ``d/Vol``; all
  other eigenvectors give the **restart component** (Prop. 4). It is therefore never part of
  the kept embedding; ``n_components`` counts the non-trivial eigenvectors (Def. 4).
* Low rank: keep eigenvectors ordered by ``c_i^2 = ‖D^{-1/2}e_i‖^2 / (1+β-λ*_i)^2`` (Prop. 6)
  or by eigenvalue; out of sample, only those with λ* > ``min_eigenvalue`` (0.01, §4.2).
* Out of sample (Defs. 1–3) and Prop. 8: a new point's score is ``Σ_i α_i(s) κ(x, x_i)`` with
  ``α(s) = 1/Vol + A m'_s``, ``A = β D^{-1/2} E_k diag(1/(λ*√(1+β-λ*)))``; for an explicit feature
  map it is ``γ(x)·(Γ^T α)``.
* Projected scores (Defs. 2–3 with Prop. 8): every seed's ``α(s) = [1/Vol, A] [1; m'_s]`` lies in
  one (k+1)-dimensional, seed-independent subspace, so a new point's score is
  ``z(x)·[1; m'_s]`` with ``z(x) = κ(x, X)[1/Vol, A] = [d̂(x)/Vol, β√d̂(x) ẑ'(x)]``: its base
  score and its Def. 2 embedding scaled as in Def. 3. Projecting a point once (O(N) kernel
  rows times k+1, or O(F (k+1)) from γ(x)) makes each seed an O(k) dot product.
"""

from __future__ import annotations

from numbers import Integral, Real
from typing import Any

import numpy as np
from scipy import linalg
from sklearn.base import BaseEstimator, _fit_context
from sklearn.utils._param_validation import HasMethods, Interval, StrOptions

from dkernel._budget import KERNEL_BLOCK_BYTES, rows_for_budget
from dkernel._random import seed_from_random_state
from dkernel._validation import (
    ParameterConstraintsMixin,
    check_is_fitted,
    check_options,
    is_dask_array,
    validate_input,
)
from dkernel.errors import InvalidInputError, ResourceLimitError
from dkernel.kernels.aliases import resolve_former_meaning
from dkernel.kernels.registry import is_precomputed, kernel_input_tags, kernel_nan_args
from dkernel.kernels.widths import DEFAULT_KNN_NEIGHBORS, PCKID_SIGMA_FRACTION
from dkernel.linalg.eigen import dense_eigh, fix_signs
from dkernel.ranking.kernelmap import ADAPTIVE, KERNEL_NAMES, resolve_kernel
from dkernel.ranking.ppr import degrees, normalized_kernel, restart_beta
from dkernel.ranking.seeds import seed_vector

ORDERINGS = ("prop6", "eigenvalue")
DENSE_LIMIT_BYTES = 4 * 2**30
#: Below this gap between λ*_1 = 1 and λ*_2 the graph is (nearly) disconnected and the
#: eigensolver's basis of the top eigenspace is arbitrary; the trivial eigenvector is then
#: deflated explicitly (:func:`top_normalized_eigenpairs`) so that the base score stays exact.
TRIVIAL_GAP = 1e-6

_POSITIVE = Interval(Real, 0, None, closed="neither")
#: ``kernel``, shared with :class:`~dkernel.ranking.JointRankingClustering`.
KERNEL_CONSTRAINT = [StrOptions(set(KERNEL_NAMES)), callable, HasMethods(["transform"])]
#: The parts of a score: ``component`` of :meth:`KernelPersonalizedPageRank.coefficients` etc.
COMPONENTS = ("score", "base", "restart")


def validate_fit_X(estimator: Any, X: Any) -> np.ndarray:
    """Training input of KPPR and JRC, in memory: features, or the N × N affinity matrix."""
    if is_precomputed(estimator.kernel):
        X = validate_input(estimator, X, reset=True, min_samples=1, dtype=np.float64)
    else:
        X = validate_input(
            estimator, X, reset=True, min_samples=2, **kernel_nan_args(estimator.kernel)
        )
    return X.compute() if is_dask_array(X) else X


def kernel_neighbors(estimator: Any) -> tuple[str, Any]:
    """The neighbour count an adaptive kernel of KPPR or JRC takes, and its parameter's name:
    ``n_neighbors``, the k-NN graph's size, for 'knn_mean' and 'knn'; ``scale_neighbors``,
    the self-tuning widths' rank, for 'local_scaling' (where a non-default ``n_neighbors``,
    its former spelling, still counts for one release, with a warning)."""
    # as given: the kernel refuses a bool or a float with its own message
    if isinstance(estimator.kernel, str) and estimator.kernel == "local_scaling":
        return "scale_neighbors", resolve_former_meaning(estimator, "n_neighbors")
    return "n_neighbors", estimator.n_neighbors


def check_n_neighbors(estimator: Any, n: int) -> None:
    """Refuse an adaptive kernel of KPPR or JRC whose neighbour count is not below ``n``."""
    kernel = estimator.kernel
    if not (isinstance(kernel, str) and kernel in ADAPTIVE):
        return
    name, k = kernel_neighbors(estimator)
    if k >= n:
        raise InvalidInputError(
            f"The {name!r} parameter of {type(estimator).__name__} must be < n_samples "
            f"({n}). Got {k} instead; use a smaller {name}."
        )


def validate_new_X(estimator: Any, X: Any) -> Any:
    """New points for scoring, in memory; precomputed kernel rows are checked by the kernel."""
    if is_precomputed(estimator.kernel):
        return X.compute() if is_dask_array(X) else X
    X = validate_input(
        estimator, X, reset=False, min_samples=1, **kernel_nan_args(estimator.kernel)
    )
    return X.compute() if is_dask_array(X) else X


def validate_new_lazy(estimator: Any, X: Any) -> Any:
    """New points as a Dask array, checked from its metadata only (it stays lazy)."""
    if is_precomputed(estimator.kernel):
        n_fit = estimator.degrees_.size
        if X.ndim != 2 or X.shape[1] != n_fit:
            raise InvalidInputError(
                f"kernel='precomputed' scores rows of κ(x, X_fit), shape (n_new, {n_fit}); got "
                f"shape {X.shape}."
            )
        return X
    return validate_input(
        estimator, X, reset=False, min_samples=1, **kernel_nan_args(estimator.kernel)
    )


def scoring_chunk_rows(model: Any, n_samples: int) -> int:
    """Rows per task when scoring ``n_samples`` rows with a fitted KPPR: about
    ``KERNEL_BLOCK_BYTES`` of kernel rows (N_fit values per row, F for a feature map), at
    least 1024. What the ``kppr`` job cuts in-memory data into
    (``dask.array.from_array(X, chunks=(rows, p))``) before :meth:`~KernelPersonalizedPageRank.score_seeds`.
    """
    check_is_fitted(model, "degrees_")
    kern = model.kernel_
    per_row = kern.features_fit.shape[1] if kern.is_feature_map else model.n_samples_fit_
    return rows_for_budget(KERNEL_BLOCK_BYTES, per_row, 8, low=1024, high=n_samples)


def ranking_tags(estimator: Any, tags: Any) -> Any:
    """Input tags of a ranking estimator: pairwise for a precomputed kernel, NaN with PCK or a
    distance kernel (expected squared distances, :mod:`dkernel.kernels.missing`)."""
    return kernel_input_tags(tags, estimator.kernel, nan=True)


def normalized_eigenpairs(
    K: np.ndarray | None = None, *, features: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """All eigenpairs of ``𝒦 = D^{-1/2} K D^{-1/2}``, eigenvalues descending, signs fixed.

    Parameters
    ----------
    K : ndarray (N, N), optional
        Symmetric non-negative affinity matrix.
    features : ndarray (N, F), optional
        Feature map with ``K = Γ Γ^T``. When ``F < N`` the eigenpairs come from the thin SVD of
        ``B = D^{-1/2} Γ`` (𝒦 = B B^T), so K is never formed; only the ``F`` eigenpairs that
        can be non-zero are returned.

    Returns
    -------
    values : (r,), vectors : (N, r), d : (N,)

    Notes
    -----
    Dense: O(N^3) time, O(N^2) memory, one eigen-solve of the matrix with the exact trivial
    eigenvector deflated (:func:`top_normalized_eigenpairs`), which is put first: the others
    are orthogonal to it even when λ* = 1 is repeated (a graph with several connected
    components, as k-NN graphs often are). Feature map with F < N: O(N F^2) time, O(N F)
    memory; the trivial eigenvector is deflated, once more the cost, when λ*_2 is within
    ``TRIVIAL_GAP`` of 1.
    """
    if features is not None:
        G = np.asarray(features, dtype=np.float64)
        d = degrees(features=G)
        B = G / np.sqrt(d)[:, None]
        if G.shape[1] < G.shape[0]:
            U, S, _ = linalg.svd(B, full_matrices=False, check_finite=False)
            if S.size < 2 or S[0] ** 2 - S[1] ** 2 > TRIVIAL_GAP:
                return S**2, fix_signs(U), d
            e1 = trivial_eigenvector(d)
            # deflate the exact eigenvector e1 (λ* = 1): the others are then orthogonal to it
            U, S, _ = linalg.svd(B - np.outer(e1, e1 @ B), full_matrices=False, check_finite=False)
            r = G.shape[1] - 1
            values = np.concatenate([[1.0], S[:r] ** 2])
            return values, np.concatenate([e1[:, None], fix_signs(U[:, :r])], axis=1), d
        Kn = B @ B.T
    else:
        K = np.asarray(K, dtype=np.float64)
        d = degrees(K)
        Kn = normalized_kernel(K, d)[0]
    Kn = 0.5 * (Kn + Kn.T)
    values, vectors = top_normalized_eigenpairs(Kn, d, Kn.shape[0])
    return values, vectors, d


def trivial_eigenvector(d: np.ndarray) -> np.ndarray:
    """``e1 = D^{1/2} 1 / √Vol``: an exact eigenvector of ``D^{-1/2} K D^{-1/2}`` with λ* = 1."""
    return np.sqrt(d) / np.sqrt(d.sum())


def top_normalized_eigenpairs(
    Kn: np.ndarray, d: np.ndarray, n_components: int
) -> tuple[np.ndarray, np.ndarray]:
    """The ``n_components`` largest eigenpairs of ``𝒦 = D^{-1/2} K D^{-1/2}``, descending.

    The first is always the exact trivial pair ``(1, D^{1/2} 1/√Vol)``; the others come from
    ``𝒦 − 3 e1 e1^T``, which moves e1 to λ = −2, below the spectrum of 𝒦 (in [−1, 1]). So the
    others are orthogonal to e1 even when λ* = 1 is repeated (a graph with several connected
    components, common for k-NN graphs) or nearly so, where an eigensolver would return an
    arbitrary mix, and the base score ``d/Vol`` (Prop. 4) stays exact. Signs are fixed.

    Notes
    -----
    O(N^2 k) with a subset eigensolver (O(N^3) for all), O(N^2) memory.
    """
    n = Kn.shape[0]
    k = int(min(n_components, n))
    e1 = trivial_eigenvector(d)
    M = 0.5 * (Kn + Kn.T)
    M -= 3.0 * np.outer(e1, e1)
    if k > 1:
        values, vectors = dense_eigh(M, k - 1, clip=False, iterative=True)
    else:
        values, vectors = np.zeros(0), np.zeros((n, 0))
    return np.concatenate([[1.0], values]), np.concatenate([e1[:, None], vectors], axis=1)


def prop6_criterion(
    values: np.ndarray, vectors: np.ndarray, d: np.ndarray, beta: float
) -> np.ndarray:
    """``c_i^2 = ‖D^{-1/2} e_i‖^2 / (1 + β - λ*_i)^2`` (Paper II, Prop. 6 [Lokse2020])."""
    norms = np.einsum("ij,ij->j", vectors, vectors / d[:, None])
    return norms / (1.0 + beta - values) ** 2


def select_components(
    values: np.ndarray,
    vectors: np.ndarray,
    d: np.ndarray,
    beta: float,
    *,
    n_components: int | None,
    ordering: str,
    min_eigenvalue: float | None,
) -> tuple[np.ndarray, np.ndarray, int]:
    """Indices of the kept non-trivial eigenpairs, in order; their criterion; the trivial index.

    The trivial eigenvector is the one most aligned with ``D^{1/2} 1`` (λ* = 1 for a connected
    graph); it carries the base score and is never selected.
    """
    e1 = np.sqrt(d) / np.sqrt(d.sum())
    trivial = int(np.argmax(np.abs(e1 @ vectors)))
    crit = prop6_criterion(values, vectors, d, beta)
    cand = np.array([j for j in range(values.size) if j != trivial], dtype=np.int64)
    if min_eigenvalue is not None:
        cand = cand[values[cand] > min_eigenvalue]
    key = crit[cand] if ordering == "prop6" else values[cand]
    cand = cand[np.argsort(-key, kind="stable")]
    if n_components is not None:
        cand = cand[:n_components]
    return cand, crit[cand], trivial


class KernelPersonalizedPageRank(ParameterConstraintsMixin, BaseEstimator):
    """Kernel Personalized PageRank with Nyström-style out-of-sample scores ([Lokse2020], Paper II).

    Parameters
    ----------
    kernel : {'rbf', 'knn_mean', 'knn', 'local_scaling', 'landmark', 'precomputed', 'pck'}, \
callable or transformer, default='rbf'
        Affinity kernel (knn_mean, knn and local_scaling adapt to each point's neighbours).
        'rbf': Gaussian kernel (``sigma`` or the rule of thumb); the default, as in Paper II
        [Lokse2020], whose NDCG evaluation ranks against the exact PPR of the same kernel.
        'knn_mean' (the half-weighted symmetric k-NN graph of ``dkernel.ranking.affinity``),
        'knn' and 'local_scaling' (the registry's adaptive kernels) adapt to each point's neighbour
        distance; each is a fixed function κ(x, y), so out-of-sample scores stay exact
        extensions (a training point scored as new gets its in-sample score). 'precomputed': ``fit`` takes the
        N×N affinity matrix and scoring takes ``(n_new, N)`` rows κ(x, X_fit). 'pck': a default
        :class:`~dkernel.gmm.pck.ProbabilisticClusterKernel` fitted on X. 'landmark': points
        joined through their nearest k-means landmarks (the landmark bipartite graph of
        :class:`~dkernel.SpectralClustering` above 5 000 points), an explicit p-dimensional
        feature map, so new points are scored in O(p). A callable is a block
        function ``f(X, Y)``. An object with ``transform`` is an explicit feature map
        (``K = γ γ^T``; fitted on X if not fitted yet), scored in O(F) per new point.
        X with NaN (missing values): ``'pck'`` models them (PCKID); ``'rbf'`` and the adaptive
        kernels fitted on data with NaN compare rows by their expected squared distance ``‖x̃ −
        ỹ‖² + r_x + r_y`` (missing entries at their conditional means given the observed ones,
        plus their conditional variance, under a Gaussian of the training rows fitted by EM,
        :mod:`dkernel.kernels.missing`), and new rows with the same model; every
        other kernel refuses them.
    alpha : float, default=0.1
        Restart probability of the random walk ([Lokse2020], Paper II, §4, uses 0.1).
    n_components : int or None, default=None
        Number of non-trivial eigenvectors kept (Def. 4); None keeps all that pass
        ``min_eigenvalue``.
    ordering : {'prop6', 'eigenvalue'}, default='prop6'
        Eigenvector ordering: Prop. 6 criterion ``c_i^2`` or eigenvalue.
    min_eigenvalue : float or None, default=0.01
        Drop eigenpairs with λ* ≤ this (out-of-sample scores divide by λ*; [Lokse2020], Paper
        II, §4.2).
        None keeps all (in-sample scores are then the exact PPR).
    sigma : float, optional
        RBF width (``kernel='rbf'`` only); by default ``sigma_fraction`` × median pairwise
        distance.
    sigma_fraction : float, default=0.2
        RBF rule of thumb: this fraction of the median pairwise distance (the PCKID
        baselines' 0.2, ``dkernel.kernels.widths.PCKID_SIGMA_FRACTION``).
    n_neighbors : int, default=10
        k of the k-NN graph kernels ('knn_mean', 'knn'): the neighbours joined to each point.
    scale_neighbors : int, default=10
        Rank of the self-tuning widths of ``kernel='local_scaling'`` (each point's σ the
        distance to its ``scale_neighbors``-th neighbour). 10, the rank this kernel had here
        when ``n_neighbors`` set it (formerly ``n_neighbors`` with 'local_scaling').
    kernel_params : dict, optional
        ``n_reference`` for the adaptive kernels (reference sample for the neighbour radii);
        ``n_landmarks`` (p, default ``min(N, 1000)``) and ``n_neighbors`` (landmarks per
        point, default 5) for 'landmark'.
    dtype : {'float64', 'float32'}, default='float64'
        Precision of the kernel rows computed to score new points (in the ``kppr`` job also of
        the stored scores: float32 halves them for millions of rows).
    random_state : int, optional
        Seeds the rule-of-thumb sample and a 'pck' kernel.

    Attributes
    ----------
    degrees_ : ndarray (N,)
        In-sample degrees.
    volume_ : float
        ``Σ d``.
    beta_ : float
    base_score_ : ndarray (N,)
        Global rank ``d/Vol`` ([Lokse2014], Alg. 7; the base score of [Lokse2020], Paper II,
        Prop. 4).
    eigenvalues_ : ndarray (k,)
        Kept λ*, in selection order.
    eigenvectors_ : ndarray (N, k)
    criterion_ : ndarray (k,)
        Prop. 6 ``c_i^2`` of the kept pairs.
    embedding_ : ndarray (N, k)
        Restart part of ``Z_β``.
    n_components_ : int
    all_eigenvalues_ : ndarray (r,)
        Every eigenvalue of 𝒦, descending.
    kernel_ : BlockKernel, PrecomputedKernel or FeatureMapKernel
        The resolved kernel (``dkernel.ranking.kernelmap``).
    kernel_params_ : dict
    n_features_in_ : int
        Number of features seen in ``fit`` (N for a precomputed N × N kernel).
    feature_names_in_ : ndarray of str
        Column names of a DataFrame passed to ``fit`` (absent for other input).

    See Also
    --------
    dkernel.JointRankingClustering : Ranks and clusters on the same Green's-kernel embedding.
    dkernel.ProbabilisticClusterKernel : The PCK, usable as this estimator's kernel.
    dkernel.top_k, dkernel.seed_scores : Query the rankings of a ``kppr`` job's store.

    Notes
    -----
    ``fit`` costs O(N^3) time and O(N^2) memory (dense eigendecomposition; for a feature map
    with F < N, O(N F^2) and O(N F)); fit on an in-sample subset of a few thousand points and
    score the rest out of sample. Scoring a new point for a fixed seed costs O(N p) for a block
    kernel and O(F) for a feature map (Prop. 8). With many seeds, :meth:`project` a point once
    (its base score and scaled Def. 2 embedding, k+1 numbers) and score each seed in O(k) as
    ``project(X) @ seed_weights(seed)``. See :mod:`dkernel.ranking.graph` for scoring
    millions of points through Dask. scikit-learn has no personalized PageRank.

    References
    ----------
    - Løkse & Jenssen, "Kernel Personalized PageRank", Paper II of Løkse (2020), *Leveraging
      Kernels for Unsupervised Learning*, PhD thesis [Lokse2020]: §3, Prop. 1–8, Theorem 1 and
      Defs. 1–4 (the numbers used above); §4 (NDCG against the exact PPR, ``alpha = 0.1``).
    - Chung & Zhao (2010), "PageRank and random walks on graphs" [Chung2010]: the closed form of
      the PPR of ``P = D^{-1} K``; Page et al. (1999) [Page1999]: PageRank.
    - Løkse (2014), MSc thesis, Alg. 7 [Lokse2014]: the stationary distribution as a global
      rank (``base_score_``).

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> X = load_iris().data
    >>> kppr = KernelPersonalizedPageRank(alpha=0.1, random_state=0).fit(X[:100])
    >>> scores = kppr.score_samples(X[100:], seed=0)
    >>> scores.shape
    (50,)
    """

    def __init__(
        self,
        kernel: Any = "rbf",
        *,
        alpha: float = 0.1,
        n_components: int | None = None,
        ordering: str = "prop6",
        min_eigenvalue: float | None = 0.01,
        sigma: float | None = None,
        sigma_fraction: float = PCKID_SIGMA_FRACTION,
        n_neighbors: int = DEFAULT_KNN_NEIGHBORS,
        scale_neighbors: int = DEFAULT_KNN_NEIGHBORS,
        kernel_params: dict | None = None,
        dtype: str = "float64",
        random_state: int | None = None,
    ) -> None:
        self.kernel = kernel
        self.alpha = alpha
        self.n_components = n_components
        self.ordering = ordering
        self.min_eigenvalue = min_eigenvalue
        self.sigma = sigma
        self.sigma_fraction = sigma_fraction
        self.n_neighbors = n_neighbors
        self.scale_neighbors = scale_neighbors
        self.kernel_params = kernel_params
        self.dtype = dtype
        self.random_state = random_state

    _parameter_constraints: dict = {
        "kernel": KERNEL_CONSTRAINT,
        "alpha": [Interval(Real, 0, 1, closed="neither")],
        "n_components": [Interval(Integral, 1, None, closed="left"), None],
        "ordering": [StrOptions(set(ORDERINGS))],
        "min_eigenvalue": [Interval(Real, None, None, closed="neither"), None],
        "sigma": [_POSITIVE, None],
        "sigma_fraction": [_POSITIVE],
        "n_neighbors": [Interval(Integral, 1, None, closed="left")],
        "scale_neighbors": [Interval(Integral, 1, None, closed="left")],
        "kernel_params": [dict, None],
        "dtype": [StrOptions({"float64", "float32"})],
        "random_state": ["random_state", np.random.Generator],
    }

    def __sklearn_tags__(self) -> Any:
        return ranking_tags(self, super().__sklearn_tags__())

    # -- fitting --------------------------------------------------------------------------
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X: Any, y: Any = None) -> KernelPersonalizedPageRank:
        """Compute degrees and the eigenpairs of the normalized kernel on the in-sample points.

        Parameters
        ----------
        X : array-like (N, p), or (N, N) affinity matrix when ``kernel='precomputed'``
            NumPy or Dask (a Dask array is computed: the in-sample set must fit in memory).
        y : ignored
        """
        owner = type(self).__name__
        self.beta_ = restart_beta(self.alpha, owner)
        X = validate_fit_X(self, X)
        n = X.shape[0]
        check_n_neighbors(self, n)
        need = 3.0 * 8 * n * n
        if need > DENSE_LIMIT_BYTES:
            raise ResourceLimitError(
                f"{owner}.fit on N={n} points needs about {need / 2**30:.1f} GiB for the dense "
                "eigendecomposition (limit 4 GiB). Fit on an in-sample subset of a few thousand "
                "points (the kppr job's max_samples) and score the rest out of sample."
            )
        seed = seed_from_random_state(self.random_state)
        self.kernel_, self.kernel_params_ = resolve_kernel(
            self.kernel,
            X,
            sigma=self.sigma,
            sigma_fraction=self.sigma_fraction,
            dtype=self.dtype,
            seed=seed,
            owner=owner,
            n_neighbors=kernel_neighbors(self)[1],
            kernel_params=self.kernel_params,
        )
        if self.kernel_.is_feature_map:
            values, vectors, d = normalized_eigenpairs(features=self.kernel_.features_fit)
        else:
            values, vectors, d = normalized_eigenpairs(self.kernel_.gram())
        self._set_spectrum(values, vectors, d)
        return self

    def _set_spectrum(self, values: np.ndarray, vectors: np.ndarray, d: np.ndarray) -> None:
        beta = self.beta_
        self.degrees_ = d
        self.volume_ = float(d.sum())
        self.base_score_ = d / self.volume_
        self.all_eigenvalues_ = values
        idx, crit, trivial = select_components(
            values,
            vectors,
            d,
            beta,
            n_components=self.n_components,
            ordering=self.ordering,
            min_eigenvalue=self.min_eigenvalue,
        )
        self.trivial_eigenvalue_ = float(values[trivial])
        self.selected_indices_ = idx
        self.eigenvalues_ = values[idx]
        self.eigenvectors_ = vectors[:, idx]
        self.criterion_ = crit
        self.n_components_ = int(idx.size)
        self.embedding_ = self.eigenvectors_ / np.sqrt(1.0 + beta - self.eigenvalues_)[None, :]
        self.n_samples_fit_ = int(d.size)

    # -- seeds ----------------------------------------------------------------------------
    def seed_vector(
        self, seed: Any = None, *, cluster: Any = None, labels: Any = None
    ) -> np.ndarray:
        """The in-sample seed distribution ``s`` (see :func:`dkernel.ranking.seed_vector`)."""
        check_is_fitted(self, "degrees_")
        if cluster is not None and labels is None:
            labels = getattr(self, "labels_", None)
        return seed_vector(
            seed, self.n_samples_fit_, cluster=cluster, labels=labels, owner=type(self).__name__
        )

    def mean_vector(
        self,
        seed: Any = None,
        *,
        cluster: Any = None,
        labels: Any = None,
        seed_X: Any = None,
        seed_weights: Any = None,
    ) -> np.ndarray:
        """Restart part ``m'_s = Σ_k s_k z'_k / √d_k`` of the seed-weighted mean (Prop. 3, Def. 3).

        With ``seed_X`` the seed lies out of sample: ``m'_s = Σ_i w_i ẑ'_i / √d̂_i`` with the
        Def. 2 embeddings of the seed points (uniform ``w`` unless ``seed_weights``).
        """
        check_is_fitted(self, "degrees_")
        if seed_X is not None:
            if seed is not None or cluster is not None:
                raise InvalidInputError("give either an in-sample seed or seed_X, not both.")
            seed_X = validate_new_X(self, seed_X)
            Kx = np.atleast_2d(np.asarray(self.kernel_.cross(seed_X), dtype=np.float64))
            dh = Kx.sum(axis=1)
            if not np.all(dh > 0):
                raise InvalidInputError(
                    "an out-of-sample seed has zero affinity to every in-sample point; it cannot "
                    "be ranked against (widen the kernel or add in-sample points near it)."
                )
            w = (
                np.full(Kx.shape[0], 1.0 / Kx.shape[0])
                if seed_weights is None
                else np.asarray(seed_weights, float)
            )
            w = w / w.sum()
            # z'(x)/√d̂ = κ(x,X) D^{-1/2} E diag(1/(λ√(1+β-λ))) / d̂
            proj = (Kx / np.sqrt(self.degrees_)[None, :]) @ self.eigenvectors_
            proj /= (self.eigenvalues_ * np.sqrt(1.0 + self.beta_ - self.eigenvalues_))[None, :]
            return (w / dh) @ proj
        s = self.seed_vector(seed, cluster=cluster, labels=labels)
        return self.embedding_.T @ (s / np.sqrt(self.degrees_))

    # -- in-sample scores -----------------------------------------------------------------
    def restart_component(self, seed: Any = None, **seed_kw: Any) -> np.ndarray:
        """In-sample restart component ``π'(α, s) = β D^{1/2} Z_k m'_s`` (Prop. 4)."""
        m = self.mean_vector(seed, **seed_kw)
        return self.beta_ * np.sqrt(self.degrees_) * (self.embedding_ @ m)

    def rank(self, seed: Any = None, **seed_kw: Any) -> np.ndarray:
        """In-sample KPPR scores ``π̂ = d/Vol + π'`` for a seed (the exact PPR with all components).

        ``seed_kw``: ``cluster=``, ``labels=``, ``seed_X=``, ``seed_weights=`` as in
        :meth:`mean_vector`.
        """
        check_is_fitted(self, "degrees_")
        return self.base_score_ + self.restart_component(seed, **seed_kw)

    # -- out of sample --------------------------------------------------------------------
    def _projection(self) -> np.ndarray:
        """Prop. 8 ``A = β D^{-1/2} E_k diag(1/(λ*√(1+β-λ*)))`` (N, k)."""
        lam = self.eigenvalues_
        if np.any(np.abs(lam) < 1e-10):
            raise InvalidInputError(
                "out-of-sample scores divide by the eigenvalues λ*, and some kept ones are ~0; "
                "set min_eigenvalue (default 0.01) or a smaller n_components."
            )
        scale = self.beta_ / (lam * np.sqrt(1.0 + self.beta_ - lam))
        return (self.eigenvectors_ / np.sqrt(self.degrees_)[:, None]) * scale[None, :]

    def coefficients(
        self, seed: Any = None, *, component: str = "score", **seed_kw: Any
    ) -> np.ndarray:
        """Prop. 8 coefficients ``α(s)``: a new point scores ``Σ_i α_i κ(x, x_i)``.

        Parameters
        ----------
        seed, **seed_kw
            The seed (see :meth:`mean_vector`).
        component : {'score', 'base', 'restart'}
            The full score, the base score (``1/Vol`` for every i) or the restart component.

        Notes
        -----
        O(N k) once per seed; afterwards a new point costs O(N) kernel evaluations (O(F) with a
        feature map, through ``Γ^T α``).
        """
        check_is_fitted(self, "degrees_")
        check_options(component, "component", "coefficients", COMPONENTS)
        n = self.n_samples_fit_
        base = np.full(n, 1.0 / self.volume_)
        if component == "base":
            return base
        restart = self._projection() @ self.mean_vector(seed, **seed_kw)
        return restart if component == "restart" else base + restart

    def _check_restart_mean(self, mean: np.ndarray) -> np.ndarray:
        check_is_fitted(self, "degrees_")
        mean = np.asarray(mean, dtype=np.float64)
        if mean.shape[0] != self.n_components_:
            raise InvalidInputError(
                f"the restart mean must have {self.n_components_} rows; got shape {mean.shape}."
            )
        return mean

    def coefficients_for_mean(self, mean: np.ndarray) -> np.ndarray:
        """Prop. 8 coefficients ``1/Vol + A m'`` for a given restart mean ``m'`` (k,) or (k, m).

        Seeds are linear in ``m'``: mixing in-sample and out-of-sample seed points means mixing
        their :meth:`mean_vector` with the seed weights.
        """
        mean = self._check_restart_mean(mean)
        out = self._projection() @ mean
        return out + 1.0 / self.volume_

    def score_basis(self) -> np.ndarray:
        """The seed-independent Prop. 8 basis ``[1/Vol, A]`` (N, k+1).

        Every seed's coefficients are ``α(s) = score_basis() @ seed_weights(s)``; column 0
        carries the base score, columns 1..k the restart component.

        Notes
        -----
        O(N k) time and memory.
        """
        check_is_fitted(self, "degrees_")
        n = self.n_samples_fit_
        return np.concatenate([np.full((n, 1), 1.0 / self.volume_), self._projection()], axis=1)

    def seed_weights(
        self, seed: Any = None, *, component: str = "score", **seed_kw: Any
    ) -> np.ndarray:
        """Weights ``[1; m'_s]`` (k+1,) of a seed on the :meth:`project` coordinates.

        Parameters
        ----------
        seed, **seed_kw
            The seed (see :meth:`mean_vector`).
        component : {'score', 'base', 'restart'}
            ``[1; m'_s]``, ``[1; 0]`` or ``[0; m'_s]`` (Prop. 4).

        Returns
        -------
        w : ndarray (k+1,)
            ``project(X) @ w`` equals ``score_samples(X, seed, component=component)``.
        """
        check_is_fitted(self, "degrees_")
        check_options(component, "component", "seed_weights", COMPONENTS)
        w = np.zeros(self.n_components_ + 1)
        if component != "restart":
            w[0] = 1.0
        if component != "base":
            w[1:] = self.mean_vector(seed, **seed_kw)
        return w

    def seed_weights_for_mean(self, mean: np.ndarray) -> np.ndarray:
        """``[1; m']`` for given restart means ``m'`` (k,) or (k, m): (k+1,) or (k+1, m)."""
        mean = self._check_restart_mean(mean)
        ones = np.ones((1,) + mean.shape[1:])
        return np.concatenate([ones, mean], axis=0)

    def project(self, X: Any) -> np.ndarray:
        """Score coordinates ``z(x) = [d̂(x)/Vol, β√d̂(x) ẑ'(x)]`` (n, k+1) of new points.

        A seed's out-of-sample score (Def. 3, Prop. 8) is ``project(X) @ seed_weights(seed)``:
        the point is projected once and every seed then costs O(k).

        Parameters
        ----------
        X : array-like or dask.array.Array (n, p), or (n, N) kernel rows for
            ``kernel='precomputed'``
            A Dask array is projected lazily, one task per row chunk (memory per task: the
            chunk's kernel rows, never all n).

        Returns
        -------
        Z : ndarray or dask.array.Array (n, k+1)
            Column 0 is the base score ``d̂(x)/Vol``; columns 1..k are ``β√d̂(x) ẑ'(x)``
            (:meth:`embed_samples` scaled as in Def. 3). In the working precision of the
            kernel (float32 for a default PCK; ``dtype`` for a Dask ``X``). Lazy for Dask
            input (``dkernel.ranking.graph.project_graph``, the ``kppr`` job's stored
            projection).

        Notes
        -----
        O(n N (p + k)) for a block kernel; O(n F (k+1)) from the feature map γ(x) (the
        seed-independent ``Γ^T [1/Vol, A]`` is formed once, O(N F k)). For an in-sample point
        ``z`` reproduces the in-sample scores of the kept components (Nyström property).
        """
        check_is_fitted(self, "degrees_")
        if is_dask_array(X):
            from dkernel.ranking.graph import project_graph

            X = validate_new_lazy(self, X)
            return project_graph(X, self, dtype=self.dtype)
        X = validate_new_X(self, X)
        basis = self.kernel_.weights(self.score_basis())
        return np.asarray(self.kernel_.apply(X, basis))

    def score_samples(
        self, X: Any, seed: Any = None, *, component: str = "score", **seed_kw: Any
    ) -> np.ndarray:
        """Out-of-sample KPPR scores (Defs. 1–3, via Prop. 8) of new points for a seed.

        Parameters
        ----------
        X : array-like or dask.array.Array (n, p), or (n, N) kernel rows for
            ``kernel='precomputed'``
            A Dask array is scored lazily, chunk by chunk (:meth:`score_seeds`).
        seed, **seed_kw
            The seed (in sample, a cluster, or ``seed_X`` out of sample).
        component : {'score', 'base', 'restart'}
            ``base`` is ``d̂(x)/Vol``; ``base + restart = score``.

        Returns
        -------
        scores : ndarray or dask.array.Array (n,)
            float64; lazy for Dask input (computed in ``dtype`` as :meth:`score_seeds`).

        Notes
        -----
        O(n N p) for a block kernel; O(n F) for a feature map once ``Γ^T α`` is formed.
        """
        check_is_fitted(self, "degrees_")
        if is_dask_array(X):
            weights = self.seed_weights(seed, component=component, **seed_kw)
            return self.score_seeds(X, weights)[:, 0]
        X = validate_new_X(self, X)
        coef = self.coefficients(seed, component=component, **seed_kw)
        w = self.kernel_.weights(coef)
        return np.asarray(self.kernel_.apply(X, w), dtype=np.float64)

    def score_seeds(self, X: Any, seed_weights: Any) -> Any:
        """Scores of every row of ``X`` for several seeds at once, chunk by chunk.

        Parameters
        ----------
        X : array-like or dask.array.Array (n, p), or (n, N) kernel rows for
            ``kernel='precomputed'``
            Each row chunk of a Dask array is one task (``dkernel.ranking.graph.score_graph``);
            the scorer (the kernel and the Prop. 8 weights) is put on every worker of an
            active ``distributed`` client once.
        seed_weights : array-like (k+1,) or (k+1, m)
            ``[1; m'_s]`` of each seed (:meth:`seed_weights`, :meth:`seed_weights_for_mean`).

        Returns
        -------
        scores : ndarray or dask.array.Array (n, m)
            float64, computed in ``dtype``; lazy for Dask input. Column j is
            ``score_samples(X, seed_j)`` to rounding (the seeds' coefficients are formed
            together).

        Notes
        -----
        Per row: O(N_fit p) (block kernel) or O(F) (feature map) for each of m seeds, or, with
        more seeds than k+1, the projection once (O(F (k+1))) and O(k) per seed
        (``dkernel.ranking.graph.scorer_for_seeds``). Memory per task: its chunk's kernel rows
        in blocks of 4096 rows; independent of n.
        """
        from dkernel.ranking.graph import score_graph, scorer_for_seeds

        check_is_fitted(self, "degrees_")
        W = np.asarray(seed_weights, dtype=np.float64)
        W = W[:, None] if W.ndim == 1 else W
        if W.ndim != 2 or W.shape[0] != self.n_components_ + 1:
            raise InvalidInputError(
                f"seed_weights must have {self.n_components_ + 1} rows (1 + n_components); "
                f"got shape {W.shape}."
            )
        scorer = scorer_for_seeds(self, W, dtype=self.dtype)
        if is_dask_array(X):
            X = validate_new_lazy(self, X)
            return score_graph(X, scorer).astype(np.float64)
        return np.asarray(scorer(validate_new_X(self, X)), dtype=np.float64)

    def embed_samples(self, X: Any) -> np.ndarray:
        """Out-of-sample embeddings ``ẑ'`` (Def. 2) of new points, restart dimensions only."""
        check_is_fitted(self, "degrees_")
        X = validate_new_X(self, X)
        Kx = np.atleast_2d(np.asarray(self.kernel_.cross(X), dtype=np.float64))
        dh = Kx.sum(axis=1)
        proj = (Kx / np.sqrt(self.degrees_)[None, :]) @ self.eigenvectors_
        lam = self.eigenvalues_
        proj /= (lam * np.sqrt(1.0 + self.beta_ - lam))[None, :]
        return proj / np.sqrt(dh)[:, None]


#: Short alias.
KPPR = KernelPersonalizedPageRank
