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
    is one whose holder is gone: its pid is dead on this host, or its heartbeat is older than
    :func:`stale_after` seconds (``DKERNEL_LEASE_TIMEOUT``, default 120). A stale lease is
    taken over by the next writer (``--resume`` continues the store it left).

What is guaranteed where (see ``docs/store_lock.md``)
    * local disks: mutual exclusion (the lease is published with an atomic ``link`` or
      ``rename`` and held with ``flock``);
    * NFS v4 / Lustre / GPFS with working POSIX locks: the same, since ``flock`` is forwarded
      to the server;
    * filesystems without ``flock`` (NFS v3 without ``lockd``, FUSE mounts): only the
      heartbeat protects: two writers started on different hosts at the same moment can
      both start, and a holder whose heartbeat stalls for longer than the timeout loses its
      lease;
    * object stores (S3, GCS): no lock; dkernel writes stores only to file-system paths.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import errno
import json
import os
import socket
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from dkernel.errors import StoreError

LEASE_FILE = "dkernel.lease"
HEARTBEAT_S = 10.0
_TIMEOUT_ENV = "DKERNEL_LEASE_TIMEOUT"

try:  # POSIX
    import fcntl
except ImportError:  # pragma: no cover  (Windows: heartbeat only)
    fcntl = None  # type: ignore[assignment]


def stale_after() -> float:
    """Seconds after which a lease whose heartbeat has not moved is stale."""
    try:
        return max(1.0, float(os.environ.get(_TIMEOUT_ENV, "120")))
    except ValueError:
        return 120.0


def _now() -> float:
    return time.time()


def _iso(t: float) -> str:
    return _dt.datetime.fromtimestamp(t, _dt.UTC).isoformat(timespec="seconds")


def _pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError:
        return False
    return True


def read_lease(store: str | Path) -> dict[str, Any] | None:
    """The lease recorded in ``store`` (None when there is none or it is unreadable)."""
    path = Path(store) / LEASE_FILE
    for _ in range(3):  # a heartbeat may be rewriting it
        try:
            text = path.read_text(encoding="utf-8")
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError:
            return None
        try:
            lease = json.loads(text)
        except ValueError:
            time.sleep(0.05)
            continue
        return lease if isinstance(lease, dict) else None
    return None


def describe_holder(lease: dict[str, Any] | None) -> str:
    """``pid 123 on host h (started …, heartbeat 3 s ago)``."""
    if not lease:
        return "another process (its lease file could not be read)"
    age = _now() - float(lease.get("heartbeat", 0) or 0)
    cmd = f", {lease['command']}" if lease.get("command") else ""
    return (
        f"pid {lease.get('pid')} on host {lease.get('host')} (started "
        f"{lease.get('started_iso', '?')}, heartbeat {age:.0f} s ago{cmd})"
    )


def lease_is_stale(lease: dict[str, Any] | None) -> bool:
    """Whether the writer named by ``lease`` is gone (see the module docstring)."""
    if not lease:
        return True
    try:
        heartbeat = float(lease.get("heartbeat", 0))
        pid = int(lease.get("pid", -1))
    except (TypeError, ValueError):
        return True
    if _now() - heartbeat > stale_after():
        return True
    return lease.get("host") == socket.gethostname() and not _pid_alive(pid)


class StoreLease:
    """The lease of one store, held by this process (use :meth:`acquire`)."""

    def __init__(self, store: Path, fd: int, info: dict[str, Any], created_dir: bool) -> None:
        self.store = store
        self._fd = fd
        self.info = info
        self._created_dir = created_dir
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(
            target=self._beat, name="dkernel-lease-heartbeat", daemon=True
        )
        self._thread.start()

    @property
    def path(self) -> Path:
        return self.store / LEASE_FILE

    @classmethod
    def acquire(cls, store: str | Path, *, command: str = "") -> StoreLease:
        """Take the lease of ``store`` (creating the directory when needed).

        Raises
        ------
        StoreError
            When a live writer holds it, naming that writer (host, pid, start, heartbeat).
        """
        store = Path(store)
        created_dir = not store.exists()
        try:
            store.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot create the results store {store}: {exc}") from exc
        path = store / LEASE_FILE
        now = _now()
        info = {
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "started": now,
            "started_iso": _iso(now),
            "heartbeat": now,
            "token": uuid.uuid4().hex,
            "command": command,
        }
        # the lease is written complete to a private file beside the store (where the
        # holder's store-clearing cannot reach it), locked, then published under its name
        # atomically: readers never see a half-written lease
        tmp = store.parent / f".{store.name}.{LEASE_FILE}.{info['token']}"
        try:
            try:
                fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
            except PermissionError:  # a store we may write in a directory we may not
                tmp = store / f".{LEASE_FILE}.{info['token']}"
                fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        except OSError as exc:
            raise StoreError(
                f"cannot write the lease file in {store}: {exc}. Check the permissions of "
                "the output directory, or choose another --output."
            ) from exc
        try:
            os.write(fd, json.dumps(info).encode())
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
                    if not path.exists():
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
        data = json.dumps(self.info).encode()
        with self._lock:
            if self._fd < 0:
                return
            os.pwrite(self._fd, data, 0)  # the length hardly changes: no empty moment
            os.ftruncate(self._fd, len(data))

    def _beat(self) -> None:
        while not self._stop.wait(HEARTBEAT_S):
            self.info["heartbeat"] = _now()
            with contextlib.suppress(OSError):
                self._write()

    def release(self) -> None:
        """Give the lease up: remove the lease file (and the store directory when this lease
        created it and nothing was written)."""
        self._stop.set()
        with self._lock:
            if self._fd < 0:
                return
            current = read_lease(self.store)
            if current is None or current.get("token") == self.info["token"]:
                with contextlib.suppress(OSError):
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
    live writer holds it.
    """
    try:
        old_fd = os.open(path, os.O_RDWR)
    except FileNotFoundError:
        return False
    try:
        if _flock(old_fd) is False:
            raise _held(store, read_lease(store))
        try:
            if os.fstat(old_fd).st_ino != os.stat(path).st_ino:
                return False  # replaced while we opened it
        except FileNotFoundError:
            return False
        previous = read_lease(store)
        if previous is not None and not lease_is_stale(previous):
            # unlocked yet live: a writer on another host (no shared locks) or a filesystem
            # without flock. Trust the heartbeat.
            raise _held(store, previous)
        if previous:
            info["took_over"] = {k: previous.get(k) for k in ("host", "pid", "started_iso")}
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


def _held(store: Path, lease: dict[str, Any] | None) -> StoreError:
    return StoreError(
        f"{store} is being written by {describe_holder(lease)}. One writer per store: wait "
        f"for it to finish, or choose another --output. A lease whose writer died is taken "
        f"over automatically (pass --resume to continue its store); its heartbeat expires "
        f"after {stale_after():.0f} s ({_TIMEOUT_ENV})."
    )
