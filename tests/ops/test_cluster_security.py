"""The embedded cluster is authenticated, and its size is checked before it starts (issue 34).

Authentication: ``dkernel run``/``demo``/``connect()`` start a LocalCluster on
``tls://127.0.0.1`` with credentials made for it alone (``Security.temporary()``). A client
without them (plain TCP, TLS with other credentials, TLS without a certificate) is refused, and
so is another local user, tried for real as uid 65534 through ``setpriv``.

Bounds: ``--workers``, ``--threads``, ``submit --timeout`` and the spec's ``runtime`` are
refused with exit 2 and a one-line message naming the option and the allowed range, no
traceback, before any cluster starts.
"""

from __future__ import annotations

import functools
import io
import os
import re
import shutil
import socket
import ssl
import subprocess
import sys
import textwrap
import time
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import numpy as np
import pytest
import yaml

from dkernel.cli import main
from dkernel.errors import InvalidInputError
from dkernel.runtime.connect import MAX_THREADS_PER_CORE, check_cluster_size
from tests.limits import REFUSAL_S

#: the module (``dkernel.runtime.connect`` the attribute is the function)
connect_module = sys.modules["dkernel.runtime.connect"]

CORES = os.cpu_count() or 1
MOST = MAX_THREADS_PER_CORE * CORES
#: A refusal's time limit (a hang guard: tests/limits.py), a connection attempt's timeout and
#: the slack allowed above it.
MAX_SECONDS, CONNECT_TIMEOUT, SLACK = REFUSAL_S, 5.0, REFUSAL_S

# ------------------------------------------------------------------------------------------
# authentication of the embedded cluster (the session's ``client`` fixture is one)
# ------------------------------------------------------------------------------------------


def _host_port(address: str) -> tuple[str, int]:
    host, port = address.split("://", 1)[1].rsplit(":", 1)
    return host, int(port)


def test_embedded_cluster_listens_with_tls_on_loopback_only(client) -> None:
    assert client.scheduler.address.startswith("tls://127.0.0.1:")
    assert client.security.require_encryption
    workers = client.scheduler_info()["workers"]
    assert workers and all(a.startswith("tls://127.0.0.1:") for a in workers)
    for listener in client.cluster.scheduler.listeners:
        assert listener.listen_address.startswith("tls://127.0.0.1:")
    # the dashboard stays plain HTTP, on loopback
    assert client.dashboard_link.startswith("http://127.0.0.1:")


def test_plain_tcp_client_cannot_connect(client) -> None:
    from distributed import Client

    plain = client.scheduler.address.replace("tls://", "tcp://", 1)
    t = time.perf_counter()
    with pytest.raises((OSError, TimeoutError)):
        Client(plain, timeout=CONNECT_TIMEOUT, set_as_default=False)
    assert time.perf_counter() - t < CONNECT_TIMEOUT + SLACK


def test_tls_client_with_other_credentials_is_refused(client) -> None:
    from distributed import Client
    from distributed.security import Security

    t = time.perf_counter()
    with pytest.raises((OSError, TimeoutError)):
        Client(
            client.scheduler.address,
            security=Security.temporary(),
            timeout=CONNECT_TIMEOUT,
            set_as_default=False,
        )
    assert time.perf_counter() - t < CONNECT_TIMEOUT + SLACK


@pytest.mark.parametrize("role", ["scheduler", "worker"])
def test_tls_client_without_a_certificate_is_refused(client, role) -> None:
    """Even a client that trusts the cluster's CA is turned away without a certificate of its
    own: the scheduler and the workers require one (mutual TLS)."""
    address = client.scheduler.address
    if role == "worker":
        address = next(iter(client.scheduler_info()["workers"]))
    ctx = ssl.create_default_context(cadata=client.security.tls_ca_file)
    ctx.check_hostname = False
    with (
        socket.create_connection(_host_port(address), timeout=CONNECT_TIMEOUT) as raw,
        pytest.raises((ssl.SSLError, OSError), match=r"(?i)certificate|reset|EOF"),
        ctx.wrap_socket(raw) as tls,
    ):
        tls.sendall(b"\0" * 8)  # TLS 1.3 sends the refusal after the handshake
        assert tls.recv(8) == b"", "the cluster answered a client without a certificate"


