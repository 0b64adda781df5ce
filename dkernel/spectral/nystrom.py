"""Nyström spectral embeddings with out-of-sample extension, block by block over Dask chunks.

With m landmarks ``L`` and ``K_mm = U Λ Uᵀ`` (eigenvalues below ``rtol · λ_max`` dropped), every
point gets the explicit feature map ``φ(x) = Λ^{-1/2} Uᵀ k_m(x)`` whose Gram matrix is the Nyström
approximation ``K̃ = K_nm K_mm⁺ K_mn`` (Williams & Seeger 2001 [Williams2001]; kernel PCA as its
discrete analogue: Szymkowiak-Have et al. 2006, §I [SzymkowiakHave2006]). The embeddings are then
exact spectral embeddings *of K̃*, computed from r×r sums over the data (``C = Σ φ φᵀ``,
``t = Σ φ``) without any n×n matrix:

* ``kpca`` (centered): eigenpairs (S, V) of ``C - n μ μᵀ``, μ = t/n; ``z(x) = Vᵀ(φ(x) - μ)``
  (= rows of ``E S^{1/2}``);
* ``uncentered``: eigenpairs of C; ``z(x) = Vᵀ φ(x)``;
* ``keca``: eigenpairs of C ordered by the entropy contribution ``ψ_j = (tᵀ v_j)²``
  (= ``λ_j (e_jᵀ 1)²``), top ``n_components`` kept;
* ``normalized`` (Ng–Jordan–Weiss): degrees ``d(x) = φ(x)ᵀ t``; eigenpairs of
  ``Σ φ φᵀ / d`` ; ``z(x) = S^{-1/2} Vᵀ φ(x) / √d(x)`` are the eigenvectors of
  ``D^{-1/2} K̃ D^{-1/2}``.

The same formula embeds training and new points (the out-of-sample extension, dask-ml's
``ParallelPostFit`` pattern), so ``transform`` of a training point equals its in-sample row;
with every point as a landmark the embedding is the exact dense one.
"""

from __future__ import annotations

from dataclasses import dataclass
from numbers import Integral, Real
from typing import Any

import dask
import dask.array as da
import numpy as np
from sklearn.base import (
    BaseEstimator,
    ClassNamePrefixFeaturesOutMixin,
    TransformerMixin,
    _fit_context,
)
from sklearn.utils._param_validation import Interval, StrOptions

from dkernel._budget import SCRATCH_BLOCK_BYTES, rows_for_budget
from dkernel._random import seed_from_random_state
from dkernel._validation import (
    ParameterConstraintsMixin,
    aligned,
    check_is_fitted,
    validate_input,
)
from dkernel.errors import InvalidInputError, NumericalWarning, warn_caller
from dkernel.graphs import bipartite
from dkernel.kernels.nystrom import fit_nystrom_landmarks
from dkernel.kernels.nystrom import nystrom_basis as nystrom_basis
from dkernel.kernels.registry import (
    ADAPTIVE_KERNELS,
    Kernel,
    kernel_input_tags,
    kernel_nan_args,
    make_kernel,
)
from dkernel.kernels.widths import PCKID_SIGMA_FRACTION
from dkernel.linalg.eigen import dense_eigh
from dkernel.runtime.shared import share, with_shared
from dkernel.spectral.normalized import check_degrees, eigengap_hint

EMBEDDINGS = ("kpca", "uncentered", "keca", "normalized")
LANDMARK_METHODS = ("kmeans++", "uniform")
DEGREES = ("nystrom", "landmarks")


# --------------------------------------------------------------------------------------
# numeric core (NumPy only)
# --------------------------------------------------------------------------------------
def _sub_blocks(n: int, rows: int):
    for r0 in range(0, n, rows):
        yield r0, min(n, r0 + rows)


def feature_block(kernel: Kernel, X: np.ndarray, L: np.ndarray, W0: np.ndarray, rows: int):
    """``Φ = K(X, L) W0`` for one block, in sub-blocks of ``rows`` rows."""
    X, L, W0 = aligned(np.asarray(X)), aligned(L), aligned(W0)
    out = np.empty((X.shape[0], W0.shape[1]))
    for r0, r1 in _sub_blocks(X.shape[0], rows):
        out[r0:r1] = kernel.cross(X[r0:r1], L) @ W0
    return out


