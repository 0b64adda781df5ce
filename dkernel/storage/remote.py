"""Paths where data lives: fsspec URLs, GDAL network paths, storage options, the checks.

The one module that knows what a URL is, for inputs (``dkernel.io.remote`` adds what is
GDAL-specific) and results stores alike.

* A location is a local path or a URL: ``s3://`` (``s3a://``), ``gs://`` (``gcs://``), ``az://``
  (``abfs://``, ``abfss://``), ``http(s)://``, ``file://``; for rasters also one of GDAL's
  network paths (``/vsis3/``, ``/vsigs/``, ``/vsiaz/``, ``/vsicurl/``), taken as the fsspec URL
  it names (:func:`to_fsspec`). A scheme has two letters or more (``C://`` is a Windows drive).
* ``file://`` URLs are **local**: :func:`is_remote` is false for them, and they are read and
  written as the local path they name.
* A results store is a local directory or an object-store URL (``s3://bucket/results/wine.zarr``;
  ``gs://``, ``az://`` when their fsspec package is installed); ``http(s)://`` stores are
  read-only (:func:`dkernel.open_results`, ``dkernel show``). Any other ``scheme://`` is refused
  rather than taken for a local folder named ``scheme:``. A ``memory://`` store (this process's
  memory) is for Python callers; a job refuses it (:func:`check_job_store`).

Storage options (an S3 endpoint, ``anon``, a ``profile``, keys) come from the job spec's
``data.storage_options`` / ``store_options`` (:func:`storage_options` also takes the short names
``endpoint`` and ``region``) or from the environment the fsspec backend reads itself
(``AWS_PROFILE``, ``AWS_ENDPOINT_URL``, ...). They are never logged, shown in messages or stored
in a store's attributes: messages name the URL and, when it cannot be reached, the endpoint.

Light on purpose (fsspec only, imported on first use): ``dkernel validate`` runs the checks.
"""

from __future__ import annotations

import copy
import json
import os
import re
import threading
from collections.abc import Callable, Mapping
from pathlib import Path, PurePosixPath
from typing import Any, Literal
from urllib.parse import unquote, urlsplit

from dkernel.errors import DKernelError, InvalidInputError, StoreError

#: Schemes a results store may be written to (their fsspec package must be installed).
WRITABLE_SCHEMES = ("s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "memory")
#: Schemes whose stores live in this process's memory only: a library may write one (a
#: notebook, a test), a job may not (it would report complete and vanish at exit, and process
#: workers cannot see it).
TRANSIENT_SCHEMES = ("memory",)
#: Schemes a store may be read from only.
READ_ONLY_SCHEMES = ("http", "https")
#: Schemes with buckets (containers): the first path component is the bucket.
BUCKET_SCHEMES = ("s3", "s3a", "gs", "gcs", "az", "abfs", "abfss")
#: GDAL's network file systems accepted for rasters, with the fsspec scheme of each
#: (``/vsicurl/`` is followed by the whole URL).
GDAL_PREFIXES = {"/vsis3/": "s3", "/vsigs/": "gs", "/vsiaz/": "az", "/vsicurl/": ""}
_PACKAGES = {"s3": "s3fs", "s3a": "s3fs", "gs": "gcsfs", "gcs": "gcsfs"}
_PACKAGES.update({"az": "adlfs", "abfs": "adlfs", "abfss": "adlfs"})
#: A URL: a scheme of two letters or more (``C:/`` is a Windows drive), then ``://``.
_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]+)://")
#: Seconds the pre-cluster check waits for the object store, connecting and reading.
CHECK_TIMEOUT_S = 10.0

