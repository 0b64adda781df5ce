"""The large-N (bipartite) path of :class:`~dkernel.decomposition.KernelDecompositionClustering`:
fitting the aggregate Markov model of the landmark walk (``approximation='bipartite'``) and the
posteriors and log-densities through each point's landmark links, in ``fit`` and out of sample.

The estimator's ``_fit_bipartite`` and ``_landmark_out_of_sample`` delegate here, handing
themselves as ``model`` (typed ``Any``: importing the estimator's module here, even for type
checking only, would make an import circle); the numerics are
:mod:`dkernel.decomposition.landmark` and :mod:`dkernel.graphs.bipartite`."""

from __future__ import annotations

from numbers import Integral
from typing import Any

import dask.array as da
import numpy as np

from dkernel._random import derive_rng, seed_from_random_state
from dkernel._validation import check_scalar, validate_input
from dkernel.decomposition.kernels import NAN_FIX
from dkernel.decomposition.landmark import (
    fit_landmark_markov,
    landmark_point_weights,
    landmark_rows,
)
from dkernel.errors import InvalidInputError
from dkernel.graphs.bipartite import (
    SUM_ROWS,
    accumulate_landmark_sums,
    sample_landmark_graph,
)
from dkernel.graphs.landmark import default_landmark_count
from dkernel.linalg.threads import map_on_cores
from dkernel.model_order import knn_graph_spectrum
from dkernel.rows import take_rows

_OWNER = "KernelDecompositionClustering"
#: ``approximation='auto'`` with the default kernel: the exact k-NN kernel up to this many
#: points, the landmark bipartite graph above (see ``docs/choosing_defaults.md``).
EXACT_MAX_SAMPLES = 5_000
#: Rows whose nearly mutual k-NN graph chooses k on the bipartite path, as many as the exact
#: path takes: at 2·10^5 the seven families' true k with every draw tried (5-11 s for 51
#: eigenpairs); 3 000 rows chose 4 for rings3 and 2 for varied with one draw of three.
MODEL_ORDER_ROWS = EXACT_MAX_SAMPLES


def fit_bipartite(model: Any, X: Any, *, posteriors: bool = True) -> Any:
    """The landmark path (``dkernel.decomposition.landmark``): landmarks from a sample,
    one pass of sums, the p x p factorisation, one pass of posteriors.

    ``posteriors=False`` stops before that last pass (no ``posteriors_``, ``labels_`` or
    ``priors_``): a job writes the lazy posteriors of :meth:`_landmark_out_of_sample` chunk
    by chunk and gives :func:`set_priors` their mean."""
    if model.sigma is not None:
        raise InvalidInputError(
            f"The 'sigma' parameter of {_OWNER} is a Gaussian width; the landmark graph of "
            "approximation='bipartite' is self-tuning. Leave sigma=None, or pass "
            "kernel='rbf' with approximation='exact'."
        )
    Xv = validate_input(
        model,
        X,
        reset=True,
        min_samples=2,
        dtype=np.float64,
        nan_fix="The bipartite path "
        "(approximation='bipartite', the default above 5 000 points) does not take them. "
        + NAN_FIX,
    )
    n = int(Xv.shape[0])
    is_dask = isinstance(Xv, da.Array)
    if not is_dask and not np.all(np.isfinite(Xv)):
        raise InvalidInputError(f"{_OWNER} does not accept NaN or infinite values in X.")
    p = int(model.n_landmarks or default_landmark_count(n))
    if model.n_clusters != "auto":
        check_scalar(model.n_clusters, "n_clusters", _OWNER, kind=Integral, low=1, high=p)
    seed = seed_from_random_state(model.random_state)
    graph = sample_landmark_graph(Xv, p, model.landmark_neighbors, seed)
    W_Y, d_Y = accumulate_landmark_sums(graph, Xv)
    if not (np.all(np.isfinite(W_Y)) and np.all(np.isfinite(d_Y))):
        raise InvalidInputError(f"{_OWNER} does not accept NaN or infinite values in X.")
    spectrum = None
    model._set_model_order(None)
    if model.n_clusters == "auto":
        candidates = model._candidates(n)
        candidates = candidates[candidates < p]  # the factorisation has p landmarks
        # k on the nearly mutual graph of MODEL_ORDER_ROWS rows, as the exact path
        # chooses it: the landmark walk's spectrum blurs unequal groups (varied at 2·10^5
        # gave 2 of 3, docs/choosing_defaults.md)
        rows = derive_rng(seed, "model-order-rows").choice(
            n, min(n, MODEL_ORDER_ROWS), replace=False
        )
        sample = take_rows(Xv, np.sort(rows), dtype=np.float64)
        top = min(int(candidates[-1]) + 1, sample.shape[0] - 1)
        model._choose_order(knn_graph_spectrum(sample, top, seed=seed), candidates)
    else:
        model.n_clusters_ = int(model.n_clusters)
    result = fit_landmark_markov(
        W_Y,
        d_Y,
        model.n_clusters_,
        loss=model.loss,
        n_init=model.n_init,
        max_iter=model.max_iter,
        tol=model.tol,
        seed=seed,
    )
    model.approximation_ = "bipartite"
    model.graph_model_ = graph
    model._set_spectrum(spectrum if spectrum is not None else result.spectrum)
    model.W_ = result.W
    model.H_ = result.H
    model.objective_ = result.objective
    model.objectives_ = np.asarray(result.objectives)
    model.n_iter_ = result.n_iter
    model.sigma_ = graph.scales
    model.X_fit_ = None
    model._index = None
    if not posteriors:
        return model
    post = model._landmark_out_of_sample(Xv, "posteriors")
    model.posteriors_ = np.asarray(post.compute() if is_dask else post)
    set_priors(model, model.posteriors_.mean(axis=0))
    model.labels_ = np.argmax(model.posteriors_, axis=1).astype(np.int64)
    return model


def set_priors(model: Any, priors: np.ndarray) -> None:
    """The class priors ``P(c)`` (the training posteriors' mean) and, from them, the landmark
    weights the log-densities of :meth:`score_samples` use."""
    model.priors_ = np.asarray(priors, dtype=np.float64)
    model._log_m = landmark_point_weights(model.W_, model.priors_)


def landmark_out_of_sample(model: Any, Xv: Any, what: str) -> Any:
    """Bipartite path: posteriors or log-densities through each row's landmark links
    (Dask: lazily, chunk by chunk; NumPy: blocks on the cores)."""
    graph, H, C = model.graph_model_, model.H_, model.H_.shape[0]
    log_m = getattr(model, "_log_m", None)

    def block(Xb: np.ndarray) -> np.ndarray:
        return landmark_rows(Xb, graph, H, log_m, what=what)

    if isinstance(Xv, da.Array):
        Xv = Xv.rechunk({1: -1})
        if what == "loglik":
            return Xv.map_blocks(
                block, drop_axis=1, dtype=np.float64, meta=np.empty((0,), dtype=np.float64)
            )
        return Xv.map_blocks(
            block,
            chunks=(Xv.chunks[0], (C,)),
            dtype=np.float64,
            meta=np.empty((0, C), dtype=np.float64),
        )
    Xv = np.asarray(Xv, dtype=np.float64)
    starts = range(0, Xv.shape[0], SUM_ROWS)
    parts = map_on_cores(lambda s: block(Xv[s : s + SUM_ROWS]), starts)
    return np.concatenate(parts, axis=0) if parts else block(Xv)
