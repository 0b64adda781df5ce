"""Results stores on object storage (issue 30, part A), against a real S3 server (moto).

URL handling (no local ``s3:`` folder ever), the store written and read back through s3fs,
the conditional-write lease on S3, and the bounded checks made before any cluster starts.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from dkernel.errors import SpecError, StoreError, StoreNotFoundError
from dkernel.jobs.spec import OutputPolicy
from dkernel.storage import remote
from dkernel.storage.lock import LEASE_FILE, RemoteStoreLease, acquire_lease
from dkernel.storage.paths import check_writable

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _in_this_process():
    """Compute here: the session cluster other tests start has process workers without the
    S3 server's environment (a real cluster needs its credentials too: docs/store_lock.md)."""
    import dask

    with dask.config.set(scheduler="sync"):
        yield


def _fs():
    import s3fs

    return s3fs.S3FileSystem(skip_instance_cache=True)


# ------------------------------------------------------------------------------------------
# URLs
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("s3://bucket/results/wine.zarr", "s3://bucket/results/wine.zarr"),
        ("s3://bucket//results/wine.zarr/", "s3://bucket/results/wine.zarr"),
        ("S3://bucket/x.zarr", "s3://bucket/x.zarr"),
        ("file:///tmp/x.zarr", Path("/tmp/x.zarr")),
        ("results/x.zarr", Path("results/x.zarr")),
    ],
)
def test_locations_are_urls_or_paths(text, expected) -> None:
    assert remote.as_location(text) == expected


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("ftp://host/x.zarr", "unknown URL scheme 'ftp'"),
        ("https://host/x.zarr", "read-only"),
        ("s3://key:secret@bucket/x.zarr", "credentials in a URL are refused"),
        ("s3://bucket/a/../x.zarr", "'..' are not allowed"),
        ("s3:///x.zarr", "names no bucket"),
    ],
)
def test_bad_urls_are_refused(text, problem) -> None:
    with pytest.raises(StoreError, match=problem) as info:
        remote.as_location(text)
    assert "secret" not in str(info.value)


def test_https_store_may_be_read() -> None:
    assert remote.as_location("https://h/x.zarr/", read_only=True) == "https://h/x.zarr"


def test_output_root_url_joins_relative_outputs(monkeypatch) -> None:
    monkeypatch.delenv("DKERNEL_OUTPUT_ROOT", raising=False)
    policy = OutputPolicy.default(None, "s3://bucket/")
    assert policy.confine(Path("results/wine.zarr")) == "s3://bucket/results/wine.zarr"
    assert policy.confine("s3://bucket/other/x.zarr") == "s3://bucket/other/x.zarr"
    with pytest.raises(SpecError, match="outside the output root"):
        policy.confine("s3://elsewhere/x.zarr")
    with pytest.raises(SpecError, match="climbs out"):
        policy.confine(Path("../x.zarr"))
    # no root chosen: a URL output is where the spec says, never a local "s3:" folder
    assert OutputPolicy.default(None, None).confine("s3://b1/x.zarr") == "s3://b1/x.zarr"


@pytest.mark.parametrize(
    ("text", "scheme", "is_remote"),
    [
        ("s3://b/k.tif", "s3", True),
        ("S3A://b/k", "s3a", True),
        ("/vsis3/b/k.tif", "s3", True),
        ("/vsicurl/https://h/k.tif", "https", True),
        ("file:///tmp/x.tif", "file", False),  # a file:// URL is a local path
        ("C://data/x.tif", None, False),  # a Windows drive, not a one-letter scheme
        ("data/x.tif", None, False),
        (Path("s3:/b/k"), None, False),
    ],
)
def test_one_scheme_of_for_inputs_and_stores(text, scheme, is_remote) -> None:
    from dkernel.io import remote as inputs

    assert remote.scheme_of(text) == scheme
    assert remote.is_remote(text) is is_remote
    assert remote.is_url(text) is (scheme is not None)
    assert not hasattr(inputs, "is_remote") or inputs.is_remote is remote.is_remote


def test_gdal_paths_are_not_results_stores() -> None:
    with pytest.raises(StoreError, match=r"GDAL's /vsi\.\.\. paths name rasters.*s3://b/x\.zarr"):
        remote.as_location("/vsis3/b/x.zarr")


