"""Cost estimates and limits checked before any O(N^2) work starts.

A limit means what the machine can give: the memory limit is capped at the machine's memory
(or its container's), the disk limit at the free space of the output's file system.
"""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

from dkernel.errors import InvalidInputError, ResourceLimitError

logger = logging.getLogger(__name__)

DEFAULT_MAX_MEMORY = "4GiB"
DEFAULT_MAX_DISK = "50GiB"


def parse_size(value: str | int | float) -> float:
    """Bytes from ``4GiB``, ``500MB``, ``1e9`` or a number (:func:`dask.utils.parse_bytes`,
    with dkernel's error for a size that is not positive or cannot be read).

    Examples
    --------
    >>> parse_size("2GiB")
    2147483648.0
    """
    from dask.utils import parse_bytes

    if isinstance(value, bool):
        raise InvalidInputError(f"cannot read {value!r} as a size; use a number of bytes.")
    try:
        number = float(value) if isinstance(value, int | float) else float(parse_bytes(value))
    except (ValueError, TypeError, KeyError):
        raise InvalidInputError(
            f"cannot read {value!r} as a size; use a number of bytes or e.g. '4GiB', '500MB'."
        ) from None
    if not number > 0:
        raise InvalidInputError(f"a size must be > 0; got {value!r}.")
    return number


def format_size(n_bytes: float) -> str:
    """Human-readable size (:func:`dask.utils.format_bytes`: binary units, ``1.50 GiB``)."""
    from dask.utils import format_bytes

    return format_bytes(int(n_bytes))


def default_max_memory() -> float:
    """The memory limit: ``DKERNEL_MAX_MEMORY`` or 4 GiB."""
    return parse_size(os.environ.get("DKERNEL_MAX_MEMORY", DEFAULT_MAX_MEMORY))


def default_max_disk() -> float:
    """The disk limit: ``DKERNEL_MAX_DISK`` or 50 GiB."""
    return parse_size(os.environ.get("DKERNEL_MAX_DISK", DEFAULT_MAX_DISK))


#: Share of the free space of the output's file system a job may plan to write: the rest is
#: left to the other processes of the machine (and to the job's own status writes).
DISK_SHARE = 0.9


class SizeLimit(float):
    """A limit in bytes that remembers why it is what it is (``note``, for messages).

    A plain ``float`` everywhere else: it compares, formats and pickles as one.
    """

    note: str

    def __new__(cls, value: float, note: str = "") -> SizeLimit:
        obj = super().__new__(cls, value)
        obj.note = note
        return obj

    def __reduce__(self) -> tuple:
        return (SizeLimit, (float(self), self.note))


def physical_memory() -> float | None:
    """This machine's memory in bytes: its physical RAM, or less when a cgroup (a container)
    holds this process to less; None when it cannot be told."""
    sizes = []
    try:
        sizes.append(float(os.sysconf("SC_PAGE_SIZE")) * float(os.sysconf("SC_PHYS_PAGES")))
    except (AttributeError, OSError, ValueError):
        pass
    for cgroup in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            with open(cgroup, "rb") as fh:
                sizes.append(float(int(fh.read(64).strip())))
        except (OSError, ValueError):  # absent, or 'max' (no limit)
            continue
    sizes = [s for s in sizes if 0 < s < float("inf")]
    return min(sizes) if sizes else None


def free_disk(path: str | os.PathLike) -> tuple[float, Path] | None:
    """(free bytes, folder) of the file system that would hold ``path``: that of its nearest
    existing parent. None when it cannot be told (a pseudo file system reports no size)."""
    where = Path(path).absolute()
    while not where.exists() and where != where.parent:
        where = where.parent
    try:
        usage = shutil.disk_usage(where)
    except OSError:
        return None
    if usage.total == 0:  # /proc, /sys: no size to tell (writing there fails on its own)
        return None
    return float(usage.free), where


def _given(value: float | str | None, key: str, env: str, default: str) -> tuple[float, str]:
    """(bytes, where they come from) of an explicit limit, else ``$env``, else ``default``."""
    if value is not None:
        return parse_size(value), key
    if os.environ.get(env):
        try:
            return parse_size(os.environ[env]), env
        except InvalidInputError as exc:
            raise InvalidInputError(f"{env}: {exc}") from None
    return parse_size(default), "the default"


