"""The store lease: one writer per results store.

A writer (``dkernel run`` / ``dkernel submit``) takes the lease before any cluster starts and
holds it until the store is marked ``complete`` or ``failed``. The lease is the file
``dkernel.lease`` inside the store directory; it records the holder's host, pid, start time
and a heartbeat that a background thread refreshes every :data:`HEARTBEAT_S` seconds. Zarr
ignores the file (it is not a Zarr key).

Taking the lease
    On a local disk the lease file is also locked with ``flock``: the kernel gives it to one
    process at a time and releases it when that process dies, however it dies. A second
    writer (and ``--overwrite``) is refused while the holder lives, with the holder named.
A stale lease
    is one whose holder is gone: the lease is on this host and its ``flock`` is free (the pid
    ended, or was reused by another program), its pid is dead on this host, its heartbeat is
    older than :func:`stale_after` seconds (``DKERNEL_LEASE_TIMEOUT``, default 120), or its
    heartbeat is dated more than that into the future (a skewed clock or a forged lease:
    otherwise it would stay live for ever). A stale lease is taken over by the next writer
    (``--resume`` continues the store it left).
An unusable lease
    (a directory, a symbolic link, a FIFO or device, more than :data:`MAX_LEASE_BYTES`, bytes
    that are not UTF-8 JSON, or fields of the wrong type) is never read through, waited on or
    taken over: the writer is refused at once with what is wrong and the file to remove.
The reserve
    While it holds the lease a writer also keeps :data:`RESERVE_FILE` beside it, a few
    hundred KiB set aside so that the final ``complete``/``failed`` status can still be
    written when another process fills the disk (:meth:`StoreLease.reserve`).

What is guaranteed where (see ``docs/store_lock.md``)
    * local disks: mutual exclusion (the lease is published with an atomic ``link`` or
      ``rename`` and held with ``flock``);
    * NFS v4 / Lustre / GPFS with working POSIX locks: the same, since ``flock`` is forwarded
      to the server;
    * filesystems without ``flock`` (NFS v3 without ``lockd``, FUSE mounts): only the
      heartbeat protects: two writers started on different hosts at the same moment can
      both start, and a holder whose heartbeat stalls for longer than the timeout loses its
      lease;
    * S3 (and S3-compatible servers that honour conditional writes): mutual exclusion. The
      lease is the object ``dkernel.lease`` in the store's prefix, created with
      ``If-None-Match: *`` and heartbeated, taken over and released with ``If-Match`` on its
      ETag (:class:`RemoteStoreLease`);
    * other object stores (GCS, Azure through fsspec), and S3 servers that refuse or ignore
      conditional writes: no atomic primitive. A store is taken only when it has no lease;
      an existing lease, live or stale, is never taken over (``--overwrite`` and
      ``--resume`` are refused, naming the lease object to remove by hand).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import errno
import json
import logging
import math
import os
import re
import shlex
import socket
import stat
import threading
import time
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from dkernel._files import file_kind
from dkernel.errors import StoreError

LEASE_FILE = "dkernel.lease"
#: Disk set aside by the writer for its final status write (removed with the lease).
RESERVE_FILE = f".{LEASE_FILE}.reserve"


def is_lease_file(name: str) -> bool:
    """Whether a store's member ``name`` is the lease or one of the files beside it (the
    reserve, a temporary, a conditional-write probe: ``.dkernel.lease.*``), none of which is
    results data."""
    return name == LEASE_FILE or name.startswith(f".{LEASE_FILE}.")


@contextlib.contextmanager
def lease_objects_unlisted() -> Iterator[None]:
    """Zarr's warning about an object it does not know, silenced for the lease objects (ours,
    not results data) while a store that is not consolidated is listed."""
    with warnings.catch_warnings():
        pattern = rf"Object at (\S*/)?\.?{re.escape(LEASE_FILE)}\S* is not recognized"
        warnings.filterwarnings("ignore", message=pattern, category=UserWarning)
        yield


logger = logging.getLogger(__name__)
HEARTBEAT_S = 10.0
#: Largest lease file read (bytes); a lease is a few hundred.
MAX_LEASE_BYTES = 64 * 1024
#: The lease is padded with spaces to a multiple of this, so that a heartbeat rewrites it in
#: place, with the same length (no moment where a reader sees a shorter or longer file).
_LEASE_BLOCK = 512
_TIMEOUT_ENV = "DKERNEL_LEASE_TIMEOUT"
#: Largest valid pid (Linux's PID_MAX_LIMIT).
_PID_MAX = 1 << 22

try:  # POSIX
    import fcntl
except ImportError:  # pragma: no cover  (Windows: heartbeat only)
    fcntl = None  # type: ignore[assignment]  # callers test for None before locking

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


def stale_after() -> float:
    """Seconds after which a lease whose heartbeat has not moved is stale."""
    try:
        value = float(os.environ.get(_TIMEOUT_ENV, "120"))
    except ValueError:
        return 120.0
    return max(1.0, value) if math.isfinite(value) else 120.0


def _now() -> float:
    return time.time()


def _iso(t: float) -> str:
    try:
        return _dt.datetime.fromtimestamp(t, _dt.UTC).isoformat(timespec="seconds")
    except (OverflowError, OSError, ValueError):
        return f"{t!r} (not a date)"


def _pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except (OSError, OverflowError):
        return False
    return True


# ------------------------------------------------------------------------------------------
# reading a lease: bounded, never through a link, never blocking
# ------------------------------------------------------------------------------------------


class _Unusable(Exception):
    """The lease file cannot be used: ``problem`` says why (``is a FIFO``)."""

    def __init__(self, problem: str, *, is_dir: bool = False) -> None:
        self.problem = problem
        self.is_dir = is_dir
        super().__init__(problem)


def _check_regular(st: os.stat_result) -> None:
    if not stat.S_ISREG(st.st_mode):
        kind = file_kind(st.st_mode)
        raise _Unusable(f"is {kind}, not a regular file", is_dir=stat.S_ISDIR(st.st_mode))
    if st.st_size > MAX_LEASE_BYTES:
        raise _Unusable(f"is {st.st_size:,} bytes long; a lease is at most {MAX_LEASE_BYTES:,}")


def _open_lease(path: Path, *, write: bool = False) -> int:
    """Open the lease file at ``path``: a regular file only, no link followed, no waiting.

    Raises FileNotFoundError when there is none, :class:`_Unusable` when it is not a lease.
    """
    _check_regular(os.lstat(path))  # a FIFO or device is never even opened
    flags = _NOFOLLOW | _NONBLOCK | _CLOEXEC
    try:
        try:
            fd = os.open(path, (os.O_RDWR if write else os.O_RDONLY) | flags)
        except PermissionError:
            if not write:
                raise
            fd = os.open(path, os.O_RDONLY | flags)  # flock works on a read-only descriptor
    except FileNotFoundError:
        raise
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _Unusable("is a symbolic link, not a regular file") from exc
        raise _Unusable(f"cannot be opened ({exc.strerror or exc})") from exc
    try:
        _check_regular(os.fstat(fd))  # replaced between the lstat and the open
    except BaseException:
        os.close(fd)
        raise
    return fd


def _read_fd(fd: int) -> bytes:
    data = os.pread(fd, MAX_LEASE_BYTES + 1, 0)
    if len(data) > MAX_LEASE_BYTES:
        raise _Unusable(f"is more than {MAX_LEASE_BYTES:,} bytes long")
    return data


def _parse(data: bytes) -> dict[str, Any]:
    """The lease held in ``data``, its fields checked (raises :class:`_Unusable`)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _Unusable(f"holds bytes that are not UTF-8 text (byte {exc.start})") from exc
    if not text.strip():
        raise _Unusable("is empty")
    try:
        lease = json.loads(text)
    except ValueError as exc:
        raise _Unusable(f"is not JSON ({exc})") from exc
    except RecursionError as exc:
        raise _Unusable("is not a lease (JSON nested too deeply)") from exc
    if not isinstance(lease, dict):
        raise _Unusable(f"holds a JSON {type(lease).__name__}, not a lease object")
    heartbeat, pid, host = lease.get("heartbeat"), lease.get("pid"), lease.get("host")
    if isinstance(heartbeat, bool) or not isinstance(heartbeat, int | float):
        raise _Unusable(f"has a heartbeat that is not a time: {_show(heartbeat)}")
    if not math.isfinite(heartbeat):
        raise _Unusable(f"has a heartbeat that is not a time: {heartbeat!r}")
    if isinstance(pid, bool) or not isinstance(pid, int) or not 0 < pid <= _PID_MAX:
        raise _Unusable(f"has a pid that is not a process id: {_show(pid)}")
    if not isinstance(host, str) or not host or len(host) > 255:
        raise _Unusable(f"has a host that is not a host name: {_show(host)}")
    return lease


