"""Results stores and inputs on Google Cloud Storage (``gs://``) and Azure Blob (``az://``),
end to end against real local emulators (issue 30): ``gcp-storage-emulator`` with gcsfs and
Azurite with adlfs (the ``gcs_server`` and ``azure_server`` fixtures), no mocks.

For each backend: a CSV table in the bucket → ``spectral-clustering`` → a results store in
the bucket (``dkernel run`` subprocesses), read back lazily by ``open_results`` in a fresh
process with the arrays of the same job run locally; a missing bucket or container exits 2
writing nothing; and the lease of an object store without conditional writes
(``docs/store_lock.md``): a store with a lease, live or stale, is refused to a second
writer, to ``--overwrite`` and to ``--resume``, naming the holder.
"""

from __future__ import annotations

import io
import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from dkernel.errors import StoreError
from dkernel.storage import remote
from dkernel.storage.lock import LEASE_FILE, acquire_lease
from tests.cli_run import start_cli

REPO = Path(__file__).resolve().parents[2]
JOB_TIMEOUT = 300
PARAMS = {"n_clusters": 3, "n_init": 5}


@dataclass
class Backend:
    """A bucket (container) of one emulator."""

    scheme: str
    bucket: str
    secret: str  # what must never appear in a log or an object

    def fs(self) -> Any:
        """A fresh file system of the emulator (no cached listings)."""
        if self.scheme == "gs":
            import gcsfs.core

            return gcsfs.core.GCSFileSystem(
                endpoint_url=os.environ["STORAGE_EMULATOR_HOST"],
                token="anon",
                skip_instance_cache=True,
            )
        import adlfs

        return adlfs.AzureBlobFileSystem(
            connection_string=os.environ["AZURE_STORAGE_CONNECTION_STRING"],
            skip_instance_cache=True,
        )

    def url(self, path: str) -> str:
        return f"{self.scheme}://{self.bucket}/{path}"


@pytest.fixture(scope="module", params=["gs", "az"])
def backend(request) -> Backend:
    """A fresh bucket on the GCS emulator, or a fresh container on Azurite."""
    if request.param == "gs":
        request.getfixturevalue("gcs_server")
        secret = "dkernel-no-secret-on-gcs"  # anonymous access: nothing to leak
    else:
        secret = request.getfixturevalue("azure_server").split("AccountKey=")[1].split(";")[0]
    backend = Backend(request.param, f"dk-{request.param}-{os.getpid()}", secret)
    backend.fs().mkdir(backend.bucket)
    return backend


def _spec(tmp: Path, data_path: str, output: str = "x.zarr") -> Path:
    spec = {
        "name": "table",
        "seed": 0,
        "data": {"reader": "csv", "path": data_path},
        "method": "spectral-clustering",
        "params": PARAMS,
        "output": output,
    }
    path = tmp / "table.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def _cli(spec: Path, *args: str) -> subprocess.Popen:
    return start_cli(
        ["run", str(spec), *args, "--no-progress", "--workers", "1", "--threads", "1"],
        cwd=spec.parent,
    )


def _finish(proc: subprocess.Popen, timeout: float = JOB_TIMEOUT) -> tuple[int, str]:
    try:
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        raise
    return proc.returncode, err


def _table(path: Path) -> None:
    from sklearn.datasets import make_blobs

    X, _ = make_blobs(n_samples=300, centers=3, cluster_std=0.5, random_state=0)
    np.savetxt(path, X, delimiter=",")


def _arrays(tree: Any) -> dict[str, np.ndarray]:
    """Every data variable of a results tree, by ``group/name``."""
    return {
        f"{node.path}/{name}": np.asarray(var.values)
        for node in tree.subtree
        for name, var in node.dataset.data_vars.items()
    }


@dataclass
class LocalRun:
    """The table job run with the CSV and the store on the local disk, in the background
    (it runs while the first remote job does)."""

    csv: Path
    proc: subprocess.Popen
    result: Path | None = None

    def store(self) -> Path:
        """The local results store, once the job has finished."""
        if self.result is None:
            code, err = _finish(self.proc)
            assert code == 0, err
            self.result = self.csv.parent / "local.zarr"
        return self.result


@pytest.fixture(scope="module")
def local_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("local")
    _table(tmp / "table.csv")
    spec = _spec(tmp, str(tmp / "table.csv"))
    run = LocalRun(tmp / "table.csv", _cli(spec, "--output", str(tmp / "local.zarr")))
    yield run
    run.store()


@pytest.fixture(scope="module")
def remote_run(backend, local_run, tmp_path_factory) -> tuple[str, str, Path]:
    """The same job with its CSV input and its store in the bucket: (url, stderr, cwd)."""
    tmp = tmp_path_factory.mktemp(backend.scheme)
    backend.fs().put_file(str(local_run.csv), f"{backend.bucket}/in/table.csv")
    url = backend.url("out/table.zarr")
    spec = _spec(tmp, backend.url("in/table.csv"))
    code, err = _finish(_cli(spec, "--output", url))
    assert code == 0, err
    return url, err, tmp


