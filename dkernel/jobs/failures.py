"""A running job's store, kept honest to the end: the space set aside for its last status
write, the check that it is still the directory the job created, and one line that says why it
failed (a full disk names its filesystem, free space and the job's need)."""

from __future__ import annotations

import errno
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dkernel._budget import format_size
from dkernel.errors import DKernelError, InvalidInputError, ResourceLimitError
from dkernel.storage.remote import Location, is_remote
from dkernel.storage.store import failure_cause

if TYPE_CHECKING:
    from dkernel.jobs.types import Cost
    from dkernel.storage.lock import Lease
    from dkernel.storage.store import ResultsStore

logger = logging.getLogger("dkernel.jobs.runner")


class JobFailedError(DKernelError, RuntimeError):
    """A job that failed while running; its store is marked ``failed``."""

    def __init__(self, message: str, store: Location) -> None:
        self.store = store
        super().__init__(message)


class FailureRecorder:
    """The store's end: marked ``complete`` by :meth:`complete`, or ``failed`` with a one-line
    cause by :meth:`on_exit` when a later stage raises (then a :class:`JobFailedError`, except
    for an interrupt and bad input found while running, which keep their type: exit 2).

    Disk is set aside beside the lease (:meth:`~dkernel.storage.lock.Lease.reserve`) and given back, half just
    before the final ``complete`` write and all of it before a ``failed`` one, so that the
    status is written even when another process fills the disk.
    """

    def __init__(
        self, name: str, output: Location, store: ResultsStore, lease: Lease, cost: Cost | None
    ) -> None:
        self.name, self.output, self.store, self.lease = name, output, store, lease
        self.needed = (float(cost.disk_bytes) or None) if cost is not None else None
        self.identity = _identity(output)
        self.reserved = 0
        self.monitor: Any = None  # set by the compute stage: its summary is kept on failure

    def reserve(self) -> None:
        """Set the space for the final status write aside beside the lease."""
        self.reserved = _reserve_bytes(self.output)
        if not self.lease.reserve(self.reserved):
            logger.warning(
                f"could not set {format_size(self.reserved)} aside beside {self.output} for "
                "the final status write: its filesystem is (nearly) full"
            )

    def complete(self, t_start: float) -> None:
        """Record resources and the total time, then mark the store complete: never a
        replaced directory's, never a remote one whose lease was lost."""
        if self.monitor is not None:
            self.store.update_attrs(resources=self.monitor.summary())
        self.store.record_timing("total", time.perf_counter() - t_start)
        self.lease.free_reserve(keep=self.reserved // 2)  # the other half for a `failed` write
        _check_in_place(self.output, self.identity)
        self.lease.check_held()
        self.store.mark_complete()

    def on_exit(self, kind: Any, exc: BaseException | None, tb: Any) -> bool:
        """An exit callback (:class:`contextlib.ExitStack`): a failure after the store was
        opened marks it ``failed``."""
        if exc is None:
            return False
        cause, marked = _record_failure(
            self.store,
            exc,
            output=self.output,
            lease=self.lease,
            identity=self.identity,
            needed=self.needed,
        )
        if self.monitor is not None and marked:
            store = self.store
            try:
                summary = self.monitor.summary()
                _status_write(store, lambda: store.update_attrs(resources=summary))
            except Exception:  # noqa: BLE001  (best effort: the scheduler may be gone)
                pass
        # bad input found while running keeps its own type (exit code 2 in the CLI)
        if isinstance(exc, KeyboardInterrupt | InvalidInputError | ResourceLimitError):
            return False
        raise JobFailedError(
            f"job {self.name!r} failed while running: {cause}", self.output
        ) from exc


#: Space set aside beside the lease for the final status writes: this much plus four times
#: the root metadata (rewritten through a temporary copy; half the reserve is kept through
#: the ``complete`` write for a ``failed`` one), at most :data:`_RESERVE_MAX`.
RESERVE_BYTES = 128 * 1024
_RESERVE_MAX = 16 << 20


def _reserve_bytes(path: Location) -> int:
    if is_remote(path):
        return 0
    try:
        root = (Path(path) / "zarr.json").stat().st_size
    except OSError:
        root = 0
    return min(_RESERVE_MAX, RESERVE_BYTES + 4 * root)


class _StoreGone(Exception):
    """The store directory was removed or replaced while the job ran."""


def _identity(path: Location) -> tuple[int, int] | None:
    if is_remote(path):
        return None
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _gone(path: Location, identity: tuple[int, int] | None) -> bool:
    """Whether the store directory was removed or replaced, or lost its root metadata."""
    if is_remote(path):
        return False  # an object store has no directory to replace
    return _identity(path) != identity or not os.path.lexists(Path(path) / "zarr.json")


def _removed_message(path: Location, identity: tuple[int, int] | None) -> str:
    if _identity(path) == identity:
        what = f"the metadata {Path(path) / 'zarr.json'} of the results store {path} was removed"
        again = "Remove the store, then run the job again to recompute it."
    else:
        what = f"the results store {path} was removed"
        again = "Run the job again to recompute it."
        if os.path.lexists(path):
            again = (
                f"Writes under way recreated part of {path}: remove it, then run the job "
                "again to recompute the store."
            )
    return f"{what} while the job was running, so nothing could be recorded in it. {again}"


def _check_in_place(path: Location, identity: tuple[int, int] | None) -> None:
    if _gone(path, identity):
        raise _StoreGone(str(path))


def _record_failure(
    store: ResultsStore,
    exc: BaseException,
    *,
    output: Location,
    lease: Lease,
    identity: tuple[int, int] | None,
    needed: float | None,
) -> tuple[str, bool]:
    """Mark ``store`` failed with a one-line cause of ``exc``; return that cause and whether
    the store was marked.

    The space set aside is given back first. When the store directory is gone nothing is
    written; when the status cannot be written (the disk still full), the cause says so.
    """
    if _gone(output, identity):
        lease.free_reserve()
        _tell_interrupt(exc, "the results store was removed while the job ran")
        return _removed_message(output, identity), False
    cause = describe_failure(exc, output, needed)  # the free space before the reserve is freed
    lease.free_reserve()
    try:
        _status_write(store, lambda: store.mark_failed(exc, cause=cause))
        _tell_interrupt(exc, "the store is marked failed")
        return cause, True
    except Exception as error:  # noqa: BLE001  (retried below, smaller)
        first = error
    try:
        if isinstance(first, TimeoutError):
            raise first  # an object store that stalls: not waited for twice
        _status_write(store, lambda: store.mark_failed(exc, cause=cause, with_traceback=False))
    except Exception as write_error:  # noqa: BLE001
        if _gone(output, identity):
            _tell_interrupt(exc, "the results store was removed while the job ran")
            return _removed_message(output, identity), False
        _tell_interrupt(exc, "the store could not be marked failed; --resume continues it")
        return (
            f"{cause.rstrip('.')}. The store could not be marked failed either "
            f"({describe_failure(write_error, output, None, advice=False)}), so it still reads "
            "'running': --resume continues it."
        ), False
    _tell_interrupt(exc, "the store is marked failed")
    return cause, True


#: Seconds the status write of a failed job on an object store may take: the endpoint that
#: made the job fail may be the one that stalls, and SIGTERM must end the job promptly.
STATUS_WRITE_S = 10.0


def _status_write(store: ResultsStore, write: Callable[[], None]) -> None:
    """``write()``, bounded by :data:`STATUS_WRITE_S` on an object store (a local write is
    made as it is).

    Raises
    ------
    TimeoutError
        When the object store did not finish the write in time (it may still land).
    """
    if not store.remote:
        write()
        return
    from dkernel.storage.remote import call_bounded

    try:
        call_bounded(write, STATUS_WRITE_S)
    except TimeoutError:
        raise TimeoutError(f"the object store did not answer within {STATUS_WRITE_S:g} s") from None


def _tell_interrupt(exc: BaseException, what: str) -> None:
    """What became of the store, as a note on an interrupt (Ctrl-C, SIGTERM) for the command
    to print: an interrupt before the store exists carries none."""
    if isinstance(exc, KeyboardInterrupt):
        exc.add_note(what)


_DISK_FULL = {errno.ENOSPC: "disk full (ENOSPC)", errno.EDQUOT: "disk quota exceeded (EDQUOT)"}


def _disk_full(exc: BaseException) -> str | None:
    """``disk full (ENOSPC)`` when ``exc`` (or an error it came from) is a full disk."""
    seen: set[int] = set()
    error: BaseException | None = exc
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, OSError) and error.errno in _DISK_FULL:
            return _DISK_FULL[error.errno]
        if "No space left on device" in str(error):
            return _DISK_FULL[errno.ENOSPC]
        if "Disk quota exceeded" in str(error):
            return _DISK_FULL[errno.EDQUOT]
        error = error.__cause__ or error.__context__
    return None


