"""Labels do not depend on where the job runs or where its rows live (issue 56 item 5).

A 6 000-row table in six row chunks of a Zarr store, clustered by ``spectral-clustering`` at its
defaults (above 5 000 rows: the landmark bipartite path, whose passes read the chunks as
separate tasks): on one worker process, on two, and with the same store on S3 (the loopback
server) on two, the labels and the embedding are the same, bit for bit.
"""

from __future__ import annotations

import numpy as np
import pytest
import yaml

from dkernel.storage import open_results
from tests.cli_run import run_cli

#: end to end (three jobs on embedded process clusters): tasks.py test --fast skips it
pytestmark = pytest.mark.slow


def _table(path) -> None:
    import zarr
    from sklearn.datasets import make_blobs

    X, y = make_blobs(6000, n_features=4, centers=3, cluster_std=1.5, random_state=0)
    group = zarr.open_group(path, mode="w")
    group.create_array("X", shape=X.shape, chunks=(1000, 4), dtype="float32")[...] = X
    group.create_array("y", shape=y.shape, chunks=(6000,), dtype="int64")[...] = y


def _spec(tmp, name: str, path: str) -> str:
    spec = tmp / f"{name}.yaml"
    spec.write_text(
        yaml.safe_dump(
            {
                "name": name,
                "seed": 0,
                "data": {"reader": "zarr", "path": path, "array": "X", "label_array": "y"},
                "method": "spectral-clustering",
                "params": {"n_clusters": 3},
                "output": str(tmp / f"{name}.zarr"),
            }
        )
    )
    return str(spec)


def _run(specs: list[str], workers: int) -> None:
    """``dkernel run SPECS`` on one embedded cluster of ``workers`` processes."""
    code, text = run_cli(
        ["run", *specs, "--no-progress", "--workers", str(workers), "--threads", "1"]
    )
    assert code == 0, text


def _results(tmp, name: str, workers: int) -> dict[str, np.ndarray]:
    tree = open_results(tmp / f"{name}.zarr")
    assert tree.attrs["runtime"]["n_workers"] == workers
    return {
        "labels": np.asarray(tree["labels"]["labels"].values),
        "embedding": np.asarray(tree["embedding"]["embedding"].values),
        "truth": np.asarray(tree["input"]["labels_true"].values),
    }


def test_labels_equal_on_one_and_two_workers_and_from_s3(tmp_path, s3_bucket) -> None:
    import s3fs
    from sklearn.metrics import adjusted_rand_score

    local = tmp_path / "table.zarr"
    _table(local)
    s3fs.S3FileSystem(skip_instance_cache=True).put(
        str(local), f"{s3_bucket}/table.zarr", recursive=True
    )
    _run([_spec(tmp_path, "one", str(local))], 1)
    # two jobs on one cluster of two workers (one cluster start instead of two)
    _run(
        [_spec(tmp_path, "two", str(local)), _spec(tmp_path, "s3", f"s3://{s3_bucket}/table.zarr")],
        2,
    )
    one, two, remote = (_results(tmp_path, n, w) for n, w in (("one", 1), ("two", 2), ("s3", 2)))
    assert adjusted_rand_score(one["truth"], one["labels"]) > 0.95
    for other in (two, remote):
        np.testing.assert_array_equal(other["labels"], one["labels"])
        np.testing.assert_array_equal(other["embedding"], one["embedding"])
