"""The prior kernel of the deep kernelized autoencoder, and its mini-batch blocks ``P_k``.

The prior is fitted on a uniform sample of the training rows ([Kampffmeyer2018] §4.1: the PCK's
GMMs on 200 samples, then applied to all data). Each mini-batch needs the block ``P_k`` of its
rows ([Kampffmeyer2018] Eq. 7). A kernel with an explicit feature map ``γ`` (the PCK's
posteriors) gets ``γ`` of every training row computed once, chunk by chunk — the PCK's as a
sparse matrix, ~Q (G - 1) entries a row — so ``P_k = γ_k γ_kᵀ`` is an indexing and a small
product per batch; any other kernel (or a feature map too large to keep) is evaluated on the
batch's rows.
"""

from __future__ import annotations

import inspect
import warnings
from typing import Any

import numpy as np
import scipy.sparse as sp

from dkernel._budget import memory_limit
from dkernel._feature_maps import make_feature_map
from dkernel._random import derive_rng, derive_seed
from dkernel.deep._training import read_rows, row_blocks
from dkernel.errors import NumericalWarning, VarianceFloorWarning
from dkernel.kernels.registry import KERNELS, Kernel, make_kernel
from dkernel.rows import take_rows

#: Posteriors below this value (times 1/√Z) are dropped from the cached PCK features: every
#: model's posteriors are nearly one-hot, so ~Q (G - 1) entries a row remain.
PCK_SPARSE_THRESHOLD = 1e-6
#: The PCK prior fits every GMM on all the prior's rows, as [Kampffmeyer2018] §4.1 (the PCK's
#: own default, 0.5, gives each GMM half of them, PCKID's subsampling). On the MNIST split of
#: ``bench_dkae.py`` (200 rows, Q = G = 30) the prior's L_c to the ideal kernel is 1.0123 with
#: all rows (the paper's 1.0132) and 1.0390 with half.
PCK_PRIOR_MAX_SAMPLES = 1.0
#: The cached features may take at most this share of the memory limit.
CACHE_MEMORY_SHARE = 0.25
#: The PCK prior's variance floor (``reg_covar``) is chosen among the PCK's own and these
#: fractions of the prior sample's mean column variance, by the mean log-likelihood of
#: training rows outside the sample (:func:`choose_pck_floor`). 200 rows in 784 dimensions
#: leave every component with pixels none of its few members has ink in, whose variance the
#: PCK's own floor (the pixels' resolution, 1.5e-5) then holds at nothing: a digit with ink
#: there costs thousands of nats and the posteriors turn on single pixels. On
#: ``bench_dkae.py``'s split the held-out log-likelihood is −9 300 to −10 200 nats a row at
#: the PCK's own floor and 48–68 at the chosen one, 0.1 × the mean pixel variance (≈ 0.01), on
#: each of seeds 0-2; ``benchmarks/results/dkae.md`` for what it does to Tables 1-3.
PRIOR_FLOOR_FRACTIONS = (1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 1e-1, 3e-1)
#: Training rows outside the prior's sample that score the floors (all of them when fewer).
HELD_OUT_ROWS = 1000
#: The floors are scored with the PCK's first initial conditions only (model (q, g) depends on
#: ``(random_state, q, g)`` alone, so they are the full ensemble's first models), then the
#: chosen one is fitted in full: 2.5 fits' time instead of 9.
FLOOR_SCORING_ESTIMATORS = 5


def prior_sample(X: Any, size: int, seed: int | None) -> tuple[np.ndarray, np.ndarray]:
    """Sorted row indices of the uniform sample the prior is fitted on, and the rows."""
    n = int(X.shape[0])
    if size >= n:
        idx = np.arange(n, dtype=np.int64)
    else:
        rng = derive_rng(seed, "dkae-prior-sample")
        idx = np.sort(rng.choice(n, size=size, replace=False)).astype(np.int64)
    return idx, take_rows(X, idx, np.float64)


def held_out_sample(
    X: Any, taken: np.ndarray, size: int, seed: int | None
) -> tuple[np.ndarray, np.ndarray]:
    """Sorted indices of up to ``size`` rows of ``X`` outside ``taken``, drawn uniformly, and
    the rows."""
    n = int(X.shape[0])
    rng = derive_rng(seed, "dkae-prior-held-out")
    drawn = rng.choice(n, size=min(n, size + taken.size), replace=False)
    idx = np.sort(drawn[~np.isin(drawn, taken)][:size]).astype(np.int64)
    return idx, take_rows(X, idx, np.float64)


def chooses_floor(prior: Any, params: dict | None) -> bool:
    """Whether :func:`fit_prior` chooses the PCK's floor on held-out rows (the default PCK)."""
    params = params or {}
    return isinstance(prior, str) and prior == "pck" and not {"model", "reg_covar"} & set(params)


