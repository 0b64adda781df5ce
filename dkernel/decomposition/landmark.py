"""Aggregate Markov model of the landmark bipartite graph: KDC's large-N path.

Numeric layer: NumPy/SciPy on in-memory arrays, no Dask, no I/O.

The exact path factors the row-normalised N × N self-tuning k-NN kernel. Its graph has a fixed
number of neighbours per point, so as N grows each step of its random walk covers a shrinking
fraction of a cluster: a cut through the middle of a moon or a ring costs hardly more than the
true gap, the leading eigenvalues crowd towards 1 and the factorisation settles on splits of
the shapes (two moons: ARI 1.000 at 2·10³, 0.003 at 2·10⁴).

Here the N points are joined to their K nearest of p k-means landmarks
(:mod:`dkernel.graphs.landmark`, weights ``B``, N × p, K non-zeros a row) and the aggregate
Markov model is fitted to the walk on the landmark side, landmark → point → landmark:

    T = D_Y⁻¹ W_Y,   W_Y = Bᵀ D_X⁻¹ B,   D_Y = diag(Bᵀ 1)

(:func:`dkernel.graphs.bipartite.accumulate_landmark_sums` gives ``W_Y`` and ``D_Y`` in one
pass). ``T`` is a p × p row-stochastic matrix whose resolution is set by p, not N, so the model
sees the same picture at 2·10⁴ and at 10⁶ points. It is factored exactly as the exact path's
kernel (``dkernel.decomposition.nmf.fit_aggregate_markov``: ``T ~ (W H)ᵀ`` with
``W[j, c] = P(l_j | c)`` and ``H[c, j] = P(c | l_j)``), started from the transfer-cut
eigenvectors of ``W_Y`` (the same vectors the dense path's embedding would give: ``W_Y`` is the
un-normalised symmetric kernel of ``T``). A point's posterior and log-density go through its
links, by one formula in ``fit`` and out of sample:

    P(c | x) = Σ_j P(l_j | x) P(c | l_j),   P(l_j | x) = B_xj / Σ_j B_xj,
    log p(x) = log Σ_j B_xj m_j,            m_j = Σ_c P(l_j | c) P(c),

so ``predict(X_train)`` is ``labels_``. Memory O(N K) for one block of links, O(p²) for the
model; time O(N p d) for the links plus O(p² C) per factorisation step.
"""

from __future__ import annotations

import numpy as np
from scipy import sparse
from scipy.special import logsumexp
from threadpoolctl import threadpool_limits

from dkernel.decomposition.nmf import AggregateMarkovFit, fit_aggregate_markov
from dkernel.errors import InvalidInputError
from dkernel.graphs.landmark import LandmarkGraph
from dkernel.linalg import dense_eigh
from dkernel.linalg.kmeans import normalize_rows


def landmark_embedding(
    W: np.ndarray, d: np.ndarray, n_components: int, *, return_eigenvalues: bool = False
) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """Leading eigenvectors of ``D^{-1/2} W D^{-1/2}`` (``d > 0``), rows scaled to unit norm.

    What :func:`~dkernel.decomposition.nmf.spectral_embedding` gives for the dense kernel
    ``W`` (and, after the row scaling, the transfer-cut vectors of ``W v = μ diag(d) v``).
    Only the leading ``n_components`` of the p × p problem are computed, on one BLAS thread:
    on a loaded 2-core machine the threaded full ``eigh`` of p = 1000 took 0.8-3.4 s, this
    0.14 s. With ``return_eigenvalues``, ``(eigenvalues, embedding)``: the eigenvalues
    (descending) are the spectrum of ``n_clusters='auto'``.
    """
    r = 1.0 / np.sqrt(d)
    S = r[:, None] * W * r[None, :]
    with threadpool_limits(limits=1, user_api="blas"):
        vals, V = dense_eigh(0.5 * (S + S.T), min(int(n_components), W.shape[0]), clip=False)
    if return_eigenvalues:
        return vals, normalize_rows(V)
    return normalize_rows(V)


def landmark_spectrum(W: np.ndarray, d: np.ndarray, n_values: int) -> np.ndarray:
    """Leading ``n_values`` eigenvalues (descending) of the landmark walk's normalised affinity
    ``D_Y^{-1/2} W_Y D_Y^{-1/2}`` over the linked landmarks (``d > 0``)."""
    active = np.flatnonzero(d > 0)
    n_values = min(int(n_values), active.size)
    vals, _ = landmark_embedding(
        W[np.ix_(active, active)], d[active], n_values, return_eigenvalues=True
    )
    return vals