def test_connect_in_the_same_process_reuses_the_credentials(client) -> None:
    """``dkernel.connect(address)`` (``dkernel run --scheduler`` in-process, tests) of this
    process's embedded cluster needs no security argument."""
    import dkernel

    other = dkernel.connect(client.scheduler.address, quiet=True)
    try:
        assert other.security is client.security
        assert other.submit(sum, [1, 2]).result(timeout=30) == 3
    finally:
        other.close()


def test_no_key_material_on_worker_command_lines_or_environment(client) -> None:
    psutil = pytest.importorskip("psutil")
    children = psutil.Process().children(recursive=True)
    assert children, "the session cluster has no worker processes"
    for proc in children:
        try:
            cmdline, env = " ".join(proc.cmdline()), proc.environ()
        except psutil.Error:
            continue
        assert "PRIVATE KEY" not in cmdline and "BEGIN" not in cmdline
        assert not any("PRIVATE KEY" in v for v in env.values())


ATTACK = textwrap.dedent(
    """
    import os, sys
    from distributed import Client
    from distributed.security import Security

    address, marker = sys.argv[1], sys.argv[2]
    print("attacker uid", os.getuid(), flush=True)

    def plant(path):
        with open(path, "w") as f:
            f.write(str(os.getuid()))
        return os.getuid()

    tries = [(address, None)]
    if address.startswith("tls://"):  # its own credentials, and plain TCP at the same port
        tries += [(address, Security.temporary()), (address.replace("tls", "tcp", 1), None)]
    for target, security in tries:
        try:
            c = Client(target, timeout=2, security=security, set_as_default=False)
        except Exception as exc:
            print("refused", target, type(exc).__name__, flush=True)
            continue
        print("CONNECTED", target, "ran as", c.submit(plant, marker).result(), flush=True)
        c.close()
    """
)


def _as_nobody(setpriv: str, *args: str) -> subprocess.CompletedProcess:
    """This Python, run as uid/gid 65534 (no groups) with ``args``."""
    return subprocess.run(
        [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, *args],
        capture_output=True,
        text=True,
        timeout=90,
        cwd="/",
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": "/tmp"},
    )


def _setpriv() -> str:
    """``setpriv``, when this test can run code as another local user; skips saying why not."""
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("setpriv is not installed (util-linux)")
    if os.geteuid() != 0:
        pytest.skip("switching to another uid needs root")
    # a virtualenv inside a private folder (a clone in `mktemp -d`, mode 700) is unreadable to
    # any other user: the attacker could not even import distributed
    failure = _nobody_cannot_import(setpriv)
    if failure:
        pytest.skip(
            f"uid 65534 cannot run {sys.executable} with distributed ({failure}): the Python "
            "environment is not readable by another user (a clone in a private folder?)"
        )
    return setpriv


@functools.cache
def _nobody_cannot_import(setpriv: str) -> str:
    """Why uid 65534 cannot import distributed with this Python ('' when it can)."""
    probe = _as_nobody(setpriv, "-c", "import distributed")
    return "" if probe.returncode == 0 else (probe.stderr.strip().splitlines() or ["?"])[-1]


def _attack_as_nobody(address: str, marker: Path) -> subprocess.CompletedProcess:
    """Run :data:`ATTACK` as uid/gid 65534 (no groups). It needs no access to ``marker``'s
    folder: only a worker that runs its function writes there, as this process's user."""
    return _as_nobody(_setpriv(), "-c", ATTACK, address, str(marker))


def test_another_local_user_cannot_submit_work(client, tmp_path) -> None:
    marker = tmp_path / "pwned"
    proc = _attack_as_nobody(client.scheduler.address, marker)
    assert "attacker uid 65534" in proc.stdout, proc.stdout + proc.stderr  # it really ran
    assert "CONNECTED" not in proc.stdout, proc.stdout
    assert proc.stdout.count("refused") == 3, proc.stdout + proc.stderr[-2000:]
    assert not marker.exists()


def test_the_attack_succeeds_on_an_unauthenticated_cluster(tmp_path) -> None:
    """Control: the same attacker against a plain-TCP LocalCluster (what dkernel started before
    issue 34) runs its code as this process's user. Without this the test above could pass
    for the wrong reason (an attacker that cannot run at all)."""
    _setpriv()
    from distributed import Client, LocalCluster

    with (
        LocalCluster(
            n_workers=1,
            threads_per_worker=1,
            processes=False,
            protocol="tcp://",
            host="127.0.0.1",
            dashboard_address=None,
        ) as cluster,
        Client(cluster, set_as_default=False),
    ):
        marker = tmp_path / "pwned"
        proc = _attack_as_nobody(cluster.scheduler_address, marker)
    assert "CONNECTED" in proc.stdout, proc.stdout + proc.stderr[-2000:]
    assert marker.read_text() == str(os.getuid())


