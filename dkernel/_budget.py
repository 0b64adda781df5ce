"""Cost estimates and limits checked before any O(N^2) work starts.

A limit means what the machine can give: the memory limit is capped at the machine's memory
(or its container's), the disk limit at the free space of the output's file system.

Also the rows per block for a memory budget (:func:`rows_for_budget`) and the budgets every
blocked loop and chunking uses. No Dask here: the NumPy kernel modules import this module.
"""

from __future__ import annotations

import logging
import numbers
import os
import shutil
from pathlib import Path

from dkernel.errors import InvalidInputError, ResourceLimitError

logger = logging.getLogger(__name__)

DEFAULT_MAX_MEMORY = "4GiB"
DEFAULT_MAX_DISK = "50GiB"


#: Byte units of a size, lower case and without a final ``b``: decimal ``k`` to ``p``, binary
#: ``ki`` to ``pi`` (the units of Dask's ``parse_bytes``, read here without importing Dask).
_UNITS = {"": 1}
_UNITS.update({p: 1000 ** (i + 1) for i, p in enumerate("kmgtp")})
_UNITS.update({f"{p}i": 1024 ** (i + 1) for i, p in enumerate("kmgtp")})


def _bytes_of(text: str) -> float:
    """``'4GiB'`` → 4294967296.0: a number (1 when left out) and a unit, spaces ignored."""
    text = text.replace(" ", "")
    if not any(c.isdigit() for c in text):
        text = "1" + text
    split = len(text)
    while split and text[split - 1].isalpha():
        split -= 1
    unit = text[split:].lower()
    multiplier = _UNITS[unit[:-1] if unit.endswith("b") else unit]
    return float(int(float(text[:split]) * multiplier))


def parse_size(value: str | int | float) -> float:
    """Bytes from ``4GiB``, ``500MB``, ``1e9`` or a number (the units of
    :func:`dask.utils.parse_bytes`), with dkernel's error for a size that is not positive or
    cannot be read.

    Examples
    --------
    >>> parse_size("2GiB")
    2147483648.0
    >>> parse_size("1.5 kB")
    1500.0
    """
    if isinstance(value, bool):
        raise InvalidInputError(f"cannot read {value!r} as a size; use a number of bytes.")
    try:
        number = float(value) if isinstance(value, int | float) else _bytes_of(value)
    except (ValueError, TypeError, KeyError, OverflowError):
        raise InvalidInputError(
            f"cannot read {value!r} as a size; use a number of bytes or e.g. '4GiB', '500MB'."
        ) from None
    if not number > 0:
        raise InvalidInputError(f"a size must be > 0; got {value!r}.")
    return number


def format_size(n_bytes: float) -> str:
    """Human-readable size in binary units, as :func:`dask.utils.format_bytes` writes it.

    Examples
    --------
    >>> format_size(1.5 * 2**30), format_size(1000), format_size(12)
    ('1.50 GiB', '0.98 kiB', '12 B')
    """
    n = int(n_bytes)
    for power, prefix in ((5, "Pi"), (4, "Ti"), (3, "Gi"), (2, "Mi"), (1, "ki")):
        if n >= 0.9 * 1024**power:
            return f"{n / 1024**power:.2f} {prefix}B"
    return f"{n} B"


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


#: Bytes per pixel an image job holds in memory whatever its method and however its bands
#: are streamed: the valid-pixel mask (1) and the int32 label map written back (4).
IMAGE_PIXEL_BYTES = 5


def check_image_size(
    bands: int,
    rows: int,
    cols: int,
    *,
    what: str = "the image",
    max_memory: float | str | None = None,
    alternative: str = "crop the image or read it at a coarser resolution.",
) -> None:
    """Refuse an image whose declared size needs more memory than the limit, from its
    shape alone (nothing read, no task graph built): each pixel costs at least
    :data:`IMAGE_PIXEL_BYTES` (a STAC item declaring ``proj:shape`` [10⁵, 10⁵] over a small
    asset would otherwise start computing a 10¹⁰-pixel cube).

    Raises
    ------
    ResourceLimitError
        Naming the shape, the estimate, the limit and ``alternative``.
    """
    pixels = float(rows) * float(cols)
    check_budget(
        what=f"{what} of {int(bands):,} bands × {int(rows):,} × {int(cols):,} pixels",
        memory_bytes=pixels * IMAGE_PIXEL_BYTES,
        max_memory=max_memory,
        alternative=alternative,
    )


def dense_kernel_cost(n_samples: int, itemsize: int = 8) -> tuple[float, float]:
    """(memory, disk) bytes of a dense n×n kernel with a dense eigen-solve.

    Memory counts the kernel, its centered copy and LAPACK workspace (≈ 3 n² doubles);
    disk counts one stored copy in ``itemsize`` bytes.
    """
    n2 = float(n_samples) ** 2
    return 3.0 * n2 * 8, n2 * itemsize


