"""Data that ships with dkernel (the demo scene, a 5 000-image MNIST subset) and the registry of
the public datasets the example jobs and notebooks read (``dkernel data fetch NAME``).

``load_mnist_5k``, ``fetch``, ``get_dataset`` and ``DATASETS`` are imported on first use
(PEP 562), so ``dkernel data list`` stays light.
"""

from __future__ import annotations

from typing import Any

_EXPORTS = {
    "load_mnist_5k": "dkernel.data.mnist",
    "DATASETS": "dkernel.data.registry",
    "fetch": "dkernel.data.registry",
    "get_dataset": "dkernel.data.registry",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'dkernel.data' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(_EXPORTS[name]), name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