# ------------------------------------------------------------------------------------------
# bounds on the cluster's size and the scheduler timeout, through ``dkernel``
# ------------------------------------------------------------------------------------------


@pytest.fixture()
def work(tmp_path, monkeypatch):
    """A small CSV job; starting a cluster fails the test (every case here is refused first)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DKERNEL_OUTPUT_ROOT", raising=False)

    def no_cluster(*args, **kwargs):
        raise AssertionError("a cluster was started")

    monkeypatch.setattr(connect_module, "_local_client", no_cluster)
    import dkernel.jobs.runner  # noqa: F401  (imported once, not timed as a refusal)

    rows = np.random.default_rng(0).normal(size=(60, 3)).round(4)
    (tmp_path / "data.csv").write_text("\n".join(",".join(map(str, r)) for r in rows) + "\n")
    return tmp_path


def _job(work: Path, runtime: dict | None = None) -> Path:
    spec = {
        "name": "bounds",
        "data": {"reader": "csv", "path": "data.csv"},
        "method": "rbf-spectral",
        "params": {"n_clusters": 2},
        "output": "out.zarr",
    }
    if runtime is not None:
        spec["runtime"] = runtime
    path = work / "job.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def refused(work: Path, argv: list[str], pattern: str) -> str:
    err = io.StringIO()
    t = time.perf_counter()
    with redirect_stderr(err), redirect_stdout(io.StringIO()):
        code = main(argv)
    seconds = time.perf_counter() - t
    text = err.getvalue()
    assert code == 2, f"exit {code}: {text}"
    assert re.search(pattern, text), f"{pattern!r} not in {text!r}"
    assert "Traceback" not in text and len(text.strip().splitlines()) == 1, text
    assert "\x1b" not in text
    assert seconds < MAX_SECONDS, seconds
    assert not (work / "out.zarr").exists(), "a store was created"
    return text


RANGE = rf"must be an integer in \[1, {MOST}\]"


@pytest.mark.parametrize(
    ("flags", "pattern"),
    [
        # the cases
        (["--workers", "-1"], rf"--workers: {RANGE} .*; got '-1'"),
        (["--threads", "-1"], rf"--threads: {RANGE} .*; got '-1'"),
        (["--workers", "64"] if MOST < 64 else ["--workers", "100000"], rf"--workers: {RANGE}"),
        # our own
        (["--workers", "0"], rf"--workers: {RANGE} .*; got '0'"),
        (["--threads", "0"], rf"--threads: {RANGE}"),
        (["--threads", "1e9"], rf"--threads: {RANGE} .*; got '1e9'"),
        (["--workers", "2.5"], rf"--workers: {RANGE} .*; got '2.5'"),
        (["--workers", "two"], rf"--workers: {RANGE} .*; got 'two'"),
        (["--workers", ""], rf"--workers: {RANGE} .*; got ''"),
        (["--workers", "99999999999999999999999"], rf"--workers: {RANGE}"),
        (["--workers", "\x1b[2J1"], r"--workers: .*got '\\x1b\[2J1'"),
        (
            ["--workers", str(MOST), "--threads", "2"],
            rf"{MOST} workers × 2 threads = {2 * MOST} threads is more than this machine runs: "
            rf"at most {MOST} \({MAX_THREADS_PER_CORE} threads per core, {CORES} CPU cores\)",
        ),
    ],
)
def test_run_cluster_size_flags_are_bounded(work, flags, pattern) -> None:
    refused(work, ["run", str(_job(work)), "--no-progress", *flags], pattern)


@pytest.mark.parametrize(
    ("timeout", "shown"),
    [
        ("nan", "'nan'"),  # the case (was a KeyError, exit 1)
        ("-5", "'-5'"),
        ("0", "'0'"),
        ("inf", "'inf'"),
        ("-inf", "'-inf'"),
        ("1e9", "'1e9'"),
        ("soon", "'soon'"),
    ],
)
def test_submit_timeout_is_bounded(work, timeout, shown) -> None:
    argv = ["submit", str(_job(work)), "--scheduler", "tcp://127.0.0.1:9", f"--timeout={timeout}"]
    refused(
        work,
        [*argv, "--no-progress"],
        rf"--timeout: must be a number of seconds in \(0, 3600\]; got {re.escape(shown)}",
    )


@pytest.mark.parametrize(
    ("runtime", "pattern"),
    [
        # the cases: 64 workers on a small machine, a limit too small to start a worker
        (
            {"n_workers": 64} if MOST < 64 else {"n_workers": 1024},
            rf"n_workers \(--workers, runtime\.n_workers\) {RANGE}",
        ),
        (
            {"memory_limit": "1kB"},
            r"memory_limit \(runtime\.memory_limit\) gives each worker 0\.98 kiB; a worker "
            r"needs at least 256\.00 MiB to start\. Got '1kB'",
        ),
        # our own
        ({"memory_limit": "255MiB"}, r"gives each worker 255\.00 MiB"),
        (
            {"memory_limit": str(256 * 2**20 - 1)},
            r"gives each worker 268,435,455 bytes; a worker needs at least 268,435,456 bytes",
        ),
        ({"n_workers": 2, "memory_limit": "100MiB"}, r"gives each worker 100\.00 MiB"),
        ({"threads_per_worker": 256}, rf"threads_per_worker .* {RANGE}"),
        (
            {"n_workers": MOST, "threads_per_worker": MOST},
            rf"{MOST} workers × {MOST} threads = {MOST * MOST} threads",
        ),
    ],
)
def test_spec_runtime_is_checked_before_the_cluster_starts(work, runtime, pattern) -> None:
    refused(work, ["run", str(_job(work, runtime)), "--no-progress"], pattern)


def test_flags_win_over_the_spec_and_are_checked_with_its_memory_limit(work) -> None:
    job = _job(work, {"n_workers": 1, "memory_limit": "1kB"})
    refused(work, ["run", str(job), "--no-progress", "--workers", "1"], r"0\.98 kiB")


@pytest.mark.parametrize(
    ("kwargs", "pattern"),
    [
        ({"n_workers": -1}, r"n_workers .* got -1"),
        ({"n_workers": 0}, r"n_workers .* got 0"),
        ({"n_workers": True}, r"n_workers .* got True"),
        ({"n_workers": 2.0}, r"n_workers .* got 2\.0"),
        ({"threads_per_worker": -1}, r"threads_per_worker .* got -1"),
        ({"memory_limit": "1kB"}, r"0\.98 kiB"),
        ({"memory_limit": "lots"}, r"must be 'auto' or a size such as '4GiB'; got 'lots'"),
    ],
)
def test_python_connect_refuses_before_starting(monkeypatch, kwargs, pattern) -> None:
    import dkernel

    monkeypatch.setattr(connect_module, "_local_client", None)  # would fail if reached
    with pytest.raises(InvalidInputError, match=pattern):
        dkernel.connect(**kwargs, quiet=True)


@pytest.mark.parametrize("timeout", [float("nan"), -1.0, 0, float("inf"), "10"])
def test_python_connect_refuses_a_bad_timeout_before_connecting(timeout) -> None:
    import dkernel

    with pytest.raises(InvalidInputError, match=r"timeout \(--timeout\) must be a number"):
        dkernel.connect("tcp://127.0.0.1:9", timeout=timeout, quiet=True)


def test_default_size_always_passes_the_check() -> None:
    from dkernel.runtime import default_workers

    for cores in (1, 2, 3, 4, 8, 64, 256):
        n, t = default_workers(cores)
        check_cluster_size(n, t, "auto", cpu_count=cores)
        check_cluster_size(n, t, None, cpu_count=cores)


def test_missing_cryptography_is_a_clear_failure(monkeypatch) -> None:
    import builtins

    from dkernel.errors import DKernelError

    real_import = builtins.__import__

    def no_cryptography(name, *args, **kwargs):
        if name == "cryptography" or name.startswith("cryptography."):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_cryptography)
    with pytest.raises(DKernelError, match=r"needs the 'cryptography' package"):
        connect_module._require_cryptography()


# --- the client's TLS settings: never echoed, bounded, typed ------------------------------------
KEY_BODY = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7secretkeymaterial"


def _submit(tmp_path: Path, *extra: str) -> tuple[int, str, float]:
    (tmp_path / "d.csv").write_text("\n".join(f"{i},{i % 3}" for i in range(30)) + "\n")
    spec = tmp_path / "job.yaml"
    spec.write_text(
        yaml.safe_dump(
            {
                "name": "tls",
                "data": {"reader": "csv", "path": str(tmp_path / "d.csv")},
                "method": "rbf-spectral",
                "params": {"n_clusters": 2},
                "output": str(tmp_path / "out.zarr"),
            }
        )
    )
    err = io.StringIO()
    start = time.monotonic()
    with redirect_stderr(err), redirect_stdout(io.StringIO()):
        code = main(["submit", str(spec), "--scheduler", "tls://127.0.0.1:1", *extra])
    return code, err.getvalue(), time.monotonic() - start


def test_private_key_given_as_security_config_is_not_printed(tmp_path):
    key = tmp_path / "client.key"
    key.write_text(f"-----BEGIN PRIVATE KEY-----\n{KEY_BODY}\n-----END PRIVATE KEY-----\n")
    code, err, seconds = _submit(tmp_path, "--security-config", str(key))
    assert code == 2 and "Traceback" not in err and seconds < REFUSAL_S
    assert KEY_BODY not in err and "BEGIN" not in err
    assert "PEM certificate or key" in err and "--tls-key" in err


@pytest.mark.parametrize(
    ("body", "pattern"),
    [
        ("tls_ca_file: [a, b]\n", r"tls_ca_file must be one file path"),
        ("tls_client_key: {k: v}\n", r"tls_client_key must be one file path"),
        ("require_encryption: maybe\n", r"require_encryption must be true or false"),
        ("- a\n- b\n", r"must be a mapping .* holds a list"),
        (f"tls_ca_file: a\n{KEY_BODY}: 1\n", r"unknown keys"),
        ("tls_ca_file: [unclosed\n", r"is not valid YAML"),
    ],
)
def test_bad_security_config_is_one_line_exit_2(tmp_path, body, pattern):
    config = tmp_path / "tls.yaml"
    config.write_text(body)
    code, err, seconds = _submit(tmp_path, "--security-config", str(config))
    assert code == 2 and "Traceback" not in err and seconds < REFUSAL_S, err
    assert re.search(pattern, err), err
    assert KEY_BODY not in err


def test_security_config_that_is_a_fifo_or_huge_is_refused_fast(tmp_path):
    fifo = tmp_path / "tls.fifo"
    os.mkfifo(fifo)
    code, err, seconds = _submit(tmp_path, "--security-config", str(fifo))
    assert code == 2 and "Traceback" not in err and seconds < REFUSAL_S and "FIFO" in err.upper(), (
        err
    )
    huge = tmp_path / "tls.yaml"
    with open(huge, "wb") as f:
        f.truncate(2 << 30)
    code, err, seconds = _submit(tmp_path, "--security-config", str(huge))
    assert code == 2 and "Traceback" not in err and seconds < REFUSAL_S and "bytes" in err, err


def test_max_memory_is_capped_at_the_workers_total(tmp_path, monkeypatch) -> None:
    """A 3 500-row dense kernel (about 294 MB) under the default 4 GiB limit, on one worker
    limited to 256 MiB: refused once the cluster answers, before any store is written."""
    work = tmp_path
    monkeypatch.chdir(work)
    monkeypatch.delenv("DKERNEL_OUTPUT_ROOT", raising=False)
    rows = np.random.default_rng(1).normal(size=(3500, 2)).round(3)
    (work / "big.csv").write_text("\n".join(f"{a},{b}" for a, b in rows) + "\n")
    spec = {
        "name": "memory",
        "data": {"reader": "csv", "path": "big.csv"},
        "method": "rbf-spectral",
        "params": {"n_clusters": 2},
        "output": "out.zarr",
        "runtime": {"n_workers": 1, "threads_per_worker": 1, "memory_limit": "256MiB"},
    }
    (work / "job.yaml").write_text(yaml.safe_dump(spec))
    err = io.StringIO()
    with redirect_stderr(err), redirect_stdout(io.StringIO()):
        code = main(["run", "job.yaml", "--no-progress"])
    assert code == 2, err.getvalue()
    assert re.search(r"capped at the worker's memory limit 256\.00 MiB", err.getvalue())
    assert "Traceback" not in err.getvalue() and not (work / "out.zarr").exists()
