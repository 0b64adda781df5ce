"""The vendored Taizhou pair (``benchmarks/data/taizhou``) as a pixel table sample."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import rasterio

TAIZHOU = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "taizhou"


@pytest.fixture(scope="module")
def taizhou_sample() -> tuple[np.ndarray, np.ndarray]:
    """3 000 labelled pixels (seed 0): the 2000 bands then the 2003 bands, and change / no
    change."""
    dates = []
    for year in (2000, 2003):
        with rasterio.open(TAIZHOU / f"taizhou_{year}.tif") as src:
            dates.append(src.read().reshape(src.count, -1).T.astype(np.float64))
    with rasterio.open(TAIZHOU / "taizhou_reference.tif") as src:
        reference = src.read(1).ravel()
    labelled = np.flatnonzero(reference != 255)
    rows = np.sort(np.random.default_rng(0).choice(labelled, 3000, replace=False))
    return np.hstack([dates[0][rows], dates[1][rows]]), reference[rows]
