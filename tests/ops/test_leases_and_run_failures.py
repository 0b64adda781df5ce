"""Leases and stores a hostile neighbour can't wedge, and failures while running that are
always recorded (issue 34, items 3 and 6), through the real ``dkernel`` entry point.

Every refusal exits 2 with one message that says what is wrong and what to do, no traceback,
within :data:`REFUSAL_S`, before any cluster is asked for (``dkernel.runtime.connect`` is
spied on), and leaves the store as it was. Every failure while running exits 1 with a
one-line cause and leaves the store ``failed`` (or, when the store's directory was removed,
says so). Disk full is tested on a real 2 MiB tmpfs (mounted here: we run as root; skipped
where mounting is not allowed).
"""

from __future__ import annotations

import io
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest
import yaml
import zarr

import dkernel.runtime
from dkernel.cli import main
from dkernel.storage.lock import LEASE_FILE, MAX_LEASE_BYTES, RESERVE_FILE
from dkernel.storage.store import ResultsStore
from tests.limits import JOB_S, REFUSAL_S

SPEC = {
    "name": "leases",
    "seed": 0,
    "data": {"reader": "sklearn", "name": "wine", "standardize": True},
    "method": "rbf-spectral",
    "params": {"n_clusters": 3, "n_init": 5},
    "output": "out.zarr",
}


# ------------------------------------------------------------------------------------------
# helpers
# ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module", autouse=True)
def _warm(tmp_path_factory) -> None:
    """Import the job machinery and read the data once, so that the bounds time refusals,
    not this process's first imports."""
    from dkernel.jobs.runner import prepare_job
    from dkernel.jobs.spec import validate_spec

    prepare_job(validate_spec({**SPEC, "output": str(tmp_path_factory.mktemp("warm") / "w")}))


