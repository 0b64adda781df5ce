"""Spectral embeddings of a kernel ``K = Φ Φᵀ`` given by an explicit feature map Φ (N × F).

Centred KPCA: the eigenpairs of ``H K H`` are ``(s², u)`` for the singular triplets ``(u, s, v)`` of
the column-centred ``Φ - 1 mean(Φ)``; the embedding is ``U S`` (Løkse 2020, Paper I, Eq. 5
[Lokse2020]). Normalised embedding (Ng, Jordan & Weiss 2002 [Ng2002]): with degrees
``d = Φ (Φᵀ 1)``, ``D^{-1/2} K D^{-1/2} = B Bᵀ`` with ``B = D^{-1/2} Φ``, so its eigenvectors are
the left singular vectors of B (eigenvalues s², the largest is 1). Both are the leading left
singular pairs of ``A = diag(w) (Φ - 1 μᵀ)``, with ``μ`` the column mean (or 0) and ``w = d^{-1/2}``
(or 1); A is never formed.

Solvers:

* ``'exact'`` — the Gram route: ``Φ Φᵀ`` (N ≤ F; ``Φᵀ Φ`` otherwise) by BLAS ``syrk`` in Φ's
  dtype, summed in float64 over slices of 2048 features, centred / scaled on the N × N matrix,
  then the k leading eigenpairs only (LAPACK ``evr`` with ``subset_by_index``); O(N² F) +
  O(N³) time, O(N²) memory; NumPy input (or Dask input small enough to gather);
* ``'randomized'`` — the randomized range finder of Halko et al. (2011) [Halko2011] with
  ``n_power_iter`` power iterations, run as a subspace iteration on the F side: each iteration is
  one pass over Φ (``Z = A Q`` and ``Aᵀ Z`` from the same row block), QR of the F × l basis in
  float64, then one last pass for ``A Q`` and its thin SVD: ``n_power_iter + 2`` passes in all
  (Halko's two-sided version takes ``2 (n_power_iter + 1)``). Φ stays in its dtype (float32 for
  PCK); a Dask Φ is streamed (recomputed chunk by chunk from its graph) once per pass;
  O(N F l) per pass with l = k + ``n_oversamples``, O(N l + F l) memory;
* ``'auto'`` — the cheaper of the two by :func:`embedding_cost` (flops weighted by the
  measured speed of each kind of work), the Gram route only when its N × N matrix fits
  ``GRAM_MEMORY_LIMIT``.

Written for any explicit feature map (PCK posteriors, random Fourier features, Nyström maps).
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import linalg
from scipy.sparse import issparse

from dkernel._validation import check_options, check_scalar, is_dask_array
from dkernel.errors import InvalidInputError
from dkernel.linalg.eigen import clip_negative, dense_eigh, fix_signs
from dkernel.linalg.threads import map_on_cores, one_blas_thread
from dkernel.runtime.shared import shared_rows

EXACT_LIMIT = 4000  # largest min(N, F) for which a Dask Φ is gathered for the Gram route
GRAM_MEMORY_LIMIT = 2 * 2**30  # bytes of the float64 Gram matrix 'auto' accepts
_GRAM_SLICE = 2048  # features per float32 syrk before the float64 sum

# Relative cost per flop of each kind of work, measured on one AVX2 core (OpenBLAS, PCK Γ of
# 1000 x 13920 in float32, k = 8): syrk 61 GFLOP/s (1), the randomized passes (thin GEMMs
# with l = 28 columns, QR, centring) 28 GFLOP/s (2.2), the partial eigh 18 GFLOP/s of its
# 4/3 m³ tridiagonal reduction (3.4).
_COST_THIN_GEMM = 2.2
_COST_TRIDIAG = 3.4


@dataclass(frozen=True)
class FeatureMapEmbedding:
    """Result of a feature-map spectral embedding.

    Attributes
    ----------
    embedding : ndarray (N, k)
        KPCA: ``U S`` (= E Λ^{1/2}); normalised: the eigenvectors ``U`` of D^{-1/2} K D^{-1/2}.
    eigenvalues : ndarray (k,)
        Of the centred K (KPCA) or of D^{-1/2} K D^{-1/2} (normalised), descending.
    eigenvectors : ndarray (N, k)
    degrees : ndarray (N,) or None
        ``K 1`` (normalised embedding only).
    solver : str
        'exact' or 'randomized', the solver used.
    """

    embedding: np.ndarray
    eigenvalues: np.ndarray
    eigenvectors: np.ndarray
    degrees: np.ndarray | None
    solver: str


def embedding_cost(
    n: int,
    f: int,
    k: int,
    *,
    n_power_iter: int = 4,
    n_oversamples: int = 20,
    sample_rows: int | None = None,
) -> dict[str, dict[str, float]]:
    """Estimated work (flop-equivalents) and memory (bytes) of each solver for an N × F map.

    Parameters
    ----------
    n, f : int
        Shape of Φ.
    k : int
        Number of eigenpairs.
    n_power_iter, n_oversamples : int
        The randomized solver's settings.
    sample_rows : int, optional
        m, the rows of a subsample held in memory: adds the ``'subsample'`` route
        (:mod:`dkernel.spectral.subsample`).

    Returns
    -------
    dict
        ``{'exact': {'work': ..., 'memory': ...}, 'randomized': {...}}`` (and
        ``'subsample'``). The memory is what the solver allocates beyond Φ (and the sample).

    Notes
    -----
    Exact: ``m² M`` for the Gram matrix (m = min(N, F), M = max(N, F); syrk) and
    ``4/3 m³`` for the tridiagonal reduction, weighted ``_COST_TRIDIAG``; memory ``8 m²``
    (float64), plus ``8 N F`` when F < N (the product ``Φ V``). Randomized:
    ``4 N F l`` per power iteration (``A Q`` and ``Aᵀ Z``) and ``2 N F l`` for the last pass,
    weighted ``_COST_THIN_GEMM``; memory ``8 (N + F) l`` (float64). With l = k + 20 = 28, four
    power iterations and F = 13 920 (PCK, Q = G = 30) the Gram route is the cheaper up to
    N ≈ 1300. Subsample: the randomized solver's work on the m sampled rows, then one pass
    ``2 N F l + N F`` (``Φ V`` and the column sum); memory ``8 (N + F) l``.
    """
    m, M = min(n, f), max(n, f)
    l = min(k + n_oversamples, m)
    exact = {
        "work": float(m) * m * M + _COST_TRIDIAG * 4.0 / 3.0 * float(m) ** 3,
        "memory": 8.0 * m * m,
    }
    rand_work = (4.0 * (n_power_iter + 1) + 2.0) * float(n) * f * l * _COST_THIN_GEMM
    randomized = {"work": rand_work, "memory": 8.0 * (n + f) * l}
    cost = {"exact": exact, "randomized": randomized}
    if sample_rows is not None:
        m = min(int(sample_rows), n)
        ls = min(k + n_oversamples, m, f)
        work = (4.0 * (n_power_iter + 1) + 2.0) * float(m) * f * ls + 2.0 * float(n) * f * ls
        work = (work + float(n) * f) * _COST_THIN_GEMM
        cost["subsample"] = {"work": work, "memory": 8.0 * (n + f) * ls}
    return cost


def choose_solver(
    shape: tuple[int, int],
    k: int,
    *,
    is_dask: bool = False,
    n_power_iter: int = 4,
    n_oversamples: int = 20,
    sample_rows: int | None = None,
) -> tuple[str, str]:
    """The solver ``'auto'`` picks for a feature map of ``shape``, and why (a log line).

    The Gram route when it is the cheaper by :func:`embedding_cost` and its matrix fits
    ``GRAM_MEMORY_LIMIT``; randomized otherwise, and always for a Dask Φ (it is streamed,
    never gathered, unless ``solver='exact'`` is asked for). For a Dask Φ whose caller holds
    ``sample_rows`` rows of it in memory, ``'subsample'`` (one pass over Φ for KPCA, two for
    the normalised embedding, instead of ``n_power_iter + 3`` or ``+ 4``; every pass over a
    lazy Φ recomputes it) when it is the cheaper, i.e. unless the sample is nearly all of Φ.
    """
    n, f = int(shape[0]), int(shape[1])
    cost = embedding_cost(
        n,
        f,
        k,
        n_power_iter=n_power_iter,
        n_oversamples=n_oversamples,
        sample_rows=sample_rows if is_dask else None,
    )
    ex, rnd = cost["exact"], cost["randomized"]
    fits = ex["memory"] <= GRAM_MEMORY_LIMIT and not is_dask
    solver = "exact" if fits and ex["work"] <= rnd["work"] else "randomized"
    sub = cost.get("subsample")
    if sub is not None and sub["work"] < rnd["work"]:
        solver = "subsample"
    why = (
        f"{solver} solver for {'a Dask ' if is_dask else ''}Φ {n} x {f}, k = {k}: Gram route "
        f"{ex['work']:.2e} flop-eq., "
        f"{ex['memory'] / 2**20:.0f} MiB; randomized ({n_power_iter + 2} passes) "
        f"{rnd['work']:.2e} flop-eq., {rnd['memory'] / 2**20:.0f} MiB"
    )
    if sub is not None:
        why += (
            f"; subsample of {min(int(sample_rows), n)} rows + 1 pass {sub['work']:.2e} "
            f"flop-eq., {sub['memory'] / 2**20:.0f} MiB"
        )
    return solver, why


def _pick_solver(Phi: Any, solver: str, n_components: int, **kwargs: int) -> str:
    check_options(solver, "solver", "feature_map_embedding", ("auto", "exact", "randomized"))
    if solver == "auto":
        return choose_solver(Phi.shape, n_components, is_dask=is_dask_array(Phi), **kwargs)[0]
    if solver == "exact" and is_dask_array(Phi) and min(Phi.shape) > EXACT_LIMIT:
        raise InvalidInputError(
            f"solver='exact' on a Dask feature map of shape {Phi.shape} would need a "
            f"{min(Phi.shape)}² Gram matrix; use solver='randomized'."
        )
    return solver


def _gram(A: np.ndarray, transpose: bool) -> np.ndarray:
    """Lower triangle of ``A Aᵀ`` (``Aᵀ A`` when ``transpose``) in float64.

    BLAS ``syrk`` in A's dtype on slices of ``_GRAM_SLICE`` columns of the inner dimension,
    summed in float64 in slice order: float32 speed, with float32 rounding over 2048 terms
    only. The slices run on one BLAS thread each, as many at a time as there are cores.
    """
    syrk = linalg.get_blas_funcs("syrk", (A,))
    inner = A.shape[0] if transpose else A.shape[1]
    m = A.shape[1] if transpose else A.shape[0]

    def one(sl: slice) -> np.ndarray:
        part = A[sl] if transpose else A[:, sl]
        # syrk(a, trans=0) is a aᵀ and trans=1 aᵀ a: pick the one that needs no copy of part
        if transpose:  # part (s, m): partᵀ part
            a, trans = (part, 1) if part.flags.f_contiguous else (part.T, 0)
        else:  # part (m, s): part partᵀ
            a, trans = (part, 0) if part.flags.f_contiguous else (part.T, 1)
        return syrk(1.0, a, trans=trans, lower=1)

    slices = [slice(a, a + _GRAM_SLICE) for a in range(0, inner, _GRAM_SLICE)]
    wave = os.cpu_count() or 1  # slices in flight: memory ≤ wave · m² in A's dtype
    out = np.zeros((m, m))
    for start in range(0, len(slices), wave):
        for part in map_on_cores(one, slices[start : start + wave]):
            out += part
    return out


def _exact(
    Phi: np.ndarray, k: int, mean: np.ndarray | None, w: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray]:
    """Leading left singular pairs of ``diag(w) (Φ - 1 μᵀ)`` by the Gram route."""
    n, f = Phi.shape
    if Phi.dtype not in (np.float32, np.float64):
        Phi = Phi.astype(np.float64)
    if n <= f:
        # only the lower triangle is filled, and only it is read by eigh: the centring and
        # scaling below are elementwise, so the upper one is never made symmetric
        K = _gram(Phi, transpose=False)
        if mean is not None:  # H K H = K - r 1ᵀ - 1 rᵀ + m 11ᵀ, r the row means of K
            r = (K.sum(axis=1) + K.sum(axis=0) - np.diagonal(K)) / n
            K -= r[:, None]
            K -= r[None, :]
            K += r.mean()
        if w is not None:
            K *= w[:, None]
            K *= w[None, :]
        with one_blas_thread():  # the tridiagonal reduction hardly scales with threads
            vals, U = dense_eigh(K, k, clip=False)
    else:
        # F < N: the F × F matrix Aᵀ A, then U = A V / s (one more pass over Φ)
        A = Phi.astype(np.float64)
        if mean is not None:
            A = A - mean[None, :]
        if w is not None:
            A = A * w[:, None]
        C = _gram(A, transpose=True)
        with one_blas_thread():
            vals, V = dense_eigh(C, k, clip=False)
        s = np.sqrt(np.maximum(vals, 0))
        U = (A @ V) / np.where(s > 0, s, 1.0)[None, :]
    vals = clip_negative(vals, float(np.abs(vals).max(initial=0.0)))
    return fix_signs(U), vals


def _block_times(block: np.ndarray, Q: np.ndarray) -> np.ndarray:
    """``block @ Q`` in the block's dtype, returned as float64."""
    return (block @ Q).astype(np.float64)


