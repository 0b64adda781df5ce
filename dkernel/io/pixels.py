"""Pixels of an image, strip by strip: the valid mask, band statistics, features, label maps.

An image is a ``(band, y, x)`` Dask array chunked in full-width row strips. Everything here
works on one strip at a time, so memory is set by the strip, not by the scene: the valid mask
is recomputed from a strip's bands wherever it is needed (a comparison per pixel, cheaper than
holding one byte per pixel of a 10⁸-pixel scene in the client), the band statistics are one
pass of per-strip summaries, the features of a strip's valid pixels are one task, and a label
map goes back onto the grid one strip per task.

The per-strip functions are plain NumPy (they run in workers); the ``*_graph`` functions
assemble them into Dask arrays.
"""

from __future__ import annotations

from typing import Any

import dask
import dask.array as da
import numpy as np

from dkernel._budget import STRIP_PIXELS, rows_for_budget
from dkernel.rows import joint_blocks
from dkernel.runtime.progress import compute_parts


def strip_rows(n_rows: int, n_cols: int) -> int:
    """Rows of a full-width strip of about :data:`STRIP_PIXELS` pixels (at least 1)."""
    return rows_for_budget(STRIP_PIXELS, n_cols, 1, high=n_rows)


def strip_valid(block: np.ndarray, nodata: float | None) -> np.ndarray:
    """Valid pixels of a ``(band, rows, cols)`` block: not NaN or infinite in any band, and not
    every band equal to ``nodata`` (GDAL's dataset mask: a dark pixel with one zero band is
    data)."""
    valid = np.ones(block.shape[1:], dtype=bool)
    if np.issubdtype(block.dtype, np.floating):
        valid &= np.isfinite(block).all(axis=0)
    if nodata is not None and not (isinstance(nodata, float) and np.isnan(nodata)):
        valid &= ~(block == nodata).all(axis=0)
    return valid


def valid_graph(data: da.Array, nodata: float | None) -> da.Array:
    """The lazy ``(y, x)`` valid mask of a ``(band, y, x)`` image, chunked like its strips."""
    return data.map_blocks(strip_valid, nodata, drop_axis=0, dtype=bool)