def _show(value: Any) -> str:
    text = ascii(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _load(path: Path, fd: int | None = None) -> dict[str, Any]:
    """The lease at ``path`` (read through ``fd`` when given).

    A heartbeat may be rewriting the file while it is read: a lease that does not parse is
    read again before it is called unusable.
    """
    own = fd is None
    if own:
        fd = _open_lease(path)
    assert fd is not None
    try:
        for attempt in range(3):
            try:
                return _parse(_read_fd(fd))
            except _Unusable:
                if attempt == 2:
                    raise
                time.sleep(0.05)
        raise AssertionError("unreachable")  # pragma: no cover
    finally:
        if own:
            os.close(fd)


def read_lease(store: str | Path) -> dict[str, Any] | None:
    """The lease recorded in ``store`` (None when there is none or it is unusable)."""
    try:
        return _load(Path(store) / LEASE_FILE)
    except (_Unusable, OSError):
        return None


def _unusable_error(store: Path, exc: _Unusable) -> StoreError:
    path = store / LEASE_FILE
    remove = (
        f"rm -r -- {shlex.quote(str(path))}" if exc.is_dir else f"rm -- {shlex.quote(str(path))}"
    )
    return StoreError(
        f"the lease file {path} of the results store {store} {exc.problem}, so whether "
        "another job is writing the store cannot be told. If no dkernel job is writing it, "
        f"remove that file ({remove}) and run again; --resume continues the store."
    )


# ------------------------------------------------------------------------------------------
# describing and judging a holder
# ------------------------------------------------------------------------------------------


def _number(value: Any, default: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return default
    return float(value)


def _age(seconds: float) -> str:
    if seconds >= 0:
        return f"heartbeat {seconds:.0f} s ago"
    return f"heartbeat {-seconds:.0f} s in the future"


def _text(value: Any) -> str:
    """``value`` for a message: control and non-ASCII characters escaped, cut when long."""
    text = _show(value)
    return text[1:-1] if isinstance(value, str) and len(ascii(value)) <= 60 else text


def describe_holder(lease: dict[str, Any] | None) -> str:
    """``pid 123 on host h (started …, heartbeat 3 s ago)``."""
    if not lease:
        return "another process (its lease file could not be read)"
    age = _now() - _number(lease.get("heartbeat"), 0.0)
    command = lease.get("command")
    cmd = f", {_text(command)}" if isinstance(command, str) and command else ""
    return (
        f"pid {_text(lease.get('pid'))} on host {_text(lease.get('host'))} (started "
        f"{_text(lease.get('started_iso', '?'))}, {_age(age)}{cmd})"
    )


def why_stale(lease: dict[str, Any] | None, *, unlocked: bool = False) -> str | None:
    """Why the writer named by ``lease`` is gone, or None when it may be alive.

    ``unlocked``: this process took the lease file's ``flock``, so no process on this host
    holds it (a live writer on this host always does).
    """
    if not lease:
        return "its lease could not be read"
    heartbeat = _number(lease.get("heartbeat"), math.nan)
    pid = lease.get("pid")
    if math.isnan(heartbeat) or isinstance(pid, bool) or not isinstance(pid, int):
        return "its lease is malformed"
    age, limit = _now() - heartbeat, stale_after()
    if age > limit:
        return f"its heartbeat is {age:.0f} s old (more than {limit:.0f} s, {_TIMEOUT_ENV})"
    if -age > limit:
        return (
            f"its heartbeat is dated {_iso(heartbeat)}, {-age:.0f} s in the future: a clock "
            f"skewed by more than {limit:.0f} s ({_TIMEOUT_ENV}) or a forged lease"
        )
    if lease.get("host") == socket.gethostname():
        if unlocked:
            return (
                "nothing on this host holds its lock any more (the pid ended; it may have "
                "been reused by another program)"
            )
        if not _pid_alive(pid):
            return f"pid {pid} is not running on this host"
    return None


# ------------------------------------------------------------------------------------------
# holding a lease
# ------------------------------------------------------------------------------------------


def _encode(info: dict[str, Any]) -> bytes:
    data = json.dumps(info).encode()
    size = -(-len(data) // _LEASE_BLOCK) * _LEASE_BLOCK
    return data + b" " * (size - len(data))


def _holder_info(command: str) -> dict[str, Any]:
    """What a new lease records of its holder: host, pid, start, heartbeat, a token."""
    now = _now()
    return {
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "started": now,
        "started_iso": _iso(now),
        "heartbeat": now,
        "token": uuid.uuid4().hex,
        "command": command,
    }


class _Heartbeat:
    """A lease's heartbeat: ``info`` written again (``_write``) with a fresh ``heartbeat``
    every :data:`HEARTBEAT_S` seconds, on a daemon thread, until ``_stop`` is set."""

    info: dict[str, Any]
    #: what a failed heartbeat write may raise: it is tried again at the next beat
    _beat_errors: tuple[type[Exception], ...] = (OSError,)

    def _write(self) -> None:
        raise NotImplementedError

    def _start_heartbeat(self) -> None:
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(
            target=self._beat, name="dkernel-lease-heartbeat", daemon=True
        )
        self._thread.start()

    def _beat(self) -> None:
        while not self._stop.wait(HEARTBEAT_S):
            self.info["heartbeat"] = _now()
            with contextlib.suppress(*self._beat_errors):
                self._write()


class StoreLease(_Heartbeat):
    """The lease of one store, held by this process (use :meth:`acquire`)."""

    def __init__(self, store: Path, fd: int, info: dict[str, Any], created_dir: bool) -> None:
        self.store = store
        self._fd = fd
        self.info = info
        self._created_dir = created_dir
        self._size = os.fstat(fd).st_size
        self._start_heartbeat()

    @property
    def path(self) -> Path:
        return self.store / LEASE_FILE

    @classmethod
    def acquire(cls, store: str | Path, *, command: str = "") -> StoreLease:
        """Take the lease of ``store`` (creating the directory when needed).

        Raises
        ------
        StoreError
            When a live writer holds it, naming that writer (host, pid, start, heartbeat);
            when the lease file is unusable (naming the file to remove); when the lease
            cannot be written (disk full, permissions).
        """
        store = Path(store)
        created_dir = not store.exists()
        try:
            store.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot create the results store {store}: {exc}") from exc
        path = store / LEASE_FILE
        info = _holder_info(command)
        # the lease is written complete to a private file beside the store (where the
        # holder's store-clearing cannot reach it), locked, then published under its name
        # atomically: readers never see a half-written lease
        tmp = store.parent / f".{store.name}.{LEASE_FILE}.{info['token']}"
        try:
            try:
                fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL | _CLOEXEC, 0o644)
            except PermissionError:  # a store we may write in a directory we may not
                tmp = store / f".{LEASE_FILE}.{info['token']}"
                fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL | _CLOEXEC, 0o644)
        except OSError as exc:
            if created_dir:
                with contextlib.suppress(OSError):
                    store.rmdir()
            raise StoreError(
                f"cannot write the lease file in {store}: {exc}. Check the permissions of "
                "the output directory and its free space, or choose another --output."
            ) from exc
        try:
            try:
                os.write(fd, _encode(info))
            except OSError as exc:
                raise StoreError(
                    f"cannot write the lease file in {store}: {exc.strerror or exc}. Check "
                    "the free space and permissions of the output directory, or choose "
                    "another --output."
                ) from exc
            if _flock(fd) is False:  # pragma: no cover  (nobody else knows this file)
                raise StoreError(f"could not lock {tmp}")
            for _ in range(20):
                try:
                    os.link(tmp, path)  # atomic; fails when a lease exists
                    break
                except FileExistsError:
                    pass
                except OSError as exc:
                    if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP):
                        raise StoreError(f"cannot take the lease of {store}: {exc}") from exc
                    # no hard links on this filesystem (some FUSE mounts): not atomic
                    if not os.path.lexists(path):
                        os.rename(tmp, path)
                        tmp = path
                        break
                if _take_over_if_stale(store, path, tmp, info):
                    break
            else:
                raise StoreError(f"could not take the lease of {store}: it keeps changing; retry.")
        except BaseException:
            os.close(fd)
            with contextlib.suppress(OSError):
                if tmp != path:
                    tmp.unlink()
            if created_dir:
                with contextlib.suppress(OSError):
                    store.rmdir()
            raise
        with contextlib.suppress(OSError):
            if tmp != path:
                tmp.unlink()
        return cls(store, fd, info, created_dir)

    def _write(self) -> None:
        data = _encode(self.info)
        with self._lock:
            if self._fd < 0:
                return
            if len(data) < self._size:  # the same length as before: rewritten in place
                data += b" " * (self._size - len(data))
            written = os.pwrite(self._fd, data, 0)
            if written == len(data) and len(data) != self._size:
                os.ftruncate(self._fd, len(data))
                self._size = len(data)

    # -- the reserve ---------------------------------------------------------------------
    @property
    def reserve_path(self) -> Path:
        return self.store / RESERVE_FILE

    def reserve(self, n_bytes: int) -> bool:
        """Set ``n_bytes`` of the store's filesystem aside (the file :data:`RESERVE_FILE`).

        :meth:`free_reserve` gives them back just before the final status write, which then
        succeeds even when another process filled the disk meanwhile. Returns False (and sets
        nothing aside) when the space cannot be had.
        """
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | _NOFOLLOW | _CLOEXEC
        try:
            fd = os.open(self.reserve_path, flags, 0o600)
        except OSError:
            return False
        try:
            try:
                os.posix_fallocate(fd, 0, n_bytes)
            except (AttributeError, OSError) as exc:
                if getattr(exc, "errno", None) == errno.ENOSPC:
                    raise
                os.pwrite(fd, b"\0" * n_bytes, 0)  # no fallocate on this filesystem
        except OSError:
            os.close(fd)
            self.free_reserve()
            return False
        os.close(fd)
        return True

    def free_reserve(self, keep: int = 0) -> None:
        """Give the reserved space back (see :meth:`reserve`), all of it or all but
        ``keep`` bytes."""
        with contextlib.suppress(OSError):
            if not stat.S_ISREG(os.lstat(self.reserve_path).st_mode):
                return
            if keep <= 0:
                self.reserve_path.unlink()
                return
            fd = os.open(self.reserve_path, os.O_WRONLY | _NOFOLLOW | _CLOEXEC)
            try:
                if os.fstat(fd).st_size > keep:
                    os.ftruncate(fd, keep)
            finally:
                os.close(fd)

    def release(self) -> None:
        """Give the lease up: remove the lease file and the reserve (and the store directory
        when this lease created it and nothing was written)."""
        self._stop.set()
        self.free_reserve()
        with self._lock:
            if self._fd < 0:
                return
            with contextlib.suppress(OSError):
                mine, there = os.fstat(self._fd), os.lstat(self.path)
                if (mine.st_dev, mine.st_ino) == (there.st_dev, there.st_ino):
                    self.path.unlink()
            os.close(self._fd)
            self._fd = -1
        if self._created_dir:
            with contextlib.suppress(OSError):
                self.store.rmdir()  # only when empty

    def __enter__(self) -> StoreLease:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _take_over_if_stale(store: Path, path: Path, tmp: Path, info: dict[str, Any]) -> bool:
    """Replace the lease at ``path`` by ours (``tmp``) when its writer is gone.

    Returns False when the lease vanished meanwhile (try linking again); raises when a
    live writer holds it, or when the lease file is unusable.
    """
    try:
        old_fd = _open_lease(path, write=True)
    except FileNotFoundError:
        return False
    except _Unusable as exc:
        raise _unusable_error(store, exc) from None
    try:
        locked = _flock(old_fd)
        if locked is False:
            raise _held(store, read_lease(store))
        try:
            if os.fstat(old_fd).st_ino != os.lstat(path).st_ino:
                return False  # replaced while we opened it
        except FileNotFoundError:
            return False
        try:
            previous = _load(path, old_fd)
        except _Unusable as exc:
            raise _unusable_error(store, exc) from None
        reason = why_stale(previous, unlocked=locked is True)
        if reason is None:
            # unlocked yet live: a writer on another host (no shared locks) or a filesystem
            # without flock. Trust the heartbeat.
            raise _held(store, previous)
        info["took_over"] = {k: previous.get(k) for k in ("host", "pid", "started_iso")}
        info["took_over"]["reason"] = reason
        os.rename(tmp, path)  # atomic replace, while we still hold the old file's lock
        return True
    finally:
        os.close(old_fd)


