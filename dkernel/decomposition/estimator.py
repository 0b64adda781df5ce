"""``KernelDecompositionClustering``: clustering by decomposing a row-normalised density kernel
(aggregate Markov model, Szymkowiak-Have, Girolami & Larsen 2006 [SzymkowiakHave2006])."""

from __future__ import annotations

from numbers import Integral, Real
from typing import Any

import dask.array as da
import numpy as np
from sklearn.base import BaseEstimator, ClusterMixin, _fit_context
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import _num_samples

from dkernel._budget import SCRATCH_BLOCK_BYTES, check_budget, rows_for_budget
from dkernel._random import derive_seed, seed_from_random_state
from dkernel._validation import (
    ParameterConstraintsMixin,
    check_is_fitted,
    check_scalar,
    validate_input,
)
from dkernel.decomposition._bipartite_fit import (
    EXACT_MAX_SAMPLES as EXACT_MAX_SAMPLES,
)
from dkernel.decomposition._bipartite_fit import (
    MODEL_ORDER_ROWS as MODEL_ORDER_ROWS,
)
from dkernel.decomposition._bipartite_fit import (
    fit_bipartite,
    landmark_out_of_sample,
)
from dkernel.decomposition._local_scaling_fit import (
    distinct_rows_posteriors,
    few_distinct_training_rows,
    fit_distinct_rows,
    local_scaling_kernel,
)
from dkernel.decomposition.graph import knn_log_kernel_graph, out_of_sample_graph
from dkernel.decomposition.kernels import (
    KERNEL_ALIASES,
    KERNELS,
    NAN_FIX,
    NEIGHBOR_SEARCHES,
    density_log_kernel,
    fit_neighbors,
    join_components,
    knn_log_kernel,
    knn_to_csr,
    row_normalize_log,
    spatial_order,
    use_approximate,
)
from dkernel.decomposition.nmf import LOSSES, fit_aggregate_markov, spectral_embedding
from dkernel.decomposition.nmf_posteriors import out_of_sample_rows, posteriors
from dkernel.errors import InvalidInputError, warn_if_clusters_lost
from dkernel.graphs.approximate_knn import CellIndex
from dkernel.graphs.knn import MissingValueIndex, build_index
from dkernel.graphs.landmark import DEFAULT_LANDMARK_NEIGHBORS, LandmarkGraph
from dkernel.kernels.aliases import resolve_alias
from dkernel.kernels.registry import check_kernel_supported
from dkernel.kernels.widths import DEFAULT_LOCAL_SCALING_NEIGHBORS, silverman_normal_reference
from dkernel.linalg.copies import RowCopies
from dkernel.linalg.threads import map_on_cores
from dkernel.model_order import (
    ModelOrder,
    candidate_range,
    knn_graph_spectrum,
    spectrum_model_order,
)

_OWNER = "KernelDecompositionClustering"
#: Default size of the k-NN graph, chosen on ``bench_defaults.py`` (see the class docstring;
#: equal to the scale rank by measurement, not by definition).
DEFAULT_N_NEIGHBORS = 7
#: Rank of the neighbour whose distance is a point's self-tuning width (the package's one).
DEFAULT_SCALE_NEIGHBORS = DEFAULT_LOCAL_SCALING_NEIGHBORS
#: ``spectrum_`` keeps ``max_clusters + 1`` eigenvalues, 11 when max_clusters is None and
#: n_clusters an integer.
DEFAULT_MAX_CLUSTERS = 10
#: How the model is fitted (see the ``approximation`` parameter).
APPROXIMATIONS = ("auto", "exact", "bipartite")


def _oos_block_rows(n_train: int, block_rows: int | None, n_neighbors: int | None) -> int:
    if block_rows:
        return int(block_rows)
    if n_neighbors is not None:  # k-NN rows: O(block k C) memory, whatever n_train
        return 16_384
    # float64 rows of a dense out-of-sample kernel block against the training points
    return rows_for_budget(SCRATCH_BLOCK_BYTES, n_train, 8, low=64, high=10_000)