def memory_limit(value: float | str | None = None) -> SizeLimit:
    """The memory limit (``value``, else ``DKERNEL_MAX_MEMORY``, else 4 GiB), capped at this
    machine's memory (:func:`physical_memory`) with a warning: a limit above it refuses
    nothing, and the job grows until the system kills it."""
    if isinstance(value, SizeLimit):
        return value
    given, source = _given(value, "limits.max_memory", "DKERNEL_MAX_MEMORY", DEFAULT_MAX_MEMORY)
    machine = physical_memory()
    if machine is not None and given > machine:
        note = (
            f"{source} {format_size(given)}, capped at this machine's memory, "
            f"{format_size(machine)}"
        )
        if source != "the default":
            logger.warning(f"{note}: jobs are held to {format_size(machine)}.")
        return SizeLimit(machine, note)
    return SizeLimit(given, "limits.max_memory / DKERNEL_MAX_MEMORY")


def disk_limit(
    value: float | str | None = None, path: str | os.PathLike | None = None
) -> SizeLimit:
    """The disk limit (``value``, else ``DKERNEL_MAX_DISK``, else 50 GiB), capped at
    :data:`DISK_SHARE` of the free space of the file system that would hold ``path`` (the
    output) when given, with a warning when the limit was set explicitly."""
    resolved = isinstance(value, SizeLimit)
    if resolved and path is None:
        return value
    if resolved:  # a limit resolved for another output: capped again where this one goes
        given, source = float(value), value.note
    else:
        given, source = _given(value, "limits.max_disk", "DKERNEL_MAX_DISK", DEFAULT_MAX_DISK)
    free = free_disk(path) if path is not None else None
    if free is not None and given > DISK_SHARE * free[0]:
        cap = DISK_SHARE * free[0]
        note = (
            f"{source} {format_size(given)}, capped at {DISK_SHARE:.0%} of the "
            f"{format_size(free[0])} free on the output's file system, {free[1]}"
        )
        if source != "the default" and not resolved:
            logger.warning(f"{note}: a job may write at most {format_size(cap)}.")
        return SizeLimit(cap, note)
    if resolved:
        return value
    return SizeLimit(given, "limits.max_disk / DKERNEL_MAX_DISK")


def check_budget(
    *,
    what: str,
    memory_bytes: float = 0.0,
    disk_bytes: float = 0.0,
    max_memory: float | str | None = None,
    max_disk: float | str | None = None,
    alternative: str = "",
    output: str | os.PathLike | None = None,
) -> None:
    """Refuse work whose estimated memory or disk exceeds the limits.

    The memory limit is capped at this machine's memory (:func:`memory_limit`), the disk
    limit at the free space of ``output``'s file system (:func:`disk_limit`; the limits of a
    validated job spec come capped already, :func:`dkernel.jobs.spec.validate_spec`).

    Raises
    ------
    ResourceLimitError
        Naming the estimate, the limit (and what capped it) and the scalable alternative.
    """
    mem_limit = memory_limit(max_memory)
    disk = disk_limit(max_disk, output)
    hint = f" Scalable alternative: {alternative}" if alternative else ""
    if memory_bytes > mem_limit:
        raise ResourceLimitError(
            f"{what} needs about {format_size(memory_bytes)} of memory, above the limit of "
            f"{format_size(mem_limit)} ({mem_limit.note}).{hint}"
        )
    if disk_bytes > disk:
        raise ResourceLimitError(
            f"{what} needs about {format_size(disk_bytes)} of disk, above the limit of "
            f"{format_size(disk)} ({disk.note}).{hint}"
        )


def dense_kernel_cost(n_samples: int, itemsize: int = 8) -> tuple[float, float]:
    """(memory, disk) bytes of a dense n×n kernel with a dense eigen-solve.

    Memory counts the kernel, its centered copy and LAPACK workspace (≈ 3 n² doubles);
    disk counts one stored copy in ``itemsize`` bytes.
    """
    n2 = float(n_samples) ** 2
    return 3.0 * n2 * 8, n2 * itemsize
