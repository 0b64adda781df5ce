"""The in-memory description of loaded input data handed from readers to job steps."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from dkernel.errors import InvalidInputError

#: The source checkout this package runs from (its ``../shared/data`` is the fallback).
CHECKOUT = Path(__file__).resolve().parents[2]
DATA_HELP = (
    "Set DKERNEL_DATA to the folder holding the datasets and their MANIFEST.md (CI uses "
    "../shared/data beside the checkout; see the README, 'Datasets')."
)


def data_root(required: bool = True) -> Path | None:
    """The datasets folder: ``$DKERNEL_DATA``, else ``../shared/data`` beside a source checkout.

    The fallback is the one ``python3 tasks.py`` applies, so ``dkernel run`` from a checkout
    finds the same data as the test suite.

    Raises
    ------
    InvalidInputError
        When ``required`` and neither exists (the message says which variable to set).
    """
    env = os.environ.get("DKERNEL_DATA")
    if env:
        return Path(env).expanduser()
    candidate = CHECKOUT.parent / "shared" / "data"
    if (CHECKOUT / "pyproject.toml").is_file() and candidate.is_dir():
        return candidate
    if required:
        raise InvalidInputError(
            f"DKERNEL_DATA is not set and no ../shared/data was found. {DATA_HELP}"
        )
    return None


def expand_data_path(path: str | os.PathLike) -> Path:
    """A reader's path with ``~`` and environment variables expanded; ``${DKERNEL_DATA}`` /
    ``$DKERNEL_DATA`` resolve through :func:`data_root` (so never stay unexpanded)."""
    text = str(path)
    if "DKERNEL_DATA" in text and not os.environ.get("DKERNEL_DATA"):
        root = str(data_root())
        text = text.replace("${DKERNEL_DATA}", root).replace("$DKERNEL_DATA", root)
    return Path(os.path.expandvars(text)).expanduser()


def package_data_path(name: str) -> Path:
    """Path of a file vendored in ``dkernel/data`` (e.g. the demo Landsat scene)."""
    path = Path(str(resources.files("dkernel") / "data" / name))
    if not path.is_file():
        raise InvalidInputError(
            f"dkernel ships no data file {name!r}; available: "
            f"{', '.join(sorted(p.name for p in path.parent.iterdir() if p.is_file()))}."
        )
    return path


def resolve_path(path: str | os.PathLike) -> Path:
    """Expand ``~`` and ``$VARS``; ``package:NAME`` names a file vendored in ``dkernel/data``."""
    text = str(path)
    if text.startswith("package:"):
        return package_data_path(text.split(":", 1)[1])
    return expand_data_path(text)


#: The image readers' per-band scalings of the features.
SCALES = ("minmax", "standardize", "none")

#: Largest ``coord_scale`` of the image readers: the band features are scaled to about
#: [0, 1], so coordinates a million times longer already leave the bands no say; beyond, the
#: float32 features overflow (1e300 is ``inf`` in float32) and fail only once the cluster runs.
MAX_COORD_SCALE = 1e6


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