#: What a file system is for (:func:`filesystem`): writing or reading a results store,
#: reading an input, or a bounded pre-cluster check of a store.
Purpose = Literal["store", "input", "check", "lease"]
#: S3 client settings per purpose, so an unreachable or stalled endpoint fails instead of
#: hanging (an option the user gave wins). A call is tried by s3fs up to five times (its
#: ``retries``), each try made by botocore up to ``total_max_attempts`` times (``max_attempts``
#: counts botocore's retries only), and each request is bounded as a whole
#: (:mod:`dkernel.storage.s3_session`).
_S3_LIMITS: dict[str, dict[str, Any]] = {
    # results stores, written and read by the job's Dask workers too (the options travel with
    # the Zarr arrays the tasks hold): botocore's default timeouts, no botocore retries under
    # s3fs's own; a stalled endpoint fails a chunk write after 5 tries of 70 s plus the body's
    # time at MIN_UPLOAD_RATE each, where it held it for as long as it stalled
    "store": {
        "connect_timeout": 10,
        "read_timeout": 60,
        "retries": {"total_max_attempts": 1, "mode": "standard"},
    },
    "input": {
        "connect_timeout": 5,
        "read_timeout": 30,
        "retries": {"max_attempts": 2, "mode": "standard"},
    },
    "check": {
        "connect_timeout": CHECK_TIMEOUT_S,
        "read_timeout": CHECK_TIMEOUT_S,
        "retries": {"max_attempts": 1, "mode": "standard"},
    },
    # a lease object is a few hundred bytes: an answer takes well under LEASE_CALL_S, and a
    # stalled endpoint must not hold the heartbeat (nor the release after it) for longer
    "lease": {
        "connect_timeout": 5,
        "read_timeout": 10,
        "retries": {"max_attempts": 1, "mode": "standard"},
    },
}
#: Times s3fs tries a lease call that timed out (its default is 5); each call is also bounded
#: as a whole (``dkernel.storage.lock.LEASE_CALL_S``).
LEASE_RETRIES = 2


def to_fsspec(location: str) -> str:
    """A GDAL network path as the fsspec URL it names (anything else unchanged)."""
    for prefix, scheme in GDAL_PREFIXES.items():
        if location.startswith(prefix):
            rest = location[len(prefix) :]
            return rest if not scheme else f"{scheme}://{rest}"
    return location


def scheme_of(location: str | Path) -> str | None:
    """The fsspec scheme of a URL or GDAL network path (lower case), None for a local path."""
    if isinstance(location, Path):
        return None
    match = _URL.match(to_fsspec(str(location)))
    return match.group(1).lower() if match else None


def is_url(location: Any) -> bool:
    """Whether ``location`` is a URL (``file://`` included) or a GDAL network path."""
    return isinstance(location, str) and scheme_of(location) is not None


def is_remote(location: Any) -> bool:
    """Whether ``location`` is read over the network: a URL other than ``file://`` (which
    names a local path), or a GDAL network path."""
    return isinstance(location, str) and scheme_of(location) not in (None, "file")


def local_path(location: str) -> str:
    """The local path of a ``file://`` URL (``location`` itself otherwise)."""
    if location.lower().startswith("file://"):
        return unquote(urlsplit(location).path) or "/"
    return location


#: Where a results store lives: a local path, or a URL string for an object store.
Location = Path | str


