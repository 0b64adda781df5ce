"""Model selection for the aggregate Markov model by held-out likelihood (Szymkowiak-Have et al.
2006, Eq. 11-14 and Fig. 2, 5, 8 [SzymkowiakHave2006]).

The generalization error of a model is the negative mean out-of-sample log-likelihood
(Eq. 11-14) on held-out points. :func:`select_model` evaluates it over a grid of kernel
widths ``sigma`` (``h`` below), k-NN graph sizes ``K`` and numbers of clusters ``C`` on several repeats
(train/held-out splits) and returns the error surface (mean and standard error over repeats)
and the chosen model.

Choice rule (the paper's): ``(K, h)`` minimise the error averaged over all model orders ``C``
(Fig. 2 left: "averaged for all the model orders"); then, at that ``(K, h)``, ``C`` is the
*largest* model order whose error is within one standard error of the minimum (Fig. 2 right
and the appendix: with well separated clusters every ``C`` up to the true number gives the
same minimal error, so the largest minimiser is the natural model). The standard error is
that of the paired difference to the minimiser over repeats (:func:`choose`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np

from dkernel._random import derive_rng
from dkernel._validation import aligned, check_options, check_scalar
from dkernel.decomposition.estimator import KernelDecompositionClustering
from dkernel.decomposition.graph import selection_cell_tasks
from dkernel.decomposition.kernels import (
    density_log_kernel,
    fit_neighbors,
    knn_log_kernel,
    row_normalize_log,
)
from dkernel.decomposition.nmf import fit_aggregate_markov, spectral_embedding
from dkernel.decomposition.nmf_posteriors import log_likelihood
from dkernel.errors import InvalidInputError
from dkernel.kernels.aliases import resolve_alias
from dkernel.metrics import clustering_accuracy
from dkernel.runtime.progress import compute_parts

_OWNER = "select_model"
C_RULES = ("largest-within-se", "min")


@dataclass
class ModelSelectionResult:
    """Error surface and chosen model of :func:`select_model`.

    A results store keeps it as the ``/selection`` group
    (:func:`dkernel.storage.layout.selection_dataset`).

    Attributes
    ----------
    errors : ndarray (n_repeats, n_neighbors, n_sigmas, n_clusters)
        Generalization error (negative mean held-out log-likelihood) of every fit.
    accuracy : ndarray, same shape, or None
        Held-out clustering accuracy (Hungarian) when labels were given.
    confidence : ndarray, same shape
        Mean over held-out points of ``max_c P(c | z)`` (1 = crisp 0/1 posteriors).
    sigmas, n_neighbors, n_clusters : lists
        The grid (``None`` in ``n_neighbors`` is the dense kernel; ``sigmas`` were formerly
        ``bandwidths``).
    chosen : dict
        ``sigma``, ``n_neighbors``, ``n_clusters`` and their grid indices (``sigma_index``,
        ``neighbors_index``, ``clusters_index``).
    best_estimator : KernelDecompositionClustering or None
        The chosen model refitted on the first training set.
    """

    errors: np.ndarray
    confidence: np.ndarray
    accuracy: np.ndarray | None
    sigmas: list[float]
    n_neighbors: list[int | None]
    n_clusters: list[int]
    chosen: dict[str, Any]
    c_rule: str = "largest-within-se"
    best_estimator: KernelDecompositionClustering | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def n_repeats(self) -> int:
        return int(self.errors.shape[0])

    @property
    def mean(self) -> np.ndarray:
        """Mean error over repeats, shape (n_neighbors, n_sigmas, n_clusters)."""
        return self.errors.mean(axis=0)

    @property
    def sem(self) -> np.ndarray:
        """Standard error of the mean over repeats (0 with a single repeat)."""
        r = self.n_repeats
        return self.errors.std(axis=0, ddof=1) / np.sqrt(r) if r > 1 else np.zeros_like(self.mean)

    def error_vs_sigma(self) -> tuple[np.ndarray, np.ndarray]:
        """Error averaged over model orders C per repeat: mean and SE, (n_neighbors, n_sigmas)."""
        per = self.errors.mean(axis=3)
        r = self.n_repeats
        sem = per.std(axis=0, ddof=1) / np.sqrt(r) if r > 1 else np.zeros(per.shape[1:])
        return per.mean(axis=0), sem

    def error_vs_clusters(self) -> tuple[np.ndarray, np.ndarray]:
        """Mean and SE of the error over C at the chosen ``(K, h)``."""
        k, h = self.chosen["neighbors_index"], self.chosen["sigma_index"]
        return self.mean[k, h], self.sem[k, h]

    def paired_difference_vs_clusters(self) -> tuple[np.ndarray, np.ndarray]:
        """Mean and SE over repeats of ``error(C) - error(C_min)`` at the chosen ``(K, h)``."""
        k, h = self.chosen["neighbors_index"], self.chosen["sigma_index"]
        e = self.errors[:, k, h, :]
        d = e - e[:, [int(np.argmin(e.mean(axis=0)))]]
        r = self.n_repeats
        se = d.std(axis=0, ddof=1) / np.sqrt(r) if r > 1 else np.zeros(d.shape[1])
        return d.mean(axis=0), se


def choose(errors: np.ndarray, *, c_rule: str = "largest-within-se") -> tuple[int, int, int]:
    """Grid indices ``(k, h, c)`` chosen from an error array (repeat, K, h, C).

    ``(k, h)`` minimise the error averaged over C and repeats. With ``'largest-within-se'``
    C is the largest model order whose error is not significantly above the minimiser's:
    the mean over repeats of the *paired* difference to the minimiser (every model of a repeat
    is fitted to the same training set and scored on the same held-out set) is at most its
    standard error. ``'min'`` takes the minimiser.
    """
    check_options(c_rule, "c_rule", _OWNER, C_RULES)
    per = errors.mean(axis=3).mean(axis=0)
    k, h = np.unravel_index(int(np.argmin(per)), per.shape)
    e = errors[:, k, h, :]
    c_min = int(np.argmin(e.mean(axis=0)))
    if c_rule == "min":
        return int(k), int(h), c_min
    diff = e - e[:, [c_min]]
    r = errors.shape[0]
    se = diff.std(axis=0, ddof=1) / np.sqrt(r) if r > 1 else np.zeros(diff.shape[1])
    ok = np.flatnonzero(diff.mean(axis=0) <= se)
    return int(k), int(h), int(ok.max())


def _random_splits(X, y, n_repeats, validation_fraction, seed):
    X = np.asarray(X, dtype=np.float64)
    n = X.shape[0]
    n_val = int(round(validation_fraction * n))
    if not 1 <= n_val < n - 1:
        raise InvalidInputError(
            f"validation_fraction={validation_fraction} leaves {n_val} held-out and "
            f"{n - n_val} training points of {n}; both need at least 2."
        )
    for r in range(n_repeats):
        perm = derive_rng(seed, "select_model", "split", r).permutation(n)
        va, tr = perm[:n_val], perm[n_val:]
        yield (X[tr], X[va], None if y is None else np.asarray(y)[va])


def select_model(
    X: Any = None,
    y: Any = None,
    *,
    splits: Iterable[tuple] | None = None,
    sigmas: Sequence[float],
    n_clusters: Sequence[int],
    n_neighbors: Sequence[int | None] = (None,),
    n_repeats: int = 10,
    validation_fraction: float = 0.5,
    kernel: str = "rbf",
    loss: str = "kl-euclidean",
    n_init: int = 3,
    max_iter: int = 300,
    tol: float = 1e-6,
    c_rule: str = "largest-within-se",
    refit: bool = True,
    max_samples: int | None = None,
    random_state: int | None = 0,
    progress: bool = False,
) -> ModelSelectionResult:
    """Held-out likelihood model selection over ``sigma``, ``K`` and ``C`` ([SzymkowiakHave2006]).

    Parameters
    ----------
    X, y : array-like, optional
        Data (and optional labels, used only to report held-out accuracy) split at random
        ``n_repeats`` times into training and held-out parts.
    splits : iterable of tuples, optional
        Instead of ``X``: ``(X_train, X_val)`` or ``(X_train, X_val, y_val)`` per repeat (the
        paper's protocol: fresh training samples, one fixed validation set).
    sigmas : sequence of float
        Kernel widths (``sigma`` of :class:`KernelDecompositionClustering`; ignored by the
        cosine kernel, pass ``[1.0]``). Formerly ``bandwidths``.
    n_clusters : sequence of int
        Model orders ``C``.
    n_neighbors : sequence of int or None
        k-NN graph sizes; ``None`` is the dense kernel.
    c_rule : {'largest-within-se', 'min'}
        How to pick C at the chosen ``(K, h)`` (module docstring).
    refit : bool
        Refit the chosen model on the first training set (``best_estimator``); with
        ``max_samples``, on all of ``X``.
    max_samples : int, optional
        With ``X``: search on at most ``max_samples`` of its points, drawn at random without
        replacement (from ``random_state``), then refit the chosen model on every point. The
        large-N recipe: every grid cell costs ``n_repeats * n_init`` factorisations, so at
        N = 10^6 select on about 2·10^4 points (each cell then costs as much as a 10^4-point
        fit) and fit the chosen ``(K, h, C)`` once on all N. The widths ``h`` are then those
        of the subsample: a Gaussian kernel's best width shrinks with N (about
        ``N^(-1/(p+4))``, Silverman's rate), so rescale ``h`` by ``(n_sub / N)^(1/(p+4))`` before
        the full fit when that matters; ``K`` and ``C`` carry over.
    progress : bool
        Show the (repeat, K, h) cells done: a bar on a terminal or in a notebook, else a
        line every few seconds (:func:`dkernel.runtime.compute_parts`).

    Returns
    -------
    ModelSelectionResult

    Notes
    -----
    Per repeat and ``(K, h)``: one training kernel (O(N^2) dense / O(N k) sparse), one
    validation kernel (O(N_val N) dense / O(N_val k)), one eigen-decomposition shared by
    all ``C``, then ``len(n_clusters) * n_init`` factorisations. Every (repeat, K, h) is a
    Dask task of its own, run on the active scheduler (the ``distributed`` client, else
    threads) side by side; memory is that of one training and one validation kernel per
    running task. With ``max_samples`` N is ``max_samples`` for all of this, plus one fit on
    all points (after the search).
    """
    check_options(c_rule, "c_rule", _OWNER, C_RULES)
    # 'gaussian' is the former name of 'rbf' (a FutureWarning, once per process)
    kernel = resolve_alias(kernel, "kernel", _OWNER)
    check_options(kernel, "kernel", _OWNER, ("rbf", "cosine"))
    sigmas, n_clusters, n_neighbors = _check_grid(sigmas, n_clusters, n_neighbors)
    splits, X_all = _splits(X, y, splits, n_repeats, validation_fraction, max_samples, random_state)
    model = dict(
        kernel=kernel,
        loss=loss,
        n_init=n_init,
        max_iter=max_iter,
        tol=tol,
        random_state=random_state,
    )
    result = _error_surface(splits, sigmas, n_clusters, n_neighbors, model, c_rule, progress)
    result.meta = {"kernel": kernel, "loss": loss, "n_init": n_init}
    if max_samples is not None:
        result.meta["max_samples"] = int(max_samples)
    if refit:
        c = result.chosen
        X_fit = X_all if X_all is not None else np.asarray(splits[0][0], dtype=np.float64)
        result.best_estimator = KernelDecompositionClustering(
            c["n_clusters"], sigma=c["sigma"], n_neighbors=c["n_neighbors"], **model
        ).fit(X_fit)
    return result


def _check_grid(
    sigmas: Sequence[float],
    n_clusters: Sequence[int],
    n_neighbors: Sequence[int | None],
) -> tuple[list[float], list[int], list[int | None]]:
    """The grid, checked."""
    sigmas = [float(check_scalar(h, "sigmas", _OWNER, low=0, low_inclusive=False)) for h in sigmas]
    n_clusters = [int(check_scalar(c, "n_clusters", _OWNER, kind=int, low=1)) for c in n_clusters]
    n_neighbors = [
        None if k is None else int(check_scalar(k, "n_neighbors", _OWNER, kind=int, low=1))
        for k in n_neighbors
    ]
    if not sigmas or not n_clusters or not n_neighbors:
        raise InvalidInputError(f"{_OWNER} needs non-empty sigmas, n_clusters and n_neighbors.")
    return sigmas, n_clusters, n_neighbors


def _splits(
    X: Any,
    y: Any,
    splits: Iterable[tuple] | None,
    n_repeats: int,
    validation_fraction: float,
    max_samples: int | None,
    random_state: int | None,
) -> tuple[list[tuple], np.ndarray | None]:
    """The (training, held-out[, held-out labels]) splits, and all of ``X`` when the search
    runs on a subsample of it (``max_samples``; the chosen model is then refitted on all)."""
    X_all = None
    if splits is None:
        if X is None:
            raise InvalidInputError(f"{_OWNER} needs X (random splits) or splits.")
        check_scalar(n_repeats, "n_repeats", _OWNER, kind=int, low=1)
        if max_samples is not None:
            check_scalar(max_samples, "max_samples", _OWNER, kind=int, low=4)
            X_all = np.asarray(X, dtype=np.float64)
            if X_all.shape[0] > max_samples:
                rows = np.sort(
                    derive_rng(random_state, "select_model", "subsample").choice(
                        X_all.shape[0], int(max_samples), replace=False
                    )
                )
                X = X_all[rows]
                y = None if y is None else np.asarray(y)[rows]
        splits = _random_splits(X, y, n_repeats, validation_fraction, random_state)
    elif max_samples is not None:
        raise InvalidInputError(
            f"{_OWNER}: max_samples subsamples X; it cannot be used with splits."
        )
    splits = list(splits)
    if not splits:
        raise InvalidInputError(f"{_OWNER} got an empty list of splits.")
    return splits, X_all


def _error_surface(
    splits: list[tuple],
    sigmas: list[float],
    n_clusters: list[int],
    n_neighbors: list[int | None],
    model: dict[str, Any],
    c_rule: str,
    progress: bool,
) -> ModelSelectionResult:
    """Every grid cell fitted on every split and scored on its held-out part; the chosen
    model (not refitted)."""
    shape = (len(splits), len(n_neighbors), len(sigmas), len(n_clusters))
    has_y = all(len(s) > 2 and s[2] is not None for s in splits)
    splits = [
        (
            np.asarray(s[0], dtype=np.float64),
            np.asarray(s[1], dtype=np.float64),
            np.asarray(s[2]) if has_y else None,
        )
        for s in splits
    ]
    score = partial(_score_split, n_clusters=n_clusters, model=model)
    fit_index = partial(fit_neighbors, kernel=model["kernel"])
    tasks = selection_cell_tasks(splits, n_neighbors, sigmas, score, fit_index)
    cells = compute_parts(tasks, show=progress, what="model selection, (repeat, K, h) cells")
    errors, confidence, accuracy = (
        np.stack([cell[i] for cell in cells]).reshape(shape) for i in range(3)
    )
    kk, hh, cc = choose(errors, c_rule=c_rule)
    chosen = {
        "sigma": sigmas[hh],
        "n_neighbors": n_neighbors[kk],
        "n_clusters": n_clusters[cc],
        "sigma_index": hh,
        "neighbors_index": kk,
        "clusters_index": cc,
    }
    return ModelSelectionResult(
        errors=errors,
        confidence=confidence,
        accuracy=accuracy if has_y else None,
        sigmas=sigmas,
        n_neighbors=n_neighbors,
        n_clusters=n_clusters,
        chosen=chosen,
        c_rule=c_rule,
    )


def _score_split(
    split: tuple, k: int | None, h: float, index: Any, *, n_clusters: list[int], model: dict
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`_score_cell` of a ``(X_train, X_val, y_val)`` split: one task of the grid (its
    arrays aligned: a worker may receive them at any offset of a message buffer)."""
    return _score_cell(*(aligned(a) for a in split), k, h, index, n_clusters, model)


def _score_cell(
    X_tr: np.ndarray,
    X_va: np.ndarray,
    y_va: np.ndarray | None,
    k: int | None,
    h: float,
    index: Any,
    n_clusters: list[int],
    model: dict[str, Any],
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Held-out error, confidence and (with ``y_va``) accuracy of every ``C`` at one
    ``(K, h)``: one training and one validation kernel, one embedding shared by every C."""
    kernel, seed = model["kernel"], model["random_state"]
    c_max = max(n_clusters)
    est = KernelDecompositionClustering(
        c_max if c_max <= X_tr.shape[0] else 1, sigma=h, n_neighbors=k, **model
    )
    Kc, log_norm, Xn = est.training_kernel(X_tr)
    if k is None:
        logKv = density_log_kernel(X_va, Xn, kernel=kernel, sigma=h)
        ind = None
    else:
        ind, logKv = knn_log_kernel(X_va, Xn, kernel=kernel, sigma=h, n_neighbors=k, index=index)
    Kv, _ = row_normalize_log(logKv)
    emb = (
        spectral_embedding(
            Kc, log_norm, min(c_max * (model["n_init"] + 1), Kc.shape[0] - 1), seed=seed
        )
        if c_max > 1
        else None
    )
    errors, confidence, accuracy = (np.full(len(n_clusters), np.nan) for _ in range(3))
    for ci, C in enumerate(n_clusters):
        fit = fit_aggregate_markov(
            Kc,
            log_norm,
            C,
            loss=model["loss"],
            n_init=model["n_init"],
            max_iter=model["max_iter"],
            tol=model["tol"],
            seed=seed,
            embedding=emb if C > 1 else None,
        )
        errors[ci] = -float(np.mean(log_likelihood(logKv, fit.W, fit.H, indices=ind)))
        P = Kv @ fit.H.T if ind is None else np.einsum("qk,qkc->qc", Kv, fit.H.T[ind])
        confidence[ci] = float(np.mean(P.max(axis=1)))
        if y_va is not None:
            accuracy[ci] = clustering_accuracy(y_va, P.argmax(axis=1))
    return errors, confidence, accuracy
