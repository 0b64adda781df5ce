"""Cost estimates and limits checked before any O(N^2) work starts."""

from __future__ import annotations

import os

from dkernel.errors import InvalidInputError, ResourceLimitError

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


def check_budget(
    *,
    what: str,
    memory_bytes: float = 0.0,
    disk_bytes: float = 0.0,
    max_memory: float | str | None = None,
    max_disk: float | str | None = None,
    alternative: str = "",
) -> None:
    """Refuse work whose estimated memory or disk exceeds the limits.

    Raises
    ------
    ResourceLimitError
        Naming the estimate, the limit and the scalable alternative.
    """
    mem_limit = default_max_memory() if max_memory is None else parse_size(max_memory)
    disk_limit = default_max_disk() if max_disk is None else parse_size(max_disk)
    hint = f" Scalable alternative: {alternative}" if alternative else ""
    if memory_bytes > mem_limit:
        raise ResourceLimitError(
            f"{what} needs about {format_size(memory_bytes)} of memory, above the limit of "
            f"{format_size(mem_limit)} (limits.max_memory / DKERNEL_MAX_MEMORY).{hint}"
        )
    if disk_bytes > disk_limit:
        raise ResourceLimitError(
            f"{what} needs about {format_size(disk_bytes)} of disk, above the limit of "
            f"{format_size(disk_limit)} (limits.max_disk / DKERNEL_MAX_DISK).{hint}"
        )


def dense_kernel_cost(n_samples: int, itemsize: int = 8) -> tuple[float, float]:
    """(memory, disk) bytes of a dense n×n kernel with a dense eigen-solve.

    Memory counts the kernel, its centered copy and LAPACK workspace (≈ 3 n² doubles);
    disk counts one stored copy in ``itemsize`` bytes.
    """
    n2 = float(n_samples) ** 2
    return 3.0 * n2 * 8, n2 * itemsize
