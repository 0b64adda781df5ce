"""MSSC's partition-stratified pixel sample, the same however the pixels are chunked.

Every pixel gets a uniform key from a hash of its row index and the job's seed; partition
``i`` contributes its ``take[i]`` pixels with the smallest keys, a uniform sample without
replacement of the partition. Because the keys depend on the index alone, each chunk of
pixels can keep its own smallest ``take[i]`` per partition and any tree of merges of those
candidates gives the global selection: the sample streams in O(sample) memory, is computed
in one pass with no global permutation, and is identical for one NumPy array, any Dask
chunking and any number of workers.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

#: Fewest pixels per partition in the affinity sample (all of a smaller partition).
MIN_SAMPLE_PER_PARTITION = 50

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)


class Candidates(NamedTuple):
    """Sampled rows: their global row index, partition, key and features."""

    index: np.ndarray
    labels: np.ndarray
    keys: np.ndarray
    rows: np.ndarray


def sample_sizes(sizes: np.ndarray, size: int) -> np.ndarray:
    """Pixels drawn from each partition: ``min(n_i, max(50, round(size · n_i / N)))``."""
    sizes = np.asarray(sizes, dtype=np.int64)
    n = int(sizes.sum())
    share = np.rint(size * sizes / max(n, 1))
    return np.minimum(sizes, np.maximum(MIN_SAMPLE_PER_PARTITION, share)).astype(np.int64)


def pixel_keys(index: np.ndarray, salt: int) -> np.ndarray:
    """Uniform ``[0, 1)`` key of every row index (SplitMix64 of ``index`` and ``salt``)."""
    z = np.asarray(index, dtype=np.uint64) * _GOLDEN + np.uint64(salt)
    z = (z ^ (z >> np.uint64(30))) * _MIX1
    z = (z ^ (z >> np.uint64(27))) * _MIX2
    z = z ^ (z >> np.uint64(31))
    return (z >> np.uint64(11)).astype(np.float64) * 2.0**-53


def _keep_smallest(c: Candidates, take: np.ndarray) -> Candidates:
    """Per partition, the ``take[label]`` candidates with the smallest keys (index breaks ties)."""
    order = np.lexsort((c.index, c.keys, c.labels))
    labels = c.labels[order]
    first = np.searchsorted(labels, labels, side="left")
    kept = order[(np.arange(labels.size) - first) < take[labels]]
    return Candidates(c.index[kept], c.labels[kept], c.keys[kept], c.rows[kept])


def chunk_candidates(
    rows: np.ndarray, labels: np.ndarray, start: int, take: np.ndarray, salt: int
) -> Candidates:
    """The candidates of one chunk of pixels whose first global row index is ``start``.

    Rows with a negative label (no partition) are never sampled.
    """
    labels = np.asarray(labels, dtype=np.int64)
    ok = np.flatnonzero(labels >= 0)
    index = ok.astype(np.int64) + int(start)
    return _keep_smallest(
        Candidates(index, labels[ok], pixel_keys(index, salt), np.asarray(rows)[ok]), take
    )


def merge_candidates(parts: list[Candidates], take: np.ndarray) -> Candidates:
    """Merge the candidates of several chunks into the candidates of their union."""
    return _keep_smallest(Candidates(*(np.concatenate(f) for f in zip(*parts, strict=True))), take)


def finish_sample(c: Candidates, take: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(index, labels, rows as float64)`` of the sample, in row order."""
    c = _keep_smallest(c, take)
    order = np.argsort(c.index, kind="stable")
    return c.index[order], c.labels[order], np.asarray(c.rows[order], dtype=np.float64)


def stratified_sample(
    X: np.ndarray, labels: np.ndarray, take: np.ndarray, salt: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The whole sample of in-memory ``X`` (see the module docstring)."""
    return finish_sample(chunk_candidates(X, labels, 0, take, salt), take)
