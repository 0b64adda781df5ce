"""Dense kernel embedding estimators: KPCA (centered / uncentered) and KECA.

The kernel matrix is computed blockwise by a Dask graph (so Dask input and a distributed
client work as they are), then solved densely; where that exceeds the memory limit,
``approximation='auto'`` computes the same embedding from Nyström landmarks
(:class:`~dkernel.NystromEmbedding`).
``transform`` of new points is the standard out-of-sample formula and runs
chunk by chunk on Dask input (the ``ParallelPostFit`` pattern).
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
from sklearn.utils._available_if import available_if
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import _num_samples

from dkernel._budget import check_budget, dense_kernel_cost, memory_limit
from dkernel._random import seed_from_random_state
from dkernel._validation import ParameterConstraintsMixin, check_is_fitted, validate_input
from dkernel.errors import InvalidInputError
from dkernel.graphs.blocked import blocked_kernel
from dkernel.kernels.aliases import resolve_renamed
from dkernel.kernels.registry import (
    ADAPTIVE_KERNELS,
    kernel_input_tags,
    kernel_nan_args,
    make_kernel,
    neighbor_parameter,
)
from dkernel.kernels.width_selection import (
    WIDTH_SAMPLE,
    WidthResolution,
    rbf_width_from_data,
    resolve_sigma_fraction,
)
from dkernel.kernels.widths import (
    DEFAULT_LOCAL_SCALING_NEIGHBORS,
    DEFAULT_SIGMA_FRACTION,
    KECA_SIGMA_FRACTIONS,
    KPCA_SIGMA_FRACTIONS,
)
from dkernel.linalg.kmeans import angular_kmeans, euclidean_kmeans, normalize_rows
from dkernel.spectral.dense import (
    entropy_candidates,
    keca_embedding,
    keca_of_pairs,
    kpca_embedding,
)
from dkernel.spectral.nystrom import NystromEmbedding

#: How the embedding is computed (see the ``approximation`` parameter).
APPROXIMATIONS = ("auto", "exact", "nystrom")
#: ``KECA``'s dimensions compared with its widths: k and 2k entropy components for k clusters.
KECA_COMPONENT_MULTIPLES = (1, 2)
#: ``KernelPCAEmbedding``'s default dimension with ``n_clusters``: this many axes per cluster
#: (``docs/choosing_defaults.md``, "KernelPCAEmbedding and KECA with n_clusters").
KPCA_COMPONENTS_PER_CLUSTER = 2

#: Kernels of the dense embeddings named in their documentation: one global RBF width, or the
#: adaptive ones (every kernel of the registry, or a callable, is accepted).
DENSE_KERNELS = ("rbf", "local_scaling", "knn")


def _clusters_requested(estimator: Any) -> bool:
    """``predict`` / ``fit_predict`` exist only when ``n_clusters`` is set."""
    return estimator.n_clusters is not None


class _DenseKernelEmbedding(
    ParameterConstraintsMixin,
    ClassNamePrefixFeaturesOutMixin,
    TransformerMixin,
    ClusterMixin,
    BaseEstimator,
):
    _centered: bool = True
    #: The ``embedding`` of :class:`~dkernel.NystromEmbedding` that approximates this one.
    _nystrom_embedding: str = "kpca"
    #: The fractions ``sigma_fraction='auto'`` compares when clustering (None: no choice).
    _sigma_fraction_candidates: tuple[float, ...] | None = None
    #: Default embedding dimension per cluster when ``n_components`` is None.
    _components_per_cluster: int = 1

    _parameter_constraints: dict = {
        "n_components": [Interval(Integral, 1, None, closed="left"), None],
        # names are checked by make_kernel, whose message lists the registered ones
        "kernel": [str, callable],
        "scale_neighbors": [Interval(Integral, 1, None, closed="left")],
        "sigma": [Interval(Real, 0, None, closed="neither"), None],
        "sigma_fraction": [Interval(Real, 0, None, closed="neither"), StrOptions({"auto"})],
        "n_clusters": [Interval(Integral, 1, None, closed="left"), None],
        "n_init": [Interval(Integral, 1, None, closed="left")],
        # blocks below 16 rows only multiply the tasks
        "block_rows": [Interval(Integral, 16, None, closed="left"), None],
        "dtype": [StrOptions({"float32", "float64"})],
        # a size such as "4GB" or bytes; parsed and checked by dkernel._budget
        "max_memory": [str, Interval(Real, 0, None, closed="neither"), None],
        "random_state": ["random_state", np.random.Generator],
        # the former name of scale_neighbors (dkernel.kernels.aliases.RENAMED_PARAMETERS)
        "n_neighbors": [Interval(Integral, 1, None, closed="left"), None],
        "approximation": [StrOptions(set(APPROXIMATIONS))],
        "n_landmarks": [Interval(Integral, 1, None, closed="left")],
    }

    def __init__(
        self,
        n_components: int | None = None,
        *,
        kernel: str = "rbf",
        scale_neighbors: int = DEFAULT_LOCAL_SCALING_NEIGHBORS,
        sigma: float | None = None,
        sigma_fraction: float | str = "auto",
        n_clusters: int | None = None,
        n_init: int = 10,
        block_rows: int | None = None,
        dtype: str = "float64",
        max_memory: str | float | None = None,
        random_state: int | None = None,
        n_neighbors: int | None = None,
        approximation: str = "auto",
        n_landmarks: int = 1000,
    ) -> None:
        self.n_components = n_components
        self.kernel = kernel
        self.scale_neighbors = scale_neighbors
        self.sigma = sigma
        self.sigma_fraction = sigma_fraction
        self.n_clusters = n_clusters
        self.n_init = n_init
        self.block_rows = block_rows
        self.dtype = dtype
        self.max_memory = max_memory
        self.random_state = random_state
        self.n_neighbors = n_neighbors
        self.approximation = approximation
        self.n_landmarks = n_landmarks

    # -- validation ----------------------------------------------------------------------
    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # a clusterer only when asked to cluster; otherwise an embedding (a transformer)
        tags.estimator_type = "clusterer" if self.n_clusters is not None else None
        return kernel_input_tags(tags, self.kernel, nan=True)

    @property
    def _n_features_out(self) -> int:
        """Embedding dimension (names of ``get_feature_names_out``)."""
        return int(self.eigenvalues_.size)

    def _resolve_n_components(self, n_samples: int) -> None:
        """Set ``n_components_`` and check both sizes against the number of samples."""
        owner = type(self).__name__
        if self.n_components is not None:
            self.n_components_ = int(self.n_components)
        elif self.n_clusters is not None:
            self.n_components_ = min(self._components_per_cluster * int(self.n_clusters), n_samples)
        else:
            self.n_components_ = 2
        # n_clusters first: n_components defaults to a multiple of it, and the user named only
        # n_clusters
        if self.n_clusters is not None and self.n_clusters > n_samples:
            raise InvalidInputError(
                f"The 'n_clusters' parameter of {owner} must be <= n_samples ({n_samples}). "
                f"Got {self.n_clusters} instead."
            )
        if self.n_components_ > n_samples:
            raise InvalidInputError(
                f"The 'n_components' parameter of {owner} must be <= n_samples ({n_samples}). "
                f"Got {self.n_components_} instead."
            )

    # -- kernel --------------------------------------------------------------------------
    def _kernel_graph(self, X: Any, Y: Any = None) -> da.Array:
        if self.kernel_.precomputed:
            # the rows of X are the kernel's rows already (square in fit: make_kernel's check)
            return da.asarray(X).astype(self.dtype)
        return blocked_kernel(
            self.kernel_.block, X, Y, block_rows=self.block_rows, dtype=self.dtype
        )

    def kernel_matrix(self, X: Any) -> da.Array:
        """The lazy blocked kernel between ``X`` and itself, with the fitted width."""
        check_is_fitted(self, "kernel_")
        return self._kernel_graph(X)

    # -- fit -----------------------------------------------------------------------------
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X: Any, y: Any = None) -> _DenseKernelEmbedding:
        """Compute the blocked kernel (through Dask), solve densely, cluster when asked.

        Parameters
        ----------
        X : array-like or dask.array.Array of shape (n_samples, n_features)
        y : ignored
        """
        if self._nystrom(int(_num_samples(X))):
            return self._fit_nystrom(X)
        K = self.prepare_fit(X)
        if self._adopt_width_fit():
            return self
        return self.fit_kernel(np.asarray(K.compute(), dtype=np.float64))

    def _adopt_width_fit(self) -> bool:
        """Whether 'auto' had fitted the chosen width on every row already (on a sample's
        scale, to verify it): that fit is this one, adopted rather than solved again."""
        if getattr(self, "_width_fit", None) is None:
            return False
        adopted = {
            name: value
            for name, value in vars(self._width_fit).items()
            if name.endswith("_")
            and not name.startswith(("sigma_fraction", "n_features", "n_components_cand"))
            and name != "feature_names_in_"
        }
        vars(self).update(adopted)
        self._width_fit = None
        return True

    def _nystrom(self, n: int) -> bool:
        """Whether ``fit`` on n points takes the Nyström path (``approximation``)."""
        if self.approximation != "auto":
            return self.approximation == "nystrom"
        return dense_kernel_cost(n)[0] > memory_limit(self.max_memory)

    def _fit_nystrom(self, X: Any) -> _DenseKernelEmbedding:
        """The embedding of :class:`~dkernel.NystromEmbedding` with this kernel and width, in
        O(N m) memory; ``transform`` is its Nyström formula."""
        X = validate_input(self, X, reset=True, min_samples=2, **kernel_nan_args(self.kernel))
        self._resolve_n_components(int(X.shape[0]))
        self._choose_sigma_fraction(X)
        if self._adopt_width_fit():
            return self
        params = None
        if isinstance(self.kernel, str) and self.kernel in ADAPTIVE_KERNELS:
            params = {
                neighbor_parameter(self.kernel): int(resolve_renamed(self, "scale_neighbors"))
            }
        self.nystrom_ = NystromEmbedding(
            self.n_components_,
            embedding=self._nystrom_embedding,
            kernel=self.kernel,
            kernel_params=params,
            sigma=self.sigma,
            sigma_fraction=self.sigma_fraction_,
            n_landmarks=self.n_landmarks,
            random_state=self.random_state,
        ).fit(X)
        self.approximation_ = "nystrom"
        self.kernel_ = self.nystrom_.kernel_
        self.sigma_ = self.kernel_.params.get("sigma") if self.kernel == "rbf" else None
        embedding = self.nystrom_.embedding_
        self.embedding_ = np.asarray(
            embedding.compute() if isinstance(embedding, da.Array) else embedding
        )
        self.eigenvalues_ = self.nystrom_.eigenvalues_
        self.criterion_ = self.nystrom_.criterion_
        self.eigen_indices_ = self.nystrom_.component_indices_
        self.eigenvectors_ = self.X_fit_ = None
        if self.n_clusters is not None:
            self.labels_ = self._cluster(self.embedding_)
        return self

    @_fit_context(prefer_skip_nested_validation=True)
    def prepare_fit(self, X: Any) -> da.Array:
        """Validate, choose the width, and return the lazy blocked training kernel.

        Together with :meth:`fit_kernel` this splits :meth:`fit` so a job can write the kernel
        to its store and solve from there.
        """
        X = validate_input(self, X, reset=True, min_samples=2, **kernel_nan_args(self.kernel))
        n = int(X.shape[0])
        self._resolve_n_components(n)
        self._choose_sigma_fraction(X)
        memory, _ = dense_kernel_cost(n)
        check_budget(
            what=f"A dense {n} x {n} kernel eigen-solve",
            memory_bytes=memory,
            max_memory=self.max_memory,
            alternative=(
                "approximation='nystrom' (or 'auto', the default) computes this embedding from "
                "landmarks in O(N m) memory (dkernel.NystromEmbedding("
                f"embedding={self._nystrom_embedding!r}))."
            ),
        )
        X_local = X.compute() if isinstance(X, da.Array) else X
        self.approximation_ = "exact"
        self.nystrom_ = None
        self.X_fit_ = np.asarray(X_local, dtype=np.float64)
        if isinstance(self.kernel, str) and self.kernel == "rbf":
            self.kernel_ = make_kernel(
                "rbf",
                self.X_fit_,
                sigma=None if self.sigma is None else float(self.sigma),
                sigma_fraction=self.sigma_fraction_,
                seed=self.random_state,
            )
            self.sigma_ = self.kernel_.params["sigma"]
        elif isinstance(self.kernel, str) and self.kernel in ADAPTIVE_KERNELS:
            # the dense solve is O(n²) anyway: every training point is a reference point
            self.sigma_ = None
            self.kernel_ = make_kernel(
                self.kernel,
                self.X_fit_,
                # the widths' rank of local_scaling, the size of the k-NN graphs
                **{neighbor_parameter(self.kernel): int(resolve_renamed(self, "scale_neighbors"))},
                n_reference=None,
            )
        else:
            self.sigma_ = None
            self.kernel_ = make_kernel(self.kernel, self.X_fit_)
        return self._kernel_graph(X)

    def _choose_sigma_fraction(self, X: Any) -> WidthResolution:
        """``sigma_fraction_`` and, for 'auto' clustering with a data-chosen rbf width, its
        evidence (``dkernel.kernels.width_selection``)."""
        candidates = self._width_settings(int(X.shape[0]))
        found = resolve_sigma_fraction(
            self,
            X,
            seed_from_random_state(self.random_state),
            candidates=candidates,
            fallback=DEFAULT_SIGMA_FRACTION,
            chooses=bool(candidates) and self.n_clusters is not None and rbf_width_from_data(self),
            verify=True,
            scale_neighbors=int(resolve_renamed(self, "scale_neighbors")),
            n_neighbors=None,
        )
        self.sigma_fraction_ = found.fraction
        self.sigma_fraction_candidates_, self.sigma_fraction_scores_ = (
            found.candidates,
            found.scores,
        )
        self.sigma_fraction_verified_scores_ = found.verified_scores
        self._width_fit = found.model
        if found.setting is not None and "n_components" in found.setting:
            self.n_components_ = int(found.setting["n_components"])
        return found

    def _width_settings(self, n_samples: int) -> list[float | dict[str, Any]]:
        """What ``sigma_fraction='auto'`` compares when clustering: fractions (or settings)."""
        return list(self._sigma_fraction_candidates or ())

    def fit_kernel(self, K: np.ndarray) -> _DenseKernelEmbedding:
        """Finish fitting from the computed training kernel (after :meth:`prepare_fit`)."""
        check_is_fitted(self, "kernel_")
        # solved from the K given, even where 'auto' fitted this setting already: a job's
        # kernel is computed on its workers, and its results must not depend on the scheduler
        self._width_fit = None
        self._fit_kernel(np.asarray(K, dtype=np.float64))
        if self.n_clusters is not None:
            self.labels_ = self._cluster(self.embedding_)
        return self

    def _fit_kernel(self, K: np.ndarray) -> None:
        result = self._embed(K)
        self.embedding_ = result.embedding
        self.eigenvalues_ = result.eigenvalues
        self.eigenvectors_ = result.eigenvectors
        self.criterion_ = result.criterion
        self.eigen_indices_ = result.indices
        self.kernel_col_mean_ = K.mean(axis=0)
        self.kernel_mean_ = float(K.mean())

    def fit_transform(self, X: Any, y: Any = None) -> np.ndarray:
        return self.fit(X).embedding_

    @available_if(_clusters_requested)
    def fit_predict(self, X: Any, y: Any = None) -> np.ndarray:
        """Fit and return cluster labels (only with ``n_clusters`` set)."""
        return self.fit(X).labels_

    # -- out of sample -------------------------------------------------------------------
    def _transform_block(self, Xb: np.ndarray) -> np.ndarray:
        if self.kernel_.precomputed:
            Kx = self.kernel_.cross(Xb, np.arange(self.X_fit_.shape[0]))
        else:
            Kx = self.kernel_(Xb, self.X_fit_)
        if self._centered:
            Kx = (
                Kx
                - Kx.mean(axis=1, keepdims=True)
                - self.kernel_col_mean_[None, :]
                + self.kernel_mean_
            )
        scale = np.sqrt(self.eigenvalues_)
        with np.errstate(divide="ignore", invalid="ignore"):
            inv = np.where(scale > 0, 1.0 / scale, 0.0)
        return (Kx @ self.eigenvectors_) * inv[None, :]

    def transform(self, X: Any) -> Any:
        """Embed new points with the out-of-sample formula ``k_c(x)ᵀ E Λ^{-1/2}``.

        Lazy (chunk by chunk) for Dask input; training points map to their embedding.
        """
        check_is_fitted(self, "embedding_")
        if getattr(self, "nystrom_", None) is not None:
            return self.nystrom_.transform(X)
        X = validate_input(self, X, reset=False, **kernel_nan_args(self.kernel))
        k = self.eigenvalues_.size
        if isinstance(X, da.Array):
            return X.map_blocks(self._transform_block, chunks=(X.chunks[0], (k,)), dtype=np.float64)
        return self._transform_block(np.asarray(X, dtype=np.float64))

    @available_if(_clusters_requested)
    def predict(self, X: Any) -> Any:
        """Cluster labels of new points: nearest fitted centre in the embedding.

        Only with ``n_clusters`` set (``hasattr(est, "predict")`` is False otherwise).
        """
        check_is_fitted(self, "cluster_centers_")
        Z = self.transform(X)
        if isinstance(Z, da.Array):
            return Z.map_blocks(self._assign, drop_axis=1, dtype=np.int64)
        return self._assign(Z)


class KernelPCAEmbedding(_DenseKernelEmbedding):
    """Kernel PCA (RBF or adaptive kernel), computed blockwise and solved densely.

    Parameters
    ----------
    n_components : int, optional
        Dimension of the embedding (default: two axes per cluster, ``2 × n_clusters`` at most
        N, when ``n_clusters`` is set, else 2; KECA: ``n_clusters``, or k and 2k compared by
        its 'auto' width). Two axes per cluster (``KPCA_COMPONENTS_PER_CLUSTER``), measured
        against one on ``benchmarks/bench_realdata.py``'s 14 full-size sets mean ARI 0.290 → 0.295, ≥ k-means
        on 8 → 10 (Jasper Ridge 0.757 → 0.760, BSDS 5096 0.334 → 0.341); 60 held-out sets
        0.100 → 0.102, 34 → 37 ≥ k-means; the 23-set suite 0.560 → 0.567; at 3 000 rows 0.406
        → 0.403 (24 of 39 ≥ k-means). One axis per cluster had replaced 2 axes in all (D31
        0.73 → 0.95 for KPCA, 0.16 → 0.86 for KECA).
    kernel : str or callable
        A kernel of the registry (:func:`dkernel.kernels.registry.make_kernel`: ``'rbf'``,
        ``'local_scaling'``, ``'knn'``, scikit-learn's ``'linear'``, ``'poly'``, ``'sigmoid'``,
        ``'laplacian'``, ``'chi2'``, ``'cosine'``, ..., with their default parameters;
        ``'precomputed'``: X is the kernel matrix in ``fit`` and kernel rows against the
        training points in ``transform``), a function ``f(X, Y)`` or a resolved
        ``make_kernel(name, gamma=...)``. ``rbf`` (one width, by the rule of thumb) stays the
        default: the leading components of KPCA / KECA summarise the data's global shape, which a single width
        serves; the adaptive kernels (each point's width from its ``scale_neighbors``-th
        neighbour) suit the normalized embedding of :class:`SpectralClustering` better, and
        are not positive semi-definite in general (negative eigenvalues are clipped, with a
        ``NumericalWarning``).
        X with NaN (missing values): ``'pck'`` models them (PCKID); ``'rbf'`` and the adaptive
        kernels fitted on data with NaN compare rows by their expected squared distance ``‖x̃ −
        ỹ‖² + r_x + r_y`` (missing entries at their conditional means given the observed ones,
        plus their conditional variance, under a Gaussian of the training rows fitted by EM,
        :mod:`dkernel.kernels.missing`), and new rows with the same model; every
        other kernel refuses them.
    scale_neighbors : int
        Rank of the self-tuning widths of ``kernel='local_scaling'`` (each point's σ the
        distance to its ``scale_neighbors``-th neighbour; also the k of the ``knn`` kernels).
        Formerly ``n_neighbors``.
    sigma : float, optional
        RBF width; by default ``sigma_fraction`` × the median pairwise distance (on a sample).
    sigma_fraction : float or 'auto'
        Rule-of-thumb fraction of the median distance. 'auto' (the default): with
        ``n_clusters`` and the rbf kernel without ``sigma``, the embedding and k-means at 1/√2,
        1 and 2 on at most 3 000 rows, keeping the width whose partition has the highest
        silhouette in the feature space of the 0.5 × median kernel ([Rousseeuw1987];
        ``dkernel.kernels.width_selection``: mean ARI 0.407 against 0.394 at 1/√2 on the 35
        real sets of ``benchmarks/bench_realdata.py``, 0.566 against 0.560 on the 23-set suite);
        otherwise 1/√2, the median heuristic (``dkernel.kernels.widths.DEFAULT_SIGMA_FRACTION``,
        as ``make_kernel('rbf', X)``). The PCKID baselines use 0.2.
    centered : bool
        Center the kernel in feature space (KPCA) or not (uncentered KPCA).
    n_clusters : int, optional
        When set, ``fit`` also runs Euclidean k-means (best of ``n_init``) on the embedding.
    n_init : int
        k-means restarts.
    block_rows : int, optional
        Rows (and columns) per block of the kernel matrix, at least 16 (default: ~64 MiB
        blocks). Formerly ``block_size``.
    dtype : {'float64', 'float32'}
        Kernel block dtype.
    max_memory : str or float, optional
        Memory the dense solve may use (default ``DKERNEL_MAX_MEMORY`` or 4 GiB): above it
        ``approximation='auto'`` takes the Nyström path, ``'exact'`` refuses.
    random_state : int, optional
    n_neighbors : int, optional
        Deprecated: the former name of ``scale_neighbors`` (a ``FutureWarning``), kept for one
        release; ``n_neighbors`` is the size of a k-NN graph elsewhere (scikit-learn's meaning).
    approximation : {'auto', 'exact', 'nystrom'}
        ``'exact'``: the dense kernel of all points (O(N²) memory; the eigen-solve: Notes).
        ``'nystrom'``: the same embedding (``embedding_``, ``eigenvalues_``, ``transform``)
        from ``n_landmarks`` k-means++ landmarks by :class:`~dkernel.NystromEmbedding`, same
        kernel and width, O(N m) time and O(block · m + m²) memory; with ``n_landmarks`` >= N
        it is the exact embedding. ``'auto'`` (default): exact when the dense solve fits
        ``max_memory`` (about 13 000 points at 4 GiB), Nyström above. Which path ran is in
        ``approximation_``.
    n_landmarks : int
        Nyström path: landmarks (``NystromEmbedding``'s m).

    Attributes
    ----------
    sigma_ : float or None
        The RBF width (None for the adaptive kernels).
    sigma_fraction_ : float
        The fraction used (chosen by 'auto').
    sigma_fraction_candidates_, sigma_fraction_scores_ : ndarray or None
        The fractions 'auto' compared and their silhouettes (None otherwise). Above
        ``dkernel.kernels.width_selection.WIDTH_SAMPLE`` rows they are scored on a sample.
    sigma_fraction_verified_scores_ : ndarray or None
        Above ``WIDTH_SAMPLE`` rows: the silhouette on the same sample of the partition each
        setting gives when fitted on every row (NaN: not fitted on every row). The best-scored
        setting is fitted on every row, and the next ones while their sample score beats
        that by more than ``VERIFY_TOLERANCE`` (at most ``MAX_VERIFIED_FITS``); the fit kept
        is the one of highest verified score
        (``dkernel.kernels.width_selection.verified_fit``). None otherwise.
    kernel_ : Kernel
        The fitted kernel function (used for out-of-sample rows).
    n_components_ : int
        The embedding dimension used.
    embedding_ : ndarray (n_samples, n_components)
        ``E Λ^{1/2}`` (equals scikit-learn ``KernelPCA.fit_transform`` up to sign).
    eigenvalues_, eigenvectors_ : ndarray
        (``eigenvectors_`` is None on the Nyström path.)
    approximation_ : {'exact', 'nystrom'}
        The path that ran.
    nystrom_ : NystromEmbedding or None
        The fitted landmark embedding on the Nyström path.
    labels_, cluster_centers_ : ndarray
        When ``n_clusters`` is set.

    See Also
    --------
    dkernel.KECA : The uncentered axes ordered by entropy, clustered by angle.
    dkernel.NystromEmbedding : Kernel PCA of a landmark approximation, for large N.
    dkernel.SpectralClustering : Spectral clustering that predicts new points.
    sklearn.decomposition.KernelPCA : scikit-learn's kernel PCA.

    Notes
    -----
    O(N² p) kernel work (blocked, parallel) plus the dense eigen-solve and O(N²) memory;
    beyond the memory limit the Nyström path (``approximation``). From 2 000 points the few
    leading pairs come from Lanczos, a few dozen O(N²) products with the kernel, instead of
    LAPACK's O(N³) reduction (``dkernel.linalg.eigen.dense_eigh``): 8.8 s at 10 000 points
    where LAPACK took 85.6 s (``benchmarks/results/kpca_scale.md``).

    References
    ----------
    - Schölkopf, Smola & Müller (1998), "Nonlinear component analysis as a kernel eigenvalue
      problem", *Neural Computation* 10(5) [Scholkopf1998]: kernel PCA.
    - Løkse (2020), *Leveraging Kernels for Unsupervised Learning*, PhD thesis, Paper I, Eq. 5
      [Lokse2020]: the centred kernel PCA embedding that PCK spectral clustering uses.
    - Rousseeuw (1987), "Silhouettes" [Rousseeuw1987] (``sigma_fraction='auto'``).

    Examples
    --------
    >>> import numpy as np
    >>> X = np.random.default_rng(0).normal(size=(50, 3))
    >>> KernelPCAEmbedding(n_components=2).fit_transform(X).shape
    (50, 2)
    """

    _parameter_constraints: dict = {
        **_DenseKernelEmbedding._parameter_constraints,
        "centered": ["boolean"],
    }
    _sigma_fraction_candidates = KPCA_SIGMA_FRACTIONS
    _components_per_cluster = KPCA_COMPONENTS_PER_CLUSTER

    def __init__(
        self,
        n_components: int | None = None,
        *,
        kernel: str = "rbf",
        scale_neighbors: int = DEFAULT_LOCAL_SCALING_NEIGHBORS,
        sigma: float | None = None,
        sigma_fraction: float | str = "auto",
        centered: bool = True,
        n_clusters: int | None = None,
        n_init: int = 10,
        block_rows: int | None = None,
        dtype: str = "float64",
        max_memory: str | float | None = None,
        random_state: int | None = None,
        n_neighbors: int | None = None,
        approximation: str = "auto",
        n_landmarks: int = 1000,
    ) -> None:
        super().__init__(
            n_components,
            kernel=kernel,
            scale_neighbors=scale_neighbors,
            sigma=sigma,
            sigma_fraction=sigma_fraction,
            n_clusters=n_clusters,
            n_init=n_init,
            block_rows=block_rows,
            dtype=dtype,
            max_memory=max_memory,
            random_state=random_state,
            n_neighbors=n_neighbors,
            approximation=approximation,
            n_landmarks=n_landmarks,
        )
        self.centered = centered

    @property
    def _centered(self) -> bool:  # type: ignore[override]
        return bool(self.centered)

    @property
    def _nystrom_embedding(self) -> str:  # type: ignore[override]
        return "kpca" if self.centered else "uncentered"

    def _embed(self, K: np.ndarray):
        return kpca_embedding(K, self.n_components_, centered=self.centered)

    def _cluster(self, Z: np.ndarray) -> np.ndarray:
        labels, centers, _ = euclidean_kmeans(
            Z, self.n_clusters, n_init=self.n_init, random_state=self.random_state
        )
        self.cluster_centers_ = centers
        return labels

    def _assign(self, Z: np.ndarray) -> np.ndarray:
        d = ((Z[:, None, :] - self.cluster_centers_[None, :, :]) ** 2).sum(axis=2)
        return np.argmin(d, axis=1)


class KECA(_DenseKernelEmbedding):
    """Kernel entropy component analysis (Jenssen 2010 [Jenssen2010]) with angular k-means.

    Eigenpairs of the *uncentered* RBF kernel are ordered by their Rényi-entropy contribution
    ``ψ_j = λ_j (e_jᵀ 1)²`` and the top ``n_components`` kept; ``eigen_indices_`` says which
    (0 = largest eigenvalue). With ``n_clusters`` set, ``fit`` clusters the embedding with
    angular k-means started from the KECA initialisation (Agersborg 2012, Eq. 4.17
    [Agersborg2012]).

    Parameters are those of :class:`KernelPCAEmbedding` without ``centered``. Its
    ``sigma_fraction='auto'`` (the default) with ``n_clusters`` compares the widths 0.35,
    0.5, 1/√2 and 1 × the median distance (``dkernel.kernels.widths.KECA_SIGMA_FRACTIONS``),
    each with k and 2k entropy components when ``n_components`` is None
    (``KECA_COMPONENT_MULTIPLES``), as ``KernelPCAEmbedding`` compares its widths: the
    partition with the highest silhouette in the 0.5 × median kernel is kept
    (``dkernel.kernels.width_selection``). Angular k-means needs the clusters on distinct
    axes, which a narrow kernel gives on some data and more axes than clusters on others: on
    the 35 real sets of ``benchmarks/bench_realdata.py``'s harness (seeds 0-2) mean ARI 0.424,
    ≥ k-means on 21 (1/√2 with k axes, the former default: 0.344, 14; k-means 0.397), on the
    23-set suite 0.560 (0.540). Without ``n_clusters`` 'auto' is 1/√2.

    Attributes
    ----------
    n_components_candidates_ : ndarray or None
        The dimension of each setting 'auto' compared (beside ``sigma_fraction_candidates_``
        and ``sigma_fraction_scores_``); None when no dimensions were compared.
    Other attributes : see :class:`KernelPCAEmbedding`.

    See Also
    --------
    dkernel.KernelPCAEmbedding : Centred kernel PCA of the same kernel.
    dkernel.NystromEmbedding : KECA of a landmark approximation (``embedding='keca'``).
    dkernel.MSSC : KECA (or KPCA, NJW) on mean-shift partitions.

    Notes
    -----
    Same cost as :class:`KernelPCAEmbedding`. scikit-learn has no KECA.

    References
    ----------
    - Jenssen (2010), "Kernel entropy component analysis", *IEEE Transactions on Pattern
      Analysis and Machine Intelligence* 32(5) [Jenssen2010].
    - Agersborg (2012), *Mean Shift Spectral Clustering Using Kernel Entropy Component
      Analysis*, MSc thesis, ch. 4, Eq. 4.5–4.6 (entropy estimate) and Eq. 4.17 (angular
      k-means initialisation) [Agersborg2012].
    """

    _centered = False
    _nystrom_embedding = "keca"
    _sigma_fraction_candidates = KECA_SIGMA_FRACTIONS

    def _width_settings(self, n_samples: int) -> list[float | dict[str, Any]]:
        """Each width with k and 2k entropy components, unless ``n_components`` is given."""
        fractions = super()._width_settings(n_samples)
        if self.n_components is not None or self.n_clusters is None:
            return fractions
        return [
            {"sigma_fraction": fraction, "n_components": multiple * self.n_clusters}
            for fraction in fractions
            for multiple in KECA_COMPONENT_MULTIPLES
            if multiple * self.n_clusters <= min(n_samples, WIDTH_SAMPLE)
        ]

    def _choose_sigma_fraction(self, X: Any) -> WidthResolution:
        found = super()._choose_sigma_fraction(X)
        compared = found.settings or []
        self.n_components_candidates_ = (
            np.array([s["n_components"] for s in compared], dtype=int)
            if compared and "n_components" in compared[0]
            else None
        )
        return found

    def _embed(self, K: np.ndarray):
        shared = getattr(self, "_width_selection_shared", None)
        if shared is None:
            return keca_embedding(K, self.n_components_)
        # a clone of sigma_fraction='auto': its k- and 2k-axis settings of one width have the
        # same kernel, so the leading eigenpairs solved for the first serve the second when
        # they prove its axes (dkernel.spectral.dense.entropy_candidates)
        key = ("keca-eigenpairs", self.sigma_)
        pairs = entropy_candidates(K, self.n_components_, start=shared.get(key))
        shared[key] = pairs
        return keca_of_pairs(*pairs, self.n_components_)

    def _cluster(self, Z: np.ndarray) -> np.ndarray:
        labels, centers, _ = angular_kmeans(
            Z, self.n_clusters, n_init=self.n_init, random_state=self.random_state
        )
        self.cluster_centers_ = centers
        return labels

    def _assign(self, Z: np.ndarray) -> np.ndarray:
        return np.argmax(normalize_rows(Z) @ self.cluster_centers_.T, axis=1)