@pytest.fixture()
def work(tmp_path, monkeypatch):
    """A folder holding ``job.yaml`` (wine, rbf-spectral, output ``out.zarr``), as the cwd."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DKERNEL_OUTPUT_ROOT", raising=False)
    monkeypatch.delenv("DKERNEL_LEASE_TIMEOUT", raising=False)
    write_spec(tmp_path)
    return tmp_path


def write_spec(work: Path, **changes) -> Path:
    spec = {**SPEC, **changes}
    path = work / "job.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


class ConnectSpy:
    """Stands in for ``dkernel.runtime.connect``: records each call; refuses to start a
    cluster (or, given an address, connects to that running one instead)."""

    def __init__(self, address: str | None = None) -> None:
        self.calls: list[tuple] = []
        self.address = address

    def __call__(self, *args, **kwargs):
        self.calls.append((args, kwargs))
        if self.address is None:
            raise AssertionError("a cluster was asked for")
        from distributed import Client

        return Client(self.address, timeout=30)


@pytest.fixture()
def spy(monkeypatch) -> ConnectSpy:
    spy = ConnectSpy()
    monkeypatch.setattr(dkernel.runtime, "connect", spy)
    return spy


def cli(*args: str, limit: float = JOB_S) -> tuple[int | None, str, float]:
    """``dkernel ARGS`` in this process: (exit code, stderr, seconds).

    Runs in a thread joined with ``limit``: a call that hangs gives exit code None (and its
    thread is left behind) rather than hanging the suite.
    """
    if args and args[0] == "run":
        args = (*args, "--no-progress", "--workers", "1", "--threads", "1")
    err, out, result = io.StringIO(), io.StringIO(), {}

    def target() -> None:
        result["code"] = main(list(args))

    t0 = time.monotonic()
    with redirect_stderr(err), redirect_stdout(out):
        thread = threading.Thread(target=target, daemon=True)
        thread.start()
        thread.join(limit)
    return result.get("code"), err.getvalue(), time.monotonic() - t0


def status(store: Path):
    return zarr.open_group(str(store), mode="r", use_consolidated=False).attrs.get("status")


def attrs(store: Path) -> dict:
    return json.loads((store / "zarr.json").read_text())["attributes"]


def refused(*args: str, pattern: str | list[str], limit: float = REFUSAL_S) -> str:
    """Run ``dkernel ARGS``; assert exit 2 within ``limit`` with every pattern in the message."""
    code, err, seconds = cli(*args, limit=limit)
    assert code is not None, f"still running after {limit} s"
    assert code == 2, f"exit {code}: {err}"
    assert seconds <= limit, f"refused after {seconds:.1f} s"
    assert "Traceback" not in err and "unexpected error" not in err, err
    for p in [pattern] if isinstance(pattern, str) else pattern:
        assert p in err, f"{p!r} not in {err!r}"
    return err


def a_running_store(work: Path, **changes) -> Path:
    """``out.zarr`` as the job of ``job.yaml`` (with ``changes``) left it when killed."""
    spec = {**SPEC, **changes}
    store = ResultsStore.create(work / "out.zarr", job=spec, seed=spec["seed"])
    return store.path


def plant_lease(store: Path, **fields) -> Path:
    """A lease in ``store`` (a fresh one of this process, with ``fields`` changed)."""
    store.mkdir(parents=True, exist_ok=True)
    lease = {
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "started": time.time(),
        "started_iso": "then",
        "heartbeat": time.time(),
        "token": "x" * 32,
        "command": "dkernel job 'other'",
        **fields,
    }
    path = store / LEASE_FILE
    path.write_text(json.dumps(lease))
    return path


@pytest.fixture(scope="module")
def scheduler(tmp_path_factory):
    """A running LocalCluster (two process workers) for the jobs that run to the end."""
    from dkernel.runtime import connect

    client = connect(n_workers=2, threads_per_worker=1, quiet=True)
    try:
        yield client.scheduler.address
    finally:
        client.close()


def run_on(scheduler: str, *extra: str, limit: float = JOB_S) -> tuple[int | None, str, float]:
    """``dkernel run job.yaml --scheduler ADDRESS EXTRA`` (jobs that get to run)."""
    code, err, seconds = cli("run", "job.yaml", "--scheduler", scheduler, *extra, limit=limit)
    assert "Traceback" not in err and "unexpected error" not in err, err
    return code, err, seconds


# ------------------------------------------------------------------------------------------
# 3. resume refusals come before any cluster starts
# ------------------------------------------------------------------------------------------


def test_resume_with_a_changed_spec_is_refused_before_any_cluster(work, spy) -> None:
    store = a_running_store(work, params={"n_clusters": 2, "n_init": 5})
    refused(
        "run",
        "job.yaml",
        "--resume",
        pattern="written by a different job spec or seed",
        limit=REFUSAL_S,
    )
    assert spy.calls == [], "a cluster was asked for"
    assert status(store) == "running" and not (store / LEASE_FILE).exists()


def test_resume_with_a_changed_seed_is_refused_before_any_cluster(work, spy) -> None:
    store = a_running_store(work, seed=1)
    refused(
        "run",
        "job.yaml",
        "--resume",
        pattern="written by a different job spec or seed",
        limit=REFUSAL_S,
    )
    assert spy.calls == []
    assert status(store) == "running"


def test_resume_of_a_complete_store_is_refused_before_any_cluster(work, spy) -> None:
    store = ResultsStore(a_running_store(work))
    store.mark_complete()
    refused("run", "job.yaml", "--resume", pattern="already complete; pass --overwrite")
    assert spy.calls == [] and status(store.path) == "complete"


# ------------------------------------------------------------------------------------------
# 4. missing, truncated or hostile store metadata
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("damage", "pattern"),
    [
        (lambda text: text[: len(text) // 2], "is truncated or not valid JSON"),
        (lambda text: "", "is empty"),
        (lambda text: b"\xff\xfe" + text.encode(), "holds bytes that are not UTF-8"),
        (lambda text: "[1, 2, 3]", "holds a JSON list"),
        (lambda text: "[" * 100_000, "holds JSON nested too deeply"),
    ],
    ids=["truncated", "empty", "not-utf8", "a-list", "deep"],
)
def test_damaged_root_metadata_is_named_on_resume_and_show(work, spy, damage, pattern) -> None:
    store = a_running_store(work)
    meta = store / "zarr.json"
    damaged = damage(meta.read_text())
    if isinstance(damaged, bytes):
        meta.write_bytes(damaged)
    else:
        meta.write_text(damaged)
    for args in (("run", "job.yaml", "--resume"), ("show", "out.zarr")):
        err = refused(
            *args, pattern=[f"{meta.relative_to(work)} {pattern}", "is not a readable Zarr store"]
        )
        assert "remove the store" in err
    refused("run", "job.yaml", "--overwrite", pattern=str(meta.relative_to(work)))
    assert spy.calls == []
    assert meta.read_bytes() == (damaged if isinstance(damaged, bytes) else damaged.encode())


def test_damaged_group_metadata_is_named_before_any_cluster(work, spy) -> None:
    store = ResultsStore(a_running_store(work))
    import numpy as np
    import xarray as xr

    store.write("input", xr.Dataset({"x": (("sample",), np.arange(4.0))}))
    meta = store.path / "input" / "zarr.json"
    meta.write_text(meta.read_text()[:40])
    refused("run", "job.yaml", "--resume", pattern=[f"{Path('out.zarr', 'input', 'zarr.json')}"])
    refused("show", "out.zarr", pattern="input/zarr.json is truncated")
    assert spy.calls == [] and status(store.path) == "running"


@pytest.mark.parametrize("command", ["run", "show"])
def test_root_metadata_that_is_a_fifo_is_refused_at_once(work, spy, command) -> None:
    store = a_running_store(work)
    (store / "zarr.json").unlink()
    os.mkfifo(store / "zarr.json")
    args = ("run", "job.yaml", "--resume") if command == "run" else ("show", "out.zarr")
    refused(*args, pattern=["zarr.json is not a regular file"])
    assert spy.calls == []


def test_root_metadata_that_links_to_dev_zero_is_refused(work, spy) -> None:
    store = a_running_store(work)
    (store / "zarr.json").unlink()
    (store / "zarr.json").symlink_to("/dev/zero")
    refused("show", "out.zarr", pattern="zarr.json is a symbolic link")
    refused("run", "job.yaml", "--resume", pattern="zarr.json is a symbolic link")
    assert spy.calls == []


def test_missing_root_metadata_is_named(work, spy) -> None:
    store = ResultsStore(a_running_store(work))
    import numpy as np
    import xarray as xr

    store.write("input", xr.Dataset({"x": (("sample",), np.arange(4.0))}))
    (store.path / "zarr.json").unlink()
    for flag in ("--resume", "--overwrite"):
        refused("run", "job.yaml", flag, pattern=["metadata", "out.zarr/zarr.json is missing"])
    assert spy.calls == [] and (store.path / "input" / "zarr.json").exists()


@pytest.mark.parametrize("value", ["banana", {"a": 1}, None, "\x1b[31mred"])
def test_a_status_edited_to_garbage_is_never_replaced_without_overwrite(work, spy, value) -> None:
    store = a_running_store(work)
    meta = json.loads((store / "zarr.json").read_text())
    if value is None:
        del meta["attributes"]["status"]
    else:
        meta["attributes"]["status"] = value
    (store / "zarr.json").write_text(json.dumps(meta))
    before = (store / "zarr.json").read_bytes()
    err = refused("run", "job.yaml", pattern=["whose status is", "Pass --overwrite"])
    assert "\x1b" not in err
    err = refused("run", "job.yaml", "--resume", pattern=["cannot resume", "not running or failed"])
    assert "\x1b" not in err
    assert (store / "zarr.json").read_bytes() == before and spy.calls == []


def test_a_store_path_that_is_a_file_is_refused(work, spy) -> None:
    (work / "out.zarr").write_text("precious")
    refused("run", "job.yaml", "--resume", pattern="is not a dkernel results store (it is a file)")
    assert (work / "out.zarr").read_text() == "precious" and spy.calls == []


# ------------------------------------------------------------------------------------------
# 6. leases a hostile neighbour can't wedge: unusable lease files
# ------------------------------------------------------------------------------------------


def _lease_dir(work: Path) -> Path:
    lease = work / "out.zarr" / LEASE_FILE
    lease.mkdir(parents=True)
    return lease


def _lease_fifo(work: Path) -> Path:
    lease = work / "out.zarr" / LEASE_FILE
    lease.parent.mkdir()
    os.mkfifo(lease)
    return lease


def _lease_symlink(work: Path) -> Path:
    lease = work / "out.zarr" / LEASE_FILE
    lease.parent.mkdir()
    lease.symlink_to("/dev/zero")
    return lease


def _lease_bytes(data: bytes):
    def make(work: Path) -> Path:
        lease = work / "out.zarr" / LEASE_FILE
        lease.parent.mkdir()
        lease.write_bytes(data)
        return lease

    return make


def _lease_fields(**fields):
    def make(work: Path) -> Path:
        return plant_lease(work / "out.zarr", **fields)

    return make


UNUSABLE = {
    "directory": (_lease_dir, ["is a directory, not a regular file", "rm -r -- "]),
    "fifo": (_lease_fifo, ["is a FIFO (named pipe), not a regular file", "rm -- "]),
    "symlink": (_lease_symlink, ["is a symbolic link, not a regular file", "rm -- "]),
    "not-utf8": (_lease_bytes(b'{"host": "\xff\xfe"}'), ["holds bytes that are not UTF-8"]),
    "not-json": (_lease_bytes(b"host=elsewhere pid=1"), ["is not JSON"]),
    "empty": (_lease_bytes(b""), ["is empty"]),
    "json-list": (_lease_bytes(b"[1, 2]"), ["holds a JSON list, not a lease object"]),
    "json-deep": (_lease_bytes(b"[" * 60_000), ["JSON nested too deeply"]),
    "huge": (_lease_bytes(b" " * (MAX_LEASE_BYTES + 1)), ["bytes long; a lease is at most"]),
    "heartbeat-nan": (_lease_fields(heartbeat=float("nan")), ["heartbeat that is not a time"]),
    "heartbeat-text": (_lease_fields(heartbeat="soon"), ["heartbeat that is not a time: 'soon'"]),
    "heartbeat-true": (_lease_fields(heartbeat=True), ["heartbeat that is not a time: True"]),
    "pid-text": (_lease_fields(pid="123"), ["pid that is not a process id: '123'"]),
    "pid-negative": (_lease_fields(pid=-5), ["pid that is not a process id: -5"]),
    "pid-huge": (_lease_fields(pid=10**30), ["pid that is not a process id"]),
    "host-list": (_lease_fields(host=["a"]), ["host that is not a host name"]),
}


@pytest.mark.parametrize("case", sorted(UNUSABLE))
def test_an_unusable_lease_is_refused_at_once_naming_the_file(work, spy, case) -> None:
    make, patterns = UNUSABLE[case]
    lease = make(work)
    err = refused(
        "run",
        "job.yaml",
        pattern=[f"the lease file {lease} of the results store", *patterns, "remove that file"],
    )
    assert len(err.strip().splitlines()) == 1, err
    assert spy.calls == []
    assert os.path.lexists(lease), "the lease was removed"
    assert not any(p.name.startswith(f".out.zarr.{LEASE_FILE}.") for p in work.iterdir())
    assert not (work / "out.zarr" / "zarr.json").exists(), "a store was written"


def test_an_unusable_lease_refuses_resume_and_overwrite_too(work, spy) -> None:
    store = a_running_store(work)
    (store / LEASE_FILE).write_bytes(b"\x00\x01garbage")
    for flag in ("--resume", "--overwrite"):
        refused("run", "job.yaml", flag, pattern=["is not JSON", "remove that file"])
    assert status(store) == "running" and spy.calls == []


# ------------------------------------------------------------------------------------------
# leases whose holder is live, or is not
# ------------------------------------------------------------------------------------------


def test_a_lease_held_by_a_live_process_on_this_host_is_refused(work, spy) -> None:
    store = a_running_store(work)
    lease = store / LEASE_FILE
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, json, os, socket, sys, time\n"
            f"fd = os.open({str(lease)!r}, os.O_RDWR | os.O_CREAT)\n"
            "fcntl.flock(fd, fcntl.LOCK_EX)\n"
            "os.write(fd, json.dumps({'host': socket.gethostname(), 'pid': os.getpid(),"
            " 'heartbeat': time.time(), 'started_iso': 'now'}).encode())\n"
            "print('held', flush=True)\n"
            "time.sleep(60)\n",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        refused(
            "run",
            "job.yaml",
            "--resume",
            pattern=[f"is being written by pid {holder.pid} on host", "heartbeat 0 s ago"],
        )
    finally:
        holder.kill()
        holder.wait()
    assert status(store) == "running" and spy.calls == []


def test_a_lease_from_a_skewed_clock_within_the_bound_is_live_and_not_negative(work, spy) -> None:
    store = a_running_store(work)
    plant_lease(store, host="elsewhere", pid=4242, heartbeat=time.time() + 30)
    err = refused(
        "run",
        "job.yaml",
        "--resume",
        pattern=["pid 4242 on host elsewhere", "s in the future"],
    )
    assert "heartbeat -" not in err
    assert status(store) == "running" and spy.calls == []


def test_a_lease_with_escape_codes_is_shown_escaped(work, spy) -> None:
    store = a_running_store(work)
    plant_lease(store, host="evil\x1b]0;pwned\x07", pid=4242, command="\x1b[2J")
    err = refused("run", "job.yaml", "--resume", pattern=["pid 4242 on host evil\\x1b"])
    assert "\x1b" not in err and "\x07" not in err
    assert status(store) == "running" and spy.calls == []


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"host": "elsewhere", "heartbeat": 4102444800.0}, "2100-01-01T00:00:00+00:00"),
        ({"host": "elsewhere", "heartbeat": -1e9}, "s old (more than 120 s"),
        ({"pid": 1}, "nothing on this host holds its lock"),
    ],
    ids=["heartbeat-2100-other-host", "heartbeat-negative", "live-pid-reused-no-lock"],
)
def test_a_stale_lease_is_taken_over_saying_why(work, spy, fields, reason) -> None:
    """A heartbeat dated 2100 (or 1938), or a live pid on this host whose lease nobody has
    locked (the pid was reused, or the lease forged): taken over, and the log says why. The
    job then gets as far as asking for its cluster (refused here)."""
    store = a_running_store(work)
    plant_lease(store, **fields)
    code, err, seconds = cli("run", "job.yaml", "--resume", limit=REFUSAL_S)
    assert spy.calls, err  # got past the lease
    assert code == 1 and "could not start the embedded Dask cluster" in err, err
    assert "took over the stale lease of pid" in err and reason in err, err
    assert "Traceback" not in err and seconds <= REFUSAL_S
    assert status(store) == "running" and not (store / LEASE_FILE).exists()


def test_a_future_heartbeat_lease_is_taken_over_and_the_job_completes(work, scheduler) -> None:
    """The issue's case: a lease from another host dated 2100 wedged the store for ever."""
    store = a_running_store(work)
    plant_lease(store, host="elsewhere", pid=77, heartbeat=4102444800.0)
    code, err, _ = run_on(scheduler, "--resume")
    assert code == 0, err
    assert "took over the stale lease of pid 77 on elsewhere" in err
    assert "in the future: a clock skewed by more than 120 s" in err
    assert status(store) == "complete"
    assert not (store / LEASE_FILE).exists() and not (store / RESERVE_FILE).exists()


