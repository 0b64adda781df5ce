"""PCK spectral clustering (PCKID when values are missing) as one estimator.

The pipeline of Løkse (2020), Paper I [Lokse2020]: a GMM ensemble
(``dkernel.gmm.pck.ProbabilisticClusterKernel``) gives every point its posterior feature map Γ (F
columns; ``K = Γ Γᵀ`` is never formed), whose centred KPCA (Paper I, Eq. 5) or normalised (NJW,
[Ng2002]) embedding comes from the SVD of Γ or ``D^{-1/2} Γ`` (:mod:`dkernel.spectral.feature_map`),
then k-means.

Where Γ lives while the embedding is computed (``placement``): held dense when ``N F`` fits
``GAMMA_MEMORY_LIMIT``, held sparse when its nearly one-hot rows (posteriors below
``SPARSE_CUT · √Z`` dropped) fit, and otherwise lazy: every pass recomputes it chunk by chunk
from the ensemble, and with ``solver='auto'`` the embedding comes from the subspace of a
uniform row subsample's Γ and one pass over all rows (:mod:`dkernel.spectral.subsample`).
The estimator lives in the spectral family and asks for the PCK by name
(``dkernel._feature_maps``), as the ranking estimators do: families import no other family's
estimators.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from numbers import Integral
from typing import Any

import dask.array as da
import numpy as np
from scipy.sparse import issparse
from sklearn.base import BaseEstimator, ClusterMixin, TransformerMixin, _fit_context, clone
from sklearn.utils._param_validation import HasMethods, Interval, StrOptions

from dkernel._budget import KERNEL_BLOCK_BYTES, rows_for_budget
from dkernel._feature_maps import make_feature_map
from dkernel._random import derive_seed, seed_from_random_state
from dkernel._validation import (
    ParameterConstraintsMixin,
    check_is_fitted,
    is_dask_array,
    resolve_n_components,
    validate_input,
)
from dkernel.linalg.kmeans import euclidean_kmeans, normalize_rows
from dkernel.model_order import candidate_range, spectrum_model_order
from dkernel.rows import take_rows
from dkernel.runtime.shared import shared_rows
from dkernel.spectral.clustering import assign_to_centers
from dkernel.spectral.feature_map import (
    FeatureMapEmbedding,
    choose_solver,
    feature_map_kpca,
    feature_map_normalized,
)
from dkernel.spectral.pck_memory import gamma_placement, subsample_size
from dkernel.spectral.subsample import subsample_kpca, subsample_normalized, subsample_rows

#: A sparse Γ drops the posteriors below ``SPARSE_CUT · √Z``: every model's posteriors are
#: nearly one-hot, so about Q (G - 1) to 2 Q (G - 1) entries per row remain.
SPARSE_CUT = 1e-7
EMBEDDINGS = ("kpca", "normalized")
SOLVERS = ("auto", "exact", "randomized")
#: The rule of ``n_clusters='auto'``. The PCK kernel averages models of 2 .. G components, and
#: those with fewer components than clusters merge clusters, so the walk leaves a cluster at a
#: rate (``1 − λ_k``, 0.15 to 0.3) that is not orders of magnitude below the rate inside it:
#: the timescale gap then favours the pair of clusters merged least often. Default PCK (Q = G
#: = 30), seed 0: the eigengap found k on 300-point blobs with 2, 3, 4, 5 and 6 centres (σ 0.5,
#: centres >= 4 apart), 3 on wine and 2 on iris (setosa against the rest); the timescale gap
#: 2 on the 3, 4 and 5 blobs.
AUTO_RULE = "eigengap"
PLACEMENTS = ("auto", "dense", "sparse", "lazy")


def default_chunk_rows(n_samples: int, n_features_out: int) -> int:
    """Rows per chunk of a lazy Γ: about ``KERNEL_BLOCK_BYTES`` of float32 Γ, at least 256."""
    return rows_for_budget(KERNEL_BLOCK_BYTES, n_features_out, 4, low=256, high=n_samples)


def _float64_block_rows(Gamma: Any) -> int:
    """Rows of a held Γ per pass block: about ``KERNEL_BLOCK_BYTES`` once cast to float64."""
    n, f = Gamma.shape
    return rows_for_budget(KERNEL_BLOCK_BYTES, f, 8, low=1, high=max(n, 1))


def model_entropy(Gamma: Any, offsets: np.ndarray, scale: float) -> np.ndarray:
    """Mean over the rows of each model's posterior entropy (nats).

    Parameters
    ----------
    Gamma : ndarray, scipy.sparse matrix or dask.array.Array (N, F)
        ``Γ/√Z`` (``ProbabilisticClusterKernel.transform``); dropped sparse entries count as
        ``p log p ≈ 0``.
    offsets : ndarray (n_models + 1,)
        Column offsets of the models (``ensemble_.offsets``).
    scale : float
        ``√Z``, which turns Γ/√Z back into posteriors.

    Notes
    -----
    O(N F); one pass over a Dask Γ, of a held one ``KERNEL_BLOCK_BYTES`` of float64 rows at a
    time (the whole float64 Γ and its logarithm were 4x the bytes of a float32 Γ).
    """

    def block(G: Any) -> np.ndarray:
        P = np.asarray(G, dtype=np.float64) * scale
        # p log p with 0 log 0 = 0: log(max(p, tiny)) is finite where p = 0 (an unmasked log,
        # twice as fast as one with where=)
        log_p = np.maximum(P, np.finfo(np.float64).tiny)
        np.log(log_p, out=log_p)
        P *= log_p
        return -np.add.reduceat(P.sum(axis=0), offsets[:-1])[None, :]

    if is_dask_array(Gamma):
        parts = Gamma.map_blocks(
            block, dtype=np.float64, chunks=((1,) * Gamma.numblocks[0], (offsets.size - 1,))
        )
        total = parts.sum(axis=0).compute()
    else:
        rows = _float64_block_rows(Gamma)
        dense = (lambda G: G.toarray()) if issparse(Gamma) else (lambda G: G)
        total = sum(block(dense(Gamma[a : a + rows]))[0] for a in range(0, Gamma.shape[0], rows))
    return total / Gamma.shape[0]


class PCKSpectralClustering(
    ParameterConstraintsMixin, ClusterMixin, TransformerMixin, BaseEstimator
):
    """Spectral clustering with the probabilistic cluster kernel (PCKID for missing values).

    Fits the PCK's GMM ensemble, embeds its posterior feature map Γ (the normalised NJW
    embedding by default, or centred KPCA as in [Lokse2020] Paper I; K is never formed) and
    clusters the embedding with k-means. NaN marks a missing value; NumPy or Dask input.

    Parameters
    ----------
    n_clusters : int or 'auto', default=2
        k-means clusters. 'auto': chosen by :mod:`dkernel.model_order`'s eigengap rule — the
        largest ``λ_k − λ_{k+1}`` — over k = 2 .. ``max_clusters``, from the
        ``max_clusters + 1`` leading eigenvalues of the normalized PCK kernel
        ``D^{-1/2} K D^{-1/2}`` (with either ``embedding``: the centred KPCA spectrum has no
        eigenvalue 1 to measure from). They are the squared singular values of
        ``D^{-1/2} Γ``, by the same solver as the embedding (K is never formed). The evidence:
        ``n_clusters_``, ``n_clusters_candidates_``, ``n_clusters_scores_``,
        ``model_order_``. Why not the timescale gap of the graph estimators: see
        ``AUTO_RULE``.
    max_clusters : int, optional
        Largest k compared by ``n_clusters='auto'``. None (default): derived from the data,
        ``round(√n)`` clipped to [10, 50] and at most n − 1
        (:func:`dkernel.model_order.candidate_range`).
    pck : ProbabilisticClusterKernel or None, default=None
        The (unfitted) kernel; cloned at ``fit``. None: ``ProbabilisticClusterKernel()`` with
        its defaults ([Lokse2020] Paper I: Q = G = 30). A kernel whose ``random_state`` is None
        gets this estimator's.
    embedding : {'normalized', 'kpca'}, default='normalized'
        The NJW normalised embedding (the leading singular vectors of ``D^{-1/2} Γ``, rows
        scaled to unit norm before k-means) or centred KPCA (the published PCK, [Lokse2020]
        Paper I). NJW by measurement: on the 35 real sets of ``benchmarks/bench_realdata.py``
        (seeds 0–2) mean ARI 0.438 against KPCA's 0.420, and on 8 of the 9 sets with missing
        values at least mean-imputed k-means' ARI against 6 (hawks 0.46 → 0.91: KPCA's
        k-means splits the large species and merges the small one); on the 23-set suite
        0.568 against 0.555 (moons 0.22 → 0.48, jain 0.00 → 0.41, Jasper 0.52 → 0.65;
        flame 0.92 → 0.51, anisotropic blobs 0.69 → 0.60). ``docs/choosing_defaults.md``.
    n_components : int or None, default=None
        Embedding dimension; ``n_clusters`` when None.
    solver : {'auto', 'exact', 'randomized'}, default='auto'
        Of the SVD of Γ (``dkernel.spectral.feature_map``). 'auto': by cost; a lazy Γ is
        embedded from a row subsample's subspace and one pass over all rows.
    n_init : int, default=10
        k-means restarts (best by inertia).
    placement : {'auto', 'dense', 'sparse', 'lazy'}, default='auto'
        Where Γ is kept while it is embedded (``gamma_placement``): held dense, held
        sparse (posteriors below ``SPARSE_CUT · √Z`` dropped) or lazy (recomputed chunk by
        chunk in every pass). 'auto': dense when it fits ``GAMMA_MEMORY_LIMIT`` (2 GiB) or the
        solver is 'exact', else sparse when that fits, else lazy.
    chunk_rows : int or None, default=None
        Rows per chunk of a lazy Γ; about 64 MiB of float32 Γ when None.
    random_state : int, numpy Generator or None, default=None
        Seeds the ensemble (when ``pck`` has none), the SVD, the subsample and k-means.

    Attributes
    ----------
    pck_ : ProbabilisticClusterKernel
        The fitted kernel (``pck_.transform(X)`` is Γ/√Z of any rows).
    labels_ : ndarray of int64 (n_samples,)
    n_clusters_ : int
        The number of clusters: ``n_clusters``, or the one chosen by 'auto'.
    n_clusters_candidates_ : ndarray of int or None
        The k compared by 'auto' (None for an integer ``n_clusters``).
    n_clusters_scores_ : ndarray or None
        The eigengap of every candidate (the highest wins; None for an integer
        ``n_clusters``).
    model_order_ : dkernel.model_order.ModelOrder or None
        The whole evidence of 'auto' (rule, candidates, scores and, in ``details['spectrum']``,
        the leading eigenvalues of ``D^{-1/2} K D^{-1/2}``); None for an integer ``n_clusters``.
    cluster_centers_ : ndarray (k, n_components)
        In the clustered space (unit-norm rows for 'normalized').
    inertia_ : float
    embedding_ : ndarray (n_samples, n_components)
        KPCA: ``U S``; normalised: the eigenvectors ``U`` of ``D^{-1/2} K D^{-1/2}`` (before
        the row normalisation).
    eigenvalues_ : ndarray (n_components,)
        Of the centred K (KPCA) or of ``D^{-1/2} K D^{-1/2}``, descending.
    degrees_ : ndarray (n_samples,) or None
        ``K 1`` ('normalized' only).
    feature_sums_ : ndarray (F,)
        ``Γᵀ 1`` (of ``pck_.transform``'s Γ/√Z): a new row's degree is ``γ(x) · feature_sums_``.
    feature_projection_ : ndarray (F, n_components)
        The Nyström extension's map (:meth:`transform`).
    solver_ : {'exact', 'randomized', 'subsample'}
        The solver that ran.
    solver_reason_ : str
        Why (the costs compared by ``dkernel.spectral.feature_map.choose_solver``).
    placement_ : {'dense', 'sparse', 'lazy'}
    subsample_rows_ : int or None
        Rows of the subsample of the 'subsample' solver.
    chunk_rows_ : int
        Rows per chunk of a lazy Γ.
    nnz_per_row_ : float or None
        Entries per row of a sparse Γ.
    model_entropy_ : ndarray (n_models,)
        Mean posterior entropy (nats) of each model of the ensemble over the rows.
    n_missing_ : int
        Missing values (NaN) in X.
    variant_ : {'PCK', 'PCKID'}
        PCKID when X has missing values.
    timings_ : dict
        Seconds spent fitting the ensemble, embedding and clustering.
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Column names of a DataFrame passed to ``fit`` (absent for other input).

    See Also
    --------
    ProbabilisticClusterKernel : The kernel alone (Γ, K, degrees).
    SpectralClustering : Spectral clustering with other kernels.

    Notes
    -----
    Ensemble: see :class:`~dkernel.ProbabilisticClusterKernel`. Γ: O(N p F) time, held in
    O(N F) (dense) or O(N Q G) (sparse) memory, or recomputed per pass (lazy: O(chunk F)
    memory per task). Embedding: the Gram route O(N F min(N, F)) or O(N F l) per randomized
    pass (l = k + 20); the lazy 'subsample' route one pass (two for 'normalized') over Γ plus
    the subsample's solve. The mean entropy takes one more pass over a lazy Γ. k-means
    O(N k² n_init) per iteration. Memory never O(N²).

    References
    ----------
    - Løkse, Bianchi, Salberg & Jenssen, "Unsupervised learning using PCKID – A Probabilistic
      Cluster Kernel for Incomplete Data", Paper I of Løkse (2020), PhD thesis [Lokse2020]: §3
      and Eq. 4 (the kernel), Eq. 5 (the KPCA embedding), §4.3 (clustering experiments).
    - Ng, Jordan & Weiss (2002) [Ng2002]: the normalised embedding.

    Examples
    --------
    >>> from sklearn.datasets import load_wine
    >>> from sklearn.preprocessing import StandardScaler
    >>> from dkernel import ProbabilisticClusterKernel
    >>> X = StandardScaler().fit_transform(load_wine().data)
    >>> pck = ProbabilisticClusterKernel(n_estimators=5, max_components=5)
    >>> est = PCKSpectralClustering(3, pck=pck, random_state=0).fit(X)
    >>> est.labels_.shape
    (178,)
    """

    _parameter_constraints: dict = {
        "n_clusters": [Interval(Integral, 1, None, closed="left"), StrOptions({"auto"})],
        "max_clusters": [Interval(Integral, 2, None, closed="left"), None],
        "pck": [HasMethods(["fit", "transform"]), None],
        "embedding": [StrOptions(set(EMBEDDINGS))],
        "n_components": [Interval(Integral, 1, None, closed="left"), None],
        "solver": [StrOptions(set(SOLVERS))],
        "n_init": [Interval(Integral, 1, None, closed="left")],
        "placement": [StrOptions(set(PLACEMENTS))],
        # chunks below 16 rows only multiply the tasks
        "chunk_rows": [Interval(Integral, 16, None, closed="left"), None],
        "random_state": ["random_state", np.random.Generator],
    }

    def __init__(
        self,
        n_clusters: int | str = 2,
        *,
        max_clusters: int | None = None,
        pck: Any = None,
        embedding: str = "normalized",
        n_components: int | None = None,
        solver: str = "auto",
        n_init: int = 10,
        placement: str = "auto",
        chunk_rows: int | None = None,
        random_state: int | np.random.Generator | None = None,
    ) -> None:
        self.n_clusters = n_clusters
        self.max_clusters = max_clusters
        self.pck = pck
        self.embedding = embedding
        self.n_components = n_components
        self.solver = solver
        self.n_init = n_init
        self.placement = placement
        self.chunk_rows = chunk_rows
        self.random_state = random_state

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True  # NaN = missing (PCKID)
        return tags

    def _make_pck(self, seed: int | None) -> Any:
        """An unfitted clone of ``pck`` (the default PCK when None), seeded."""
        if self.pck is None:
            return make_feature_map("pck", random_state=seed)
        pck = clone(self.pck)
        if pck.get_params().get("random_state") is None:
            pck.set_params(random_state=seed)
        return pck

    def _check_sizes(self, n: int) -> np.ndarray | None:
        """The candidates of 'auto' (None for an integer ``n_clusters``), after checking the
        sizes against ``n`` samples."""
        owner = type(self).__name__
        if self.n_clusters == "auto":
            resolve_n_components(owner, n, 1, self.n_components)
            return candidate_range(n, self.max_clusters, owner=f"{owner}(n_clusters='auto')")
        resolve_n_components(owner, n, self.n_clusters, self.n_components)
        return None

    @_fit_context(prefer_skip_nested_validation=False)
    def fit(self, X: Any, y: Any = None) -> PCKSpectralClustering:
        """Fit the ensemble, embed Γ, cluster the embedding.

        Parameters
        ----------
        X : array-like or dask.array.Array (n_samples, n_features)
            NaN = missing.
        y : ignored

        Returns
        -------
        self
        """
        X = validate_input(self, X, reset=True, allow_nan=True, min_samples=2)
        n = int(X.shape[0])
        candidates = self._check_sizes(n)
        seed = seed_from_random_state(self.random_state)
        pck = self._make_pck(seed)
        timings = {}
        t = time.perf_counter()
        self.n_missing_ = int(
            da.isnan(X).sum().compute() if is_dask_array(X) else np.isnan(X).sum()
        )
        self.variant_ = "PCKID" if self.n_missing_ else "PCK"
        pck.fit(X)
        timings["fit_ensemble"] = time.perf_counter() - t

        with contextlib.ExitStack() as held:  # rows shared with the workers for lazy Γ
            t = time.perf_counter()
            Gamma = self._features(X, pck, held)
            emb = self._choose_n_clusters(X, Gamma, pck, candidates, seed)
            k = int(self.n_components or self.n_clusters_)
            if emb is not None and emb.eigenvalues.size >= k:
                # the normalized embedding has one column per eigenpair: the spectrum's, truncated
                emb = dataclasses.replace(
                    emb,
                    embedding=emb.embedding[:, :k],
                    eigenvalues=emb.eigenvalues[:k],
                    eigenvectors=emb.eigenvectors[:, :k],
                )
            else:
                emb = self._embed(X, Gamma, pck, k, seed)
            Z = emb.embedding if self.embedding == "kpca" else normalize_rows(emb.embedding)
            self.feature_sums_, self.feature_projection_ = self._extension(Gamma, emb)
            timings["embedding"] = time.perf_counter() - t

            t = time.perf_counter()
            labels, centers, inertia = euclidean_kmeans(
                Z, self.n_clusters_, n_init=self.n_init, random_state=derive_seed(seed, "kmeans")
            )
            timings["kmeans"] = time.perf_counter() - t
            self.model_entropy_ = model_entropy(
                Gamma, pck.ensemble_.offsets, float(np.sqrt(pck.normalizer_))
            )
        self.pck_ = pck
        self.embedding_, self.eigenvalues_, self.degrees_ = (
            emb.embedding,
            emb.eigenvalues,
            emb.degrees,
        )
        self.solver_ = emb.solver
        self.labels_, self.cluster_centers_, self.inertia_ = labels, centers, inertia
        self.timings_ = timings
        return self

    def _extension(self, Gamma: Any, emb: FeatureMapEmbedding) -> tuple[np.ndarray, np.ndarray]:
        """``(Γᵀ 1, P)``: the column sums of Γ and the F × k map of the Nyström extension.

        Normalized: ``u(x) = γ(x) P / sqrt(γ(x)·Γᵀ1)`` with ``P = Γᵀ D^{-1/2} U / λ``; KPCA:
        ``z(x) = (γ(x) − γ̄) P`` with ``P = Γ_cᵀ U / √λ``. For a training row with the exact
        eigenvectors both give its row of ``embedding_``. One pass over a lazy Γ.
        """
        U, lam = emb.eigenvectors, np.asarray(emb.eigenvalues, dtype=np.float64)
        W = U / np.sqrt(emb.degrees)[:, None] if self.embedding == "normalized" else U
        if is_dask_array(Gamma):
            with shared_rows(W, Gamma.chunks[0]) as Wd:  # N × k: not inside the graph
                sums, GtW = da.compute(Gamma.sum(axis=0, dtype=np.float64), Gamma.T @ Wd)
        elif issparse(Gamma):
            sums = Gamma.sum(axis=0, dtype=np.float64)
            GtW = Gamma.T @ W
        else:  # by row blocks: float32 Γ times float64 W would be cast to float64 whole
            sums = Gamma.sum(axis=0, dtype=np.float64)
            rows = _float64_block_rows(Gamma)
            GtW = np.zeros((Gamma.shape[1], W.shape[1]))
            for a in range(0, Gamma.shape[0], rows):
                GtW += Gamma[a : a + rows].T @ W[a : a + rows]
        sums = np.asarray(sums, dtype=np.float64).ravel()
        GtW = np.asarray(GtW, dtype=np.float64)
        safe = np.where(lam > 0, lam, np.inf)
        if self.embedding == "normalized":
            return sums, GtW / safe[None, :]
        # Γ_cᵀ U = Γᵀ U − γ̄ (1ᵀ U); the centred eigenvectors sum to 0 up to the solver's error
        GtW -= np.outer(sums / U.shape[0], U.sum(axis=0))
        return sums, GtW / np.sqrt(safe)[None, :]

    def _embed_rows(self, X: np.ndarray) -> np.ndarray:
        """The extension of in-memory rows (``embedding_``'s space), in row blocks."""
        P, sums = self.feature_projection_, self.feature_sums_
        X = np.asarray(X)
        out = np.empty((X.shape[0], P.shape[1]))
        rows = rows_for_budget(KERNEL_BLOCK_BYTES, int(P.shape[0]), 8, low=16)
        for a in range(0, X.shape[0], rows):
            G = np.asarray(self.pck_.transform(X[a : a + rows]), dtype=np.float64)
            if self.embedding == "normalized":
                out[a : a + rows] = (G @ P) / np.sqrt(G @ sums)[:, None]
            else:
                out[a : a + rows] = (G - sums / self.embedding_.shape[0]) @ P
        return out

    def transform(self, X: Any) -> Any:
        """The spectral embedding of new rows by the Nyström extension (NaN = missing).

        In ``embedding_``'s space (before the row normalisation of 'normalized'); a training
        row gets its row of ``embedding_`` up to the eigen-solver's accuracy. NumPy in, NumPy
        out; a Dask array in, a lazy Dask array out (one task per row chunk).

        Notes
        -----
        O(n p F) for the PCK's posteriors of n rows, O(n F k) for the projection.
        """
        check_is_fitted(self, "feature_projection_")
        X = validate_input(self, X, reset=False, allow_nan=True)
        k = int(self.feature_projection_.shape[1])
        if is_dask_array(X):
            return X.rechunk({1: -1}).map_blocks(
                self._embed_rows, chunks=(X.chunks[0], (k,)), dtype=np.float64
            )
        return self._embed_rows(X)

    def predict(self, X: Any) -> Any:
        """Cluster of new rows: the extension of :meth:`transform`, then the nearest of
        ``cluster_centers_`` (after the row normalisation of 'normalized'), as in ``fit``."""
        Z = self.transform(X)
        if is_dask_array(Z):
            return Z.map_blocks(self._assign, drop_axis=1, dtype=np.int64)
        return self._assign(Z)

    def _assign(self, Z: np.ndarray) -> np.ndarray:
        return assign_to_centers(Z, self.cluster_centers_, self.embedding, "kmeans")

    def _features(self, X: Any, pck: Any, held: contextlib.ExitStack) -> Any:
        """Γ/√Z of the training rows, held (dense or sparse) or lazy (sets ``placement_``; in-memory
        rows are then on the workers until ``held`` closes)."""
        n = int(X.shape[0])
        itemsize = np.dtype(pck.dtype).itemsize
        F = int(pck.n_features_out_)
        self.chunk_rows_ = int(self.chunk_rows or default_chunk_rows(n, F))
        placement = self.placement
        if placement == "auto":
            n_models = int(pck.normalizer_)  # Q (G - 1)
            placement = gamma_placement(n, F, n_models, itemsize, solver=self.solver)
        self.placement_ = placement
        self.nnz_per_row_ = None
        if placement == "lazy":
            rows = self.chunk_rows_
            if is_dask_array(X):
                Xd = X.rechunk({0: rows, 1: -1})
            else:
                # each chunk a root task reading the rows shared once (runtime.shared): from
                # rows persisted as chunks the scheduler started every Γ chunk at once (300 000
                # x 4 rows, F = 13 920: 7.7 GB a worker, 1.5 GB as root tasks); from rows
                # in the graph (da.from_array) every pass sent them again
                Xd = held.enter_context(shared_rows(np.asarray(X), rows))
            return pck.transform(Xd)
        # from the N × p data here: gathering Γ from the workers would move F / p times more
        # bytes (700x for PCK's defaults on 20 columns) than it takes to compute
        Xn = X.compute() if is_dask_array(X) else np.asarray(X)
        if placement == "dense":
            return pck.transform(Xn)
        Gamma = pck.transform(Xn, sparse_threshold=SPARSE_CUT)
        self.nnz_per_row_ = Gamma.nnz / max(Gamma.shape[0], 1)
        return Gamma

    def _choose_n_clusters(
        self, X: Any, Gamma: Any, pck: Any, candidates: np.ndarray | None, seed: int | None
    ) -> FeatureMapEmbedding | None:
        """Sets ``n_clusters_`` and the evidence of 'auto'; returns the normalized embedding
        the spectrum came from when it is the one clustered (``embedding='normalized'``)."""
        self.model_order_ = None
        self.n_clusters_candidates_ = self.n_clusters_scores_ = None
        if candidates is None:
            self.n_clusters_ = int(self.n_clusters)
            return None
        # the spectrum of D^-1/2 K D^-1/2 = the squared singular values of D^-1/2 Γ: O(N F)
        # for the degrees, then the embedding's solver (the Gram of the smaller side)
        # (K has rank <= F: with fewer features than max_clusters + 1 the larger k are dropped)
        top = max(int(candidates[-1]) + 1, int(self.n_components or 0))
        top = min(top, *Gamma.shape)
        emb = self._embed(X, Gamma, pck, top, seed, embedding="normalized")
        order = spectrum_model_order(emb.eigenvalues, candidates[candidates < top], AUTO_RULE)
        self.model_order_ = order
        self.n_clusters_ = order.n_clusters
        self.n_clusters_candidates_ = order.candidates
        self.n_clusters_scores_ = order.scores
        return emb if self.embedding == "normalized" else None

    def _embed(
        self,
        X: Any,
        Gamma: Any,
        pck: Any,
        k: int,
        seed: int | None,
        *,
        embedding: str | None = None,
    ) -> FeatureMapEmbedding:
        """The KPCA or normalised embedding (``embedding``, this estimator's when None) of Γ
        by the chosen solver (sets ``solver_reason_`` and ``subsample_rows_``)."""
        lazy = is_dask_array(Gamma)
        n = int(Gamma.shape[0])
        m = None
        if lazy and self.solver == "auto":
            m = subsample_size(n, int(pck.n_features_out_), np.dtype(pck.dtype).itemsize)
        solver, self.solver_reason_ = choose_solver(Gamma.shape, k, is_dask=lazy, sample_rows=m)
        self.subsample_rows_ = m if solver == "subsample" else None
        svd_seed = derive_seed(seed, "pck-spectral", "svd")
        kpca = (embedding or self.embedding) == "kpca"
        if solver == "subsample":
            rows = subsample_rows(n, m, derive_seed(seed, "pck-spectral", "subsample"))
            sample = pck.transform(take_rows(X, rows))
            route = subsample_kpca if kpca else subsample_normalized
            return route(Gamma, sample, k, random_state=svd_seed)
        route = feature_map_kpca if kpca else feature_map_normalized
        return route(Gamma, k, solver=self.solver, random_state=svd_seed)
