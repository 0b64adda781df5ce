"""MSSC's affinity sample: hashed keys, per-partition smallest keys, chunking-independent."""

import dask
import dask.array as da
import numpy as np
import pytest

from dkernel.meanshift.graph import stream_partition_sizes, stream_stratified_sample
from dkernel.meanshift.sampling import pixel_keys, sample_sizes, stratified_sample


def _reference(labels, take, salt):
    """Slow, obvious: for each partition sort its rows by key and keep the first take[i]."""
    keys = pixel_keys(np.arange(labels.size), salt)
    chosen = []
    for i in range(take.size):
        rows = np.flatnonzero(labels == i)
        chosen.extend(rows[np.argsort(keys[rows], kind="stable")][: take[i]])
    return np.sort(np.asarray(chosen, dtype=np.int64))


def test_keys_are_uniform_and_depend_on_index_and_salt():
    k = pixel_keys(np.arange(200_000), 7)
    assert 0 <= k.min() and k.max() < 1
    assert abs(k.mean() - 0.5) < 0.005 and abs(np.mean(k < 0.1) - 0.1) < 0.003
    np.testing.assert_array_equal(pixel_keys(np.arange(5, 10), 7), k[5:10])
    assert not np.array_equal(pixel_keys(np.arange(10), 8), k[:10])


def test_sample_equals_the_reference_selection(rng):
    labels = rng.integers(-1, 6, 5000)  # -1: no partition, never sampled
    sizes = np.bincount(labels[labels >= 0], minlength=6)
    take = sample_sizes(sizes, 900)
    X = rng.normal(size=(5000, 3)).astype(np.float32)
    idx, ls, Xs = stratified_sample(X, labels, take, 11)
    np.testing.assert_array_equal(idx, _reference(labels, take, 11))
    np.testing.assert_array_equal(ls, labels[idx])
    np.testing.assert_array_equal(Xs, X[idx].astype(np.float64))
    assert Xs.dtype == np.float64


@pytest.mark.parametrize("chunks", [(5000,), (1,) * 7 + (4993,), (613, 1200, 87, 3100)])
def test_sample_is_the_same_for_any_chunking(rng, chunks):
    labels = rng.integers(0, 9, 5000)
    X = rng.normal(size=(5000, 2))
    sizes = np.bincount(labels, minlength=9)
    take = sample_sizes(sizes, 700)
    expected = stratified_sample(X, labels, take, 3)
    Xd = da.from_array(X, chunks=(chunks, 2))
    ld = da.from_array(labels, chunks=(chunks,))
    got = dask.compute(stream_stratified_sample(Xd, ld, take, 3, fan_in=3))[0]
    for a, b in zip(expected, got, strict=True):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(dask.compute(stream_partition_sizes(ld, 9))[0], sizes)