def test_a_store_inside_a_symlinked_folder_runs(work, scheduler) -> None:
    (work / "real").mkdir()
    (work / "link").symlink_to(work / "real", target_is_directory=True)
    write_spec(work, output="link/out.zarr")
    code, err, _ = run_on(scheduler)
    assert code == 0, err
    assert status(work / "real" / "out.zarr") == "complete"
    assert sorted(p.name for p in (work / "real").iterdir()) == ["out.zarr"]


# ------------------------------------------------------------------------------------------
# 1. failures while running are always recorded
# ------------------------------------------------------------------------------------------


@pytest.fixture()
def tmpfs(work):
    """A 2 MiB tmpfs mounted at ``work/small`` (unmounted afterwards)."""
    mnt = work / "small"
    mnt.mkdir()
    if shutil.which("mount") is None:
        pytest.skip("no mount command here")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mnt)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {done.stderr.strip()}")
    try:
        yield mnt
    finally:
        if subprocess.run(["umount", str(mnt)], check=False).returncode != 0:
            subprocess.run(["umount", "-l", str(mnt)], check=False)


def free_bytes(path: Path) -> int:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def fill(mnt: Path, leave: int = 0) -> Path:
    """Fill the filesystem at ``mnt`` up to ``leave`` free bytes (``0``: until it is full),
    as another process would."""
    filler = mnt / f"filler-{len(list(mnt.glob('filler-*')))}"
    with open(filler, "wb", buffering=0) as f:
        try:
            f.write(b"x" * max(0, free_bytes(mnt) - leave))
            while leave == 0:
                f.write(b"x" * 4096)
        except OSError:
            pass
    return filler


