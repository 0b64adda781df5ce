"""``dkernel.KernelCCA``: regularised kernel CCA of two views with the same rows.

The exact solver solves the dual problem on the two training kernels (their kernel PCA
coordinates, O(N²) memory and O(N³) time); the Nyström solver accumulates the covariances of
the two views' Nyström features chunk by chunk (memory O(m²), never N × N). Both end in the
same whitened SVD (:mod:`dkernel.cca.dual`); ``transform`` maps new rows through the same
feature maps, lazily per chunk for Dask input.
"""

from __future__ import annotations

from numbers import Integral, Real
from typing import Any

import dask
import dask.array as da
import numpy as np
from scipy.spatial.distance import pdist
from sklearn.base import (
    BaseEstimator,
    ClassNamePrefixFeaturesOutMixin,
    TransformerMixin,
    _fit_context,
)
from sklearn.utils._param_validation import Interval, StrOptions

from dkernel._budget import check_budget, dense_kernel_cost, memory_limit
from dkernel._random import derive_rng, derive_seed, seed_from_random_state
from dkernel._validation import (
    ParameterConstraintsMixin,
    aligned,
    as_numpy,
    check_2d_array,
    check_is_fitted,
    is_dask_array,
    validate_input,
)
from dkernel.cca.dual import (
    CenteredFeatures,
    Moments,
    kernel_pca_features,
    moments,
    regularized_cca,
)
from dkernel.errors import InvalidInputError
from dkernel.kernels.nystrom import explicit_feature_map, landmark_kernel_params
from dkernel.kernels.registry import Kernel, kernel_input_tags, make_kernel
from dkernel.kernels.widths import KERNEL_KMEANS_SIGMA_FRACTION
from dkernel.kmeans.features import features
from dkernel.kmeans.lloyd import dense_kernel
from dkernel.linalg.threads import map_on_cores
from dkernel.rows import take_rows
from dkernel.runtime.shared import share, with_shared

SOLVERS = ("auto", "exact", "nystrom")
LANDMARK_METHODS = ("kmeans++", "uniform")
DEFAULT_REGULARIZATION = 0.01
DEFAULT_N_LANDMARKS = 500
#: Rows per task of the covariance pass over NumPy input.
SUM_ROWS = 65_536
#: Rows of the sample whose distances give the fallback RBF width.
RULE_OF_THUMB_SAMPLE = 2000


def _dense(feature_map: Any, X: np.ndarray) -> np.ndarray:
    Phi = features(feature_map, X)
    return Phi.toarray() if hasattr(Phi, "toarray") else Phi


def _moments_block(X: np.ndarray, Y: np.ndarray, fx: Any, fy: Any) -> Moments:
    return moments(_dense(fx, X), _dense(fy, Y))


def _add(a: Moments, b: Moments) -> Moments:
    return a + b


def _nonzero_median_sigma(V: Any, fraction: float, seed: int | None) -> float:
    """``fraction`` × the median of the nonzero pairwise distances of a sample of ``V``."""
    n = int(V.shape[0])
    rows = np.arange(n)
    if n > RULE_OF_THUMB_SAMPLE:
        rows = np.sort(derive_rng(seed, "kernel-cca-width").choice(n, RULE_OF_THUMB_SAMPLE, False))
    distances = pdist(take_rows(V, rows, np.float64))
    distances = distances[distances > 0]
    if distances.size == 0:
        raise InvalidInputError(
            "Every row of a view is the same, so kernel CCA finds no correlation in it; check "
            "the data."
        )
    return float(fraction * np.median(distances))


def _variates_block(X: np.ndarray, model: Any, W: np.ndarray) -> np.ndarray:
    return model.transform(X) @ W


