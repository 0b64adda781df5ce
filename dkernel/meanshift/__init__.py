"""Mean shift and mean-shift spectral clustering (MSSC) of partitions (Agersborg 2012, §2.4 and
ch. 5 [Agersborg2012])."""

from dkernel._lazy import attach

__getattr__, __dir__, __all__ = attach(
    __name__,
    {
        "estimators": ["MSSC", "MeanShift", "second_stage", "wide_limit_axes", "wide_limit_stage"],
    },
)
