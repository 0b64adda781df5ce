"""One writer per store (issue 19, items 1 and 7), with real ``dkernel run`` subprocesses.

* two writers into one store, in both orders and with ``--overwrite``: exactly one runs, the
  other exits 2 naming the holder, and the store ends complete with the running job's spec
  and results, array by array equal to an undisturbed run;
* a SIGKILLed writer's lease is taken over by ``--resume``, with identical results;
* SIGTERM is handled like Ctrl-C: the store is marked failed and ``--resume`` completes it.

The holder is paused with SIGSTOP while the second writer tries (deterministic: the second
writer always meets a live holder), then continued.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
import zarr

from dkernel.errors import StoreError
from dkernel.storage.lock import LEASE_FILE, StoreLease, read_lease
from dkernel.storage.store import ResultsStore

REPO = Path(__file__).resolve().parents[2]
JOB_TIMEOUT = 240


def _spec(tmp: Path, name: str, n_clusters: int) -> Path:
    spec = {
        "name": name,
        "data": {"reader": "sklearn", "name": "wine", "standardize": True},
        "method": "rbf-spectral",
        "params": {"n_clusters": n_clusters, "n_init": 5},
        "output": "unused.zarr",
    }
    path = tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def _cli(spec: Path, out: Path, *extra: str) -> subprocess.Popen:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    cmd = [sys.executable, "-m", "dkernel.cli", "run", str(spec), "--output", str(out)]
    cmd += ["--no-progress", "--workers", "1", "--threads", "1", *extra]
    return subprocess.Popen(
        cmd,
        cwd=spec.parent,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its LocalCluster workers share its process group
    )


def _finish(proc: subprocess.Popen) -> tuple[int, str]:
    try:
        _, err = proc.communicate(timeout=JOB_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        raise
    return proc.returncode, err


def _wait_for(path: Path, proc: subprocess.Popen, timeout: float = JOB_TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if proc.poll() is not None:
            pytest.fail(f"the writer ended before {path.name} appeared: {proc.stderr.read()}")
        if time.monotonic() > deadline:
            os.killpg(proc.pid, signal.SIGKILL)
            pytest.fail(f"{path} did not appear in {timeout} s")
        time.sleep(0.05)


def _status(store: Path) -> str | None:
    return zarr.open_group(str(store), mode="r").attrs.get("status")


@pytest.fixture(scope="module")
def jobs(tmp_path_factory, client):
    """Specs ``a`` (3 clusters) and ``b`` (2 clusters) and an undisturbed store of each, run
    in this process on the session's cluster (process workers, as the ``dkernel run``
    subprocesses have): the same arrays, without two more subprocesses and clusters."""
    from dkernel.jobs.runner import run_job

    tmp = tmp_path_factory.mktemp("lock")
    specs = {"a": _spec(tmp, "a", 3), "b": _spec(tmp, "b", 2)}
    refs = {}
    for name, spec in specs.items():
        refs[name] = tmp / f"ref-{name}.zarr"
        run_job(spec, output=refs[name], client=client, progress=False, quiet=True)
    return specs, refs


@pytest.mark.parametrize(
    ("holder", "intruder", "extra"),
    [("a", "b", ()), ("b", "a", ()), ("a", "b", ("--overwrite",))],
    ids=["a-then-b", "b-then-a", "a-then-b-overwrite"],
)
def test_second_writer_is_refused_naming_the_holder(
    jobs, tmp_path, ops, holder, intruder, extra
) -> None:
    specs, refs = jobs
    out = tmp_path / "shared.zarr"
    first = _cli(specs[holder], out)
    try:
        _wait_for(out / LEASE_FILE, first)
        first.send_signal(signal.SIGSTOP)  # a live holder, for as long as the intruder tries
        lease = read_lease(out)
        second = _cli(specs[intruder], out, *extra)
        code2, err2 = _finish(second)
    finally:
        first.send_signal(signal.SIGCONT)
    code1, err1 = _finish(first)
    assert code2 == 2, err2
    assert f"pid {first.pid}" in err2 and lease["pid"] == first.pid
    assert "is being written by" in err2 and socket.gethostname() in err2
    assert "Traceback" not in err2
    assert code1 == 0, err1
    assert not (out / LEASE_FILE).exists()
    root = zarr.open_group(str(out), mode="r")
    assert root.attrs["status"] == "complete"
    assert root.attrs["job"]["name"] == holder
    assert root.attrs["job"]["params"] == yaml.safe_load(specs[holder].read_text())["params"]
    ops.assert_stores_identical(out, refs[holder])


def test_two_writers_started_at_the_same_moment(jobs, tmp_path, ops) -> None:
    """The race of the issue (one failed with GroupNotFoundError): both with --overwrite."""
    specs, refs = jobs
    out = tmp_path / "race.zarr"
    procs = {name: _cli(specs[name], out, "--overwrite") for name in ("a", "b")}
    results = {name: _finish(proc) for name, proc in procs.items()}
    codes = sorted(code for code, _ in results.values())
    assert codes == [0, 2], results
    winner = next(name for name, (code, _) in results.items() if code == 0)
    loser = "b" if winner == "a" else "a"
    assert f"is being written by pid {procs[winner].pid}" in results[loser][1], results
    assert "Traceback" not in results[loser][1]
    assert zarr.open_group(str(out), mode="r").attrs["job"]["name"] == winner
    assert _status(out) == "complete"
    ops.assert_stores_identical(out, refs[winner])


def test_sigkilled_writer_lease_is_taken_over_by_resume(jobs, tmp_path, ops) -> None:
    specs, refs = jobs
    out = tmp_path / "killed.zarr"
    first = _cli(specs["a"], out)
    _wait_for(out / "kernel", first)
    os.killpg(first.pid, signal.SIGKILL)
    first.wait(timeout=30)
    dead = read_lease(out)
    assert dead is not None and dead["pid"] == first.pid  # the lease outlives its writer
    assert _status(out) == "running"
    code, err = _finish(_cli(specs["a"], out, "--resume"))
    assert code == 0, err
    assert f"took over the stale lease of pid {first.pid}" in err
    assert _status(out) == "complete"
    assert not (out / LEASE_FILE).exists()
    ops.assert_stores_identical(out, refs["a"])


def test_sigterm_marks_the_store_failed_and_resume_completes_it(jobs, tmp_path, ops) -> None:
    specs, refs = jobs
    out = tmp_path / "terminated.zarr"
    first = _cli(specs["a"], out)
    _wait_for(out / "input", first)
    first.send_signal(signal.SIGTERM)  # to the runner only, as `timeout` does
    code, err = _finish(first)
    assert code == 128 + signal.SIGTERM, err
    # the last word is ours; distributed may log the gather it was waiting on being cut short
    # (the same as with Ctrl-C), but no traceback of the runner itself escapes
    assert err.strip().splitlines()[-1] == (
        "dkernel: terminated (SIGTERM); the store is marked failed"
    ), err
    assert "dkernel/cli.py" not in err and "dkernel/jobs/runner.py" not in err, err
    assert _status(out) == "failed"
    assert not (out / LEASE_FILE).exists()
    code, err = _finish(_cli(specs["a"], out, "--resume"))
    assert code == 0, err
    assert _status(out) == "complete"
    ops.assert_stores_identical(out, refs["a"])


# ------------------------------------------------------------------------------------------
# the lease itself (in-process)
# ------------------------------------------------------------------------------------------


def _fake_lease(store: Path, **fields) -> None:
    store.mkdir(parents=True, exist_ok=True)
    lease = {
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "started": time.time(),
        "started_iso": "then",
        "heartbeat": time.time(),
        "token": "x" * 32,
        **fields,
    }
    (store / LEASE_FILE).write_text(json.dumps(lease))


def test_a_held_lease_refuses_a_second_taker(tmp_path) -> None:
    store = tmp_path / "s.zarr"
    with StoreLease.acquire(store) as lease:
        assert read_lease(store)["token"] == lease.info["token"]
        with pytest.raises(StoreError, match=f"pid {os.getpid()} on host"):
            StoreLease.acquire(store)
    assert not store.exists()  # created by the lease, nothing written: removed again


def test_both_kinds_of_lease_are_one_interface(tmp_path) -> None:
    """The runner holds either kind through ``Lease`` alone (no ``isinstance``): a local
    lease taken through acquire_lease is one, checks as held, and releases."""
    from dkernel.storage.lock import Lease, RemoteStoreLease, acquire_lease

    assert issubclass(RemoteStoreLease, Lease) and issubclass(StoreLease, Lease)
    store = tmp_path / "s.zarr"
    with acquire_lease(store, command="test") as lease:
        assert isinstance(lease, StoreLease)
        lease.check_held()  # a local lease held with flock: nothing to raise
        assert lease.reserve(4096) and lease.path == store / LEASE_FILE
        lease.free_reserve()
    assert not store.exists()


def test_a_dead_pid_on_this_host_is_stale(tmp_path) -> None:
    store = tmp_path / "s.zarr"
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    _fake_lease(store, pid=dead.pid)
    with StoreLease.acquire(store) as lease:
        assert lease.info["took_over"]["pid"] == dead.pid


def test_another_hosts_lease_is_live_until_its_heartbeat_expires(tmp_path, monkeypatch) -> None:
    store = tmp_path / "s.zarr"
    _fake_lease(store, host="elsewhere", pid=1)
    with pytest.raises(StoreError, match="pid 1 on host elsewhere"):
        StoreLease.acquire(store)
    _fake_lease(store, host="elsewhere", pid=1, heartbeat=time.time() - 60)
    monkeypatch.setenv("DKERNEL_LEASE_TIMEOUT", "30")
    with StoreLease.acquire(store) as lease:
        assert lease.info["took_over"]["host"] == "elsewhere"


def test_creating_a_store_keeps_the_lease(tmp_path) -> None:
    store = tmp_path / "s.zarr"
    with StoreLease.acquire(store):
        ResultsStore.create(store, job={"name": "x"}, seed=0)
        ResultsStore.create(store, job={"name": "y"}, seed=0, overwrite=True)
        assert (store / LEASE_FILE).exists()
        assert _status(store) == "running"
    assert not (store / LEASE_FILE).exists()