def as_location(value: str | Path, *, what: str = "output", read_only: bool = False) -> Location:
    """``value`` as a store location: a :class:`~pathlib.Path` for a local path or
    ``file://`` URL, a normalised URL string (``s3://bucket/a/b.zarr``) otherwise.

    Parameters
    ----------
    value : str or Path
        What the user wrote.
    what : str
        The option named in messages (``output``, ``--output-root``).
    read_only : bool
        Also accept ``http(s)://`` (stores that are only read).

    Raises
    ------
    StoreError
        For an unknown scheme, a read-only one where a store is written, credentials in the
        URL, ``.``/``..`` components or a URL without a bucket.
    """
    if isinstance(value, Path):
        return value
    text = str(value)
    if any(text.startswith(prefix) for prefix in GDAL_PREFIXES):
        raise StoreError(
            f"{what} {_shown(text)}: GDAL's /vsi... paths name rasters; give a results store "
            f"as a URL ({to_fsspec(text)[:200]!r})."
        )
    scheme = scheme_of(text)
    if scheme is None:
        return Path(text)
    parts = urlsplit(text)
    if scheme == "file":
        if parts.netloc not in ("", "localhost"):
            raise StoreError(f"{what} {text!r}: a file:// URL names a local path (file:///dir).")
        return Path(unquote(parts.path))
    known = WRITABLE_SCHEMES + READ_ONLY_SCHEMES
    if scheme not in known:
        raise StoreError(
            f"{what} {_shown(text)}: unknown URL scheme {scheme!r}. A results store is a local "
            f"path or a URL of {', '.join(s + '://' for s in known)}."
        )
    if scheme in READ_ONLY_SCHEMES and not read_only:
        raise StoreError(
            f"{what} {_shown(text)}: {scheme}:// is read-only; a results store is written to "
            "a local path or an object store (s3://, gs://, az://)."
        )
    if parts.username or parts.password or "@" in parts.netloc:
        raise StoreError(
            f"{what}: credentials in a URL are refused (they would be logged and recorded). "
            "Give them in store_options or in the environment (AWS_PROFILE, ...)."
        )
    if scheme in READ_ONLY_SCHEMES:
        return text.rstrip("/")
    if not parts.netloc:
        raise StoreError(f"{what} {_shown(text)}: the URL names no bucket ({scheme}://BUCKET/...).")
    pieces = [p for p in parts.path.split("/") if p]
    if any(p in (".", "..") for p in pieces):
        raise StoreError(f"{what} {_shown(text)}: '.' and '..' are not allowed in a store URL.")
    return "/".join([f"{scheme}://{parts.netloc}", *pieces])


def check_job_store(location: Location, *, what: str = "output") -> None:
    """Refuse a results store a job cannot leave behind: one in this process's memory
    (``memory://``).

    Raises
    ------
    StoreError
        Naming the URL, why, and the fix (a local path or an object-store URL).
    """
    if isinstance(location, str) and scheme_of(location) in TRANSIENT_SCHEMES:
        raise StoreError(
            f"{what} {_shown(location)}: a memory:// store lives in this process's memory "
            "only; it would vanish when the job ends (and process workers cannot see it). "
            "Write the results to a local path or an object-store URL (s3://, gs://, az://)."
        )


def join(root: str, relative: str | Path) -> str:
    """``relative`` (a relative path) below the URL ``root``, normalised.

    Raises
    ------
    StoreError
        When ``relative`` climbs out of ``root`` (``..``).
    """
    rel = PurePosixPath(str(relative).replace("\\", "/"))
    if rel.is_absolute() or ".." in rel.parts:
        raise StoreError(
            f"output {str(relative)!r} climbs out of the output root {root}: use a path below it."
        )
    pieces = [p for p in rel.parts if p not in ("", ".")]
    joined = as_location("/".join([root.rstrip("/"), *pieces]))
    assert isinstance(joined, str)
    return joined


def inside(url: str, root: str) -> bool:
    """Whether the URL ``url`` lies strictly below the URL ``root``."""
    return url != root.rstrip("/") and url.startswith(root.rstrip("/") + "/")


def _shown(text: str) -> str:
    return ascii(text) if len(text) <= 200 else ascii(text[:197] + "...")


# ------------------------------------------------------------------------------------------
# storage options and file systems
# ------------------------------------------------------------------------------------------

#: Short option names accepted in ``store_options`` and what s3fs calls them.
_S3_ALIASES = {"endpoint": "endpoint_url", "endpoint_url": "endpoint_url", "region": "region_name"}


#: fsspec options for a file system of its own that caches no listing: what this process
#: listed before the Dask workers wrote would leave their objects out (adlfs keeps a listing
#: per folder).
UNCACHED = {"skip_instance_cache": True, "use_listings_cache": False}


