"""The Probabilistic Cluster Kernel (PCK; PCKID for incomplete data) as a scikit-learn estimator.

Sources: Løkse (2014), ch. 6 [Lokse2014]; Løkse (2020), Paper I, Eq. 4 and §3 [Lokse2020].
An ensemble of diagonal (or full) covariance GMMs, one per initial condition ``q = 1..Q`` and
number of components ``g = 2..G``, each trained for a few EM iterations on a random subsample,
gives every point the concatenated posteriors ``Γ_i = [γ_i(q, g)]`` (F = Q Σ_g g features).
``K = Γ Γᵀ / Z`` with ``Z = Q (G - 1)`` estimates the probability that two points come from the
same component; its diagonal is close to 1.
"""

from __future__ import annotations

import numbers
from numbers import Integral, Real
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin, _fit_context
from sklearn.utils._param_validation import Interval, StrOptions

from dkernel._budget import rows_of_max_samples
from dkernel._random import derive_rng, seed_from_random_state
from dkernel._validation import (
    ParameterConstraintsMixin,
    check_is_fitted,
    check_options,
    check_scalar,
    is_dask_array,
    max_samples_constraint,
    validate_input,
)
from dkernel.errors import (
    DKernelWarning,
    InvalidInputError,
    NumericalWarning,
    ResourceLimitError,
    VarianceFloorWarning,
    warn_caller,
)
from dkernel.gmm.em import DiagMixtures, MissingnessModel
from dkernel.gmm.graph import (
    FullMixtures,
    fit_ensemble,
    log_likelihood_block,
    log_likelihood_dask,
    posterior_block,
    posterior_feature_map_dask,
    sparse_posteriors,
)
from dkernel.gmm.projection import fit_pca_projection, project_observed, project_observed_dask
from dkernel.kernels.aliases import resolve_renamed
from dkernel.runtime.progress import active_client

_OWNER = "ProbabilisticClusterKernel"
_DENSE_KERNEL_LIMIT = 2 * 2**30  # bytes of an in-memory K before we refuse
#: ``fit`` warns when ``reg_covar`` exceeds this fraction of a used column's variance (on
#: three blobs scaled by 1e-4, reg_covar 1e-6 is 70 x their variance and ARI falls from 1 to 0).
REG_COVAR_MAX_FRACTION = 0.01
#: ``covariance_type='auto'`` fits full covariances on complete data with at most this many
#: used columns (a component then costs p² + p + 1 numbers per row where a diagonal one costs
#: 2p + 1; the sets measured for 'auto' have at most 16)
FULL_COVARIANCE_MAX_FEATURES = 16