class KernelCCA(
    ParameterConstraintsMixin, ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator
):
    """Regularised kernel canonical correlation analysis of two views ``X`` and ``Y``.

    Finds functions ``f(x) = Σ_i α_i k_x(x, x_i)`` and ``g(y) = Σ_i β_i k_y(y, y_i)`` of maximal
    correlation over the paired training rows ([MLSlides2012], slides 12-16): the
    regularised dual problem ``max αᵀ Kx Ky β`` subject to ``αᵀ (Kx² + n κ Kx) α = 1`` (and the
    same for β), then the next pairs uncorrelated with the previous ones. Each view has its own
    kernel from the registry. ``kernel='linear'`` with ``regularization=0`` is
    :class:`sklearn.cross_decomposition.CCA` (the same canonical correlations, and variates up
    to sign and scale, when each view has more rows than features); κ > 0 is ridge CCA, which
    tends to it as κ → 0 (κ is in the units of the features' variance).

    Parameters
    ----------
    n_components : int
        Number of canonical pairs.
    kernel : str or callable
        Kernel of the X view (see :func:`dkernel.kernels.registry.make_kernel`): ``'rbf'``,
        ``'local_scaling'``, ``'knn'``, ``'knn_mean'``, ``'landmark'``, ``'cosine'``,
        ``'precomputed'``, scikit-learn's ``'linear'``, ``'poly'``, ``'sigmoid'``,
        ``'laplacian'``, ``'chi2'``, ``'additive_chi2'`` (their parameters in
        ``kernel_params``), or ``f(A, B)``.
    kernel_y : str or callable, optional
        Kernel of the Y view; ``kernel`` (with ``kernel_params``) when None.
    kernel_params : dict, optional
        Parameters of the X kernel (``{'sigma': 1.5}``, ``{'gamma': 0.5}`` for scikit-learn's
        spelling of an RBF width, ``{'degree': 2}``).
    kernel_params_y : dict, optional
        Parameters of the Y kernel; when None, ``kernel_params`` if ``kernel_y`` is None (the
        same kernel for both views), else the kernel's defaults.
    sigma_fraction : float
        RBF widths by the rule of thumb, per view: this fraction of the median pairwise
        distance (0.5 by default, about scikit-learn's ``gamma = 1 / n_features`` on
        standardised data).
    regularization : float
        κ, added to the feature covariances (whose trace is the mean of ``k(x, x)`` minus that
        of ``k``: at most 1 for the RBF kernel). Larger values trade the training correlation
        for smoother, better generalising variates; 0 is unregularised (the training
        correlation of a rich kernel is then 1 whatever the data).
    solver : {'auto', 'exact', 'nystrom'}
        ``'exact'``: the dual problem on the two N × N training kernels (O(N²) memory,
        refused beyond ``max_memory``). ``'nystrom'``: the covariances of the views'
        Nyström features on ``n_landmarks`` landmarks each (the ``landmark`` kernel's own
        features), accumulated chunk by chunk. ``'auto'``: exact when N <= ``n_landmarks``
        (Nyström would take every point as a landmark, which is the exact solution) and its
        memory fits. The choice is in ``solver_``.
    n_landmarks : int
        Nyström landmarks per view.
    landmarks : {'kmeans++', 'uniform'}
        How the Nyström landmarks are drawn.
    max_memory : str or float, optional
        Memory limit of the exact solver (default ``DKERNEL_MAX_MEMORY`` or 4 GiB).
    random_state : int, optional
        Seed of the landmarks and of the rule-of-thumb samples.

    Attributes
    ----------
    canonical_correlations_ : ndarray (n_components,)
        Correlations of the training variates, decreasing.
    regularized_correlations_ : ndarray (n_components,)
        The regularised objective of each pair (at most the correlation; equal as κ → 0).
    x_weights_, y_weights_ : ndarray (r, n_components)
        Directions in the views' centered feature spaces, scaled so that the training
        variates have unit variance.
    x_dual_coef_, y_dual_coef_ : ndarray (n_samples, n_components) or None
        Exact solver: α and β, ``f(x) = k_c(x)ᵀ α`` with the centered kernel row ``k_c``;
        None for the Nyström solver.
    x_features_, y_features_ : object
        The views' centered feature maps (what ``transform`` evaluates).
    kernel_x_, kernel_y_ : Kernel
        The fitted kernels.
    solver_ : {'exact', 'nystrom'}

    See Also
    --------
    sklearn.cross_decomposition.CCA : Linear CCA.
    dkernel.KernelPCAEmbedding : Kernel PCA of one view.
    dkernel.KernelKMeans : Kernel k-means in the same kernels' feature spaces.

    Notes
    -----
    ``transform(X, Y)`` returns both views' variates; ``fit_transform(X, Y)`` returns those
    of X only (scikit-learn's transformer contract).

    Cost: exact, O(N² p) kernel evaluations, O(N³) for the two eigen-solves, O(N²) memory.
    Nyström, O(N m (p + m)) per view in one pass over the rows, O(m³) for the solves; memory
    O(m²) plus a block of rows. ``transform``: O(N_train) (exact) or O(m) kernel evaluations
    per row.

    References
    ----------
    - Kernel CCA, the regularised dual form [MLSlides2012] (slides 12-16).
    - Bach & Jordan (2002), "Kernel independent component analysis", JMLR 3 [Bach2002].
    - Hardoon, Szedmak & Shawe-Taylor (2004), "Canonical correlation analysis: an overview
      with application to learning methods", Neural Computation 16 [Hardoon2004].

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> t = rng.uniform(-1, 1, 300)
    >>> X = np.c_[t, rng.normal(size=300)]
    >>> Y = np.c_[t**2 + 0.05 * rng.normal(size=300), rng.normal(size=300)]
    >>> cca = KernelCCA(1, random_state=0).fit(X, Y)
    >>> bool(cca.canonical_correlations_[0] > 0.9)
    True
    """

    _parameter_constraints: dict = {
        "n_components": [Interval(Integral, 1, None, closed="left")],
        "kernel": [str, callable],
        "kernel_y": [str, callable, None],
        "kernel_params": [dict, None],
        "kernel_params_y": [dict, None],
        "sigma_fraction": [Interval(Real, 0, None, closed="neither")],
        "regularization": [Interval(Real, 0, None, closed="left")],
        "solver": [StrOptions(set(SOLVERS))],
        "n_landmarks": [Interval(Integral, 1, None, closed="left")],
        "landmarks": [StrOptions(set(LANDMARK_METHODS))],
        # a size such as "4GiB" (jobs) or a number of bytes (Python callers only)
        "max_memory": [str, Real, None],
        "random_state": ["random_state", np.random.Generator],
    }

    def __init__(
        self,
        n_components: int = 2,
        *,
        kernel: Any = "rbf",
        kernel_y: Any = None,
        kernel_params: dict | None = None,
        kernel_params_y: dict | None = None,
        sigma_fraction: float = KERNEL_KMEANS_SIGMA_FRACTION,
        regularization: float = DEFAULT_REGULARIZATION,
        solver: str = "auto",
        n_landmarks: int = DEFAULT_N_LANDMARKS,
        landmarks: str = "kmeans++",
        max_memory: str | float | None = None,
        random_state: int | None = None,
    ) -> None:
        self.n_components = n_components
        self.kernel = kernel
        self.kernel_y = kernel_y
        self.kernel_params = kernel_params
        self.kernel_params_y = kernel_params_y
        self.sigma_fraction = sigma_fraction
        self.regularization = regularization
        self.solver = solver
        self.n_landmarks = n_landmarks
        self.landmarks = landmarks
        self.max_memory = max_memory
        self.random_state = random_state

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = True
        return kernel_input_tags(tags, self.kernel)

    @property
    def _n_features_out(self) -> int:
        return int(self.n_components)

    # -- validation ------------------------------------------------------------------------
    def _validate_y(self, Y: Any, X: Any, *, reset: bool) -> Any:
        owner = type(self).__name__
        if Y is None:
            raise InvalidInputError(
                f"{owner} requires y to be passed, but the target y is None: pass the second "
                "view Y, one row per row of X."
            )
        if not is_dask_array(Y):
            Y = np.asarray(Y)
            if Y.dtype == object or not np.issubdtype(Y.dtype, np.number):
                Y = np.asarray(Y, dtype=np.float64)
        if Y.ndim == 1:
            Y = Y.reshape(-1, 1)
        # two rows to fit a correlation; any number to transform
        Y = check_2d_array(Y, owner, min_samples=2 if reset else 1)
        if Y.shape[0] != X.shape[0]:
            raise InvalidInputError(
                f"{owner} needs the two views to have the same rows; X has {X.shape[0]} and Y "
                f"{Y.shape[0]}."
            )
        if reset:
            self.n_features_y_in_ = int(Y.shape[1])
        elif Y.shape[1] != self.n_features_y_in_:
            raise InvalidInputError(
                f"Y has {Y.shape[1]} features, but {owner} was fitted with "
                f"{self.n_features_y_in_} features in Y."
            )
        if is_dask_array(X) and is_dask_array(Y):
            return Y.rechunk({0: X.chunks[0], 1: -1})
        if is_dask_array(X):
            return da.from_array(np.asarray(Y), chunks=(X.chunks[0], -1))
        return as_numpy(Y, np.float64)

    def _make_kernel(self, view: int, V: Any, seed: int | None) -> Kernel:
        same = self.kernel_y is None
        name = self.kernel if view == 0 or same else self.kernel_y
        given = self.kernel_params
        if view == 1 and (self.kernel_params_y is not None or not same):
            given = self.kernel_params_y
        params = landmark_kernel_params(name, given, seed=seed, sigma_fraction=self.sigma_fraction)
        try:
            return make_kernel(name, V, **params)
        except ValueError:
            if not (isinstance(name, str) and name == "rbf" and params.get("sigma") is None):
                raise
            # a view of few distinct values (a binary Y): most distances are 0, so is their
            # median; the nonzero ones give the width
            params["sigma"] = _nonzero_median_sigma(V, params["sigma_fraction"], seed)
            return make_kernel(name, V, **params)

    def _choose_solver(self, n: int, kernels: tuple[Kernel, Kernel]) -> str:
        owner = type(self).__name__
        memory = 2 * dense_kernel_cost(n)[0]
        chosen = self.solver
        if chosen == "auto":
            fits = memory <= memory_limit(self.max_memory)
            small = n <= self.n_landmarks or any(k.precomputed for k in kernels)
            chosen = "exact" if fits and small else "nystrom"
        if chosen == "exact":
            check_budget(
                what=f"Exact kernel CCA of {owner} on {n} rows (two dense {n} x {n} kernels)",
                memory_bytes=memory,
                max_memory=self.max_memory,
                alternative=f"solver='nystrom' ({owner} on the views' Nyström features).",
            )
        return chosen

    # -- fit -------------------------------------------------------------------------------
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X: Any, y: Any = None) -> KernelCCA:
        """Fit the canonical pairs of the views ``X`` and ``y``.

        Parameters
        ----------
        X : array-like or dask array of shape (n_samples, n_features)
            The first view.
        y : array-like or dask array of shape (n_samples, n_features_y) or (n_samples,)
            The second view, row i paired with row i of X.

        Returns
        -------
        self
        """
        X = validate_input(self, X, reset=True, min_samples=2)
        Y = self._validate_y(y, X, reset=True)
        n = int(X.shape[0])
        seed = seed_from_random_state(self.random_state)
        kx = self._make_kernel(0, X, seed)
        ky = self._make_kernel(1, Y, derive_seed(seed, "kernel-cca", "y"))
        self.solver_ = self._choose_solver(n, (kx, ky))
        if self.solver_ == "exact":
            models, Phis = [], []
            for kernel, V in ((kx, X), (ky, Y)):
                Vn = as_numpy(V, np.float64)
                reference = kernel.landmark_data(Vn, np.arange(n))
                model, Phi = kernel_pca_features(
                    kernel, reference, dense_kernel(kernel, Vn, reference)
                )
                models.append(model)
                Phis.append(Phi)
            Cxx, Cyy, Cxy, _, _ = moments(Phis[0], Phis[1]).covariances()
        else:
            fx, kx = self._feature_map(X, kx, seed)
            fy, ky = self._feature_map(Y, ky, derive_seed(seed, "kernel-cca", "y"))
            Cxx, Cyy, Cxy, mx, my = self._moments(X, Y, fx, fy).covariances()
            models = [CenteredFeatures(fx, mx), CenteredFeatures(fy, my)]
        solution = regularized_cca(
            Cxx, Cyy, Cxy, int(self.n_components), float(self.regularization)
        )
        self.kernel_x_, self.kernel_y_ = kx, ky
        self.x_features_, self.y_features_ = models
        self.x_weights_, self.y_weights_ = solution.x_weights, solution.y_weights
        self.canonical_correlations_ = solution.correlations
        self.regularized_correlations_ = solution.regularized_correlations
        if self.solver_ == "exact":
            self.x_dual_coef_ = models[0].projection @ solution.x_weights
            self.y_dual_coef_ = models[1].projection @ solution.y_weights
        else:
            self.x_dual_coef_ = self.y_dual_coef_ = None
        return self

    def _feature_map(self, V: Any, kernel: Kernel, seed: int | None) -> tuple[Any, Kernel]:
        kernel, feature_map, _ = explicit_feature_map(
            V, kernel, self.n_landmarks, method=self.landmarks, random_state=seed
        )
        return feature_map, kernel

    def _moments(self, X: Any, Y: Any, fx: Any, fy: Any) -> Moments:
        """The paired feature sums over every row: Dask chunks as tasks, NumPy blocks on the
        cores, added pairwise in a fixed order."""
        if isinstance(X, da.Array):
            fn = dask.delayed(with_shared(_moments_block), pure=True)
            fxd, fyd = share(fx, "cca-feature-map-x"), share(fy, "cca-feature-map-y")
            parts = [
                fn(xb, yb, fxd, fyd)
                for xb, yb in zip(X.to_delayed().ravel(), Y.to_delayed().ravel(), strict=True)
            ]
            add = dask.delayed(_add, pure=True)
            while len(parts) > 1:
                nxt = [add(parts[i], parts[i + 1]) for i in range(0, len(parts) - 1, 2)]
                parts = nxt + ([parts[-1]] if len(parts) % 2 else [])
            total = dask.compute(parts[0])[0]
            return Moments(
                total.n, *(aligned(a) for a in (total.sx, total.sy, total.xx, total.yy, total.xy))
            )
        X, Y = np.asarray(X), np.asarray(Y)
        starts = list(range(0, X.shape[0], SUM_ROWS))
        parts = map_on_cores(
            lambda s: _moments_block(X[s : s + SUM_ROWS], Y[s : s + SUM_ROWS], fx, fy), starts
        )
        total = parts[0]
        for part in parts[1:]:
            total = total + part
        return total

    # -- transform -------------------------------------------------------------------------
    def _variates(self, V: Any, model: Any, W: np.ndarray) -> Any:
        if isinstance(V, da.Array):
            k = W.shape[1]
            return V.map_blocks(
                with_shared(_variates_block),
                share(model, "cca-model"),
                W,
                chunks=(V.chunks[0], (k,)),
                dtype=np.float64,
                meta=np.empty((0, k), dtype=np.float64),
            )
        return _variates_block(np.asarray(V), model, W)

    def transform(self, X: Any, y: Any = None) -> Any:
        """The canonical variates of new rows.

        Parameters
        ----------
        X : array-like or dask array of shape (n, n_features)
        y : array-like or dask array of shape (n, n_features_y) or (n,), optional
            The second view of the same rows.

        Returns
        -------
        ndarray (n, n_components), or ``(X variates, Y variates)`` when ``y`` is given; lazy
        dask arrays for Dask input. Training rows get their fitted variates.
        """
        check_is_fitted(self, "x_weights_")
        X = validate_input(self, X, reset=False)
        Zx = self._variates(X, self.x_features_, self.x_weights_)
        if y is None:
            return Zx
        Y = self._validate_y(y, X, reset=False)
        return Zx, self._variates(Y, self.y_features_, self.y_weights_)
