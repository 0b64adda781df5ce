"""``method: dkae`` — :class:`~dkernel.DeepKernelizedAutoencoder`: codes whose inner products
follow a prior kernel (the PCK by default), trained by Adam on the job's rows.

Writes ``/codes``: the code of every row (``codes``, ``(sample, code)``, encoded chunk by chunk
on the job's workers) and the training curves per epoch (``loss``, ``reconstruction``,
``alignment``); ``/network``: the trained weights (``DeepKernelizedAutoencoder.from_results(store)``
encodes new samples and decodes codes with them). The training state is saved in the store
after every epoch (``/checkpoint``, removed when the store is complete), so
``dkernel run --resume`` continues a killed training from its last epoch. PyTorch is the
``deep`` extra; a job without it is refused with the extra's name when it runs. The
parameters are the estimator's, derived from it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from dkernel._lazy import deferred
from dkernel.errors import InvalidInputError
from dkernel.io.data import LoadedData
from dkernel.jobs.outputs import Group, Output, Timing, missing_model_variables
from dkernel.jobs.registry import Cost, JobContext, Method, chunk_rows_param, register_method
from dkernel.schema.cache import constants
from dkernel.schema.estimator import EstimatorSchema
from dkernel.schema.params import Param

xr = deferred("xarray")
#: the filled rows the estimator keeps in memory at most (dkernel.deep._missing)
FILLED_CACHE_BYTES = constants("dkernel.deep._missing", "FILLED_CACHE_BYTES")

#: DeepKernelizedAutoencoder's parameters, derived from the estimator.
DKAE_SCHEMA = EstimatorSchema(
    "dkernel.deep.dkae:DeepKernelizedAutoencoder",
    exclude={
        "hidden_layer_sizes": "a list of ints: the job's hidden_layer_sizes below",
        "checkpoint": "the job's own, in its results store (--resume continues from it)",
        "max_memory": "the job's limits.max_memory",
    },
)

PARAMS = (
    *DKAE_SCHEMA.params,
    Param(
        "hidden_layer_sizes",
        "int_list",
        default=[500, 500, 2000],
        low=1,
        doc="The encoder's hidden layers (the decoder mirrors them), the paper's 500-500-2000.",
    ),
    chunk_rows_param("Rows per Dask chunk of the codes (default: about 64 MiB of rows)."),
)


def check_data(params: dict, data: LoadedData) -> None:
    if data.n_samples < 2:
        raise InvalidInputError(
            f"method 'dkae' needs at least 2 samples (a mini-batch aligns the codes of two or "
            f"more); the data has {data.n_samples}."
        )


def estimate(params: dict, n_samples: int, n_features: int) -> Cost:
    sizes = [n_features, *params["hidden_layer_sizes"], params["n_components"]]
    weights = sum(a * b for a, b in zip(sizes, sizes[1:], strict=False))
    batch = min(params["batch_size"], n_samples)
    # rows with missing values: their filled float32 copy and mask, kept up to a bound
    filled = min(n_samples * n_features * 8, FILLED_CACHE_BYTES)
    return Cost(
        # the data, the weights with Adam's two moments and their gradients, one batch's layers
        memory_bytes=float(
            n_samples * n_features * 8 + filled + 4 * weights * 4 + batch * sum(sizes) * 8
        ),
        disk_bytes=float(n_samples * params["n_components"] * 4),
        what=f"a deep kernelized autoencoder of {weights:,} weights on {n_samples} samples",
    )


def compute(ctx: JobContext) -> Iterator[Output]:
    p = ctx.params
    rows = p["chunk_rows"] or max(16, (64 << 20) // (8 * max(ctx.data.n_features, 1)))
    X = ctx.row_chunks(rows, persist=True)
    t = time.perf_counter()
    model = DKAE_SCHEMA.build(
        p,
        hidden_layer_sizes=tuple(p["hidden_layer_sizes"]),
        checkpoint=ctx.store.checkpoint("dkae"),
        max_memory=ctx.limits.get("max_memory"),
        progress=ctx.progress,
        random_state=ctx.seed,
    ).fit(X)
    yield Timing.since("dkae_fit", t)
    t = time.perf_counter()
    codes = model.transform(X)  # one task per chunk of rows (map_blocks)
    epochs = range(1, len(model.loss_curve_) + 1)
    yield Group(
        "codes",
        xr.Dataset(
            {
                "codes": (("sample", "code"), codes),
                "loss": ("epoch", list(model.loss_curve_)),
                "reconstruction": ("epoch", list(model.reconstruction_curve_)),
                "alignment": ("epoch", list(model.alignment_curve_)),
            },
            coords={"epoch": list(epochs)},
            attrs={"kernel_weight": p["kernel_weight"], "prior": str(p["prior"])},
        ),
        lazy=True,
    )
    yield Timing.since("dkae_codes", t)
    yield Group("network", _network_dataset(model))


def _network_dataset(model: Any) -> Any:
    """The encoder's weights and both sides' biases (tied weights: the decoder's are their
    transposes) and the missing-value model, read back by
    ``DeepKernelizedAutoencoder.from_results``."""
    variables = {}
    for name, arrays in (
        ("coef", model.coefs_),
        ("intercept", model.intercepts_),
        ("decoder_intercept", model.decoder_intercepts_),
    ):
        for i, value in enumerate(arrays):
            key = f"{name}_{i}"
            variables[key] = xr.Variable(tuple(f"{key}_{a}" for a in range(value.ndim)), value)
    variables.update(missing_model_variables(model))
    return xr.Dataset(
        variables, attrs={"n_layers": len(model.coefs_), "activation": str(model.activation)}
    )


register_method(
    Method(
        name="dkae",
        params=PARAMS,
        compute=compute,
        check_data=check_data,
        estimate=estimate,
        # missing values: the PCK prior models them; the network takes them filled
        handles_missing=True,
        description="Deep kernelized autoencoder: codes aligned with a prior kernel (PCK).",
        estimators=(DKAE_SCHEMA,),
        example={
            "data": {"reader": "sklearn", "name": "digits"},
            "params": {
                "n_components": 8,
                "hidden_layer_sizes": [32],
                "prior": "rbf",
                "max_iter": 2,
                "batch_size": 100,
            },
        },
        bad_data={"n_components": 2, "hidden_layer_sizes": [4], "max_iter": 1},
    )
)
