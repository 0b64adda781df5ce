"""How many clusters: score candidate k, choose one, keep the evidence.

Every estimator that takes ``n_clusters='auto'`` calls this module, so the rules, the candidate
range and the evidence (:class:`ModelOrder`: ``n_clusters_``, ``n_clusters_scores_``,
``model_order_``) mean the same everywhere. The rules:

``'timescale-gap'`` (the default of the spectral estimators)
    The largest ratio of consecutive relaxation times of the random walk on the graph,
    ``(1 − λ_{k+1}) / (1 − λ_k)`` on a log scale: the number of metastable sets of a Markov
    chain (the implied-timescale gap of Markov state models; PCCA+, [Deuflhard2005]).
    k clusters that the walk leaves slowly give k eigenvalues near 1 whose distances to 1 are
    orders of magnitude below the next one's, however slowly the spectrum decays afterwards — the
    case where the plain eigengap fails (two moons on a k-NN graph: λ₃..λ₁₀ are all near 1 as
    well, at 10⁻⁴ where λ₂ is at 10⁻⁸). ``1 − λ`` is floored at :data:`TIMESCALE_FLOOR` × its
    value at the last candidate, so exactly disconnected pieces (``1 − λ = 0``) compare by
    their floor instead of dividing by zero.
``'eigengap'``
    The largest gap ``λ_k − λ_{k+1}`` ([Ng2002]; [vonLuxburg2007], §8.3).
``'rotation'``
    Self-tuning spectral clustering's alignment quality ([ZelnikManor2005]): the k
    leading eigenvectors are rotated to be as close as possible to one non-zero entry per row;
    the quality ``1 − (J / n − 1) / k`` of the best rotation (1: perfectly block-structured).
``'stability'``
    The mean adjusted Rand index between the clusterings of pairs of random subsamples, on the
    points they share ([BenHur2002]; [Lange2004]): a k that is real is
    found again on other draws of the data. The subsamples run as Dask tasks.
``'bic'``, ``'aic'``
    Information criteria of kernel k-means in its feature space (``dkernel.kmeans``).
``'generalization-error'``
    Held-out negative log-likelihood of kernel decomposition clustering
    (:func:`dkernel.select_kdc_model`, [SzymkowiakHave2006], Eq. 11-14).

Which rule runs where, and how each scored on ``benchmarks/bench_defaults.py --auto-k``, is in
``docs/choosing_defaults.md``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dkernel.errors import InvalidInputError

#: The rules :class:`ModelOrder` may record (see the module docstring).
RULES = ("timescale-gap", "eigengap", "rotation", "stability", "bic", "aic", "generalization-error")
#: Rules computed from a descending spectrum alone.
SPECTRUM_RULES = ("timescale-gap", "eigengap")
#: Rules whose lowest score wins (the others: the highest).
LOWER_IS_BETTER = ("bic", "aic", "generalization-error")
#: The rule of the spectral estimators ('auto').
DEFAULT_RULE = "timescale-gap"
#: Floor of ``1 − λ`` in the timescale gap, as a fraction of ``1 − λ`` at the last candidate.
#: 0.003 gave the most sets with the true k on the 23 sets of ``bench_defaults.py`` among
#: 10⁻⁷ … 0.2 (10 of 23; 0.01: 8; 10⁻⁵: 8; 0.1: 5; ``docs/choosing_defaults.md``).
TIMESCALE_FLOOR = 0.003
#: MSSC's choice among the timescale-gap scores of its partition graph: the finest k whose score
#: is at least this fraction of the best. An image's strongest split is often its coarsest
#: (water and land); a finer level at least half as metastable is the land cover a user asks
#: for. Whole scenes, seeds 0-2: Samson 3 (unchanged, the true k), Jasper Ridge 2 → 3 (ARI 0.49
#: → 0.83; its true k = 4 scores 0.78), the 6-class synthetic scene of ``bench_full_tile.py``
#: 2 → 4 (0.30 → 0.71); the demo scene stays at 2 (``docs/choosing_defaults.md``). On the
#: k-NN graphs of the spectral estimators the same choice lost sets (10 → 7 of 23 at 0.5: it
#: takes the harmonics of a manifold, moons 6), so they keep the best score.
IMAGE_FINEST_FRACTION = 0.5
#: Share of the rows in each subsample of the stability rule (Ben-Hur et al.'s 0.8).
STABILITY_SUBSAMPLE = 0.8
#: The default candidate range is k = 2 .. clip(√n, 10, 50).
MIN_TOP_CANDIDATE = 10
MAX_TOP_CANDIDATE = 50


def candidate_range(
    n_samples: int, max_clusters: int | None = None, *, owner: str = "n_clusters='auto'"
) -> np.ndarray:
    """The candidate numbers of clusters, 2 .. top, for ``n_samples`` points.

    ``top`` is ``max_clusters`` when given, else ``round(√n)`` clipped to
    [``MIN_TOP_CANDIDATE``, ``MAX_TOP_CANDIDATE``] — more points can hold more groups
    that stand out (D31: 31 clusters of 64 points) — and never more than ``n − 1``.

    Examples
    --------
    >>> candidate_range(2000).tolist()[-1]
    45
    >>> candidate_range(100, 4).tolist()
    [2, 3, 4]
    """
    n = int(n_samples)
    if n < 3:
        raise InvalidInputError(
            f"{owner} needs at least 3 samples to compare numbers of clusters (got {n}); pass "
            "an integer n_clusters."
        )
    if max_clusters is None:
        top = int(np.clip(round(math.sqrt(n)), MIN_TOP_CANDIDATE, MAX_TOP_CANDIDATE))
    else:
        if isinstance(max_clusters, bool) or not isinstance(max_clusters, (int, np.integer)):
            raise InvalidInputError(
                f"max_clusters of {owner} must be an integer >= 2 or None (derived from the "
                f"data); got {max_clusters!r}."
            )
        top = int(max_clusters)
        if top < 2:
            raise InvalidInputError(
                f"max_clusters of {owner} must be >= 2 (the smallest clustering has 2 "
                f"clusters); got {top}. Pass None to derive it from the data."
            )
    return np.arange(2, min(top, n - 1) + 1, dtype=np.int64)


@dataclass(frozen=True)
class ModelOrder:
    """The evidence of a chosen number of clusters.

    Attributes
    ----------
    n_clusters : int
        The chosen k.
    candidates : ndarray of int
        The k compared.
    scores : ndarray of float
        The rule's score of every candidate (NaN where it is undefined).
    rule : str
        One of :data:`RULES`.
    higher_is_better : bool
        Whether the highest score wins (False for the information criteria and the
        generalization error).
    details : dict
        Rule-specific numbers kept with the evidence (for example the spectrum).
    """

    n_clusters: int
    candidates: np.ndarray
    scores: np.ndarray
    rule: str
    higher_is_better: bool = True
    details: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.rule not in RULES:
            raise InvalidInputError(f"unknown model-order rule {self.rule!r}; one of {RULES}.")

    def summary(self) -> str:
        """One line: the rule, the choice and the runner-up."""
        order = np.argsort(-self._signed(), kind="stable")
        best = int(self.candidates[order[0]])
        text = f"k = {self.n_clusters} by the {self.rule} rule over k = "
        text += f"{int(self.candidates[0])}..{int(self.candidates[-1])}"
        if order.size > 1 and best == self.n_clusters:
            second = order[1]
            text += (
                f" (score {self.scores[order[0]]:.3g}; next k = {int(self.candidates[second])}:"
                f" {self.scores[second]:.3g})"
            )
        elif "finest_fraction" in self.details:
            chosen = int(np.flatnonzero(self.candidates == self.n_clusters)[0])
            text += (
                f" (score {self.scores[chosen]:.3g}: the finest k scoring at least "
                f"{self.details['finest_fraction']:g} × the best, k = {best}: "
                f"{self.scores[order[0]]:.3g})"
            )
        return text

    def _signed(self) -> np.ndarray:
        s = np.where(
            np.isfinite(self.scores), self.scores, -np.inf if self.higher_is_better else np.inf
        )
        return s if self.higher_is_better else -s


def choose(
    scores: np.ndarray,
    candidates: np.ndarray,
    *,
    higher_is_better: bool = True,
    finest_fraction: float | None = None,
) -> int:
    """The candidate with the best finite score (the smallest k on a tie).

    With ``finest_fraction`` (in (0, 1]; highest-is-best scores whose best is positive), the
    largest candidate whose score is at least ``finest_fraction`` × the best score instead: the
    finest of the levels that stand out nearly as well as the strongest one.
    """
    s = np.asarray(scores, dtype=np.float64)
    c = np.asarray(candidates)
    if s.shape != c.shape or s.size == 0:
        raise InvalidInputError(
            f"scores {s.shape} and candidates {c.shape} must be non-empty and of one length."
        )
    ok = np.isfinite(s)
    if not ok.any():
        raise InvalidInputError("no candidate number of clusters has a finite score.")
    signed = np.where(ok, s if higher_is_better else -s, -np.inf)
    best = int(np.argmax(signed))
    if finest_fraction is None:
        return int(c[best])
    if not higher_is_better or not 0 < finest_fraction <= 1:
        raise InvalidInputError(
            "finest_fraction needs scores where the highest wins and a fraction in (0, 1] "
            f"(got {finest_fraction!r}, higher_is_better={higher_is_better})."
        )
    if not s[best] > 0:
        return int(c[best])
    return int(c[ok & (s >= finest_fraction * s[best])].max())


def _check_spectrum(spectrum: np.ndarray, candidates: np.ndarray, rule: str) -> np.ndarray:
    lam = np.asarray(spectrum, dtype=np.float64).ravel()
    c = np.asarray(candidates, dtype=np.int64)
    if c.size == 0 or c.min() < 1:
        raise InvalidInputError(f"the {rule} rule needs candidates >= 1 (got {c.tolist()}).")
    if lam.size < int(c.max()) + 1:
        raise InvalidInputError(
            f"the {rule} rule scores k = {int(c.max())} from the eigenvalues λ_k and λ_(k+1): it "
            f"needs {int(c.max()) + 1} of them, got {lam.size}. Lower max_clusters."
        )
    if not np.all(np.isfinite(lam[: int(c.max()) + 1])):
        raise InvalidInputError(f"the {rule} rule got a spectrum with NaN or infinite values.")
    return lam


def eigengap_scores(spectrum: np.ndarray, candidates: np.ndarray) -> np.ndarray:
    """``λ_k − λ_{k+1}`` of a descending spectrum (λ₁ first) for every candidate k."""
    c = np.asarray(candidates, dtype=np.int64)
    lam = _check_spectrum(spectrum, c, "eigengap")
    return lam[c - 1] - lam[c]


def timescale_gap_scores(
    spectrum: np.ndarray, candidates: np.ndarray, *, floor: float = TIMESCALE_FLOOR
) -> np.ndarray:
    """``log((1 − λ_{k+1} + ε) / (1 − λ_k + ε))`` for every candidate k.

    ``spectrum`` holds the leading eigenvalues of a Markov (or symmetric normalized) matrix in
    descending order; each λ is taken relative to λ₁ (1 for a walk, below 1 for a
    regularized graph such as MSSC's); ``ε = floor × (1 − λ_{K+1})`` with K the last
    candidate.
    """
    c = np.asarray(candidates, dtype=np.int64)
    lam = _check_spectrum(spectrum, c, "timescale-gap")
    if not floor > 0:
        raise InvalidInputError(f"floor of the timescale-gap rule must be > 0 (got {floor}).")
    if not lam[0] > 0:
        raise InvalidInputError(
            f"the timescale-gap rule needs a positive leading eigenvalue (got {lam[0]:.3g}); "
            "pass the spectrum of a Markov or normalized affinity matrix."
        )
    # relative to the leading eigenvalue: 1 for a walk, below 1 for a regularized graph
    distance = np.maximum(1.0 - lam / lam[0], 0.0)
    eps = floor * distance[int(c.max())]
    if eps <= 0:  # every candidate's eigenvalue is 1: nothing tells them apart
        return np.zeros(c.size)
    m = distance + eps
    return np.log(m[c]) - np.log(m[c - 1])


def spectrum_model_order(
    spectrum: np.ndarray,
    candidates: np.ndarray,
    rule: str = DEFAULT_RULE,
    *,
    finest_fraction: float | None = None,
) -> ModelOrder:
    """:class:`ModelOrder` of a spectrum rule (:data:`SPECTRUM_RULES`); ``finest_fraction`` as
    in :func:`choose` (kept in ``details``)."""
    if rule == "timescale-gap":
        scores = timescale_gap_scores(spectrum, candidates)
    elif rule == "eigengap":
        scores = eigengap_scores(spectrum, candidates)
    else:
        raise InvalidInputError(
            f"rule {rule!r} is not computed from a spectrum; one of {SPECTRUM_RULES}."
        )
    c = np.asarray(candidates, dtype=np.int64)
    top = int(c.max()) + 1
    details: dict[str, Any] = {"spectrum": np.asarray(spectrum, dtype=np.float64)[:top]}
    if finest_fraction is not None:
        details["finest_fraction"] = float(finest_fraction)
    return ModelOrder(
        n_clusters=choose(scores, c, finest_fraction=finest_fraction),
        candidates=c,
        scores=scores,
        rule=rule,
        details=details,
    )


# -- the rotation cost of self-tuning spectral clustering ---------------------------------------
def _alignment_cost(Z: np.ndarray) -> tuple[float, np.ndarray]:
    """``J = Σ_i Σ_j Z_ij² / M_i²`` with ``M_i = max_j |Z_ij|``, and ``dJ/dZ``."""
    A = np.abs(Z)
    j = np.argmax(A, axis=1)
    rows = np.arange(Z.shape[0])
    M = np.maximum(A[rows, j], 1e-300)
    cost = float(np.sum((Z / M[:, None]) ** 2))
    grad = 2.0 * Z / (M**2)[:, None]
    grad[rows, j] -= 2.0 * np.sum(Z**2, axis=1) / M**3 * np.sign(Z[rows, j])
    return cost, grad


def best_rotation(
    V: np.ndarray, *, max_iter: int = 200, tol: float = 1e-7
) -> tuple[np.ndarray, float]:
    """The rotation R minimising the alignment cost of ``V R`` (and that cost).

    Gradient descent on the rotation group with a backtracking step: ``R ← R exp(−η A)``,
    A the skew-symmetric part of ``Rᵀ Vᵀ ∂J/∂Z``.
    """
    from scipy.linalg import expm

    V = np.asarray(V, dtype=np.float64)
    R = np.eye(V.shape[1])
    cost, grad = _alignment_cost(V)
    step = 1.0 / max(1, V.shape[0])
    for _ in range(max_iter):
        G = R.T @ (V.T @ grad)
        A = G - G.T
        if np.linalg.norm(A) < 1e-12:
            break
        while step > 1e-12:
            R_new = R @ expm(-step * A)
            new_cost, new_grad = _alignment_cost(V @ R_new)
            if new_cost < cost:
                break
            step *= 0.5
        else:
            break
        improved = cost - new_cost
        R, cost, grad = R_new, new_cost, new_grad
        step *= 2.0
        if improved <= tol * cost:
            break
    return R, cost


def rotation_scores(vectors: np.ndarray, candidates: np.ndarray) -> np.ndarray:
    """Zelnik-Manor & Perona's alignment quality ``1 − (J / n − 1) / k`` of the k leading
    eigenvectors (columns of ``vectors``, leading first) for every candidate k.

    As in the paper, the rotation of k + 1 vectors starts from the best rotation of k with the
    next eigenvector appended. 1 means every row has a single non-zero entry after rotation.
    """
    V = np.asarray(vectors, dtype=np.float64)
    c = np.asarray(candidates, dtype=np.int64)
    if c.size == 0 or c.min() < 2 or c.max() > V.shape[1]:
        raise InvalidInputError(
            f"the rotation rule needs candidates in 2..{V.shape[1]} (the eigenvectors given); "
            f"got {c.tolist()}."
        )
    n = V.shape[0]
    scores = np.full(c.size, np.nan)
    want = {int(k): i for i, k in enumerate(c)}
    current = V[:, :1]
    for k in range(2, int(c.max()) + 1):
        current = np.column_stack([current, V[:, k - 1]])
        R, cost = best_rotation(current)
        current = current @ R
        if k in want:
            scores[want[k]] = 1.0 - (cost / n - 1.0) / k
    return scores


# -- stability over subsamples --------------------------------------------------------------
#: Clusterer of the stability rule: (rows, candidates, seed) → {k: labels of those rows}.
Clusterer = Callable[[np.ndarray, Sequence[int], int], dict[int, np.ndarray]]


def subsample_indices(
    n_samples: int, n_subsamples: int, fraction: float, seed: int | None
) -> list[np.ndarray]:
    """``n_subsamples`` sorted draws of ``fraction`` × n rows without replacement."""
    from dkernel._random import derive_rng

    if not 0 < fraction < 1:
        raise InvalidInputError(f"subsample fraction must be in (0, 1) (got {fraction}).")
    if n_subsamples < 2:
        raise InvalidInputError(f"stability needs at least 2 subsamples (got {n_subsamples}).")
    size = max(2, int(round(fraction * n_samples)))
    return [
        np.sort(derive_rng(seed, "model-order-subsample", b).choice(n_samples, size, False))
        for b in range(n_subsamples)
    ]


def stability_scores_from_labels(
    indices: Sequence[np.ndarray], labels: Sequence[dict[int, np.ndarray]], candidates: np.ndarray
) -> np.ndarray:
    """Mean ARI over pairs of subsamples, on the rows both hold, for every candidate k."""
    from sklearn.metrics import adjusted_rand_score

    c = np.asarray(candidates, dtype=np.int64)
    scores = np.zeros(c.size)
    pairs = 0
    for a in range(len(indices)):
        for b in range(a + 1, len(indices)):
            _, ia, ib = np.intersect1d(indices[a], indices[b], return_indices=True)
            pairs += 1
            for i, k in enumerate(c):
                scores[i] += adjusted_rand_score(labels[a][int(k)][ia], labels[b][int(k)][ib])
    return scores / max(pairs, 1)


def stability_model_order(
    X: np.ndarray,
    cluster: Clusterer,
    candidates: np.ndarray,
    *,
    n_subsamples: int = 4,
    subsample_fraction: float = STABILITY_SUBSAMPLE,
    seed: int | None = 0,
) -> ModelOrder:
    """:class:`ModelOrder` of the stability rule; the subsamples are clustered as Dask tasks
    (the scheduler in use: threads by default, the workers under a distributed client)."""
    import dask

    c = np.asarray(candidates, dtype=np.int64)
    X = np.asarray(X)
    indices = subsample_indices(X.shape[0], n_subsamples, subsample_fraction, seed)
    tasks = [
        dask.delayed(cluster)(X[idx], c.tolist(), b)  # type: ignore[attr-defined]
        for b, idx in enumerate(indices)
    ]
    labels = list(dask.compute(*tasks))
    scores = stability_scores_from_labels(indices, labels, c)
    return ModelOrder(
        n_clusters=choose(scores, c),
        candidates=c,
        scores=scores,
        rule="stability",
        details={"n_subsamples": n_subsamples, "subsample_fraction": subsample_fraction},
    )


def information_criterion_model_order(
    values: np.ndarray, candidates: np.ndarray, rule: str
) -> ModelOrder:
    """:class:`ModelOrder` of a lowest-wins criterion already computed per candidate
    (``'bic'``, ``'aic'``, ``'generalization-error'``)."""
    if rule not in LOWER_IS_BETTER:
        raise InvalidInputError(f"rule {rule!r} is not one of {LOWER_IS_BETTER}.")
    c = np.asarray(candidates, dtype=np.int64)
    v = np.asarray(values, dtype=np.float64)
    return ModelOrder(
        n_clusters=choose(v, c, higher_is_better=False),
        candidates=c,
        scores=v,
        rule=rule,
        higher_is_better=False,
    )


def knn_graph_embedding(
    X: Any, n_values: int, *, seed: int | None = 0, copies: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Leading eigenvalues (descending) and eigenvectors (one row per row of X) of the nearly
    mutual self-tuning k-NN graph of :class:`~dkernel.SpectralClustering`'s exact path, at its
    defaults: the input of the spectrum rules and of the rotation rule.

    Estimators whose own affinity is a plain k-NN kernel (kernel decomposition) choose k on
    this graph: its edges that only one end lists keep 5 % of their weight, so a group's
    relaxation time stands out from the walk's inside it (``docs/choosing_defaults.md``).
    ``copies``: X holds distinct rows, each standing for that many rows (the graph of all
    rows, as ``SpectralClustering`` builds it on few distinct rows).
    """
    from dkernel.rows import DistinctRows
    from dkernel.spectral.sparse import GRAPH_NEIGHBORS, ONE_SIDED_WEIGHT, fit_sparse_embedding

    n = int(X.shape[0])
    distinct = None
    if copies is not None:
        counts = np.asarray(copies).astype(np.int64)
        distinct = DistinctRows(np.asarray(X, dtype=np.float64), counts, np.arange(n))
    rows, model = fit_sparse_embedding(
        X,
        min(int(n_values), n - 1),
        graph_neighbors=min(GRAPH_NEIGHBORS, n - 1),
        seed=seed,
        one_sided_weight=ONE_SIDED_WEIGHT,
        distinct=distinct,
    )
    return np.asarray(model.spectrum, dtype=np.float64), rows


def knn_graph_spectrum(
    X: Any, n_values: int, *, seed: int | None = 0, copies: np.ndarray | None = None
) -> np.ndarray:
    """The eigenvalues of :func:`knn_graph_embedding`."""
    return knn_graph_embedding(X, n_values, seed=seed, copies=copies)[0]
