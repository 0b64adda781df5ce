"""Gaussian mixture ensembles with missing values and the probabilistic cluster kernel."""

from dkernel.gmm.em import DiagMixtures, diag_em, diag_posteriors, full_em, full_posteriors
from dkernel.gmm.graph import FullMixtures
from dkernel.gmm.pck import ProbabilisticClusterKernel, feature_map_degrees

__all__ = [
    "DiagMixtures",
    "FullMixtures",
    "ProbabilisticClusterKernel",
    "diag_em",
    "diag_posteriors",
    "feature_map_degrees",
    "full_em",
    "full_posteriors",
]
