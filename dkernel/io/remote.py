"""Inputs where they live: object stores and URLs, read through fsspec or GDAL.

A reader's ``path`` may be a URL (``s3://``, ``gs://``, ``az://``, ``http(s)://``, ``file://``)
or, for rasters, one of GDAL's network paths (``/vsis3/``, ``/vsigs/``, ``/vsiaz/``,
``/vsicurl/``). Tables and Zarr cubes are read through fsspec, GeoTIFFs through GDAL's
network file systems (tile-aligned range requests, nothing downloaded whole). The other GDAL
virtual paths (``/vsizip/``, ``/vsitar/``, …) stay refused.

Storage options (endpoint, anonymous access, keys, profile) come from ``data.storage_options``
in the spec or from the environment (``AWS_*`` variables and the like), as fsspec and GDAL read
them. They are passed to the file systems only: never logged, and
:func:`redact_storage_options` replaces their values in the spec stored with the results.
What a URL is, its scheme, its storage options, its file system and the error messages are
``dkernel.storage.remote``'s, shared with results stores; this module adds what is GDAL's and
the check of an input.

:func:`check_input` is what validation runs before any cluster starts: the object exists and
answers, within :data:`CHECK_SECONDS`, or an error names the bucket, the object or the endpoint.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit

from dkernel.errors import InvalidInputError
from dkernel.storage import remote as core
from dkernel.storage.remote import (
    GDAL_PREFIXES,
    call_bounded,
    describe_error,
    describe_missing,
    endpoint_of,
    filesystem,
    local_path,
    scheme_of,
)

#: URL schemes read through fsspec.
SCHEMES = ("s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "http", "https", "file")
_TO_GDAL = {"s3": "/vsis3/", "s3a": "/vsis3/", "gs": "/vsigs/", "gcs": "/vsigs/"}
_TO_GDAL |= {"az": "/vsiaz/", "abfs": "/vsiaz/", "abfss": "/vsiaz/"}

#: Longest wait (seconds) for a remote input to answer at validation.
CHECK_SECONDS = 20.0

#: GDAL configuration while a remote raster is read: no directory listing (sidecars are not
#: probed: each probe is a request), bounded timeouts, consecutive ranges merged.
GDAL_REMOTE = {
    "GDAL_DISABLE_READDIR_ON_OPEN": "EMPTY_DIR",
    "GDAL_HTTP_CONNECTTIMEOUT": "10",
    "GDAL_HTTP_TIMEOUT": "60",
    "GDAL_HTTP_MAX_RETRY": "2",
    "GDAL_HTTP_RETRY_DELAY": "1",
    "GDAL_HTTP_MERGE_CONSECUTIVE_RANGES": "YES",
}


def to_gdal(path: str) -> str:
    """The GDAL name of a URL: ``/vsis3/bucket/key`` for ``s3://bucket/key``, ``/vsicurl/URL``
    for HTTP(S), the local path of a ``file://`` URL; a GDAL path is returned as it is."""
    if any(path.startswith(prefix) for prefix in GDAL_PREFIXES):
        return path
    scheme, _, rest = path.partition("://")
    scheme = scheme.lower()
    if scheme in _TO_GDAL:
        return _TO_GDAL[scheme] + rest
    if scheme in ("http", "https"):
        return "/vsicurl/" + path
    if scheme == "file":
        return local_path(path)
    return path


def redact_storage_options(raw: Any) -> Any:
    """A copy of a job spec mapping with the values of ``data.storage_options`` replaced by
    ``'***'`` (the spec is stored with the results; the options may hold keys)."""
    if not isinstance(raw, Mapping) or not isinstance(raw.get("data"), Mapping):
        return raw
    data = dict(raw["data"])
    options = data.get("storage_options")
    if isinstance(options, Mapping):
        data["storage_options"] = {key: "***" for key in options}
    return {**raw, "data": data}


def read_head(url: str, n: int = 64, storage_options: Mapping[str, Any] | None = None) -> bytes:
    """The first ``n`` bytes of a remote object (one range request)."""
    fs, path = filesystem(url, storage_options, purpose="input")
    with fs.open(path, "rb", block_size=max(n, 1024), cache_type="none") as fh:
        return fh.read(n)


def read_remote_bounded(
    url: str,
    max_bytes: int,
    what: str = "data.path",
    storage_options: Mapping[str, Any] | None = None,
    *,
    advice: str = "",
) -> bytes:
    """The bytes of the remote object ``url``, refused when more than ``max_bytes``: from
    the size it declares when it declares one, else while reading (a server streaming an
    endless body is cut off after ``max_bytes``, never buffered whole).

    Raises
    ------
    InvalidInputError
        Too large, missing or unreadable, naming the URL (never the storage options).
    """
    label = f"{what}: " if what else ""
    too_big = f"{label}{url} holds more than {max_bytes:,} bytes; at most {max_bytes:,} are read."
    too_big = f"{too_big} {advice}".rstrip()
    fs, path = filesystem(url, storage_options, purpose="input")
    try:
        size = call_bounded(lambda: fs.size(path), CHECK_SECONDS)
    except FileNotFoundError:
        raise InvalidInputError(
            f"{label}cannot read {url}: {describe_missing(fs, url, path)}."
        ) from None
    except Exception:  # noqa: BLE001  (no size declared: counted while reading)
        size = None
    if size is not None and size > max_bytes:
        raise InvalidInputError(too_big)
    blocks, total = [], 0
    try:
        with fs.open(path, "rb") as fh:
            while block := fh.read(min(1 << 20, max_bytes + 1 - total)):
                blocks.append(block)
                total += len(block)
                if total > max_bytes:
                    raise InvalidInputError(too_big)
    except InvalidInputError:
        raise
    except FileNotFoundError:
        raise InvalidInputError(
            f"{label}cannot read {url}: {describe_missing(fs, url, path)}."
        ) from None
    except Exception as exc:  # noqa: BLE001  (botocore, aiohttp and OSError alike)
        reason = describe_error(exc, endpoint=endpoint_of(url, storage_options))
        raise InvalidInputError(f"{label}cannot read {url}: {reason}.") from None
    return b"".join(blocks)


