"""Spectral embeddings of a kernel ``K = Φ Φᵀ`` given by an explicit feature map Φ (N × F).

K is never formed. Centred KPCA: the eigenpairs of ``H K H`` are ``(s², u)`` for the singular
triplets ``(u, s, v)`` of the column-centred ``Φ - 1 mean(Φ)``; the embedding is ``U S``
(Paper I Eq. 5). Normalised embedding (Ng–Jordan–Weiss): with degrees ``d = Φ (Φᵀ 1)``,
``D^{-1/2} K D^{-1/2} = B Bᵀ`` with ``B = D^{-1/2} Φ``, so its eigenvectors are the left
singular vectors of the tall-skinny B (eigenvalues s², the largest is 1).

Solvers:

* ``'exact'`` — NumPy input: eigen-decomposition of the smaller Gram matrix (``Φ Φᵀ`` when
  N ≤ F, else ``Φᵀ Φ``), O(N F min(N, F)) time, O(min(N, F)²) memory;
* ``'randomized'`` — Halko et al. randomized SVD: scikit-learn's ``randomized_svd`` for NumPy,
  ``dask.array.linalg.svd_compressed`` for Dask input, where Φ is streamed (recomputed chunk by
  chunk from its graph, e.g. from stored ensemble parameters) ``2 (n_power_iter + 1)`` times;
  O(N F (k + p)) per pass, O(N (k + p)) memory;
* ``'auto'`` — exact for NumPy input with min(N, F) ≤ 4000, randomized otherwise.

Written for any explicit feature map (PCK posteriors, random Fourier features, Nyström maps).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from dkernel._validation import check_options, check_scalar
from dkernel.errors import InvalidInputError
from dkernel.linalg.eigen import clip_negative, fix_signs

EXACT_LIMIT = 4000


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


def _is_dask(X: Any) -> bool:
    return hasattr(X, "dask") and hasattr(X, "chunks")


def _pick_solver(Phi: Any, solver: str, n_components: int) -> str:
    check_options(solver, "solver", "feature_map_embedding", ("auto", "exact", "randomized"))
    if solver == "auto":
        small = min(Phi.shape) <= EXACT_LIMIT
        return "exact" if (small and not _is_dask(Phi)) else "randomized"
    if solver == "exact" and _is_dask(Phi) and min(Phi.shape) > EXACT_LIMIT:
        raise InvalidInputError(
            f"solver='exact' on a Dask feature map of shape {Phi.shape} would need a "
            f"{min(Phi.shape)}² Gram matrix; use solver='randomized'."
        )
    return solver


def _top_left_singular(
    Phi: Any,
    k: int,
    solver: str,
    *,
    n_power_iter: int,
    n_oversamples: int,
    random_state: int | None,
) -> tuple[np.ndarray, np.ndarray]:
    """(U (N, k), s² (k,)) of the leading singular triplets of Φ, descending, signs fixed."""
    if solver == "exact":
        A = np.asarray(Phi.compute() if _is_dask(Phi) else Phi, dtype=np.float64)
        n, f = A.shape
        if n <= f:
            G = A @ A.T
            vals, U = np.linalg.eigh(G)
            order = np.argsort(vals)[::-1][:k]
            vals, U = vals[order], U[:, order]
        else:
            C = A.T @ A
            vals, V = np.linalg.eigh(C)
            order = np.argsort(vals)[::-1][:k]
            vals, V = vals[order], V[:, order]
            s = np.sqrt(np.maximum(vals, 0))
            U = (A @ V) / np.where(s > 0, s, 1.0)[None, :]
        vals = clip_negative(vals, float(np.abs(vals).max(initial=0.0)))
        return fix_signs(U), vals
    if _is_dask(Phi):
        import dask
        import dask.array as da

        Phi = Phi.astype(np.float64)
        if len(Phi.chunks[1]) != 1:
            Phi = Phi.rechunk({1: Phi.shape[1]})
        U, s, _ = da.linalg.svd_compressed(
            Phi,
            k,
            n_power_iter=n_power_iter,
            n_oversamples=n_oversamples,
            seed=random_state,
            compute=False,
        )
        U, s = dask.compute(U, s)
    else:
        from sklearn.utils.extmath import randomized_svd

        U, s, _ = randomized_svd(
            np.asarray(Phi, dtype=np.float64),
            k,
            n_oversamples=n_oversamples,
            n_iter=n_power_iter,
            random_state=random_state,
        )
    order = np.argsort(s)[::-1]
    return fix_signs(np.asarray(U)[:, order]), np.asarray(s)[order] ** 2


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
        The feature map (for PCK: ``ProbabilisticClusterKernel.transform(X)``).
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
    Exact: O(N F min(N, F)); randomized: O(N F (k + p)) per pass over Φ,
    ``2 (n_power_iter + 1)`` passes; memory O(N (k + p)) beyond Φ's own chunks.
    """
    check_scalar(n_components, "n_components", "feature_map_kpca", kind=int, low=1)
    if n_components > min(Phi.shape):
        raise InvalidInputError(
            f"The 'n_components' parameter of feature_map_kpca must be <= min(N, F) = "
            f"{min(Phi.shape)}. Got {n_components} instead."
        )
    chosen = _pick_solver(Phi, solver, n_components)
    if centered:
        mean = Phi.mean(axis=0, dtype=np.float64)
        Phi = Phi.astype(np.float64) - mean[None, :]
    U, lam = _top_left_singular(
        Phi,
        n_components,
        chosen,
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
    check_scalar(n_components, "n_components", "feature_map_normalized", kind=int, low=1)
    if n_components > min(Phi.shape):
        raise InvalidInputError(
            f"The 'n_components' parameter of feature_map_normalized must be <= min(N, F) = "
            f"{min(Phi.shape)}. Got {n_components} instead."
        )
    chosen = _pick_solver(Phi, solver, n_components)
    if _is_dask(Phi):
        s = Phi.sum(axis=0, dtype=np.float64).compute()
        d = np.asarray((Phi.astype(np.float64) @ s).compute())
    else:
        Phi = np.asarray(Phi)
        s = Phi.sum(axis=0, dtype=np.float64)
        d = Phi.astype(np.float64, copy=False) @ s
    if not np.all(d > 0):
        bad = np.flatnonzero(~(d > 0))
        raise InvalidInputError(
            f"{bad.size} degrees of K = Φ Φᵀ are not positive (first rows {bad[:5].tolist()}); "
            "the normalised embedding needs a kernel with positive row sums."
        )
    B = Phi.astype(np.float64) / np.sqrt(d)[:, None]
    U, lam = _top_left_singular(
        B,
        n_components,
        chosen,
        n_power_iter=n_power_iter,
        n_oversamples=n_oversamples,
        random_state=random_state,
    )
    return FeatureMapEmbedding(U, lam, U, d, chosen)


def normalize_rows(U: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (NJW step before k-means); zero rows stay zero."""
    norms = np.linalg.norm(U, axis=1, keepdims=True)
    return U / np.where(norms > 0, norms, 1.0)
