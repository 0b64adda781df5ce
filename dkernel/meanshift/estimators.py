"""Scikit-learn-style estimators: :class:`MeanShift` and :class:`MSSC`.

MSSC (Agersborg 2012, ch. 5 [Agersborg2012]): mean shift splits the data into m partitions (stage
one, :mod:`dkernel.meanshift.mean_shift`); the Cauchy–Schwarz affinity between partitions
(Eq. 5.3) with its own, larger bandwidth is embedded with KECA or KPCA and clustered with angular
or Euclidean k-means (stage two, NumPy, :mod:`dkernel.meanshift.stage_two`); partition labels flow
back to the points. For large inputs the first stage runs on seeds (grid bins or a k-means
pre-partition weighted by counts, [Agersborg2012], §7.1) against a density from a sample, and
every point is then streamed through mean shift against that stored density to a stored mode;
``predict`` does the same for new points. This module keeps the public import paths of both
stages.
"""

from __future__ import annotations

from functools import partial
from numbers import Integral
from typing import Any

import dask.array as da
import numpy as np
from sklearn.base import _fit_context
from sklearn.utils._param_validation import Interval, StrOptions

from dkernel._random import derive_rng, derive_seed, seed_from_random_state
from dkernel._validation import (
    aligned,
    as_numpy,
    check_2d_array,
    check_is_fitted,
    is_dask_array,
    validate_input,
)
from dkernel.errors import InvalidInputError, ResourceLimitError
from dkernel.kernels.aliases import resolve_alias, resolve_renamed
from dkernel.kernels.widths import MSSC_SIGMA_FRACTION, silverman_thesis
from dkernel.linalg import label_sums
from dkernel.meanshift import kernels as K
from dkernel.meanshift.bands import apply_band_norm, resolve_band_norm
from dkernel.meanshift.graph import (
    stream_feature_sums,
    stream_partition_sizes,
    stream_stratified_sample,
)
from dkernel.meanshift.mean_shift import _NON_NEGATIVE, _POSITIVE, MeanShift
from dkernel.meanshift.sampling import sample_sizes, stratified_sample
from dkernel.meanshift.stage_two import (
    SILHOUETTE_MARGIN,
    WideLimitAxes,
    _lookup,
    _means,
    _sampled_pair_sums,
    cluster_partition_graph,
    normalized_spectrum,
    second_stage,
    silhouette_rows,
    wide_limit_axes,
    wide_limit_stage,
)
from dkernel.meanshift.stage_two import (
    _normalized_graph as _normalized_graph,  # re-exported: tests reach it by this path
)
from dkernel.metrics import mean_silhouette
from dkernel.model_order import IMAGE_FINEST_FRACTION, candidate_range, spectrum_model_order
from dkernel.runtime.progress import compute_with_progress

__all__ = [
    "MSSC",
    "MeanShift",
    "WideLimitAxes",
    "normalized_spectrum",
    "second_stage",
    "wide_limit_axes",
    "wide_limit_stage",
]

