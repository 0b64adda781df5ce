"""Mean shift and mean-shift spectral clustering (MSSC) of partitions (seed 001 ch. 2.4, 5)."""

from dkernel._lazy import attach

__getattr__, __dir__, __all__ = attach(
    __name__,
    {
        "estimators": ["MSSC", "MeanShift", "second_stage"],
    },
)