def _feature_block_first(X, model):
    return feature_block(model.kernel, X, model.landmarks, model.W0, model.rows)


def _sums_block(X, kernel, L, W0, rows, a):
    """Partial sums over one block: (C, t, n, min degree).

    With degree weights ``a`` (degrees ``d = K(X, L) a``) C is the degree-normalized sum.
    C is accumulated as a Gram matrix in feature space (``Pᵀ P``), which keeps it positive
    semi-definite in floating point; forming ``W0ᵀ (Σ k kᵀ) W0`` instead would be cheaper
    but ``W0`` amplifies rounding by up to ``1/rtol`` and breaks that.
    """
    # a task's arguments may sit at any byte offset of a message (see aligned)
    X, L, W0, a = aligned(np.asarray(X)), aligned(L), aligned(W0), aligned(a)
    r = W0.shape[1]
    C = np.zeros((r, r))
    t = np.zeros(r)
    dmin = np.inf
    for r0, r1 in _sub_blocks(X.shape[0], rows):
        Kb = kernel.cross(np.asarray(X[r0:r1]), L)
        P = Kb @ W0
        t += P.sum(axis=0)
        if a is None:
            C += gram(P)
        else:
            d = Kb @ a
            dmin = min(dmin, float(d.min(initial=np.inf)))
            if dmin > 0:  # otherwise fit raises after the pass
                C += gram(P / np.sqrt(d)[:, None])
    return C, t, X.shape[0], dmin


def gram(P: np.ndarray) -> np.ndarray:
    """``Pᵀ P`` for a tall block, symmetric to the last bit.

    ``P.T @ P`` is dispatched by NumPy to OpenBLAS SYRK, which is 2–4× slower than a GEMM
    on an explicitly transposed copy for tall-skinny blocks (measured: 20 971 × 200).
    """
    G = np.ascontiguousarray(P.T) @ P
    return 0.5 * (G + G.T)


def _degree_sums_block(X, kernel, L, rows):
    """``Σ k(x, L)`` over one block (the landmark-space column sums)."""
    X, L = aligned(np.asarray(X)), aligned(L)
    s = np.zeros(np.shape(L)[0])
    for r0, r1 in _sub_blocks(X.shape[0], rows):
        s += kernel.cross(np.asarray(X[r0:r1]), L).sum(axis=0)
    return s


@dataclass(frozen=True)
class NystromModel:
    """Everything needed to embed a point: kernel, landmarks and the linear maps.

    ``z(x) = (φ(x) - offset) @ P`` with ``φ(x) = W0ᵀ k(x, L)``; for the normalized embedding
    ``φ`` is first divided by ``√d(x)``, ``d(x) = k(x, L) · a`` (``a = W0 t`` for the degrees
    of K̃, ``a = (n/m) 1`` for the landmark estimate).
    """

    kernel: Kernel
    landmarks: np.ndarray
    W0: np.ndarray
    P: np.ndarray
    offset: np.ndarray
    a: np.ndarray | None
    rows: int

    def embed(self, X: np.ndarray) -> np.ndarray:
        """Embed an in-memory block of points (rows of kernel values if precomputed)."""
        X = aligned(np.asarray(X))
        out = np.empty((X.shape[0], self.P.shape[1]))
        # (φ/√d - offset) P = (k(x, L) W0 P)/√d - offset P: one thin GEMM per row block
        M = aligned(self.W0) @ aligned(self.P)
        shift = aligned(self.offset) @ aligned(self.P)
        L, a = aligned(self.landmarks), aligned(self.a)
        for r0, r1 in _sub_blocks(X.shape[0], self.rows):
            Kb = self.kernel.cross(X[r0:r1], L)
            Z = Kb @ M
            if a is not None:
                d = Kb @ a
                check_degrees(d, "Nyström-approximated kernel")
                Z /= np.sqrt(d)[:, None]
            out[r0:r1] = Z - shift
        return out

    def degrees(self, X: np.ndarray) -> np.ndarray:
        """Nyström degrees ``d(x) = Σ_i K̃(x, x_i)`` (normalized embedding only)."""
        if self.a is None:
            raise InvalidInputError("degrees are only defined for the normalized embedding.")
        X, L, a = aligned(np.asarray(X)), aligned(self.landmarks), aligned(self.a)
        out = np.empty(X.shape[0])
        for r0, r1 in _sub_blocks(X.shape[0], self.rows):
            out[r0:r1] = self.kernel.cross(X[r0:r1], L) @ a
        return out


