"""Reliability, round four (issue 54), the rest: a scheduler port that never speaks, a cluster
that loses every worker, SIGTERM before the store exists, a data folder that cannot hold a
download, a lease object beside a store being read, and the lease on a stalled object store.
Jobs run through ``dkernel.cli.main``; each case asserts the exit code, the message, no
traceback and bounded time.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import threading
import time
import warnings
from pathlib import Path

import numpy as np
import pytest
import yaml
import zarr

from tests.cli_run import run_cli
from tests.limits import JOB_S, REFUSAL_S

#: Seconds a refusal may take and a whole tiny job.


_run = run_cli


@pytest.fixture()
def table_job(tmp_path, monkeypatch):
    """A small rbf-spectral job on a CSV table, run from ``tmp_path``."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DKERNEL_OUTPUT_ROOT", raising=False)
    rng = np.random.default_rng(0)
    np.savetxt(tmp_path / "data.csv", rng.normal(size=(30, 3)), delimiter=",", fmt="%.4f")

    def spec(output: str = "out.zarr", rows: int = 30) -> Path:
        if rows != 30:
            data = rng.normal(size=(rows, 3))
            np.savetxt(tmp_path / "data.csv", data, delimiter=",", fmt="%.4f")
        body = {"name": "signals", "seed": 0, "method": "rbf-spectral"}
        body |= {"data": {"reader": "csv", "path": "data.csv"}, "params": {"n_clusters": 2}}
        body |= {"output": output}
        path = tmp_path / "job.yaml"
        path.write_text(yaml.safe_dump(body, sort_keys=False))
        return path

    return spec