#: Another process: waits for the folder argv[1], then fills its filesystem (file argv[2]).
FILLER = """
import os, sys, time
while not os.path.exists(sys.argv[1]):
    time.sleep(0.005)
with open(sys.argv[2], "wb", buffering=0) as f:
    try:
        while True:
            f.write(b"x" * 65536)
    except OSError:
        pass
    try:
        while True:
            f.write(b"x" * 4096)
    except OSError:
        pass
"""


def _one_line_failure(err: str) -> str:
    last = err.strip().splitlines()[-1]
    assert last.startswith("dkernel: failed: job 'leases' failed while running: "), err
    return last


def test_disk_full_on_a_real_tmpfs_marks_the_store_failed_then_resume_completes(
    work, tmpfs, scheduler
) -> None:
    """The issue's case: the store lives on a tmpfs that another process filled. ``dkernel
    run`` (its own embedded cluster) exits 1 with one line saying which filesystem is full and
    how much the job needs, the store says ``failed``, and ``--resume`` completes it once
    there is room."""
    write_spec(work, output="small/out.zarr")
    filler = tmpfs / "filler"
    other = subprocess.Popen(  # fills the disk once the job has written its input group
        [sys.executable, "-c", FILLER, str(tmpfs / "out.zarr" / "input"), str(filler)]
    )
    try:
        code, err, _ = cli("run", "job.yaml")
    finally:
        other.kill()
        other.wait()
    assert code == 1, err
    assert "Traceback (most recent call last)" not in err and "unexpected error" not in err
    line = _one_line_failure(err)
    assert "disk full (ENOSPC) writing the results store" in line
    assert f"the tmpfs filesystem mounted at {tmpfs} has" in line and "free of 2.00 MiB" in line
    assert "(estimate)" in line and "--resume" in line
    store = tmpfs / "out.zarr"
    assert status(store) == "failed"
    assert attrs(store)["error"].startswith("disk full (ENOSPC)")
    assert "\n" not in attrs(store)["error"]
    assert not (store / LEASE_FILE).exists() and not (store / RESERVE_FILE).exists()
    filler.unlink()
    code, err, _ = run_on(scheduler, "--resume")
    assert code == 0, err
    assert status(store) == "complete" and attrs(store)["resumes"] == 1
    assert "error" not in attrs(store)


