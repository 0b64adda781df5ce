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
from typing import Any

import numpy as np
import scipy.sparse as sp

from dkernel._budget import memory_limit
from dkernel._feature_maps import make_feature_map
from dkernel._random import derive_rng, derive_seed
from dkernel.deep._training import read_rows, row_blocks
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


def prior_sample(X: Any, size: int, seed: int | None) -> tuple[np.ndarray, np.ndarray]:
    """Sorted row indices of the uniform sample the prior is fitted on, and the rows."""
    n = int(X.shape[0])
    if size >= n:
        idx = np.arange(n, dtype=np.int64)
    else:
        rng = derive_rng(seed, "dkae-prior-sample")
        idx = np.sort(rng.choice(n, size=size, replace=False)).astype(np.int64)
    return idx, take_rows(X, idx, np.float64)


def fit_prior(prior: Any, params: dict | None, sample: np.ndarray, seed: int | None) -> Kernel:
    """The prior kernel, fitted on ``sample``.

    ``'pck'``: a :class:`~dkernel.ProbabilisticClusterKernel` with ``params`` (its defaults
    are the paper's Q = G = 30; every GMM on the whole sample, ``max_samples`` =
    ``PCK_PRIOR_MAX_SAMPLES``, unless ``params`` says otherwise) fitted on the sample, unless
    ``params`` has a fitted ``model``. A registry name:
    :func:`~dkernel.kernels.registry.make_kernel` on the sample (which sets data-derived widths
    and radii; ``seed`` passed when the kernel takes one). A callable ``f(X, Y)`` or a
    transformer: as :func:`make_kernel` takes them.
    """
    params = dict(params or {})
    if isinstance(prior, str) and prior == "pck" and "model" not in params:
        params.setdefault("random_state", derive_seed(seed, "dkae-pck"))
        params.setdefault("max_samples", PCK_PRIOR_MAX_SAMPLES)
        model = make_feature_map("pck", **params).fit(sample)
        return make_kernel("pck", model=model)
    if isinstance(prior, str):
        takes = inspect.signature(KERNELS.lookup(prior).factory).parameters
        if "seed" in takes:
            params.setdefault("seed", derive_seed(seed, "dkae-prior"))
    return make_kernel(prior, sample, **params)


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
