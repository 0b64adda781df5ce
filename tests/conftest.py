"""Shared fixtures: the data directory, a distributed LocalCluster, small datasets."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]


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
    using the ``data_dir`` fixture) and is skipped, with one reason, when they are absent."""
    missing = _data_dir() is None or not _data_dir().exists()
    for item in items:
        if "data_dir" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.data)
        if missing and item.get_closest_marker("data") is not None:
            item.add_marker(pytest.mark.skip(reason=NO_DATA_REASON))


@pytest.fixture(autouse=True)
def _reset_dkernel_logger():
    """Undo the ``dkernel`` logger setup of a CLI call (``dkernel.cli.setup_logging``: its own
    handler, a level, no propagation) after each test, so ``caplog`` sees the package's
    records in the tests that follow."""
    yield
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