def test_disk_filled_to_the_last_byte_during_the_run_is_still_recorded(
    work, tmpfs, scheduler, monkeypatch
) -> None:
    """Another process takes every free byte just before the kernel is written: the space the
    writer set aside beside its lease is what the ``failed`` status is written with."""
    write_spec(work, output="small/out.zarr")
    write = ResultsStore.write_parts  # a lazy group (the kernel) is written in parts

    def filling_write(self, group, *args, **kwargs):
        if group == "kernel":
            fill(tmpfs)
            assert free_bytes(tmpfs) == 0
        return write(self, group, *args, **kwargs)

    monkeypatch.setattr(ResultsStore, "write_parts", filling_write)
    code, err, _ = run_on(scheduler)
    assert code == 1, err
    line = _one_line_failure(err)
    assert "disk full (ENOSPC)" in line and "has 0 B free of 2.00 MiB" in line, line
    store = tmpfs / "out.zarr"
    assert status(store) == "failed" and "disk full" in attrs(store)["error"]
    assert not (store / LEASE_FILE).exists() and not (store / RESERVE_FILE).exists()


def test_disk_full_during_the_final_status_write_is_recorded(
    work, tmpfs, scheduler, monkeypatch
) -> None:
    write_spec(work, output="small/out.zarr")
    mark_complete = ResultsStore.mark_complete

    def filling_mark_complete(self):
        fill(tmpfs)
        return mark_complete(self)

    monkeypatch.setattr(ResultsStore, "mark_complete", filling_mark_complete)
    code, err, _ = run_on(scheduler)
    assert code == 1, err
    assert "disk full (ENOSPC)" in _one_line_failure(err)
    store = tmpfs / "out.zarr"
    assert status(store) == "failed" and "disk full" in attrs(store)["error"]


