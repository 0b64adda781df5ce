"""Spectral embeddings: KPCA, KECA (and, as they land, Nyström and normalized embeddings)."""

from dkernel._lazy import attach

__getattr__, __dir__, __all__ = attach(
    __name__,
    {
        "dense": ["center_kernel", "keca_embedding", "kpca_embedding"],
        "estimators": ["KECA", "KernelPCAEmbedding"],
    },
)