def uncached_storage_options(
    location: str, options: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """:func:`storage_options` for a store's file system that sees what the workers have just
    written (:data:`UNCACHED`)."""
    return {**storage_options(location, options), **UNCACHED}


def storage_options(
    location: str, options: Mapping[str, Any] | None, *, purpose: Purpose = "store"
) -> dict[str, Any]:
    """The fsspec options for ``location``: ``options`` (the spec's ``data.storage_options``
    or ``store_options``) with the short names (``endpoint``, ``region``) put where the
    backend expects them; the rest (``anon``, ``profile``, fsspec's own keys) passed as they
    are. Empty: the backend reads the environment.

    S3 gets bounded connect/read timeouts and retries for every ``purpose``
    (:data:`_S3_LIMITS`, unless given), and a fresh client for all but ``"store"``, so an
    unreachable or stalled endpoint fails instead of hanging. Google Cloud Storage and Azure
    Blob get the same purpose's connect and read timeouts, where they had none: gcsfs as
    ``requests_timeout`` (:func:`_stall_timeout`, every request it makes), adlfs as its
    ``connection_timeout`` / ``read_timeout``, on every request its client makes
    (:mod:`dkernel.storage.azure_fs`); each backend retries a timed-out request itself.
    HTTP(S) always gets :func:`bounded_http_client`: responses of bounded length, connect
    and read timeouts.
    """
    opts = dict(options or {})
    scheme = scheme_of(location)
    if scheme in ("s3", "s3a"):
        client = dict(opts.pop("client_kwargs", None) or {})
        for short, name in _S3_ALIASES.items():
            if short in opts:
                client[name] = opts.pop(short)
        if client:
            opts["client_kwargs"] = client
        if purpose in _S3_LIMITS:
            opts["config_kwargs"] = {
                **copy.deepcopy(_S3_LIMITS[purpose]),  # botocore edits its retries in place
                **_bounded_session(),
                **(opts.get("config_kwargs") or {}),
            }
            if purpose != "store":  # a store's file systems are many: one client for them
                opts.setdefault("skip_instance_cache", True)
    elif scheme in ("gs", "gcs"):
        limits = _S3_LIMITS.get(purpose)
        if limits is not None and "requests_timeout" not in opts:
            opts["requests_timeout"] = _stall_timeout(limits)
    elif scheme in ("az", "abfs", "abfss"):
        limits = _S3_LIMITS.get(purpose)
        if limits is not None:
            _use_bounded_azure()
            opts.setdefault("connection_timeout", limits["connect_timeout"])
            opts.setdefault("read_timeout", limits["read_timeout"])
    elif scheme in READ_ONLY_SCHEMES:
        opts.setdefault("get_client", bounded_http_client)
    return opts


def _use_bounded_azure() -> None:
    """Every adlfs request bounded by its timeouts (:mod:`dkernel.storage.azure_fs`);
    nothing without adlfs (:func:`filesystem` then says what to install)."""
    try:
        from dkernel.storage.azure_fs import use_bounded_azure
    except ImportError:
        return
    use_bounded_azure()


def _stall_timeout(limits: Mapping[str, Any]) -> Any:
    """gcsfs's ``requests_timeout`` for a purpose's limits: aiohttp's connect timeout and its
    read timeout, which runs from the moment a request is sent until bytes come back (and
    between them), upload included, so an endpoint that stops answering fails the request
    after ``read_timeout`` seconds. gcsfs passes it to every request it makes; without it a
    request had no timeout at all (gcsfs's default is None)."""
    import aiohttp

    return aiohttp.ClientTimeout(
        total=None,
        sock_connect=float(limits["connect_timeout"]),
        sock_read=float(limits["read_timeout"]),
    )


def _bounded_session() -> dict[str, Any]:
    """``http_session_cls``: S3 requests bounded as a whole
    (:class:`dkernel.storage.s3_session.BoundedSession`); nothing without aiobotocore."""
    try:
        from dkernel.storage.s3_session import BoundedSession
    except ImportError:
        return {}
    return {"http_session_cls": BoundedSession}


# ------------------------------------------------------------------------------------------
# HTTP responses of bounded length and time
# ------------------------------------------------------------------------------------------

#: Longest HTTP response body read where no smaller cap applies: a chunk of a results store
#: or of an input Zarr cube (at most ``dkernel.storage.array_limits.MAX_CHUNK_BYTES``, 1 GiB) and
#: its codec's headers. A server streaming an endless body is cut off here.
MAX_HTTP_BYTES = (1 << 30) + (1 << 20)
#: Longest Zarr metadata document read over HTTP (``zarr.json``, ``.zmetadata``, …).
MAX_HTTP_METADATA_BYTES = 64 << 20
#: Seconds an HTTP connection may take to open, and to deliver the next bytes (a stalled
#: server fails the read instead of hanging it).
HTTP_CONNECT_S, HTTP_READ_S = 10.0, 60.0
_ZARR_METADATA = ("zarr.json", ".zarray", ".zgroup", ".zattrs", ".zmetadata")


class ResponseTooLarge(OSError):
    """An HTTP response longer than dkernel reads (:data:`MAX_HTTP_BYTES`)."""


#: The end of a Zarr chunk's URL below its array: ``c/0/1`` (v3), ``0.1`` or ``0/1`` (v2).
_CHUNK_KEY = re.compile(r"(?:c(?:[./]\d+)*|\d+(?:[./]\d+)*)")
#: Per array URL read over HTTP in this process: the most bytes one of its stored chunks may
#: take (``dkernel.storage.array_limits.stored_chunk_limit``), None where no array is.
_CHUNK_LIMITS: dict[str, int | None] = {}
_CHUNK_LIMITS_MAX = 4096


async def _array_chunk_limit(session: Any, base: Any) -> int | None:
    """The stored-chunk cap of the array at the URL ``base``, from its metadata (``zarr.json``,
    else ``.zarray``) read with ``session``; None when there is no array there."""
    from dkernel.storage.array_limits import stored_chunk_limit

    for doc in ("zarr.json", ".zarray"):
        try:
            async with session.get(base / doc) as response:
                if response.status != 200:
                    continue
                meta = json.loads(await response.read())
        except Exception:  # noqa: BLE001  (no readable metadata: not an array)
            continue
        if isinstance(meta, dict) and (doc == ".zarray" or meta.get("node_type") == "array"):
            return stored_chunk_limit(meta) or MAX_HTTP_BYTES
        return None
    return None


async def _chunk_limit(response: Any) -> tuple[int, str | None]:
    """``(bytes, array URL)`` for a response read whole (no range asked) whose URL ends like
    a Zarr chunk key: the most bytes a stored chunk of that array may take, from the array's
    own metadata (fetched once per array and process, workers included), so that a server
    streaming an endless chunk body is cut off there and not at :data:`MAX_HTTP_BYTES`.
    ``(MAX_HTTP_BYTES, None)`` for any other response."""
    session = getattr(response, "_session", None)
    parts = response.url.path.split("/")
    # the longest chunk-key ending first: its array is the nearest to the root
    starts = [i for i in range(1, len(parts)) if _CHUNK_KEY.fullmatch("/".join(parts[i:]))]
    if session is None or not starts:
        return MAX_HTTP_BYTES, None
    for i in starts[:4]:
        base = response.url.with_path("/".join(parts[:i]) or "/").with_query(None)
        key = str(base)
        if key not in _CHUNK_LIMITS:
            if len(_CHUNK_LIMITS) >= _CHUNK_LIMITS_MAX:
                _CHUNK_LIMITS.clear()
            _CHUNK_LIMITS[key] = await _array_chunk_limit(session, base)
        limit = _CHUNK_LIMITS[key]
        if limit is not None:
            return min(limit, MAX_HTTP_BYTES), key
    return MAX_HTTP_BYTES, None


def _response_limit(response: Any) -> tuple[int, bool]:
    """(bytes, whether a longer body is cut to them) for an aiohttp response: the length of
    the range asked for (a server ignoring ``Range`` from 0 gives its first bytes), else the
    cap of a metadata document or of any other response (a longer body is refused)."""
    found = re.fullmatch(r"bytes=(\d+)-(\d+)", response.request_info.headers.get("Range", ""))
    if found is not None:
        start, end = int(found[1]), int(found[2])
        if response.status == 206 or start == 0:
            return end - start + 1, True
    name = response.url.path.rsplit("/", 1)[-1]
    return (MAX_HTTP_METADATA_BYTES if name in _ZARR_METADATA else MAX_HTTP_BYTES), False


_BOUNDED_RESPONSE: Any = None


def _bounded_response_class() -> Any:
    """An ``aiohttp.ClientResponse`` whose ``read()`` stops at :func:`_response_limit`
    (aiohttp's reads the whole body, however long: fsspec's ``cat_file`` does so)."""
    global _BOUNDED_RESPONSE
    if _BOUNDED_RESPONSE is not None:
        return _BOUNDED_RESPONSE
    import aiohttp

    class BoundedResponse(aiohttp.ClientResponse):
        async def read(self) -> bytes:
            if self._body is not None:
                return await super().read()
            limit, cut = _response_limit(self)
            array = None
            if not cut and limit == MAX_HTTP_BYTES:  # a Zarr chunk: what its array allows
                limit, array = await _chunk_limit(self)
            parts, total = [], 0
            try:
                async for block in self.content.iter_chunked(1 << 16):
                    parts.append(block)
                    total += len(block)
                    if total > limit:
                        break
            except BaseException:
                self.close()
                raise
            if total <= limit:
                self._body = b"".join(parts)
                return await super().read()
            self.close()  # the rest is never read
            if cut:
                return b"".join(parts)[:limit]
            if array is not None:
                raise ResponseTooLarge(
                    f"{self.url.with_query(None)} sent more than "
                    f"{limit:,} bytes, more than one stored chunk of the array {array} may "
                    "take (its metadata's chunk shape and data type, with room for its "
                    "codecs): the server sends a damaged or endless chunk"
                )
            raise ResponseTooLarge(
                f"{self.url.scheme}://{self.url.host}{self.url.path} sent more than "
                f"{limit:,} bytes (no length declared, or a longer body than declared); "
                f"at most {limit:,} are read from one HTTP response"
            )

    _BOUNDED_RESPONSE = BoundedResponse
    return BoundedResponse


async def bounded_http_client(**kwargs: Any) -> Any:
    """fsspec's ``get_client`` for ``http(s)://``: an ``aiohttp.ClientSession`` whose
    responses are read up to :func:`_response_limit` only, with connect and read timeouts
    (:data:`HTTP_CONNECT_S`, :data:`HTTP_READ_S`) unless ``client_kwargs`` give one."""
    import aiohttp

    kwargs.setdefault(
        "timeout",
        aiohttp.ClientTimeout(total=None, sock_connect=HTTP_CONNECT_S, sock_read=HTTP_READ_S),
    )
    return aiohttp.ClientSession(response_class=_bounded_response_class(), **kwargs)


def endpoint_of(location: str, options: Mapping[str, Any] | None = None) -> str:
    """The endpoint a URL is read from, for messages: the S3 endpoint of the options or of
    the environment (``AWS_ENDPOINT_URL_S3``, ``AWS_ENDPOINT_URL``), the host of other URLs.
    Never an option other than the endpoint."""
    url = to_fsspec(location)
    if scheme_of(url) in ("s3", "s3a"):
        client = storage_options(url, options).get("client_kwargs") or {}
        return str(
            client.get("endpoint_url")
            or os.environ.get("AWS_ENDPOINT_URL_S3")
            or os.environ.get("AWS_ENDPOINT_URL")
            or "the S3 endpoint"
        )
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}" if parts.netloc else url