def test_a_full_disk_before_the_job_starts_is_refused(work, tmpfs, spy) -> None:
    """Refused before anything is written (by the disk budget, or else when the lease
    cannot be written), leaving no store and no stray lease file."""
    from dkernel.errors import StoreError
    from dkernel.storage.lock import StoreLease

    write_spec(work, output="small/out.zarr")
    fill(tmpfs)
    code, err, seconds = cli("run", "job.yaml", limit=REFUSAL_S)
    assert code == 2 and seconds <= REFUSAL_S, err
    assert "Traceback" not in err and "unexpected error" not in err, err
    assert spy.calls == []
    with pytest.raises(StoreError, match="cannot write the lease file .*No space left on device"):
        StoreLease.acquire(tmpfs / "out.zarr")
    assert [p.name for p in tmpfs.iterdir()] == ["filler-0"]  # no store, no stray lease


def test_a_status_that_cannot_be_written_at_all_says_so(work, scheduler, monkeypatch) -> None:
    """The disk stays full whatever is freed (injected: ``mark_failed`` itself fails): one
    line says the store still reads ``running`` and that ``--resume`` continues it."""
    import errno

    def full(self, *args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    write = ResultsStore.write_parts  # a lazy group (the kernel) is written in parts

    def failing_write(self, group, *args, **kwargs):
        if group == "kernel":
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self.path / "kernel"))
        return write(self, group, *args, **kwargs)

    monkeypatch.setattr(ResultsStore, "write_parts", failing_write)
    monkeypatch.setattr(ResultsStore, "mark_failed", full)
    code, err, _ = run_on(scheduler)
    assert code == 1, err
    line = _one_line_failure(err)
    assert "disk full (ENOSPC)" in line
    assert "could not be marked failed either" in line and "--resume continues it" in line
    assert status(work / "out.zarr") == "running"
    assert not (work / "out.zarr" / LEASE_FILE).exists()


