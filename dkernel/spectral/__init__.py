"""Spectral embeddings: KPCA, KECA (and, as they land, Nyström and normalized embeddings)."""

from dkernel.spectral.dense import center_kernel, keca_embedding, kpca_embedding
from dkernel.spectral.estimators import KECA, KernelPCAEmbedding

__all__ = ["KECA", "KernelPCAEmbedding", "center_kernel", "keca_embedding", "kpca_embedding"]