def test_one_options_resolver_for_fsspec_and_gdal(monkeypatch) -> None:
    from dkernel.io.remote import gdal_options

    monkeypatch.delenv("AWS_S3_ENDPOINT", raising=False)
    given = {"endpoint": "http://127.0.0.1:9", "region": "eu-west-1", "anon": True}
    store = remote.storage_options("s3://b/x", given)
    config = store.pop("config_kwargs")
    assert store == {
        "anon": True,
        "client_kwargs": {"endpoint_url": "http://127.0.0.1:9", "region_name": "eu-west-1"},
    }
    # a store's requests are bounded too (a stalled endpoint), its file systems shared
    assert config["connect_timeout"] == 10 and config["retries"]["total_max_attempts"] == 1
    with_config = {**given, "config_kwargs": {"read_timeout": 99}}
    inputs = remote.storage_options("s3://b/x", with_config, purpose="input")
    assert inputs["client_kwargs"] == store["client_kwargs"]
    assert inputs["config_kwargs"]["read_timeout"] == 99  # the user's option wins
    assert inputs["config_kwargs"]["connect_timeout"] == 5 and inputs["skip_instance_cache"]
    check = remote.storage_options("s3://b/x", given, purpose="check")["config_kwargs"]
    assert check["retries"]["max_attempts"] == 1
    gdal = gdal_options(given)  # the short names reach GDAL too
    assert gdal["AWS_S3_ENDPOINT"] == "127.0.0.1:9" and gdal["AWS_HTTPS"] == "NO"
    assert gdal["AWS_REGION"] == "eu-west-1" and gdal["AWS_NO_SIGN_REQUEST"] == "YES"
    assert remote.endpoint_of("/vsis3/b/k", given) == "http://127.0.0.1:9"
    assert remote.endpoint_of("https://h:8/k") == "https://h:8"


# ------------------------------------------------------------------------------------------
# the store on S3
# ------------------------------------------------------------------------------------------


def _write_store(url: str, **options):
    from dkernel.storage.store import ResultsStore

    store = ResultsStore.create(url, job={"name": "t"}, seed=0, storage_options=options or None)
    x = np.arange(12.0).reshape(4, 3)
    store.write("embedding", xr.Dataset({"embedding": (("sample", "component"), x)}))
    store.mark_complete()
    return x


def test_store_round_trip_on_s3(s3_bucket, tmp_path, monkeypatch) -> None:
    from dkernel.storage.store import describe_store, open_results

    monkeypatch.chdir(tmp_path)
    url = f"s3://{s3_bucket}/results/t.zarr"
    x = _write_store(url)
    assert not (tmp_path / "s3:").exists()  # the data-loss bug of the issue
    assert _fs().exists(f"{s3_bucket}/results/t.zarr/zarr.json")
    tree = open_results(url)
    assert tree.attrs["status"] == "complete"
    assert hasattr(tree["embedding"]["embedding"].data, "dask")  # lazy
    np.testing.assert_array_equal(tree["embedding"]["embedding"].values, x)
    info = describe_store(url)
    assert info["path"] == url and info["attrs"]["status"] == "complete"
    with pytest.raises(StoreError, match="already holds a complete results store"):
        _write_store(url)


def test_open_results_from_a_fresh_process(s3_bucket) -> None:
    url = f"s3://{s3_bucket}/t.zarr"
    x = _write_store(url)
    code = (
        "import sys, dkernel\n"
        f"t = dkernel.open_results({url!r})\n"
        "a = t['embedding']['embedding']\n"
        "assert hasattr(a.data, 'dask'), 'not lazy'\n"
        "print(a.values.sum())\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO
    )
    assert out.returncode == 0, out.stderr
    assert float(out.stdout) == x.sum()


def test_missing_store_and_foreign_prefix(s3_bucket) -> None:
    from dkernel.storage.store import ResultsStore, open_results

    with pytest.raises(StoreNotFoundError, match=f"s3://{s3_bucket}/none.zarr"):
        open_results(f"s3://{s3_bucket}/none.zarr")
    _fs().pipe(f"{s3_bucket}/foreign.zarr/data.csv", b"a,b\n")
    with pytest.raises(StoreError, match="is not a dkernel results store"):
        ResultsStore.create(f"s3://{s3_bucket}/foreign.zarr", job={}, seed=0)
    assert _fs().cat(f"{s3_bucket}/foreign.zarr/data.csv") == b"a,b\n"  # left alone


