"""Dask graphs of the mean-shift stream (:mod:`dkernel.meanshift.graph`)."""

from __future__ import annotations

import dask.array as da
import numpy as np
from dask.core import get_dependencies

from dkernel.meanshift import MeanShift
from dkernel.meanshift.graph import stream_assign, stream_stratified_sample
from dkernel.runtime.shared import release_shared


def _blobs(rng, n=3000):
    centres = np.array([[0.0, 0.0], [6.0, 0.0], [0.0, 6.0]])
    return centres[rng.integers(0, 3, n)] + rng.normal(size=(n, 2))


def test_each_chunks_assignment_has_only_its_chunk_as_input(client, rng):
    # the model is on every worker, not a key: a task with inputs on two workers is run
    # where the scheduler's queue balance says, moving its chunk (the 79 bytes per pixel of
    # an MSSC scene on 2 workers)
    X = _blobs(rng)
    model = MeanShift(random_state=0).fit(X).assign_model()
    Xd = da.from_array(X, chunks=(500, 2))
    try:
        labels = stream_assign(Xd, model)
        graph = dict(labels.__dask_graph__())
        assigns = [k for k in graph if str(k).startswith("_assign")]
        assert len(assigns) == 6
        assert all(len(get_dependencies(graph, k)) == 1 for k in assigns)
        np.testing.assert_array_equal(labels.compute(), model.assign(X))
    finally:
        release_shared(client)


def test_the_stratified_sample_pairs_each_chunk_with_its_labels_only(rng):
    X = da.from_array(_blobs(rng), chunks=(500, 2))
    labels = (X[:, 0] > 3).astype(np.int64)  # derived from X: shares its chunks
    take = np.array([50, 50])
    sample = stream_stratified_sample(X, labels, take, salt=1)
    graph = dict(sample.__dask_graph__())
    chunks = [k for k in graph if str(k).startswith("chunk_candidates")]
    assert len(chunks) == 6
    # inputs: the chunk of X and its labels (take travels by value)
    assert all(len(get_dependencies(graph, k)) == 2 for k in chunks)
    idx, lab, rows = sample.compute()
    assert np.bincount(lab).tolist() == [50, 50]
    np.testing.assert_array_equal(rows, X.compute()[idx])