def choose_pck_floor(
    params: dict, sample: np.ndarray, held_out: np.ndarray
) -> tuple[Any, dict[float, float]]:
    """The PCK fitted on ``sample`` with the variance floor that scores ``held_out`` best.

    Candidates: ``params``' (or the PCK's default) ``reg_covar`` and
    :data:`PRIOR_FLOOR_FRACTIONS` of the sample's mean column variance (of its columns that
    vary); every fit has the same seed and is scored with its first
    :data:`FLOOR_SCORING_ESTIMATORS` initial conditions. Returns the chosen floor's PCK fitted
    with ``params`` and each candidate's mean held-out log-likelihood
    (:meth:`~dkernel.ProbabilisticClusterKernel.score`). The chosen fit's warnings are raised,
    but :class:`~dkernel.errors.VarianceFloorWarning` (the floor is large on purpose).
    """
    variances = np.nanvar(sample, axis=0)
    spread = float(variances[variances > 0].mean()) if np.any(variances > 0) else 1.0
    full = make_feature_map("pck", **params)
    scoring = {**params, "n_estimators": min(full.n_estimators, FLOOR_SCORING_ESTIMATORS)}
    candidates = [float(full.reg_covar)] + [f * spread for f in PRIOR_FLOOR_FRACTIONS]
    scores: dict[float, float] = {}
    for floor in candidates:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = make_feature_map("pck", **{**scoring, "reg_covar": floor}).fit(sample)
        scores[floor] = model.score(held_out)
    chosen = max(scores, key=scores.__getitem__)
    with warnings.catch_warnings():
        # a floor chosen on held-out rows is large against some columns on purpose
        warnings.simplefilter("ignore", VarianceFloorWarning)
        best = _fit_pck_prior({**params, "reg_covar": chosen}, sample)
    return best, scores


def _fit_pck_prior(params: dict, sample: np.ndarray) -> Any:
    """The PCK prior fitted on ``sample``, without the PCK's note that it dropped the
    sample's constant columns: the autoencoder's user did not choose the PCK's columns, and a
    pixel blank in every sampled image (the digits' borders) has nothing for the prior to
    model. Its other warnings are raised."""
    with warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore",
            message=r".* drops \d+ all-NaN and \d+ zero-variance columns",
            category=NumericalWarning,
        )
        return make_feature_map("pck", **params).fit(sample)


def fit_prior(
    prior: Any,
    params: dict | None,
    sample: np.ndarray,
    seed: int | None,
    held_out: np.ndarray | None = None,
) -> tuple[Kernel, dict[float, float] | None]:
    """The prior kernel, fitted on ``sample``, and the held-out score of every variance floor
    it was chosen among (None when none was chosen).

    ``'pck'``: a :class:`~dkernel.ProbabilisticClusterKernel` with ``params`` (its defaults
    are the paper's Q = G = 30; every GMM on the whole sample, ``max_samples`` =
    ``PCK_PRIOR_MAX_SAMPLES``, unless ``params`` says otherwise) fitted on the sample, unless
    ``params`` has a fitted ``model``; its variance floor chosen on the ``held_out`` rows
    (:func:`choose_pck_floor`) unless ``params`` gives ``reg_covar`` or there are fewer
    than 2 held-out rows. A registry name:
    :func:`~dkernel.kernels.registry.make_kernel` on the sample (which sets data-derived widths
    and radii; ``seed`` passed when the kernel takes one). A callable ``f(X, Y)`` or a
    transformer: as :func:`make_kernel` takes them.
    """
    params = dict(params or {})
    if isinstance(prior, str) and prior == "pck" and "model" not in params:
        params.setdefault("random_state", derive_seed(seed, "dkae-pck"))
        params.setdefault("max_samples", PCK_PRIOR_MAX_SAMPLES)
        scores = None
        if not chooses_floor(prior, params) or held_out is None or held_out.shape[0] < 2:
            model = _fit_pck_prior(params, sample)
        else:
            model, scores = choose_pck_floor(params, sample, held_out)
        return make_kernel("pck", model=model), scores
    if isinstance(prior, str):
        takes = inspect.signature(KERNELS.lookup(prior).factory).parameters
        if "seed" in takes:
            params.setdefault("seed", derive_seed(seed, "dkae-prior"))
    return make_kernel(prior, sample, **params), None


def _features(model: Any, rows: np.ndarray) -> Any:
    """``γ(rows)``: sparse for a model whose transform can drop small values (the PCK)."""
    if "sparse_threshold" in inspect.signature(model.transform).parameters:
        scale = 1.0 / np.sqrt(getattr(model, "normalizer_", 1.0))
        return model.transform(rows, sparse_threshold=PCK_SPARSE_THRESHOLD * scale)
    return np.asarray(model.transform(rows), dtype=np.float32)


class PriorBlocks:
    """``P_k`` of any mini-batch of the training rows of ``X``."""

    def __init__(self, kernel: Kernel, X: Any, max_memory: Any = None) -> None:
        self.kernel = kernel
        self.features: Any = None
        model = kernel.feature_map
        if model is None:
            return
        # the cache's size from the first block's features, before computing the rest
        blocks = row_blocks(X)
        n = int(X.shape[0])
        start, stop = blocks[0]
        first = _features(model, read_rows(X, start, min(stop, start + 256), np.float64))
        per_row = _nbytes(first) / max(first.shape[0], 1)
        if per_row * n > CACHE_MEMORY_SHARE * float(memory_limit(max_memory)):
            return
        parts = [_features(model, read_rows(X, a, b, np.float64)) for a, b in blocks]
        self.features = (
            sp.vstack(parts, format="csr") if sp.issparse(parts[0]) else np.vstack(parts)
        )

    def block(self, idx: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """``P_k`` (k, k) float32 of the training rows ``idx`` (whose values are ``rows``)."""
        if self.features is not None:
            G = self.features[idx]
            P = G @ G.T
            P = P.toarray() if sp.issparse(P) else P
        else:
            P = self.kernel(np.asarray(rows, dtype=np.float64))
        return np.asarray(P, dtype=np.float32)


def _nbytes(a: Any) -> int:
    if sp.issparse(a):
        return int(a.data.nbytes + a.indices.nbytes + a.indptr.nbytes)
    return int(np.asarray(a).nbytes)
