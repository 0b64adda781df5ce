"""Kernel canonical correlation analysis ([MLSlides2012]): the regularised dual problem on
two views with the same rows, exact on the training kernels or on Nyström features at large N."""

from dkernel._lazy import attach

__getattr__, __dir__, __all__ = attach(
    __name__,
    {
        "dual": ["kernel_pca_features", "moments", "regularized_cca"],
        "estimator": ["KernelCCA"],
    },
)
