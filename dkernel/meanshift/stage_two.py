"""MSSC's second stage on an m × m partition affinity (NumPy; the numerics layer).

Normalized spectral clustering, KPCA or KECA of the partition graph, its wide (σ → ∞) limit,
the sampled Cauchy–Schwarz pair sums ([Agersborg2012], ch. 5) and the rows on which
``normalization='auto'`` compares two graphs' labellings by their silhouette. :class:`~dkernel.MSSC` builds
the affinity and calls these; they know nothing of Dask or estimators.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from dkernel._random import derive_rng, derive_seed
from dkernel._validation import check_options
from dkernel.errors import InvalidInputError
from dkernel.kernels.aliases import resolve_alias
from dkernel.meanshift import kernels as K


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


#: Rows the silhouette of ``normalization='auto'`` is computed on (O(rows²) distances).
SILHOUETTE_ROWS = 2000
#: How much higher the silhouette of the 'cs' graph's labelling must be to displace the
#: 'size' graph's, the pixels' own normalized cut (``normalization='auto'``): about four times
#: the silhouette's sampling error on ``SILHOUETTE_ROWS`` rows. Measured: the four-material
#: scene of ``tests/meanshift`` scores 'cs' 0.015 higher at ARI 0.82 against 0.98.
SILHOUETTE_MARGIN = 0.02


def silhouette_rows(
    points: np.ndarray,
    partitions: np.ndarray,
    seed: int | None,
    stands_for: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """At most ``SILHOUETTE_ROWS`` of ``points`` drawn uniformly (the seed's), their partitions
    and weights: ``stands_for[partition]`` (the pixels a row of a stratified sample stands for),
    or None."""
    n = points.shape[0]
    if n > SILHOUETTE_ROWS:
        rng = derive_rng(seed, "mssc", "silhouette")
        idx = np.sort(rng.choice(n, size=SILHOUETTE_ROWS, replace=False))
        points, partitions = points[idx], partitions[idx]
    weights = None if stands_for is None else np.asarray(stands_for)[partitions]
    return points, partitions, weights


class PartitionClusters(NamedTuple):
    """Stage two on one partition graph (:func:`cluster_partition_graph`)."""

    labels: np.ndarray
    embedding: np.ndarray
    eigenvalues: np.ndarray
    cost: float
    eigengap_ratios: np.ndarray
    """``λ_{k+1} / λ_k`` at σ (the plain graph's) and in the wide limit (NaN: undefined)."""
    wide_limit: bool


def cluster_partition_graph(
    A: np.ndarray,
    k: int,
    *,
    sizes: np.ndarray | None,
    means: np.ndarray | None,
    embedding: str,
    wide_limit: str,
    n_init: int,
    seed: int | None,
    regularization: float,
    spectrum: np.ndarray | None = None,
) -> PartitionClusters:
    """Stage two on one partition graph at ``k``: at σ (:func:`second_stage`) or in its wide
    limit (:func:`wide_limit_stage`, from the partition ``means``; ``wide_limit`` 'auto' takes
    the one of the smaller eigengap ratio, 'always' the limit, 'never' σ). ``spectrum``: the
    graph's regularized spectrum when already computed."""
    axes = None if means is None else wide_limit_axes(means, sizes)
    # Like with like: the limit's spectrum is that of the plain normalized graph (the degree
    # regularization only rescales it there), so the affinity at sigma is judged by its plain
    # spectrum too; the regularized one has smaller ratios whatever the data.
    if axes is not None and regularization:
        plain = normalized_spectrum(A, sizes=sizes)
    elif spectrum is not None:
        plain = spectrum
    else:
        plain = normalized_spectrum(A, sizes=sizes, regularization=regularization)
    ratios = np.array(
        [_eigengap_ratio(plain, k), np.nan if axes is None else _eigengap_ratio(axes.spectrum, k)]
    )
    at_sigma, at_limit = ratios
    if wide_limit == "always":
        if axes is None or axes.n_axes < k - 1 or k < 2:
            raise InvalidInputError(
                f"wide_limit='always': the partition means span "
                f"{0 if axes is None else axes.n_axes} direction(s); the wide limit embeds "
                f"{k} clusters in n_clusters - 1 = {k - 1} (with fewer affinity columns or "
                "partitions than clusters, or one cluster, it has none to offer). Use "
                "wide_limit='auto' or 'never'."
            )
        wide = True
    else:
        # NaN (no limit, or a ratio undefined) compares False: the affinity at sigma
        wide = bool(at_limit < at_sigma)
    if wide:
        assert axes is not None
        labels, emb, values, cost = wide_limit_stage(
            axes, k, n_init=n_init, random_state=derive_seed(seed, "kmeans2")
        )
    else:
        labels, emb, values, cost = second_stage(
            A, k, embedding, n_init=n_init, seed=seed, sizes=sizes, regularization=regularization
        )
    return PartitionClusters(labels, emb, values, cost, ratios, wide)
