"""dkernel: kernel methods for unsupervised learning at scale on Dask, stored in Zarr.

The estimators and helpers below are imported on first use (PEP 562), so ``dkernel validate``
and the other commands that need no numerics start without importing Dask, scikit-learn and
SciPy.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from dkernel.errors import (
    DKernelError,
    DKernelWarning,
    InvalidInputError,
    NumericalWarning,
    ResourceLimitError,
    SpecError,
    StoreError,
)

__version__ = "0.1.0"

#: public name -> (module, attribute)
_LAZY = {
    "KernelDecompositionClustering": ("dkernel.decomposition", "KernelDecompositionClustering"),
    "select_kdc_model": ("dkernel.decomposition.selection", "select_model"),
    "ProbabilisticClusterKernel": ("dkernel.gmm.pck", "ProbabilisticClusterKernel"),
    "MSSC": ("dkernel.meanshift.estimators", "MSSC"),
    "MeanShift": ("dkernel.meanshift.estimators", "MeanShift"),
    "clustering_accuracy": ("dkernel.metrics", "clustering_accuracy"),
    "clustering_scores": ("dkernel.metrics", "clustering_scores"),
    "JointRankingClustering": ("dkernel.ranking", "JointRankingClustering"),
    "KernelPersonalizedPageRank": ("dkernel.ranking", "KernelPersonalizedPageRank"),
    "seed_scores": ("dkernel.ranking", "seed_scores"),
    "top_k": ("dkernel.ranking", "top_k"),
    "connect": ("dkernel.runtime", "connect"),
    "KECA": ("dkernel.spectral", "KECA"),
    "KernelPCAEmbedding": ("dkernel.spectral", "KernelPCAEmbedding"),
    "SpectralClustering": ("dkernel.spectral.clustering", "SpectralClustering"),
    "NystromEmbedding": ("dkernel.spectral.nystrom", "NystromEmbedding"),
    "ResultsStore": ("dkernel.storage", "ResultsStore"),
    "open_results": ("dkernel.storage", "open_results"),
    "recorded_path": ("dkernel.storage", "recorded_path"),
}

if TYPE_CHECKING:
    from dkernel.decomposition import KernelDecompositionClustering
    from dkernel.decomposition.selection import select_model as select_kdc_model
    from dkernel.gmm.pck import ProbabilisticClusterKernel
    from dkernel.meanshift.estimators import MSSC, MeanShift
    from dkernel.metrics import clustering_accuracy, clustering_scores
    from dkernel.ranking import (
        JointRankingClustering,
        KernelPersonalizedPageRank,
        seed_scores,
        top_k,
    )
    from dkernel.runtime import connect
    from dkernel.spectral import KECA, KernelPCAEmbedding
    from dkernel.spectral.clustering import SpectralClustering
    from dkernel.spectral.nystrom import NystromEmbedding
    from dkernel.storage import ResultsStore, open_results, recorded_path


def __getattr__(name: str) -> Any:
    try:
        module, attribute = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module 'dkernel' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module), attribute)
    globals()[name] = value  # later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "DKernelError",
    "DKernelWarning",
    "InvalidInputError",
    "NumericalWarning",
    "ResourceLimitError",
    "SpecError",
    "StoreError",
    "JointRankingClustering",
    "KernelPersonalizedPageRank",
    "seed_scores",
    "top_k",
    "KECA",
    "KernelDecompositionClustering",
    "select_kdc_model",
    "ProbabilisticClusterKernel",
    "KernelPCAEmbedding",
    "NystromEmbedding",
    "SpectralClustering",
    "MSSC",
    "MeanShift",
    "ResultsStore",
    "connect",
    "open_results",
    "recorded_path",
    "clustering_accuracy",
    "clustering_scores",
]