def test_as_location_accepts_gs_and_az_urls() -> None:
    assert remote.as_location("gs://bkt/results//wine.zarr/") == "gs://bkt/results/wine.zarr"
    assert remote.as_location("gcs://bkt/wine.zarr") == "gcs://bkt/wine.zarr"
    assert remote.as_location("az://container/a/wine.zarr") == "az://container/a/wine.zarr"
    assert remote.as_location("abfs://container/wine.zarr") == "abfs://container/wine.zarr"
    assert remote.join("gs://bkt/results", "a/b.zarr") == "gs://bkt/results/a/b.zarr"
    for bad, message in [
        ("gs:///wine.zarr", "names no bucket"),
        ("az://container/../wine.zarr", "'.' and '..' are not allowed"),
        ("az://user:pw@container/wine.zarr", "credentials in a URL are refused"),
    ]:
        with pytest.raises(StoreError, match=message):
            remote.as_location(bad)


def test_job_reads_csv_from_and_writes_store_to_the_bucket(backend, remote_run) -> None:
    url, err, tmp = remote_run
    assert "complete in" in err and url in err
    assert sorted(p.name for p in tmp.iterdir()) == ["table.yaml"]  # no local folder
    fs = backend.fs()
    keys = fs.find(url)
    assert any(k.endswith("labels/labels/zarr.json") for k in keys), keys
    assert not any(LEASE_FILE in k for k in keys)  # released, no probe left
    root = json.loads(fs.cat(f"{backend.bucket}/out/table.zarr/zarr.json"))
    assert root["attributes"]["status"] == "complete"
    for key in keys:  # the account key in no metadata object, nor in the log
        if key.endswith("zarr.json"):
            assert backend.secret.encode() not in fs.cat(key), key
    assert backend.secret not in err


def test_open_results_reads_the_bucket_lazily_in_a_fresh_process(
    backend, remote_run, local_run
) -> None:
    import dkernel

    url = remote_run[0]
    code = (
        "import sys, numpy as np, dask.array as da, dkernel\n"
        "tree = dkernel.open_results(sys.argv[1])\n"
        "out = {}\n"
        "for node in tree.subtree:\n"
        "    for name, var in node.dataset.data_vars.items():\n"
        "        assert isinstance(var.data, da.Array), (node.path, name)  # lazy\n"
        "        out[f'{node.path}/{name}'] = np.asarray(var.values)\n"
        "np.savez(sys.stdout.buffer, **out)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, url], capture_output=True, timeout=120, cwd=REPO
    )
    assert proc.returncode == 0, proc.stderr.decode()
    with np.load(io.BytesIO(proc.stdout)) as got:
        remote_arrays = {key: got[key] for key in got.files}
    local_arrays = _arrays(dkernel.open_results(local_run.store()))
    assert sorted(remote_arrays) == sorted(local_arrays) and local_arrays
    for key, value in local_arrays.items():
        assert remote_arrays[key].dtype == value.dtype, key
        np.testing.assert_array_equal(remote_arrays[key], value, err_msg=key)


def test_lease_without_conditional_writes_is_never_shared(backend) -> None:
    """In this process: a store with no lease is taken (not atomically); a second writer is
    refused while the first holds it; the release deletes the lease object."""
    url = backend.url(f"leases/held-{os.getpid()}.zarr")
    key = f"{backend.bucket}/leases/held-{os.getpid()}.zarr/{LEASE_FILE}"
    lease = acquire_lease(url, command="first writer")
    try:
        assert lease.atomic is False
        assert backend.fs().exists(key)
        with pytest.raises(StoreError) as refused:
            acquire_lease(url, command="second writer")
        message = str(refused.value)
        assert f"pid {os.getpid()} on host {socket.gethostname()}" in message
        assert "no conditional writes" in message and f"{url}/{LEASE_FILE}" in message
    finally:
        lease.release()
    assert not backend.fs().exists(key)


def test_missing_bucket_and_stale_lease_exit_2_writing_nothing(
    backend, local_run, tmp_path
) -> None:
    """A lease left by a writer dead for an hour (a live one: the test above): a plain run,
    ``--overwrite`` and ``--resume`` are each refused with exit 2 before any cluster starts,
    naming the holder and the object to delete, and the lease is left as it was. A missing
    bucket (container) is refused too, creating nothing (run at the same time)."""
    url = backend.url(f"leases/stale-{os.getpid()}.zarr")
    key = f"{backend.bucket}/leases/stale-{os.getpid()}.zarr/{LEASE_FILE}"
    lease = {"host": "node17", "pid": 48211, "heartbeat": time.time() - 3600, "token": "t"}
    lease.update(started_iso="2026-11-25T03:33:50+00:00", command="dkernel job 'table'")
    body = json.dumps(lease).encode()
    backend.fs().pipe_file(key, body)
    spec = _spec(tmp_path, str(local_run.csv))
    missing = f"dk-no-such-{backend.scheme}-bucket"
    no_bucket = _cli(spec, "--output", f"{backend.scheme}://{missing}/x.zarr")
    procs = [_cli(spec, "--output", url, *flag) for flag in ((), ("--overwrite",), ("--resume",))]
    code, err = _finish(no_bucket, 120)
    assert code == 2, err
    assert f"the bucket '{missing}' does not exist" in err and "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["table.yaml"]
    assert not backend.fs().exists(missing)
    for proc in procs:
        code, err = _finish(proc, 120)
        assert code == 2, (proc.args, err)
        assert f"{url} has a lease (pid 48211 on host node17" in err, err
        assert "cannot take it over safely" in err and "Traceback" not in err
        assert f"remove {url}/{LEASE_FILE}" in err
    fs = backend.fs()
    assert fs.cat_file(key) == body  # never taken over
    assert fs.find(url) == [key]  # nothing else written