class ProbabilisticClusterKernel(ParameterConstraintsMixin, TransformerMixin, BaseEstimator):
    """Probabilistic cluster kernel from an ensemble of GMMs; missing values (NaN) native.

    Parameters
    ----------
    n_estimators : int, default=30
        Q, the ensemble's size: its random initial conditions, each fitting the models
        g = 2..G on its own subsample; all are kept (an ensemble, not restarts, unlike
        ``n_init`` elsewhere). Formerly ``n_inits``.
    max_components : int, default=30
        G; models with g = 2..G components are fitted for every initial condition. When a
        subsample (``max_samples`` × the usable rows) has fewer than G rows, G is capped at its
        size with a :class:`~dkernel.errors.DKernelWarning` (see ``max_components_``); fewer
        than 2 rows are refused.
    n_iter : int, default=10
        EM iterations per model (a weak learner; not run to convergence).
    max_samples : int or float, default=0.5
        Rows each initial condition is trained on (the models of one ``q`` share its
        subsample; the kernel is evaluated on all rows): scikit-learn's ``max_samples`` of a
        bagging ensemble, a fraction of the usable rows (float) or at most this many (int).
        Formerly ``subsample``.
    covariance_type : {'auto', 'full', 'diag'}, default='auto'
        Covariance of every mixture component. 'full' is Alg. 1 of [Lokse2020] Paper I
        (points grouped by missingness pattern; on complete rows every model of an initial
        condition is fitted at once, ``dkernel.gmm.stacked_full``); 'diag' the simplification
        the paper's experiments used for cost. 'auto': 'full' when the training data have no
        missing value, ``missingness='ignorable'`` and at most
        ``FULL_COVARIANCE_MAX_FEATURES`` (16) used columns, else 'diag' (``covariance_type_``
        says which). By measurement: on the 20 complete sets of ``bench_realdata.py`` with at
        most 16 columns (seeds 0–2), ``PCKSpectralClustering`` scored a mean ARI of 0.444 with
        full covariances against 0.383 with diagonal ones (k-means 0.394): penguins
        0.64 → 0.95, the five BSDS photos 0.24 → 0.34, iris 0.80 → 0.89; olive, glass,
        diabetes and skulls lose at most 0.024.
        On the 23-set suite of ``bench_defaults.py`` its mean ARI went 0.567 → 0.615
        (anisotropic blobs 0.60 → 1.00, flame 0.51 → 0.97; jain 0.41 → 0.13). Full costs
        O(p²) per component and row where diagonal costs O(p): a kernel fit at 3 000 × 5 takes
        about 2.0 s against 0.7 s, at 3 000 × 16 3.4 s against 0.6 s, and
        ``PCKSpectralClustering`` on 2·10⁵ × 5 blobs 205 s against 103 s (2 cores).
    reg_covar : float, default=1e-6
        Added to every variance (diagonal of every covariance) after each M-step, relative to
        the data after centring (the data are not rescaled; scikit-learn's meaning). Per column
        it is raised to the squared resolution of that column (see Notes and
        ``variance_floor_``). ``fit`` warns (``NumericalWarning``) when it exceeds 1 % of a
        used column's variance: data in small units (a standard deviation of 1e-3 or less)
        want standardising or a smaller ``reg_covar``.
    random_state : int, numpy Generator or None
        Seed; model (q, g) derives its generator from ``(random_state, q, g)``.
    dtype : {'float32', 'float64'}, default='float32'
        Compute dtype of EM and of Γ.
    missingness : {'ignorable', 'informative'}, default='ignorable'
        ignorable: missing values carry no information (the published PCKID); informative:
        the pattern of missing values is evidence, e.g. a saturated sensor (diag only).
        'ignorable' is the PCKID of [Lokse2020], Paper I: a point is scored on its observed
        coordinates only, whatever its pattern of missing values. 'informative' (an extension,
        diagonal covariance only) also gives every component a probability of each coordinate being
        missing, so the pattern itself is evidence (a saturated sensor: NMAR), and pulls the
        variance of a component in a column its members mostly miss towards the column's
        observed variance (see :class:`dkernel.gmm.em.MissingnessModel`). On complete training
        data the two are identical.
    projection : int, float or None, default=None
        Fit the ensemble on the leading principal components: a count (>= 1) or the fraction
        of variance (< 1); None: the input columns (the published PCK, the default).
        None ([Lokse2020] Paper I, the default: measured best, see Notes) fits the ensemble on
        the input columns. An integer ``d >= 1`` fits it on the leading ``d`` principal components
        instead (capped at the number of used columns), a float in (0, 1) on the fewest
        components explaining that fraction of the variance. New points are projected with
        the same axes; missing values are handled as in ``dkernel.gmm.projection`` (the axes
        from mean-imputed data, a row's coordinates by least squares on its observed values).
        Ignorable missingness only.
    progress : bool, default=False
        Show the ensemble's progress (one task per initial condition) on the active
        ``distributed`` client: a bar on a terminal or in Jupyter, plain lines in a log.
    n_inits : int, optional
        Deprecated: the former name of ``n_estimators`` (a ``FutureWarning``), kept for one
        release.
    subsample : float, optional
        Deprecated: the former name of ``max_samples`` (a ``FutureWarning``), kept for one
        release.

    Attributes
    ----------
    covariance_type_ : {'diag', 'full'}
        The covariance the ensemble was fitted with (``covariance_type``, 'auto' resolved).
    ensemble_ : DiagMixtures or FullMixtures
        All fitted models, stacked; model ``m`` is ``(model_inits_[m], model_components_[m])``.
        Means are in centred coordinates (add ``location_``).
    location_ : ndarray (n_kept,)
        Column means of the observed training values, subtracted before EM.
    feature_mask_ : ndarray ``(n_features_in_,)`` of bool
        Columns used; all-NaN and zero-variance columns are dropped with a warning.
    projection_components_ : ndarray (n_kept, d) or None
        The principal axes the ensemble is fitted on (orthonormal columns; None without
        ``projection``). Model means and variances are then in these coordinates.
    projection_variance_ratio_ : ndarray (d,) or None
        Fraction of the variance of the centred used columns along each axis.
    missingness_model_ : MissingnessModel or None
        The priors of the informative model (None when missingness is ignorable or the
        training data are complete).
    variance_floor_ : ndarray (n_kept,) or (d,)
        What is added to the variances per used column: ``max(reg_covar, Δ_j²)`` with ``Δ_j``
        the resolution of column ``j`` (smallest gap between two distinct observed values);
        ``reg_covar`` for every axis with ``projection``.
    max_components_ : int
        The G the ensemble was fitted with: ``max_components``, or the subsample size when
        that is smaller.
    normalizer_ : float
        Z = Q (G - 1).
    n_features_out_ : int
        F = Q Σ_{g=2}^{G} g.
    degrees_ : ndarray (n_samples,)
        ``K 1`` on the training data, computed on first access as ``Γ (Γᵀ 1)`` in two streaming
        passes (K is never formed).

    See Also
    --------
    dkernel.PCKSpectralClustering : PCK (PCKID) spectral clustering ([Lokse2020], Paper I).
    dkernel.KernelPersonalizedPageRank : Ranking on this kernel (``kernel='pck'``).
    dkernel.JointRankingClustering : Joint ranking and clustering on it (``kernel='pck'``).
    sklearn.mixture.GaussianMixture : One complete-data Gaussian mixture.

    Notes
    -----
    Fit: one task per initial condition on the active ``distributed`` client (when there is
    one), data scattered once. Cost O(Q · n_iter · N·max_samples · p · Σ g) for 'diag'; memory
    per task O(block · Σ g + N p). Transform: O(N p F) time, O(N F) output (lazy for Dask).
    Rows with no observed value get posteriors equal to the mixture weights (warned);
    they are excluded from training.

    Coarsely quantised columns (integer-coded attributes, scores 1..10): many points share
    exactly the same value, so a component can put a variance of almost zero on one level of
    one column and its likelihood grows without bound (the degenerate maximum of a Gaussian
    mixture on tied data); the posteriors then split points by single-level differences.
    Components narrower than the data's resolution model the rounding grid, not the density,
    so every variance of column ``j`` gets at least ``Δ_j²`` (standard deviation of one
    level) added instead of ``reg_covar`` when that is larger. For continuous data ``Δ_j`` is
    negligible and nothing changes. ``Δ_j`` is the smallest positive gap between sorted
    distinct observed values, on all rows up to 100 000 and otherwise on a fixed random
    sample of 100 000 rows (the same for NumPy and Dask input).

    ``projection`` defaults to None because no projection helped on high-dimensional data
    (issue 15; standardised features, KPCA + k-means, ARI, seeds 0 and 1). On the input
    columns PCK scored 0.73 on Samson (156 bands), 0.56 on Jasper Ridge (198 bands) and 0.67
    on digits (64). With 20 principal axes it scored 0.50–0.60, 0.26–0.50 and 0.54; with 95 %
    of the variance 0.71, 0.50 and 0.52. Random quarters of the columns per initial condition
    scored 0.73, 0.52 and 0.66. k-means scored 0.61, 0.76 and 0.56. PCK's loss on Jasper Ridge
    comes from the Gaussian mixture splitting its tight water class, not from the dimension
    (docs/pck_results.md).

    References
    ----------
    - Løkse, Bianchi, Salberg & Jenssen, "Unsupervised learning using PCKID – A Probabilistic
      Cluster Kernel for Incomplete Data", Paper I of Løkse (2020), *Leveraging Kernels for
      Unsupervised Learning*, PhD thesis [Lokse2020]: §2.2 and Alg. 1 (EM with missing values),
      §3 and Eq. 4 (the kernel), §3.2 (initialisation).
    - Løkse (2014), *Joint ranking and clustering based on Markov Chain transition
      probabilities learned from data*, MSc thesis, ch. 6 [Lokse2014]: the probabilistic
      cluster kernel.

    Examples
    --------
    >>> from sklearn.datasets import load_wine
    >>> X = load_wine().data
    >>> pck = ProbabilisticClusterKernel(n_estimators=3, max_components=5, random_state=0).fit(X)
    >>> pck.transform(X).shape
    (178, 42)
    """

    _parameter_constraints: dict = {
        "n_estimators": [Interval(Integral, 1, None, closed="left")],
        "max_components": [Interval(Integral, 2, None, closed="left")],
        "n_iter": [Interval(Integral, 1, None, closed="left")],
        "max_samples": max_samples_constraint(2),
        "covariance_type": [StrOptions({"auto", "diag", "full"})],
        "reg_covar": [Interval(Real, 0, None, closed="left")],
        "random_state": ["random_state", np.random.Generator],
        # a name or a NumPy dtype / scalar type; resolved to float32 or float64 at fit
        "dtype": [StrOptions({"float32", "float64"}), type, np.dtype],
        "missingness": [StrOptions({"ignorable", "informative"})],
        # an integer >= 1 or a fraction in (0, 1): finished by _check_projection
        "projection": [Interval(Real, 0, None, closed="neither"), None],
        "progress": ["boolean"],
        # the former name of n_estimators (dkernel.kernels.aliases.RENAMED_PARAMETERS)
        "n_inits": [Interval(Integral, 1, None, closed="left"), None],
        # the former name of max_samples
        "subsample": [Interval(Real, 0, 1, closed="right"), None],
    }

    def __init__(
        self,
        n_estimators: int = 30,
        *,
        max_components: int = 30,
        n_iter: int = 10,
        max_samples: int | float = 0.5,
        covariance_type: str = "auto",
        reg_covar: float = 1e-6,
        random_state: int | np.random.Generator | None = None,
        dtype: str = "float32",
        missingness: str = "ignorable",
        projection: int | float | None = None,
        progress: bool = False,
        n_inits: int | None = None,
        subsample: float | None = None,
    ) -> None:
        self.n_estimators = n_estimators
        self.max_components = max_components
        self.n_iter = n_iter
        self.max_samples = max_samples
        self.covariance_type = covariance_type
        self.reg_covar = reg_covar
        self.random_state = random_state
        self.dtype = dtype
        self.missingness = missingness
        self.projection = projection
        self.progress = progress
        self.n_inits = n_inits
        self.subsample = subsample

    # ------------------------------------------------------------------ validation helpers
    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True  # NaN = missing (PCKID)
        # Γ is computed in ``dtype`` whatever the input's: only that input dtype is preserved
        name = np.dtype(self.dtype).name if self._dtype_ok() else None
        tags.transformer_tags.preserves_dtype = [name] if name in ("float32", "float64") else []
        return tags

    def _check_param_combinations(self) -> None:
        """Checks beyond ``_parameter_constraints``: combinations and the dtype's name."""
        if self.missingness == "informative" and self.covariance_type == "full":
            raise InvalidInputError(
                f"{_OWNER}: missingness='informative' is implemented for covariance_type='diag' "
                "only; use covariance_type='diag' or missingness='ignorable'."
            )
        _check_projection(self.projection, self.missingness)
        name = np.dtype(self.dtype).name if self._dtype_ok() else self.dtype
        check_options(name, "dtype", _OWNER, ("float32", "float64"))

    def _dtype_ok(self) -> bool:
        try:
            np.dtype(self.dtype)
        except TypeError:
            return False
        return True

    @property
    def _np_dtype(self) -> np.dtype:
        return np.dtype(self.dtype)

    def _column_stats(self, X: Any) -> tuple[np.ndarray, ...]:
        """(observed count, nanmean, nanvar, resolution) per column and whether inf occurs."""
        if is_dask_array(X):
            import dask
            import dask.array as da

            obs = ~da.isnan(X)
            Xz = da.where(obs, X, 0).astype(np.float64)
            rows = _resolution_rows(X.shape[0])
            sample = X if rows is None else X[rows]
            count, s1, s2, sample, has_inf = dask.compute(
                obs.sum(axis=0),
                Xz.sum(axis=0),
                (Xz * Xz).sum(axis=0),
                sample,
                da.isinf(X).any(),
            )
            res = column_resolution(sample) if not has_inf else np.full(X.shape[1], np.inf)
        else:
            obs = ~np.isnan(X)
            Xz = np.where(obs, X, 0).astype(np.float64)
            count, s1, s2 = obs.sum(axis=0), Xz.sum(axis=0), (Xz * Xz).sum(axis=0)
            has_inf = bool(np.isinf(X).any())
            rows = _resolution_rows(X.shape[0])
            sample = X if rows is None else X[rows]
            res = column_resolution(sample) if not has_inf else np.full(X.shape[1], np.inf)
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = s1 / count
            var = s2 / count - mean * mean
        return np.asarray(count), mean, var, np.asarray(res, dtype=np.float64), bool(has_inf)

    def _prepare(self, X: Any) -> Any:
        """Keep the fitted columns, centre, project if asked, cast (lazy for Dask)."""
        Xk = X[:, self.feature_mask_] if not self.feature_mask_.all() else X
        Xc = Xk - self.location_.astype(Xk.dtype)
        W = getattr(self, "projection_components_", None)
        if W is None:
            return Xc.astype(self._np_dtype)
        if is_dask_array(Xc):
            return project_observed_dask(Xc, W, self._np_dtype)
        return project_observed(Xc, W, self._np_dtype)

    def _validate_new(self, X: Any) -> Any:
        check_is_fitted(self, "ensemble_")
        X = validate_input(self, X, reset=False, allow_nan=True)
        if not is_dask_array(X):
            empty = np.isnan(X[:, self.feature_mask_]).all(axis=1)
            if empty.any():
                prior = (
                    "the mixture weights (the prior)"
                    if getattr(self.ensemble_, "missing_probs", None) is None
                    else "the mixture weights times each component's probability of an "
                    "all-missing row"
                )
                warn_caller(
                    f"{int(empty.sum())} rows have no observed value in the used columns; their "
                    f"posteriors are {prior}.",
                    NumericalWarning,
                )
        return X

    # ------------------------------------------------------------------ fit
    def _n_estimators(self) -> int:
        """``n_estimators``, or its former name ``n_inits`` when given (warns)."""
        return int(resolve_renamed(self, "n_estimators"))

    def _max_samples(self) -> int | float:
        """``max_samples``, or its former name ``subsample`` when given (warns)."""
        return resolve_renamed(self, "max_samples")

    def _check_reg_covar_scale(self, var: np.ndarray, keep: np.ndarray) -> None:
        """Warn when ``reg_covar`` is not small against the variance of a used column: every
        component is then wider than the data along it (data in small units, unscaled)."""
        reg = float(self.reg_covar)
        narrow = np.flatnonzero(keep & (reg > REG_COVAR_MAX_FRACTION * var))
        if narrow.size == 0:
            return
        smallest = float(var[narrow].min())
        warn_caller(
            f"{_OWNER}: reg_covar={reg:g} is {reg / smallest:.3g} x the variance of column "
            f"{int(narrow[np.argmin(var[narrow])])} ({smallest:.3g}; {narrow.size} columns "
            f"have a variance under {1 / REG_COVAR_MAX_FRACTION:g} x reg_covar): every mixture "
            "component is wider than the data there, so the kernel cannot tell points apart "
            "along them. Standardise X (for example sklearn.preprocessing.StandardScaler) or "
            "pass a reg_covar far below the columns' variances.",
            VarianceFloorWarning,
        )

    def _effective_max_components(self, n_sub: int, n_usable: int) -> int:
        """``max_components`` capped at the subsample size (warned); sets ``max_components_``.

        A model with ``g`` components needs at least ``g`` training rows, so with fewer than
        ``max_components`` rows in a subsample the largest models are left out rather than the
        fit refused (the default G = 30 on a small table). Fewer than 2 rows cannot train even
        the smallest model (g = 2): refused.
        """
        G = int(self.max_components)
        where = (
            f"The subsample of {_OWNER} has {n_sub} rows (max_samples={self._max_samples()} of "
            f"{n_usable} usable rows)"
        )
        if n_sub < 2:
            raise InvalidInputError(
                f"{where}; the smallest model (2 components) needs at least 2. Raise max_samples "
                "or pass more rows."
            )
        if n_sub < G:
            warn_caller(
                f"{where}, fewer than max_components={G}: models with g = 2..{n_sub} "
                f"components are fitted (max_components_ = {n_sub}). Lower max_components or "
                "raise max_samples to silence this.",
                DKernelWarning,
            )
            G = n_sub
        self.max_components_ = G
        return G

    def _resolve_covariance_type(self, n_columns: int, *, has_missing: bool) -> str:
        """'diag' or 'full': ``covariance_type``, with 'auto' resolved for ``n_columns`` used
        columns (or projected axes)."""
        if self.covariance_type != "auto":
            return str(self.covariance_type)
        full = (
            not has_missing
            and self.missingness == "ignorable"
            and n_columns <= FULL_COVARIANCE_MAX_FEATURES
        )
        return "full" if full else "diag"

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X: Any, y: Any = None) -> ProbabilisticClusterKernel:
        """Fit the GMM ensemble on ``X`` (NumPy or Dask, NaN = missing).

        Parameters
        ----------
        X : array-like or dask.array.Array (n_samples, n_features)
        y : ignored

        Returns
        -------
        self
        """
        self._check_param_combinations()
        X = validate_input(self, X, reset=True, allow_nan=True, min_samples=2)
        n, p = X.shape
        count, mean, var, resolution, has_inf = self._column_stats(X)
        if has_inf:
            raise InvalidInputError(
                f"{_OWNER} got infinite values in X; replace them or mark them NaN (missing)."
            )
        all_nan = count == 0
        # relative to the column's own magnitude: data in small units are not constant
        const = (~all_nan) & ~(var > 1e-12 * mean * mean)
        keep = ~(all_nan | const)
        if not keep.any():
            raise InvalidInputError(
                f"{_OWNER} found no usable column: every column is all-NaN or constant "
                f"({int(all_nan.sum())} all-NaN, {int(const.sum())} constant of {p})."
            )
        if not keep.all():
            warn_caller(
                f"{_OWNER} drops {int(all_nan.sum())} all-NaN and {int(const.sum())} zero-variance "
                f"columns (indices {np.flatnonzero(~keep).tolist()[:20]}); they carry no cluster "
                "information and would make the covariances singular.",
                NumericalWarning,
            )
        self._check_reg_covar_scale(var, keep)
        self.feature_mask_ = keep
        self.location_ = mean[keep].astype(np.float64)
        res = resolution[keep]
        floor = np.where(np.isfinite(res), res * res, 0.0)
        self.variance_floor_ = np.maximum(float(self.reg_covar), floor)
        self.projection_components_ = self.projection_variance_ratio_ = None
        if self.projection is not None:
            Xk = X[:, keep] if not keep.all() else X
            W, ratio = fit_pca_projection(Xk - self.location_.astype(Xk.dtype), self.projection)
            self.projection_components_, self.projection_variance_ratio_ = W, ratio
            # projected coordinates are continuous: no column resolution to respect
            self.variance_floor_ = np.full(W.shape[1], float(self.reg_covar))
        # a scalar when no column is coarser than reg_covar (continuous data: as before)
        reg = (
            self.variance_floor_
            if np.any(self.variance_floor_ > float(self.reg_covar))
            else float(self.reg_covar)
        )
        Xc = self._prepare(X)
        if is_dask_array(Xc):
            import dask.array as da

            has_obs = np.asarray(((~da.isnan(Xc)).any(axis=1)).compute())
        else:
            has_obs = ~np.isnan(Xc).all(axis=1)
        candidates = np.flatnonzero(has_obs)
        if candidates.size < n:
            warn_caller(
                f"{n - candidates.size} rows have no observed value; they are left out of "
                "training and get the mixture weights as posteriors"
                + (
                    " (times each component's probability of an all-missing row)."
                    if self.missingness == "informative"
                    else "."
                ),
                NumericalWarning,
            )
        n_sub = rows_of_max_samples(self._max_samples(), candidates.size)
        G = self._effective_max_components(n_sub, candidates.size)
        sizes = tuple(range(2, G + 1))
        seed = seed_from_random_state(self.random_state)
        missing_rate = 1.0 - count[keep] / candidates.size  # over the rows that can train
        self.missingness_model_ = (
            MissingnessModel(missing_rate=missing_rate, column_variance=var[keep].astype(float))
            if self.missingness == "informative" and missing_rate.any()
            else None
        )
        self.covariance_type_ = self._resolve_covariance_type(
            int(keep.sum()) if self.projection_components_ is None else int(W.shape[1]),
            has_missing=bool((count[keep] < n).any()),
        )
        parts = fit_ensemble(
            Xc,
            candidates,
            n_inits=self._n_estimators(),
            sizes=sizes,
            n_sub=n_sub,
            seed=seed,
            n_iter=int(self.n_iter),
            reg_covar=reg,
            covariance_type=self.covariance_type_,
            client=active_client(),
            missingness=self.missingness_model_,
            progress=bool(self.progress),
        )
        if self.covariance_type_ == "diag":
            self.ensemble_ = DiagMixtures.concatenate(parts)
        else:
            self.ensemble_ = FullMixtures([m for part in parts for m in part.models])
        Q = self._n_estimators()
        self.model_inits_ = np.repeat(np.arange(Q), len(sizes))
        self.model_components_ = np.tile(np.asarray(sizes), Q)
        self.normalizer_ = float(Q * (G - 1))
        self.n_features_out_ = int(self.ensemble_.offsets[-1])
        self.seed_ = seed
        self._X_fit = X
        self._degrees = None
        return self

    # ------------------------------------------------------------------ transform & kernel
    def transform(self, X: Any, *, sparse_threshold: float | None = None) -> Any:
        """Γ/√Z for ``X`` (the out-of-sample map; any missingness pattern).

        Parameters
        ----------
        X : array-like or dask.array.Array (n_samples, n_features)
            NaN = missing.
        sparse_threshold : float, optional
            Return a ``scipy.sparse.csr_matrix`` without the entries of Γ/√Z below this value,
            i.e. posteriors below ``sparse_threshold · √Z`` (NumPy input only). Every model's posteriors are nearly one-hot, so at 1e-4 about
            ``Q (G - 1)`` entries per row remain instead of F (≈ 980 of 13 920 at the
            defaults): 14× less memory, and a Prop. 8 score ``γ(x)·w`` costs O(non-zeros).
            Built a row block at a time, so the dense Γ of all rows never exists.

        Returns
        -------
        ndarray, dask.array.Array or scipy.sparse.csr_matrix ``(n_samples, n_features_out_)``
            Lazy (chunked by rows) for Dask input. ``transform(X) @ transform(Y).T`` is the PCK.

        Notes
        -----
        O(N p F) time; O(N F) output (O(non-zeros) sparse).
        """
        X = self._validate_new(X)
        Xc = self._prepare(X)
        scale = 1.0 / np.sqrt(self.normalizer_)
        if sparse_threshold is not None:
            check_scalar(sparse_threshold, "sparse_threshold", _OWNER, low=0)
            if is_dask_array(Xc):
                raise InvalidInputError(
                    "sparse_threshold needs NumPy input; for a Dask array map transform over its "
                    "row blocks (X.map_blocks) or compute the rows you need."
                )
            return sparse_posteriors(Xc, self.ensemble_, scale, self._np_dtype, sparse_threshold)
        if is_dask_array(Xc):
            return posterior_feature_map_dask(Xc, self.ensemble_, scale, self._np_dtype)
        return posterior_block(Xc, self.ensemble_, scale, self._np_dtype)

    def score_samples(self, X: Any) -> Any:
        """Each row's log-likelihood under the ensemble's mixtures, averaged over its models.

        Missing entries (NaN) are marginalised (the density of the observed ones). In the
        space the mixtures were fitted in: the kept columns, centred (and projected, with
        ``projection``), so the scores of two fits compare only on the same data.

        Parameters
        ----------
        X : array-like or dask.array.Array (n_samples, n_features)

        Returns
        -------
        ndarray or dask.array.Array (n_samples,)
            Lazy for Dask input.

        Notes
        -----
        O(N p C) for C components in all; float64.
        """
        X = self._validate_new(X)
        Xc = self._prepare(X)
        if is_dask_array(Xc):
            return log_likelihood_dask(Xc, self.ensemble_)
        return log_likelihood_block(Xc, self.ensemble_)

    def score(self, X: Any, y: Any = None) -> float:
        """Mean log-likelihood of the rows of ``X`` (:meth:`score_samples`), as scikit-learn's
        ``GaussianMixture.score``: higher is better, for comparing fits on held-out rows."""
        scores = self.score_samples(X)
        return float(scores.mean().compute() if is_dask_array(scores) else scores.mean())

    def get_feature_names_out(self, input_features: Any = None) -> np.ndarray:
        """Names ``pck_q{q}_g{g}_k{k}`` of the F posterior features."""
        check_is_fitted(self, "ensemble_")
        names = [
            f"pck_q{q}_g{g}_k{k}"
            for q, g in zip(self.model_inits_, self.model_components_, strict=True)
            for k in range(g)
        ]
        return np.asarray(names, dtype=object)

    def kernel(self, X: Any = None, Y: Any = None) -> Any:
        """The PCK matrix ``K(X, Y) = Γ_X Γ_Yᵀ / Z`` (training data when None).

        Lazy (Dask) when either input is Dask; an in-memory K above 2 GiB is refused.

        Raises
        ------
        ResourceLimitError
            When an in-memory K would exceed 2 GiB; use ``transform`` (the explicit feature map)
            or Dask input instead.
        """
        check_is_fitted(self, "ensemble_")
        X = self._X_fit if X is None else X
        Y = X if Y is None else Y
        nbytes = X.shape[0] * Y.shape[0] * self._np_dtype.itemsize
        if not (is_dask_array(X) or is_dask_array(Y)) and nbytes > _DENSE_KERNEL_LIMIT:
            raise ResourceLimitError(
                f"the PCK matrix of {X.shape[0]} x {Y.shape[0]} points needs "
                f"{nbytes / 2**30:.1f} GiB in memory. Use transform() (K = Γ Γᵀ, never formed) "
                "or pass Dask arrays for a blocked, lazy K."
            )
        GX = self.transform(X)
        GY = GX if Y is X else self.transform(Y)
        if is_dask_array(GX) or is_dask_array(GY):
            import dask.array as da

            GX = GX if is_dask_array(GX) else da.from_array(GX)
            GY = GY if is_dask_array(GY) else da.from_array(GY)
            return GX @ GY.T
        return GX @ GY.T

    @property
    def degrees_(self) -> np.ndarray:
        """Degrees ``d = K 1 = Γ (Γᵀ 1) / Z`` of the training points (two streaming passes)."""
        check_is_fitted(self, "ensemble_")
        if self._degrees is None:
            X = self._X_fit
            if is_dask_array(X):
                self._degrees = feature_map_degrees(self.transform(X))
            else:
                Xc = self._prepare(X)
                scale = 1.0 / np.sqrt(self.normalizer_)
                step = 4096
                blocks = [(slice(a, min(a + step, X.shape[0]))) for a in range(0, X.shape[0], step)]
                s = np.zeros(self.n_features_out_)
                for sl in blocks:
                    s += posterior_block(Xc[sl], self.ensemble_, scale, self._np_dtype).sum(
                        axis=0, dtype=np.float64
                    )
                d = np.empty(X.shape[0])
                for sl in blocks:
                    d[sl] = posterior_block(Xc[sl], self.ensemble_, scale, self._np_dtype) @ s
                self._degrees = d
        return self._degrees