def _embed_block(X, model: NystromModel):
    return model.embed(X)


def _add_sums(a: tuple, b: tuple) -> tuple:
    return (a[0] + b[0], a[1] + b[1], a[2] + b[2], min(a[3], b[3]))


def _tree_sum(parts: list, add: Any = _add_sums) -> Any:
    """Pairwise tree reduction of delayed partial sums with ``add`` (default: tuples of
    sums, :func:`_add_sums`)."""
    add_d = dask.delayed(add, pure=True)
    while len(parts) > 1:
        nxt = [add_d(parts[i], parts[i + 1]) for i in range(0, len(parts) - 1, 2)]
        if len(parts) % 2:
            nxt.append(parts[-1])
        parts = nxt
    return parts[0]


# --------------------------------------------------------------------------------------
# landmarks
# --------------------------------------------------------------------------------------
def select_landmarks(
    X: Any,
    n_landmarks: int,
    kernel: Kernel,
    *,
    method: str = "kmeans++",
    seed: int | None = 0,
    pool_size: int | None = None,
) -> np.ndarray:
    """Indices of ``n_landmarks`` training points chosen as Nyström landmarks.

    :func:`dkernel.graphs.bipartite.select_landmarks` (the landmark stage of every
    landmark-based estimator) for ``kernel``: with a precomputed kernel the k-means++ distance
    is the kernel-induced one.

    Parameters
    ----------
    X : ndarray or dask array
        Training data (kernel rows for a precomputed kernel).
    n_landmarks : int
        m; all points (in order) when m >= n.
    kernel : Kernel
    method : {'kmeans++', 'uniform'}
    seed : int, optional
    pool_size : int, optional
        Pool of the k-means++ seeding (default ``max(10 m, 5000)``).
    """
    return bipartite.select_landmarks(
        X,
        n_landmarks,
        method=method,
        random_state=seed,
        precomputed=kernel.precomputed,
        pool_size=pool_size,
    ).indices