def test_an_error_while_running_is_recorded_on_one_line(work, scheduler, monkeypatch) -> None:
    write = ResultsStore.write

    def failing_write(self, group, *args, **kwargs):
        if group == "embedding":
            raise RuntimeError("the first line\n  and the second")
        return write(self, group, *args, **kwargs)

    monkeypatch.setattr(ResultsStore, "write", failing_write)
    code, err, _ = run_on(scheduler)
    assert code == 1, err
    assert _one_line_failure(err).endswith("RuntimeError: the first line and the second")
    stored = attrs(work / "out.zarr")
    assert stored["status"] == "failed"
    assert stored["error"] == "RuntimeError: the first line and the second"
    assert "and the second" in stored["traceback"]


def test_a_store_removed_while_running_is_named(work, scheduler, monkeypatch) -> None:
    write = ResultsStore.write_parts  # a lazy group (the kernel) is written in parts

    def removing_write(self, group, *args, **kwargs):
        if group == "kernel":
            shutil.rmtree(self.path)  # `rm -rf out.zarr` by someone else, mid-run
        return write(self, group, *args, **kwargs)

    monkeypatch.setattr(ResultsStore, "write_parts", removing_write)
    code, err, _ = run_on(scheduler)
    assert code == 1, err
    line = _one_line_failure(err)
    assert f"the results store {work / 'out.zarr'} was removed while the job was running" in line
    assert "run the job again" in line.lower()
    assert not os.path.lexists(work / "out.zarr" / "zarr.json")