#: ``spectrum_`` keeps ``max_clusters + 1`` eigenvalues, 11 when max_clusters is None and
#: n_clusters an integer.
DEFAULT_MAX_CLUSTERS = 10
#: Largest number of points for which the exact (O(N²) work) CS affinity is used by 'auto'.
EXACT_AFFINITY_MAX = 20000
#: The partition graphs ``normalization='auto'`` compares; k is chosen on the first.
NORMALIZATIONS = ("size", "cs")


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
        ratios ``(1 − λ_{k+1}) / (1 − λ_k)`` of consecutive relaxation times of the walk on
        the normalized partition graph (``normalized_spectrum``, the graph of the 'normalized'
        embedding, whatever ``embedding`` is) over k = 2..``max_clusters`` — taking the finest
        k whose score is at least half the best
        (``dkernel.model_order.IMAGE_FINEST_FRACTION``: an image's strongest split is often
        water and land; ``wide_limit`` then decides for that k). The evidence:
        ``n_clusters_``, ``n_clusters_candidates_``, ``n_clusters_scores_``,
        ``model_order_``. Measured on Samson, Jasper Ridge, the demo scene and the synthetic
        scene in ``docs/choosing_defaults.md``.
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
    normalization : {'auto', 'size', 'cs'}
        The partition graph stage two clusters. 'size': partitions weighted by their number
        of points, ``S_ij / sqrt(n_i n_j)``, the point-level kernel on partition-constant
        functions, so an over-partitioning first stage cannot outvote the pixels; 'cs': the
        Cauchy–Schwarz affinity of Eq. 5.4 (see :func:`~dkernel.meanshift.second_stage`),
        every partition one point, where a small, distinct group of partitions (a changed
        area, an object in a photo) is not outweighed by large ones. 'auto' (default): stage
        two on both graphs, and the 'cs' labelling kept when its Euclidean silhouette
        ([Rousseeuw1987]) is higher than the 'size' one's by more than
        ``SILHOUETTE_MARGIN`` (0.02) on ``SILHOUETTE_ROWS`` (2 000) rows of the affinity's
        points (the sample's rows weighted by the pixels they stand for; ``normalization_``
        and ``normalization_silhouettes_`` record it); k is chosen on the 'size' graph; with
        ``affinity='rff'``, which holds no rows, 'size'. Measured by
        ``benchmarks/bench_mssc_normalization.py`` on the nine pixel and photo sets of
        ``bench_realdata.py`` (3 000 rows, seeds 0–2), mean ARI and sets at or above
        k-means: 'size' 0.409, 5; 'cs' 0.439, 5; 'auto' 0.456, 7 (Taizhou's change pair
        0.303 → 0.678; at full size 0.406, 6 → 0.462, 8); Samson, Jasper Ridge and the
        six-class synthetic scene keep 'size' and their ARI. It costs a second stage two
        (median fit 0.33 → 0.66 s at 3 000 rows; stage one dominates on whole scenes). On
        the demo scene at k = 2 it keeps 'cs': clouds and the brightest land against the
        rest, where 'size' adds the bright coast to them.
    degree_regularization : float
        'normalized' only: every point's degree is raised by ``degree_regularization`` × the
        mean point degree before the normalization (regularized spectral clustering; 0: plain
        NJW). Formerly ``regularization``, which elsewhere is kernel CCA's ridge term.
        Default 1.0: plain NJW isolates a few small outlier partitions, different ones for
        different seeds (min pairwise ARI of the demo's label maps over 5 seeds ≈ 0).
    wide_limit : {'auto', 'always', 'never'}
        Whether stage two clusters the wide limit of the affinity (σ → ∞) instead of the
        affinity at ``sigma_``. 'auto' (default): the one whose k groups stand out more, the
        smaller eigengap ratio ``λ_{k+1} / λ_k`` (``eigengap_ratios_``; at ``sigma_`` that of
        the graph without ``degree_regularization``, as in the limit); 'always'; 'never'
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
        0.719 and 0.800 against 0.631 and 0.725; on the Landsat sets of
        ``benchmarks/bench_realdata.py`` Taizhou 0.303 and Statlog 0.505 (k-means 0.308 and
        0.531; Taizhou 0.075 when the ratio at ``sigma_`` was that of the regularized graph).
        It keeps ``sigma_`` on the synthetic scene of
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
    regularization : float, optional
        Deprecated: the former name of ``degree_regularization`` (a ``FutureWarning``), kept
        for one release; ``regularization`` is kernel CCA's ridge term elsewhere.
    n_density : int, optional
        Deprecated: the former name of ``density_max_samples`` (a ``FutureWarning``), kept for
        one release.
    seeds, n_seeds, density, density_max_samples : see :class:`MeanShift`
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
    min_cluster_size : float
        See :class:`MeanShift`; default 0: every mode of the first stage is a partition (stage
        two merges them, weighing each by its size).
    saddle_ratio : float or None
        See :class:`MeanShift`; default None: no merging of basins by their passes (stage two
        merges the partitions).
    projection : int, float or None
        See :class:`MeanShift`; default None: the first stage runs on the bands themselves (the
        scenes' 156-198 bands included: the partitions are refined by stage two, which
        compares them on the bands). Not a parameter of the ``mssc`` job.
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
        ``λ_{k+1} / λ_k`` of the partition graph at ``sigma_`` (without the degree
        regularization, which shrinks the ratios of any graph) and of its wide limit, the
        evidence of ``wide_limit='auto'`` (NaN: undefined, or the limit not considered).
    normalization_ : {'size', 'cs'}
        The partition graph whose labelling was kept (``normalization``).
    normalization_silhouettes_ : dict or None
        With ``normalization='auto'``: each graph's silhouette, the evidence of the choice;
        None otherwise (and with ``affinity='rff'``).
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
        Leading eigenvalues of the normalized partition graph k is chosen on (the 'size' one
        under ``normalization='auto'``), descending (computed for every
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

    #: an image pixel missing any band is nodata (label -1), as in the thesis's scenes
    _partial_rows_are_nodata = True

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
        normalization: str = "auto",
        degree_regularization: float = 1.0,
        wide_limit: str = "auto",
        band_norm: str = "auto",
        n_bands: int | None = None,
        coordinates: str = "stage_one",
        blurring: bool = False,
        seeds: str = "kmeans",
        n_seeds: int = 500,
        bin_size: float | None = None,
        density: str = "seeds",
        density_max_samples: int = 20000,
        max_iter: int = 300,
        tol: float = 1e-3,
        group_factor: float = 0.25,
        path_radius: float = 0.5,
        bandwidth_factor: float = 0.4,
        min_cluster_size: float = 0.0,
        saddle_ratio: float | None = None,
        projection: int | float | None = None,
        random_state: int | None = None,
        progress: bool = False,
        regularization: float | None = None,
        n_density: int | None = None,
    ) -> None:
        super().__init__(
            bandwidth,
            blurring=blurring,
            seeds=seeds,
            n_seeds=n_seeds,
            bin_size=bin_size,
            density=density,
            density_max_samples=density_max_samples,
            max_iter=max_iter,
            tol=tol,
            group_factor=group_factor,
            path_radius=path_radius,
            bandwidth_factor=bandwidth_factor,
            min_cluster_size=min_cluster_size,
            saddle_ratio=saddle_ratio,
            projection=projection,
            random_state=random_state,
            n_density=n_density,
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
        self.degree_regularization = degree_regularization
        self.wide_limit = wide_limit
        self.band_norm = band_norm
        self.n_bands = n_bands
        self.coordinates = coordinates
        self.progress = progress
        self.regularization = regularization

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
        "normalization": [StrOptions({"auto", "cs", "size"})],
        "degree_regularization": [_NON_NEGATIVE],
        # the former name of degree_regularization (dkernel.kernels.aliases.RENAMED_PARAMETERS)
        "regularization": [_NON_NEGATIVE, None],
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
            S, sizes, means, sample = self._sampled_affinity(X, labels, seed)
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
        self.affinity_method_ = method
        self.partition_sizes_ = np.asarray(sizes, dtype=np.int64)
        normalizations = NORMALIZATIONS if self.normalization == "auto" else (self.normalization,)
        affinities = {norm: K.partition_affinity(S, sizes, norm) for norm in normalizations}
        if len(affinities) < 2:
            rows = None
        elif method == "exact":
            rows = silhouette_rows(Xn, lab, seed)
        elif method == "sample":
            Xs, ls, take = sample
            stands_for = np.asarray(sizes, dtype=np.float64) / np.maximum(take, 1)
            rows = silhouette_rows(Xs, np.asarray(ls), seed, stands_for)
        else:  # random features stream the pixels: no rows in memory to score
            rows = None
        self._second_stage(seed, means if want_means else None, affinities, rows)
        self.pixel_partitions_ = labels
        self.labels_ = self.cluster_of_partitions(labels)
        return self

    def _rule_bandwidth(self, sample: np.ndarray) -> float:
        """h_ms when ``bandwidth`` is None: ``bandwidth_factor`` × Silverman's rule alone (a
        first stage that over-partitions on purpose; stage two merges)."""
        return self.bandwidth_factor * silverman_thesis(sample)

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
        """Pair sums estimated from the stratified sample, the partition sizes, the
        partition means of the sample and the sample (rows, their partitions, the rows taken
        from each partition)."""
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
        return S, sizes, _means(*label_sums(Xs, ls, m)), (Xs, ls, take)

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

    def _degree_regularization(self) -> float:
        """``degree_regularization``, or its former name ``regularization`` when given."""
        return float(resolve_renamed(self, "degree_regularization"))

    def _sizes_of(self, normalization: str) -> np.ndarray | None:
        """The partition weights of a normalization: the point counts for 'size'."""
        return self.partition_sizes_ if normalization == "size" else None

    def _second_stage(
        self,
        seed: int | None,
        means: np.ndarray | None,
        affinities: dict[str, np.ndarray],
        rows: tuple | None = None,
    ) -> None:
        """Stage two on each of ``affinities`` (normalization -> partition affinity), k chosen
        on the first. With ``rows`` (points, their partitions, weights) another graph's
        labelling is kept when its silhouette there beats the first's by more than
        ``SILHOUETTE_MARGIN``; else the first's."""
        first = next(iter(affinities))
        spectrum = normalized_spectrum(
            affinities[first],
            sizes=self._sizes_of(first),
            regularization=self._degree_regularization(),
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
            order = spectrum_model_order(
                spectrum,
                candidates[candidates < spectrum.size],
                finest_fraction=IMAGE_FINEST_FRACTION,
            )
            self.model_order_ = order
            self.n_clusters_ = order.n_clusters
            self.n_clusters_candidates_ = order.candidates
            self.n_clusters_scores_ = order.scores
            self.spectrum_ = spectrum[: int(order.candidates[-1]) + 1]
        else:
            self.n_clusters_ = int(self.n_clusters)
            self.spectrum_ = spectrum[: (self.max_clusters or DEFAULT_MAX_CLUSTERS) + 1]
        embedding = resolve_alias(self.embedding, "embedding", type(self).__name__)
        stages = {
            norm: cluster_partition_graph(
                A,
                self.n_clusters_,
                sizes=self._sizes_of(norm),
                means=means,
                embedding=embedding,
                wide_limit=self.wide_limit,
                n_init=self.n_init,
                seed=seed,
                regularization=self._degree_regularization(),
                spectrum=spectrum if norm == first else None,
            )
            for norm, A in affinities.items()
        }
        self.normalization_silhouettes_ = None
        chosen = first
        if rows is not None:
            points, partitions, weights = rows
            scores = {
                norm: mean_silhouette(points, stage.labels[partitions], weights=weights)
                for norm, stage in stages.items()
            }
            # 'size' (first) is kept unless another is clearly better
            margin = {norm: 0.0 if norm == first else SILHOUETTE_MARGIN for norm in scores}
            chosen = max(scores, key=lambda norm: scores[norm] - margin[norm])
            self.normalization_silhouettes_ = scores
        stage = stages[chosen]
        self.normalization_ = chosen
        self.affinity_ = affinities[chosen]
        self.eigengap_ratios_ = stage.eigengap_ratios
        self.wide_limit_ = stage.wide_limit
        self.embedding_ = stage.embedding
        self.eigenvalues_ = stage.eigenvalues
        self.kmeans_cost_ = stage.cost
        self.partition_labels_ = stage.labels

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