def _check_projection(projection: Any, missingness: str) -> None:
    """``projection`` is None, an integer >= 1 or a fraction in (0, 1)."""
    if projection is None:
        return
    ok = isinstance(projection, numbers.Real) and not isinstance(projection, bool)
    ok = ok and np.isfinite(projection) and projection > 0
    ok = ok and (projection < 1 or float(projection).is_integer())
    if not ok:
        raise InvalidInputError(
            f"{_OWNER}: 'projection' must be None (the input columns), an integer >= 1 "
            "(that many principal components) or a float in (0, 1) (the fraction of variance "
            f"to keep); got {projection!r}."
        )
    if missingness == "informative":
        raise InvalidInputError(
            f"{_OWNER}: missingness='informative' models which input coordinates are missing "
            "and cannot be combined with a projection; use projection=None or "
            "missingness='ignorable'."
        )


_RESOLUTION_SAMPLE = 100_000


def _resolution_rows(n: int) -> np.ndarray | None:
    """Rows on which the column resolution is measured: all (None) or a fixed sample."""
    if n <= _RESOLUTION_SAMPLE:
        return None
    rng = derive_rng(0, "pck-resolution-sample")
    return np.sort(rng.choice(n, size=_RESOLUTION_SAMPLE, replace=False))


def column_resolution(X: np.ndarray) -> np.ndarray:
    """Smallest positive gap between distinct observed (non-NaN) values of every column.

    ``inf`` for a column with fewer than two distinct values. For integer-coded data this is
    the step of the grid (1); for continuous data it is tiny.

    Notes
    -----
    O(N log N) per column (a sort).
    """
    X = np.asarray(X)
    out = np.full(X.shape[1], np.inf)
    for j in range(X.shape[1]):
        col = X[:, j]
        v = np.unique(col[~np.isnan(col)])
        if v.size > 1:
            out[j] = float(np.min(np.diff(v.astype(np.float64))))
    return out


def feature_map_degrees(Phi: Any) -> np.ndarray:
    """``Φ (Φᵀ 1)`` for a NumPy or Dask feature map, without forming ``Φ Φᵀ``.

    Notes
    -----
    O(N F) time; for Dask input Φ is streamed twice (recomputed, not held).
    """
    if is_dask_array(Phi):
        s = Phi.sum(axis=0, dtype=np.float64).compute()
        return np.asarray((Phi.astype(np.float64) @ s).compute())
    Phi = np.asarray(Phi)
    s = Phi.sum(axis=0, dtype=np.float64)
    return Phi.astype(np.float64, copy=False) @ s
