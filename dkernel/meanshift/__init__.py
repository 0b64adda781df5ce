"""Mean shift and mean-shift spectral clustering (MSSC) of partitions (seed 001 ch. 2.4, 5)."""

from dkernel.meanshift.estimators import MSSC, MeanShift, second_stage

__all__ = ["MSSC", "MeanShift", "second_stage"]
