"""``method: kernel-decomposition`` — aggregate Markov model [SzymkowiakHave2006] with held-out
model selection over kernel width, k-NN graph size and number of clusters, then a final fit.

The defaults are :class:`~dkernel.decomposition.KernelDecompositionClustering`'s: the sparse
self-tuning k-NN kernel and one model. Held-out likelihood selection (a grid of more than one
model) compares normalised densities, so it needs ``kernel: rbf`` (the paper's Gaussian model,
with ``sigmas``; ``gaussian`` is its former name, a deprecated alias) or ``cosine``.

Groups written: ``/selection`` (error surface: error per repeat, mean and standard error over
repeats, held-out accuracy when labels exist, chosen model in the attributes; only when a grid
is given), ``/decomposition`` (``W = P(x_i | c)``, ``H = P(c | x_j)``, priors; above 5 000
samples, where the estimator's ``approximation='auto'`` fits the landmark bipartite graph,
``W`` and ``H`` are over its ``n_landmarks`` landmarks, as the attributes ``approximation`` and
``n_landmarks`` say), ``/posteriors`` (Eq. 9 class posteriors of every sample), ``/labels``,
``/metrics`` (when labels exist).

On the landmark path the rows are never gathered: the passes read their chunks where the
reader keeps them (a Zarr table, on S3 too), the posteriors are written chunk by chunk and the
labels and the priors read back from them, so that memory per worker stays flat as N grows.
"""

from __future__ import annotations

import logging
import time
import warnings
from collections.abc import Generator, Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from dkernel._budget import KERNEL_BLOCK_BYTES, MAX_ROW_CHUNKS, rows_for_budget
from dkernel._lazy import deferred
from dkernel._random import derive_rng
from dkernel.errors import InvalidInputError
from dkernel.io.data import LoadedData
from dkernel.jobs.outputs import (
    RASTER_OUTPUT_PARAMS,
    Group,
    LabelMap,
    Metrics,
    Output,
    Timing,
    model_order_outputs,
)
from dkernel.jobs.registry import Cost, JobContext, Method, register_method
from dkernel.schema.cache import constants
from dkernel.schema.estimator import EstimatorSchema
from dkernel.schema.params import Param

if TYPE_CHECKING:
    from dkernel.decomposition.estimator import KernelDecompositionClustering

# imported on first use (dkernel._lazy.deferred), constants read from the stored derivation
# (dkernel.schema.cache): `dkernel validate` and `dkernel methods` import every step,
# without Dask or scikit-learn (tests/test_cli_imports.py)
DEFAULT_N_NEIGHBORS = constants("dkernel.decomposition.estimator", "DEFAULT_N_NEIGHBORS")
EXACT_MAX_SAMPLES = constants("dkernel.decomposition._bipartite_fit", "EXACT_MAX_SAMPLES")
DEFAULT_N_LANDMARKS = constants("dkernel.graphs.landmark", "DEFAULT_N_LANDMARKS")
C_RULES = constants("dkernel.decomposition.selection", "C_RULES")
da = deferred("dask.array")
set_priors = deferred("dkernel.decomposition._bipartite_fit", "set_priors")
select_model = deferred("dkernel.decomposition.selection", "select_model")
resolve_alias = deferred("dkernel.kernels.aliases", "resolve_alias")
silverman_normal_reference = deferred("dkernel.kernels.widths", "silverman_normal_reference")
decomposition_dataset, labels_dataset, posteriors_dataset, selection_dataset = deferred(
    "dkernel.storage.layout",
    "decomposition_dataset",
    "labels_dataset",
    "posteriors_dataset",
    "selection_dataset",
)

logger = logging.getLogger(__name__)


def _positive(values):
    if not values:
        return "must be a non-empty list"
    if any(v <= 0 for v in values):
        return "every entry must be > 0"
    return None


def _non_negative(values):
    if not values:
        return "must be a non-empty list"
    if any(v < 0 for v in values):
        return "every entry must be >= 0 (0 = dense kernel)"
    return None


