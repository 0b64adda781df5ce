"""A killed deep-model job continues its training with ``dkernel run --resume`` (issue 55, item
3): real ``dkernel run`` subprocesses, killed (SIGKILL: nothing cleaned up) or terminated
(SIGTERM: the store is marked failed) after a few epochs; the resumed job starts from the
checkpoint kept in its results store and ends with the arrays of a training that never stopped.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest
import yaml
import zarr

pytest.importorskip("torch")

from dkernel.storage.checkpoint import CHECKPOINT_GROUP  # noqa: E402
from tests.cli_run import start_cli  # noqa: E402

JOB_TIMEOUT = 240

#: Small networks on small tables, with small batches so that an epoch lasts long enough for
#: the test to stop the job between two of them.
JOBS = {
    "dkae": {
        "data": {"reader": "sklearn", "name": "digits"},
        "params": {
            "n_components": 4,
            "hidden_layer_sizes": [16],
            "prior": "rbf",
            "batch_size": 8,
            "max_iter": 16,
        },
    },
    "ddc": {
        "data": {"reader": "sklearn", "name": "iris", "standardize": True},
        "params": {"n_clusters": 3, "batch_size": 4, "max_iter": 40},
    },
}
OWNER = {"dkae": "DeepKernelizedAutoencoder", "ddc": "DeepDivergenceClustering"}


def _spec(tmp: Path, method: str) -> Path:
    spec = {"name": f"{method}-resume", "seed": 0, "method": method, **JOBS[method]}
    path = tmp / f"{method}.yaml"
    path.write_text(yaml.safe_dump({**spec, "output": "unused.zarr"}, sort_keys=False))
    return path


def _cli(spec: Path, out: Path, *extra: str) -> subprocess.Popen:
    args = ["run", str(spec), "--output", str(out), "--no-progress", *extra]
    return start_cli(args, cwd=spec.parent)


def _saves(store: Path) -> int:
    """Epoch checkpoints saved so far (0 before the first; a read racing a save counts 0)."""
    try:
        group = zarr.open_group(str(store), mode="r")[CHECKPOINT_GROUP]
        return max(dict(group.attrs.get("saves", {})).values(), default=0)
    except (KeyError, FileNotFoundError, ValueError, OSError):
        return 0


def _stop_after_saves(proc: subprocess.Popen, store: Path, saves: int, sig: int) -> None:
    deadline = time.monotonic() + JOB_TIMEOUT
    while _saves(store) < saves:
        if proc.poll() is not None:
            pytest.fail(f"the job ended before its checkpoint was saved: {proc.stderr.read()}")
        if time.monotonic() > deadline:
            os.killpg(proc.pid, signal.SIGKILL)
            pytest.fail(f"no checkpoint after {JOB_TIMEOUT} s")
        time.sleep(0.02)
    if sig == signal.SIGKILL:
        os.killpg(proc.pid, sig)  # the job and anything it started: nothing cleans up
    else:
        proc.send_signal(sig)  # to the runner only, as `timeout` does
    proc.communicate(timeout=JOB_TIMEOUT)


@pytest.mark.parametrize(
    ("method", "sig"),
    [("dkae", signal.SIGKILL), ("ddc", signal.SIGTERM)],
    ids=["dkae-sigkill", "ddc-sigterm"],
)
def test_a_killed_training_resumes_from_its_last_epoch(tmp_path, ops, method, sig) -> None:
    from dkernel.jobs.runner import run_job

    spec = _spec(tmp_path, method)
    reference = tmp_path / "reference.zarr"
    run_job(spec, output=reference, progress=False, quiet=True)
    assert CHECKPOINT_GROUP not in zarr.open_group(str(reference), mode="r")

    out = tmp_path / "killed.zarr"
    _stop_after_saves(_cli(spec, out), out, 3, sig)
    root = zarr.open_group(str(out), mode="r")
    assert root.attrs["status"] == ("failed" if sig == signal.SIGTERM else "running")
    stopped_at = _saves(out)
    assert stopped_at >= 3

    resumed = _cli(spec, out, "--resume")
    _, err = resumed.communicate(timeout=JOB_TIMEOUT)
    assert resumed.returncode == 0, err
    max_iter = JOBS[method]["params"]["max_iter"]
    found = re.search(rf"{OWNER[method]} resumes .*after epoch (\d+) of {max_iter} from the", err)
    assert found, err
    assert stopped_at <= int(found.group(1)) < max_iter  # from its last save, not from 0
    root = zarr.open_group(str(out), mode="r")
    assert root.attrs["status"] == "complete" and CHECKPOINT_GROUP not in root
    ops.assert_stores_identical(out, reference)
