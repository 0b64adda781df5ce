"""Rules of thumb for kernel widths and neighbour ranks (NumPy/SciPy only; no Dask, no I/O).

Every default width rule and neighbour rank of the package is declared here, once, with its
reason; estimators and kernels import them rather than writing the numbers again.

**RBF width.** :func:`sigma_rule_of_thumb` is the one rule: ``sigma = fraction × the median
pairwise distance`` (on a uniform sample of ``RULE_OF_THUMB_SAMPLE`` rows). The fraction is
the one thing methods disagree on, each for a stated reason (the example jobs in ``jobs/`` rely
on every one of them, so none can change without changing their results):

* ``DEFAULT_SIGMA_FRACTION`` = 1/√2, the median heuristic (2σ² = median²): the generic
  default of :func:`sigma_rule_of_thumb` and of ``make_kernel('rbf', X)``, and the default of
  ``KernelPCAEmbedding`` and ``KECA``, whose leading components summarise the data's global
  shape (one wide width; the wine-rbf-* jobs).
* ``PCKID_SIGMA_FRACTION`` = 0.2, the PCKID baselines' 20 % of the median distance (Løkse 2020,
  Paper I, §4.3.1 [Lokse2020]): a local width that separates groups, for ``SpectralClustering`` and
  ``NystromEmbedding`` (the wider median heuristic merges blobs) and the RBF kernel of
  ``KernelPersonalizedPageRank`` (the spectral-landsat-nystrom and kppr-wine-rbf jobs).
* ``THESIS_SIGMA_FRACTION`` = 0.15, the Frey-faces width of Løkse (2014), §10.2.2
  [Lokse2014]: ``JointRankingClustering``.
* ``MSSC_SIGMA_FRACTION`` = 0.5, MSSC's h_spec, the partition affinity's width (the global scale of
  Agersborg 2012, §5.5 [Agersborg2012]): it beat 0.2 with NJW on Samson, Jasper and BSDS 3063
  (``benchmarks/bench_mssc.py``; the mssc-jasper and mssc-samson jobs).
* ``KERNEL_KMEANS_SIGMA_FRACTION`` = 0.5: ``KernelCCA`` (the best of 0.2, 0.35, 0.5 and 1/√2
  for kernel k-means on the defaults suite, ``benchmarks/bench_kernel_kmeans.py``).
  ``KernelKMeans`` chooses among ``KERNEL_KMEANS_SIGMA_FRACTIONS`` = 0.5, 1 and 2 by default
  and ``KernelPCAEmbedding`` with ``n_clusters`` among ``KPCA_SIGMA_FRACTIONS`` = 1/√2, 1 and 2,
  ``KECA`` with ``n_clusters`` among ``KECA_SIGMA_FRACTIONS`` = 0.35, 0.5, 1/√2 and 1 (each with
  k and 2k entropy components)
  (``sigma_fraction='auto'``, ``dkernel.kernels.width_selection``, scoring each partition in
  the kernel of ``SILHOUETTE_SIGMA_FRACTION`` = 0.5): no one width suited both the suite's
  shapes and real tables.
* ``KERNEL_MAD_SIGMA_FRACTION`` = 2.0: kernel MAD's kernel CCA of two dates
  (:func:`~dkernel.detect_change`); change detection needs a wide, nearly linear kernel whose
  canonical variates keep the radiometric no-change relation (measured on the Taizhou pair and
  the demo scene with inserted change, ``benchmarks/bench_change.py``).
* ``ESN_SIGMA_FRACTION`` = 1.0: the kernel PCA of ``EchoStateNetwork``'s reservoir states, a
  wide kernel: the best of 0.7, 1.0 and 1.4 for the default network on the validation parts of
  ``benchmarks/bench_esn.py``'s three tasks (``docs/deep_models.md``).

* ``DDC_SIGMA_FRACTION`` = √0.15 ≈ 0.387: the kernel on the hidden layer of
  ``DeepDivergenceClustering``, re-estimated on every mini-batch. The rule of the authors'
  group's PyTorch code for [Kampffmeyer2019], σ² = 0.15 × the median squared distance; the
  paper's text says σ = 0.15 × the median distance (``THESIS_SIGMA_FRACTION``), a kernel so
  narrow on 100 batch-normalized hidden units that most pairs weigh about e^-20; on the MNIST
  subset it trained to ACC 0.55 where √0.15 gave 0.59 (``benchmarks/results/ddc.md``).

**Neighbour ranks.** ``DEFAULT_LOCAL_SCALING_NEIGHBORS`` (7, the k of Zelnik-Manor & Perona 2005
[ZelnikManor2005]) is the rank of each point's self-tuning width wherever one is measured;
``DEFAULT_KNN_NEIGHBORS`` (10, the k of scikit-learn's k-NN affinity) is the size of a k-NN graph's
neighbour lists.

**Gaussian density widths.** Two Silverman rules are in use, and they are not the same
formula, so each has a name that says which it is:

* :func:`silverman_normal_reference`: Silverman's multivariate normal-reference rule
  [Silverman1986] ``(4 / (d + 2))^(1/(d+4)) N^(-1/(d+4)) s`` with ``s`` the mean per-feature
  standard deviation (the width of :class:`~dkernel.KernelDecompositionClustering`'s Gaussian
  density kernel).
* :func:`silverman_thesis`: the rule of Agersborg (2012), Eq. 5.1 [Agersborg2012],
  ``sqrt(tr(Σ)/d) (4 / ((2d + 1) N))^(1/(d+4))`` (the mean shift bandwidth of
  :class:`~dkernel.MeanShift` and :class:`~dkernel.MSSC`).

Both reduce to Silverman's one-dimensional rule ``(4/3)^(1/5) σ N^(-1/5)`` for ``d = 1``; for
``d > 1`` the constant and the scale differ (``(2d + 1)`` grows twice as fast as ``d + 2``,
and the root of the mean variance is at least the mean standard deviation).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.spatial.distance import pdist

from dkernel.errors import InvalidInputError

__all__ = [
    "DEFAULT_KNN_NEIGHBORS",
    "DEFAULT_LOCAL_SCALING_NEIGHBORS",
    "DDC_SIGMA_FRACTION",
    "DEFAULT_SIGMA_FRACTION",
    "ESN_SIGMA_FRACTION",
    "KERNEL_MAD_SIGMA_FRACTION",
    "MSSC_SIGMA_FRACTION",
    "PCKID_SIGMA_FRACTION",
    "RULE_OF_THUMB_SAMPLE",
    "KERNEL_KMEANS_SIGMA_FRACTION",
    "KERNEL_KMEANS_SIGMA_FRACTIONS",
    "KECA_SIGMA_FRACTIONS",
    "KPCA_SIGMA_FRACTIONS",
    "SILHOUETTE_SIGMA_FRACTION",
    "THESIS_SIGMA_FRACTION",
    "IQR_PER_STANDARD_DEVIATION",
    "RBF_SIGMA_MAX",
    "RBF_SIGMA_MIN",
    "check_rbf_sigma",
    "median_distance",
    "sigma_rule_of_thumb",
    "silverman_normal_reference",
    "silverman_thesis",
]

#: The median heuristic, 2σ² = median², i.e. σ = median / √2 (see the module docstring).
DEFAULT_SIGMA_FRACTION = float(1.0 / np.sqrt(2.0))
#: The PCKID baselines' 20 % of the median distance (see the module docstring).
PCKID_SIGMA_FRACTION = 0.2
#: The 15 % of the median distance of [Lokse2014], §10.2.2 (see the module docstring).
THESIS_SIGMA_FRACTION = 0.15
#: MSSC's h_spec: half the median distance (see the module docstring).
MSSC_SIGMA_FRACTION = 0.5
#: Kernel k-means and kernel CCA: half the median distance, the best mean ARI of kernel k-means
#: among 0.2, 0.35, 0.5 and 1/√2 on the 22 labelled sets of ``benchmarks/bench_defaults.py``.
KERNEL_KMEANS_SIGMA_FRACTION = 0.5
#: ``KernelKMeans(sigma_fraction='auto')``'s candidate fractions (``dkernel.kernels.width_selection``):
#: the narrowest is also the kernel its partitions are scored in.
KERNEL_KMEANS_SIGMA_FRACTIONS = (0.5, 1.0, 2.0)
#: ``KernelPCAEmbedding(sigma_fraction='auto', n_clusters=k)``'s candidate fractions.
KPCA_SIGMA_FRACTIONS = (DEFAULT_SIGMA_FRACTION, 1.0, 2.0)
#: The fractions ``KECA`` with ``n_clusters`` compares (with its dimension, ``sigma_fraction='auto'``).
KECA_SIGMA_FRACTIONS = (0.35, 0.5, DEFAULT_SIGMA_FRACTION, 1.0)
#: The width of the kernel in which 'auto' scores the candidates' partitions.
SILHOUETTE_SIGMA_FRACTION = 0.5
KERNEL_MAD_SIGMA_FRACTION = 2.0
#: The echo state network's kernel PCA of its states (see the module docstring).
ESN_SIGMA_FRACTION = 1.0
#: Deep divergence-based clustering: σ² = 0.15 × the median squared distance (see above).
DDC_SIGMA_FRACTION = float(np.sqrt(0.15))
#: Rows of the uniform sample the median pairwise distance is measured on (O(sample²) pairs).
RULE_OF_THUMB_SAMPLE = 2000
#: The RBF widths the numerics can use: ``γ = 1 / (2σ²)`` is then a normal float32 number
#: (Gram blocks may be float32), 5e-37 to 5e35. Beyond them σ² underflows to 0 or overflows
#: (σ = 1e-300: division by zero; 1e300: overflow) or γ leaves float32; a width that small or
#: that large is data in the wrong units (standardize it, or leave sigma to the rule of thumb).
RBF_SIGMA_MIN, RBF_SIGMA_MAX = 1e-18, 1e18


def check_rbf_sigma(sigma: Any, what: str = "The 'sigma' parameter of the rbf kernel") -> float:
    """``sigma`` as a float when it is a width the numerics can use (:data:`RBF_SIGMA_MIN` to
    :data:`RBF_SIGMA_MAX`).

    Raises
    ------
    InvalidInputError
        Naming the value, the bounds and the fix.
    """
    if not (isinstance(sigma, int | float) and np.isfinite(sigma) and sigma > 0):
        raise InvalidInputError(f"{what} must be a float > 0. Got {sigma!r} instead.")
    if not RBF_SIGMA_MIN <= sigma <= RBF_SIGMA_MAX:
        raise InvalidInputError(
            f"{what} must lie in [{RBF_SIGMA_MIN:g}, {RBF_SIGMA_MAX:g}] (1 / (2 sigma^2) "
            f"must be a normal float32); got {sigma!r}. Give the width in the data's units "
            "(standardize the data), or leave sigma unset for the rule of thumb."
        )
    return float(sigma)


#: Rank of the neighbour whose distance is a point's self-tuning width (Zelnik-Manor &
#: Perona's k = 7, [ZelnikManor2005]).
DEFAULT_LOCAL_SCALING_NEIGHBORS = 7
#: Neighbours of each point in a k-NN graph (scikit-learn's k-NN affinity uses 10).
DEFAULT_KNN_NEIGHBORS = 10


def median_distance(
    X: np.ndarray, *, sample_size: int = RULE_OF_THUMB_SAMPLE, seed: int | None = 0
) -> float:
    """Median pairwise Euclidean distance, on a uniform sample of at most ``sample_size`` rows.

    Notes
    -----
    O(s² p) time and O(s²) memory for ``s = min(N, sample_size)`` rows.
    """
    X = np.asarray(X, dtype=np.float64)
    if X.shape[0] > sample_size:
        idx = np.random.default_rng(seed).choice(X.shape[0], size=sample_size, replace=False)
        X = X[idx]
    d = pdist(X)
    # in place: a copy of the s²/2 distances (16 MB for 2 000 rows) cost more than the median
    return float(np.median(d, overwrite_input=True)) if d.size else 0.0


def sigma_rule_of_thumb(
    X: np.ndarray,
    *,
    fraction: float = DEFAULT_SIGMA_FRACTION,
    sample_size: int = RULE_OF_THUMB_SAMPLE,
    seed: int | None = 0,
) -> float:
    """RBF width as ``fraction`` of the median pairwise distance (estimated on a sample).

    The one rule of thumb for the RBF width; the default fraction is the median heuristic
    (σ = median / √2). Each estimator's own default fraction is one of the constants of this
    module (see its docstring for who uses which, and why).

    Parameters
    ----------
    X : ndarray of shape (N, p)
    fraction : float
        Multiple of the median distance.
    sample_size : int
        The median is measured on a uniform sample of this many rows (all rows when fewer).
    seed : int, optional
        Seeds the sample.

    Returns
    -------
    float

    Raises
    ------
    InvalidInputError
        When at least half of the sampled pairs coincide (the median distance is zero).

    Examples
    --------
    >>> import numpy as np
    >>> sigma_rule_of_thumb(np.array([[0.0], [1.0], [3.0]]), fraction=0.5)
    1.0
    """
    med = median_distance(X, sample_size=sample_size, seed=seed)
    if not med > 0:
        raise InvalidInputError(
            "The median pairwise distance is 0: at least half of the sampled pairs of rows "
            "coincide (all rows identical, or most of them one repeated value such as nodata), "
            "so the RBF rule of thumb cannot choose sigma; drop the repeated rows or pass sigma "
            "explicitly."
        )
    return fraction * med


def silverman_normal_reference(X: np.ndarray) -> float:
    """Silverman's multivariate normal-reference rule for a Gaussian kernel density estimate.

    ``sigma = (4 / (d + 2))^(1 / (d + 4)) N^(-1 / (d + 4)) s`` with ``d`` features, ``N``
    samples and ``s`` the mean per-feature standard deviation (``ddof=1``). A starting point
    only: choose the width by held-out likelihood (:func:`dkernel.select_kdc_model`).

    Parameters
    ----------
    X : ndarray of shape (N, d)

    Returns
    -------
    float
        The kernel width ``sigma``.

    Raises
    ------
    InvalidInputError
        When every point coincides (zero spread).

    See Also
    --------
    silverman_thesis : the other rule ([Agersborg2012], Eq. 5.1), used by mean shift.

    Notes
    -----
    O(N d) time, O(d) extra memory.
    """
    X = np.asarray(X, dtype=np.float64)
    n, p = X.shape
    s = float(np.mean(np.std(X, axis=0, ddof=1)))
    if not s > 0:
        raise InvalidInputError(
            "All points coincide, so Silverman's rule cannot choose the kernel width; pass "
            "'sigma' explicitly."
        )
    return (4.0 / (p + 2)) ** (1.0 / (p + 4)) * n ** (-1.0 / (p + 4)) * s


#: The interquartile range of a normal distribution in standard deviations (2 × 0.6745):
#: ``silverman_thesis(robust=True)`` takes a feature's spread as the smaller of its standard
#: deviation and its IQR / 1.349.
IQR_PER_STANDARD_DEVIATION = 1.349


def silverman_thesis(X: np.ndarray, *, robust: bool = False) -> float:
    """Silverman's rule as written in Agersborg (2012), Eq. 5.1 [Agersborg2012]: a Gaussian width.

    ``h^2 = tr(Σ_X)/d · (4 / ((2d + 1) N))^{2/(d+4)}`` with ``d`` features and ``N`` samples
    (Eq. 5.1 writes one symbol for both; we read the first as the dimension, which makes
    ``tr(Σ)/d`` the average variance, as in Silverman's multivariate rule).

    Parameters
    ----------
    X : ndarray of shape (N, d)
    robust : bool
        Take each feature's spread as the smaller of its standard deviation and its
        interquartile range / 1.349 (``IQR_PER_STANDARD_DEVIATION``), Silverman's robust
        choice of spread ([Silverman1986], p. 47; statsmodels' ``bw_silverman`` too); a
        feature with an IQR of 0 keeps its standard deviation. One row far from the rest
        inflates a standard deviation without bound but moves no quartile, so the width
        stays that of the bulk of the data.

    Returns
    -------
    float
        The width ``h`` (the mean shift ``bandwidth``).

    Raises
    ------
    InvalidInputError
        With fewer than 2 samples or zero variance.

    See Also
    --------
    silverman_normal_reference : the textbook multivariate rule, used by KDC.

    Notes
    -----
    O(N d) time, O(d) extra memory.
    """
    X = np.asarray(X, dtype=np.float64)
    n, d = X.shape
    if n < 2:
        raise InvalidInputError(f"Silverman's rule needs at least 2 samples; got {n}.")
    var = X.var(axis=0, ddof=1)
    if robust:
        q25, q75 = np.percentile(X, [25, 75], axis=0)
        iqr_var = ((q75 - q25) / IQR_PER_STANDARD_DEVIATION) ** 2
        var = np.where(iqr_var > 0, np.minimum(var, iqr_var), var)
    avg_var = float(var.sum()) / d
    if not avg_var > 0:
        raise InvalidInputError(
            "All samples coincide (zero variance), so Silverman's rule cannot choose the "
            "bandwidth; pass bandwidth explicitly."
        )
    return float(np.sqrt(avg_var * (4.0 / ((2 * d + 1) * n)) ** (2.0 / (d + 4))))


#: ``MeanShift``'s bandwidth is at least this fraction of the median distance from a density
#: point to its nearest other point (:func:`neighbour_bandwidth`).
MEANSHIFT_NEIGHBOUR_FRACTION = 0.5


def neighbour_bandwidth(X: np.ndarray, fraction: float = MEANSHIFT_NEIGHBOUR_FRACTION) -> float:
    """``fraction`` × the median distance from a row of ``X`` to its nearest distinct row.

    A Gaussian width that lets every point's kernel reach its nearest neighbours whatever the
    dimension: at half the nearest-neighbour distance a neighbour weighs ``exp(-2)``. Silverman's
    rule (:func:`silverman_thesis`) is a fraction of the average per-feature standard deviation;
    distances between neighbours grow like the square root of the (intrinsic) dimension, so in 64
    or more dimensions the rule's h is a small fraction of the distance to the nearest point (a
    quarter on the 64-D digits), every point's kernel sees only itself and mean shift returns one
    mode per point.

    Parameters
    ----------
    X : ndarray of shape (N, d)
    fraction : float

    Returns
    -------
    float
        The width, 0 when fewer than two distinct rows.

    Notes
    -----
    Exact nearest neighbours: O(N² d) time, O(N · block) memory.
    """
    from sklearn.neighbors import NearestNeighbors

    X = np.unique(np.asarray(X, dtype=np.float64), axis=0)
    if X.shape[0] < 2:
        return 0.0
    dist, _ = NearestNeighbors(n_neighbors=2, algorithm="brute").fit(X).kneighbors(X)
    return float(fraction * np.median(dist[:, 1]))
