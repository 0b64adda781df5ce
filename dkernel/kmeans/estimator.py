"""``dkernel.KernelKMeans``: kernel k-means on NumPy or Dask input, exact or on a feature map.

Two solvers run the same Lloyd iterations (:mod:`dkernel.kmeans.lloyd`): ``'exact'`` on the
kernel matrix of all points ([MLSlides2012], slides 34-38; O(N²) memory, refused beyond the
memory limit) and ``'nystrom'`` as k-means in an explicit feature space — the Nyström map of
any registered kernel, or the kernel's own finite map (the ``landmark`` kernel's) — fitted on a
uniform sample of at most ``kmeans_max_samples`` points, every point then assigned chunk by chunk.
``'auto'`` compares their estimated costs. ``predict`` and ``transform`` evaluate the kernel of
new points against the model (training points or landmarks), lazily per chunk for Dask input.
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
from sklearn.utils._param_validation import HasMethods, Interval, StrOptions

from dkernel._budget import check_budget, format_size, memory_limit
from dkernel._random import derive_rng, seed_from_random_state
from dkernel._validation import (
    ParameterConstraintsMixin,
    as_numpy,
    check_is_fitted,
    validate_input,
)
from dkernel.errors import (
    DKernelDeprecationWarning,
    InvalidInputError,
    warn_caller,
    warn_if_clusters_lost,
)
from dkernel.kernels.aliases import resolve_renamed
from dkernel.kernels.nystrom import (
    NystromFeatureMap,  # noqa: F401  (re-exported by dkernel.kmeans)
    explicit_feature_map,
    landmark_kernel_params,
)
from dkernel.kernels.registry import Kernel, kernel_input_tags, kernel_nan_args, make_kernel
from dkernel.kernels.width_selection import rbf_width_from_data, resolve_sigma_fraction
from dkernel.kernels.widths import (
    DEFAULT_LOCAL_SCALING_NEIGHBORS,
    KERNEL_KMEANS_SIGMA_FRACTION,
    KERNEL_KMEANS_SIGMA_FRACTIONS,
    RBF_SIGMA_MAX,
    RBF_SIGMA_MIN,
)
from dkernel.kmeans.features import features, n_features
from dkernel.kmeans.lloyd import (
    INITS,
    FeatureSpace,
    GramSpace,
    best_of,
    dense_kernel,
    feature_centres,
    gram_centres,
    information_criteria,
    symmetrize,
)
from dkernel.kmeans.spectrum import normalized_kernel_spectrum
from dkernel.linalg.threads import map_on_cores, one_blas_thread
from dkernel.model_order import (
    ModelOrder,
    candidate_range,
    information_criterion_model_order,
    knn_graph_embedding,
    spectrum_model_order,
)
from dkernel.rows import take_rows
from dkernel.runtime.shared import share, with_shared

SOLVERS = ("auto", "exact", "nystrom")
CRITERIA = ("bic", "aic")
LANDMARK_METHODS = ("kmeans++", "uniform")
#: Defaults (see the class docstring for how they were chosen).
DEFAULT_N_LANDMARKS = 300
DEFAULT_KMEANS_SAMPLE = 50_000
#: ``solver='auto'`` takes the exact solver when its estimated work is at most this many times
#: the Nyström solver's (exactness is worth some time) and its memory fits.
AUTO_COST_RATIO = 2.0
#: Full-cost Lloyd steps per run assumed by the cost model: the exact solver pays O(n² k) for
#: its first steps only (later ones update the sums of the points that moved), the Nyström
#: solver O(n m k) for every step.
EXACT_FULL_STEPS = 3
FEATURE_STEPS = 20
#: Rows per task of the assignment pass over NumPy input.
ASSIGN_ROWS = 65_536
#: The rule of ``n_clusters='auto'``: the timescale gap of the k-NN graph of the points Lloyd
#: runs on (:func:`dkernel.model_order.knn_graph_embedding`, the spectral estimators' graph).
#: ``benchmarks/bench_defaults.py``'s 23 sets, 2 000 points, seed 0, candidates 2 .. 45 (1 ..
#: 45 for the criteria), true k found / mean ARI at the chosen k (0.578 at the true k):
#: timescale gap of the k-NN graph 10 / 0.507; eigengap of the normalized RBF kernel
#: ``D^-1/2 K D^-1/2`` (the estimator's own kernel and width) 8 / 0.465; its timescale gap
#: 6 / 0.416; eigengap of the k-NN graph 3 / 0.370; BIC 2 / 0.305 (the largest k on 10 sets);
#: AIC 1 / 0.261. BIC cannot be mended by a parameter count: the dimension D cancels between
#: the likelihood and the penalty, so BIC adds a cluster whenever the inertia falls by more
#: than about ``ln(M) / M`` (0.4 % at M = 2 000), which a Gaussian kernel's inertia does up to
#: k ≈ √M.
AUTO_RULE = "timescale-gap"
#: The rule of 'auto' for ``kernel='precomputed'`` (no coordinates for a k-NN graph): the
#: eigengap of the normalized kernel matrix, the better of the two spectrum rules on it.
PRECOMPUTED_AUTO_RULE = "eigengap"


def _exact_memory(n: int, k: int) -> float:
    """Bytes of the exact solver: the kernel, the columns of moved points (≤ 1/4 of it), the
    (n, k) sums and distances."""
    return 8.0 * n * n * 1.25 + 8.0 * n * k * 6


def _distance_block(X: np.ndarray, model: Any, point_norms: bool) -> np.ndarray:
    return model.distances(X, point_norms=point_norms)


class KernelKMeans(
    ParameterConstraintsMixin,
    ClassNamePrefixFeaturesOutMixin,
    TransformerMixin,
    ClusterMixin,
    BaseEstimator,
):
    """Kernel k-means with any registered kernel, exact or on a Nyström feature map.

    Minimises ``Σ_i ||φ(x_i) - m_c(i)||²`` in the feature space of the kernel by Lloyd's
    iterations, the distance to a centre written with kernel values only ([MLSlides2012],
    slides 34-38), from k-means++ seeds drawn in feature space or from the kernel PCA read-out
    (slides 72-75). With a sequence of candidate numbers of clusters the one of lowest AIC or
    BIC is kept (slide 87); ``n_clusters='auto'`` chooses K = 2 .. ``max_clusters`` by the
    timescale gap of the points' k-NN graph before fitting that K alone, the evidence in
    ``model_order_`` (:mod:`dkernel.model_order`).

    Parameters
    ----------
    n_clusters : int, sequence of int or 'auto'
        Number of clusters K. A sequence (e.g. ``range(1, 11)``) fits every K in it and keeps
        the one of lowest ``criterion``. 'auto' compares the candidates of
        :func:`dkernel.model_order.candidate_range` (2 .. ``max_clusters``) by
        :mod:`dkernel.model_order`'s timescale-gap rule on the nearly mutual self-tuning k-NN
        graph of the points Lloyd runs on (:func:`~dkernel.model_order.knn_graph_embedding`,
        the graph of :class:`~dkernel.SpectralClustering`): the largest ratio
        ``(1 − λ_{k+1}) / (1 − λ_k)`` of its normalized spectrum. Then only the chosen K is
        fitted. With ``kernel='precomputed'`` (no coordinates for a graph), or at most 7
        distinct points (too few for the graph's scales), the rule is the eigengap of the
        normalized kernel ``D^-1/2 K D^-1/2``. Why this rule and not the
        criterion: see ``AUTO_RULE`` and the Notes. None is the former spelling of 'auto'
        (deprecated: a ``FutureWarning``; removed in the next release).
    kernel : str or callable
        A kernel of the registry (:func:`dkernel.kernels.registry.make_kernel`): ``'rbf'``,
        ``'local_scaling'``, ``'knn'``, ``'knn_mean'``, ``'landmark'``, ``'cosine'``, ``'pck'``
        (fitted on X, or ``kernel_params={'model': fitted_pck}``), ``'precomputed'`` (X is the
        kernel matrix in ``fit``, kernel rows against the training points in ``predict``) or
        ``f(X, Y)``.
        X with NaN (missing values): ``'pck'`` models them (PCKID); ``'rbf'`` and the adaptive
        kernels fitted on data with NaN compare rows by their expected squared distance ``‖x̃ −
        ỹ‖² + r_x + r_y`` (missing entries at their conditional means given the observed ones,
        plus their conditional variance, under a Gaussian of the training rows fitted by EM,
        :mod:`dkernel.kernels.missing`), and new rows with the same model; every
        other kernel refuses them. Default ``'rbf'``: so NaN is taken at the defaults.
    kernel_params : dict, optional
        Parameters of the kernel (``{'scale_neighbors': 7}`` for 'local_scaling',
        ``{'n_neighbors': 10}`` for 'knn', ``{'n_landmarks': 500}``, ...).
    sigma : float, optional
        RBF width; ``sigma_fraction`` × the median pairwise distance (on a sample) when None.
    sigma_fraction : float or 'auto'
        Fraction of the median distance for the RBF rule of thumb. 'auto' (rbf without
        ``sigma`` only): kernel k-means at 0.5, 1 and 2 on at most 3 000 rows, keeping the
        width whose partition has the highest silhouette in the 0.5 kernel's feature space
        ([Rousseeuw1987]; ``dkernel.kernels.width_selection``). 0.5 alone follows the suite's shapes
        (mean ARI 0.578 on ``benchmarks/bench_defaults.py``'s 23 sets) and 2 alone real tables
        (0.404 on ``bench_realdata.py``'s 35, k-means 0.397); 'auto' 0.589 and 0.419. Any
        other kernel: 0.5, unused.
    solver : {'auto', 'exact', 'nystrom'}
        ``'exact'``: Lloyd's iterations on the kernel matrix of all points (O(N²) memory,
        refused with a ``ResourceLimitError`` beyond ``max_memory``). ``'nystrom'``: k-means in
        the explicit feature space of the kernel — the kernel's own map for ``'landmark'``,
        the Nyström map on ``n_landmarks`` landmarks otherwise — on at most
        ``kmeans_sample`` points, then every point assigned to its nearest centre. ``'auto'``:
        the exact solver when its memory fits and its estimated work is at most twice the
        Nyström solver's: up to about 4 000 points with the default 300 landmarks (exact took
        0.2 s at 2 000 points and 6 s at 10⁴, Nyström 0.5-1 s at 10⁴, on
        ``benchmarks/bench_kernel_kmeans.py``). The choice is in ``solver_``.
    n_landmarks : int
        Nyström landmarks m (every point when m >= N).
    landmarks : {'kmeans++', 'uniform'}
        How the Nyström landmarks are drawn from the training points.
    init : {'k-means++', 'kpca'}
        First centres: k-means++ seeding with feature-space distances, or (first run) the
        kernel PCA read-out — k-means on the top-K components of the centered kernel, the
        relaxed solution of the kernel k-means objective — the other runs from k-means++.
    n_init : int
        Runs per K; the one of lowest inertia is kept.
    max_iter : int
        Lloyd steps per run.
    tol : float
        A run stops when the centres move by at most ``tol`` × the total variance in feature
        space (squared shift summed over the clusters); 0 runs until no label changes.
    criterion : {'bic', 'aic'}
        Selects K when a sequence of K is given (``information_criterion_``; then the rule of
        ``model_order_``). 'auto' does not use it; ``aic_`` and ``bic_`` are then those of the
        chosen K.
    max_clusters : int, optional
        Largest K tried by ``n_clusters='auto'``. None (default): derived from the data,
        ``round(√n)`` clipped to [10, 50] and at most n − 1
        (:func:`dkernel.model_order.candidate_range`).
    kmeans_max_samples : int
        Nyström solver: Lloyd's iterations run on a uniform sample of at most this many points
        (all of them below); every point is then assigned to the nearest centre. Formerly
        ``kmeans_sample``.
    max_memory : str or float, optional
        The memory limit of the exact solver (default ``DKERNEL_MAX_MEMORY`` or 4 GiB).
    random_state : int, optional
        Seed of the landmarks, the sample and the k-means++ draws.
    kmeans_sample : int, optional
        Deprecated: the former name of ``kmeans_max_samples`` (a ``FutureWarning``), kept for
        one release.

    Attributes
    ----------
    labels_ : ndarray of int64 (n_samples,)
        Nearest centre of every training point.
    inertia_ : float
        ``Σ_i ||φ(x_i) - m_labels(i)||²`` over the training points (for the Nyström solver in
        the approximated feature space).
    n_iter_ : int
        Lloyd steps of the kept run.
    n_clusters_ : int
        The K kept.
    cluster_centers_ : ndarray (K, r) or None
        Centres in the explicit feature space (Nyström solver); None for the exact solver,
        whose centres are the means of their members' images (``model_.coef``).
    solver_ : {'exact', 'nystrom'}
        The solver that ran.
    kernel_ : Kernel
        The fitted kernel (the RBF width resolved, the adaptive kernels' radii measured).
    sigma_ : float or None
        The RBF width (None for other kernels).
    sigma_fraction_ : float
        The fraction used (chosen by 'auto').
    sigma_fraction_candidates_, sigma_fraction_scores_ : ndarray or None
        The fractions 'auto' compared and their silhouettes (None otherwise).
    landmark_indices_ : ndarray or None
        Training rows used as Nyström landmarks (None for the exact solver and the landmark
        kernel's own features).
    n_clusters_candidates_ : ndarray of int
        The K compared: the sequence given, the one K of an integer ``n_clusters``, or those
        'auto' scored (2 .. ``max_clusters``, fewer when the graph has fewer eigenvalues).
    n_clusters_scores_ : ndarray (n_candidates,) or None
        The rule's score of every candidate: ``information_criterion_`` for a sequence (the
        lowest wins), the timescale gap (or, precomputed, the eigengap) for 'auto' (the
        highest wins); None for an integer ``n_clusters``.
    model_order_ : dkernel.model_order.ModelOrder or None
        The evidence of the choice of K (candidates, scores, ``rule``: ``criterion`` for a
        sequence, ``'timescale-gap'`` or ``'eigengap'`` for 'auto', with the spectrum in
        ``details['spectrum']``); None for an integer ``n_clusters``.
    inertias_, aic_, bic_ : ndarray (n_fitted,)
        Inertia and criteria of the best run of each K fitted (on the points Lloyd ran on):
        every K of a sequence or integer (aligned with ``n_clusters_candidates_``); with
        'auto' the chosen K alone (one value). To compare K by the criterion, pass a sequence
        (``range(1, 11)``: K = 1, no structure, is a model the criteria can score).
    information_criterion_ : ndarray (n_fitted,)
        ``aic_`` or ``bic_``, whichever ``criterion`` names.
    effective_dimension_ : float
        D of the criteria: the participation ratio ``(Σλ)² / Σλ²`` of the centered kernel's
        eigenvalues.
    model_ : GramCentres or FeatureCentres
        What ``predict`` and ``transform`` evaluate.

    See Also
    --------
    dkernel.kmeans.lloyd.kernel_kmeans : The same on a kernel matrix, as a function.
    dkernel.SpectralClustering : k-means on a normalized spectral embedding.

    Notes
    -----
    AIC and BIC read a clustering as a mixture of spherical Gaussians with one variance in a
    feature space of dimension D (:func:`~dkernel.kmeans.lloyd.information_criteria`); in a
    kernel's infinite feature space D is the effective dimension of the data. As the notes
    show for k-means (slides 90-97), the criteria favour splitting elongated or unequal
    clusters; AIC picks more clusters than BIC. Where the model holds they find K (a linear
    kernel on R15 and D31: 15 and 31), but an RBF feature space is far from it: on the 22
    labelled sets of ``benchmarks/bench_defaults.py`` (600 points, K from 1 to
    max(10, K + 4), the default width) BIC kept the true K on 2 and more clusters on 20 (the
    largest tried on 16), AIC on 1 and 21. A dimension from the clusters' own scatter instead
    of the data's did not help (it over-split as often, or kept one cluster), and cannot: D
    cancels between the likelihood and the penalty, so BIC adds a cluster whenever the
    inertia falls by more than about ``ln(M) / M``, which a Gaussian kernel's inertia does up
    to K ≈ √M. So 'auto' does not use the criteria. On the 23 sets of
    ``benchmarks/bench_defaults.py`` (2 000 points, seed 0, default width; true K found, mean
    ARI at the chosen K; 0.578 at the true K): the k-NN graph's timescale gap 10 of 23, 0.507
    (the 'auto' rule); the eigengap of the normalized RBF kernel 8, 0.465; its timescale gap
    6, 0.416; the k-NN graph's eigengap 3, 0.370; BIC over K = 1 .. 45: 2, 0.305; AIC 1,
    0.261. Read any of them as a guide, and give K when it is known.

    Cost: 'auto' adds the k-NN graph of the points Lloyd runs on (as
    :class:`~dkernel.SpectralClustering`'s: the neighbour search, Lanczos on O(N g) entries)
    and fits one K. Exact, O(N² p) kernel evaluations, O(N² K) per run for the first Lloyd steps and
    O(N · moved · K) for the later ones, O(N²) memory. Nyström: O(N m p) for the features of
    every point (in the final assignment pass, chunk by chunk), O(m³) for the landmark basis,
    O(S m K) per Lloyd step on the S = min(N, ``kmeans_max_samples``) sampled points; memory
    O(S m) — never N × N. ``predict``: O(N_train p) (exact) or O(m p) (Nyström) per point.

    References
    ----------
    - Kernel k-means, its kernel PCA read-out and the AIC/BIC choice of K [MLSlides2012]
      (slides 34-38, 72-75, 87).
    - Dhillon, Guan & Kulis (2004), "Kernel k-means, spectral clustering and normalized
      cuts", KDD [Dhillon2004].
    - Chitta, Jin, Havens & Jain (2011), "Approximate kernel k-means: solution to large scale
      kernel clustering", KDD [Chitta2011] (k-means on a Nyström map).
    - Rousseeuw (1987), "Silhouettes" [Rousseeuw1987] (``sigma_fraction='auto'``).

    Examples
    --------
    >>> from sklearn.datasets import make_circles
    >>> X, y = make_circles(300, factor=0.3, noise=0.05, random_state=0)
    >>> km = KernelKMeans(2, sigma=0.2, random_state=0).fit(X)
    >>> km.solver_, bool((km.predict(X) == km.labels_).all())
    ('exact', True)
    """

    _parameter_constraints: dict = {
        # a sequence of K is for Python callers; a job writes one int or 'auto' (null: the
        # deprecated spelling of 'auto')
        "n_clusters": [
            Interval(Integral, 1, None, closed="left"),
            StrOptions({"auto"}),
            HasMethods(["__iter__", "__len__"]),
            None,
        ],
        # names are checked by make_kernel, whose message lists the registered ones
        "kernel": [str, callable],
        "kernel_params": [dict, None],
        "sigma": [Interval(Real, RBF_SIGMA_MIN, RBF_SIGMA_MAX, closed="both"), None],
        "sigma_fraction": [Interval(Real, 0, None, closed="neither"), StrOptions({"auto"})],
        "solver": [StrOptions(set(SOLVERS))],
        "n_landmarks": [Interval(Integral, 1, None, closed="left")],
        "landmarks": [StrOptions(set(LANDMARK_METHODS))],
        "init": [StrOptions(set(INITS))],
        "n_init": [Interval(Integral, 1, None, closed="left")],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "tol": [Interval(Real, 0, None, closed="left")],
        "criterion": [StrOptions(set(CRITERIA))],
        "max_clusters": [Interval(Integral, 2, None, closed="left"), None],
        "kmeans_max_samples": [Interval(Integral, 2, None, closed="left")],
        # a size such as "4GiB" (jobs) or a number of bytes (Python callers only)
        "max_memory": [str, Real, None],
        "random_state": ["random_state", np.random.Generator],
        # the former name of kmeans_max_samples (dkernel.kernels.aliases.RENAMED_PARAMETERS)
        "kmeans_sample": [Interval(Integral, 2, None, closed="left"), None],
    }

    def __init__(
        self,
        n_clusters: Any = 8,
        *,
        kernel: Any = "rbf",
        kernel_params: dict | None = None,
        sigma: float | None = None,
        sigma_fraction: float | str = "auto",
        solver: str = "auto",
        n_landmarks: int = DEFAULT_N_LANDMARKS,
        landmarks: str = "kmeans++",
        init: str = "k-means++",
        n_init: int = 10,
        max_iter: int = 300,
        tol: float = 1e-4,
        criterion: str = "bic",
        max_clusters: int | None = None,
        kmeans_max_samples: int = DEFAULT_KMEANS_SAMPLE,
        max_memory: str | float | None = None,
        random_state: int | None = None,
        kmeans_sample: int | None = None,
    ) -> None:
        self.n_clusters = n_clusters
        self.kernel = kernel
        self.kernel_params = kernel_params
        self.sigma = sigma
        self.sigma_fraction = sigma_fraction
        self.solver = solver
        self.n_landmarks = n_landmarks
        self.landmarks = landmarks
        self.init = init
        self.n_init = n_init
        self.max_iter = max_iter
        self.tol = tol
        self.criterion = criterion
        self.max_clusters = max_clusters
        self.kmeans_max_samples = kmeans_max_samples
        self.max_memory = max_memory
        self.random_state = random_state
        self.kmeans_sample = kmeans_sample

    def __sklearn_tags__(self):
        return kernel_input_tags(super().__sklearn_tags__(), self.kernel, nan=True)

    @property
    def _n_features_out(self) -> int:
        """One output per centre (``transform``)."""
        return int(self.n_clusters_)

    # -- validation ------------------------------------------------------------------------
    def _auto(self) -> bool:
        """Whether K is chosen over the derived candidates ('auto', or the deprecated None)."""
        return self.n_clusters is None or (
            isinstance(self.n_clusters, str) and self.n_clusters == "auto"
        )

    def _candidates(self, n: int) -> list[int]:
        """The numbers of clusters to fit, checked against ``n`` samples."""
        owner = type(self).__name__
        if self._auto():
            found = candidate_range(n, self.max_clusters, owner=f"{owner}(n_clusters='auto')")
            return [int(k) for k in found]
        if isinstance(self.n_clusters, Integral):
            values = [self.n_clusters]
        else:
            values = list(self.n_clusters)
            bad = [v for v in values if not isinstance(v, Integral) or isinstance(v, bool)]
            if not values or bad or isinstance(self.n_clusters, str):
                raise InvalidInputError(
                    f"The 'n_clusters' parameter of {owner} must be an int >= 1, a non-empty "
                    f"sequence of such ints or 'auto'. Got {self.n_clusters!r} instead."
                )
        values = sorted({int(v) for v in values})
        if values[0] < 1 or values[-1] > n:
            raise InvalidInputError(
                f"The 'n_clusters' parameter of {owner} must be in [1, n_samples = {n}]. Got "
                f"{self.n_clusters!r} instead."
            )
        return values

    def _make_kernel(self, X: Any, seed: int | None) -> Kernel:
        if self.sigma is not None and not (isinstance(self.kernel, str) and self.kernel == "rbf"):
            raise InvalidInputError(
                f"The 'sigma' parameter of {type(self).__name__} is the width of the rbf "
                f"kernel; got kernel={self.kernel!r}. Pass that kernel's parameters in "
                "kernel_params."
            )
        params = landmark_kernel_params(
            self.kernel,
            self.kernel_params,
            seed=seed,
            sigma=self.sigma,
            sigma_fraction=self.sigma_fraction_,
        )
        return make_kernel(self.kernel, X, **params)

    def _choose_sigma_fraction(self, X: Any, seed: int | None) -> None:
        """``sigma_fraction_`` and, for 'auto' with a data-chosen rbf width, its evidence."""
        found = resolve_sigma_fraction(
            self,
            X,
            seed,
            candidates=KERNEL_KMEANS_SIGMA_FRACTIONS,
            fallback=KERNEL_KMEANS_SIGMA_FRACTION,
            chooses=rbf_width_from_data(self),
            n_clusters="auto" if self._auto() else self.n_clusters,
            kmeans_max_samples=self._kmeans_max_samples(),
            kmeans_sample=None,
        )
        self.sigma_fraction_ = found.fraction
        self.sigma_fraction_candidates_, self.sigma_fraction_scores_ = (
            found.candidates,
            found.scores,
        )

    # -- solver choice -----------------------------------------------------------------------
    def _choose_solver(self, n: int, p: int, kernel: Kernel, k: int) -> str:
        """The solver that runs, by the cost model of ``solver='auto'``; the exact solver's
        memory is checked against the limit (refused with the scalable alternative)."""
        owner = type(self).__name__
        memory = _exact_memory(n, k)
        chosen = self.solver
        if chosen == "auto":
            if kernel.precomputed:
                chosen = "exact"  # the kernel matrix is in memory already
            else:
                m = min(n, self.n_landmarks)
                if kernel.feature_map is not None:
                    m = n_features(kernel.feature_map)
                s = min(n, self._kmeans_max_samples())
                steps = self.n_init * EXACT_FULL_STEPS
                exact = n * n * (p + steps * k)
                nystrom = n * m * (p + k) + m**3 + s * m * (p + self.n_init * FEATURE_STEPS * k)
                fits = memory <= memory_limit(self.max_memory)
                chosen = "exact" if fits and exact <= AUTO_COST_RATIO * nystrom else "nystrom"
        if chosen == "exact":
            check_budget(
                what=f"Exact kernel k-means of {owner} on {n} points (a dense {n} x {n} kernel)",
                memory_bytes=memory,
                max_memory=self.max_memory,
                alternative=f"solver='nystrom' ({owner} on a Nyström feature map of "
                f"n_landmarks points: memory O(n m), about "
                f"{format_size(8.0 * min(n, self._kmeans_max_samples()) * self.n_landmarks)} here).",
            )
        return chosen

    # -- fit -------------------------------------------------------------------------------
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X: Any, y: Any = None) -> KernelKMeans:
        """Fit the centres (for every candidate K) and label the training points.

        Parameters
        ----------
        X : array-like or dask array of shape (n_samples, n_features)
            Training data (the square kernel matrix for ``kernel='precomputed'``).
        y : ignored

        Returns
        -------
        self
        """
        if self.n_clusters is None:
            warn_caller(
                f"n_clusters=None of {type(self).__name__} is deprecated and will be removed in "
                "the next release; use n_clusters='auto' (the same choice of K).",
                DKernelDeprecationWarning,
            )
        X = validate_input(self, X, reset=True, min_samples=2, **kernel_nan_args(self.kernel))
        # the GEMMs here are thin (the inner or outer dimension is p, K or m): one BLAS thread
        # each, the cores used by blocks of rows (dkernel.linalg.threads)
        with one_blas_thread():
            run, sample = self._fit_centres(X)
            if sample is None:
                labels, inertia = run.labels, float(run.inertia)
            else:
                labels, inertia = self._assign_all(X)
        self._set_labels(labels, inertia)
        return self

    def _fit_centres_only(self, X: da.Array) -> bool:
        """:meth:`fit` without labelling every row when Lloyd ran on a sample: a job then
        writes the labels of :meth:`_lazy_labels` chunk by chunk, never held whole. Returns
        whether ``labels_`` and ``inertia_`` are set (Lloyd ran on every row)."""
        X = validate_input(self, X, reset=True, min_samples=2, **kernel_nan_args(self.kernel))
        with one_blas_thread():
            run, sample = self._fit_centres(X)
        if sample is None:
            self._set_labels(run.labels, float(run.inertia))
        return sample is None

    def _lazy_labels(self, X: da.Array) -> tuple[da.Array, da.Array]:
        """Nearest centre of every row of ``X`` and its squared distance (clipped at 0), lazy
        and from the same distances: computed together, each chunk's distances once."""
        d = self._lazy_distances(X, point_norms=True)
        return d.argmin(axis=1).astype(np.int64), da.maximum(d.min(axis=1), 0)

    def _set_labels(self, labels: np.ndarray, inertia: float) -> None:
        self.labels_, self.inertia_ = labels, inertia
        warn_if_clusters_lost(int(np.unique(labels).size), self.n_clusters_)

    def _fit_centres(self, X: Any) -> tuple[Any, np.ndarray | None]:
        """Everything :meth:`fit` learns but the labels: the kept Lloyd run and the rows it
        ran on (None: every row)."""
        n, p = int(X.shape[0]), int(X.shape[1])
        candidates = self._candidates(n)
        seed = seed_from_random_state(self.random_state)
        self._choose_sigma_fraction(X, seed)
        kernel = self._make_kernel(X, seed)
        self.solver_ = self._choose_solver(n, p, kernel, max(candidates))
        self.landmark_indices_ = None
        if self.solver_ == "exact":
            X_fit = rows = as_numpy(X, np.float64)
            reference = kernel.landmark_data(X_fit, np.arange(n))
            K = symmetrize(dense_kernel(kernel, X_fit, reference))
            space: GramSpace | FeatureSpace = GramSpace(K)
            sample = None
        else:
            kernel, feature_map = self._feature_map(X, kernel, seed)
            sample = self._sample(n, seed)
            rows = as_numpy(X, np.float64) if sample is None else take_rows(X, sample, np.float64)
            space = FeatureSpace(features(feature_map, rows))
        self.kernel_ = kernel
        self.sigma_ = kernel.params.get("sigma") if kernel.name == "rbf" else None
        self.effective_dimension_ = space.effective_dimension()

        self.model_order_ = self.n_clusters_scores_ = None
        if self._auto():
            # k from the spectrum of the points Lloyd runs on; only that k is fitted
            self.model_order_ = self._model_order(rows, space, np.asarray(candidates), seed)
            self.n_clusters_candidates_ = self.model_order_.candidates
            self.n_clusters_scores_ = self.model_order_.scores
            candidates = [self.model_order_.n_clusters]
        else:
            self.n_clusters_candidates_ = np.asarray(candidates, dtype=np.int64)

        runs = []
        for k in candidates:
            rng = derive_rng(seed, "kernel-kmeans", k)
            runs.append(
                best_of(
                    space,
                    k,
                    n_init=self.n_init,
                    init=self.init,
                    max_iter=self.max_iter,
                    tol=self.tol,
                    rng=rng,
                )
            )
        criteria = [
            information_criteria(
                r.inertia, np.bincount(r.labels, minlength=k), space.n, self.effective_dimension_
            )
            for r, k in zip(runs, candidates, strict=True)
        ]
        self.inertias_ = np.array([r.inertia for r in runs])
        self.aic_ = np.array([c.aic for c in criteria])
        self.bic_ = np.array([c.bic for c in criteria])
        self.information_criterion_ = self.aic_ if self.criterion == "aic" else self.bic_
        best = 0
        if not self._auto() and not isinstance(self.n_clusters, Integral):  # a sequence of K
            self.model_order_ = information_criterion_model_order(
                self.information_criterion_, self.n_clusters_candidates_, self.criterion
            )
            self.n_clusters_scores_ = self.model_order_.scores
            best = candidates.index(self.model_order_.n_clusters)
        run, k = runs[best], candidates[best]
        self.n_clusters_ = int(k)
        self.n_iter_ = int(run.n_iter)
        if isinstance(space, GramSpace):
            self.model_ = gram_centres(kernel, reference, space, run.centre_labels, k)
            self.cluster_centers_ = None
        else:
            self.model_ = feature_centres(feature_map, space, run.centre_labels, k)
            self.cluster_centers_ = self.model_.centres
        return run, sample

    def _model_order(
        self, rows: np.ndarray, space: GramSpace | FeatureSpace, candidates: np.ndarray, seed: Any
    ) -> ModelOrder:
        """The evidence of 'auto': the timescale gap of the k-NN graph of ``rows`` (the points
        Lloyd runs on), or for a precomputed kernel (or at most 7 distinct points) the eigengap
        of ``D^-1/2 K D^-1/2``."""
        n_values = int(candidates[-1]) + 1
        # the graph scales each point by its 7th distinct neighbour: fewer distinct points
        # than that (or no coordinates) leave the kernel's own normalized spectrum
        few = np.unique(rows, axis=0).shape[0] <= DEFAULT_LOCAL_SCALING_NEIGHBORS
        if self.kernel_.precomputed or few:
            spectrum = normalized_kernel_spectrum(space, n_values)
            rule = PRECOMPUTED_AUTO_RULE
        else:
            spectrum = knn_graph_embedding(rows, n_values, seed=seed)[0]
            rule = AUTO_RULE
        # a graph of m distinct points has m - 1 non-trivial eigenvalues (λ_k and λ_k+1 needed)
        kept = candidates[candidates < spectrum.size]
        if kept.size == 0:
            raise InvalidInputError(
                f"{type(self).__name__}(n_clusters='auto') found too few distinct points to "
                "compare numbers of clusters; pass an integer n_clusters."
            )
        return spectrum_model_order(spectrum, kept, rule)

    def _feature_map(self, X: Any, kernel: Kernel, seed: int | None) -> tuple[Kernel, Any]:
        """The explicit feature map of the Nyström solver: the kernel's own, or Nyström's."""
        kernel, feature_map, self.landmark_indices_ = explicit_feature_map(
            X, kernel, self.n_landmarks, method=self.landmarks, random_state=seed
        )
        return kernel, feature_map

    def _kmeans_max_samples(self) -> int:
        """``kmeans_max_samples``, or its former name ``kmeans_sample`` when given."""
        return int(resolve_renamed(self, "kmeans_max_samples"))

    def _sample(self, n: int, seed: int | None) -> np.ndarray | None:
        """Sorted rows Lloyd's iterations run on, or None for all."""
        size = self._kmeans_max_samples()
        if n <= size:
            return None
        rng = derive_rng(seed, "kernel-kmeans-sample")
        return np.sort(rng.choice(n, size=size, replace=False))

    def _assign_all(self, X: Any) -> tuple[np.ndarray, float]:
        """Nearest centre and inertia of every row, chunk by chunk."""
        if isinstance(X, da.Array):
            d = self._lazy_distances(X, point_norms=True)
            labels, nearest = da.compute(d.argmin(axis=1), d.min(axis=1))
            return np.asarray(labels, dtype=np.int64), float(np.maximum(nearest, 0).sum())
        X = np.asarray(X)
        starts = range(0, X.shape[0], ASSIGN_ROWS)

        def one(s: int) -> tuple[np.ndarray, float]:
            d = self.model_.distances(X[s : s + ASSIGN_ROWS])
            return np.argmin(d, axis=1), float(np.maximum(d.min(axis=1), 0).sum())

        parts = map_on_cores(one, list(starts))
        labels = np.concatenate([lab for lab, _ in parts]).astype(np.int64)
        return labels, float(sum(s for _, s in parts))

    # -- out of sample ---------------------------------------------------------------------
    def _lazy_distances(self, X: da.Array, *, point_norms: bool) -> da.Array:
        k = self.n_clusters_
        return X.map_blocks(
            with_shared(_distance_block),
            share(self.model_, "kmeans-centres"),
            point_norms,
            chunks=(X.chunks[0], (k,)),
            dtype=np.float64,
            meta=np.empty((0, k), dtype=np.float64),
        )

    def _distances(self, X: Any, *, point_norms: bool) -> Any:
        check_is_fitted(self, "model_")
        X = validate_input(self, X, reset=False, **kernel_nan_args(self.kernel))
        if point_norms and self.kernel_.precomputed:
            raise InvalidInputError(
                f"{type(self).__name__} with kernel='precomputed' knows no k(x, x) of new points, "
                "which distances to the centres need; use predict, or a kernel by name."
            )
        if isinstance(X, da.Array):
            return self._lazy_distances(X, point_norms=point_norms)
        return self.model_.distances(X, point_norms=point_norms)

    def predict(self, X: Any) -> Any:
        """Nearest centre in feature space of each row.

        Parameters
        ----------
        X : array-like or dask array of shape (n, n_features)
            New points (kernel rows against the training points for ``'precomputed'``).

        Returns
        -------
        ndarray of int64 (n,), or a lazy dask array for Dask input
        """
        d = self._distances(X, point_norms=False)
        if isinstance(d, da.Array):
            return d.argmin(axis=1).astype(np.int64)
        return np.argmin(d, axis=1).astype(np.int64)

    def transform(self, X: Any) -> Any:
        """Distances ``||φ(x) - m_c||`` in feature space to every centre.

        Parameters
        ----------
        X : array-like or dask array of shape (n, n_features)

        Returns
        -------
        ndarray (n, K), or a lazy dask array for Dask input
        """
        d = self._distances(X, point_norms=True)
        return da.sqrt(da.maximum(d, 0)) if isinstance(d, da.Array) else np.sqrt(np.maximum(d, 0))

    def score(self, X: Any, y: Any = None) -> float:
        """Opposite of the kernel k-means objective of ``X``: ``-Σ_i min_c ||φ(x_i) - m_c||²``.

        Parameters
        ----------
        X : array-like or dask array of shape (n, n_features)
        y : ignored

        Returns
        -------
        float
        """
        d = self._distances(X, point_norms=True)
        nearest = d.min(axis=1)
        total = (
            da.maximum(nearest, 0).sum()
            if isinstance(d, da.Array)
            else np.maximum(nearest, 0).sum()
        )
        return -float(as_numpy(total))