# --- Rows per block for a memory budget -------------------------------------------------
# Every loop or Dask chunking over rows whose work array grows with a second dimension (the
# components of a mixture, the points of a density sample, the columns of a kernel) sizes its
# blocks with rows_for_budget and one of these budgets. Block sizes decide the shapes of the
# BLAS calls and so the last bits of float results: changing a budget or a clamp changes
# results.

#: A work array swept several times per block (EM's log-joints, the candidate distances of
#: the approximate k-NN search, a strip of segment labels): its passes run from cache (the
#: EM loop is 20 % faster than with 64 MiB blocks).
SWEEP_BLOCK_BYTES = 16 * 2**20

#: A kernel block swept by several element-wise passes and a GEMM or two, small enough to
#: stay in a core's L2 cache (mean shift's steps against a density sample: 1.1 µs per point
#: and step against 500 density points in blocks of 256 rows, 2.7 µs in blocks of 16 384).
CACHE_BLOCK_BYTES = 512 * 2**10

#: A square kernel block reduced as soon as it is computed (MSSC's Cauchy–Schwarz pair
#: sums): its GEMM's output, the element-wise passes and the reductions over it stay in the
#: last-level cache with one block per core (the demo's pair sums on 2 cores: 0.12 s in 4 MiB
#: blocks, 0.15 s in 16 MiB, 0.20 s in 32 MiB, whose fresh pages the kernel zeroes each time).
REDUCED_BLOCK_BYTES = 4 * 2**20

#: A temporary of a NumPy kernel, one per thread (distances to a density sample or to a
#: reference set, a dense out-of-sample kernel block): a few per core fit any worker.
SCRATCH_BLOCK_BYTES = 32 * 2**20

#: A block of a kernel or feature matrix computed at once and handed on (a task of a blocked
#: kernel matrix, posteriors of full-covariance mixtures, the features of a ranking): large
#: enough that the per-block overhead is small next to its GEMM.
KERNEL_BLOCK_BYTES = 64 * 2**20

#: Most row chunks a job cuts its data into where its tasks bound their own memory (the
#: landmark graphs search landmarks in blocks): beyond it the chunks grow instead. Each pass has
#: one to four tasks per chunk and a scheduler holds a few KiB per task; at 10¹⁰ rows the
#: kernel-block rule alone made 1.2 million chunks (``docs/scaling.md``).
MAX_ROW_CHUNKS = 20_000

#: A Dask chunk of a lazy output: Dask's own default chunk size (``array.chunk-size``).
CHUNK_BYTES = 128 * 2**20

#: A job's map files (label COG, class table, quick-look, segments) are made from the label
#: map and the image read into the client's memory once when together they are at most this
#: (the demo scene's are 4 MiB); larger ones are read strip by strip by each file, so the
#: client's memory does not grow with the scene (``dkernel.jobs.outputs``).
HELD_MAP_BYTES = 8 * 2**20

#: Pixels of a row strip of an image (1 MiB per float32 band): the unit of work of the pixel
#: streams, so a worker's memory does not grow with the scene's width.
STRIP_PIXELS = 2**18
#: Largest lazy input (bytes of its features) a job holds in the workers' memory for the
#: passes of its method instead of reading the file again in each (``dkernel.jobs.runner``).
PERSIST_BYTES = 256 * 2**20


def rows_for_budget(
    budget: int,
    n_columns: int | None,
    itemsize: int,
    *,
    low: int = 1,
    high: int | None = None,
) -> int:
    """Rows of a block of ``n_columns`` values of ``itemsize`` bytes per row that fit
    ``budget`` bytes, clipped to ``[low, high]``.

    Parameters
    ----------
    budget : int
        Bytes a block may take (one of this module's budgets); in values with
        ``itemsize=1``.
    n_columns : int or None
        Values per row (at least 1 is counted). None: a square block, as many columns as
        rows (a block of a kernel matrix), whose side is returned.
    itemsize : int
        Bytes per value.
    low, high : int, optional
        Clamps, applied after the division (``high`` first, so ``low`` wins).

    Returns
    -------
    int

    Examples
    --------
    >>> rows_for_budget(SWEEP_BLOCK_BYTES, 1000, 4)
    4194
    >>> rows_for_budget(KERNEL_BLOCK_BYTES, None, 4)  # 4096 x 4096 float32
    4096
    >>> rows_for_budget(SCRATCH_BLOCK_BYTES, 10**7, 8, low=16)
    16
    """
    if n_columns is None:
        rows = int((budget / itemsize) ** 0.5)
    else:
        rows = int(budget // (itemsize * max(1, int(n_columns))))
    if high is not None:
        rows = min(rows, int(high))
    return max(int(low), rows)


def rows_of_max_samples(max_samples: int | float, n_rows: int) -> int:
    """Rows a fit draws out of ``n_rows`` (scikit-learn's meaning of ``max_samples``): at most
    a count (an int; all rows when there are fewer), or ``round(fraction × n_rows)`` (a float)."""
    if isinstance(max_samples, numbers.Integral) and not isinstance(max_samples, bool):
        return min(int(max_samples), int(n_rows))
    return int(round(float(max_samples) * n_rows))
