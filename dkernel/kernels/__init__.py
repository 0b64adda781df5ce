"""Numeric kernel functions on in-memory blocks (NumPy only; no Dask, no I/O)."""

from dkernel.kernels.rbf import (
    DEFAULT_SIGMA_FRACTION,
    median_distance,
    rbf_block,
    sigma_rule_of_thumb,
)

__all__ = ["DEFAULT_SIGMA_FRACTION", "median_distance", "rbf_block", "sigma_rule_of_thumb"]
