"""Dask runtime: creating or connecting to clients (the only code that does so), and progress."""

from dkernel.runtime.connect import SharedCluster, connect, default_workers, load_security
from dkernel.runtime.progress import compute_parts, compute_with_progress, wait_with_progress

__all__ = [
    "SharedCluster",
    "compute_parts",
    "compute_with_progress",
    "connect",
    "default_workers",
    "load_security",
    "wait_with_progress",
]