def test_a_store_whose_metadata_is_removed_while_running_is_named(
    work, scheduler, monkeypatch
) -> None:
    write = ResultsStore.write

    def removing_write(self, group, *args, **kwargs):
        if group == "embedding":
            (self.path / "zarr.json").unlink()
        return write(self, group, *args, **kwargs)

    monkeypatch.setattr(ResultsStore, "write", removing_write)
    code, err, _ = run_on(scheduler)
    assert code == 1, err
    assert "zarr.json of the results store" in err and "was removed while the job" in err
    assert not (work / "out.zarr" / "zarr.json").exists()  # never "completed" by a bare root


def test_taking_over_a_lease_hard_linked_to_a_file_elsewhere_leaves_that_file(work, spy) -> None:
    """A stale lease that is a hard link to a file outside the store: the takeover replaces
    the name, never writes the file."""
    victim = work / "victim.json"
    victim.write_text(json.dumps({"host": "elsewhere", "pid": 9, "heartbeat": 1.0}))
    before = victim.read_bytes()
    store = a_running_store(work)
    os.link(victim, store / LEASE_FILE)
    code, err, _ = cli("run", "job.yaml", "--resume", limit=REFUSAL_S)
    assert code == 1 and spy.calls and "took over the stale lease of pid 9" in err, err
    assert victim.read_bytes() == before and victim.stat().st_nlink == 1
    assert status(store) == "running"


def test_a_reserve_planted_as_a_link_is_not_followed(work, scheduler) -> None:
    """``--resume`` of a store whose reserve file is a link to a file outside: the link is
    neither written through nor removed through, and the job completes."""
    victim = work / "victim.txt"
    victim.write_text("precious")
    store = a_running_store(work)
    (store / RESERVE_FILE).symlink_to(victim)
    code, err, _ = run_on(scheduler, "--resume")
    assert code == 0, err
    assert "could not set" in err  # the reserve could not be made: said, not fatal
    assert victim.read_text() == "precious"
    assert status(store) == "complete"


def test_resume_of_a_failed_store_completes_it(work, scheduler) -> None:
    store = ResultsStore(a_running_store(work))
    store.mark_failed(RuntimeError("killed by the OOM killer"))
    code, err, _ = run_on(scheduler, "--resume")
    assert code == 0, err
    stored = attrs(store.path)
    assert stored["status"] == "complete" and stored["resumes"] == 1
    assert "error" not in stored and "traceback" not in stored