# --------------------------------------------------------------------------------------
# estimator
# --------------------------------------------------------------------------------------
class NystromEmbedding(
    ParameterConstraintsMixin, ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator
):
    """Nyström KPCA / uncentered KPCA / KECA / normalized (NJW) embedding with ``transform``.

    Parameters
    ----------
    n_components : int
        Embedding dimension.
    embedding : {'kpca', 'uncentered', 'keca', 'normalized'}
    kernel : str, callable or Kernel
        ``'rbf'``, ``'local_scaling'``, ``'knn'``, ``'landmark'`` (the landmark bipartite
        graph, ``kernel_params`` ``n_landmarks`` and ``n_neighbors``), ``'cosine'``, ``'pck'``,
        ``'precomputed'`` or ``f(X, Y)`` (see :func:`dkernel.kernels.registry.make_kernel`).
        X with NaN (missing values): ``'pck'`` models them (PCKID); ``'rbf'`` and the adaptive
        kernels fitted on data with NaN compare rows by their expected squared distance ``‖x̃ −
        ỹ‖² + r_x + r_y`` (missing entries at their conditional means given the observed ones,
        plus their conditional variance, under a Gaussian of the training rows fitted by EM,
        :mod:`dkernel.kernels.missing`), and new rows with the same model; every
        other kernel refuses them.
    kernel_params : dict, optional
        E.g. ``{"sigma": 1.5}`` or ``{"model": fitted_pck}``.
    sigma : float, optional
        RBF width (shortcut for ``kernel_params={'sigma': ...}``); rule of thumb when None.
    sigma_fraction : float
        Fraction of the median pairwise distance for the RBF rule of thumb: 0.2, the PCKID
        baselines' local width (``dkernel.kernels.widths.PCKID_SIGMA_FRACTION``), as
        :class:`~dkernel.SpectralClustering`.
    n_landmarks : int
        m; every point when m >= n (the exact embedding).
    landmarks : {'kmeans++', 'uniform'}
    rtol : float
        Landmark-kernel eigenvalues below ``rtol · λ_max`` are dropped (pseudo-inverse).
    degrees : {'nystrom', 'landmarks'}
        Normalized embedding only. ``'nystrom'``: the degrees of the approximated kernel,
        ``d = K̃ 1`` (one extra pass; can turn negative for points far from every landmark).
        ``'landmarks'``: ``d(x) = (n/m) Σ_j k(x, l_j)``, positive for non-negative kernels and
        free (no extra pass). Both are exactly ``K 1`` when every point is a landmark.
    block_rows : int, optional
        Rows per kernel sub-block (bounds memory: block_rows × m doubles); default ≈ 32 MiB.
    random_state : int, optional

    Attributes
    ----------
    model_ : NystromModel
    landmark_indices_ : ndarray (m,)
    eigenvalues_ : ndarray (n_components,)
        Eigenvalues of the (centered / normalized) approximated kernel for the kept axes.
    criterion_ : ndarray (n_components,)
        λ (kpca, uncentered, normalized) or ψ (keca) of the kept axes.
    component_indices_ : ndarray (n_components,)
        Rank of each kept axis among the eigenvalues (0 = largest).
    all_eigenvalues_ : ndarray
        Every eigenvalue of the r×r problem (normalized: the eigengap spectrum).
    eigengap_hint_ : int or None
        Suggested number of clusters (normalized embedding only).
    embedding_ : ndarray (n, n_components) or dask array
        In-sample embedding (lazy for Dask input).
    kernel_ : Kernel

    See Also
    --------
    dkernel.KernelPCAEmbedding : Exact kernel PCA of the full kernel (moderate N).
    dkernel.KECA : Exact KECA of the full kernel.
    dkernel.SpectralClustering : Clusters this embedding and predicts new points.
    sklearn.kernel_approximation.Nystroem : scikit-learn's Nyström feature map.

    Notes
    -----
    Cost: O(n m (p + r)) time for each of one or two passes over the data (two for
    ``kpca``-free normalized: degrees first), O(m^3) for the landmark eigen-solve and
    O(r^3) for the final one; memory O(block_rows · m + m²) per worker, never n × n.

    References
    ----------
    - Williams & Seeger (2001), "Using the Nyström method to speed up kernel machines",
      *NIPS 13* [Williams2001]: the approximation and its out-of-sample formula.
    - Schölkopf, Smola & Müller (1998) [Scholkopf1998]: kernel PCA; Jenssen (2010)
      [Jenssen2010]: KECA; Ng, Jordan & Weiss (2002) [Ng2002]: the normalized embedding.
    """

    _parameter_constraints: dict = {
        "n_components": [Interval(Integral, 1, None, closed="left")],
        "embedding": [StrOptions(set(EMBEDDINGS))],
        # names are checked by make_kernel, whose message lists the registered ones
        "kernel": [str, callable],
        "kernel_params": [dict, None],
        "sigma": [Interval(Real, 0, None, closed="neither"), None],
        "sigma_fraction": [Interval(Real, 0, None, closed="neither")],
        "n_landmarks": [Interval(Integral, 1, None, closed="left")],
        "landmarks": [StrOptions(set(LANDMARK_METHODS))],
        "rtol": [Interval(Real, 0, 1, closed="both")],
        "degrees": [StrOptions(set(DEGREES))],
        "block_rows": [Interval(Integral, 1, None, closed="left"), None],
        "random_state": ["random_state", np.random.Generator],
    }

    def __init__(
        self,
        n_components: int = 2,
        *,
        embedding: str = "kpca",
        kernel: Any = "rbf",
        kernel_params: dict | None = None,
        sigma: float | None = None,
        sigma_fraction: float = PCKID_SIGMA_FRACTION,
        n_landmarks: int = 1000,
        landmarks: str = "kmeans++",
        rtol: float = 1e-10,
        degrees: str = "nystrom",
        block_rows: int | None = None,
        random_state: int | None = None,
    ) -> None:
        self.degrees = degrees
        self.n_components = n_components
        self.embedding = embedding
        self.kernel = kernel
        self.kernel_params = kernel_params
        self.sigma = sigma
        self.sigma_fraction = sigma_fraction
        self.n_landmarks = n_landmarks
        self.landmarks = landmarks
        self.rtol = rtol
        self.block_rows = block_rows
        self.random_state = random_state

    def __sklearn_tags__(self):
        return kernel_input_tags(super().__sklearn_tags__(), self.kernel, nan=True)

    @property
    def _n_features_out(self) -> int:
        """Embedding dimension (names ``nystromembedding0``, ... of ``get_feature_names_out``)."""
        return int(self.model_.P.shape[1])

    def _check_components_fit_landmarks(self, n_samples: int) -> None:
        """``n_components`` <= the number of landmarks actually used (data-dependent)."""
        m = min(self.n_landmarks, n_samples)
        if self.n_components > m:
            raise InvalidInputError(
                f"The 'n_components' parameter of {type(self).__name__} must be <= n_landmarks "
                f"({m}). Got {self.n_components} instead."
            )

    def _make_kernel(self, X: Any, seed: int | None) -> Kernel:
        params = dict(self.kernel_params or {})
        if isinstance(self.kernel, str) and self.kernel == "rbf":
            params.setdefault("sigma", self.sigma)
            params.setdefault("sigma_fraction", self.sigma_fraction)
            params.setdefault("seed", seed if seed is not None else 0)
        elif isinstance(self.kernel, str) and self.kernel in ADAPTIVE_KERNELS:
            params.setdefault("seed", seed if seed is not None else 0)
        return make_kernel(self.kernel, X, **params)

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X: Any, y: Any = None) -> NystromEmbedding:
        """Choose landmarks, accumulate the r×r sums over the data and solve.

        Parameters
        ----------
        X : ndarray or dask array (n, p)
            Data (or the square kernel matrix for ``kernel='precomputed'``).
        y : ignored
        """
        X = validate_input(self, X, reset=True, min_samples=2, **kernel_nan_args(self.kernel))
        self._check_components_fit_landmarks(int(X.shape[0]))
        seed = seed_from_random_state(self.random_state)
        n = int(X.shape[0])
        stage = fit_nystrom_landmarks(
            X,
            self._make_kernel(X, seed),
            self.n_landmarks,
            method=self.landmarks,
            random_state=seed,
            rtol=self.rtol,
        )
        kernel, idx, L, W0 = stage.kernel, stage.indices, stage.reference, stage.basis
        m = idx.size
        rows = self.block_rows or rows_for_budget(SCRATCH_BLOCK_BYTES, m, 8, low=256)
        if self.embedding == "normalized":
            if self.degrees == "nystrom" and m < n:
                t = self._reduce(X, kernel, L, W0, rows, degrees_only=True)
                a = W0 @ t
            else:  # landmark estimate; with every point a landmark both are exactly K 1
                a = np.full(m, n / m)
            C, t, _, dmin = self._reduce(X, kernel, L, W0, rows, a=a)
            if not dmin > 0:
                raise InvalidInputError(
                    f"The normalized embedding needs positive degrees, but the {self.degrees} "
                    f"degree estimates of some points are <= 0 (smallest {dmin:.3g}). Use "
                    "degrees='landmarks' (positive for non-negative kernels), more landmarks, "
                    "a non-negative kernel, or embedding='kpca'."
                )
        else:
            C, t, _, _ = self._reduce(X, kernel, L, W0, rows)
        k = int(self.n_components)
        offset = np.zeros(W0.shape[1])
        if self.embedding == "kpca":
            mu = t / n
            offset = mu
            C = C - n * np.outer(mu, mu)
        C = 0.5 * (C + C.T)
        values, vectors = dense_eigh(C, clip=True)
        if values.size < k:
            raise InvalidInputError(
                f"The approximated kernel has rank {values.size} < n_components = {k}; use more "
                "landmarks, a smaller rtol or fewer components."
            )
        if self.embedding == "keca":
            psi = (t @ vectors) ** 2
            order = np.argsort(-psi, kind="stable")[:k]
            criterion = psi[order]
        else:
            order = np.arange(k)
            criterion = values[order]
        V = vectors[:, order]
        sel = values[order]
        if self.embedding == "normalized":
            if np.any(sel <= 0):
                raise InvalidInputError(
                    "The normalized embedding found non-positive eigenvalues among the kept "
                    "components; use fewer components or more landmarks."
                )
            P = V / np.sqrt(sel)[None, :]
            a_model = a
        else:
            P = V
            a_model = None
        if np.any(sel <= 1e-12 * max(values[0], 1e-300)):
            warn_caller(
                f"{int(np.sum(sel <= 1e-12 * values[0]))} kept components have (near) zero "
                "eigenvalue; their embedding coordinates are zero.",
                NumericalWarning,
            )
        self.kernel_ = kernel
        self.landmark_indices_ = idx
        self.model_ = NystromModel(kernel, L, W0, P, offset, a_model, rows)
        self.eigenvalues_ = sel
        self.criterion_ = criterion
        self.component_indices_ = order
        self.all_eigenvalues_ = values
        normalized = self.embedding == "normalized"
        self.eigengap_hint_ = eigengap_hint(values[:50]) if normalized else None
        self.embedding_ = self._embed(X)
        return self

    def _reduce(self, X, kernel, L, W0, rows, *, a=None, degrees_only=False):
        """One pass over the data: ``t = Σ φ`` (degrees_only) or ``(C, t, n, min degree)``."""
        if isinstance(X, da.Array):
            blocks = X.to_delayed().ravel()
            Ld, kd = share(L, "landmarks"), share(kernel, "kernel")
            if degrees_only:
                fn = dask.delayed(with_shared(_degree_sums_block), pure=True)
                parts = [fn(b, kd, Ld, rows) for b in blocks]
                return W0.T @ aligned(np.asarray(dask.compute(_tree_sum(parts, np.add))[0]))
            fn = dask.delayed(with_shared(_sums_block), pure=True)
            Wd = share(W0, "nystrom-basis")
            td = None if a is None else share(a, "nystrom-weights")
            parts = [fn(b, kd, Ld, Wd, rows, td) for b in blocks]
            C, t, n, dmin = dask.compute(_tree_sum(parts))[0]
            return aligned(C), aligned(t), n, dmin
        if degrees_only:
            return W0.T @ _degree_sums_block(X, kernel, L, rows)
        return _sums_block(X, kernel, L, W0, rows, a)

    def transform(self, X: Any) -> Any:
        """Embed points with the Nyström formula (lazy, chunk by chunk, for Dask input).

        Parameters
        ----------
        X : ndarray or dask array (n_new, p)
            New points (for a precomputed kernel: their kernel rows against all training
            points, shape (n_new, n_train)).

        Returns
        -------
        ndarray or dask array (n_new, n_components)
        """
        check_is_fitted(self, "model_")
        X = validate_input(self, X, reset=False, **kernel_nan_args(self.kernel))
        return self._embed(X)

    def _embed(self, X: Any) -> Any:
        """The Nyström formula on validated input (lazy map over row chunks for Dask)."""
        k = self.model_.P.shape[1]
        if isinstance(X, da.Array):
            return X.map_blocks(
                with_shared(_embed_block),
                share(self.model_, "nystrom-model"),
                chunks=(X.chunks[0], (k,)),
                dtype=np.float64,
                meta=np.empty((0, k), dtype=np.float64),
            )
        return self.model_.embed(X)

    def feature_map(self, X: Any) -> Any:
        """The explicit Nyström feature map ``φ(x) = W0ᵀ k(x, L)`` (n, r), Gram matrix K̃.

        Feed it to :func:`dkernel.spectral.feature_map.feature_map_kpca` /
        ``feature_map_normalized`` (SVD of an explicit feature map) or to any linear method.
        Lazy, chunk by chunk, for Dask input.
        """
        check_is_fitted(self, "model_")
        X = validate_input(self, X, reset=False, **kernel_nan_args(self.kernel))
        model = self.model_
        r = model.W0.shape[1]
        if isinstance(X, da.Array):
            return X.map_blocks(
                with_shared(_feature_block_first),
                share(model, "nystrom-model"),
                chunks=(X.chunks[0], (r,)),
                dtype=np.float64,
                meta=np.empty((0, r), dtype=np.float64),
            )
        return feature_block(model.kernel, X, model.landmarks, model.W0, model.rows)

    def fit_transform(self, X: Any, y: Any = None) -> Any:
        """Fit and return the in-sample embedding."""
        return self.fit(X).embedding_
