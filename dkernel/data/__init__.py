"""Data that ships with dkernel (the demo scene, a 5 000-image MNIST subset) and the registry of
the public datasets the example jobs and notebooks read (``dkernel data fetch NAME``).

The exports are imported on first use (:func:`dkernel._lazy.attach`), so ``dkernel data list``
stays light.
"""

from __future__ import annotations

from dkernel._lazy import attach

__getattr__, __dir__, __all__ = attach(
    __name__,
    {"mnist": ["load_mnist_5k"], "registry": ["DATASETS", "fetch", "get_dataset"]},
)