#: The estimator's parameters; the three the job compares over are lists of its own.
KDC_SCHEMA = EstimatorSchema(
    "dkernel.decomposition.estimator:KernelDecompositionClustering",
    exclude={
        "n_clusters": "the job compares a list of model orders (n_clusters: [C, ...]) or 'auto'",
        "sigma": "the job compares a list of widths (sigmas: [h, ...])",
        "n_neighbors": "the job compares a list of graph sizes (n_neighbors: [k, ...])",
        "max_memory": "the job's limits.max_memory",
    },
)

PARAMS = (
    Param(
        "n_clusters",
        "int_list",
        str_options=("auto",),
        check=_positive,
        doc="Model orders C to compare (one entry: no selection over C), or 'auto' (the "
        "eigengap of the starting spectrum, up to max_clusters).",
    ),
    Param(
        "sigmas",
        "float_list",
        default=None,
        nullable=True,
        check=_positive,
        doc="Gaussian widths h to compare (data scaled as per 'scale'); null: Silverman's rule. "
        "kernel: rbf only.",
    ),
    Param(
        "n_neighbors",
        "int_list",
        default=[DEFAULT_N_NEIGHBORS],
        check=_non_negative,
        doc="k-NN graph sizes to compare; 0 = dense kernel (small N only).",
    ),
    *KDC_SCHEMA.params,
    Param(
        "scale",
        "str",
        default="minmax",
        choices=("minmax", "none"),
        doc="minmax: each feature to [0, 1] as in the paper.",
    ),
    Param(
        "n_repeats",
        "int",
        default=5,
        low=1,
        high=1000,
        doc="Random train / held-out splits for the error surface.",
    ),
    Param(
        "validation_fraction", "float", default=0.5, low=0, high=1, low_open=True, high_open=True
    ),
    Param(
        "selection_max_samples",
        "int",
        default=2000,
        low=10,
        doc="Model selection runs on a random subsample of at most this many points.",
    ),
    Param(
        "c_rule",
        "str",
        default="largest-within-se",
        choices=C_RULES,
        doc="Largest C within one SE of the minimum (paper) or the minimiser.",
    ),
    *RASTER_OUTPUT_PARAMS,
)


def _kernel(params: dict) -> str:
    """The kernel's registry name (a former name such as ``gaussian`` warns once)."""
    return str(resolve_alias(params["kernel"], "kernel", "kernel-decomposition"))


def _grid_size(params: dict) -> int:
    widths = len(params["sigmas"]) if params["sigmas"] else 1
    orders = 1 if params["n_clusters"] == "auto" else len(params["n_clusters"])
    return orders * widths * len(params["n_neighbors"])


def _largest_c(params: dict, n: int) -> int:
    """The most clusters a fit may have (with 'auto': ``max_clusters``, or the last
    candidate of :func:`dkernel.model_order.candidate_range` when it is null)."""
    if params["n_clusters"] == "auto":
        if params["max_clusters"] is not None:
            return int(params["max_clusters"])
        from dkernel.model_order import candidate_range

        return int(candidate_range(max(n, 3))[-1])
    return max(params["n_clusters"])


def check_data(params: dict, data: LoadedData) -> None:
    n = data.n_samples
    if params["n_clusters"] == "auto" and _grid_size(params) > 1:
        raise InvalidInputError(
            "params.n_clusters: auto chooses C by the eigengap of one model; it cannot be "
            "combined with a selection grid (several sigmas or n_neighbors). Give one sigma "
            "and one n_neighbors, or a list of C to select by held-out likelihood."
        )
    if params["kernel"] == "local_scaling":
        if params["sigmas"] is not None:
            raise InvalidInputError(
                "params.sigmas are Gaussian widths, but kernel is 'local_scaling' (one "
                "self-tuning width per point); set kernel: rbf to use them."
            )
        if _grid_size(params) > 1:
            raise InvalidInputError(
                "held-out likelihood selection over n_clusters / n_neighbors compares "
                "normalised densities and needs kernel: rbf (with sigmas) or cosine; "
                "with kernel: local_scaling give one n_clusters and one n_neighbors."
            )
        if max(max(params["n_neighbors"]), params["scale_neighbors"]) >= n:
            raise InvalidInputError(
                f"params.n_neighbors and params.scale_neighbors must be < the number of "
                f"samples ({n}) with kernel: local_scaling."
            )
    if params["n_clusters"] != "auto" and max(params["n_clusters"]) > n:
        raise InvalidInputError(
            f"params.n_clusters has {max(params['n_clusters'])} clusters but the data has only "
            f"{n} samples."
        )
    if max(params["n_neighbors"]) > n:
        raise InvalidInputError(
            f"params.n_neighbors ({max(params['n_neighbors'])}) exceeds the number of samples {n}."
        )
    if 0 in params["n_neighbors"] and n > 20_000:
        raise InvalidInputError(
            f"params.n_neighbors contains 0 (dense kernel), which needs an {n} x {n} matrix; "
            "use k-NN graphs (e.g. n_neighbors: [10, 30]) for data this large."
        )
    if isinstance(data.X, np.ndarray) and np.isnan(data.X).any():
        _check_missing_values(params, n, int(np.isnan(data.X).sum()))