@pytest.fixture()
def silent_port():
    """A TCP port on 127.0.0.1 that accepts connections and never sends a byte."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join(timeout=5)
    for conn in held:
        conn.close()
    server.close()


# ------------------------------------------------------------------------------------------
# a scheduler port that accepts and never speaks
# ------------------------------------------------------------------------------------------


def test_submit_to_a_port_that_never_speaks_fails_within_its_timeout(table_job, silent_port):
    spec = table_job()
    address = f"tcp://127.0.0.1:{silent_port}"
    t = time.perf_counter()
    code, text = _run(["submit", str(spec), "--scheduler", address, "--timeout", "3"])
    waited = time.perf_counter() - t
    assert code == 2, text
    assert f"could not reach the Dask scheduler at {address} within 3 s" in text, text
    assert "no Dask scheduler answered there" in text
    assert "`dask scheduler` is running there" in text
    assert waited < REFUSAL_S, waited


def test_connect_to_a_port_that_never_speaks_raises_within_its_timeout(silent_port):
    from dkernel.errors import RuntimeConnectionError
    from dkernel.runtime.connect import connect

    t = time.perf_counter()
    with pytest.raises(RuntimeConnectionError, match="no Dask scheduler answered there"):
        connect(scheduler=f"tcp://127.0.0.1:{silent_port}", timeout=2, quiet=True)
    assert time.perf_counter() - t < 15


# ------------------------------------------------------------------------------------------
# SIGTERM before the store exists
# ------------------------------------------------------------------------------------------


def test_sigterm_before_the_store_exists_does_not_claim_it_is_marked_failed(
    table_job, silent_port, tmp_path
):
    """SIGTERM while the job still waits for its cluster (the data read, no store yet)."""
    spec = table_job()
    address = f"tcp://127.0.0.1:{silent_port}"
    timer = threading.Timer(4.0, os.kill, (os.getpid(), signal.SIGTERM))
    timer.start()
    try:
        code, text = _run(["submit", str(spec), "--scheduler", address, "--timeout", "60"])
    finally:
        timer.cancel()
    assert code == 128 + signal.SIGTERM, text
    last = text.strip().splitlines()[-1]
    assert last == "dkernel: terminated (SIGTERM); no results store was written yet", text
    assert "marked failed" not in text
    assert not (tmp_path / "out.zarr" / "zarr.json").exists()


# ------------------------------------------------------------------------------------------
# every worker lost
# ------------------------------------------------------------------------------------------


def test_a_job_whose_workers_are_all_killed_fails_with_a_message(
    table_job, tmp_path, ops, monkeypatch
):
    """SIGKILL of every worker of a `dask scheduler` mid-job: the job fails after
    DKERNEL_NO_WORKERS_TIMEOUT seconds without workers, says so, and marks the store failed."""
    monkeypatch.setenv("DKERNEL_NO_WORKERS_TIMEOUT", "3")
    logs = tmp_path / "logs"
    logs.mkdir()
    cluster = ops.start_loopback_cluster(logs)
    try:
        spec = table_job(rows=2000)
        out = tmp_path / "out.zarr"
        result: dict = {}

        def job() -> None:
            args = ["submit", str(spec), "--scheduler", cluster.address, "--no-progress"]
            result["code"], result["text"] = _run(args)

        thread = threading.Thread(target=job, daemon=True)
        thread.start()
        deadline = time.monotonic() + JOB_S
        while not (out / "zarr.json").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        for worker in cluster.workers:
            os.killpg(worker.pid, signal.SIGKILL)
        thread.join(timeout=JOB_S)
        assert not thread.is_alive(), "the job kept waiting without workers"
    finally:
        cluster.stop()
    code, text = result["code"], result["text"]
    assert code == 1, text
    assert "the Dask cluster has had no worker for" in text, text
    assert "every worker was lost" in text and "--resume" in text
    assert "AllExit" not in text and "CancelledError" not in text, text
    root = zarr.open_group(str(out), mode="r")
    assert root.attrs["status"] == "failed"
    assert "WorkersLostError" in root.attrs["error"]


# ------------------------------------------------------------------------------------------
# `dkernel data fetch` into something that is not a folder
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("where", ["file", "file-child", "proc"])
def test_data_fetch_into_what_cannot_hold_a_folder_is_refused(tmp_path, monkeypatch, where):
    (tmp_path / "plain").write_text("a file\n")
    to = {
        "file": str(tmp_path / "plain"),
        "file-child": str(tmp_path / "plain" / "sub"),
        "proc": "/proc/self",
    }[where]
    code, text = _run(["data", "fetch", "shapes", "--to", to], limit=REFUSAL_S)
    assert code == 2, text
    assert f"the data folder {to}" in text, text
    assert "Pass `--to DIR` with a folder you can write" in text
    assert "unexpected error" not in text
    assert (tmp_path / "plain").read_text() == "a file\n"


def test_data_fetch_with_dkernel_data_naming_a_file_is_refused(tmp_path, monkeypatch):
    plain = tmp_path / "plain"
    plain.write_text("a file\n")
    monkeypatch.setenv("DKERNEL_DATA", str(plain))
    code, text = _run(["data", "fetch", "shapes"], limit=REFUSAL_S)
    assert code == 2, text
    assert f"the data folder {plain} is not a folder" in text, text
    assert "set DKERNEL_DATA to one" in text


# ------------------------------------------------------------------------------------------
# a lease object beside the arrays of a store being read
# ------------------------------------------------------------------------------------------


def _unfinished_with_lease(store: Path) -> None:
    """``store`` as a job still writing it leaves it: not consolidated, ``running``, with a
    lease file among its groups."""
    meta_path = store / "zarr.json"
    meta = json.loads(meta_path.read_text())
    meta.pop("consolidated_metadata", None)
    meta["attributes"]["status"] = "running"
    meta_path.write_text(json.dumps(meta))
    (store / "dkernel.lease").write_text(json.dumps({"pid": 1, "host": "elsewhere"}))
    (store / ".dkernel.lease.reserve").write_bytes(b"\0" * 64)


def test_show_of_a_store_holding_a_lease_object_prints_no_zarr_warning(table_job, tmp_path):
    code, text = _run(["run", str(table_job()), "--no-progress"])
    assert code == 0, text
    store = tmp_path / "out.zarr"
    _unfinished_with_lease(store)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        code, text = _run(["show", str(store)], limit=REFUSAL_S)
    assert code == 0, text
    assert "status:   running" in text, text
    assert "/kernel/kernel" in text
    shown = [str(w.message) for w in caught if "not recognized" in str(w.message)]
    assert shown == [], shown
    assert "site-packages" not in text


# ------------------------------------------------------------------------------------------
# the lease on an object store that stalls
# ------------------------------------------------------------------------------------------


#: The bounds a stalled endpoint runs into, shortened for these tests from the production
#: defaults (a lease call 20 s, a failed job's status write 10 s): each is still what ends the
#: wait, only sooner. Not a timing: a loaded machine passes with room to spare.
SHORT_LEASE_CALL_S = 5.0
SHORT_STATUS_WRITE_S = 5.0


@pytest.fixture()
def short_stall_bounds(monkeypatch):
    """The lease's whole-call bound (``LEASE_CALL_S``) and the failed job's status-write bound
    (``STATUS_WRITE_S``) at :data:`SHORT_LEASE_CALL_S` / :data:`SHORT_STATUS_WRITE_S`."""
    from dkernel.jobs import failures
    from dkernel.storage import remote_lease

    monkeypatch.setattr(remote_lease, "LEASE_CALL_S", SHORT_LEASE_CALL_S)
    monkeypatch.setattr(failures, "STATUS_WRITE_S", SHORT_STATUS_WRITE_S)


class StallingProxy:
    """A TCP proxy to ``target`` that relays until :meth:`stall`, then holds every
    connection open without relaying a byte (an endpoint that stops answering)."""

    def __init__(self, target: tuple[str, int], *, stall_on: bytes | None = None) -> None:
        self.target = target
        self.stall_on = stall_on  # stall when a request line holds this (a chunk's PUT)
        self.stalled = threading.Event()
        self.server = socket.socket()
        self.server.bind(("127.0.0.1", 0))
        self.server.listen(64)
        self.port = self.server.getsockname()[1]
        self.sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            self.sockets.append(client)
            if self.stalled.is_set():
                continue
            upstream = socket.create_connection(self.target)
            self.sockets.append(upstream)
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                line = data.split(b"\r\n", 1)[0]
                if self.stall_on and line.startswith(b"PUT ") and self.stall_on in line:
                    self.stalled.set()
                while self.stalled.is_set():
                    time.sleep(0.1)  # hold the bytes: the peer waits for an answer
                dst.sendall(data)
        except OSError:
            return

    def stall(self) -> None:
        self.stalled.set()

    def close(self) -> None:
        self.server.close()
        for sock in self.sockets:
            sock.close()
        _join_abandoned_calls()


def _join_abandoned_calls(limit_s: float = 120.0) -> None:
    """Wait for the bounded calls a job gave up on (``call_bounded``'s daemon threads, such
    as a failed job's status write on the stalled endpoint): once the proxy is closed they
    end, and whatever they log belongs to this test, not to the next one in this process."""
    deadline = time.monotonic() + limit_s
    for thread in threading.enumerate():
        if thread.name == "dkernel-remote-check":
            thread.join(max(0.0, deadline - time.monotonic()))


def test_a_stalled_object_store_does_not_hold_the_lease_release(
    s3_server, s3_bucket, short_stall_bounds
):
    """The endpoint stops answering while the lease is held: a heartbeat under way and the
    release each give up within their bound (``LEASE_CALL_S``, shortened here; the lease is
    left to expire), instead of waiting for as long as the endpoint stalls."""
    from urllib.parse import urlparse

    from dkernel.storage import lock

    LEASE_CALL_S = SHORT_LEASE_CALL_S

    target = urlparse(s3_server)
    proxy = StallingProxy((target.hostname, target.port))
    try:
        options = {"endpoint": f"http://127.0.0.1:{proxy.port}"}
        lease = lock.RemoteStoreLease.acquire(
            f"s3://{s3_bucket}/stall.zarr", command="test", options=options
        )
        proxy.stall()
        failed: list[BaseException] = []

        def heartbeat() -> None:  # a heartbeat under way when the endpoint stalls
            try:
                lease._write()
            except Exception as exc:  # noqa: BLE001  (the heartbeat thread suppresses it)
                failed.append(exc)

        beat = threading.Thread(target=heartbeat, daemon=True)
        beat.start()
        time.sleep(0.5)
        t = time.perf_counter()
        lease.release()
        released_in = time.perf_counter() - t
        beat.join(timeout=2 * LEASE_CALL_S + 10)
        assert not beat.is_alive(), "the heartbeat kept waiting on the stalled endpoint"
        assert [type(e) for e in failed if isinstance(e, TimeoutError)] == [type(failed[0])]
    finally:
        proxy.close()
    assert released_in <= 2 * LEASE_CALL_S + 10, released_in  # a hang guard, with room


# ------------------------------------------------------------------------------------------
# a whole job writing to an object store that stalls during its chunk writes
# ------------------------------------------------------------------------------------------


@pytest.fixture()
def stalling_store(s3_server, s3_bucket, table_job):
    """A job spec writing ``s3://BUCKET/stall.zarr`` through a proxy that stalls at the first
    chunk write (``PUT .../c/...``): every connection then hangs, none is closed."""
    from urllib.parse import urlparse

    target = urlparse(s3_server)
    proxy = StallingProxy((target.hostname, target.port), stall_on=b"/stall.zarr/kernel/kernel/c/")
    spec = table_job(f"s3://{s3_bucket}/stall.zarr")
    body = yaml.safe_load(spec.read_text())
    body["store_options"] = {"endpoint": f"http://127.0.0.1:{proxy.port}"}
    spec.write_text(yaml.safe_dump(body, sort_keys=False))
    yield spec, proxy, f"{s3_bucket}/stall.zarr"
    proxy.stalled.clear()
    proxy.close()


def _status(key: str) -> str | None:
    import s3fs

    fs = s3fs.S3FileSystem(skip_instance_cache=True)
    return json.loads(fs.cat_file(f"{key}/zarr.json"))["attributes"].get("status")


def test_a_job_whose_object_store_stalls_fails_in_bounded_time(
    stalling_store, monkeypatch, short_stall_bounds
):
    """The endpoint stops answering at the first chunk write: each S3 request is bounded as a
    whole (BoundedSession; here its connect and read timeouts are 8 s and 4 s, tried twice),
    so the write fails, the job exits 1 naming the stalled request, and the store is not
    marked complete (the status write and the lease release on the stalled endpoint bounded
    too, shortened here). The bound is not shorter: with 2 s and 2 s a request *before* the
    stall once ran past it on a loaded machine (the loopback server answers, slowly)."""
    import s3fs

    from dkernel.storage import remote

    limits = {**remote._S3_LIMITS["store"], "connect_timeout": 8, "read_timeout": 4}
    monkeypatch.setitem(remote._S3_LIMITS, "store", limits)
    # s3fs tries a timed-out request 5 times by default; 2 here (a small job runs in this
    # process, so the class default reaches its file systems): still a retry, each bounded
    monkeypatch.setattr(s3fs.S3FileSystem, "retries", 2)
    spec, proxy, key = stalling_store
    code, text = _run(["run", str(spec), "--no-progress"], limit=JOB_S)
    assert proxy.stalled.is_set(), text
    assert code == 1, text
    assert "the S3 endpoint did not answer PUT" in text and "within 12 s" in text, text
    assert "stall.zarr/kernel/kernel/c/" in text
    proxy.stalled.clear()
    assert _status(key) != "complete"


def test_sigterm_ends_a_job_stalled_on_its_object_store(stalling_store, short_stall_bounds):
    """SIGTERM while a chunk write waits on the stalled endpoint (the default store limits,
    minutes per request): the job ends promptly, exit 143, saying what became of the store
    (its status write and lease release bounded: shortened here, 10 s and 2 x 20 s by
    default)."""
    spec, proxy, key = stalling_store
    sent: list[float] = []

    def terminate() -> None:
        if proxy.stalled.wait(JOB_S):
            time.sleep(2.0)
            sent.append(time.perf_counter())
            os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=terminate, daemon=True).start()
    code, text = _run(["run", str(spec), "--no-progress"], limit=JOB_S)
    assert sent, f"the job ended (exit {code}) before the endpoint stalled:\n{text}"
    ended_in = time.perf_counter() - sent[0]
    assert code == 128 + signal.SIGTERM, text
    assert "dkernel: terminated (SIGTERM); the store" in text, text
    assert ended_in < 90, ended_in  # a hang guard: the status write and lease release are bounded
    proxy.stalled.clear()
    assert _status(key) != "complete"


def test_the_store_limits_reach_the_workers_file_systems(s3_server, s3_bucket):
    """The Zarr arrays a job's tasks write carry the bounded S3 settings: rebuilt from a
    pickle (as a process worker does), their file system has the timeouts, no botocore
    retries, and the whole-request bound (BoundedSession)."""
    import pickle

    import dask.array as da
    import xarray as xr

    from dkernel.storage.s3_session import BoundedSession
    from dkernel.storage.store import ResultsStore

    store = ResultsStore.create(f"s3://{s3_bucket}/limits.zarr", job={"name": "t"}, seed=0)
    dataset = xr.Dataset({"x": (("a",), da.zeros(4, chunks=2))})
    delayed = dataset.to_zarr(
        str(store.path), group="g", mode="w", zarr_format=3, compute=False, **store._zarr
    )
    arrays = [v for v in delayed.dask.values() if hasattr(v, "store_path")] or [
        zarr.open_array(str(store.path), path="g/x", mode="r", **store._zarr)
    ]
    for array in arrays:
        fs = pickle.loads(pickle.dumps(array)).store.fs
        config = fs.config_kwargs
        assert config["read_timeout"] == 60 and config["connect_timeout"] == 10, config
        assert config["retries"]["total_max_attempts"] == 1, config  # no botocore retries
        assert config["http_session_cls"] is BoundedSession
