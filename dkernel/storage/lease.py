"""The store lease's record and the :class:`Lease` interface of its two kinds.

The record is the JSON object a writer keeps in ``dkernel.lease`` (the file or the object):
its host, pid, start, heartbeat, a token and its command, padded to :data:`_LEASE_BLOCK`
bytes. This module reads it back (:func:`_parse`), describes its holder and judges whether
that holder is gone (:func:`why_stale`). A lease on a local disk
(:class:`~dkernel.storage.local_lease.StoreLease`) and one on an object store
(:class:`~dkernel.storage.remote_lease.RemoteStoreLease`) are both a :class:`Lease`; see
:mod:`dkernel.storage.lock` for what each guarantees.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import math
import os
import re
import socket
import threading
import time
import uuid
import warnings
from abc import ABC, abstractmethod
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Self

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


HEARTBEAT_S = 10.0
#: Largest lease file read (bytes); a lease is a few hundred.
MAX_LEASE_BYTES = 64 * 1024
#: The lease is padded with spaces to a multiple of this, so that a heartbeat rewrites it in
#: place, with the same length (no moment where a reader sees a shorter or longer file).
_LEASE_BLOCK = 512
_TIMEOUT_ENV = "DKERNEL_LEASE_TIMEOUT"
#: Largest valid pid (Linux's PID_MAX_LIMIT).
_PID_MAX = 1 << 22


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


def _held(store: Path | str, lease: dict[str, Any] | None) -> StoreError:
    return StoreError(
        f"{store} is being written by {describe_holder(lease)}. One writer per store: wait "
        f"for it to finish, or choose another --output. A lease whose writer died is taken "
        f"over automatically (pass --resume to continue its store); its heartbeat expires "
        f"after {stale_after():.0f} s ({_TIMEOUT_ENV})."
    )


class Lease(ABC):
    """A writer's hold on one results store, taken with
    :func:`dkernel.storage.lock.acquire_lease` and held until :meth:`release`.

    While held, :attr:`info` (the record) is written again with a fresh ``heartbeat`` every
    :data:`HEARTBEAT_S` seconds, on a daemon thread, until :meth:`release`. Implemented by
    :class:`~dkernel.storage.local_lease.StoreLease` (a file in a local directory) and
    :class:`~dkernel.storage.remote_lease.RemoteStoreLease` (an object on an object store).
    """

    #: the holder's record: host, pid, start, heartbeat, token, command (and ``took_over``,
    #: the holder whose stale lease this one replaced)
    info: dict[str, Any]
    #: what a failed heartbeat write may raise: it is tried again at the next beat
    _beat_errors: tuple[type[Exception], ...] = (OSError,)

    @property
    @abstractmethod
    def path(self) -> Path | str:
        """The lease file (a path) or object (a URL)."""

    @abstractmethod
    def reserve(self, n_bytes: int) -> bool:
        """Set ``n_bytes`` aside for the final status write; False when they cannot be had."""

    @abstractmethod
    def free_reserve(self, keep: int = 0) -> None:
        """Give the space :meth:`reserve` set aside back, all of it or all but ``keep``
        bytes."""

    @abstractmethod
    def check_held(self) -> None:
        """Raise :class:`~dkernel.errors.StoreError` when another writer took the lease
        over while this process held it."""

    @abstractmethod
    def release(self) -> None:
        """Give the lease up."""

    @abstractmethod
    def _write(self) -> None:
        """Write :attr:`info` again (one heartbeat)."""

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

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
