"""Gaussian mean shift as a scikit-learn estimator: :class:`MeanShift` (MSSC's stage one).

Seeds (every density point, grid bins or a k-means pre-partition weighted by counts,
[Agersborg2012], §7.1) climb a density from a sample; every point is then streamed through mean
shift against that stored density to a stored mode; ``predict`` does the same for new points.
"""

from __future__ import annotations

from numbers import Integral, Real
from typing import Any, cast

import numpy as np
from sklearn.base import BaseEstimator, ClusterMixin, _fit_context
from sklearn.utils._param_validation import Interval, StrOptions

from dkernel._random import systematic_rows
from dkernel._validation import (
    ParameterConstraintsMixin,
    as_numpy,
    check_is_fitted,
    is_dask_array,
    validate_input,
)
from dkernel.errors import (
    DegenerateClusteringWarning,
    InvalidInputError,
    MeanShiftConvergenceWarning,
    warn_caller,
)
from dkernel.kernels.aliases import resolve_renamed
from dkernel.kernels.missing_model import MissingValueModel, column_moments
from dkernel.kernels.widths import neighbour_bandwidth, silverman_thesis
from dkernel.linalg.kmeans import without_lost_clusters_warning
from dkernel.linalg.pca import principal_axes
from dkernel.meanshift import kernels as K
from dkernel.meanshift.graph import AssignModel, stream_assign
from dkernel.meanshift.persistence import merge_by_persistence
from dkernel.rows import take_rows

#: ``MeanShift.fit`` warns when it ends with more clusters than this fraction of its seeds (and
#: more than ``DEGENERATE_MIN_MODES``): a small fraction of N clusters is a clustering, a large
#: one is not.
DEGENERATE_MODE_FRACTION = 0.05
DEGENERATE_MIN_MODES = 20
#: ... or when more than this share of the points were in basins under ``min_cluster_size``
#: (the fraction; not the 5-point floor): then the pruning, not the density, made the partition.
DEGENERATE_PRUNED_SHARE = 0.5
#: ... or when a single cluster is left and more than this share of the points were in the
#: other, pruned basins: many points with modes of their own, none large enough (holed MNIST,
#: 26 %; a Gaussian blob's tail modes hold under 1 %, and one cluster is its right answer).
DEGENERATE_ONE_CLUSTER_SHARE = 0.1
#: ``MeanShift``'s ``min_cluster_size``: basins under 1 % of the points join a larger mode.
MIN_CLUSTER_FRACTION = 0.01
#: ... and, whenever ``min_cluster_size`` > 0, basins under this many points (scikit-learn
#: ``HDBSCAN``'s ``min_cluster_size``): 1 % of a table of 100 rows is a single point.
MIN_CLUSTER_POINTS = 5
#: ``MeanShift``'s ``saddle_ratio``: a basin whose highest pass into a higher mode's basin is
#: at least this fraction of its own peak density joins it (``dkernel.meanshift.persistence``).
SADDLE_RATIO = 0.8
#: Seeds joined to each seed in the graph the passes between basins are read on.
PASS_NEIGHBORS = 10
#: ``MeanShift``'s ``projection``: mean shift runs on at most 15 principal components.
PROJECTION_COMPONENTS = 15

_POSITIVE = Interval(Real, 0, None, closed="neither")
_NON_NEGATIVE = Interval(Real, 0, None, closed="left")
_RANDOM_STATE = ["random_state", np.random.Generator]


def _path_schedule(n_iter: int) -> list[int]:
    """Iterates kept in the trajectory cache: 0, 1, 2, 4, 8, ... and the last."""
    keep = [0]
    k = 1
    while k < n_iter:
        keep.append(k)
        k *= 2
    keep.append(n_iter)
    return sorted(set(keep))