def test_another_writers_lease_and_probe_are_not_foreign_objects(s3_bucket) -> None:
    """A second writer that lists the prefix while the first takes its lease sees the lease
    and the first's conditional-write probe: not results data, so the lease (taken next) names
    the holder instead of the prefix being refused as foreign (test_remote_jobs' race)."""
    from dkernel.storage.lock import LEASE_FILE
    from dkernel.storage.store import check_target

    for name, extra in (("taking.zarr", False), ("foreign-leased.zarr", True)):
        _fs().pipe(f"{s3_bucket}/{name}/.{LEASE_FILE}.probe-0123abcd", b"")
        _fs().pipe(f"{s3_bucket}/{name}/{LEASE_FILE}", b"{}")
        if extra:
            _fs().pipe(f"{s3_bucket}/{name}/notes.txt", b"mine")
    assert check_target(f"s3://{s3_bucket}/taking.zarr", overwrite=True) is None
    with pytest.raises(StoreError, match=r"holds 1 other object\(s\)"):
        check_target(f"s3://{s3_bucket}/foreign-leased.zarr", overwrite=True)


def test_storage_options_never_recorded(s3_server, s3_bucket, monkeypatch) -> None:
    """Options given explicitly (with a secret) reach the store but never its metadata."""
    secret = "s3cr3t-never-stored"
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(key, raising=False)
    url = f"s3://{s3_bucket}/opts.zarr"
    options = {"endpoint": s3_server, "key": "dkernel-test", "secret": secret}
    _write_store(url, **options)
    fs = remote.filesystem(url, options)[0]
    for key in fs.find(f"{s3_bucket}/opts.zarr"):
        assert secret.encode() not in fs.cat(key), key


# ------------------------------------------------------------------------------------------
# checks before any cluster starts
# ------------------------------------------------------------------------------------------


def test_missing_bucket_is_named(s3_server) -> None:
    with pytest.raises(StoreError, match="the bucket 'no-such-bucket-dk' does not exist"):
        check_writable("s3://no-such-bucket-dk/x.zarr")


def test_unreachable_endpoint_fails_in_bounded_time(monkeypatch) -> None:
    import socket

    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "x")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "y")
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{port}")
    t = time.monotonic()
    with pytest.raises(StoreError, match="endpoint cannot be reached") as info:
        check_writable("s3://bucket-dk/x.zarr")
    assert time.monotonic() - t < 3 * remote.CHECK_TIMEOUT_S
    assert "Nothing was written" in str(info.value)


# ------------------------------------------------------------------------------------------
# the lease on S3
# ------------------------------------------------------------------------------------------


def test_s3_lease_is_exclusive_and_released(s3_bucket) -> None:
    url = f"s3://{s3_bucket}/l.zarr"
    first = acquire_lease(url, command="first")
    assert isinstance(first, RemoteStoreLease) and first.atomic
    try:
        with pytest.raises(StoreError, match=f"is being written by pid {os.getpid()}"):
            acquire_lease(url, command="second")
        first.info["heartbeat"] = time.time()
        first._write()  # a heartbeat: If-Match on its own ETag
        assert not first.lost
    finally:
        first.release()
    assert not _fs().exists(f"{s3_bucket}/l.zarr/{LEASE_FILE}")
    acquire_lease(url).release()  # free again


def test_s3_stale_lease_is_taken_over_and_old_holder_loses(s3_bucket, monkeypatch) -> None:
    monkeypatch.setenv("DKERNEL_LEASE_TIMEOUT", "1")
    url = f"s3://{s3_bucket}/s.zarr"
    old = acquire_lease(url)
    old._stop.set()  # its heartbeat stalls
    time.sleep(1.5)
    new = acquire_lease(url)
    try:
        assert new.info["took_over"]["pid"] == os.getpid()
        old._write()  # the old holder's next heartbeat is refused: If-Match fails
        assert old.lost
        with pytest.raises(StoreError, match="taken over by another writer"):
            old.check_held()
        old.release()  # deletes nothing: the lease is no longer its own
        assert _fs().exists(f"{s3_bucket}/s.zarr/{LEASE_FILE}")
    finally:
        new.release()
    assert not _fs().exists(f"{s3_bucket}/s.zarr/{LEASE_FILE}")


def test_unusable_s3_lease_is_refused(s3_bucket) -> None:
    _fs().pipe(f"{s3_bucket}/u.zarr/{LEASE_FILE}", b"not json")
    with pytest.raises(StoreError, match="is not JSON"):
        acquire_lease(f"s3://{s3_bucket}/u.zarr")