def _flock(fd: int) -> bool | None:
    """True when locked, False when another process holds it, None when unsupported."""
    if fcntl is None:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            return False
        return None  # ENOLCK / EOPNOTSUPP: the heartbeat is all there is
    return True


def _held(store: Path | str, lease: dict[str, Any] | None) -> StoreError:
    return StoreError(
        f"{store} is being written by {describe_holder(lease)}. One writer per store: wait "
        f"for it to finish, or choose another --output. A lease whose writer died is taken "
        f"over automatically (pass --resume to continue its store); its heartbeat expires "
        f"after {stale_after():.0f} s ({_TIMEOUT_ENV})."
    )


# ------------------------------------------------------------------------------------------
# object stores
# ------------------------------------------------------------------------------------------


def acquire_lease(
    store: str | Path, *, command: str = "", storage_options: dict[str, Any] | None = None
) -> StoreLease | RemoteStoreLease:
    """Take the lease of ``store``: a local directory (:class:`StoreLease`) or an
    object-store URL (:class:`RemoteStoreLease`)."""
    from dkernel.storage.remote import is_remote

    if is_remote(store):
        return RemoteStoreLease.acquire(str(store), command=command, options=storage_options)
    return StoreLease.acquire(store, command=command)


#: Longest one call on the lease object may take (seconds): an object store that stalls
#: (stops answering without closing) fails the call, it does not hold the heartbeat or the
#: job's release (botocore's read timeout does not bound a PUT waiting for its answer).
LEASE_CALL_S = 20.0