def check_input(
    url: str,
    what: str = "data.path",
    storage_options: Mapping[str, Any] | None = None,
    *,
    error: Callable[[str], Exception] = InvalidInputError,
    seconds: float = CHECK_SECONDS,
) -> dict[str, Any]:
    """Check that a remote input exists and can be read; return its fsspec ``info``.

    Raises
    ------
    error
        Naming the missing bucket, the missing object, a refused access or the endpoint that
        did not answer (within ``seconds``). The storage options are never named.
    """
    label = f"{what}: " if what else ""
    scheme = scheme_of(url)
    if scheme not in SCHEMES:
        raise error(
            f"{label}{url!r} has an unknown scheme {scheme!r}; dkernel reads "
            f"{', '.join(s + '://' for s in SCHEMES)} and GDAL's {', '.join(GDAL_PREFIXES)}."
        )
    if scheme == "file":
        return {"name": local_path(url), "type": "file"}
    try:
        fs, path = filesystem(url, storage_options, purpose="input")
    except InvalidInputError as exc:
        raise error(f"{label}{exc}") from None
    try:
        return call_bounded(lambda: fs.info(path), seconds)
    except FileNotFoundError:
        pass
    except Exception as exc:  # noqa: BLE001  (botocore, aiohttp and OSError all mean this)
        reason = describe_error(exc, endpoint=endpoint_of(url, storage_options))
        raise error(f"{label}cannot read {url}: {reason}.") from None
    raise error(f"{label}cannot read {url}: {describe_missing(fs, url, path, seconds)}.")


def gdal_options(storage_options: Mapping[str, Any] | None = None) -> dict[str, str]:
    """GDAL configuration for reading a remote raster: :data:`GDAL_REMOTE` plus the S3
    options of ``storage_options`` (endpoint, keys, anonymous access, profile) in GDAL's
    names; the environment's ``AWS_*`` variables are read by GDAL itself."""
    config = dict(GDAL_REMOTE)
    options = core.storage_options("s3://", storage_options)  # the short names resolved
    client = dict(options.get("client_kwargs") or {})
    endpoint = client.get("endpoint_url") or (
        None if os.environ.get("AWS_S3_ENDPOINT") else os.environ.get("AWS_ENDPOINT_URL")
    )
    if endpoint:
        parts = urlsplit(str(endpoint))
        config["AWS_S3_ENDPOINT"] = parts.netloc or parts.path
        config["AWS_HTTPS"] = "NO" if parts.scheme == "http" else "YES"
        config["AWS_VIRTUAL_HOSTING"] = "FALSE"
    names = {
        "key": "AWS_ACCESS_KEY_ID",
        "secret": "AWS_SECRET_ACCESS_KEY",
        "token": "AWS_SESSION_TOKEN",
        "profile": "AWS_PROFILE",
    }
    for key, name in names.items():
        if options.get(key):
            config[name] = str(options[key])
    region = client.get("region_name") or options.get("region_name")
    if region:
        config["AWS_REGION"] = str(region)
    if options.get("anon"):
        config["AWS_NO_SIGN_REQUEST"] = "YES"
    return config


#: GDAL's credential options, which rasterio takes through a session only, by the name of
#: the session's keyword argument.
_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "aws_access_key_id",
    "AWS_SECRET_ACCESS_KEY": "aws_secret_access_key",
    "AWS_SESSION_TOKEN": "aws_session_token",
}


def gdal_session_options(
    storage_options: Mapping[str, Any] | None = None,
) -> tuple[dict[str, str], dict[str, str]]:
    """:func:`gdal_options` split as rasterio takes them: the GDAL options without the
    credentials, and the credentials as keyword arguments of a boto3 / rasterio AWS session
    (empty when the options hold none)."""
    config = gdal_options(storage_options)
    keys = {arg: config.pop(name) for name, arg in _CREDENTIALS.items() if name in config}
    if keys and config.get("AWS_REGION"):
        keys["region_name"] = config["AWS_REGION"]
    return config, keys


@contextmanager
def remote_gdal(storage_options: Mapping[str, Any] | None = None) -> Iterator[None]:
    """GDAL configured by :func:`gdal_options` for the calling thread (``rasterio.Env``)."""
    import rasterio

    config, keys = gdal_session_options(storage_options)
    session = None
    if keys:
        import boto3
        from rasterio.session import AWSSession

        session = AWSSession(boto3.Session(**keys))
    with rasterio.Env(session=session, **config):
        yield


def version_token(url: str, storage_options: Mapping[str, Any] | None = None) -> str:
    """What identifies the current version of a remote object (ETag, modification time and
    size, as its file system reports them), for Dask task names."""
    try:
        fs, path = filesystem(url, storage_options, purpose="input")
        info = call_bounded(lambda: fs.info(path), 10)
    except Exception:  # noqa: BLE001  (no version: the name alone)
        return url
    keys = ("ETag", "etag", "LastModified", "mtime", "last_modified", "size")
    return url + "|" + "|".join(str(info.get(k)) for k in keys if info.get(k) is not None)
