"""How much freed memory a job's own (client) process keeps.

glibc's allocator returns the top of a heap to the system only when more than
``M_TRIM_THRESHOLD`` bytes (128 KiB, then adjusted upwards as large blocks are freed) lie free
there, and each thread has its own heap. A raster job's client decodes every tile of the scene
on the threaded scheduler for its statistics pass; without a low threshold the freed strips stay
resident, so the client's peak grows with the scene (≈ 50 MiB more at 9 · 10⁶ pixels than at
10⁶, measured with issue 20's ``bench_full_tile.py``) although nothing it holds does.

distributed starts its worker processes with ``MALLOC_TRIM_THRESHOLD_=65536`` for the same
reason (its ``distributed.nanny.pre-spawn-environ``); the variable is read once when a process
starts, so in an already running client the same threshold is set with ``mallopt``.

Setting any threshold turns glibc's dynamic thresholds off, and the low one has a price: every
block above 128 KiB is then mapped afresh and unmapped when freed, so a NumPy kernel that
allocates a few MiB per block of rows pays a page fault per 4 KiB on every block (a GEMM into
a new 4 MiB array took 0.95 µs per row instead of 0.2). After the reading pass,
:func:`reuse_freed_memory` sets the thresholds glibc's dynamic ones rise to by themselves, so
the job's numerics reuse their freed blocks. The workers of the cluster a job starts get the
same thresholds in their environment from the start
(``dkernel.runtime.connect.EMBEDDED_SCHEDULER_CONFIG``).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import sys
from typing import Any

logger = logging.getLogger(__name__)

#: Bytes of free memory at the top of a heap above which glibc gives it back (distributed's
#: worker setting).
TRIM_THRESHOLD = 65536

#: The ceilings of glibc's dynamic thresholds on 64-bit systems (malloc.c's
#: ``DEFAULT_MMAP_THRESHOLD_MAX``, and twice it for trimming): blocks up to 32 MiB come from
#: the heap, and up to 64 MiB of freed memory stays at its top for the next block.
REUSE_MMAP_THRESHOLD = 32 * 2**20
REUSE_TRIM_THRESHOLD = 64 * 2**20

_M_TRIM_THRESHOLD = -1  # mallopt's parameter numbers (malloc.h)
_M_MMAP_THRESHOLD = -3


def limit_freed_memory(threshold: int = TRIM_THRESHOLD) -> bool:
    """Make glibc return freed heap memory above ``threshold`` bytes to the system.

    Returns whether the threshold was set: ``False`` off glibc (macOS, Windows, musl), where
    the allocators differ and nothing is changed.
    """
    return _mallopt({_M_TRIM_THRESHOLD: threshold}, f"malloc trim threshold {threshold} B")


def reuse_freed_memory() -> bool:
    """Let glibc keep freed blocks for reuse again, up to the ceilings of its dynamic
    thresholds (``REUSE_MMAP_THRESHOLD``, ``REUSE_TRIM_THRESHOLD``).

    Returns whether the thresholds were set (``False`` off glibc, as
    :func:`limit_freed_memory`).
    """
    return _mallopt(
        {_M_MMAP_THRESHOLD: REUSE_MMAP_THRESHOLD, _M_TRIM_THRESHOLD: REUSE_TRIM_THRESHOLD},
        "malloc thresholds for reuse",
    )


#: Seconds between two :func:`trim_freed_memory` calls on a worker (``TrimFreedMemory``).
TRIM_INTERVAL = 5.0


def trim_freed_memory() -> bool:
    """Give the free pages of every heap back to the system (glibc's ``malloc_trim(0)``).

    With the reuse thresholds a worker's freed blocks stay mapped, and where they lie
    between blocks still in use (a task's record, a small buffer of the Zarr writer) no
    threshold ever returns them: a worker writing a 10⁸-row embedding grew by 4.7 MiB a
    second, to 1.3 GiB, of which 0.8 GiB were free pages that one ``malloc_trim(0)`` gave
    back. Trimming every few seconds keeps the worker at what it holds; a reused block pays
    its page faults once per trim. Returns whether it ran (``False`` off glibc).
    """
    malloc_trim = _glibc_function("malloc_trim", (ctypes.c_size_t,))
    if malloc_trim is None:
        return False
    malloc_trim(0)
    return True


def _glibc_function(name: str, argtypes: tuple) -> Any:
    """glibc's function ``name`` (returning an int), or None off Linux or without it."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        function = getattr(ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6"), name)
    except (OSError, AttributeError):
        return None
    function.argtypes = argtypes
    function.restype = ctypes.c_int
    return function


def _mallopt(settings: dict[int, int], what: str) -> bool:
    mallopt = _glibc_function("mallopt", (ctypes.c_int, ctypes.c_int))
    if mallopt is None:
        return False
    ok = all([bool(mallopt(param, int(value))) for param, value in settings.items()])
    logger.debug(f"{what}: {'set' if ok else 'not set'}")
    return ok