def _check_missing_values(params: dict, n: int, n_nan: int) -> None:
    """NaN is modelled by the estimator's self-tuning k-NN kernel on the exact path (expected
    squared distances); elsewhere refused here, naming the fixes."""
    self_tuning = params["kernel"] == "local_scaling" and params["n_neighbors"][0] != 0
    if self_tuning and not _bipartite(params, n):
        return
    why = (
        f"this job would take the landmark path ({n} rows; 'auto' keeps the exact path up to "
        f"{EXACT_MAX_SAMPLES}): set params.approximation: exact"
        if self_tuning
        else f"this job's kernel is {params['kernel']} with n_neighbors {params['n_neighbors']}: "
        "set kernel: local_scaling with one n_neighbors above 0"
    )
    raise InvalidInputError(
        f"kernel-decomposition models missing values ({n_nan} NaN found) with its self-tuning "
        f"k-NN kernel on the exact path only; {why}, impute them, or use method: "
        "kernel-kmeans or pck-spectral, which model them at any size."
    )


def _bipartite(params: dict, n: int) -> bool:
    """Whether the final fit takes the estimator's landmark path (its
    ``approximation='auto'`` rule): one model of the self-tuning k-NN kernel."""
    if _grid_size(params) > 1 or params["kernel"] != "local_scaling":
        return False
    if params["approximation"] != "auto":
        return params["approximation"] == "bipartite"
    big = n > EXACT_MAX_SAMPLES or params["n_landmarks"] is not None
    return 0 not in params["n_neighbors"] and big


def estimate(params: dict, n_samples: int, n_features: int) -> Cost:
    k = max(params["n_neighbors"])
    n_sel = min(n_samples, params["selection_max_samples"])
    if _bipartite(params, n_samples):
        # the landmark sums, a chunk's distances to the landmarks, its posteriors
        m = int(params["n_landmarks"] or min(n_samples, DEFAULT_N_LANDMARKS))
        rows, c = _chunk_rows(params, n_samples), _largest_c(params, n_samples)
        return Cost(
            memory_bytes=8.0 * (4 * m * m + 2 * rows * (m + n_features + c)),
            disk_bytes=8.0 * n_samples * (c + 1),
            what=f"kernel decomposition of a {m}-landmark bipartite graph, chunk by chunk",
            alternative="fewer n_landmarks or a smaller block_rows.",
        )
    if 0 in params["n_neighbors"]:  # the dense kernel may be chosen for the final fit
        memory = 5.0 * 8 * max(n_samples, n_sel) ** 2
        what = f"A dense {n_samples} x {n_samples} row-normalised kernel and its factorisation"
    else:  # CSR kernel, update workspace (nnz x C gathers) and the neighbour index
        c = _largest_c(params, n_samples)
        memory = 8.0 * n_samples * k * (4 + 2 * c) + 8.0 * n_samples * (n_features + 4 * c)
        what = f"A {k}-NN sparse kernel over {n_samples} samples"
    return Cost(
        memory_bytes=memory,
        what=what,
        alternative="use k-NN graphs (params.n_neighbors > 0) instead of 0 (dense).",
    )


