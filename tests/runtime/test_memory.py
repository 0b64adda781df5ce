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


def _kept_mib(mode: str) -> float:
    # glibc's own defaults: distributed's nanny may have put MALLOC_TRIM_THRESHOLD_ into this
    # process's environment when an earlier test started a cluster
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    out = subprocess.run(
        [sys.executable, "-c", _SCRIPT, mode], capture_output=True, text=True, check=True, env=env
    )
    return float(out.stdout.strip())


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt (Linux)")
def test_freed_memory_goes_back_to_the_system():
    assert _kept_mib("default") > 24  # what the job's client used to keep
    assert _kept_mib("limit") < 4
