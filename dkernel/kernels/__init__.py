"""Numeric kernel functions on in-memory blocks (NumPy only; no Dask, no I/O)."""

from dkernel.kernels.rbf import rbf_block
from dkernel.kernels.widths import (
    DEFAULT_SIGMA_FRACTION,
    median_distance,
    neighbour_bandwidth,
    sigma_rule_of_thumb,
    silverman_normal_reference,
    silverman_thesis,
)

__all__ = [
    "DEFAULT_SIGMA_FRACTION",
    "median_distance",
    "neighbour_bandwidth",
    "rbf_block",
    "sigma_rule_of_thumb",
    "silverman_normal_reference",
    "silverman_thesis",
]