class MeanShift(ParameterConstraintsMixin, ClusterMixin, BaseEstimator):
    """Gaussian mean shift with seeds, a density sample and streaming assignment.

    Parameters
    ----------
    bandwidth : float, optional
        Kernel width h, the standard deviation of the Gaussian kernel. None: ``bandwidth_factor``
        × the larger of Silverman's rule ([Agersborg2012], Eq. 5.1) and half the median
        distance from a density point to its nearest neighbour
        (:func:`~dkernel.kernels.neighbour_bandwidth`). The rule takes each feature's spread
        as the smaller of its standard deviation and IQR / 1.349
        (``silverman_thesis(..., robust=True)``): with the standard deviation, one row 10⁴
        away from four blobs widened h 67-fold and merged them into one cluster. The rule is a
        fraction of the per-feature spread, which in 64 or more dimensions is a small fraction
        of the distance between neighbours: on the 64-D digits (standardised) it gave 1 774
        modes for 1 797 points; the neighbour floor gives ~200 (ARI 0.55) and takes over only
        where the rule is that narrow (on 7- and 36-feature tables Silverman's rule is the
        larger). scikit-learn's ``MeanShift``
        uses a flat kernel, a ball of *radius* h: at the same number the Gaussian is wider (mean
        squared radius d h² against d h² / (d + 2) in d dimensions), smooths more and finds fewer
        modes. For the modes of a flat kernel of radius r, pass ``bandwidth = r / sqrt(d + 2)``
        (same second moment): on the 10⁶-pixel scene of ``benchmarks/bench_meanshift_scale.py``
        (d = 8) that finds the 6 generating classes (ARI 1.000), where h = r finds 4 (ARI 0.87). The
        modes need not coincide exactly: the two kernels weigh the points differently.
    blurring : bool
        Blurring mean shift (the density points move too; [Agersborg2012], §2.4.2).
    seeds : {'all', 'grid', 'kmeans'}
        Mode-finding vectors: every density point, the means of occupied grid bins of width
        ``bin_size`` (weighted by counts), or a k-means pre-partition with ``n_seeds``
        centres weighted by counts ([Agersborg2012], §7.1, "three-stage").
    n_seeds : int
        Number of k-means centres for ``seeds='kmeans'`` (started from evenly spaced sample
        points: no randomness in the first stage).
    bin_size : float, optional
        Grid bin width for ``seeds='grid'`` (default: the bandwidth).
    density : {'sample', 'seeds'}
        Density estimate from a uniform sample of the points, or from the weighted seeds
        (cheapest; good when the seeds are much denser than h).
    density_max_samples : int
        Size of the density sample (all points when there are fewer): evenly spaced rows, so
        the first stage is a function of the data alone, as mean shift itself is. Formerly
        ``n_density``.
    max_iter : int
        Iteration cap.
    tol : float
        Convergence tolerance relative to h.
    group_factor : float
        End points closer than ``group_factor · median(move)`` (clipped to
        [1e-3 h, h/2]) are one mode.
    path_radius : float
        Streaming assignment stops a point within ``path_radius · h`` of a stored seed
        trajectory (0: run every point to convergence).
    bandwidth_factor : float
        Multiplies the rule's bandwidth when ``bandwidth`` is None (a first stage that
        over-partitions wants h below the rule of thumb, [Agersborg2012], §6.1.2).
    min_cluster_size : float
        Modes whose basin of attraction holds less than this fraction of the points (of the
        seeds' weight), or fewer than 5 points (``MIN_CLUSTER_POINTS``, scikit-learn
        ``HDBSCAN``'s default ``min_cluster_size``), join the nearest larger mode: the pruning
        of small basins of [Comaniciu2002]. A mode reached by one seed or two is where a point
        of a sparse region stopped, not a mode of the density; without the pruning they became
        clusters of their own. On the 35 real sets of ``benchmarks/bench_realdata.py``
        (3 000-row samples) the mean ARI was 0.342 without it (0), 0.362 at 1 %, 0.327 at 2 %
        and 0.320 at 5 %, which also drop small real classes; breast cancer went from 0.34 to
        0.55 and biopsy from 0.67 to 0.86 at 1 %. 1 % of a 100-row table is one point: the
        5-point floor takes the olive oils (96 rows) from 19 clusters to 5 (k = 7; ARI 0.810
        to 0.835) and the 35 sets from 0.3966 to 0.3973, the 23-set suite of
        ``bench_defaults.py`` from 0.5815 to 0.5819. 0: every mode is a cluster (MSSC's first
        stage, which over-partitions on purpose).
    saddle_ratio : float or None
        After the pruning, a basin whose highest pass into the basin of a higher mode has at
        least this fraction of its own peak's density joins that basin, passes taken from the
        highest down (topological persistence, ToMATo [Chazal2013];
        ``dkernel.meanshift.persistence``); the passes are read on the 10-nearest-neighbour
        graph of the seeds, and the merging never joins the last two groups (one group is the
        pruning's answer). A region of nearly even density (a sky, a stretched class) holds
        several shallow modes, which became clusters of their own. On the 39 real sets of
        ``benchmarks/bench_realdata.py`` (3 000-row samples, seeds 0–2) mean ARI 0.407 without
        it (None) and 0.419 at 0.8, at least k-means' ARI on 25 and 24 sets; the best dkernel
        method on the five photos 0.388 and 0.481 (photo 8068: 0.29 to 0.77); 60 held-out sets
        (``benchmarks/bench_heldout.py``) 0.108 and 0.120. Ecoli (0.72 to 0.39) and photo 5096
        (0.59 to 0.42) lose: classes that meet without a dip in the density. Without the stop
        at two groups, 0.8 took the Pima and crabs tables to one cluster (ARI 0). Cost: the
        density at each seed (at most 5 000) and a k-d tree of the seeds; five 5-D blobs fit
        in 0.31 s against 0.26 s at 3 000 rows, 3.16 s against 3.03 s at 2·10⁵. None: no
        merging (MSSC's first stage).
    projection : int, float or None
        Mean shift runs on the leading principal components of the data: this many (an int,
        when X has more columns) or as many as explain this fraction of the variance (a
        float in (0, 1)); None: the input columns. The axes are those of the density sample
        (of its missing-value model's covariance when it has missing entries); a row with
        missing entries is projected filled with its conditional means (``missing_model_``),
        and new rows are projected onto the same axes. Default 15: a Gaussian
        density estimate of a few thousand points resolves no modes in many more dimensions
        (Silverman 1986, Table 4.2: the sample size for a given accuracy grows by orders of
        magnitude with each few dimensions), and the discarded directions carry the least
        variance. On the 35 real sets of ``benchmarks/bench_realdata.py`` (3 000-row
        samples) mean ARI 0.362 on the columns against 0.392 on 15 components (tissue, 500
        genes: 0.26 to 0.73; Samson, 156 bands: 0.43 to 0.67), 0.386 on 10 and 0.381 on 20;
        the 23-set suite 0.570 against 0.576. Also the same meaning as
        :class:`~dkernel.ProbabilisticClusterKernel`'s ``projection``.
    random_state : int, optional
        Unused by mean shift, which is deterministic; MSSC's second stage uses it.
    n_density : int, optional
        Deprecated: the former name of ``density_max_samples`` (a ``FutureWarning``), kept for
        one release.

    Attributes
    ----------
    bandwidth_ : float
    location_ : ndarray (n_features,) or None
        Column means subtracted before the projection (None: no projection).
    projection_components_ : ndarray (n_features, d) or None
        The principal axes mean shift ran on (orthonormal columns); ``density_``, ``seeds_``,
        ``modes_`` and the trajectories are in their coordinates. None: the input columns.
    projection_variance_ratio_ : ndarray (d,) or None
        Fraction of the variance along each axis.
    density_ : ndarray (m, d)
    density_weights_ : ndarray (m,) or None
    seeds_ : ndarray (s, d)
    seed_weights_ : ndarray (s,) or None
    seed_labels_ : ndarray (s,)
    modes_ : ndarray (n_partitions, d)
    n_partitions_ : int
    labels_ : ndarray (N,) or dask array
        Partition of every training point; -1 for rows with every entry NaN (nodata: no part
        of the density, as in :meth:`predict`). Infinite values are refused.
    missing_model_ : dkernel.kernels.missing.MissingValueModel or None
        What missing entries are expected to be given a row's observed ones, fitted to the
        density sample (complete or not; ``predict`` fills new rows' gaps with it; None for
        MSSC, whose pixels with a missing band are nodata). A row with some entries missing
        enters the density at ``x̃``, the row filled with its conditional means, with the
        weight of a complete row: each row is one observation. Weighting its Gaussian by its
        expected kernel ``exp(−r / 2h²)`` instead (``r`` the conditional variance of its
        missing entries, the expected squared distance ``‖m − x̃‖² + r``) left the density to
        the complete rows: on the hawks (8 % of rows complete) 20 clusters, ARI 0.66, against
        9 clusters, 0.86 at one weight per row (k-means on the mean-imputed rows: 0.85); the
        nine sets with missing values 0.413 against 0.429 (``docs/real_data.md``).
        Benchmarks: the real-data sets with missing values
        (``benchmarks/results/realdata.md``).
    n_iter_ : int
    converged_ : bool
        Every seed's last step was below ``tol · h``; when not, fit warns
        (:class:`~dkernel.errors.MeanShiftConvergenceWarning`).
    group_threshold_ : float
    path_points_, path_labels_ : ndarray
        Trajectory cache used by streaming assignment and :meth:`predict`.
    n_features_in_ : int
        Number of features seen in ``fit``.
    feature_names_in_ : ndarray of str
        Column names of a DataFrame passed to ``fit`` (absent for other input).

    Warns
    -----
    DegenerateClusteringWarning
        When :meth:`fit` ends with more clusters than 5 % of its seeds (and more than 20):
        nearly every point its own cluster; or when more than half the points were in basins
        under ``min_cluster_size``'s fraction (the pruning, not the density, made the
        partition; the 5-point floor alone prunes most of a few dozen points whatever the
        bandwidth): the message names the fix (a larger ``bandwidth``, or fewer
        dimensions). Also when one cluster is left and more than 10 % of the points were in
        the other basins, all under ``min_cluster_size`` (holed MNIST: 753 modes, 742 of them
        single seeds, 26 % of the points, one cluster); the message names a smaller
        ``bandwidth`` and, for data without density modes, a clusterer given
        ``n_clusters``. One cluster with a few tail modes pruned into it (a Gaussian blob:
        under 1 % of the points) is the right answer and no warning. Many small
        modes that the pruning joins to larger ones are not a warning: in 10 or more
        dimensions a Gaussian density estimate's tails hold such modes on most tables (the
        digits: 489 modes for 1 797 points, 19 clusters, ARI 0.58).

    See Also
    --------
    dkernel.MSSC : Mean shift partitions clustered spectrally (stage two).
    sklearn.cluster.MeanShift : scikit-learn's mean shift (flat kernel, in memory).

    References
    ----------
    - Fukunaga & Hostetler (1975), "The estimation of the gradient of a density function, with
      applications in pattern recognition", *IEEE Transactions on Information Theory* 21(1)
      [Fukunaga1975]; Cheng (1995), "Mean shift, mode seeking, and clustering", *IEEE TPAMI*
      17(8) [Cheng1995]: mean shift and its blurring variant.
    - Comaniciu & Meer (2002), "Mean shift: a robust approach toward feature space analysis",
      *IEEE TPAMI* 24(5) [Comaniciu2002]: stopping on a known trajectory (``path_radius``).
    - Chazal, Guibas, Oudot & Skraba (2013), "Persistence-based clustering in Riemannian
      manifolds", *Journal of the ACM* 60(6) [Chazal2013]: basins joined by their passes
      (``saddle_ratio``).
    - Agersborg (2012), *Mean Shift Spectral Clustering Using Kernel Entropy Component
      Analysis*, MSc thesis [Agersborg2012]: §2.4 (Eq. 2.57, the Gaussian step; §2.4.2,
      blurring), Eq. 5.1 (the bandwidth rule), §6.1.2 (grouping end points relative to their
      moves), §7.1 (seeds from a pre-partition, new points against the stored density).
    """

    def __init__(
        self,
        bandwidth: float | None = None,
        *,
        blurring: bool = False,
        seeds: str = "all",
        n_seeds: int = 1000,
        bin_size: float | None = None,
        density: str = "sample",
        density_max_samples: int = 5000,
        max_iter: int = 300,
        tol: float = 1e-3,
        group_factor: float = 0.25,
        path_radius: float = 0.2,
        bandwidth_factor: float = 1.0,
        min_cluster_size: float = MIN_CLUSTER_FRACTION,
        saddle_ratio: float | None = SADDLE_RATIO,
        projection: int | float | None = PROJECTION_COMPONENTS,
        random_state: int | None = None,
        n_density: int | None = None,
    ) -> None:
        self.bandwidth = bandwidth
        self.bandwidth_factor = bandwidth_factor
        self.min_cluster_size = min_cluster_size
        self.saddle_ratio = saddle_ratio
        self.projection = projection
        self.blurring = blurring
        self.seeds = seeds
        self.n_seeds = n_seeds
        self.bin_size = bin_size
        self.density = density
        self.density_max_samples = density_max_samples
        self.max_iter = max_iter
        self.tol = tol
        self.group_factor = group_factor
        self.path_radius = path_radius
        self.random_state = random_state
        self.n_density = n_density

    _parameter_constraints: dict = {
        "bandwidth": [_POSITIVE, None],
        "blurring": ["boolean"],
        "seeds": [StrOptions({"all", "grid", "kmeans"})],
        "n_seeds": [Interval(Integral, 1, None, closed="left")],
        "bin_size": [_POSITIVE, None],
        "density": [StrOptions({"sample", "seeds"})],
        "density_max_samples": [Interval(Integral, 2, None, closed="left")],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "tol": [_NON_NEGATIVE],
        "group_factor": [_NON_NEGATIVE],
        "path_radius": [Interval(Real, 0, 1, closed="both")],
        "bandwidth_factor": [_POSITIVE],
        "min_cluster_size": [Interval(Real, 0, 1, closed="left")],
        "saddle_ratio": [Interval(Real, 0, 1, closed="right"), None],
        "projection": [
            Interval(Integral, 1, None, closed="left"),
            Interval(Real, 0, 1, closed="neither"),
            None,
        ],
        "random_state": _RANDOM_STATE,
        # the former name of density_max_samples (dkernel.kernels.aliases.RENAMED_PARAMETERS)
        "n_density": [Interval(Integral, 2, None, closed="left"), None],
    }

    # -- fitting ------------------------------------------------------------------------------
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X: Any, y: Any = None) -> MeanShift:
        """Find the modes and the partition of every point.

        Notes
        -----
        With S seeds, M density points and T iterations: O(T · S · M · d) for the modes plus
        O(N · t · M · d) to stream N points (t = mean steps per point, small with the
        trajectory cache). Memory O(M · block + S · d · log T); never O(N²).
        """
        self._fit_modes(validate_input(self, X, reset=True, allow_nan=True, min_samples=2))
        self._check_degenerate()
        return self

    def _fit_projection(
        self, filled: np.ndarray, model: MissingValueModel | None, location: np.ndarray
    ) -> np.ndarray:
        """The density sample (``filled``: missing entries at their conditional means) in the
        space mean shift runs in. Sets ``location_``, ``projection_components_`` and
        ``projection_variance_ratio_`` (None: the input columns).

        With missing entries, ``model`` is the sample's
        :class:`~dkernel.kernels.missing.MissingValueModel` and ``location`` its mean; the
        axes are those of its covariance (the covariance of the filled rows misses the
        conditional covariances), unless it models the columns' variances only.
        """
        self.location_ = self.projection_components_ = self.projection_variance_ratio_ = None
        p = int(filled.shape[1])
        size = self.projection
        if size is None or (isinstance(size, Integral) and p <= size):
            return filled
        if model is None or model.independent:
            centred = filled - location
            covariance = centred.T @ centred / max(filled.shape[0] - 1, 1)
        else:
            covariance = model.covariance
        W, ratio = principal_axes(covariance, size)
        self.location_, self.projection_components_ = location, W
        self.projection_variance_ratio_ = ratio
        return (filled - location) @ W

    def _rule_bandwidth(self, sample: np.ndarray) -> float:
        """The bandwidth when ``bandwidth`` is None: ``bandwidth_factor`` × the larger of
        Silverman's rule (with each feature's robust spread) and half the median
        nearest-neighbour distance of the density sample
        (:func:`~dkernel.kernels.neighbour_bandwidth`)."""
        rule = silverman_thesis(sample, robust=True)
        return self.bandwidth_factor * max(rule, neighbour_bandwidth(sample))

    def _min_basin_mass(self, total_mass: float) -> float:
        """The seed weight (points) a basin needs to stay a cluster (0: keep every mode)."""
        if self.min_cluster_size == 0:
            return 0.0
        return max(float(self.min_cluster_size) * float(total_mass), MIN_CLUSTER_POINTS)

    def _check_degenerate(self) -> None:
        """Warn when the partition is no clustering: more clusters than
        ``DEGENERATE_MODE_FRACTION`` of the seeds, more than ``DEGENERATE_PRUNED_SHARE`` of
        the points in basins that ``min_cluster_size`` pruned, or one cluster left where more
        than ``DEGENERATE_ONE_CLUSTER_SHARE`` of the points were in basins pruned into it."""
        n_seeds = int(self.seeds_.shape[0])
        m, single, pruned_share = self._modes_before_pruning_
        left = self.n_partitions_
        found = (
            f"{type(self).__name__}: mean shift found {m} modes for {n_seeds} seeds ({single} "
            f"hold a single seed) at bandwidth {self.bandwidth_:.4g}"
        )
        clusters = f"{left} cluster{'s' if left != 1 else ''}"
        if left > max(DEGENERATE_MIN_MODES, DEGENERATE_MODE_FRACTION * n_seeds):
            pruned = (
                f"; those under min_cluster_size={self.min_cluster_size} joined the nearest "
                "larger mode"
                if left < m
                else ""
            )
            what = (
                f"{found}{pruned}, leaving {clusters} ({left / n_seeds:.0%} of the seeds): "
                "nearly every point is its own cluster"
            )
            fix = self._wider_kernel_advice()
        elif pruned_share > DEGENERATE_PRUNED_SHARE:
            what = (
                f"{found}; the {pruned_share:.0%} of the points in basins under "
                f"min_cluster_size={self.min_cluster_size} joined the nearest larger mode, "
                f"leaving {clusters}: that pruning made the partition more than the density did"
            )
            fix = self._wider_kernel_advice()
        elif left == 1 and pruned_share > DEGENERATE_ONE_CLUSTER_SHARE:
            # one mode that matters, every other basin under min_cluster_size: a wider
            # kernel cannot split it, a narrower one may
            what = (
                f"{found}; all but one held under min_cluster_size={self.min_cluster_size} "
                f"({pruned_share:.0%} of the points) and joined it, leaving a single cluster: "
                "at this bandwidth the density has one mode"
            )
            fix = (
                "Pass a smaller bandwidth (or bandwidth_factor) to separate more; if the modes "
                "it finds are single points, the data has no density modes to find in these "
                "dimensions, and a clusterer given n_clusters (SpectralClustering, "
                "PCKSpectralClustering) is the tool"
            )
        else:
            return
        warn_caller(f"{what}. {fix}.", DegenerateClusteringWarning)

    def _wider_kernel_advice(self) -> str:
        """The fix for a kernel too narrow: a larger bandwidth, or fewer dimensions."""
        if self.projection_components_ is not None:
            fewer = f", or a smaller projection (now {self.projection_components_.shape[1]})"
        elif self.n_features_in_ > PROJECTION_COMPONENTS:
            fewer = f", or projection={PROJECTION_COMPONENTS} (the leading principal components)"
        else:
            fewer = ""
        return (
            "In many dimensions that means the kernel is narrow against the distances between "
            f"neighbours. Pass a larger bandwidth (or bandwidth_factor){fewer}"
        )

    def _fit_modes(self, X: Any) -> MeanShift:
        """:meth:`fit` on validated ``X`` (NumPy, or Dask kept lazy)."""
        n = int(X.shape[0])
        size = int(cast(int, resolve_renamed(self, "density_max_samples")))
        dense_all = n <= size
        if dense_all:
            sample = as_numpy(X, np.float64)
        else:
            # evenly spaced, not drawn: mean shift is a deterministic mode search, and a drawn
            # density sample and pre-partition made MSSC's classes depend on random_state (the
            # demo scene's five seeds agreed to a pairwise ARI of 0.51); evenly spaced rows
            # also cover an image's raster order uniformly in space
            sample = take_rows(X, systematic_rows(n, size), np.float64)
        # rows that are all NaN (for MSSC: any NaN) are nodata: no part of the density, label
        # -1 (as in predict); MeanShift fills the other rows' missing entries
        missing = np.isnan(sample)
        empty_columns = np.flatnonzero(missing.all(axis=0))
        nodata = missing.any(axis=1) if self._partial_rows_are_nodata else missing.all(axis=1)
        has_nan = bool(nodata.any())
        if has_nan:
            sample, missing = sample[~nodata], missing[~nodata]
        if sample.shape[0] < 2:
            rows = "without NaN" if self._partial_rows_are_nodata else "with an observed value"
            hint = (
                f" Column(s) {empty_columns.tolist()[:10]} are NaN in every row: drop them."
                if self._partial_rows_are_nodata and empty_columns.size
                else ""
            )
            raise InvalidInputError(
                f"{type(self).__name__} needs at least 2 rows {rows} (the others are nodata) "
                f"in its density sample; got {sample.shape[0]}.{hint}"
            )
        # rows with NaN: filled with their conditional means under the sample's missing-value
        # model, which also fills new rows with NaN in predict (complete samples: only there)
        fill = None if self._partial_rows_are_nodata else MissingValueModel.fit(sample)
        partial = fill if fill is not None and bool(missing.any()) else None
        if partial is not None:
            location, input_sample = partial.mean, partial.fill(sample)[0]
        else:
            location, input_sample = column_moments(sample)[0], sample
        sample = self._fit_projection(input_sample, partial, location)

        # seeds
        if self.seeds == "all":
            seeds, seed_w = sample, None
        elif self.seeds == "grid":
            h0 = self.bandwidth or self._rule_bandwidth(sample)
            seeds, counts = K.grid_seeds(sample, self.bin_size or h0)
            seed_w = counts.astype(np.float64)
        else:
            from sklearn.cluster import KMeans

            k = min(self.n_seeds, sample.shape[0])
            # a pre-partition needs no k-means++ quality: started from every (M/k)-th sample
            # point it is O(k) and a function of the data alone, like the sample itself
            km = KMeans(
                n_clusters=k,
                init=sample[systematic_rows(sample.shape[0], k)],
                n_init=1,
                max_iter=10,
            )
            # repeated rows (flat image regions) leave centres empty: dropped below
            with without_lost_clusters_warning():
                km.fit(sample)
            seeds = km.cluster_centers_
            seed_w = np.bincount(km.labels_, minlength=k).astype(np.float64)
            keep = seed_w > 0
            seeds, seed_w = seeds[keep], seed_w[keep]

        h = float(self.bandwidth) if self.bandwidth is not None else self._rule_bandwidth(sample)
        if self.density == "seeds":
            density, dens_w = seeds, seed_w
        else:
            density, dens_w = sample, None

        res = K.mean_shift(
            seeds,
            density,
            h,
            weights=dens_w,
            blurring=self.blurring,
            max_iter=self.max_iter,
            tol=self.tol,
            return_paths=True,
        )
        tau = K.group_threshold(res.moves, h, group_factor=self.group_factor)
        seed_labels, modes = K.group_modes(res.ends, tau, seed_w)
        singles = int(np.count_nonzero(np.bincount(seed_labels) == 1))
        min_mass = self._min_basin_mass(seed_labels.size if seed_w is None else seed_w.sum())
        mass = np.bincount(seed_labels, weights=seed_w, minlength=modes.shape[0])
        # under the fraction alone: on a few dozen points the 5-point floor prunes most of
        # them whatever the bandwidth, which is no sign of a narrow kernel
        pruned = mass < float(self.min_cluster_size) * mass.sum()
        pruned[np.argmax(mass)] = False  # the heaviest mode is always kept
        pruned_share = float(mass[pruned].sum() / mass.sum())
        self._modes_before_pruning_ = (int(modes.shape[0]), singles, pruned_share)
        if min_mass > 0:
            seed_labels, modes = K.merge_small_modes(seed_labels, modes, seed_w, min_mass)
        if self.saddle_ratio is not None:
            seed_labels, modes = merge_by_persistence(
                seed_labels,
                modes,
                seeds,
                density,
                h,
                float(self.saddle_ratio),
                density_weights=dens_w,
                seed_weights=seed_w,
                n_neighbors=PASS_NEIGHBORS,
            )
        keep_it = _path_schedule(res.n_iter)
        assert res.paths is not None  # return_paths=True
        path_points = res.paths[keep_it].reshape(-1, seeds.shape[1])
        path_labels = np.tile(seed_labels, len(keep_it))

        self.bandwidth_ = h
        self.missing_model_ = fill
        self._fit_sample_ = input_sample
        self.density_ = density
        self.density_weights_ = dens_w
        self.seeds_ = seeds
        self.seed_weights_ = seed_w
        self.seed_labels_ = seed_labels
        self.seed_ends_ = res.ends
        self.modes_ = modes
        self.n_partitions_ = int(modes.shape[0])
        self.n_iter_ = res.n_iter
        self.converged_ = res.converged
        if not res.converged:
            moving = int(np.count_nonzero(res.last_step >= self.tol * h))
            warn_caller(
                f"{type(self).__name__}: mean shift stopped at max_iter={self.max_iter} with "
                f"{moving} of {seeds.shape[0]} seeds still moving (last step >= tol · h = "
                f"{self.tol * h:.3g}); they are grouped where they stopped, which can split a "
                "mode. Raise max_iter, or raise tol if the modes are far apart.",
                MeanShiftConvergenceWarning,
            )
        self.group_threshold_ = tau
        self.path_points_ = path_points
        self.path_labels_ = path_labels

        if self.seeds == "all" and dense_all and not has_nan:
            self.labels_ = seed_labels.copy()
        else:
            self.labels_ = self._assign(X)
        return self

    #: Whether a row with any NaN is nodata (MSSC: an image pixel missing a band); MeanShift
    #: fills the missing entries of a row with their conditional means and only an all-NaN
    #: row is nodata.
    _partial_rows_are_nodata = False

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True  # nodata rows get -1 in fit and predict
        return tags

    def assign_model(self, *, dtype: Any = np.float32) -> AssignModel:
        """The stored density and trajectory cache as a picklable :class:`~dkernel.meanshift.graph.AssignModel`."""
        check_is_fitted(self, "modes_")
        return AssignModel(
            density=self.density_,
            weights=self.density_weights_,
            bandwidth=self.bandwidth_,
            path_points=self.path_points_,
            path_labels=self.path_labels_,
            path_radius=self.path_radius,
            max_iter=self.max_iter,
            tol=self.tol,
            dtype=dtype,
            fill=self.missing_model_,
            location=self.location_,
            components=self.projection_components_,
        )

    def predict(self, X: Any) -> Any:
        """Partition of new points: mean shift against the stored density to a stored mode.

        NumPy input gives a NumPy array; Dask input a lazy Dask array (one task per row chunk).
        Nodata rows get -1, as in :meth:`fit` (MeanShift: rows with every entry NaN; the
        others start from their values with the missing ones at their conditional means,
        ``missing_model_``).

        Notes
        -----
        O(N · t · M · d) time, O(block · M) memory per chunk.
        """
        check_is_fitted(self, "modes_")
        return self._assign(validate_input(self, X, reset=False, allow_nan=True, min_samples=1))

    def _assign(self, X: Any) -> Any:
        """Partition of validated ``X`` (lazy for Dask input)."""
        model = self.assign_model()
        if is_dask_array(X):
            return stream_assign(X, model)
        return model.assign(X)
