"""The in-memory description of loaded input data handed from readers to job steps."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass
class LoadedData:
    """Data read by a reader.

    Attributes
    ----------
    X : numpy.ndarray or dask.array.Array
        Samples × features, float; NaN marks a missing value.
    y : numpy.ndarray, optional
        Ground-truth labels when the source has them (used only for metrics).
    feature_names : list of str, optional
    meta : dict
        JSON-serialisable provenance (source path, shape, what preprocessing was applied).
    raster : Any, optional
        For image sources: an ``xarray.DataArray`` (band, y, x) with CRS and transform, the
        valid-pixel mask and whatever a raster method needs; ``X`` then holds the valid pixels.
    """

    X: Any
    y: np.ndarray | None = None
    feature_names: list[str] | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    raster: Any = None

    @property
    def n_samples(self) -> int:
        return int(self.X.shape[0])

    @property
    def n_features(self) -> int:
        return int(self.X.shape[1])
