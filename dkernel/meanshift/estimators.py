"""Scikit-learn-style estimators: :class:`MeanShift` and :class:`MSSC`.

MSSC (Agersborg 2012, ch. 5 [Agersborg2012]): mean shift splits the data into m partitions (stage
one); the Cauchy–Schwarz affinity between partitions (Eq. 5.3) with its own, larger bandwidth is
embedded with KECA or KPCA and clustered with angular or Euclidean k-means (stage two); partition
labels flow back to the points. For large inputs the first stage runs on seeds (grid bins or a
k-means pre-partition weighted by counts, [Agersborg2012], §7.1) against a density from a sample,
and every point is then streamed through mean shift against that stored density to a stored mode;
``predict`` does the same for new points.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from numbers import Integral, Real
from typing import Any

import dask.array as da
import numpy as np
from sklearn.base import BaseEstimator, ClusterMixin, _fit_context
from sklearn.utils._param_validation import Interval, StrOptions

from dkernel._random import derive_rng, derive_seed, seed_from_random_state
from dkernel._validation import (
    ParameterConstraintsMixin,
    aligned,
    as_numpy,
    check_2d_array,
    check_is_fitted,
    check_options,
    is_dask_array,
    validate_input,
)
from dkernel.errors import (
    InvalidInputError,
    MeanShiftConvergenceWarning,
    ResourceLimitError,
    warn_caller,
)
from dkernel.kernels.aliases import resolve_alias
from dkernel.kernels.widths import MSSC_SIGMA_FRACTION, silverman_thesis
from dkernel.linalg import label_sums
from dkernel.meanshift import kernels as K
from dkernel.meanshift.bands import apply_band_norm, resolve_band_norm
from dkernel.meanshift.graph import (
    AssignModel,
    stream_assign,
    stream_feature_sums,
    stream_partition_sizes,
    stream_stratified_sample,
)
from dkernel.meanshift.sampling import sample_sizes, stratified_sample
from dkernel.model_order import candidate_range, spectrum_model_order
from dkernel.rows import take_rows
from dkernel.runtime.progress import compute_with_progress

#: ``spectrum_`` keeps ``max_clusters + 1`` eigenvalues, 11 when max_clusters is None and
#: n_clusters an integer.
DEFAULT_MAX_CLUSTERS = 10
#: Largest number of points for which the exact (O(N²) work) CS affinity is used by 'auto'.
EXACT_AFFINITY_MAX = 20000


_POSITIVE = Interval(Real, 0, None, closed="neither")
_NON_NEGATIVE = Interval(Real, 0, None, closed="left")
_RANDOM_STATE = ["random_state", np.random.Generator]


def _systematic(n: int, m: int) -> np.ndarray:
    """``m`` evenly spaced row indices of ``n`` (a systematic sample).

    The first stage is mean shift, a deterministic mode search; drawing its density sample and
    its pre-partition's starting centres at random made the partitions, and through them the
    final clusters, depend on ``random_state`` (on the demo scene five seeds agreed to a
    pairwise ARI of 0.51). Evenly spaced rows cover an image's raster order uniformly in space.
    """
    return np.unique(np.linspace(0, n - 1, m).round().astype(np.int64))


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
        Kernel width h, the standard deviation of the Gaussian kernel; Silverman's rule
        ([Agersborg2012], Eq. 5.1) on the density points when None. scikit-learn's ``MeanShift``
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
    n_density : int
        Size of the density sample (all points when there are fewer): evenly spaced rows, so
        the first stage is a function of the data alone, as mean shift itself is.
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
        Multiplies Silverman's bandwidth when ``bandwidth`` is None (a first stage that
        over-partitions wants h below the rule of thumb, [Agersborg2012], §6.1.2).
    random_state : int, optional
        Unused by mean shift, which is deterministic; MSSC's second stage uses it.

    Attributes
    ----------
    bandwidth_ : float
    density_ : ndarray (m, d)
    density_weights_ : ndarray (m,) or None
    seeds_ : ndarray (s, d)
    seed_weights_ : ndarray (s,) or None
    seed_labels_ : ndarray (s,)
    modes_ : ndarray (n_partitions, d)
    n_partitions_ : int
    labels_ : ndarray (N,) or dask array
        Partition of every training point; -1 for rows with NaN (nodata: no part of the
        density, as in :meth:`predict`). Infinite values are refused.
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
        n_density: int = 5000,
        max_iter: int = 300,
        tol: float = 1e-3,
        group_factor: float = 0.25,
        path_radius: float = 0.2,
        bandwidth_factor: float = 1.0,
        random_state: int | None = None,
    ) -> None:
        self.bandwidth = bandwidth
        self.bandwidth_factor = bandwidth_factor
        self.blurring = blurring
        self.seeds = seeds
        self.n_seeds = n_seeds
        self.bin_size = bin_size
        self.density = density
        self.n_density = n_density
        self.max_iter = max_iter
        self.tol = tol
        self.group_factor = group_factor
        self.path_radius = path_radius
        self.random_state = random_state

    _parameter_constraints: dict = {
        "bandwidth": [_POSITIVE, None],
        "blurring": ["boolean"],
        "seeds": [StrOptions({"all", "grid", "kmeans"})],
        "n_seeds": [Interval(Integral, 1, None, closed="left")],
        "bin_size": [_POSITIVE, None],
        "density": [StrOptions({"sample", "seeds"})],
        "n_density": [Interval(Integral, 2, None, closed="left")],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "tol": [_NON_NEGATIVE],
        "group_factor": [_NON_NEGATIVE],
        "path_radius": [Interval(Real, 0, 1, closed="both")],
        "bandwidth_factor": [_POSITIVE],
        "random_state": _RANDOM_STATE,
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
        return self._fit_modes(validate_input(self, X, reset=True, allow_nan=True, min_samples=2))

    def _fit_modes(self, X: Any) -> MeanShift:
        """:meth:`fit` on validated ``X`` (NumPy, or Dask kept lazy)."""
        n = int(X.shape[0])
        dense_all = n <= self.n_density
        if dense_all:
            sample = as_numpy(X, np.float64)
        else:
            sample = take_rows(X, _systematic(n, self.n_density), np.float64)
        # NaN rows are nodata: no part of the density, label -1 (as in predict)
        valid = ~np.isnan(sample).any(axis=1)
        has_nan = not bool(valid.all())
        if has_nan:
            sample = sample[valid]
        if sample.shape[0] < 2:
            raise InvalidInputError(
                f"{type(self).__name__} needs at least 2 rows without NaN (nodata) in its "
                f"density sample; got {sample.shape[0]}."
            )

        # seeds
        if self.seeds == "all":
            seeds, seed_w = sample, None
        elif self.seeds == "grid":
            h0 = self.bandwidth or self.bandwidth_factor * silverman_thesis(sample)
            seeds, counts = K.grid_seeds(sample, self.bin_size or h0)
            seed_w = counts.astype(np.float64)
        else:
            from sklearn.cluster import KMeans

            k = min(self.n_seeds, sample.shape[0])
            # a pre-partition needs no k-means++ quality: started from every (M/k)-th sample
            # point it is O(k) and a function of the data alone, like the sample itself
            km = KMeans(
                n_clusters=k,
                init=sample[_systematic(sample.shape[0], k)],
                n_init=1,
                max_iter=10,
            ).fit(sample)
            seeds = km.cluster_centers_
            seed_w = np.bincount(km.labels_, minlength=k).astype(np.float64)
            keep = seed_w > 0
            seeds, seed_w = seeds[keep], seed_w[keep]

        if self.density == "seeds":
            density, dens_w = seeds, seed_w
        else:
            density, dens_w = sample, None
        h = (
            float(self.bandwidth)
            if self.bandwidth is not None
            else self.bandwidth_factor * silverman_thesis(sample)
        )

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
        keep_it = _path_schedule(res.n_iter)
        path_points = res.paths[keep_it].reshape(-1, seeds.shape[1])
        path_labels = np.tile(seed_labels, len(keep_it))

        self.bandwidth_ = h
        self._fit_sample_ = sample
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

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True  # NaN rows are nodata: label -1 in fit and predict
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
        )

    def predict(self, X: Any) -> Any:
        """Partition of new points: mean shift against the stored density to a stored mode.

        NumPy input gives a NumPy array; Dask input a lazy Dask array (one task per row chunk).
        Rows with NaN get -1, as in :meth:`fit`.

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


