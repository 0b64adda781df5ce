"""Reader of the generated benchmark time series of [Lokse2020], Paper V: rows are time steps.

Importing this module registers ``series`` without importing ``dkernel.reservoir`` (which
needs scikit-learn).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dkernel.io.data import LoadedData
from dkernel.io.registry import Reader, register_reader
from dkernel.schema.params import Param

#: The series this reader generates (``dkernel.reservoir.series``).
SERIES = ("mackey_glass", "mso")


def load_series(name: str, n_samples: int, **_: Any) -> LoadedData:
    """``n_samples`` steps of the series ``name`` as one feature (rows are time steps)."""
    from dkernel.reservoir import series

    values = getattr(series, name)(n_samples)
    return LoadedData(
        X=np.asarray(values, dtype=np.float64).reshape(-1, 1),
        feature_names=[name],
        meta={"reader": "series", "name": name, "n_samples": int(n_samples)},
    )


register_reader(
    Reader(
        name="series",
        params=(
            Param("name", "str", choices=SERIES, doc="The series: Mackey-Glass (tau 17) or MSO."),
            Param("n_samples", "int", default=5000, low=20, high=10**7, doc="Time steps."),
        ),
        load=load_series,
        description="A generated benchmark series (Mackey-Glass, multiple superimposed "
        "oscillators), one row per time step.",
    )
)
