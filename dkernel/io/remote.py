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

:func:`check_input` is what validation runs before any cluster starts: the object exists and
answers, within :data:`CHECK_SECONDS`, or an error names the bucket, the object or the endpoint.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit

from dkernel.errors import InvalidInputError
from dkernel.storage import remote as remote_core
from dkernel.storage.remote import call_bounded

#: URL schemes read through fsspec.
SCHEMES = ("s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "http", "https", "file")
#: GDAL's network file systems accepted for rasters, with the fsspec scheme of each.
GDAL_PREFIXES = {"/vsis3/": "s3", "/vsigs/": "gs", "/vsiaz/": "az", "/vsicurl/": ""}
_TO_GDAL = {"s3": "/vsis3/", "s3a": "/vsis3/", "gs": "/vsigs/", "gcs": "/vsigs/"}
_TO_GDAL |= {"az": "/vsiaz/", "abfs": "/vsiaz/", "abfss": "/vsiaz/"}

#: A URL: a scheme of two letters or more (``C:/`` is a Windows drive), then ``://``.
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]+://")

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


def is_url(path: Any) -> bool:
    """Whether ``path`` names a remote (or ``file://``) input rather than a local path."""
    if not isinstance(path, str):
        return False
    if any(path.startswith(prefix) for prefix in GDAL_PREFIXES):
        return True
    return _URL.match(path) is not None


def scheme_of(path: str) -> str:
    """The fsspec scheme of a URL or GDAL network path (``''`` for a local path)."""
    url = to_fsspec(path)
    return url.split("://", 1)[0].lower() if "://" in url else ""


def to_fsspec(path: str) -> str:
    """A GDAL network path as the fsspec URL it names (others unchanged)."""
    for prefix, scheme in GDAL_PREFIXES.items():
        if path.startswith(prefix):
            rest = path[len(prefix) :]
            return rest if not scheme else f"{scheme}://{rest}"
    return path


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


def local_path(path: str) -> str:
    """The local path of a ``file://`` URL (``path`` itself otherwise)."""
    if path.lower().startswith("file://"):
        return urlsplit(path).path or "/"
    return path


def is_remote(path: Any) -> bool:
    """A URL that is not ``file://`` (read over the network)."""
    return is_url(path) and scheme_of(path) != "file"


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