class MSSC(MeanShift):
    """Mean Shift Spectral Clustering of mean-shift partitions ([Agersborg2012], ch. 5).

    The defaults are one set, shared with the ``mssc`` job (a test keeps them equal), chosen on
    Samson, Jasper Ridge, the BSDS500 photo 3063 and the Landsat demo scene
    (``benchmarks/bench_mssc_stability.py``, ``benchmarks/bench_mssc_defaults.py``): an
    over-partitioning first stage on a count-weighted k-means pre-partition, the size-weighted
    point-level graph and normalized spectral clustering.
    The protocol of [Agersborg2012] (KECA, ``sigma_fraction=0.2``, Eq. 5.4 normalization, every
    point a seed) is ``embedding='keca', sigma_fraction=0.2, normalization='cs', seeds='all',
    density='sample', bandwidth_factor=1.0``.

    Parameters
    ----------
    n_clusters : int or 'auto'
        Number of output clusters (= embedding dimension, as in [Agersborg2012], §5.6).
        'auto' (default): chosen by :mod:`dkernel.model_order`'s timescale-gap rule — the
        largest ratio ``(1 − λ_{k+1}) / (1 − λ_k)`` of consecutive relaxation times of the walk
        on the normalized partition graph (``normalized_spectrum``, the graph of the
        'normalized' embedding, whatever ``embedding`` is) — over k = 2..``max_clusters``
        (``wide_limit`` then decides for that k). The evidence: ``n_clusters_``,
        ``n_clusters_candidates_``, ``n_clusters_scores_``, ``model_order_``. Measured on
        Samson, Jasper Ridge, the demo scene and the synthetic scene in
        ``docs/choosing_defaults.md``.
    max_clusters : int, optional
        Largest k compared by ``n_clusters='auto'``. None (default): derived from the number
        of partitions m, ``round(√m)`` clipped to [10, 50]
        (:func:`dkernel.model_order.candidate_range`).
    bandwidth : float, optional
        Mean-shift bandwidth h_ms (``bandwidth_factor`` × Silverman's rule when None).
    sigma : float, optional
        Kernel width h_spec of the Cauchy–Schwarz affinity between partitions
        (``sigma_fraction`` × the median pairwise distance when None). The median is that of
        the fitted sample (the project's RBF rule of thumb); h_spec is at least ``h_ms``.
        Formerly ``spectral_bandwidth``.
    sigma_fraction : float
        h_spec, the width of the partition affinity, as a fraction of the median pairwise distance
        (used when ``sigma`` is None). Formerly ``spectral_fraction``. Default 0.5 (the 'global'
        scale of [Agersborg2012], §5.5; ``dkernel.kernels.widths.MSSC_SIGMA_FRACTION``): with NJW it
        beats 0.2 (the PCKID baselines' rule of thumb,
        ``dkernel.kernels.widths.PCKID_SIGMA_FRACTION``) on Samson, Jasper and BSDS 3063.
    embedding : {'normalized', 'kpca', 'keca'}
        Clustering of the partition affinity: normalized spectral clustering (NJW), KPCA +
        k-means or KECA + angular k-means. NJW takes the top eigenvectors of
        ``D^-1/2 S D^-1/2``, rows to unit length, then k-means; KPCA is centered, with
        Euclidean k-means; see :func:`~dkernel.meanshift.second_stage`. ``'normalized'`` is
        :class:`~dkernel.SpectralClustering`'s name for NJW (formerly ``'njw'``, still accepted
        with a ``FutureWarning``). Default 'normalized': dividing
        out each partition's degree keeps a large, spread-out cluster from taking the leading
        axes (KECA at 0.2 scored ARI 0.36/0.17 on standardised Samson/Jasper, NJW 0.64/0.71 over
        5 seeds, k-means 0.61/0.73).
    affinity : {'auto', 'exact', 'sample', 'rff'}
        How the Cauchy–Schwarz sums are computed: exactly, on a sample stratified by partition,
        or from random Fourier features ('auto': exact up to 20 000 points, else 'sample').
        'exact': blocked pairwise sums (O(N²) work); 'sample': 20 000 points stratified by
        partition (at least 50 per partition, exact kernel values); 'rff': the cosine between
        partition sums of ``n_rff`` random Fourier features (one streaming pass). 'auto' avoids
        'rff': random features add ±1/sqrt(n_rff) noise to every pair, which NJW turned into
        seed-dependent labels on the demo scene (min pairwise ARI 0.07 between five RFF draws
        at a fixed first stage).
    n_rff : int
        Number of random Fourier features for ``affinity='rff'`` (each pair's affinity carries
        noise of about 1/sqrt(n_rff), whatever its true value; 'auto' does not use them).
    n_init : int
        k-means restarts in the second stage (best by cost).
    normalization : {'size', 'cs'}
        'size': partitions weighted by their number of points; 'cs': the Cauchy–Schwarz
        divergence normalization, every partition one point. 'size' (default) is
        ``S_ij / sqrt(n_i n_j)``, the point-level kernel on partition-constant functions, so an
        over-partitioning first stage cannot outvote the pixels; 'cs' is the Cauchy–Schwarz
        affinity of Eq. 5.4 (see :func:`~dkernel.meanshift.second_stage`).
    regularization : float
        'normalized' only: every point's degree is raised by ``regularization`` × the mean point
        degree before the normalization (regularized spectral clustering; 0: plain NJW).
        Default 1.0: plain NJW isolates a few small outlier partitions, different ones for
        different seeds (min pairwise ARI of the demo's label maps over 5 seeds ≈ 0).
    wide_limit : {'auto', 'always', 'never'}
        Whether stage two clusters the wide limit of the affinity (σ → ∞) instead of the
        affinity at ``sigma_``. 'auto' (default): the one whose k groups stand out more, the
        smaller eigengap ratio ``λ_{k+1} / λ_k`` (``eigengap_ratios_``); 'always'; 'never'
        (before issue 32). 'normalized' embedding only (the others use ``sigma_``). As the width
        grows, normalized spectral clustering of the partition graph tends to a size-weighted
        PCA of the partition means (:func:`~dkernel.meanshift.wide_limit_axes`): the linear
        geometry of the bands, which is that of a scene mixing k materials linearly (its
        pixels near a (k − 1)-dimensional simplex, the k-th singular value small), while the
        Gaussian affinity at ``sigma_`` follows clusters of any shape. The limit embeds k
        clusters in k − 1 directions, so it takes part only with at least k affinity columns
        (not on RGB scenes with k > 3). On Samson / Jasper Ridge ('auto' chooses the limit on
        both; ARI / NMI, ``random_state=0``): 0.876 / 0.854 and 0.775 / 0.769, against 0.900 /
        0.869 and 0.696 / 0.747 with 'never' (k-means on standardised bands: 0.592 / 0.591 and
        0.760 / 0.720); on the 2 000-pixel suite sets of ``benchmarks/bench_defaults.py``
        0.719 and 0.800 against 0.631 and 0.725. It keeps ``sigma_`` on the synthetic scene of
        ``benchmarks/bench_full_tile.py`` (ARI 1.000; the limit: 0.970) and on the demo and
        BSDS scenes (fewer columns than clusters) (``benchmarks/results/mssc_defaults.md``).
    band_norm : {'auto', 'unit', 'none'}
        'unit': every pixel's band vector to unit length (the spectral angle; further columns
        such as pixel coordinates kept); 'none': unchanged; 'auto': 'unit' from 5 non-negative
        bands on, else 'none'. Applied to the first ``n_bands`` columns before anything else:
        'unit' drops the brightness of non-negative spectra, and 'auto' (default) leaves RGB
        photos and standardised features as they are.
        ``dkernel.meanshift.bands.resolve_band_norm`` is the one implementation, the job's too;
        ``predict`` scales new points the same way.
    n_bands : int, optional
        Number of leading band columns for ``band_norm`` (None: every column is a band).
    coordinates : {'stage_one', 'both'}
        Where the columns after the first ``n_bands`` (pixel coordinates) count. 'stage_one'
        (default): in the mean shift only, which then finds spatially compact segments (mean
        shift in the joint spatial-range domain), while the partition affinity and so the classes
        see the bands alone: a land-cover class does not depend on where in the scene a pixel is.
        'both': in the affinity too, as in [Agersborg2012], §6.1.2; a class can then follow
        position (the demo scene's sea split along a straight line at ``coord_scale`` 1). On
        Samson / Jasper (ARI against the argmax abundances, ``random_state=0``) 'stage_one'
        scores 0.876 / 0.775 at ``coord_scale`` 0.25 (both: 0.908 / 0.692, no wide limit
        chosen) and 0.880 / 0.745 at 1.0 (both, with ``wide_limit='never'``: 0.472 / 0.466);
        the synthetic scene of ``benchmarks/bench_full_tile.py`` (300² pixels) 1.000 with
        either. No effect when ``n_bands`` is None.
    progress : bool
        Show the progress of the pass over Dask input (partition sums) on the active
        ``distributed`` client: a bar on a terminal or in Jupyter, plain lines in a log.
    seeds, n_seeds, density, n_density : see :class:`MeanShift`
        Defaults 'kmeans', 500, 'seeds', 20000: mean shift runs on a count-weighted k-means
        pre-partition of up to 20000 sampled points ([Agersborg2012], §7.1), O(500²) per iteration
        whatever N.
    bandwidth_factor : float
        Multiplies Silverman's rule when ``bandwidth`` is None. Default 0.4: h_ms is below
        Silverman's rule, so the first stage over-partitions ([Agersborg2012], §6.1.2) and stage
        two does the merging. Against 0.5 (the default until issue 32) the ``mssc`` jobs score Samson
        NMI 0.854 (0.829) and Jasper Ridge 0.769 (0.758, ARI 0.775 either way), the synthetic
        scene of ``benchmarks/bench_full_tile.py`` ARI 1.000 either way, and the demo's mean shift
        converges (213 iterations, 69 partitions); 0.35 scores alike on the scenes but stops the
        demo at ``max_iter`` (``benchmarks/results/mssc_defaults.md``).
    path_radius : float
        See :class:`MeanShift`; default 0.5: a pixel within h/2 of a stored trajectory takes
        its mode. Against 0.3 (the default until issue 32's last change) the demo's pixel
        assignment takes a quarter less time, its map agrees to an ARI of 0.998 (the same 69
        partitions and 5 classes), and the scenes score alike: Samson NMI 0.853 (0.854),
        Jasper Ridge and the synthetic scene unchanged (``benchmarks/results/mssc_defaults.md``).
    **mean-shift parameters** : see :class:`MeanShift`.

    Attributes
    ----------
    affinity_ : ndarray (m, m)
        The normalised affinity the embedding used.
    pair_sums_ : ndarray (m, m)
        ``S_ij = Σ_{k∈C_i, l∈C_j} K(x_k, x_l)`` (exact, or from random Fourier features).
    embedding_ : ndarray (m, n_clusters)
    eigenvalues_ : ndarray (n_clusters,)
        The leading eigenvalues of the normalized partition graph; in the wide limit 1 for
        the trivial axis, then each axis's share of the partition means' weighted variance.
    wide_limit_ : bool
        Whether stage two used the wide limit (``wide_limit``).
    eigengap_ratios_ : ndarray (2,)
        ``λ_{k+1} / λ_k`` of the partition graph at ``sigma_`` and of its wide limit, the
        evidence of ``wide_limit='auto'`` (NaN: undefined, or the limit not considered).
    partition_labels_ : ndarray (m,)
    partition_sizes_ : ndarray (m,)
    sigma_ : float
        The affinity's kernel width h_spec (formerly ``spectral_bandwidth_``).
    band_norm_ : {'unit', 'none'}
        What ``band_norm`` resolved to; ``modes_``, ``density_`` and ``seeds_`` live in the
        scaled space.
    affinity_columns_ : int
        Leading columns of X the partition affinity used (``coordinates``).
    n_clusters_ : int
        The number of clusters (``n_clusters``, or what 'auto' chose).
    n_clusters_candidates_ : ndarray of int or None
        The k compared by ``n_clusters='auto'`` (None for an integer ``n_clusters``).
    n_clusters_scores_ : ndarray or None
        The model-order rule's score of every candidate (the highest wins).
    model_order_ : dkernel.model_order.ModelOrder or None
        The whole evidence of 'auto': candidates, scores, rule.
    spectrum_ : ndarray
        Leading eigenvalues of the normalized partition graph, descending (computed for every
        ``n_clusters``; ``max_clusters + 1`` of them, 11 when max_clusters is None and
        n_clusters an integer).
    converged_ : bool
        Whether every seed's mean shift converged; when not, fit warns
        (:class:`~dkernel.errors.MeanShiftConvergenceWarning`).
    pixel_partitions_ : ndarray (N,)
        Stage-one partition of every training point.
    labels_ : ndarray (N,)
        Cluster of every training point; -1 for rows with NaN (nodata), in :meth:`fit` as in
        :meth:`predict`. Infinite values are refused.

    See Also
    --------
    dkernel.MeanShift : Stage one on its own.
    dkernel.KECA : KECA of a point kernel (the second stage's embedding, without partitions).
    dkernel.SpectralClustering : Spectral clustering of the points themselves.
    dkernel.cluster_image : Clusters a raster with this estimator and writes the label map.

    References
    ----------
    - Agersborg (2012), *Mean Shift Spectral Clustering Using Kernel Entropy Component
      Analysis*, MSc thesis [Agersborg2012]: ch. 5 (MSSC; Eq. 5.3 and 5.4, the Cauchy–Schwarz
      affinity; §5.5, its global scale; §5.6, clusters = dimensions), ch. 6 (results).
    - Jenssen (2010) [Jenssen2010]: KECA; Ng, Jordan & Weiss (2002) [Ng2002]: the normalized
      embedding; Qin & Rohe (2013) [Qin2013]: its regularization; Rahimi & Recht (2008)
      [Rahimi2008]: the random Fourier features of ``affinity='rff'``.
    """

    def __init__(
        self,
        n_clusters: int | str = "auto",
        *,
        max_clusters: int | None = None,
        bandwidth: float | None = None,
        sigma: float | None = None,
        sigma_fraction: float = MSSC_SIGMA_FRACTION,
        embedding: str = "normalized",
        affinity: str = "auto",
        n_rff: int = 1000,
        n_init: int = 100,
        normalization: str = "size",
        regularization: float = 1.0,
        wide_limit: str = "auto",
        band_norm: str = "auto",
        n_bands: int | None = None,
        coordinates: str = "stage_one",
        blurring: bool = False,
        seeds: str = "kmeans",
        n_seeds: int = 500,
        bin_size: float | None = None,
        density: str = "seeds",
        n_density: int = 20000,
        max_iter: int = 300,
        tol: float = 1e-3,
        group_factor: float = 0.25,
        path_radius: float = 0.5,
        bandwidth_factor: float = 0.4,
        random_state: int | None = None,
        progress: bool = False,
    ) -> None:
        super().__init__(
            bandwidth,
            blurring=blurring,
            seeds=seeds,
            n_seeds=n_seeds,
            bin_size=bin_size,
            density=density,
            n_density=n_density,
            max_iter=max_iter,
            tol=tol,
            group_factor=group_factor,
            path_radius=path_radius,
            bandwidth_factor=bandwidth_factor,
            random_state=random_state,
        )
        self.n_clusters = n_clusters
        self.max_clusters = max_clusters
        self.sigma = sigma
        self.sigma_fraction = sigma_fraction
        self.embedding = embedding
        self.affinity = affinity
        self.n_rff = n_rff
        self.n_init = n_init
        self.normalization = normalization
        self.regularization = regularization
        self.wide_limit = wide_limit
        self.band_norm = band_norm
        self.n_bands = n_bands
        self.coordinates = coordinates
        self.progress = progress

    _parameter_constraints: dict = {
        **MeanShift._parameter_constraints,
        "n_clusters": [Interval(Integral, 1, None, closed="left"), StrOptions({"auto"})],
        "max_clusters": [Interval(Integral, 2, None, closed="left"), None],
        "sigma": [_POSITIVE, None],
        "sigma_fraction": [_POSITIVE],
        # 'njw': the former name of 'normalized' (a FutureWarning; dkernel.kernels.aliases)
        "embedding": [StrOptions({"keca", "kpca", "normalized", "njw"})],
        "affinity": [StrOptions({"auto", "exact", "sample", "rff"})],
        "n_rff": [Interval(Integral, 1, None, closed="left")],
        "n_init": [Interval(Integral, 1, None, closed="left")],
        "normalization": [StrOptions({"cs", "size"})],
        "regularization": [_NON_NEGATIVE],
        "wide_limit": [StrOptions({"auto", "always", "never"})],
        "band_norm": [StrOptions({"auto", "unit", "none"})],
        "n_bands": [Interval(Integral, 1, None, closed="left"), None],
        "coordinates": [StrOptions({"stage_one", "both"})],
        "progress": ["boolean"],
    }

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X: Any, y: Any = None) -> MSSC:
        """Stage one (mean shift partitions), affinity, stage two (KECA/KPCA + k-means).

        :meth:`fit_partitions` then :meth:`fit_clusters`; for Dask input the partitions are
        persisted in between (on the workers of a ``distributed`` client), so every pixel is
        streamed through mean shift once.

        Notes
        -----
        Stage one: see :meth:`MeanShift.fit`. Affinity: exact O(N² d) work with O(block · N)
        memory, a stratified sample (one pass, O(sample) memory) or RFF O(N d D) in one pass
        with O(m D) memory. Stage two O(m³).
        """
        self.fit_partitions(X)
        partitions = self.pixel_partitions_
        if is_dask_array(partitions):
            partitions = partitions.persist()
        return self.fit_clusters(X, partitions=partitions)

    def fit_partitions(self, X: Any, y: Any = None) -> MSSC:
        """Stage one only: the modes, and ``pixel_partitions_`` (lazy for Dask input).

        Follow with :meth:`fit_clusters`. A caller that can store the partitions cheaply
        (the ``mssc`` job writes them to a scratch Zarr array) passes them back to
        :meth:`fit_clusters` so the pixels are not streamed through mean shift twice.
        """
        self._validate_params()
        self._check_wide_limit()
        X = validate_input(self, X, reset=True, allow_nan=True, min_samples=2)
        X = check_2d_array(self._scale_bands(X, fit=True), type(self).__name__, allow_nan=True)
        self._fit_modes(X)
        self.pixel_partitions_ = self.labels_
        m = self.n_partitions_
        least = 2 if self.n_clusters == "auto" else self.n_clusters
        if m < least:
            raise InvalidInputError(
                f"Mean shift found {m} partition(s) with bandwidth {self.bandwidth_:.4g}, fewer "
                f"than n_clusters={least}. Use a smaller bandwidth (h_ms)."
            )
        return self

    def fit_clusters(self, X: Any, *, partitions: Any = None) -> MSSC:
        """Affinity and stage two after :meth:`fit_partitions` on the same ``X``.

        Parameters
        ----------
        X : array-like or dask array (n_samples, n_features)
            The data given to :meth:`fit_partitions`.
        partitions : array-like or dask array (n_samples,), optional
            ``pixel_partitions_`` materialised (persisted, or read back from storage); by
            default ``pixel_partitions_`` itself, which for Dask input recomputes the
            stage-one assignment in every pass over the pixels.

        Sets ``labels_`` (lazy for Dask partitions) and ``pixel_partitions_`` (= partitions).
        """
        check_is_fitted(self, "modes_")
        self._check_wide_limit()
        X = validate_input(self, X, reset=False, allow_nan=True, min_samples=2)
        X = check_2d_array(self._scale_bands(X), type(self).__name__, allow_nan=True)
        labels = self.pixel_partitions_ if partitions is None else partitions
        if not is_dask_array(labels):
            labels = np.asarray(labels, dtype=np.int64)
        if labels.shape != (X.shape[0],):
            raise InvalidInputError(
                f"partitions has shape {labels.shape}; expected one partition per row of X "
                f"({X.shape[0]},)."
            )
        m = self.n_partitions_
        n = int(X.shape[0])
        seed = seed_from_random_state(self.random_state)
        cols = self._affinity_columns(int(X.shape[1]))
        self.affinity_columns_ = cols
        if cols < X.shape[1]:
            X = X[:, :cols]
        h_spec = self.sigma
        if h_spec is None:
            from dkernel.kernels import sigma_rule_of_thumb

            # a fraction of the median distance on the sample (the RBF rule of thumb of
            # dkernel.kernels.widths): a global scale, larger than h_ms ([Agersborg2012], §5.5)
            h_spec = max(
                sigma_rule_of_thumb(
                    self._fit_sample_[:, :cols],
                    fraction=self.sigma_fraction,
                    seed=derive_seed(seed, "sigma"),
                ),
                self.bandwidth_,
            )
        self.sigma_ = float(h_spec)

        method = self.affinity
        if method == "auto":
            method = "exact" if n <= EXACT_AFFINITY_MAX else "sample"
        want_means = self._wide_limit_candidate()
        means = None
        if method == "sample":
            S, sizes, means = self._sampled_affinity(X, labels, seed)
        elif method == "exact":
            if n > 10 * EXACT_AFFINITY_MAX:
                raise ResourceLimitError(
                    f"The exact Cauchy–Schwarz affinity needs {n}² kernel evaluations for "
                    f"{n} points; use affinity='rff' (one streaming pass) instead."
                )
            Xn = as_numpy(X, np.float64)
            labels = as_numpy(labels)
            ok = labels >= 0  # NaN (nodata) rows have no partition
            Xn, lab = (Xn, labels) if ok.all() else (Xn[ok], labels[ok])
            S = K.cs_pair_sums(Xn, lab, m, self.sigma_)
            sizes = np.bincount(lab, minlength=m)
            if want_means:
                means = _means(*label_sums(Xn, lab, m))
        else:
            W, b = K.rff_params(
                X.shape[1], self.n_rff, self.sigma_, derive_rng(seed, "mssc", "rff")
            )
            if is_dask_array(X):
                F, sizes, row_sums = compute_with_progress(
                    stream_feature_sums(X, labels, m, W, b),
                    show=bool(self.progress),
                    what="MSSC partition sums",
                )
                F = aligned(F)
            else:
                F = K.partition_feature_sums(X, labels, m, W, b)
                row_sums, sizes = label_sums(X, labels, m)
            if want_means:
                means = _means(row_sums, sizes)
            S = F @ F.T
        sizes = np.asarray(sizes, dtype=np.float64)
        S = 0.5 * (S + S.T)
        self.pair_sums_ = S
        if self.normalization == "cs":
            A = K.cs_normalize(S)
        else:
            A = S / np.sqrt(np.outer(np.maximum(sizes, 1), np.maximum(sizes, 1)))
        self.affinity_method_ = method
        self.affinity_ = A
        self.partition_sizes_ = np.asarray(sizes, dtype=np.int64)
        self._second_stage(seed, means if want_means else None)
        self.pixel_partitions_ = labels
        self.labels_ = self.cluster_of_partitions(labels)
        return self

    def _affinity_columns(self, n_features: int) -> int:
        """Leading columns of X the partition affinity sees (the bands, or every column)."""
        if self.coordinates == "both" or self.n_bands is None:
            return n_features
        return min(int(self.n_bands), n_features)

    def cluster_of_partitions(self, partitions: Any) -> Any:
        """The cluster of every pixel given its stage-one partition (-1 stays -1).

        ``partitions``: NumPy or Dask (lazy result), e.g. ``pixel_partitions_`` read back
        from storage.
        """
        check_is_fitted(self, "partition_labels_")
        if is_dask_array(partitions):
            return partitions.map_blocks(
                partial(_lookup, table=self.partition_labels_), dtype=np.int64
            )
        return _lookup(partitions, self.partition_labels_)

    def _sampled_affinity(self, X: Any, labels: Any, seed: int | None) -> tuple:
        """Pair sums estimated from the stratified sample, the partition sizes and the
        partition means of the sample."""
        m = self.n_partitions_
        salt = int(derive_rng(seed, "mssc", "affinity").integers(0, 2**63))
        if is_dask_array(labels):
            sizes = compute_with_progress(
                stream_partition_sizes(labels, m),
                show=bool(self.progress),
                what="MSSC partition sizes",
            )
            take = sample_sizes(sizes, EXACT_AFFINITY_MAX)
            if not is_dask_array(X):
                X = da.from_array(X, chunks=(labels.chunks[0], X.shape[1]))
            _, ls, Xs = compute_with_progress(
                stream_stratified_sample(X, labels, take, salt),
                show=bool(self.progress),
                what="MSSC affinity sample",
            )
        else:
            sizes = np.bincount(labels[labels >= 0], minlength=m)
            take = sample_sizes(sizes, EXACT_AFFINITY_MAX)
            Xn = as_numpy(X)
            _, ls, Xs = stratified_sample(Xn, labels, take, salt)
        S = _sampled_pair_sums(Xs, ls, sizes, take, self.sigma_)
        return S, sizes, _means(*label_sums(Xs, ls, m))

    def _wide_limit_candidate(self) -> bool:
        """Whether stage two may use the wide limit (then it needs the partition means)."""
        normalized = resolve_alias(self.embedding, "embedding", type(self).__name__)
        return self.wide_limit != "never" and normalized == "normalized"

    def _check_wide_limit(self) -> None:
        if self.wide_limit == "always" and not self._wide_limit_candidate():
            raise InvalidInputError(
                f"wide_limit='always' needs embedding='normalized' (got {self.embedding!r}): "
                "the wide limit is that of normalized spectral clustering. Use "
                "embedding='normalized', or wide_limit='never'."
            )

    def _second_stage(self, seed: int | None, means: np.ndarray | None = None) -> None:
        sizes = self.partition_sizes_ if self.normalization == "size" else None
        spectrum = normalized_spectrum(
            self.affinity_, sizes=sizes, regularization=self.regularization
        )
        self.model_order_ = None
        self.n_clusters_candidates_ = self.n_clusters_scores_ = None
        if self.n_clusters == "auto" and spectrum.size < 3:
            # two partitions (fit needs at least two): two clusters, nothing to compare
            self.n_clusters_ = int(spectrum.size)
            self.spectrum_ = spectrum
        elif self.n_clusters == "auto":
            candidates = candidate_range(
                spectrum.size, self.max_clusters, owner="MSSC(n_clusters='auto')"
            )
            order = spectrum_model_order(spectrum, candidates[candidates < spectrum.size])
            self.model_order_ = order
            self.n_clusters_ = order.n_clusters
            self.n_clusters_candidates_ = order.candidates
            self.n_clusters_scores_ = order.scores
            self.spectrum_ = spectrum[: int(order.candidates[-1]) + 1]
        else:
            self.n_clusters_ = int(self.n_clusters)
            self.spectrum_ = spectrum[: (self.max_clusters or DEFAULT_MAX_CLUSTERS) + 1]
        k = self.n_clusters_
        axes = None if means is None else wide_limit_axes(means, sizes)
        self.eigengap_ratios_ = np.array(
            [
                _eigengap_ratio(spectrum, k),
                np.nan if axes is None else _eigengap_ratio(axes.spectrum, k),
            ]
        )
        at_sigma, at_limit = self.eigengap_ratios_
        if self.wide_limit == "always":
            if axes is None or axes.n_axes < k - 1 or k < 2:
                raise InvalidInputError(
                    f"wide_limit='always': the partition means span "
                    f"{0 if axes is None else axes.n_axes} direction(s); the wide limit embeds "
                    f"{k} clusters in n_clusters - 1 = {k - 1} (with fewer affinity columns or "
                    "partitions than clusters, or one cluster, it has none to offer). Use "
                    "wide_limit='auto' or 'never'."
                )
            self.wide_limit_ = True
        else:
            # NaN (no limit, or a ratio undefined) compares False: the affinity at sigma_
            self.wide_limit_ = bool(at_limit < at_sigma)
        rs = derive_seed(seed, "kmeans2")
        if self.wide_limit_:
            labels, emb, values, cost = wide_limit_stage(
                axes, k, n_init=self.n_init, random_state=rs
            )
        else:
            labels, emb, values, cost = second_stage(
                self.affinity_,
                k,
                resolve_alias(self.embedding, "embedding", type(self).__name__),
                n_init=self.n_init,
                seed=seed,
                sizes=sizes,
                regularization=self.regularization,
            )
        self.embedding_ = emb
        self.eigenvalues_ = values
        self.kmeans_cost_ = cost
        self.partition_labels_ = labels

    def _scale_bands(self, X: Any, *, fit: bool = False) -> Any:
        """``X`` with the band columns scaled as in fit (``band_norm``; one implementation,
        :mod:`dkernel.meanshift.bands`)."""
        n_bands = int(X.shape[1]) if self.n_bands is None else int(self.n_bands)
        if n_bands > X.shape[1]:
            raise InvalidInputError(
                f"n_bands={n_bands} exceeds the {X.shape[1]} feature columns of X; n_bands "
                "counts the leading band columns (None: every column is a band)."
            )
        if fit:
            self.band_norm_ = resolve_band_norm(X, n_bands, self.band_norm)
        return apply_band_norm(X, n_bands, self.band_norm_)

    def _scaled_for_predict(self, X: Any) -> Any:
        """Validated ``X`` with its bands scaled as in fit."""
        check_is_fitted(self, "partition_labels_")
        X = validate_input(self, X, reset=False, allow_nan=True, min_samples=1)
        if self.band_norm_ == "none":
            return X
        return self._scale_bands(X)

    def predict(self, X: Any) -> Any:
        """Cluster of new points: mean shift to a stored mode, then that partition's cluster.

        The bands of ``X`` are scaled as in fit (``band_norm_``).
        """
        part = self._assign(self._scaled_for_predict(X))
        if is_dask_array(part):
            return part.map_blocks(partial(_lookup, table=self.partition_labels_), dtype=np.int64)
        return _lookup(part, self.partition_labels_)

    def predict_partition(self, X: Any) -> Any:
        """Mean-shift partition of new points (stage one only; bands scaled as in fit)."""
        return self._assign(self._scaled_for_predict(X))


