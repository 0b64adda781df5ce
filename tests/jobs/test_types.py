"""What a job step is given (:mod:`dkernel.jobs.types`)."""

from __future__ import annotations

import warnings

import dask
import numpy as np
import pytest

from dkernel.jobs.runner import run_job
from dkernel.jobs.spec import validate_spec
from dkernel.runtime.persist import LARGE_GRAPH_SETTING
from dkernel.storage import open_results


@pytest.mark.parametrize(
    ("method", "threshold"),
    [("spectral-clustering", "1MB"), ("jrc", "400kB")],  # jrc's scores: 20 000 x 4 float64
)
def test_in_memory_rows_reach_the_workers_without_a_large_graph_warning(
    method, threshold, tmp_path, client
):
    """A table read whole (csv, npy) is persisted on the cluster, sent once on purpose; that
    send printed ``distributed``'s "Sending large graph of size 30.52 MiB ... Consider loading
    the data with Dask directly" in the job's log (1e6 rows x 4 columns, default threshold),
    and so did the write of ``jrc``'s in-memory scores."""
    X = np.random.default_rng(0).normal(size=(20_000, 8))  # 1.3 MB as float64
    np.save(tmp_path / "x.npy", X)
    spec = validate_spec(
        {
            "name": "t",
            "data": {"reader": "npy", "path": str(tmp_path / "x.npy")},
            "method": method,
            "params": {"n_clusters": 3},
            "output": "unused.zarr",
        }
    )
    with (
        dask.config.set({LARGE_GRAPH_SETTING: threshold}),
        warnings.catch_warnings(record=True) as w,
    ):
        warnings.simplefilter("always")
        out = run_job(spec, output=tmp_path / "x.zarr", client=client, progress=False)
    assert open_results(out).attrs["status"] == "complete"
    assert [str(x.message) for x in w if "large graph" in str(x.message)] == []


def test_a_table_read_whole_travels_in_the_jobs_graphs_without_a_warning(tmp_path, client):
    """``kernel-decomposition``'s exact path hands the rows to the estimator as a Dask array
    whose graph holds them: by design for a table read whole, and no warning of it."""
    X = np.random.default_rng(0).normal(size=(3000, 60))  # 1.4 MB as float64
    np.save(tmp_path / "x.npy", X)
    spec = validate_spec(
        {
            "name": "t",
            "data": {"reader": "npy", "path": str(tmp_path / "x.npy")},
            "method": "kernel-decomposition",
            "params": {"n_clusters": 3},
            "output": "unused.zarr",
        }
    )
    with dask.config.set({LARGE_GRAPH_SETTING: "1MB"}), warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        out = run_job(spec, output=tmp_path / "x.zarr", client=client, progress=False)
        # the allowance lasts as long as the job
        assert dask.config.get(LARGE_GRAPH_SETTING) == "1MB"
    assert open_results(out).attrs["status"] == "complete"
    assert [str(x.message) for x in w if "large graph" in str(x.message)] == []
