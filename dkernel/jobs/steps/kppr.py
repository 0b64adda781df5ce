"""``method: kppr`` — Kernel Personalized PageRank fitted on an in-sample subset, every row
scored out of sample through Dask (Løkse 2020, Paper II, Defs. 1–3 and Prop. 8 [Lokse2020]),
written to ``/ranking``.

Seeds are named in ``params.seeds`` (``name: spec``); a spec is ``null`` (uniform over the
in-sample points, the global seed), a row index or a list of row indices of the data (rows
outside the in-sample subset are out-of-sample seeds, Def. 2), or ``{class: c}`` (uniform over
the rows whose label is ``c``; needs a labelled reader).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from dkernel._budget import rows_of_max_samples
from dkernel._lazy import deferred
from dkernel._random import derive_rng
from dkernel.errors import InvalidInputError, SpecError
from dkernel.io.data import LoadedData
from dkernel.jobs.outputs import Group, Output, ScoreMap, Timing
from dkernel.jobs.registry import (
    Cost,
    JobContext,
    Method,
    chunk_rows_param,
    refuse_missing_values,
    register_method,
)
from dkernel.runtime.persist import rows_in_memory
from dkernel.schema.cache import constants
from dkernel.schema.estimator import EstimatorSchema
from dkernel.schema.params import Param, show_value

if TYPE_CHECKING:
    import dask.array as da

    from dkernel.ranking.kppr import KernelPersonalizedPageRank
else:
    da = deferred("dask.array")

# imported on first use (dkernel._lazy.deferred), constants read from the stored derivation
# (dkernel.schema.cache): `dkernel validate` and `dkernel methods` import every step,
# without Dask or scikit-learn (tests/test_cli_imports.py)
ADAPTIVE, KERNEL_NAMES = constants("dkernel.ranking.kernelmap", "ADAPTIVE", "KERNEL_NAMES")
as_numpy = deferred("dkernel._validation", "as_numpy")
scores_from_projection = deferred("dkernel.ranking.graph", "scores_from_projection")
scoring_chunk_rows = deferred("dkernel.ranking.kppr", "scoring_chunk_rows")
warn_former_name = deferred("dkernel.kernels.aliases", "warn_former_name")
ndcg_at_k = deferred("dkernel.ranking.metrics", "ndcg_at_k")
ppr_exact = deferred("dkernel.ranking.ppr", "ppr_exact")
embedding_dataset, metrics_dataset, ranking_dataset = deferred(
    "dkernel.storage.layout", "embedding_dataset", "metrics_dataset", "ranking_dataset"
)

logger = logging.getLogger(__name__)


def _check_seeds(value: Any) -> str | None:
    if not isinstance(value, Mapping) or not value:
        return "must be a non-empty mapping of seed names to specs"
    for name, spec in value.items():
        ok = (
            spec is None
            or (isinstance(spec, int) and not isinstance(spec, bool))
            or (isinstance(spec, list) and spec and all(isinstance(v, int) for v in spec))
            or (isinstance(spec, Mapping) and set(spec) == {"class"})
        )
        if not ok:
            return (
                f"seed {show_value(name)}: a spec is null (global), a row index, a list of row "
                "indices or {class: label}"
            )
        rows = [spec] if isinstance(spec, int) else spec if isinstance(spec, list) else []
        if any(r < 0 for r in rows):
            return f"seed {show_value(name)}: row indices count from 0 (no negative rows)"
    return None


#: Kernel names the ranking jobs accept: the estimators' (dkernel.ranking.kernelmap) but
#: ``precomputed``, which a spec cannot pass (``pck`` fits a ProbabilisticClusterKernel with
#: the ``pck_*`` parameters).
KERNEL_CHOICES = tuple(k for k in KERNEL_NAMES if k != "precomputed")

#: What the ranking jobs leave out of their estimator's parameters.
RANKING_EXCLUDE = {"kernel_params": "the kernels' reference samples keep their defaults"}

#: The PCK of ``kernel: pck``, configured by ``pck_n_estimators`` etc. (former name
#: ``pck_n_inits``, still taken for one release)
PCK_KERNEL_SCHEMA = EstimatorSchema(
    "dkernel.gmm.pck:ProbabilisticClusterKernel",
    prefix="pck_",
    include=("n_estimators", "max_components", "n_iter", "missingness", "n_inits"),
)

KPPR_SCHEMA = EstimatorSchema(
    "dkernel.ranking.kppr:KernelPersonalizedPageRank",
    exclude=RANKING_EXCLUDE,
    overrides={
        "kernel": {"choices": KERNEL_CHOICES},
    },
)

PARAMS = (*KPPR_SCHEMA.params, *PCK_KERNEL_SCHEMA.params) + (
    Param(
        "max_samples",
        "count_or_fraction",
        default=2000,
        low=3,
        doc="In-sample subset, a uniform sample of at most this many rows (an int; all rows when "
        "the data are smaller) or this fraction of them (a float). Formerly n_fit.",
    ),
    Param(
        "seeds",
        "mapping",
        default={"global": None},
        check=_check_seeds,
        doc="name: null | row | [rows] | {class: c}.",
    ),
    Param("top_k", "int", default=100, low=1, doc="Top-k indices stored per seed."),
    Param(
        "store_projection",
        "bool",
        default=None,
        nullable=True,
        doc="Store every row's score coordinates (n x (k+1)) so that seeds chosen later are "
        "ranked from the store in O(k) per row (dkernel.seed_scores); default: yes for pck "
        "(the posteriors dominate the cost), no for rbf.",
    ),
    chunk_rows_param("Rows per scoring task (default: ~64 MiB of kernel rows)."),
    Param(
        "evaluate_max_samples",
        "int",
        default=5000,
        low=0,
        doc="With at most this many rows, compare with the exact PPR (NDCG@10) in /metrics.",
    ),
    Param(
        "n_fit",
        "int",
        default=None,
        nullable=True,
        low=3,
        doc="Deprecated: the former name of max_samples (a FutureWarning), kept for one release.",
    ),
)


def _n_fit(params: dict, n: int) -> int:
    """Rows the estimator is fitted on: ``max_samples``, or its former name ``n_fit`` when
    the spec still writes it (warning once per process), at most ``n``."""
    size = params["max_samples"]
    if params.get("n_fit") is not None:
        if size not in (params["n_fit"], 2000):
            raise SpecError(
                f"params.n_fit ({params['n_fit']}) is the former name of max_samples, which is "
                f"{size}; give max_samples only.",
                "params.n_fit",
            )
        size = params["n_fit"]
        warn_former_name("kppr job", "n_fit", "max_samples", size)
    return rows_of_max_samples(size, n)


def check_data(params: dict, data: LoadedData) -> None:
    n = data.n_samples
    if n < 2:
        raise InvalidInputError(f"kppr needs at least 2 samples; the data has {n}.")
    n_fit = _n_fit(params, n)
    if n_fit < min(3, n):
        raise SpecError(
            f"max_samples ({params['max_samples']}) of {n} rows draws {n_fit}; "
            "the fit needs at least 3 rows: raise it.",
            "params.max_samples",
        )
    for name, spec in params["seeds"].items():
        rows = [spec] if isinstance(spec, int) else spec if isinstance(spec, list) else []
        bad = [r for r in rows if not 0 <= r < n]
        if bad:
            raise SpecError(
                f"seed {show_value(name)}: rows {show_value(bad)} are outside [0, {n}).",
                "params.seeds",
            )
        if isinstance(spec, Mapping):
            if data.y is None:
                raise SpecError(
                    f"seed {name!r} uses a class, but the data has no labels: name the labels "
                    "column (data.label_column of csv and parquet, data.labels_path of npy), or give the "
                    "seed as row indices.",
                    "params.seeds",
                )
            if not np.any(np.asarray(data.y) == spec["class"]):
                raise SpecError(
                    f"seed {name!r}: no row has class {spec['class']!r}; classes: "
                    f"{np.unique(np.asarray(data.y)).tolist()[:20]}.",
                    "params.seeds",
                )
    kernel = params["kernel"]
    if not hasattr(data.X, "dask"):  # a Dask X is not computed here
        refuse_missing_values("kppr", kernel, data.X, KERNEL_CHOICES)
    # the k-NN graphs' size, or local_scaling's rank (the estimator checks a former spelling)
    name = "scale_neighbors" if kernel == "local_scaling" else "n_neighbors"
    if kernel in ADAPTIVE and params[name] >= n_fit:
        raise SpecError(
            f"{name} ({params[name]}) must be < the in-sample rows "
            f"({n_fit}); lower {name} or raise max_samples.",
            f"params.{name}",
        )


def estimate(params: dict, n_samples: int, n_features: int) -> Cost:
    """The in-sample eigendecomposition (3 dense m × m float64 matrices) or, when the data
    are small enough to be evaluated (``n ≤ params.evaluate_max_samples``), the evaluation
    against the exact PPR (:func:`_evaluate`: the N × N kernel, the Cholesky system built from
    it and the solver's copy, 3 N² float64), whichever is larger, plus the scores."""
    m = _n_fit(params, n_samples)
    n_seeds = len(params["seeds"])
    scores = 8.0 * n_samples * n_seeds
    fit = 3.0 * 8 * m * m
    evaluate = 3.0 * 8 * float(n_samples) ** 2 if evaluates(params, n_samples) else 0.0
    if evaluate > fit:
        return Cost(
            memory_bytes=evaluate + scores,
            disk_bytes=4.0 * n_samples * n_seeds,
            what=(
                f"the evaluation against the exact PPR (a dense {n_samples} x {n_samples} "
                f"kernel, as params.evaluate_max_samples = {params['evaluate_max_samples']:,} "
                f">= {n_samples:,} rows)"
            ),
            alternative=(
                f"lower params.evaluate_max_samples below {n_samples:,} (the evaluation is "
                "then skipped; every row is still scored out of sample)."
            ),
        )
    return Cost(
        memory_bytes=fit + scores,
        disk_bytes=4.0 * n_samples * n_seeds,
        what=f"a dense {m} x {m} in-sample eigendecomposition",
        alternative="lower params.max_samples (the rest is scored out of sample).",
    )


def evaluates(params: dict, n_samples: int) -> bool:
    """Whether the job compares its scores with the exact PPR (O(N²) memory, O(N³) time)."""
    return n_samples <= params["evaluate_max_samples"]


def _seed_mean(kppr: KernelPersonalizedPageRank, rows: np.ndarray, fit_pos: dict, X) -> np.ndarray:
    """Restart mean for a uniform seed over data rows (in-sample and/or out-of-sample)."""
    inside = [fit_pos[r] for r in rows if r in fit_pos]
    outside = [r for r in rows if r not in fit_pos]
    mean = np.zeros(kppr.n_components_)
    if inside:
        mean += len(inside) * kppr.mean_vector(np.asarray(inside))
    if outside:
        Xo = X[np.asarray(outside)]
        Xo = as_numpy(Xo)
        mean += len(outside) * kppr.mean_vector(seed_X=Xo)
    return mean / len(rows)


def ranking_kernel(params: Mapping[str, Any], seed: int) -> Any:
    """The ``kernel`` argument of the ranking estimators: a name, or for ``pck`` the
    ProbabilisticClusterKernel of the ``pck_*`` parameters."""
    if params["kernel"] != "pck":
        return params["kernel"]
    return PCK_KERNEL_SCHEMA.build(params, random_state=seed)


def compute(ctx: JobContext) -> Iterator[Output]:
    p = ctx.params
    X = ctx.data.X
    n = int(X.shape[0])
    m = _n_fit(p, n)
    rng = derive_rng(ctx.seed, "kppr", "in-sample")
    fit_idx = np.arange(n) if m >= n else np.sort(rng.choice(n, size=m, replace=False))
    X_fit = as_numpy(X[fit_idx], np.float64)
    kernel = ranking_kernel(p, ctx.seed)
    kppr = KPPR_SCHEMA.build(p, kernel=kernel, random_state=ctx.seed)
    t = time.perf_counter()
    kppr.fit(X_fit)
    yield Timing.since("fit", t)
    logger.info(
        f"KPPR fitted on {m} of {n} rows: {kppr.n_components_} components "
        f"({p['ordering']} ordering), kernel {kppr.kernel_params_}"
    )

    names, seed_weights = _seed_weights(ctx, kppr, fit_idx)
    store_projection = p["store_projection"]
    if store_projection is None:
        store_projection = bool(kppr.kernel_.is_feature_map)
    Xd = _row_chunks(p, X, kppr, ctx.client)
    if store_projection:
        Z = kppr.project(Xd)
        scores = scores_from_projection(Z, seed_weights)
    else:
        # per point: O(F m) direct, or project once (O(F (k+1))) and O(k) per seed; computed
        # and stored in params.dtype (score_seeds returns them as float64)
        scores = kppr.score_seeds(Xd, seed_weights).astype(p["dtype"])
    projected = store_projection or seed_weights.shape[1] > seed_weights.shape[0]
    in_sample = np.zeros(n, dtype=bool)
    in_sample[fit_idx] = True
    ds = ranking_dataset(
        scores,
        names,
        k=p["top_k"],
        attrs={
            "method": "kppr",
            "alpha": p["alpha"],
            "max_samples": m,
            "n_fit": m,  # the key before max_samples: kept for readers
            "n_components": kppr.n_components_,
            "ordering": p["ordering"],
            "min_eigenvalue": p["min_eigenvalue"],
            "kernel": kppr.kernel_params_,
            "seeds": {k: v for k, v in p["seeds"].items()},
            "beta": kppr.beta_,
            "volume": kppr.volume_,
        },
        projection=Z if store_projection else None,
        in_sample=in_sample,
    )
    t = time.perf_counter()
    logger.info(
        f"scoring {n} rows for {len(names)} seed{'s' * (len(names) != 1)} in "
        f"{Xd.numblocks[0]} task{'s' * (Xd.numblocks[0] != 1)}"
        + (" (projected: O(k) per seed)" if projected else "")
    )
    yield Group("ranking", ds, lazy=True)
    yield Timing.since("score_and_write", t)
    yield ScoreMap(ctx.store.read_array("ranking", "score"), names)
    yield Group(
        "embedding",
        embedding_dataset(
            kppr.embedding_,
            kppr.eigenvalues_,
            criterion=kppr.criterion_,
            degrees=kppr.degrees_,
            fit_index=fit_idx,
            attrs={
                "method": "kppr",
                # the attribute names [Lokse2020], Paper II, Prop. 6
                "criterion": "Paper II Prop. 6 c_i^2",
                "volume": kppr.volume_,
                "beta": kppr.beta_,
            },
        ),
    )
    if evaluates(p, n):
        yield Group("metrics", _evaluate(ctx, kppr, X, names, p))


def _seed_weights(
    ctx: JobContext, kppr: KernelPersonalizedPageRank, fit_idx: np.ndarray
) -> tuple[list[str], np.ndarray]:
    """The seeds' names and their weights on the in-sample eigenvectors (one column each)."""
    X, n = ctx.data.X, int(ctx.data.X.shape[0])
    fit_pos = {int(r): i for i, r in enumerate(fit_idx)}
    y = None if ctx.data.y is None else np.asarray(ctx.data.y)
    names, means = [], []
    for name, spec in ctx.params["seeds"].items():
        if spec is None:
            mean = kppr.mean_vector(None)
        else:
            if isinstance(spec, Mapping):
                rows = np.flatnonzero(y == spec["class"])
            else:
                rows = np.atleast_1d(np.asarray(spec)) % n
            mean = _seed_mean(kppr, rows, fit_pos, X)
        names.append(str(name))
        means.append(mean)
    return names, kppr.seed_weights_for_mean(np.stack(means, axis=1))


def _row_chunks(p: dict, X: Any, kppr: KernelPersonalizedPageRank, client: Any) -> da.Array:
    """The data as a Dask array of scoring tasks: ``chunk_rows`` rows each, or about
    ``KERNEL_BLOCK_BYTES`` of kernel rows (``scoring_chunk_rows``; a Dask input keeps its
    chunks unless ``chunk_rows`` is given; in-memory data are sent to the workers once)."""
    rows = p["chunk_rows"] or scoring_chunk_rows(kppr, int(X.shape[0]))
    if not isinstance(X, da.Array):
        return rows_in_memory(np.asarray(X), rows, client)
    return X.rechunk({0: rows}) if p["chunk_rows"] else X


def _evaluate(ctx: JobContext, kppr, X, names: list[str], p: dict) -> Any:
    """``/metrics``: NDCG@10 of the stored scores against the exact PPR on all rows
    ([Lokse2020], Paper II, §4.2).

    Seed rows are left out of the ranking for row seeds, as in [Lokse2020], Paper II, §4.2.
    """
    Xa = as_numpy(X, np.float64)
    kern = kppr.kernel_
    if kern.is_feature_map:
        G = np.asarray(kern.features(Xa), dtype=np.float64)
        K = G @ G.T
    else:
        K = np.asarray(kern.fn(Xa, Xa), dtype=np.float64)
    scores = np.asarray(ctx.store.read_array("ranking", "score").compute(), dtype=np.float64)
    seeds = p["seeds"]
    y = None if ctx.data.y is None else np.asarray(ctx.data.y)
    n = K.shape[0]
    result = {}
    for j, name in enumerate(names):
        spec = seeds[name]
        if spec is None:
            s = np.zeros(n)
            s[np.asarray(ctx.store.read_array("ranking", "in_sample").compute())] = 1.0
        elif isinstance(spec, Mapping):
            s = (y == spec["class"]).astype(float)
        else:
            s = np.zeros(n)
            np.add.at(s, np.atleast_1d(np.asarray(spec)) % n, 1.0)
        s /= s.sum()
        exact = ppr_exact(K, s, p["alpha"])
        exclude = None if spec is None or isinstance(spec, Mapping) else np.flatnonzero(s)
        result[f"ndcg@10_{name}"] = ndcg_at_k(exact, scores[:, j], 10, exclude=exclude)
    logger.info("NDCG@10 vs exact PPR: " + ", ".join(f"{k[8:]} {v:.3f}" for k, v in result.items()))
    return metrics_dataset(result)


register_method(
    Method(
        name="kppr",
        params=PARAMS,
        compute=compute,
        check_data=check_data,
        estimate=estimate,
        description="Kernel Personalized PageRank: in-sample eigenpairs, every row scored out of "
        "sample through Dask, named seeds written to /ranking.",
        estimators=(KPPR_SCHEMA, PCK_KERNEL_SCHEMA),
        example={
            "data": {"reader": "sklearn", "name": "wine", "standardize": True},
            "params": {"max_samples": 60, "seeds": {"global": None, "row_0": 0}, "top_k": 10},
        },
        bad_data={},
        # with the kernels that model them (refuse_missing_values names the others)
        handles_missing=True,
    )
)
