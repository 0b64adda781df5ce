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
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import sys

logger = logging.getLogger(__name__)

#: Bytes of free memory at the top of a heap above which glibc gives it back (distributed's
#: worker setting).
TRIM_THRESHOLD = 65536

_M_TRIM_THRESHOLD = -1  # mallopt's parameter number (malloc.h)


def limit_freed_memory(threshold: int = TRIM_THRESHOLD) -> bool:
    """Make glibc return freed heap memory above ``threshold`` bytes to the system.

    Returns whether the threshold was set: ``False`` off glibc (macOS, Windows, musl), where
    the allocators differ and nothing is changed.
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    ok = bool(mallopt(_M_TRIM_THRESHOLD, int(threshold)))
    logger.debug(f"malloc trim threshold {threshold} B: {'set' if ok else 'not set'}")
    return ok
