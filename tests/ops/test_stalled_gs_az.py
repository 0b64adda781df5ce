"""gs:// and az:// object stores that stall: requests bounded (issue 54, what was left).

S3 requests are bounded (``dkernel.storage.s3_session.BoundedSession``); gcsfs and adlfs had
no timeout at all, so an endpoint that stops answering held a read or a write for as long as
it stalled. ``dkernel.storage.remote.storage_options`` now gives gcsfs a connect and a read
timeout (``requests_timeout``: aiohttp's ``sock_connect`` / ``sock_read``, on every request)
and adlfs its ``connection_timeout`` / ``read_timeout`` (on every request of its client,
``dkernel.storage.azure_fs``), from the same per-purpose limits as S3's. The stall cases
write through a TCP proxy to the emulator the suite starts (gcp-storage-emulator, Azurite)
that stops relaying (``StallingProxy``), with the limits shortened to 2 s and the backends'
waits between tries taken out (gcsfs: 6 tries, 31 s of back-off; Azure's,
``dkernel.storage.azure_fs.RETRY_POLICY``: 4 tries, about 12 s).
Time limits are hang guards.
"""

from __future__ import annotations

import pickle
import time
from urllib.parse import urlparse

import pytest

from tests.limits import REFUSAL_S
from tests.ops.test_job_signals_and_network import StallingProxy

SHORT = {"connect_timeout": 2, "read_timeout": 2}


@pytest.fixture()
def no_backoff(monkeypatch):
    """The backends' waits between tries taken out (gcsfs: 31 s over 6 tries; Azure's, ours:
    about 12 s over 4): what is under test is that every try is bounded, not the waits."""
    import asyncio
    import types

    pytest.importorskip("gcsfs")
    pytest.importorskip("adlfs")
    import gcsfs.retry

    from dkernel.storage import azure_fs

    no_wait = types.SimpleNamespace(sleep=lambda _s: asyncio.sleep(0))
    monkeypatch.setattr(gcsfs.retry, "asyncio", no_wait)
    policy = {"initial_backoff": 0, "increment_base": 0, "random_jitter_range": 0}
    monkeypatch.setattr(azure_fs, "RETRY_POLICY", {**azure_fs.RETRY_POLICY, **policy})


@pytest.mark.parametrize("purpose", ["store", "input", "check", "lease"])
def test_the_limits_reach_the_gs_and_az_file_systems(purpose):
    """The purpose's connect and read timeouts are set on gcsfs and adlfs, and survive the
    pickle a process worker rebuilds the file system from."""
    pytest.importorskip("gcsfs")
    pytest.importorskip("adlfs")
    from dkernel.storage.remote import _S3_LIMITS, filesystem

    connect, read = _S3_LIMITS[purpose]["connect_timeout"], _S3_LIMITS[purpose]["read_timeout"]
    gs, _ = filesystem(
        "gs://b/x.zarr", {"token": "anon", "skip_instance_cache": True}, purpose=purpose
    )
    for fs in (gs, pickle.loads(pickle.dumps(gs))):
        timeout = fs.requests_timeout
        assert (timeout.sock_connect, timeout.sock_read, timeout.total) == (connect, read, None)
    options = {"account_name": "acc", "account_key": "a2V5", "skip_instance_cache": True}
    az, _ = filesystem("az://b/x.zarr", options, purpose=purpose)
    for fs in (az, pickle.loads(pickle.dumps(az))):
        assert fs._timeout_kwargs == {"connection_timeout": connect, "read_timeout": read}
        # the client's transport defaults: every request, listings and deletes included
        config = fs.service_client._pipeline._transport.connection_config
        assert (config.timeout, config.read_timeout) == (connect, read)
        assert fs.service_client.url.startswith("https://acc.blob.core.windows.net")


def test_limits_the_user_gives_win():
    pytest.importorskip("gcsfs")
    from dkernel.storage.remote import storage_options

    assert storage_options("gs://b/x", {"requests_timeout": 5})["requests_timeout"] == 5
    assert storage_options("az://b/x", {"read_timeout": 5})["read_timeout"] == 5


def _gs(request, port):
    from dkernel.storage.remote import filesystem

    server = request.getfixturevalue("gcs_server")
    bucket = request.getfixturevalue("gcs_bucket")
    options = {"endpoint_url": f"http://127.0.0.1:{port}", "token": "anon"}
    return urlparse(server), bucket, lambda: filesystem("gs://x", options, purpose="store")[0]


def _az(request, port):
    from dkernel.storage.remote import filesystem

    server = request.getfixturevalue("azure_server")
    bucket = request.getfixturevalue("az_container")
    target = urlparse(server.split("BlobEndpoint=")[1].rstrip(";"))
    connection = server.replace(f"127.0.0.1:{target.port}", f"127.0.0.1:{port}")
    options = {"connection_string": connection}
    return target, bucket, lambda: filesystem("az://x", options, purpose="store")[0]


#: (scheme, call): a chunk write on both backends; on Azure also a listing and a delete,
#: which adlfs alone left at the Azure SDK's 300 s (``dkernel.storage.azure_fs``).
STALLED_CALLS = [("gs", "write"), ("az", "write"), ("az", "listing"), ("az", "delete")]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("scheme", "call"), STALLED_CALLS, ids=["-".join(c) for c in STALLED_CALLS]
)
def test_a_stalled_gs_or_az_endpoint_fails_a_call(request, monkeypatch, no_backoff, scheme, call):
    """A results store's file system (purpose ``store``, its limits shortened to 2 s)
    writes an object, then the endpoint stalls: the next write, listing or delete fails
    with a timeout instead of waiting for as long as the endpoint stalls (measured with the
    back-off: gs 45 s, az 31 s for a write; without the limits a write waited past 120 s,
    and an az listing or delete waits 300 s, ``benchmarks/results/stalled_az.md``)."""
    from dkernel.storage import remote

    monkeypatch.setitem(remote._S3_LIMITS, "store", {**remote._S3_LIMITS["store"], **SHORT})
    proxy = StallingProxy(("127.0.0.1", 1))  # the target is set below, before any connection
    try:
        target, bucket, make = (_gs if scheme == "gs" else _az)(request, proxy.port)
        proxy.target = (target.hostname, target.port)
        fs = make()
        fs.pipe_file(f"{bucket}/a", b"x" * 100)
        calls = {
            "write": lambda: fs.pipe_file(f"{bucket}/b", b"y" * 100),
            "listing": lambda: fs.ls(bucket, refresh=True),
            "delete": lambda: fs.rm_file(f"{bucket}/a"),
        }
        proxy.stall()
        t = time.perf_counter()
        with pytest.raises(Exception) as caught:  # noqa: PT011  (each backend its own type)
            calls[call]()
        took = time.perf_counter() - t
    finally:
        proxy.stalled.clear()
        proxy.close()
    assert "timeout" in f"{type(caught.value).__name__} {caught.value}".lower(), caught.value
    assert took < REFUSAL_S, took
