"""Change detection between two dates ([Nielsen2007]): MAD, IR-MAD and kernel MAD variates, the
χ² change intensity and an automatic threshold, on NumPy pixels or co-registered rasters."""

from dkernel._lazy import attach

__getattr__, __dir__, __all__ = attach(
    __name__,
    {
        "mad": ["MADTransform", "fit_irmad", "fit_mad"],
        "kernel": ["KernelMADTransform", "fit_kernel_mad"],
        "threshold": ["change_threshold", "mixture_threshold", "otsu_threshold"],
        "detect": ["check_same_grid"],
        "estimator": ["ChangeDetection", "detect_change"],
    },
)