def filesystem(
    location: str, options: Mapping[str, Any] | None = None, *, purpose: Purpose = "store"
) -> tuple[Any, str]:
    """``(fs, path)``: the fsspec file system of the URL (or GDAL network path) ``location``
    and the path in it.

    The one place a URL becomes a file system, for results stores and inputs alike.
    ``purpose``: see :func:`storage_options`; ``"input"`` raises
    :class:`~dkernel.errors.InvalidInputError`, the others
    :class:`~dkernel.errors.StoreError`.

    Raises
    ------
    StoreError or InvalidInputError
        When the backend's package is not installed, or it does not understand the options.
    """
    import fsspec

    url = to_fsspec(location)
    scheme = scheme_of(url) or "file"
    error: type[DKernelError] = InvalidInputError if purpose == "input" else StoreError
    what = "inputs" if purpose == "input" else "results stores"
    try:
        fs, path = fsspec.core.url_to_fs(url, **storage_options(url, options, purpose=purpose))
    except ImportError as exc:
        package = _PACKAGES.get(scheme, f"the fsspec backend of {scheme}://")
        raise error(
            f"{what} on {scheme}:// need {package}: pip install 'dkernel[cloud]' (or {package})."
        ) from exc
    except (TypeError, ValueError) as exc:
        raise error(
            f"the storage options for {scheme}:// are not understood by its backend ({exc})."
        ) from None
    if purpose == "lease" and hasattr(fs, "retries"):
        fs.retries = LEASE_RETRIES  # s3fs's own retries of a timed-out call (5 by default)
    return fs, path