class KernelDecompositionClustering(ParameterConstraintsMixin, ClusterMixin, BaseEstimator):
    """Probabilistic clustering by NMF/PLSA of a row-normalised density kernel.

    The kernel ``K(x, x_n)`` (by default the self-tuning kernel
    ``exp(-||x - x_n||^2 / (sigma_x sigma_n))``; the paper's Gaussian density kernel of width
    ``sigma``, Eq. 15, or the cosine kernel, Eq. 16; kept only for each point's
    ``n_neighbors`` nearest training points, the paper's "K-connected graph", unless
    ``n_neighbors=None``) is row-normalised into the transition matrix
    ``Kcheck(x, x_n) = P(x_n | x)`` (Eq. 4) and factored as an aggregate Markov model
    ``P(x_i | x_j) = sum_c P(x_i | c) P(c | x_j)`` (Eq. 6), i.e. ``G = W H`` with both factors
    non-negative and column-stochastic, by multiplicative updates started from the leading
    eigenvectors (best of ``n_init`` restarts by objective).

    The defaults (self-tuning widths on a sparse 7-NN graph) were chosen on
    ``benchmarks/bench_defaults.py`` (23 sets, features standardised, only ``n_clusters``
    given): mean ARI 0.753 against 0.588 for the paper's dense Gaussian kernel with
    Silverman's width, and 0.723 for scikit-learn's k-NN ``SpectralClustering``; see
    ``docs/choosing_defaults.md``. The paper's model is ``kernel='rbf', n_neighbors=None``
    with ``sigma`` chosen by :func:`~dkernel.select_kdc_model`.

    Parameters
    ----------
    n_clusters : int or 'auto'
        Number of clusters ``C``. 'auto': chosen by :mod:`dkernel.model_order`'s
        timescale-gap rule — the largest ratio ``(1 − λ_{k+1}) / (1 − λ_k)`` of consecutive
        relaxation times of a walk — over k = 2..``max_clusters``; the model is then fitted at
        the chosen k. The walk: with the default self-tuning kernel, the nearly mutual k-NN
        graph of :func:`dkernel.model_order.knn_graph_spectrum` (on every training point on
        the exact path, on 5 000 of them drawn with the seed on the bipartite path); with
        another kernel, the normalised affinity whose eigenvectors start the factorisation. The evidence:
        ``n_clusters_``, ``n_clusters_candidates_``, ``n_clusters_scores_`` and
        ``model_order_``; measured in ``docs/choosing_defaults.md``. The held-out
        generalization error of the paper is :func:`~dkernel.select_kdc_model` (rule
        ``'generalization-error'``): with the default self-tuning kernel its differences across
        C were ~10^-3, within the split's noise.
    max_clusters : int, optional
        Largest k compared by ``n_clusters='auto'``. None (default): derived from the data,
        ``round(√n)`` clipped to [10, 50] (:func:`dkernel.model_order.candidate_range`).
    kernel : {'local_scaling', 'rbf', 'cosine'}
        The kernel registry's names (``dkernel.kernels.registry``). local_scaling: self-tuning
        widths (one model, no selection); rbf: the paper's Gaussian density kernel (with
        held-out selection of its width); cosine: count data.
        ``'local_scaling'`` (default): Zelnik-Manor & Perona's self-tuning kernel, each
        point's width ``sigma`` its distance to its ``scale_neighbors``-th nearest other
        training point (a new point: to its ``scale_neighbors``-th nearest training point), so
        dense and sparse clusters, thin rings and wide blobs are resolved alike (one global
        width merged the inner rings of rings3 and split the dense digits). Not a normalised
        density: :meth:`score_samples` is then the log of an un-normalised kernel sum,
        comparable between points of one model but not across models, which is why
        :func:`~dkernel.select_kdc_model` takes ``'rbf'`` or ``'cosine'``.
        ``'rbf'``: the Gaussian density kernel of Eq. 15 (the paper's, normalised to integrate
        to 1; formerly ``'gaussian'``, still accepted with a ``FutureWarning``). ``'cosine'``
        expects non-negative rows (e.g. term counts); they are scaled to unit length.
    sigma : float, optional
        Gaussian width (``kernel='rbf'`` only); Silverman's normal-reference rule
        (:func:`~dkernel.kernels.silverman_normal_reference`) when None. Choose it with
        :func:`~dkernel.select_kdc_model`. (Formerly ``bandwidth``.)
    n_neighbors : int, optional
        Keep only the ``n_neighbors`` nearest training points per row, the point itself
        included (sparse kernel, the scalable path: memory O(N k)). None keeps the dense
        kernel (O(N^2) memory). Default 7: mean ARI 0.753 on ``bench_defaults.py`` against
        0.747 (8), 0.719 (10), 0.715 (15), 0.695 (6), 0.725 (5, which cuts rings3 apart);
        with ``random_state=1`` 0.741 against 0.739 (8) and 0.728 (10). A sparse graph keeps
        thin clusters (spiral, rings) apart. Integer-valued data repeat rows: where at least
        half of the rows have ``n_neighbors`` or more copies (their lists would hold nothing but
        copies), the graph is built on the distinct rows, each listed once with its kernel
        value times its copies (``dkernel.rows.RowCopies``).
        X with NaN (missing values) is taken by the default self-tuning k-NN kernel on the exact
        path: neighbours and widths from the expected squared distance ``‖x̃ − ỹ‖² + r_x + r_y``
        (missing entries at their conditional means plus their conditional variance, under a
        Gaussian of the training rows fitted by EM; found by a tree,
        ``dkernel.graphs.knn.MissingValueIndex``), new rows with the same model; the dense kernel (``n_neighbors=None``), 'rbf', 'cosine' and the bipartite path
        refuse NaN, naming the fix. Digits with a 4×4 hole: mean ARI 0.534, ecoli with 25 %
        missing 0.315 (mean-imputed k-means 0.284 / 0.310, ``benchmarks/results/missing.md``).
    scale_neighbors : int
        ``kernel='local_scaling'``: rank of the neighbour whose distance is each point's
        width; 7 is the self-tuning paper's (mean ARI 0.753 against 0.739 for 5 and 0.753 for
        10). The leading eigenvectors that start the factorisation come from the 0/1 k-NN
        graph: the self-tuning weights gave 0.738.
    neighbor_search : {'auto', 'exact', 'approximate'}
        k-NN kernel: how the nearest training points are found, for the training graph and
        out of sample. ``'exact'``: scikit-learn's k-d tree (brute force for ``'cosine'``).
        ``'approximate'``: k-means cells of ~512 points, each query searched in the 16 cells
        nearest to it by BLAS blocks (:class:`~dkernel.graphs.approximate_knn.CellIndex`,
        seeded by ``random_state``); it found 98-100 % of the exact 8 nearest neighbours on
        10-D blobs, moons and a uniform cube and on 27-D image patches (10^6 points: 98.1 %
        on blobs and on the cube). ``'auto'``: exact below 2·10^5 training points (where the
        exact 10-D graph took 22 CPU s at 10^5, so every smaller set is fitted exactly as
        before), approximate from there (the exact graph took 78 CPU s at 2·10^5 against 13,
        and more than 20 CPU-minutes at 10^6).
    approximation : {'auto', 'exact', 'bipartite'}
        How the model is fitted. ``'exact'``: the kernel above over all training points.
        ``'bipartite'``: each point joined to its ``landmark_neighbors`` nearest of
        ``n_landmarks`` k-means landmarks with self-tuning weights
        (``dkernel.graphs.landmark``), and the aggregate Markov model fitted to the p x p
        landmark -> point -> landmark walk; a point's posterior is
        ``P(c | x) = sum_j P(l_j | x) P(c | l_j)``, the same formula in ``fit`` and
        ``predict`` (``dkernel.decomposition.landmark``). One pass over the data for the
        walk and one for the posteriors, memory O(N C + p^2), never N x N; ``n_neighbors``,
        ``scale_neighbors`` and ``neighbor_search`` are not used. Self-tuning kernel only.
        ``'auto'`` (default): bipartite above ``EXACT_MAX_SAMPLES`` (5 000) training points
        with ``kernel='local_scaling'`` and a k-NN graph (or whenever ``n_landmarks`` is
        given), exact otherwise. The exact k-NN graph has a fixed k, so as N grows a cut
        through a cluster costs hardly more than the gap between clusters and the
        factorisation split the shapes (standardised, defaults: two moons ARI 0.003 at 2·10^4;
        varied-density and anisotropic blobs 0.036 and 0.011 at 10^4, 0.993 and 0.935 at
        5 000), while the landmark walk's resolution is set by p, not N: ARI >= 0.97 on
        moons, circles, rings, varied, anisotropic and 10-D blobs from 2·10^3 to 10^6 points
        (see ``docs/choosing_defaults.md``). Every set of ``bench_defaults.py`` (at most 2 000
        points) is fitted exactly as before. Rows with at most 5 000 distinct values
        (integer-valued data) are fitted exactly on those, each standing for its copies, at any
        N: their landmarks coincide and links tie (10 binary features, 2·10^5 rows: ARI 0.158
        on landmarks, 0.376 exactly, k-means 0.254). Which path ran is in ``approximation_``.
    n_landmarks : int, optional
        Bipartite path: landmarks, the k-means centres of a uniform sample of
        ``10 n_landmarks`` points; ``min(N, 1000)`` (U-SPEC's p) when None. At most this
        many are kept: the centres that gather two or more sample points, none repeated. Given with
        ``approximation='auto'``, it selects the bipartite path. Must be <= N.
    landmark_neighbors : int
        Bipartite path: landmarks linked to each point (U-SPEC's K = 5), also the rank of
        each landmark's self-tuning width. Must be < the number of landmarks.
    loss : {'kl-euclidean', 'euclidean', 'kl'}
        'kl': PLSA / KL-divergence multiplicative updates; 'euclidean': least-squares
        multiplicative updates; 'kl-euclidean': restarts compared by KL, the best refined by
        least squares. ``'euclidean'`` is the squared error of Eq. 7 with Lee-Seung updates
        (the paper's); ``'kl'`` gives exactly stochastic factors, but with it the held-out
        likelihood (:meth:`score`) is the same for every ``n_clusters`` (see
        :mod:`dkernel.decomposition.nmf`), so it cannot be used to choose ``n_clusters``.
        ``'kl-euclidean'`` (the default): mean ARI 0.753 against 0.749 for ``'kl'`` with the
        default kernel.
    n_init : int
        Restarts (restart 0 is the eigenvector initialisation).
    max_iter : int
        Iteration cap of every factorisation.
    tol : float
        Relative objective change to stop.
    block_rows : int, optional
        Query rows per block in out-of-sample evaluation, at least 16 (default: 16 384 rows
        with the k-NN kernel, ~32 MiB dense blocks otherwise; formerly ``block_size``). NumPy
        input: the k-NN blocks run on a thread pool, one thread per CPU.
    max_memory : str or float, optional
        Memory limit for the dense kernel (default ``DKERNEL_MAX_MEMORY`` or 4 GiB).
    random_state : int, optional

    Attributes
    ----------
    n_clusters_ : int
        The number of clusters ``C`` (``n_clusters``, or what 'auto' chose).
    n_clusters_candidates_ : ndarray of int or None
        The k compared by ``n_clusters='auto'`` (None for an integer ``n_clusters``).
    n_clusters_scores_ : ndarray or None
        The model-order rule's score of every candidate (the highest wins).
    model_order_ : dkernel.model_order.ModelOrder or None
        The whole evidence of 'auto': candidates, scores, rule.
    spectrum_ : ndarray
        Leading eigenvalues (descending) of the normalised affinity whose eigenvectors started
        the factorisation (``max_clusters + 1`` of them with 'auto'). Empty when ``C = 1`` or when :meth:`fit_kernel` was given the
        ``embedding``.
    W_ : ndarray (n_train, C), or (n_landmarks, C) on the bipartite path
        ``P(x_i | c)`` (``P(l_j | c)`` over the landmarks); columns sum to 1. Over the
        distinct rows when the exact path ran on them above 5 000 rows (as ``H_``).
    H_ : ndarray (C, n_train), or (C, n_landmarks) on the bipartite path
        ``P(c | x_j)`` (``P(c | l_j)``); columns sum to 1.
    priors_ : ndarray (C,)
        ``P(c) = mean_j P(c | x_j)`` over all rows (bipartite path: the mean of
        ``posteriors_``).
    posteriors_ : ndarray (n_train, C)
        Eq. 9 evaluated at the training points with the training kernel; equal to
        ``predict_proba(X_train)``.
    labels_ : ndarray (n_train,)
        ``argmax`` of ``posteriors_``.
    sigma_ : float or ndarray (n_train,) or ndarray (n_landmarks,)
        The kernel width: the Gaussian width (``kernel='rbf'``; 1.0, unused, for
        ``'cosine'``), or the self-tuning width of every training point
        (``kernel='local_scaling'``), or of every landmark (bipartite path), or of every
        distinct row (exact path on the distinct rows). (The Gaussian width was formerly
        ``bandwidth_``.)
    objective_ : float
        Final objective of the best restart.
    n_iter_ : int
    X_fit_ : ndarray (n_train, p) or None
        Training points (needed for out-of-sample evaluation on the exact path; the distinct
        rows when it ran on them; None on the bipartite path, whose out-of-sample evaluation
        needs only ``graph_model_``).
    approximation_ : {'exact', 'bipartite'}
        The path that ran.
    graph_model_ : LandmarkGraph or None
        Bipartite path: the landmarks, their widths and K (None on the exact path).
    n_features_in_ : int
        Number of features seen in ``fit``.
    feature_names_in_ : ndarray of str
        Column names of a DataFrame passed to ``fit`` (absent for other input).

    See Also
    --------
    dkernel.select_kdc_model : Chooses the width, neighbours and number of clusters by
        held-out likelihood.
    dkernel.SpectralClustering : Hard clusters from the same kind of graph.
    sklearn.decomposition.NMF : scikit-learn's (unconstrained) non-negative factorisation.

    Notes
    -----
    Dense kernel: O(N^2) memory and O(N^2 C) time per iteration; k-NN kernel: O(N k) memory,
    O(N k C) per iteration, neighbour search blockwise through Dask for Dask input (the
    self-tuning widths come from the same search: ``max(n_neighbors, scale_neighbors + 1)``
    neighbours per point; NumPy input is searched on threads, in k-d-tree order; from
    2·10^5 points approximately, see ``neighbor_search``).
    Out-of-sample posteriors and log-likelihoods cost O(N C) per new point (O(k C) with the
    k-NN kernel). A k-NN graph of more components than ``n_clusters`` is joined by single
    linkage (``dkernel.decomposition.kernels.join_components``).

    Bipartite path (the default above 5 000 points): O(N p d) for the links (two passes over
    the data: the landmark walk, then the posteriors), O(p^2 C) per factorisation step, memory
    O(N C + p^2); out of sample O(p d + K C) per new point.

    With ``approximation='exact'``, above 5 000 points (k-NN kernel) the starting
    eigenvectors are not computed by shift-invert (its sparse LU fills in on graphs in more
    than a few dimensions) but by
    ``dkernel.decomposition.nmf.deflated_eigenvectors`` (one exact vector per connected
    component, a fixed number of subspace-iteration steps for the rest), and the k-means of
    the initialisation is fitted on 5·10^4 rows; smaller sets (every set of
    ``bench_defaults.py``) are fitted exactly as before. Measured at 10^5 and 10^6 points in
    ``benchmarks/bench_decomposition_scale.py``. To choose ``C`` and ``k`` at that size,
    select on a subsample: :func:`~dkernel.select_kdc_model` with ``max_samples``.

    References
    ----------
    - Szymkowiak-Have, Girolami & Larsen (2006), "Clustering via kernel decomposition", *IEEE
      Transactions on Neural Networks* 17(1) [SzymkowiakHave2006]: the aggregate Markov model
      (Eq. 4 and 7), out-of-sample posteriors (Eq. 8–10), the generalization error (Eq. 11–14).
    - Hofmann (1999) [Hofmann1999]: PLSA; Lee & Seung (2001) [Lee2001]: the multiplicative
      updates; Zelnik-Manor & Perona (2005) [ZelnikManor2005]: the self-tuning kernel;
      Huang et al. (2020) [Huang2020]: the landmark bipartite graph.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X = np.vstack([rng.normal(0, 0.05, (50, 2)), rng.normal(1, 0.05, (50, 2))])
    >>> model = KernelDecompositionClustering(2, random_state=0).fit(X)
    >>> np.bincount(model.labels_).tolist()
    [50, 50]
    """

    def __init__(
        self,
        n_clusters: int | str = 2,
        *,
        max_clusters: int | None = None,
        kernel: str = "local_scaling",
        sigma: float | None = None,
        n_neighbors: int | None = DEFAULT_N_NEIGHBORS,
        scale_neighbors: int = DEFAULT_SCALE_NEIGHBORS,
        neighbor_search: str = "auto",
        approximation: str = "auto",
        n_landmarks: int | None = None,
        landmark_neighbors: int = DEFAULT_LANDMARK_NEIGHBORS,
        loss: str = "kl-euclidean",
        n_init: int = 3,
        max_iter: int = 300,
        tol: float = 1e-6,
        block_rows: int | None = None,
        max_memory: str | float | None = None,
        random_state: int | None = None,
    ) -> None:
        self.n_clusters = n_clusters
        self.max_clusters = max_clusters
        self.kernel = kernel
        self.sigma = sigma
        self.n_neighbors = n_neighbors
        self.scale_neighbors = scale_neighbors
        self.neighbor_search = neighbor_search
        self.approximation = approximation
        self.n_landmarks = n_landmarks
        self.landmark_neighbors = landmark_neighbors
        self.loss = loss
        self.n_init = n_init
        self.max_iter = max_iter
        self.tol = tol
        self.block_rows = block_rows
        self.max_memory = max_memory
        self.random_state = random_state

    _parameter_constraints: dict = {
        "n_clusters": [Interval(Integral, 1, None, closed="left"), StrOptions({"auto"})],
        "max_clusters": [Interval(Integral, 2, None, closed="left"), None],
        # the former names are accepted too, with a FutureWarning (dkernel.kernels.aliases)
        "kernel": [StrOptions(set(KERNELS) | set(KERNEL_ALIASES))],
        "sigma": [Interval(Real, 0, None, closed="neither"), None],
        "n_neighbors": [Interval(Integral, 1, None, closed="left"), None],
        "scale_neighbors": [Interval(Integral, 1, None, closed="left")],
        "neighbor_search": [StrOptions(set(NEIGHBOR_SEARCHES))],
        "approximation": [StrOptions(set(APPROXIMATIONS))],
        "n_landmarks": [Interval(Integral, 1, None, closed="left"), None],
        "landmark_neighbors": [Interval(Integral, 1, None, closed="left")],
        "loss": [StrOptions(set(LOSSES))],
        "n_init": [Interval(Integral, 1, None, closed="left")],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "tol": [Interval(Real, 0, None, closed="left")],
        # blocks below 16 rows only multiply the tasks
        "block_rows": [Interval(Integral, 16, None, closed="left"), None],
        "max_memory": [str, Interval(Real, 0, None, closed="neither"), None],
        "random_state": ["random_state", np.random.Generator],
    }

    # -- validation ----------------------------------------------------------------------
    def _check_sizes(self, n_samples: int) -> None:
        """Checks of the parameters against the number of training points (and each other)."""
        if self.n_clusters != "auto":
            check_scalar(
                self.n_clusters, "n_clusters", _OWNER, kind=Integral, low=1, high=n_samples
            )
        check_scalar(
            self.n_neighbors,
            "n_neighbors",
            _OWNER,
            kind=Integral,
            low=1,
            high=n_samples,
            allow_none=True,
        )
        if self.kernel == "local_scaling":
            if self.sigma is not None:
                raise InvalidInputError(
                    f"The 'sigma' parameter of {_OWNER} is a Gaussian width; "
                    "kernel='local_scaling' chooses one width per point (scale_neighbors). Pass "
                    "kernel='rbf' with a sigma, or leave sigma=None."
                )
            for name in ("n_neighbors", "scale_neighbors"):
                k = getattr(self, name)
                if k is not None and k >= n_samples:
                    raise InvalidInputError(
                        f"The '{name}' parameter of {_OWNER} must be < n_samples ({n_samples}) "
                        f"with kernel='local_scaling'. Got {k} instead."
                    )

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = self._takes_nan()
        return tags

    def _takes_nan(self) -> bool:
        """Whether X may hold NaN: the self-tuning k-NN kernel on the exact path, whose
        neighbours and widths come from the expected squared distances
        (``dkernel.graphs.knn.MissingValueIndex``), which the default runs up to 5 000
        points."""
        return (
            self.kernel == "local_scaling"
            and self.n_neighbors is not None
            and self.approximation in ("auto", "exact")
            and self.n_landmarks is None
        )

    def _kernel_name(self) -> str:
        """``kernel`` with a former name replaced (a FutureWarning, once per process)."""
        return resolve_alias(self.kernel, "kernel", _OWNER)

    def _validate_params(self) -> None:
        # the registry's other kernels (scikit-learn's among them) are refused with the reason
        check_kernel_supported(
            self.kernel,
            _OWNER,
            KERNELS,
            "a density kernel: a log form (its rows are normalised as a softmax), a Euclidean "
            "neighbour search and a width (chosen by held-out likelihood or self-tuned)",
        )
        super()._validate_params()

    # -- fitting -------------------------------------------------------------------------
    def training_kernel(self, X: Any) -> tuple[Any, np.ndarray, np.ndarray]:
        """Validate X, set ``sigma_`` and return ``(Kcheck, log_norm, X_numpy)``.

        ``Kcheck`` is dense for ``n_neighbors=None`` (after a memory check), CSR otherwise
        (computed blockwise through Dask for Dask input).
        """
        self._validate_params()
        kernel = self._kernel_name()
        takes_nan = self._takes_nan()
        Xv = validate_input(
            self,
            X,
            reset=True,
            min_samples=2,
            dtype=np.float64,
            allow_nan=takes_nan,
            nan_fix=NAN_FIX,
        )
        n = int(Xv.shape[0])
        self._check_sizes(n)
        self._copies: RowCopies | None = None
        is_dask = isinstance(Xv, da.Array)
        Xn = np.asarray(Xv.compute() if is_dask else Xv, dtype=np.float64)
        if np.isinf(Xn).any() or (not takes_nan and np.isnan(Xn).any()):
            raise InvalidInputError(
                f"{_OWNER} does not accept infinite values in X, nor NaN but with the default "
                "kernel (kernel='local_scaling' with n_neighbors, exact path). " + NAN_FIX
            )
        if self.kernel == "cosine" and np.any(Xn < 0):
            raise InvalidInputError(
                f"{_OWNER} with kernel='cosine' expects non-negative data (counts, histograms); "
                f"{int(np.sum(Xn < 0))} negative entries found. Use kernel='rbf'."
            )
        if self.kernel == "local_scaling":
            return self._local_scaling_kernel(Xv, Xn, is_dask)
        self.sigma_ = (
            float(self.sigma)
            if self.sigma is not None
            else (silverman_normal_reference(Xn) if kernel == "rbf" else 1.0)
        )
        if self.n_neighbors is None:
            self._check_dense_budget(n)
            Kc, log_norm = row_normalize_log(
                density_log_kernel(Xn, Xn, kernel=self.kernel, sigma=self.sigma_)
            )
            self._index = None
        else:
            k = int(self.n_neighbors)
            self._index = self._fit_index(Xn)
            if is_dask:
                ind, logK = knn_log_kernel_graph(
                    Xv,
                    Xn,
                    kernel=self.kernel,
                    sigma=self.sigma_,
                    n_neighbors=k,
                    approximate=isinstance(self._index, CellIndex),
                    random_state=self._index_seed,
                )
                ind, logK = da.compute(ind, logK)
            else:
                ind, logK = knn_log_kernel(
                    Xn,
                    None,
                    kernel=self.kernel,
                    sigma=self.sigma_,
                    n_neighbors=k,
                    index=self._index,
                )
            Kc, log_norm = knn_to_csr(ind, logK, n)
        return Kc, log_norm, Xn

    def _fit_index(self, Xn: np.ndarray) -> Any:
        """The neighbour index over the training points, exact or approximate as
        ``neighbor_search`` says; the approximate one is seeded from ``random_state``."""
        if self.kernel == "local_scaling" and np.isnan(Xn).any():
            # expected squared distances of rows with NaN (exact: a tree on augmented rows)
            self._index_seed = None
            return build_index(Xn)
        approximate = use_approximate(Xn.shape[0], self.neighbor_search)
        self._index_seed = (
            derive_seed(seed_from_random_state(self.random_state), "neighbor_index")
            if approximate
            else None
        )
        return fit_neighbors(
            Xn, kernel=self.kernel, approximate=approximate, random_state=self._index_seed
        )

    def _check_dense_budget(self, n: int) -> None:
        check_budget(
            what=f"{_OWNER} with a dense {n} x {n} kernel",
            memory_bytes=5.0 * n * n * 8,
            max_memory=self.max_memory,
            alternative="set n_neighbors (e.g. 10-50) for the sparse k-NN kernel, O(N k) memory.",
        )

    def _local_scaling_kernel(self, Xv: Any, Xn: np.ndarray, is_dask: bool) -> tuple:
        """Self-tuning kernel (``dkernel.decomposition._local_scaling_fit``)."""
        return local_scaling_kernel(self, Xv, Xn, is_dask)

    def _approximation(self, n: int) -> str:
        """The path that runs on ``n`` points, checked against the other parameters."""
        chosen = self.approximation
        if chosen == "auto":
            landmark_graph = self.kernel == "local_scaling" and self.n_neighbors is not None
            big = n > EXACT_MAX_SAMPLES or self.n_landmarks is not None
            chosen = "bipartite" if landmark_graph and big else "exact"
        if chosen == "bipartite" and self.kernel != "local_scaling":
            raise InvalidInputError(
                f"approximation='bipartite' of {_OWNER} builds its own self-tuning landmark "
                f"graph, so it takes kernel='local_scaling' only (got {self.kernel!r}); use "
                "approximation='exact' for the rbf or cosine kernel."
            )
        if chosen == "bipartite" and self.n_neighbors is None:
            raise InvalidInputError(
                f"n_neighbors=None (the dense kernel) of {_OWNER} exists on the exact path only; "
                "use approximation='exact', or keep n_neighbors for approximation='bipartite'."
            )
        if chosen == "exact" and self.n_landmarks is not None:
            raise InvalidInputError(
                f"n_landmarks of {_OWNER} is a parameter of approximation='bipartite'; with "
                "approximation='exact' leave it None."
            )
        return chosen

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X: Any, y: Any = None) -> KernelDecompositionClustering:
        """Fit the aggregate Markov model to X (NumPy or Dask, n_samples x n_features)."""
        self._kernel_name()
        if self._approximation(int(_num_samples(X))) == "bipartite":
            few = self._few_distinct_rows(X)
            fitted = self._fit_bipartite(X) if few is None else self._fit_distinct_rows(*few)
        else:
            fitted = self.fit_kernel(*self.training_kernel(X))
        warn_if_clusters_lost(int(np.unique(fitted.labels_).size), fitted.n_clusters_)
        return fitted

    # the exact path on few distinct rows above EXACT_MAX_SAMPLES (_local_scaling_fit)
    _few_distinct_rows = few_distinct_training_rows
    _fit_distinct_rows = fit_distinct_rows
    _distinct_rows_posteriors = distinct_rows_posteriors

    def _fit_bipartite(self, X: Any, *, posteriors: bool = True) -> KernelDecompositionClustering:
        """The landmark path (``dkernel.decomposition._bipartite_fit``); without the training
        posteriors when ``posteriors`` is False (a job writes them chunk by chunk)."""
        self._copies = None
        return fit_bipartite(self, X, posteriors=posteriors)

    def fit_kernel(
        self,
        Kcheck: Any,
        log_norm: np.ndarray,
        X: np.ndarray,
        *,
        embedding: np.ndarray | None = None,
        copies: np.ndarray | None = None,
    ) -> KernelDecompositionClustering:
        """Fit from a precomputed training kernel (from :meth:`training_kernel`).

        ``embedding`` (leading eigenvectors, :func:`~dkernel.decomposition.spectral_embedding`)
        can be shared across fits with different ``n_clusters`` on the same kernel.
        ``copies``: the rows each row of the (sparse) kernel stands for, when its rows are the
        distinct rows of the data (``fit`` on few distinct rows above 5 000 rows).
        """
        if not hasattr(self, "n_features_in_"):
            raise InvalidInputError(f"call {_OWNER}.training_kernel before fit_kernel.")
        self._validate_params()
        self._check_sizes(Kcheck.shape[0])
        self.approximation_ = "exact"
        self.graph_model_: LandmarkGraph | None = None
        n = Kcheck.shape[0]
        spectrum = None
        self._set_model_order(None)
        if self.n_clusters == "auto":
            # max_clusters + 1 eigenvalues; the factorisation computes its own C (n_init + 1)
            candidates = self._candidates(n)
            top = min(int(candidates[-1]) + 1, n - 1)
            seed = seed_from_random_state(self.random_state)
            if self.kernel == "local_scaling" and self.n_neighbors is not None:
                # k on the nearly mutual graph; spectrum_ stays the factorisation's own
                graph = knn_graph_spectrum(X, top, seed=seed, copies=copies)
                self._choose_order(graph, candidates)
            else:
                spectrum, _ = spectral_embedding(
                    Kcheck, log_norm, top, seed=seed, return_eigenvalues=True
                )
                self._choose_order(spectrum, candidates)
        else:
            self.n_clusters_ = int(self.n_clusters)
        if copies is None and embedding is None:
            index = getattr(self, "_index", None)
            Kcheck, log_norm = join_components(Kcheck, log_norm, X, index, self.n_clusters_)
        result = fit_aggregate_markov(
            Kcheck,
            log_norm,
            self.n_clusters_,
            loss=self.loss,
            n_init=self.n_init,
            max_iter=self.max_iter,
            tol=self.tol,
            seed=seed_from_random_state(self.random_state),
            embedding=embedding,
            copies=copies,
        )
        self._set_spectrum(spectrum if spectrum is not None else result.spectrum)
        self.W_ = result.W
        self.H_ = result.H
        self.priors_ = result.H.mean(axis=1) if copies is None else result.H @ copies / copies.sum()
        self.objective_ = result.objective
        self.objectives_ = np.asarray(result.objectives)
        self.n_iter_ = result.n_iter
        self.X_fit_ = X
        self.posteriors_ = posteriors(Kcheck, self.H_)
        self.labels_ = np.argmax(self.posteriors_, axis=1).astype(np.int64)
        if self.n_neighbors is not None and getattr(self, "_index", None) is None:
            self._index = self._fit_index(X)
        return self

    def _set_spectrum(self, spectrum: np.ndarray | None) -> None:
        lam = np.empty(0) if spectrum is None else np.sort(np.asarray(spectrum, np.float64))
        if self.model_order_ is not None:
            top = int(self.model_order_.candidates[-1]) + 1
        else:
            top = (self.max_clusters or DEFAULT_MAX_CLUSTERS) + 1
        self.spectrum_ = lam[::-1][:top].copy()

    def _candidates(self, n: int) -> np.ndarray:
        return candidate_range(n, self.max_clusters, owner=f"{_OWNER}(n_clusters='auto')")

    def _choose_order(self, spectrum: np.ndarray, candidates: np.ndarray) -> None:
        lam = np.sort(np.asarray(spectrum, np.float64))[::-1]
        self._set_model_order(spectrum_model_order(lam, candidates[candidates < lam.size]))

    def _set_model_order(self, order: ModelOrder | None) -> None:
        self.model_order_ = order
        if order is None:
            self.n_clusters_candidates_ = self.n_clusters_scores_ = None
            return
        self.n_clusters_ = order.n_clusters
        self.n_clusters_candidates_ = order.candidates
        self.n_clusters_scores_ = order.scores

    # -- out of sample -------------------------------------------------------------------
    def _model(self) -> tuple:
        check_is_fitted(self, "H_")
        copies = getattr(self, "_copies", None)
        if copies is not None:  # the index holds the distinct rows; a first copy holds its mass
            first = copies.first
            return (
                self.X_fit_[first],
                self.W_[first],
                self.H_[:, first],
                self.kernel,
                self._scales,
                self.n_neighbors,
                self._index,
            )
        return (
            self.X_fit_,
            self.W_,
            self.H_,
            self.kernel,
            self._scales if self.kernel == "local_scaling" else self.sigma_,
            self.n_neighbors,
            getattr(self, "_index", None),
        )

    def _landmark_out_of_sample(self, Xv: Any, what: str) -> Any:
        """Bipartite path: posteriors or log-densities through the landmark links."""
        return landmark_out_of_sample(self, Xv, what)

    def _out_of_sample(self, X: Any, what: str) -> Any:
        check_is_fitted(self, "H_")
        if getattr(self, "approximation_", "exact") == "bipartite":
            Xv = validate_input(self, X, reset=False, min_samples=1, dtype=np.float64)
            return self._landmark_out_of_sample(Xv, what)
        model = self._model()
        incomplete = isinstance(model[-1], MissingValueIndex)
        Xv = validate_input(
            self,
            X,
            reset=False,
            min_samples=1,
            dtype=np.float64,
            allow_nan=incomplete,
            nan_fix=NAN_FIX,
        )
        bs = _oos_block_rows(self.X_fit_.shape[0], self.block_rows, self.n_neighbors)
        if isinstance(Xv, da.Array):
            return out_of_sample_graph(
                Xv, model, what=what, n_clusters=self.H_.shape[0], block_rows=bs
            )
        n = Xv.shape[0]
        starts = range(0, n, bs)
        if self.n_neighbors is None:
            parts = [out_of_sample_rows(Xv[s : s + bs], model, what=what) for s in starts]
            return np.concatenate(parts, axis=0)
        # k-NN: blocks of spatially close rows (faster searches), on threads (the search
        # releases the GIL); every row's result is independent of its block. The cell index
        # groups each block's rows by cell and runs on threads itself.
        approximate = isinstance(model[-1], CellIndex)
        if approximate:
            order = np.arange(n)
        else:  # rows with NaN: ordered by their mean-imputed values (any order is exact)
            order = spatial_order(model[-1].fill(Xv)[0] if incomplete else Xv)
        out = np.empty((n,) if what == "loglik" else (n, self.H_.shape[0]))

        def rows(s: int) -> None:
            r = order[s : s + bs]
            out[r] = out_of_sample_rows(Xv[r], model, what=what)

        map_on_cores(rows, starts, 1 if approximate else None)
        return out

    def predict_proba(self, X: Any) -> Any:
        """Out-of-sample class posteriors ``P(c | z)`` (Eq. 8-10), rows sum to 1; lazy for Dask."""
        return self._out_of_sample(X, "posteriors")

    def predict(self, X: Any) -> Any:
        """Most probable cluster of each point under :meth:`predict_proba`."""
        return self.predict_proba(X).argmax(axis=1)

    def score_samples(self, X: Any) -> Any:
        """Out-of-sample log-density ``log p(z)`` of each point (Eq. 12-14)."""
        return self._out_of_sample(X, "loglik")

    def score(self, X: Any, y: Any = None) -> float:
        """Mean out-of-sample log-likelihood (Eq. 11); higher is better.

        The paper's generalization error is its negative, see :meth:`generalization_error`.
        """
        s = self.score_samples(X)
        return float(s.mean().compute() if isinstance(s, da.Array) else np.mean(s))

    def generalization_error(self, X: Any) -> float:
        """Negative mean out-of-sample log-likelihood of X (the paper's model-selection error)."""
        return -self.score(X)
