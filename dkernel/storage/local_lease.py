"""A lease on a local (or shared POSIX) filesystem: the file ``dkernel.lease`` in the store
directory, published atomically and held with ``flock`` (:class:`StoreLease`)."""

from __future__ import annotations

import contextlib
import errno
import os
import shlex
import stat
import time
from pathlib import Path
from typing import Any

from dkernel._files import file_kind
from dkernel.errors import StoreError
from dkernel.storage.lease import (
    LEASE_FILE,
    MAX_LEASE_BYTES,
    RESERVE_FILE,
    Lease,
    _encode,
    _held,
    _holder_info,
    _parse,
    _Unusable,
    why_stale,
)

try:  # POSIX
    import fcntl
except ImportError:  # pragma: no cover  (Windows: heartbeat only)
    fcntl = None  # type: ignore[assignment]  # callers test for None before locking

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


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


class StoreLease(Lease):
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

    def check_held(self) -> None:
        """Nothing is checked: while this process lives no other takes a lease it holds with
        ``flock``. (Where ``flock`` is unsupported the heartbeat alone protects it, and a
        takeover after a stalled heartbeat is not noticed here.)"""

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