def describe_failure(
    exc: BaseException, output: Location, needed: float | None, *, advice: bool = True
) -> str:
    """One line: the error, or for a full disk which filesystem, its free space and the need."""
    full = _disk_full(exc)
    if full is None or is_remote(output):
        return failure_cause(exc)
    text = f"{full} writing the results store {output}: {_filesystem(output)}"
    if needed:
        text += f"; this job writes about {format_size(needed)} (estimate)"
    if advice:
        text += (
            ". Free space (or choose another --output), then run the job again with --resume: "
            "the finished groups are kept."
        )
    return text


def _filesystem(path: Location) -> str:
    """``the tmpfs filesystem mounted at /mnt/x has 0 B free of 2.00 MiB``."""
    probe = Path(os.path.abspath(path))
    while not probe.exists() and probe.parent != probe:
        probe = probe.parent
    try:
        st = os.statvfs(probe)
    except OSError:
        return "its free space cannot be read"
    free, total = st.f_bavail * st.f_frsize, st.f_blocks * st.f_frsize
    mount, kind = _mount_of(probe)
    return (
        f"the {kind} filesystem mounted at {mount} has {format_size(free)} free of "
        f"{format_size(total)}"
    )


def _mount_of(path: Path) -> tuple[str, str]:
    """(mount point, filesystem type) of ``path``, from ``/proc/self/mounts`` when there is
    one; else the highest folder on ``path``'s device and ``unknown``."""
    real = os.path.realpath(path)
    best = ("", "unknown")
    try:
        with open("/proc/self/mounts", encoding="utf-8", errors="replace") as mounts:
            for line in mounts:
                fields = line.split()
                if len(fields) < 3:
                    continue
                point = fields[1].replace("\\040", " ").replace("\\011", "\t")
                inside = real == point or real.startswith(point.rstrip("/") + "/")
                if inside and len(point) >= len(best[0]):
                    best = (point, fields[2])
    except OSError:
        pass
    if best[0]:
        return best
    mount, dev = Path(real), os.stat(real).st_dev
    while mount.parent != mount and os.stat(mount.parent).st_dev == dev:
        mount = mount.parent
    return str(mount), "unknown"
