"""The client's freed heap memory goes back to the system (dkernel.runtime.memory)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

# Free a 20 MiB block first: glibc then raises its mmap threshold to 20 MiB and its trim
# threshold to 40 MiB, so 32 MiB of 1 MiB blocks freed afterwards stay resident by default.
_SCRIPT = """
import sys
from dkernel.runtime.memory import limit_freed_memory

def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096

if sys.argv[1] == "limit":
    assert limit_freed_memory()
big = bytearray(20 * 2**20)
del big
before = rss()
blocks = [bytearray(2**20) for _ in range(32)]
del blocks
print((rss() - before) / 2**20)
"""


def _printed(script: str, mode: str) -> float:
    """What ``script`` prints, run in a fresh interpreter with glibc's own defaults
    (distributed's nanny may have put MALLOC_TRIM_THRESHOLD_ into this process's environment
    when an earlier test started a cluster)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    out = subprocess.run(
        [sys.executable, "-c", script, mode], capture_output=True, text=True, check=True, env=env
    )
    return float(out.stdout.strip())


def _kept_mib(mode: str) -> float:
    return _printed(_SCRIPT, mode)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt (Linux)")
def test_freed_memory_goes_back_to_the_system():
    assert _kept_mib("default") > 24  # what the job's client used to keep
    assert _kept_mib("limit") < 4


# A NumPy kernel's temporaries: a 4 MiB block allocated and freed per block of rows.
_FAULTS = """
import resource, sys
import numpy as np
from dkernel.runtime.memory import limit_freed_memory, reuse_freed_memory

import ctypes
libc = ctypes.CDLL("libc.so.6")
# no transparent huge pages (NumPy asks for them for blocks of 4 MiB and more): a block then
# faults in 2 MiB at a time when the kernel has huge pages free, and in 4 KiB pages otherwise
libc.prctl(41, 1, 0, 0, 0)  # PR_SET_THP_DISABLE
assert limit_freed_memory()
# the mmap threshold glibc starts with: the imports above may have raised it already (a freed
# mapped block raises it while the thresholds are dynamic), which would hide what the low trim
# threshold costs when they have not
libc.mallopt(-3, 128 * 1024)
if sys.argv[1] == "reuse":
    assert reuse_freed_memory()
np.ones(2**20, dtype=np.float32)  # the first block may fault in either case
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(50):
    np.ones(2**20, dtype=np.float32)
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def _page_faults(mode: str) -> int:
    return int(_printed(_FAULTS, mode))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt (Linux)")
def test_after_the_reading_pass_freed_blocks_are_reused_without_page_faults():
    # with the low trim threshold alone every 4 MiB block is mapped afresh: 1024 faults each
    assert _page_faults("limit") > 50 * 512
    assert _page_faults("reuse") < 50 * 16
