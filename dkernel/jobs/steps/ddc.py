"""``method: ddc`` — :class:`~dkernel.DeepDivergenceClustering`: a network whose softmax output
is the clusters, trained by the Cauchy–Schwarz divergence losses on the job's rows.

Writes ``/assignments``: every row's soft assignment (``proba``, ``(sample, cluster)``) and
cluster (``labels``), both computed chunk by chunk on the job's workers, with the kept restart's
loss per epoch (``loss_curve``) and every restart's loss (``losses``); ``/network``: the trained
network's weights (``DeepDivergenceClustering.from_results(store)`` predicts new samples with
them); ``/metrics`` when the reader gives the true classes. The training state is saved in the
store after every epoch (``/checkpoint``, removed when the store is complete), so
``dkernel run --resume`` continues a killed training from its last epoch. PyTorch is the
``deep`` extra. The parameters are the estimator's, derived from it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from dkernel._lazy import deferred
from dkernel.errors import InvalidInputError
from dkernel.io.data import LoadedData
from dkernel.jobs.outputs import (
    Group,
    Metrics,
    Output,
    Timing,
    missing_model_variables,
    model_order_outputs,
)
from dkernel.jobs.registry import Cost, JobContext, Method, chunk_rows_param, register_method
from dkernel.schema.cache import constants
from dkernel.schema.estimator import EstimatorSchema

xr = deferred("xarray")
#: the filled rows the estimator keeps in memory at most (dkernel.deep._missing)
FILLED_CACHE_BYTES = constants("dkernel.deep._missing", "FILLED_CACHE_BYTES")

#: DeepDivergenceClustering's parameters, derived from the estimator.
DDC_SCHEMA = EstimatorSchema(
    "dkernel.deep.ddc:DeepDivergenceClustering",
    exclude={
        "checkpoint": "the job's own, in its results store (--resume continues from it)",
        "verbose": "the former name of progress, which the command line's switch sets",
    },
)

PARAMS = (
    *DDC_SCHEMA.params,
    chunk_rows_param("Rows per Dask chunk of the assignments (default: about 64 MiB of rows)."),
)

#: Units of the fully connected network for vectors (200-200-500-C, the paper's).
_UNITS = (200, 200, 500)


def check_data(params: dict, data: LoadedData) -> None:
    k = params["n_clusters"]
    if isinstance(k, int) and k > data.n_samples:
        raise InvalidInputError(
            f"params.n_clusters ({k}) exceeds the number of samples ({data.n_samples}); "
            "lower n_clusters."
        )


def _largest_k(params: dict, n: int) -> int:
    """The network's softmax width at most: ``n_clusters``, or with 'auto' the largest
    candidate."""
    if params["n_clusters"] == "auto":
        from dkernel.model_order import candidate_range

        return int(candidate_range(max(n, 3))[-1])
    return int(params["n_clusters"])


def estimate(params: dict, n_samples: int, n_features: int) -> Cost:
    k = _largest_k(params, n_samples)
    sizes = [n_features, *_UNITS, k]
    weights = sum(a * b for a, b in zip(sizes, sizes[1:], strict=False))
    batch = min(params["batch_size"], n_samples)
    # rows with missing values: their filled float32 copy, kept up to a bound
    filled = min(n_samples * n_features * 4, FILLED_CACHE_BYTES)
    return Cost(
        # the data, the weights with Adam's moments and gradients, one batch's kernel and layers
        memory_bytes=float(
            n_samples * n_features * 8 + filled + 4 * weights * 4 + batch * (batch + sum(sizes)) * 8
        ),
        disk_bytes=float(n_samples * (k + 1) * 8),
        what=f"deep divergence-based clustering ({weights:,} weights) on {n_samples} samples",
    )


def compute(ctx: JobContext) -> Iterator[Output]:
    p = ctx.params
    rows = p["chunk_rows"] or max(16, (64 << 20) // (8 * max(ctx.data.n_features, 1)))
    X = ctx.row_chunks(rows, persist=True)
    t = time.perf_counter()
    model = DDC_SCHEMA.build(
        p, checkpoint=ctx.store.checkpoint("ddc"), progress=ctx.progress, random_state=ctx.seed
    ).fit(X)
    yield Timing.since("ddc_fit", t)
    t = time.perf_counter()
    proba = model.predict_proba(X)  # one task per chunk of rows (map_blocks)
    yield Group(
        "assignments",
        xr.Dataset(
            {
                "proba": (("sample", "cluster"), proba),
                "labels": ("sample", proba.argmax(axis=1).astype("int32")),
                "loss_curve": ("epoch", list(model.loss_curve_)),
                "losses": ("restart", [float(v) for v in model.losses_]),
            },
            coords={"epoch": list(range(1, len(model.loss_curve_) + 1))},
            attrs={"loss": float(model.loss_)},
        ),
        lazy=True,
    )
    yield Timing.since("ddc_assign", t)
    yield from model_order_outputs(model)
    yield Group("network", _network_dataset(model))
    yield Metrics(ctx.store.read_array("assignments", "labels"))


def _network_dataset(model: Any) -> Any:
    """The trained network's weights, one variable per ``state_dict`` entry (its name in the
    ``parameter`` attribute), and its missing-value model's ``missing_mean`` and
    ``missing_covariance``, read back by ``DeepDivergenceClustering.from_results``."""
    variables = {}
    for name, value in model.network_weights().items():
        key = name.replace(".", "_")
        dims = tuple(f"{key}_{axis}" for axis in range(value.ndim))
        variables[key] = xr.Variable(dims, value, attrs={"parameter": name})
    variables.update(missing_model_variables(model))
    return xr.Dataset(
        variables,
        attrs={
            "input_shape": list(model.input_shape_),
            "n_clusters": int(model.n_clusters_),
            "loss": float(model.loss_),
        },
    )


register_method(
    Method(
        name="ddc",
        params=PARAMS,
        compute=compute,
        check_data=check_data,
        estimate=estimate,
        # a sample's missing values enter the network at their conditional means
        handles_missing=True,
        description="Deep divergence-based clustering: a network trained by CS-divergence losses.",
        estimators=(DDC_SCHEMA,),
        example={
            "data": {"reader": "sklearn", "name": "iris", "standardize": True},
            "params": {"n_clusters": 3, "max_iter": 2, "batch_size": 50},
        },
        bad_data={"n_clusters": 2, "max_iter": 1},
    )
)