def _block_transpose_times(block: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """``blockᵀ @ Y`` in the block's dtype, returned as float64."""
    return (block.T @ Y.astype(block.dtype)).astype(np.float64)


# Rows per block of an in-memory Φ in a randomized pass (one BLAS thread each, see
# dkernel.linalg.threads: the products have only l = k + n_oversamples columns).
_PASS_ROWS = 2048


def row_blocks(n: int) -> list[slice]:
    """Slices of ``_PASS_ROWS`` rows covering ``range(n)``: the row blocks of a pass over Φ."""
    return [slice(a, a + _PASS_ROWS) for a in range(0, n, _PASS_ROWS)]


def _pass_block(
    block: np.ndarray,
    Qc: np.ndarray,
    mQ: np.ndarray | None,
    w: np.ndarray | None,
    back: bool,
) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    """``Z = A Q`` of one row block and, when ``back``, its share of ``Φᵀ Y`` and ``1ᵀ Y``."""
    Z = (block @ Qc).astype(np.float64)
    if mQ is not None:
        Z -= mQ[None, :]
    if w is not None:
        Z *= w[:, None]
    if not back:
        return Z, None, None
    Y = Z if w is None else Z * w[:, None]
    return Z, (block.T @ Y.astype(Qc.dtype)).astype(np.float64), Y.sum(axis=0)


def _pass(
    Phi: Any, Q: np.ndarray, mean: np.ndarray | None, w: np.ndarray | None, *, back: bool
) -> tuple[np.ndarray, np.ndarray | None]:
    """One pass over Φ: ``Z = A Q`` (N × l) and, when ``back``, ``Aᵀ Z`` (F × l), float64."""
    Qc = Q.astype(Phi.dtype if Phi.dtype in (np.float32, np.float64) else np.float64)
    if is_dask_array(Phi):
        Z, back_product, column_sums = _pass_dask(Phi, Q, Qc, mean, w, back)
        if back_product is None or column_sums is None:
            return Z, None
        W, c = back_product, column_sums
    else:
        mQ = None if mean is None else mean @ Q
        parts = map_on_cores(
            lambda sl: _pass_block(Phi[sl], Qc, mQ, None if w is None else w[sl], back),
            row_blocks(Phi.shape[0]),
        )
        Z = np.concatenate([z for z, _, _ in parts])
        if not back:
            return Z, None
        W = parts[0][1]
        c = parts[0][2]
        for _, Wb, cb in parts[1:]:  # in row order: the sum does not depend on the threads
            W += Wb
            c += cb
    if mean is not None:
        W -= np.outer(mean, c)
    return Z, W


def _pass_dask(
    Phi: Any,
    Q: np.ndarray,
    Qc: np.ndarray,
    mean: np.ndarray | None,
    w: np.ndarray | None,
    back: bool,
) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    """:func:`_pass` over a Dask Φ: ``(Z, Aᵀ Z, column sums)``, the last two None unless
    ``back``."""
    import dask
    import dask.array as da

    # the row weights on the workers, not inside every pass's graph
    weights = contextlib.nullcontext() if w is None else shared_rows(w[:, None], Phi.chunks[0])
    with weights as wd:
        P = Phi.map_blocks(
            _block_times, Qc, dtype=np.float64, chunks=(Phi.chunks[0], (Q.shape[1],))
        )
        if mean is not None:
            P = P - (mean @ Q)[None, :]
        if wd is not None:
            P = P * wd
        if not back:
            return np.asarray(P.compute()), None, None
        Y = P if wd is None else P * wd
        f, l = Phi.shape[1], Q.shape[1]
        Y = Y.rechunk({1: -1})
        parts = [
            da.from_delayed(
                dask.delayed(_block_transpose_times, pure=True)(b, y),
                shape=(f, l),
                dtype=np.float64,
            )
            for b, y in zip(
                Phi.to_delayed(optimize_graph=False).ravel(),
                Y.to_delayed(optimize_graph=False).ravel(),
                strict=True,
            )
        ]
        Z, W, c = dask.compute(P, da.stack(parts).sum(axis=0), Y.sum(axis=0))
    return np.asarray(Z), np.asarray(W), np.asarray(c)


def right_basis(
    Phi: Any,
    l: int,
    mean: np.ndarray | None,
    w: np.ndarray | None,
    *,
    n_power_iter: int,
    random_state: int | None,
) -> np.ndarray:
    """Orthonormal F × l basis of ``(Aᵀ A)^(n_power_iter + 1) Ω`` for ``A = diag(w) (Φ - 1 μᵀ)``.

    The right-hand range finder of the randomized solver: ``n_power_iter + 1`` passes over Φ
    from a Gaussian ``Ω`` (seeded by ``random_state``), a float64 QR after each. Its span
    approximates A's leading right singular subspace.
    """
    rng = np.random.default_rng(random_state)
    Q = np.linalg.qr(rng.standard_normal((Phi.shape[1], l)))[0]
    for _ in range(n_power_iter + 1):
        _, W = _pass(Phi, Q, mean, w, back=True)
        Q = np.linalg.qr(W)[0]
    return Q


def _randomized(
    Phi: Any,
    k: int,
    mean: np.ndarray | None,
    w: np.ndarray | None,
    *,
    n_power_iter: int,
    n_oversamples: int,
    random_state: int | None,
) -> tuple[np.ndarray, np.ndarray]:
    """Leading left singular pairs of ``diag(w) (Φ - 1 μᵀ)``: subspace iteration on the F side.

    Maintenance note: after ``t`` passes the basis spans ``(Aᵀ A)^t Ω``, so ``n_power_iter + 1``
    passes give the right subspace of Halko's two-sided scheme with ``n_power_iter`` power
    iterations, and ``A Q`` from one more pass its left one; the thin SVD of ``A Q`` is then
    the Rayleigh–Ritz step (``A ≈ A Q Qᵀ``).
    """
    n, f = Phi.shape
    Q = right_basis(
        Phi,
        min(k + n_oversamples, n, f),
        mean,
        w,
        n_power_iter=n_power_iter,
        random_state=random_state,
    )
    Z, _ = _pass(Phi, Q, mean, w, back=False)
    return ritz_pairs(Z, k)


def ritz_pairs(Z: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(U (N, k), s² (k,)) of the thin SVD of a projected ``Z = A Q``, signs by ``fix_signs``."""
    U, s, _ = np.linalg.svd(Z, full_matrices=False)
    return fix_signs(U[:, :k]), s[:k] ** 2


def check_positive_degrees(d: np.ndarray, what: str = "") -> None:
    """Raise InvalidInputError when a degree of ``K = Φ Φᵀ`` (``what``: which ones) is not > 0."""
    if not np.all(d > 0):
        bad = np.flatnonzero(~(d > 0))
        which = f" {what}" if what else ""
        raise InvalidInputError(
            f"{bad.size} degrees of K = Φ Φᵀ{which} are not positive (first rows "
            f"{bad[:5].tolist()}); the normalised embedding needs a kernel with positive row sums."
        )


def _check_components(Phi: Any, n_components: int, who: str) -> None:
    check_scalar(n_components, "n_components", who, kind=int, low=1)
    if n_components > min(Phi.shape):
        raise InvalidInputError(
            f"The 'n_components' parameter of {who} must be <= min(N, F) = "
            f"{min(Phi.shape)}. Got {n_components} instead."
        )


def as_row_blocks(Phi: Any) -> Any:
    """Φ in the form the passes read by row blocks: ndarray, CSR, or Dask with one column chunk."""
    if not (is_dask_array(Phi) or issparse(Phi)):
        return np.asarray(Phi)
    if issparse(Phi):
        return Phi.tocsr()
    return Phi if len(Phi.chunks[1]) == 1 else Phi.rechunk({1: Phi.shape[1]})


def _top_left_singular(
    Phi: Any,
    k: int,
    solver: str,
    *,
    mean: np.ndarray | None = None,
    w: np.ndarray | None = None,
    n_power_iter: int,
    n_oversamples: int,
    random_state: int | None,
) -> tuple[np.ndarray, np.ndarray]:
    """(U (N, k), s² (k,)) of the leading singular triplets of ``diag(w) (Φ - 1 μᵀ)``."""
    if solver == "exact":
        A = Phi.compute() if is_dask_array(Phi) else Phi
        A = A.toarray() if issparse(A) else np.asarray(A)
        return _exact(A, k, mean, w)
    return _randomized(
        as_row_blocks(Phi),
        k,
        mean,
        w,
        n_power_iter=n_power_iter,
        n_oversamples=n_oversamples,
        random_state=random_state,
    )


def feature_map_kpca(
    Phi: Any,
    n_components: int,
    *,
    centered: bool = True,
    solver: str = "auto",
    n_power_iter: int = 4,
    n_oversamples: int = 20,
    random_state: int | None = None,
) -> FeatureMapEmbedding:
    """KPCA embedding ``E Λ^{1/2}`` of ``K = Φ Φᵀ`` (centred by default) without forming K.

    Parameters
    ----------
    Phi : ndarray or dask.array.Array (N, F)
        The feature map (for PCK: ``ProbabilisticClusterKernel.transform(X)``); a SciPy
        sparse matrix is accepted too (``transform(X, sparse_threshold=...)``): the
        randomized passes then cost O(non-zeros · l).
    n_components : int
        k, the embedding dimension.
    centered : bool
        Centre in feature space (``H K H``); False gives uncentred KPCA.
    solver : {'auto', 'exact', 'randomized'}
    n_power_iter, n_oversamples : int
        Randomized SVD accuracy controls.
    random_state : int, optional
        Seed of the randomized solver.

    Notes
    -----
    Exact: O(N F min(N, F)) + O(min(N, F)³); randomized: O(N F (k + p)) per pass over Φ,
    ``n_power_iter + 2`` passes (one more for the column mean of a Dask Φ); memory
    O((N + F)(k + p)) beyond Φ's own chunks. Φ is neither copied nor centred in memory: the
    centring is applied to the products.
    """
    _check_components(Phi, n_components, "feature_map_kpca")
    chosen = _pick_solver(
        Phi, solver, n_components, n_power_iter=n_power_iter, n_oversamples=n_oversamples
    )
    mean = None
    if centered:
        mean = Phi.mean(axis=0, dtype=np.float64)
        mean = np.asarray(mean.compute() if is_dask_array(mean) else mean).ravel()
    U, lam = _top_left_singular(
        Phi,
        n_components,
        chosen,
        mean=mean,
        n_power_iter=n_power_iter,
        n_oversamples=n_oversamples,
        random_state=random_state,
    )
    return FeatureMapEmbedding(U * np.sqrt(lam)[None, :], lam, U, None, chosen)


def feature_map_normalized(
    Phi: Any,
    n_components: int,
    *,
    solver: str = "auto",
    n_power_iter: int = 4,
    n_oversamples: int = 20,
    random_state: int | None = None,
) -> FeatureMapEmbedding:
    """Leading eigenpairs of ``D^{-1/2} K D^{-1/2}`` for ``K = Φ Φᵀ``, from the SVD of D^{-1/2}Φ.

    Eigenvalues near 1 indicate the number of clusters; cluster the row-normalised
    eigenvectors (Ng–Jordan–Weiss).

    Raises
    ------
    InvalidInputError
        When a degree ``d_i = Σ_j K_ij`` is not positive (the map must give a non-negative K
        row sum, e.g. posteriors).

    Notes
    -----
    Degrees in O(N F) (two passes over Φ); then as :func:`feature_map_kpca`.
    """
    _check_components(Phi, n_components, "feature_map_normalized")
    chosen = _pick_solver(
        Phi, solver, n_components, n_power_iter=n_power_iter, n_oversamples=n_oversamples
    )
    if is_dask_array(Phi):
        s = Phi.sum(axis=0, dtype=np.float64).compute()
        d = np.asarray((Phi.astype(np.float64) @ s).compute())
    else:
        Phi = Phi.tocsr() if issparse(Phi) else np.asarray(Phi)
        s = np.asarray(Phi.sum(axis=0, dtype=np.float64)).ravel()
        # in row blocks: a float64 copy of a float32 Φ would double its memory
        rows = row_blocks(Phi.shape[0])
        d = np.concatenate(
            [np.zeros(0)] + [np.asarray(Phi[sl].astype(np.float64) @ s).ravel() for sl in rows]
        )
    check_positive_degrees(d)
    U, lam = _top_left_singular(
        Phi,
        n_components,
        chosen,
        w=1.0 / np.sqrt(d),
        n_power_iter=n_power_iter,
        n_oversamples=n_oversamples,
        random_state=random_state,
    )
    return FeatureMapEmbedding(U, lam, U, d, chosen)