def _call(fs: Any, method: str, *args: Any, **kwargs: Any) -> Any:
    """``fs.method(*args, **kwargs)``, given up after :data:`LEASE_CALL_S` seconds
    (``TimeoutError``) on an asynchronous file system (s3fs, gcsfs, adlfs)."""
    coroutine = getattr(fs, f"_{method}", None)
    if not getattr(fs, "async_impl", False) or coroutine is None:
        return getattr(fs, method)(*args, **kwargs)
    from fsspec.asyn import sync

    return sync(fs.loop, coroutine, *args, timeout=LEASE_CALL_S, **kwargs)


class _Precondition(Exception):
    """The object store refused a conditional write: the condition does not hold."""


class _NoConditions(Exception):
    """The object store does not support conditional writes."""


def _classify(exc: BaseException) -> BaseException:
    """``exc`` from s3fs/botocore as :class:`_Precondition` (HTTP 412), :class:`_NoConditions`
    (501, or an argument the server does not know), or itself."""
    seen: set[int] = set()
    error: BaseException | None = exc
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        response = getattr(error, "response", None)
        if isinstance(response, dict):
            code = str(response.get("Error", {}).get("Code", ""))
            http = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if code in ("PreconditionFailed", "ConditionalRequestConflict") or http in (409, 412):
                return _Precondition(code)
            if code in ("NotImplemented", "InvalidArgument") or http == 501:
                return _NoConditions(code)
        text = str(error)
        if "pre-condition" in text or "PreconditionFailed" in text or "412" in text:
            return _Precondition(text)
        if "NotImplemented" in text or "not implemented" in text.lower():
            return _NoConditions(text)
        error = error.__cause__ or error.__context__
    return exc


