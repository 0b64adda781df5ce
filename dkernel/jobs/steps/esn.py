"""``method: esn`` — :class:`~dkernel.EchoStateNetwork`: a fixed random reservoir whose states
are reduced by kernel PCA (or PCA) before a ridge readout, [Lokse2020] Paper V.

The rows are the time steps of one series (any table reader, or the ``series`` reader's
generated benchmarks). The network learns to forecast ``horizon`` steps ahead on the first
``1 - test_fraction`` of the steps and then runs over the whole series from the zero state.
Writes ``/forecast``: the prediction and the target at every step (``(time, feature)``), with
the normalised RMSE of the held-out steps and the training R² as attributes. The parameters
are the estimator's, derived from it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator

from dkernel._lazy import deferred
from dkernel.errors import InvalidInputError
from dkernel.io.data import LoadedData
from dkernel.jobs.outputs import Group, Output, Timing
from dkernel.jobs.registry import Cost, JobContext, Method, register_method
from dkernel.schema.estimator import EstimatorSchema
from dkernel.schema.params import Param

np = deferred("numpy")
xr = deferred("xarray")
nrmse = deferred("dkernel.reservoir.series", "nrmse")
as_numpy = deferred("dkernel._validation", "as_numpy")

logger = logging.getLogger(__name__)

#: EchoStateNetwork's parameters, derived from the estimator.
ESN_SCHEMA = EstimatorSchema(
    "dkernel.reservoir.esn:EchoStateNetwork",
    exclude={"kernel_params": "the kernels' reference samples keep their defaults"},
)

PARAMS = (
    *ESN_SCHEMA.params,
    Param("horizon", "int", default=1, low=1, doc="Steps ahead the network forecasts."),
    Param(
        "test_fraction",
        "float",
        default=0.2,
        low=0.0,
        high=1.0,
        low_open=True,
        high_open=True,
        doc="Share of the last steps held out of training (scored by the NRMSE).",
    ),
)


def _split(params: dict, n: int) -> tuple[int, int]:
    """Steps of inputs (``n - horizon``) and of training among them."""
    steps = n - int(params["horizon"])
    return steps, int(round(steps * (1.0 - float(params["test_fraction"]))))


def check_data(params: dict, data: LoadedData) -> None:
    steps, train = _split(params, data.n_samples)
    if train < 2 * params["washout"] or steps - train < 1:
        raise InvalidInputError(
            f"{data.n_samples} rows (time steps) leave {max(train, 0)} for training and {max(steps - train, 0)} "
            f"for testing at horizon {params['horizon']}, test_fraction {params['test_fraction']}; "
            f"training needs at least twice washout ({2 * params['washout']}): use a longer "
            "series, a smaller washout or a smaller test_fraction."
        )


def estimate(params: dict, n_samples: int, n_features: int) -> Cost:
    r = int(params["n_reservoir"])
    m = min(int(params["n_landmarks"]), n_samples)
    return Cost(
        # the states of every step, the landmark kernel and basis, the readout's features
        memory_bytes=8.0 * (3 * n_samples * r + 3 * m * m + n_samples * (m + n_features)),
        disk_bytes=8.0 * 2 * n_samples * n_features,
        what=f"an echo state network of {r} neurons over {n_samples} steps",
    )


def compute(ctx: JobContext) -> Iterator[Output]:
    p = ctx.params
    series = as_numpy(ctx.data.X, np.float64)
    h = int(p["horizon"])
    steps, train = _split(p, len(series))
    inputs, targets = series[:-h], series[h:]
    t = time.perf_counter()
    esn = ESN_SCHEMA.build(p, random_state=ctx.seed).fit(inputs[:train], targets[:train])
    yield Timing.since("esn_fit", t)
    t = time.perf_counter()
    prediction = esn.predict(inputs)
    score = float(nrmse(targets[train:], prediction[train:]))
    logger.info(
        f"test NRMSE {score:.4g} over {steps - train} steps, training R² {esn.train_score_:.4f}"
    )
    yield Group(
        "forecast",
        xr.Dataset(
            {
                "prediction": (("time", "feature"), prediction),
                "target": (("time", "feature"), targets),
            },
            coords={"time": np.arange(h, len(series))},
            attrs={
                "horizon": h,
                "train_steps": train,
                "test_nrmse": score,
                "train_r2": float(esn.train_score_),
                "n_components": None if esn.n_components_ is None else int(esn.n_components_),
            },
        ),
    )
    yield Timing.since("esn_predict", t)


register_method(
    Method(
        name="esn",
        params=PARAMS,
        compute=compute,
        check_data=check_data,
        estimate=estimate,
        description="Echo state network forecasting a series, its states reduced by kernel PCA.",
        estimators=(ESN_SCHEMA,),
        example={
            "data": {"reader": "series", "name": "mso", "n_samples": 400},
            "params": {"n_reservoir": 50, "n_components": 20, "n_landmarks": 100, "washout": 20},
        },
        bad_data={"washout": 10},
    )
)