def second_stage(
    A: np.ndarray,
    n_clusters: int,
    embedding: str,
    *,
    n_init: int = 100,
    seed: int | None = None,
    sizes: np.ndarray | None = None,
    regularization: float = 0.0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """MSSC stage two on an m × m partition affinity.

    KECA (uncentered, entropy-ordered axes) + angular k-means, centered KPCA + Euclidean
    k-means, or normalized spectral clustering ('normalized', formerly 'njw'), with
    ``n_clusters`` dimensions; best
    of ``n_init`` k-means runs by cost.

    With ``sizes`` (n_i points per partition), ``A`` must be the size-normalised sums
    ``B_ij = S_ij / sqrt(n_i n_j)``: B is the point-level kernel matrix restricted to
    functions constant on partitions, written in the orthonormal basis ``1_{C_i}/sqrt(n_i)``.
    Its eigenvectors give the point-level KPCA/KECA axes (centering and the entropy terms
    ``ψ_j = λ_j (e_j·sqrt(n))²`` use the point counts), each partition is embedded at
    ``e_j,i sqrt(λ_j / n_i)`` and k-means (Euclidean) weights partitions by their size. Without
    ``sizes`` every partition counts once ([Agersborg2012], ch. 5).

    'normalized' (Ng, Jordan & Weiss 2002 [Ng2002]) is the normalized-cut relaxation of the same
    point-level graph: with ``sizes`` the pair sums ``S_ij = B_ij sqrt(n_i n_j)`` give the degrees
    ``d_i = Σ_j S_ij`` (the point degrees summed over C_i), the leading eigenvectors of
    ``D^-1/2 S D^-1/2`` are the point-level ones restricted to partition-constant functions
    (``u_i / sqrt(n_i)`` at each point of C_i), every row is scaled to unit length and k-means
    weights partitions by ``n_i``. Without ``sizes``, ``A`` is the graph and every partition counts
    once. Unlike KPCA it divides out each partition's degree, so a large, spread-out cluster does
    not dominate the leading axes. ``regularization`` = r > 0 adds ``τ = r · mean point degree`` to
    every point's degree (``d_i + τ n_i``; regularized spectral clustering, Qin & Rohe 2013
    [Qin2013]; Amini et al. 2013 [Amini2013]): a small, weakly linked group of partitions (an
    outlier colour, a cloud edge) no longer has an eigenvalue near 1 of its own, so the leading axes
    and the k-means on them do not depend on which outliers a seed happened to isolate.

    Returns
    -------
    labels : ndarray (m,) int64
    embedding : ndarray (m, n_clusters)
    eigenvalues : ndarray (n_clusters,)
    cost : float

    Notes
    -----
    O(m³) for the eigendecomposition, O(n_init · m · k²) for k-means.
    """
    from sklearn.cluster import KMeans

    from dkernel.linalg import angular_kmeans, dense_eigh, euclidean_kmeans
    from dkernel.spectral.dense import keca_embedding, kpca_embedding

    embedding = resolve_alias(embedding, "embedding", "second_stage")
    check_options(embedding, "embedding", "MSSC", ("keca", "kpca", "normalized"))
    rs = derive_seed(seed, "kmeans2")
    if embedding == "normalized":
        return _njw_stage(
            A,
            n_clusters,
            n_init=n_init,
            random_state=rs,
            sizes=sizes,
            regularization=regularization,
        )
    if sizes is None:
        if embedding == "keca":
            emb = keca_embedding(A, n_clusters)
            labels, _, cost = angular_kmeans(
                emb.embedding, n_clusters, n_init=n_init, random_state=rs
            )
        else:
            emb = kpca_embedding(A, n_clusters)
            labels, _, cost = euclidean_kmeans(
                emb.embedding, n_clusters, n_init=n_init, random_state=rs
            )
        return np.asarray(labels, dtype=np.int64), emb.embedding, emb.eigenvalues, float(cost)

    n = np.maximum(np.asarray(sizes, dtype=np.float64), 1.0)
    sw = np.sqrt(n)
    total = n.sum()
    if embedding == "kpca":
        Bs = A @ sw
        Bc = A - np.outer(sw, Bs) / total - np.outer(Bs, sw) / total
        Bc += np.outer(sw, sw) * (sw @ Bs) / total**2
        values, vectors = dense_eigh(Bc, n_clusters)
    else:
        all_values, all_vectors = dense_eigh(A, None)
        psi = all_values * (all_vectors.T @ sw) ** 2
        order = np.argsort(-psi, kind="stable")[:n_clusters]
        values, vectors = all_values[order], all_vectors[:, order]
    Z = vectors / sw[:, None] * np.sqrt(values)[None, :]
    if embedding == "kpca":
        km = KMeans(n_clusters=n_clusters, n_init=n_init, random_state=rs).fit(Z, sample_weight=n)
        labels, cost = km.labels_, float(km.inertia_)
    else:
        labels, _, cost = angular_kmeans(Z, n_clusters, n_init=n_init, random_state=rs)
    return np.asarray(labels, dtype=np.int64), Z, values, float(cost)


def _njw_stage(
    A: np.ndarray,
    n_clusters: int,
    *,
    n_init: int,
    random_state: int,
    sizes: np.ndarray | None,
    regularization: float = 0.0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """Normalized spectral clustering of the partition graph (see :func:`second_stage`)."""
    from sklearn.cluster import KMeans

    from dkernel.linalg import dense_eigh
    from dkernel.linalg.kmeans import normalize_rows

    M, n = _normalized_graph(A, sizes, regularization)
    values, vectors = dense_eigh(M, n_clusters)
    Z = normalize_rows(vectors)
    km = KMeans(n_clusters=n_clusters, n_init=n_init, random_state=random_state).fit(
        Z, sample_weight=n
    )
    return np.asarray(km.labels_, dtype=np.int64), Z, values, float(km.inertia_)


@dataclass(frozen=True)
class WideLimitAxes:
    """The wide limit of the partition graph: axes, spectrum and partition weights.

    ``vectors`` are the left singular vectors of the weighted, centred partition means, with
    the trivial axis ``sqrt(n_i / N)`` first; ``spectrum`` is ``(∞, s_1², s_2², …)``: the
    limit's eigenvalues up to one factor, the trivial one infinitely far above the others.
    """

    vectors: np.ndarray
    spectrum: np.ndarray
    weights: np.ndarray

    @property
    def n_axes(self) -> int:
        """Non-trivial axes with a positive singular value."""
        return int(np.count_nonzero(self.spectrum[1:] > 0))


def wide_limit_axes(means: np.ndarray, sizes: np.ndarray | None) -> WideLimitAxes:
    """The σ → ∞ limit of the 'normalized' stage two on partitions with these means.

    With ``1 − K(x, y) ≈ |x − y|² / 2σ²`` the pair sums are ``S = n nᵀ − ε B`` (ε = 1 / 2σ²,
    B the sums of squared distances), and to first order in ε the leading eigenvector of
    ``D^-1/2 S D^-1/2`` is ``sqrt(n / N)`` while the others are those of ``P G P`` with
    ``G_ij = T_i · T_j / sqrt(n_i n_j)`` (``T_i`` the partition sums, P the projection off the
    leading one), whatever the regularization: the left singular vectors of the rows
    ``sqrt(n_i) (μ_i − x̄)``. This is a size-weighted PCA of the partition means, the linear
    geometry of the bands: when a scene is a linear mixture of k materials, its pixels lie near
    a (k − 1)-dimensional simplex and the k-th singular value drops. Without ``sizes`` every
    partition weighs 1 (the 'cs' normalization).

    Notes
    -----
    O(m d min(m, d)) for m partitions and d columns.
    """
    means = np.asarray(means, dtype=np.float64)
    if sizes is None:
        n = np.ones(means.shape[0])
    else:
        n = np.maximum(np.asarray(sizes, dtype=np.float64), 1.0)
    centre = n @ means / n.sum()
    U, sv, _ = np.linalg.svd(np.sqrt(n)[:, None] * (means - centre), full_matrices=False)
    return WideLimitAxes(
        vectors=np.column_stack([np.sqrt(n / n.sum()), U]),
        spectrum=np.r_[np.inf, sv**2],
        weights=n,
    )


def wide_limit_stage(
    axes: WideLimitAxes, n_clusters: int, *, n_init: int, random_state: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """Stage two in the wide limit: the first ``n_clusters`` axes, rows to unit length, then
    k-means weighting partitions by size (as :func:`second_stage`'s 'normalized').

    Returns ``(labels, embedding, eigenvalues, cost)``; ``eigenvalues`` are 1 for the
    trivial axis, then each axis's share of the partition means' weighted variance.
    """
    from sklearn.cluster import KMeans

    from dkernel.linalg.kmeans import normalize_rows

    Z = normalize_rows(axes.vectors[:, :n_clusters])
    km = KMeans(n_clusters=n_clusters, n_init=n_init, random_state=random_state).fit(
        Z, sample_weight=axes.weights
    )
    variance = axes.spectrum[1:]
    shares = variance[: n_clusters - 1] / max(float(variance.sum()), np.finfo(float).tiny)
    values = np.r_[1.0, shares]
    return np.asarray(km.labels_, dtype=np.int64), Z, values, float(km.inertia_)


def _eigengap_ratio(spectrum: np.ndarray, k: int) -> float:
    """``λ_{k+1} / λ_k`` of a descending spectrum (smaller: k groups stand out more); NaN when
    undefined (k < 2, too short a spectrum, λ_k <= 0)."""
    if k < 2 or spectrum.size <= k or not spectrum[k - 1] > 0:
        return float("nan")
    return float(spectrum[k] / spectrum[k - 1])


def _means(sums: np.ndarray, counts: np.ndarray) -> np.ndarray:
    return sums / np.maximum(np.asarray(counts, dtype=np.float64), 1.0)[:, None]


def _normalized_graph(
    A: np.ndarray, sizes: np.ndarray | None, regularization: float
) -> tuple[np.ndarray, np.ndarray]:
    """``D^-1/2 S D^-1/2`` of the partition graph (symmetric) and the partition weights n_i."""
    if sizes is None:
        n = np.ones(A.shape[0])
        S = A
    else:
        n = np.maximum(np.asarray(sizes, dtype=np.float64), 1.0)
        sw = np.sqrt(n)
        S = A * np.outer(sw, sw)
    deg = S.sum(axis=1)
    if regularization > 0:
        # regularized spectral clustering ([Qin2013]): every point's degree + tau, the
        # mean point degree times `regularization`; n_i points give n_i tau to partition i
        deg = deg + regularization * float(deg.sum()) / float(n.sum()) * n
    # an isolated (or, with random features, slightly negative) degree: no edges, own row
    deg = np.maximum(deg, 1e-12 * float(np.abs(deg).max(initial=1.0)))
    isd = 1.0 / np.sqrt(deg)
    M = S * np.outer(isd, isd)
    return 0.5 * (M + M.T), n


def normalized_spectrum(
    A: np.ndarray, *, sizes: np.ndarray | None = None, regularization: float = 0.0
) -> np.ndarray:
    """Eigenvalues, descending, of the normalized partition graph of :func:`second_stage`.

    The graph of the 'normalized' embedding (with ``sizes``, the point-level graph restricted
    to partition-constant functions; ``regularization`` as there), whatever the embedding:
    k well-separated groups of partitions give k eigenvalues near 1 and a gap after them.

    Notes
    -----
    O(m³) for m partitions.
    """
    M, _ = _normalized_graph(A, sizes, regularization)
    return np.sort(np.linalg.eigvalsh(M))[::-1]


def _sampled_pair_sums(
    Xs: np.ndarray, ls: np.ndarray, sizes: np.ndarray, taken: np.ndarray, h: float
) -> np.ndarray:
    """Unbiased estimate of ``S_ij = Σ_{k∈C_i, l∈C_j} K(x_k, x_l)`` from a stratified sample.

    Off the diagonal the sample sums are scaled by ``(n_i / s_i)(n_j / s_j)``; on it the s_i
    self-pairs (K = 1) are counted exactly and the others scaled by
    ``n_i (n_i − 1) / (s_i (s_i − 1))``. Exact kernel values: two far-apart partitions get
    (almost) 0, not the ±1/sqrt(D) noise of random Fourier features that lets normalized
    spectral clustering isolate a different small partition for every seed.
    """
    m = sizes.size
    S = K.cs_pair_sums(Xs, ls, m, h)
    n = sizes.astype(np.float64)
    t = np.maximum(taken.astype(np.float64), 1.0)
    w = n / t
    diag = np.diag(S).copy()
    S = S * np.outer(w, w)
    pairs = np.where(t > 1, n * (n - 1) / np.maximum(t * (t - 1), 1.0), 0.0)
    np.fill_diagonal(S, n + pairs * (diag - t))
    return S


def _lookup(part: np.ndarray, table: np.ndarray) -> np.ndarray:
    part = np.asarray(part)
    out = np.full(part.shape, -1, dtype=np.int64)
    ok = part >= 0
    out[ok] = table[part[ok]]
    return out