class RemoteStoreLease(_Heartbeat):
    """The lease of a store on an object store, held by this process (:meth:`acquire`).

    On S3 the lease object is written with conditional requests: created only when absent
    (``If-None-Match: *``), rewritten (heartbeat, takeover) and deleted only while its ETag
    is the one this holder last saw (``If-Match``). Two writers cannot both hold it. Where
    the server has no conditional writes the lease is advisory (see the module docstring).
    """

    # a heartbeat that fails (the network, the server) is tried again at the next beat
    _beat_errors = (Exception,)

    def __init__(
        self, store: str, fs: Any, key: str, info: dict[str, Any], etag: str | None, atomic: bool
    ) -> None:
        self.store = store
        self._fs = fs
        self._key = key
        self.info = info
        self._etag = etag
        self.atomic = atomic
        #: set when another writer took the lease over (this holder's heartbeat was refused)
        self.lost = False
        self._released = False
        self._start_heartbeat()

    @property
    def path(self) -> str:
        return f"{self.store}/{LEASE_FILE}"

    @classmethod
    def acquire(
        cls, store: str, *, command: str = "", options: dict[str, Any] | None = None
    ) -> RemoteStoreLease:
        """Take the lease of the store at the URL ``store``.

        Raises
        ------
        StoreError
            When a live writer holds it (naming it); when the backend has no conditional
            writes and a lease exists; when the lease object is unusable or cannot be written.
        """
        from dkernel.storage.remote import describe_error, filesystem

        # bounded connect and read: a stalled endpoint fails a heartbeat, it does not hold it
        fs, root = filesystem(store, options, purpose="lease")
        key = f"{root}/{LEASE_FILE}"
        info = _holder_info(command)
        try:
            if not (hasattr(fs, "call_s3") and _honours_conditions(fs, root)):
                return cls._acquire_plain(store, fs, key, info)
            for _ in range(20):
                try:
                    etag = _put(fs, key, _encode(info), IfNoneMatch="*")
                except _Precondition:
                    taken = cls._take_over(store, fs, key, info)
                    if taken is None:
                        continue  # the lease vanished or changed meanwhile: try again
                    return cls(store, fs, key, info, taken, atomic=True)
                return cls(store, fs, key, info, etag, atomic=True)
            raise StoreError(f"could not take the lease of {store}: it keeps changing; retry.")
        except StoreError:
            raise
        except Exception as exc:  # noqa: BLE001  (botocore: one line, no options)
            raise StoreError(
                f"cannot write the lease of the results store {store}: {describe_error(exc)}."
            ) from None

    @classmethod
    def _take_over(cls, store: str, fs: Any, key: str, info: dict[str, Any]) -> str | None:
        """Replace the lease at ``key`` by ours when its writer is gone; our new ETag, or None
        when it vanished or changed meanwhile. Raises when a live writer holds it."""
        bucket, path = key.split("/", 1)
        try:
            got = _call(fs, "call_s3", "get_object", Bucket=bucket, Key=path)
        except FileNotFoundError:
            return None
        etag = got["ETag"]
        from fsspec.asyn import sync

        # the body and its ETag come from one response: what is judged is what is replaced
        body = got["Body"]
        try:
            data = sync(fs.loop, body.read, MAX_LEASE_BYTES + 1, timeout=LEASE_CALL_S)
        finally:
            body.close()
        try:
            if len(data) > MAX_LEASE_BYTES:
                raise _Unusable(f"is more than {MAX_LEASE_BYTES:,} bytes long")
            previous = _parse(data)
        except _Unusable as exc:
            raise StoreError(
                f"the lease object {store}/{LEASE_FILE} of the results store {store} "
                f"{exc.problem}, so whether another job is writing the store cannot be told. "
                "If no dkernel job is writing it, remove that object and run again; "
                "--resume continues the store."
            ) from None
        reason = why_stale(previous)
        if reason is None:
            raise _held(store, previous)
        info["took_over"] = {k: previous.get(k) for k in ("host", "pid", "started_iso")}
        info["took_over"]["reason"] = reason
        try:
            return _put(fs, key, _encode(info), IfMatch=etag)
        except _Precondition:
            info.pop("took_over", None)
            return None

    @classmethod
    def _acquire_plain(
        cls, store: str, fs: Any, key: str, info: dict[str, Any]
    ) -> RemoteStoreLease:
        """No conditional writes: take the lease only when there is none."""
        if _call(fs, "exists", key):
            try:
                previous: dict[str, Any] | None = _parse(_call(fs, "cat_file", key))
            except _Unusable:
                previous = None
            raise StoreError(
                f"{store} has a lease ({describe_holder(previous)}) and its object store has no "
                "conditional writes, so dkernel cannot take it over safely, whether its writer "
                f"lives or not. If no dkernel job is writing the store, remove {store}/"
                f"{LEASE_FILE} and run again (--resume continues the store)."
            )
        _call(fs, "pipe_file", key, _encode(info))
        time.sleep(0.2)  # a writer that raced us: the last write wins, and we re-read it
        if _parse(_call(fs, "cat_file", key)).get("token") != info["token"]:
            raise _held(store, read_remote_lease(fs, key))
        return cls(store, fs, key, info, None, atomic=False)

    def _write(self) -> None:
        with self._lock:
            if self._released or self.lost:
                return
            if self._etag is None:
                _call(self._fs, "pipe_file", self._key, _encode(self.info))
                return
            try:
                self._etag = _put(self._fs, self._key, _encode(self.info), IfMatch=self._etag)
            except _Precondition:
                self.lost = True
                logger.error(
                    f"the lease of {self.store} was taken over by another writer; this job "
                    "no longer holds it and will not mark the store complete"
                )

    def check_held(self) -> None:
        """Raise :class:`StoreError` when another writer took the lease over."""
        if self.lost:
            raise StoreError(
                f"the lease of {self.store} was taken over by another writer while this job "
                "ran (its heartbeat stalled for longer than the timeout); not marking it."
            )

    def reserve(self, n_bytes: int) -> bool:
        """Nothing to set aside on an object store (it does not fill up): True."""
        return True

    def free_reserve(self, keep: int = 0) -> None:
        """Nothing was set aside (see :meth:`reserve`)."""

    def release(self) -> None:
        """Give the lease up: delete the lease object while it is still ours.

        A heartbeat under way is waited for at most one bounded call; when the object store
        stalls the lease is left to expire (a later job takes it over) rather than the job
        waiting on it."""
        self._stop.set()
        if not self._lock.acquire(timeout=LEASE_CALL_S):
            self._released = True
            logger.warning(
                f"could not release the lease of {self.store}: its object store did not answer "
                f"within {LEASE_CALL_S} s; the lease expires after {stale_after():.0f} s"
            )
            return
        try:
            self._release_locked()
        finally:
            self._lock.release()

    def _release_locked(self) -> None:
        if self._released:
            return
        self._released = True
        if self.lost:
            return
        bucket, path = self._key.split("/", 1)
        with contextlib.suppress(Exception):
            if self._etag is not None:
                try:
                    _call(
                        self._fs,
                        "call_s3",
                        "delete_object",
                        Bucket=bucket,
                        Key=path,
                        IfMatch=self._etag,
                    )
                    self._fs.invalidate_cache(self._key)
                    return
                except Exception as exc:  # noqa: BLE001
                    if isinstance(_classify(exc), _Precondition | TimeoutError):
                        return  # not ours any more, or the store stalls: it expires
            current = read_remote_lease(self._fs, self._key)
            if current is not None and current.get("token") == self.info["token"]:
                _call(self._fs, "rm_file", self._key)

    def __enter__(self) -> RemoteStoreLease:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def read_remote_lease(fs: Any, key: str) -> dict[str, Any] | None:
    """The lease object at ``key`` of ``fs`` (None when there is none or it is unusable)."""
    try:
        return _parse(_call(fs, "cat_file", key, start=0, end=MAX_LEASE_BYTES))
    except Exception:  # noqa: BLE001
        return None