def _scale(X: np.ndarray, how: str) -> tuple[np.ndarray, dict]:
    if how == "none":
        return X, {}
    with warnings.catch_warnings():
        # a column with no observed value has no range: it is left as it is (all NaN)
        warnings.simplefilter("ignore", RuntimeWarning)
        lo, hi = np.nanmin(X, axis=0), np.nanmax(X, axis=0)  # missing entries stay NaN
    lo = np.where(np.isnan(lo), 0.0, lo)
    span = np.where(hi > lo, hi - lo, 1.0)
    return (X - lo) / span, {"scale_min": lo.tolist(), "scale_span": span.tolist()}


def compute(ctx: JobContext) -> Iterator[Output]:
    p = ctx.params
    landmark_model = _landmark_model(ctx)
    if landmark_model is not None:
        yield from _fit_in_chunks(ctx, landmark_model)
        return
    X = np.asarray(
        ctx.data.X.compute() if isinstance(ctx.data.X, da.Array) else ctx.data.X, dtype=np.float64
    )
    if np.isinf(X).any():
        raise InvalidInputError(
            f"kernel-decomposition needs finite values; {int(np.isinf(X).sum())} infinite "
            "found. Fix or drop those rows."
        )
    if np.isnan(X).any():  # lazily read input: not seen by check_data
        _check_missing_values(p, X.shape[0], int(np.isnan(X).sum()))
    X, scale_attrs = _scale(X, p["scale"])
    neighbors = [None if k == 0 else int(k) for k in p["n_neighbors"]]
    sigmas = p["sigmas"]
    kernel = _kernel(p)
    if sigmas is None and kernel == "rbf":
        sigmas = [silverman_normal_reference(X)]
    elif sigmas is None:
        sigmas = [None] if kernel == "local_scaling" else [1.0]
    C: int | str
    if _grid_size(p) > 1:
        h, k, C = yield from _select(ctx, X, sigmas, neighbors)
    else:
        C = "auto" if p["n_clusters"] == "auto" else p["n_clusters"][0]
        h, k = sigmas[0], neighbors[0]

    t = time.perf_counter()
    model = _model(ctx, C, h, k)
    Xd = da.from_array(X, chunks=(p["block_rows"] or max(1000, -(-X.shape[0] // 16)), -1))
    model.fit(Xd)
    yield Timing.since("fit", t)

    attrs = {**_model_attrs(model, p, k), **scale_attrs}
    yield Group(
        "decomposition",
        decomposition_dataset(
            model.W_, model.H_, model.priors_, spectrum=model.spectrum_, attrs=attrs
        ),
    )
    yield Group("posteriors", posteriors_dataset(model.posteriors_))
    yield Group(
        "labels",
        labels_dataset(
            model.labels_,
            n_clusters=int(model.posteriors_.shape[1]),
            clustering="argmax of the aggregate Markov posteriors",
        ),
    )
    yield from model_order_outputs(model)
    yield LabelMap(model.labels_, "kernel decomposition")
    yield Metrics(model.labels_)


def _model(ctx: JobContext, C: int | str, h: Any, k: int | None) -> KernelDecompositionClustering:
    """The estimator of the final fit: the job's parameters, ``C``, width ``h``, graph ``k``."""
    return KDC_SCHEMA.build(
        ctx.params,
        kernel=_kernel(ctx.params),
        n_clusters=C,
        sigma=h,
        n_neighbors=k,
        random_state=ctx.seed,
        max_memory=ctx.limits.get("max_memory"),
    )


def _landmark_model(ctx: JobContext) -> KernelDecompositionClustering | None:
    """The final fit's estimator when it takes the landmark path (:func:`_bipartite`), else
    None."""
    p = ctx.params
    if not _bipartite(p, ctx.data.n_samples):
        return None
    n_clusters = "auto" if p["n_clusters"] == "auto" else p["n_clusters"][0]
    k = None if p["n_neighbors"][0] == 0 else int(p["n_neighbors"][0])
    return _model(ctx, n_clusters, None, k)


def _fit_in_chunks(ctx: JobContext, model: KernelDecompositionClustering) -> Iterator[Output]:
    """The landmark path on row chunks read where they are stored: the sums in one pass, the
    posteriors written chunk by chunk in a second, the labels and the priors read back from
    them; nothing of length N is held in the client or persisted on the workers. Rows with at
    most ``EXACT_MAX_SAMPLES`` distinct values (counted chunk by chunk) take the exact path on
    those instead, as the estimator does, and each row its point's posteriors."""
    p = ctx.params
    n = ctx.data.n_samples
    t = time.perf_counter()
    Xd, scale_attrs = _scale_chunks(ctx.row_chunks(_chunk_rows(p, n), persist=False), p["scale"])
    few = model._few_distinct_rows(Xd)
    if few is None:
        model._fit_bipartite(Xd, posteriors=False)
    else:  # integer-valued data: the exact kernel of the distinct rows, each with its copies
        model._fit_distinct_rows(*few, posteriors=False)
        logger.info(f"exact k-NN kernel of the {few[1].points.shape[0]} distinct rows")
    yield Timing.since("fit", t)
    t = time.perf_counter()
    if few is None:
        posteriors = model._landmark_out_of_sample(Xd, "posteriors")
    else:
        posteriors = model._distinct_rows_posteriors(few[0])
    yield Group("posteriors", posteriors_dataset(posteriors), lazy=True)
    stored = ctx.store.read_array("posteriors", "posteriors")
    n_clusters = int(model.H_.shape[0])
    labels = labels_dataset(
        stored.argmax(axis=1),
        n_clusters=n_clusters,
        clustering="argmax of the aggregate Markov posteriors",
    )
    yield Group("labels", labels, lazy=True)
    if few is None:  # the exact path's priors are the factorisation's
        set_priors(model, stored.mean(axis=0).compute())
    attrs = {**_model_attrs(model, p, model.n_neighbors), **scale_attrs}
    if few is not None:  # W and H are over the distinct rows
        attrs["n_distinct_rows"] = int(model.W_.shape[0])
    yield Group(
        "decomposition",
        decomposition_dataset(
            model.W_, model.H_, model.priors_, spectrum=model.spectrum_, attrs=attrs
        ),
    )
    yield Timing.since("posteriors", t)
    yield from model_order_outputs(model)
    written = ctx.store.read_array("labels", "labels")
    yield LabelMap(written, "kernel decomposition")
    yield Metrics(written)


def _chunk_rows(params: dict, n: int) -> int:
    """Rows per chunk of the landmark path: ``block_rows``, or about ``KERNEL_BLOCK_BYTES`` of
    distances to the landmarks (at least 1000), at most ``MAX_ROW_CHUNKS`` chunks."""
    if params["block_rows"]:
        return int(params["block_rows"])
    m = int(params["n_landmarks"] or min(n, DEFAULT_N_LANDMARKS))
    rows = rows_for_budget(KERNEL_BLOCK_BYTES, m, 8, low=1000, high=n)
    return max(rows, -(-n // MAX_ROW_CHUNKS))


def _scale_chunks(X: Any, how: str) -> tuple[Any, dict]:
    """:func:`_scale` of a Dask array: the range in one pass, the scaling lazy."""
    if how == "none":
        return X, {}
    lo, hi = da.compute(X.min(axis=0), X.max(axis=0))
    span = np.where(hi > lo, hi - lo, 1.0)
    # lo and span go into each chunk's task by value: as operands of ``X - lo`` they would be
    # arrays of their own, one key a worker holds, which drew the chunks to that worker
    scaled = X.map_blocks(_min_max_scaled, lo=lo, span=span, dtype=np.result_type(X.dtype, lo))
    return scaled, {"scale_min": lo.tolist(), "scale_span": span.tolist()}


def _min_max_scaled(block: np.ndarray, lo: np.ndarray, span: np.ndarray) -> np.ndarray:
    return (block - lo) / span


def _select(
    ctx: JobContext, X: np.ndarray, sigmas: list, neighbors: list
) -> Generator[Output, None, tuple[Any, Any, int]]:
    """Held-out likelihood selection on a random subsample of at most
    ``selection_max_samples`` points: yields ``/selection`` (the error surface) and returns
    the chosen ``(sigma, n_neighbors, n_clusters)``."""
    p = ctx.params
    y = ctx.data.y
    t = time.perf_counter()
    n = X.shape[0]
    sub = np.arange(n)
    if n > p["selection_max_samples"]:
        sub = np.sort(
            derive_rng(ctx.seed, "kdc", "selection-subsample").choice(
                n, p["selection_max_samples"], replace=False
            )
        )
    logger.info(
        f"model selection on {sub.size} points: {_grid_size(p)} models x {p['n_repeats']} repeats"
    )
    res = select_model(
        X[sub],
        None if y is None else np.asarray(y)[sub],
        sigmas=sigmas,
        n_clusters=p["n_clusters"],
        n_neighbors=neighbors,
        n_repeats=p["n_repeats"],
        validation_fraction=p["validation_fraction"],
        c_rule=p["c_rule"],
        refit=False,
        random_state=ctx.seed,
        kernel=_kernel(p),
        loss=p["loss"],
        n_init=p["n_init"],
        max_iter=p["max_iter"],
        tol=p["tol"],
        progress=ctx.progress,
    )
    hm, hs = res.error_vs_sigma()
    ds = selection_dataset(
        errors=res.errors,
        error_mean=res.mean,
        error_sem=res.sem,
        error_vs_sigma_mean=hm,
        error_vs_sigma_sem=hs,
        confidence=res.confidence,
        accuracy=res.accuracy,
        sigmas=res.sigmas,
        n_neighbors=res.n_neighbors,
        n_clusters=res.n_clusters,
        chosen=res.chosen,
        c_rule=res.c_rule,
        attrs={**res.meta, "n_selection_samples": int(sub.size)},
    )
    yield Group("selection", ds)
    yield Timing.since("model_selection", t)
    chosen = res.chosen
    logger.info(
        f"chosen: sigma={chosen['sigma']:g}, "
        f"n_neighbors={chosen['n_neighbors'] or 'dense'}, C={chosen['n_clusters']}"
    )
    return chosen["sigma"], chosen["n_neighbors"], chosen["n_clusters"]


def _model_attrs(model: KernelDecompositionClustering, p: dict, k: int | None) -> dict:
    """The ``/decomposition`` group's attributes."""
    attrs = {
        "n_neighbors": k or 0,
        "n_clusters": int(model.H_.shape[0]),
        "n_clusters_requested": p["n_clusters"],
        "n_clusters_chosen": int(model.n_clusters_),
        "kernel": _kernel(p),
        "loss": p["loss"],
        "objective": float(model.objective_),
        "n_iter": int(model.n_iter_),
        "restart_objectives": model.objectives_.tolist(),
        "approximation": model.approximation_,
    }
    if model.approximation_ == "bipartite":  # W and H are over the landmarks, not the samples
        attrs["n_landmarks"] = int(model.W_.shape[0])
        graph = model.graph_model_
        assert graph is not None  # what the bipartite fit sets
        attrs["landmark_neighbors"] = int(graph.n_neighbors)
    if p["kernel"] != "local_scaling":  # "bandwidth": the key before sigma, kept for readers
        attrs["bandwidth"] = attrs["sigma"] = float(model.sigma_)
    else:  # self-tuning widths: one per point
        attrs["scale_neighbors"] = int(p["scale_neighbors"])
        attrs["median_sigma"] = float(np.median(model.sigma_))
    return attrs


register_method(
    Method(
        name="kernel-decomposition",
        params=PARAMS,
        compute=compute,
        check_data=check_data,
        estimate=estimate,
        description="Aggregate Markov model (NMF/PLSA of the row-normalised density kernel) with "
        "held-out likelihood selection of width, k-NN graph and number of clusters.",
        estimators=(KDC_SCHEMA,),
        # the self-tuning k-NN kernel on the exact path (check_data refuses NaN elsewhere)
        handles_missing=True,
        example={
            "data": {"reader": "sklearn", "name": "iris", "standardize": True},
            "params": {
                "kernel": "rbf",  # held-out selection over widths: the paper's kernel
                "n_clusters": [2, 3],
                "sigmas": [0.1, 0.2],
                "n_repeats": 2,
            },
        },
        bad_data={"n_clusters": [2]},
    )
)