def fit_landmark_markov(
    W: np.ndarray,
    d: np.ndarray,
    n_components: int,
    *,
    loss: str,
    n_init: int,
    max_iter: int,
    tol: float,
    seed: int | None,
) -> AggregateMarkovFit:
    """Factor the landmark walk ``T = D_Y⁻¹ W_Y`` (sparse, p × p) as an aggregate Markov model.

    Parameters
    ----------
    W : ndarray (p, p)
        ``W_Y = Bᵀ D_X⁻¹ B``.
    d : ndarray (p,)
        ``D_Y = Bᵀ 1``; landmarks no point links to (``d = 0``) are left out of the
        factorisation: ``P(l_j | c) = 0`` and ``P(c | l_j) = 1 / C`` for them.
    n_components : int
        Number of clusters C (at most the number of linked landmarks).
    loss, n_init, max_iter, tol, seed
        As :func:`~dkernel.decomposition.nmf.fit_aggregate_markov`.

    Returns
    -------
    AggregateMarkovFit
        ``W`` (p, C) and ``H`` (C, p) over all p landmarks.
    """
    p = W.shape[0]
    C = int(n_components)
    active = np.flatnonzero(d > 0)
    if C > active.size:
        raise InvalidInputError(
            f"n_clusters ({C}) must be <= the number of landmarks the points link to "
            f"({active.size} of {p}); use more landmarks or fewer clusters."
        )
    Wa, da_ = W[np.ix_(active, active)], d[active]
    T = sparse.csr_matrix(Wa / da_[:, None])  # rows sum to 1; most entries are exact zeros
    n_restarts = max(1, int(n_init)) if C > 1 else 1
    want = min(C * (n_restarts + 1), active.size - 1)
    spectrum, embedding = (
        landmark_embedding(Wa, da_, max(want, 1), return_eigenvalues=True)
        if C > 1
        else (None, None)
    )
    # p x p problem: BLAS and OpenMP threads (scikit-learn's k-means) only add contention
    with threadpool_limits(limits=1):
        fit = fit_aggregate_markov(
            T,
            np.log(da_),
            C,
            loss=loss,
            n_init=n_init,
            max_iter=max_iter,
            tol=tol,
            seed=seed,
            embedding=embedding,
        )
    fit.spectrum = spectrum
    if active.size == p:
        return fit
    W_full = np.zeros((p, C))
    W_full[active] = fit.W
    H_full = np.full((C, p), 1.0 / C)
    H_full[:, active] = fit.H
    return AggregateMarkovFit(
        W_full, H_full, fit.objective, fit.n_iter, fit.objectives, spectrum=spectrum
    )


def landmark_point_weights(W: np.ndarray, priors: np.ndarray) -> np.ndarray:
    """``log m_j = log Σ_c P(l_j | c) P(c)`` (``-inf`` for unlinked landmarks)."""
    with np.errstate(divide="ignore"):
        return np.log(np.maximum(W @ priors, 0.0))


def landmark_rows(
    X: np.ndarray,
    graph: LandmarkGraph,
    H: np.ndarray,
    log_m: np.ndarray | None = None,
    *,
    what: str = "posteriors",
) -> np.ndarray:
    """Posteriors ``P(c | x)`` (n, C) or log-densities ``log p(x)`` (n,) of rows of ``X``.

    Every row depends on its own coordinates only (never on its block), so the training
    posteriors of ``fit`` and ``predict_proba`` of the same rows agree.

    Parameters
    ----------
    X : ndarray (n, d)
    graph : LandmarkGraph
    H : ndarray (C, p)
        ``P(c | l_j)``.
    log_m : ndarray (p,), optional
        :func:`landmark_point_weights` (``what='loglik'`` only).
    what : {'posteriors', 'loglik'}
    """
    X = np.asarray(X, dtype=np.float64)
    if X.shape[0] == 0:
        return np.empty((0,) if what == "loglik" else (0, H.shape[0]))
    indices, logw = graph.log_links(X)
    if what == "loglik":
        return logsumexp(logw + log_m[indices], axis=1)
    share = np.exp(logw - logw.max(axis=1, keepdims=True))
    share /= share.sum(axis=1, keepdims=True)
    return np.einsum("nk,nkc->nc", share, H.T[indices])
