"""The deep kernel models of [Lokse2020]: the deep kernelized autoencoder (Paper III,
[Kampffmeyer2018]) and deep divergence-based clustering (Paper IV, [Kampffmeyer2019]), on PyTorch
(the optional ``deep`` extra, imported on first use)."""

from dkernel._lazy import attach

__getattr__, __dir__, __all__ = attach(
    __name__, {"ddc": ["DeepDivergenceClustering"], "dkae": ["DeepKernelizedAutoencoder"]}
)
