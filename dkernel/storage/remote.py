"""Results stores on object storage: fsspec URLs, their storage options, the checks.

A results store is a local directory or an fsspec URL: ``s3://bucket/results/wine.zarr``
(also ``gs://``, ``az://``/``abfs://`` when their fsspec package is installed). ``file://``
URLs are local paths; ``http(s)://`` stores are read-only (:func:`dkernel.open_results`,
``dkernel show``). Any other ``scheme://`` is refused rather than taken for a local folder
named ``scheme:``.

Storage options (an S3 endpoint, ``anon``, a ``profile``) come from the job spec's
``store_options`` or from the environment the fsspec backend reads itself (``AWS_PROFILE``,
``AWS_ENDPOINT_URL``, ...). They are never logged, shown in messages or stored in a store's
attributes: messages name the URL only.

Light on purpose (fsspec only, imported on first use): ``dkernel validate`` runs the checks.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import unquote, urlsplit

from dkernel.errors import DKernelError, StoreError

#: Schemes a results store may be written to (their fsspec package must be installed).
WRITABLE_SCHEMES = ("s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "memory")
#: Schemes a store may be read from only.
READ_ONLY_SCHEMES = ("http", "https")
_PACKAGES = {"s3": "s3fs", "s3a": "s3fs", "gs": "gcsfs", "gcs": "gcsfs"}
_PACKAGES.update({"az": "adlfs", "abfs": "adlfs", "abfss": "adlfs"})
_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
#: Seconds the pre-cluster check waits for the object store, connecting and reading.
CHECK_TIMEOUT_S = 10.0


def scheme_of(location: str | Path) -> str | None:
    """The URL scheme of ``location`` (lower case), None for a plain path."""
    if isinstance(location, Path):
        return None
    match = _URL.match(str(location))
    return match.group(1).lower() if match else None


#: Where a results store lives: a local path, or a URL string for an object store.
Location = Path | str


def is_remote(location: Any) -> bool:
    """Whether ``location`` is an object-store (or HTTP) URL rather than a local path."""
    return isinstance(location, str) and scheme_of(location) not in (None, "file")


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


def storage_options(location: str, options: Mapping[str, Any] | None) -> dict[str, Any]:
    """The fsspec options for ``location``: ``options`` (the spec's ``store_options``) with
    the short names (``endpoint``, ``region``) put where the backend expects them; the rest
    (``anon``, ``profile``, ...) passed as they are. Empty: the backend reads the
    environment."""
    opts = dict(options or {})
    if scheme_of(location) in ("s3", "s3a"):
        client = dict(opts.pop("client_kwargs", None) or {})
        for short, name in _S3_ALIASES.items():
            if short in opts:
                client[name] = opts.pop(short)
        if client:
            opts["client_kwargs"] = client
    return opts


def filesystem(
    location: str,
    options: Mapping[str, Any] | None = None,
    *,
    check: bool = False,
    what: str = "results stores",
    error: type[DKernelError] = StoreError,
) -> tuple[Any, str]:
    """``(fs, path)``: the fsspec file system of the URL ``location`` and the path in it.

    The one place a URL becomes a file system, for results stores and inputs
    (``dkernel.io.remote``) alike. ``check``: a fresh instance with short connect/read
    timeouts and no retries, for the bounded pre-cluster checks. ``what`` and ``error``: the
    messages' subject and the exception raised.

    Raises
    ------
    StoreError (or ``error``)
        When the backend's package is not installed, or it does not understand the options.
    """
    import fsspec

    scheme = scheme_of(location) or "file"
    opts = storage_options(location, options)
    if check and scheme in ("s3", "s3a"):
        config = dict(opts.pop("config_kwargs", None) or {})
        config.update(
            connect_timeout=CHECK_TIMEOUT_S,
            read_timeout=CHECK_TIMEOUT_S,
            retries={"max_attempts": 1, "mode": "standard"},
        )
        opts["config_kwargs"] = config
        opts["skip_instance_cache"] = True
    try:
        fs, path = fsspec.core.url_to_fs(location, **opts)
    except ImportError as exc:
        package = _PACKAGES.get(scheme, f"the fsspec backend of {scheme}://")
        raise error(
            f"{what} on {scheme}:// need {package}: pip install 'dkernel[cloud]' (or {package})."
        ) from exc
    except (TypeError, ValueError) as exc:
        raise error(
            f"the storage options for {scheme}:// are not understood by its backend ({exc})."
        ) from None
    return fs, path


def describe_error(exc: BaseException) -> str:
    """What went wrong talking to an object store, in one line without option values."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    for error in _chain(exc):
        name = type(error).__name__
        if name in ("EndpointConnectionError", "ConnectTimeoutError", "ConnectionError"):
            return f"the endpoint cannot be reached ({' '.join(str(error).split())})"
        if name in ("ReadTimeoutError", "TimeoutError"):
            return "the endpoint did not answer in time"
        if name == "NoCredentialsError":
            return "no credentials were found (set AWS_PROFILE or AWS_ACCESS_KEY_ID, or anon)"
    if isinstance(exc, PermissionError):
        return f"access denied ({text}): check the credentials and the bucket's permissions"
    return text[:300]


def _chain(exc: BaseException) -> list[BaseException]:
    seen, out = set(), []
    error: BaseException | None = exc
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        out.append(error)
        error = error.__cause__ or error.__context__
    return out


def call_bounded(func: Any, seconds: float) -> Any:
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


def _bounded(what: str, location: str, func: Any, timeout: float) -> Any:
    """:func:`call_bounded`, a timeout as a :class:`StoreError` naming the store."""
    try:
        return call_bounded(func, timeout)
    except TimeoutError:
        raise StoreError(
            f"cannot {what} {location}: the object store did not answer within {timeout:.0f} s "
            "(is the endpoint right and reachable?). Nothing was written."
        ) from None


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
    fs, path = filesystem(location, options, check=True)
    bucket = path.split("/", 1)[0]

    def probe() -> None:
        if hasattr(fs, "call_s3"):
            fs.call_s3("head_bucket", Bucket=bucket)
            fs.call_s3("list_objects_v2", Bucket=bucket, MaxKeys=1)
        else:
            fs.ls(bucket, detail=False)

    try:
        _bounded("reach", location, probe, 3 * CHECK_TIMEOUT_S)
    except StoreError:
        raise
    except FileNotFoundError:
        raise StoreError(
            f"cannot write the results store {location}: the bucket {bucket!r} does not "
            "exist (a typo?). Create it, or choose another --output. Nothing was written."
        ) from None
    except Exception as exc:  # noqa: BLE001  (botocore's errors, one line)
        raise StoreError(
            f"cannot write the results store {location} (bucket {bucket!r}): "
            f"{describe_error(exc)}. Nothing was written."
        ) from None


def check_remote_readable(location: str, options: Mapping[str, Any] | None = None) -> bool:
    """Whether the store's root metadata exists at the URL ``location`` (bounded time).

    Raises
    ------
    StoreError
        When the object store cannot be reached or refuses access.
    """
    fs, path = filesystem(location, options, check=True)
    try:
        return bool(_bounded("read", location, lambda: fs.exists(f"{path}/zarr.json"), 30.0))
    except StoreError:
        raise
    except Exception as exc:  # noqa: BLE001
        raise StoreError(f"cannot read {location}: {describe_error(exc)}.") from None