def test_lease_without_conditional_writes_is_never_taken_over(monkeypatch) -> None:
    """fsspec's memory file system has no conditional writes: an existing lease, even a
    stale one, is refused (so --overwrite and --resume cannot race), naming the object."""
    import fsspec

    monkeypatch.setenv("DKERNEL_LEASE_TIMEOUT", "1")
    url = f"memory://dk-plain/{os.getpid()}/x.zarr"
    first = acquire_lease(url, command="first")
    assert isinstance(first, RemoteStoreLease) and not first.atomic
    try:
        first._stop.set()
        time.sleep(1.5)  # stale by its heartbeat: still not taken over here
        with pytest.raises(StoreError, match="has no conditional writes") as info:
            acquire_lease(url, command="second")
        assert f"{url}/{LEASE_FILE}" in str(info.value)
        assert f"pid {os.getpid()}" in str(info.value)
    finally:
        first.release()
    assert not fsspec.filesystem("memory").exists(f"/dk-plain/{os.getpid()}/x.zarr/{LEASE_FILE}")
    acquire_lease(url).release()


@pytest.fixture()
def conditions_ignored(s3_server):
    """An S3 endpoint that ignores conditional writes: a real HTTP proxy in front of the
    moto server that drops ``If-None-Match`` and ``If-Match`` (as servers without
    conditional writes do); yields its URL."""
    import http.client
    import http.server
    import threading
    from urllib.parse import urlsplit

    upstream = urlsplit(s3_server)

    class Proxy(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # answers botocore's "Expect: 100-continue"

        def _forward(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            dropped = {"if-none-match", "if-match", "host", "expect"}
            headers = {k: v for k, v in self.headers.items() if k.lower() not in dropped}
            conn = http.client.HTTPConnection(upstream.hostname, upstream.port, timeout=30)
            try:
                conn.request(self.command, self.path, body=body, headers=headers)
                reply = conn.getresponse()
                data = reply.read()
            finally:
                conn.close()
            self.send_response(reply.status)
            for k, v in reply.getheaders():
                if k.lower() not in ("transfer-encoding", "connection", "content-length"):
                    self.send_header(k, v)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)

        do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward

        def log_message(self, *args) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Proxy)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_server_ignoring_conditional_writes_is_found_out(
    s3_bucket, conditions_ignored, caplog
) -> None:
    """Behind a server that ignores ``If-None-Match`` the lease would not be exclusive: that
    is found on a probe object (never on the lease), and the store's lease is then taken
    only where there is none; a second writer is refused, naming the object to remove."""
    options = {"endpoint": conditions_ignored}
    url = f"s3://{s3_bucket}/c.zarr"
    first = acquire_lease(url, command="first", storage_options=options)
    try:
        assert isinstance(first, RemoteStoreLease) and not first.atomic
        assert "ignores conditional writes" in caplog.text
        with pytest.raises(StoreError, match="has no conditional writes") as info:
            acquire_lease(url, command="second", storage_options=options)
        assert f"{url}/{LEASE_FILE}" in str(info.value)
    finally:
        first.release()
    assert not _fs().find(f"{s3_bucket}/c.zarr")  # no lease, no probe left
    # straight to the server, which honours them, the same store's lease is exclusive
    direct = acquire_lease(url)
    try:
        assert direct.atomic
    finally:
        direct.release()


def test_open_results_over_http_read_only(tmp_path) -> None:
    """A complete store served by a plain HTTP server opens by URL (consolidated metadata,
    no listing); nothing is ever written there."""
    import functools
    import http.server
    import threading

    from dkernel.storage.store import ResultsStore, describe_store, open_results

    store = ResultsStore.create(tmp_path / "t.zarr", job={"name": "t"}, seed=0)
    x = np.arange(6.0).reshape(3, 2)
    store.write("embedding", xr.Dataset({"embedding": (("sample", "component"), x)}))
    store.mark_complete()

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(Quiet, directory=str(tmp_path))
    )
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/t.zarr"
        tree = open_results(url)
        np.testing.assert_array_equal(tree["embedding"]["embedding"].values, x)
        assert describe_store(url)["attrs"]["status"] == "complete"
        with pytest.raises(StoreNotFoundError):
            open_results(url.replace("t.zarr", "none.zarr"))
    finally:
        server.shutdown()
    with pytest.raises(StoreError, match="read-only"):
        ResultsStore.create(url, job={}, seed=0)
