"""Gaussian mixture ensembles with missing values and the probabilistic cluster kernel."""

from dkernel._lazy import attach

__getattr__, __dir__, __all__ = attach(
    __name__,
    {
        "em": ["DiagMixtures", "diag_em", "diag_posteriors"],
        "full_patterns": ["full_em", "full_posteriors"],
        "graph": ["FullMixtures"],
        "pck": ["ProbabilisticClusterKernel", "feature_map_degrees"],
    },
)