def _strip_values(block: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """The valid pixels' band values, float32, in row-major order: (n_valid, n_bands)."""
    return block.astype(np.float32, copy=False).transpose(1, 2, 0)[valid]


def strip_summary(block: np.ndarray, valid: np.ndarray) -> dict[str, Any]:
    """Count, min, max (float32), sum and sum of squared deviations from the strip mean
    (float64) of a strip's valid pixels, per band."""
    vals = _strip_values(block, valid)
    n = int(vals.shape[0])
    if n == 0:
        return {"n": 0}
    total = vals.sum(axis=0, dtype=np.float64)
    return {
        "n": n,
        "min": vals.min(axis=0),
        "max": vals.max(axis=0),
        "sum": total,
        "m2": ((vals - total / n) ** 2).sum(axis=0, dtype=np.float64),
    }


def combine_summaries(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """Merge per-strip summaries: min, max, mean and standard deviation over all valid pixels
    (the mean as Σ sums / Σ n, the variance as (Σ M2ᵢ + Σ nᵢ (μᵢ − μ)²) / n, as Dask's
    ``mean`` and ``std`` aggregate their chunks)."""
    parts = [p for p in parts if p["n"] > 0]
    if not parts:
        return {"n": 0}
    n = np.array([p["n"] for p in parts], dtype=np.float64)
    sums = np.stack([p["sum"] for p in parts])
    mean = sums.sum(axis=0) / n.sum()
    strip_means = sums / n[:, None]
    m2 = np.stack([p["m2"] for p in parts]).sum(axis=0)
    m2 = m2 + (n[:, None] * (strip_means - mean) ** 2).sum(axis=0)
    return {
        "n": int(n.sum()),
        "min": np.min(np.stack([p["min"] for p in parts]), axis=0),
        "max": np.max(np.stack([p["max"] for p in parts]), axis=0),
        "mean": mean,
        "std": np.sqrt(m2 / n.sum()),
    }


def strip_features(
    block: np.ndarray,
    valid: np.ndarray,
    row0: int,
    offset: np.ndarray,
    width: np.ndarray,
    coord_factor: float,
) -> np.ndarray:
    """Scaled band values of a strip's valid pixels, then (col, row) · ``coord_factor`` when it
    is > 0: (n_valid, n_bands [+ 2]) float32."""
    X = (_strip_values(block, valid) - offset) / width
    if coord_factor > 0:
        r, c = np.nonzero(valid)
        coords = np.stack([c, r + row0], axis=1).astype(np.float32) * np.float32(coord_factor)
        X = np.concatenate([X, coords], axis=1)
    return np.ascontiguousarray(X, dtype=np.float32)


def strip_labels(labels: np.ndarray, valid: np.ndarray, nodata: Any, dtype: Any) -> np.ndarray:
    """A strip of the label (or score) map: ``labels`` at the valid pixels, ``nodata`` else."""
    out = np.full(valid.shape, nodata, dtype=dtype)
    out[valid] = labels
    return out


def _strip_blocks(data: da.Array, valid: da.Array) -> list[tuple[Any, Any, int, int]]:
    """(data block, valid block, first row, rows) of every strip, as delayed objects.

    ``data`` is chunked in full-width row strips and ``valid`` in the same rows
    (:func:`dkernel.io.raster.image_strips`)."""
    blocks, masks = (b.reshape(-1) for b in joint_blocks(data, valid))
    starts = np.cumsum((0, *data.chunks[1]))[:-1]
    return [
        (b, m, int(r0), int(n))
        for b, m, r0, n in zip(blocks, masks, starts, data.chunks[1], strict=True)
    ]


def summaries(data: da.Array, valid: da.Array) -> tuple[list[int], dict[str, Any]]:
    """One pass: the valid pixels per strip and the combined band statistics."""
    summary = dask.delayed(strip_summary)
    parts = compute_parts([summary(b, m) for b, m, _, _ in _strip_blocks(data, valid)])
    return [int(p["n"]) for p in parts], combine_summaries(parts)


def features_graph(
    data: da.Array,
    valid: da.Array,
    counts: list[int],
    offset: np.ndarray,
    width: np.ndarray,
    coord_factor: float,
) -> da.Array:
    """The features of every valid pixel, one chunk per strip (``counts`` rows each)."""
    n_out = int(data.shape[0]) + (2 if coord_factor > 0 else 0)
    off = np.asarray(offset, dtype=np.float32)
    wid = np.asarray(width, dtype=np.float32)
    parts = [
        da.from_delayed(
            dask.delayed(strip_features)(b, m, r0, off, wid, coord_factor),
            shape=(n, n_out),
            dtype=np.float32,
        )
        for (b, m, r0, _), n in zip(_strip_blocks(data, valid), counts, strict=True)
    ]
    return da.concatenate(parts, axis=0)


def grid_graph(
    values: Any, data: da.Array, valid: da.Array, counts: list[int], *, nodata: Any, dtype: Any
) -> da.Array:
    """Per-valid-pixel ``values`` (N,) back on the ``(y, x)`` grid, one task per strip."""
    values = values if isinstance(values, da.Array) else da.from_array(np.asarray(values))
    values = values.rechunk((tuple(counts),))
    # unoptimised, like the mask: values read after it (the partitions) follow its task
    value_blocks, masks = (b.reshape(-1) for b in joint_blocks(values, valid))
    parts = [
        da.from_delayed(
            dask.delayed(strip_labels)(v, m, nodata, dtype),
            shape=(rows, int(data.shape[2])),
            dtype=dtype,
        )
        for v, m, rows in zip(value_blocks, masks, data.chunks[1], strict=True)
    ]
    return da.concatenate(parts, axis=0)