def _honours_conditions(fs: Any, root: str) -> bool:
    """Whether the S3 server behind ``fs`` refuses a second ``If-None-Match: *`` create of
    one object. A server that ignores the condition would let two writers both create the
    lease, so this is found out on a probe object of this process, never on the lease."""
    probe = f"{root}/.{LEASE_FILE}.probe-{uuid.uuid4().hex}"
    try:
        _put(fs, probe, b"", IfNoneMatch="*")
        try:
            _put(fs, probe, b"", IfNoneMatch="*")
        except _Precondition:
            return True
        logger.warning(
            f"the object store of s3://{root} ignores conditional writes: a lease is taken "
            "only where there is none, and never taken over"
        )
        return False
    except _NoConditions:
        return False
    finally:
        with contextlib.suppress(Exception):
            _call(fs, "rm_file", probe)


def _put(fs: Any, key: str, data: bytes, **condition: str) -> str:
    """A conditional PUT of ``data`` at ``key``; its ETag. Raises :class:`_Precondition` or
    :class:`_NoConditions`."""
    bucket, path = key.split("/", 1)
    try:
        response = _call(
            fs, "call_s3", "put_object", Bucket=bucket, Key=path, Body=data, **condition
        )
    except Exception as exc:  # noqa: BLE001
        raise _classify(exc) from exc
    fs.invalidate_cache(key)
    return str(response["ETag"])
