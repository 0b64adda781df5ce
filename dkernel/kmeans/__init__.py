"""Kernel k-means ([MLSlides2012]): Lloyd's iterations in a kernel's feature space, on the
kernel matrix (exact) or on an explicit Nyström / landmark feature map (large N), k-means++ or
kernel PCA starts, and the number of clusters chosen by AIC or BIC over a sequence of K,
or by the timescale gap of the k-NN graph (``n_clusters='auto'``)."""

from dkernel._lazy import attach

__getattr__, __dir__, __all__ = attach(
    __name__,
    {
        "estimator": ["KernelKMeans", "NystromFeatureMap"],
        "lloyd": ["information_criteria", "kernel_kmeans", "kmeans_plusplus", "lloyd"],
    },
)