def fsspec_options(url: str, storage_options: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The fsspec options for ``url``: ``storage_options`` (with the short names of
    :func:`dkernel.storage.remote.storage_options`: ``endpoint``, ``region``) with bounded S3
    timeouts and retries added (unless given), so an unreachable endpoint fails instead of
    hanging."""
    options = remote_core.storage_options(to_fsspec(url), storage_options)
    if scheme_of(url) in ("s3", "s3a"):
        config = dict(options.get("config_kwargs") or {})
        config.setdefault("connect_timeout", 5)
        config.setdefault("read_timeout", 30)
        config.setdefault("retries", {"max_attempts": 2, "mode": "standard"})
        options["config_kwargs"] = config
        options.setdefault("skip_instance_cache", True)
    return options


def filesystem(url: str, storage_options: Mapping[str, Any] | None = None) -> tuple[Any, str]:
    """``(fsspec file system, path inside it)`` of a URL or GDAL network path.

    Raises
    ------
    InvalidInputError
        The scheme has no fsspec implementation installed (e.g. ``gs://`` without gcsfs).
    """
    url = to_fsspec(url)
    return remote_core.filesystem(
        url, fsspec_options(url, storage_options), what="inputs", error=InvalidInputError
    )


def get_mapper(url: str, storage_options: Mapping[str, Any] | None = None) -> Any:
    """An fsspec mapper of a remote folder (a Zarr store) for xarray and zarr."""
    fs, path = filesystem(url, storage_options)
    return fs.get_mapper(path)


def read_head(url: str, n: int = 64, storage_options: Mapping[str, Any] | None = None) -> bytes:
    """The first ``n`` bytes of a remote object (one range request)."""
    fs, path = filesystem(url, storage_options)
    with fs.open(path, "rb", block_size=max(n, 1024), cache_type="none") as fh:
        return fh.read(n)


def _endpoint(url: str, storage_options: Mapping[str, Any] | None) -> str:
    options = storage_options or {}
    if scheme_of(url) in ("s3", "s3a"):
        client = options.get("client_kwargs") or {}
        return str(
            options.get("endpoint_url")
            or client.get("endpoint_url")
            or os.environ.get("AWS_ENDPOINT_URL_S3")
            or os.environ.get("AWS_ENDPOINT_URL")
            or "the S3 endpoint"
        )
    parts = urlsplit(to_fsspec(url))
    return f"{parts.scheme}://{parts.netloc}" if parts.netloc else url


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
        fs, path = filesystem(url, storage_options)
    except InvalidInputError as exc:
        raise error(f"{label}{exc}") from None
    endpoint = _endpoint(url, storage_options)
    try:
        return call_bounded(lambda: fs.info(path), seconds)
    except FileNotFoundError:
        pass
    except PermissionError as exc:
        raise error(
            f"{label}access to {url} was refused ({type(exc).__name__}); check the "
            "credentials (data.storage_options or the AWS_* / GOOGLE_* / AZURE_* variables)."
        ) from None
    except TimeoutError:
        raise error(
            f"{label}{endpoint} did not answer within {seconds:g} s while checking {url}; "
            "check the endpoint (AWS_ENDPOINT_URL or data.storage_options) and the network."
        ) from None
    except Exception as exc:  # noqa: BLE001  (botocore, aiohttp and OSError all mean this)
        raise error(
            f"{label}could not reach {endpoint} to read {url} ({type(exc).__name__}: "
            f"{str(exc)[:160]}). Check the endpoint and the network."
        ) from None
    if scheme in ("s3", "s3a", "gs", "gcs", "az", "abfs", "abfss"):
        bucket = path.split("/", 1)[0]
        try:
            exists = call_bounded(lambda: fs.exists(bucket), seconds)
        except Exception:  # noqa: BLE001  (the object is missing either way)
            exists = True
        if not exists:
            raise error(
                f"{label}the bucket {bucket!r} of {url} does not exist at {endpoint}; check "
                "its name."
            )
        raise error(f"{label}{url} does not exist (no such object in bucket {bucket!r}).")
    raise error(f"{label}{url} does not exist ({endpoint} answered 'not found').")


def gdal_options(storage_options: Mapping[str, Any] | None = None) -> dict[str, str]:
    """GDAL configuration for reading a remote raster: :data:`GDAL_REMOTE` plus the S3
    options of ``storage_options`` (endpoint, keys, anonymous access, profile) in GDAL's
    names; the environment's ``AWS_*`` variables are read by GDAL itself."""
    config = dict(GDAL_REMOTE)
    options = dict(storage_options or {})
    client = dict(options.get("client_kwargs") or {})
    endpoint = (
        options.get("endpoint_url")
        or client.get("endpoint_url")
        or (None if os.environ.get("AWS_S3_ENDPOINT") else os.environ.get("AWS_ENDPOINT_URL"))
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


_CREDENTIALS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")


@contextmanager
def remote_gdal(storage_options: Mapping[str, Any] | None = None) -> Iterator[None]:
    """GDAL configured by :func:`gdal_options` for the calling thread (``rasterio.Env``)."""
    import rasterio

    config = gdal_options(storage_options)
    keys = [config.pop(k, None) for k in _CREDENTIALS]
    session = None
    if any(keys):  # rasterio takes keys through a session only, not as GDAL options
        import boto3
        from rasterio.session import AWSSession

        key, secret, token = keys
        session = AWSSession(
            boto3.Session(
                aws_access_key_id=key,
                aws_secret_access_key=secret,
                aws_session_token=token,
                region_name=config.get("AWS_REGION"),
            )
        )
    with rasterio.Env(session=session, **config):
        yield


def version_token(url: str, storage_options: Mapping[str, Any] | None = None) -> str:
    """What identifies the current version of a remote object (ETag, modification time and
    size, as its file system reports them), for Dask task names."""
    try:
        info = call_bounded(lambda: filesystem(url, storage_options)[0].info(to_fsspec(url)), 10)
    except Exception:  # noqa: BLE001  (no version: the name alone)
        return url
    keys = ("ETag", "etag", "LastModified", "mtime", "last_modified", "size")
    return url + "|" + "|".join(str(info.get(k)) for k in keys if info.get(k) is not None)