# ------------------------------------------------------------------------------------------
# bounded calls and what went wrong
# ------------------------------------------------------------------------------------------

#: Exception class names (botocore's, aiohttp's, the builtins) that mean "cannot connect".
_UNREACHABLE = frozenset(
    {
        "EndpointConnectionError",
        "ConnectTimeoutError",
        "ConnectionError",
        "ClientConnectorError",
        "ServerDisconnectedError",
        "ConnectionRefusedError",
    }
)


def call(url: str, what: str, func: Callable[[], Any]) -> Any:
    """``func()`` talking to the object store of ``url``; its failures as one-line
    :class:`StoreError` naming the URL (never the options): ``cannot <what> <url>: ...``."""
    try:
        return func()
    except (StoreError, FileNotFoundError):
        raise
    except Exception as exc:  # noqa: BLE001  (botocore, aiohttp: one line)
        raise StoreError(f"cannot {what} {url}: {describe_error(exc)}.") from None


def describe_error(exc: BaseException, *, endpoint: str | None = None) -> str:
    """What went wrong talking to an object store, in one line without option values:
    an unreachable endpoint (named when ``endpoint`` is given), one that did not answer in
    time, missing credentials, refused access; the error's own text otherwise. A missing
    bucket or object: :func:`describe_missing`."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    where = f"{endpoint}: " if endpoint else ""
    for error in _chain(exc):
        name = type(error).__name__
        if name in _UNREACHABLE:
            detail = " ".join(str(error).split())[:200]
            return f"the endpoint cannot be reached ({where}{detail})"
        if name in ("ReadTimeoutError", "TimeoutError"):
            detail = " ".join(str(error).split())[:200] or "timed out"
            return f"the endpoint did not answer in time ({where}{detail})"
        if name == "NoCredentialsError":
            return "no credentials were found (set AWS_PROFILE or AWS_ACCESS_KEY_ID, or anon)"
    if isinstance(exc, PermissionError):
        return f"access denied ({text[:200]}): check the credentials and the bucket's permissions"
    return text[:300]


def describe_missing(fs: Any, location: str, path: str, seconds: float = CHECK_TIMEOUT_S) -> str:
    """What is missing when ``path`` (in the file system ``fs`` of the URL ``location``) was
    not found: the bucket (checked within ``seconds``) or the object in it."""
    if scheme_of(location) not in BUCKET_SCHEMES:
        return "no such file (the server answered 'not found')"
    bucket = path.split("/", 1)[0]
    try:
        exists = call_bounded(lambda: fs.exists(bucket), seconds)
    except Exception:  # noqa: BLE001  (the object is missing either way)
        exists = True
    if not exists:
        return f"the bucket {bucket!r} does not exist (a typo?)"
    return f"no such object in the bucket {bucket!r}"


def _chain(exc: BaseException) -> list[BaseException]:
    seen, out = set(), []
    error: BaseException | None = exc
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        out.append(error)
        error = error.__cause__ or error.__context__
    return out


def call_bounded(func: Callable[[], Any], seconds: float) -> Any:
    """``func()`` in a daemon thread, given up after ``seconds`` (a hung endpoint): its
    result, its exception, or :class:`TimeoutError`."""
    result: dict[str, Any] = {}

    def target() -> None:
        try:
            result["value"] = func()
        except BaseException as exc:  # noqa: BLE001  (re-raised in the caller)
            result["error"] = exc

    thread = threading.Thread(target=target, name="dkernel-remote-check", daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        raise TimeoutError(f"no answer within {seconds:g} s")
    if "error" in result:
        raise result["error"]
    return result.get("value")


# ------------------------------------------------------------------------------------------
# the pre-cluster checks of a results store
# ------------------------------------------------------------------------------------------


def check_remote_writable(location: str, options: Mapping[str, Any] | None = None) -> None:
    """Check, before any cluster starts and within bounded time, that the bucket of the URL
    ``location`` exists and can be listed with the credentials at hand. Writes nothing.

    Raises
    ------
    StoreError
        Naming the URL and the bucket, and what is wrong (no such bucket, access denied,
        unreachable endpoint).
    """
    as_location(location)  # scheme, bucket and components
    fs, path = filesystem(location, options, purpose="check")
    bucket = path.split("/", 1)[0]

    def probe() -> None:
        if hasattr(fs, "call_s3"):
            fs.call_s3("head_bucket", Bucket=bucket)
            fs.call_s3("list_objects_v2", Bucket=bucket, MaxKeys=1)
        else:
            fs.ls(bucket, detail=False)

    try:
        call_bounded(probe, 3 * CHECK_TIMEOUT_S)
    except FileNotFoundError:
        raise StoreError(
            f"cannot write the results store {location}: the bucket {bucket!r} does not "
            "exist (a typo?). Create it, or choose another --output. Nothing was written."
        ) from None
    except Exception as exc:  # noqa: BLE001  (botocore's errors, one line)
        raise StoreError(
            f"cannot write the results store {location} (bucket {bucket!r}): "
            f"{describe_error(exc, endpoint=endpoint_of(location, options))}. "
            "Nothing was written."
        ) from None


def check_remote_readable(location: str, options: Mapping[str, Any] | None = None) -> bool:
    """Whether the store's root metadata exists at the URL ``location`` (bounded time).

    Raises
    ------
    StoreError
        When the object store cannot be reached or refuses access.
    """
    fs, path = filesystem(location, options, purpose="check")
    try:
        return bool(call_bounded(lambda: fs.exists(f"{path}/zarr.json"), 3 * CHECK_TIMEOUT_S))
    except Exception as exc:  # noqa: BLE001
        raise StoreError(
            f"cannot read {location}: "
            f"{describe_error(exc, endpoint=endpoint_of(location, options))}."
        ) from None
