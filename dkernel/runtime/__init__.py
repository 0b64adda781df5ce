"""Dask runtime: creating or connecting to clients (the only code that does so)."""

from dkernel.runtime.connect import compute_with_progress, connect, default_workers, load_security

__all__ = ["compute_with_progress", "connect", "default_workers", "load_security"]
