"""dkernel: kernel methods for unsupervised learning at scale on Dask, stored in Zarr.

The estimators and helpers below are imported on first use (PEP 562), so ``dkernel validate``
and the other commands that need no numerics start without importing Dask, scikit-learn and
SciPy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dkernel._feature_maps import register_feature_map as _register_feature_map
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


def _decomposition():
    import dkernel.decomposition as m

    return m


def _selection():
    import dkernel.decomposition.selection as m

    return m


def _pck():
    import dkernel.gmm.pck as m

    return m


def _pck_feature_map(**params: Any) -> Any:
    """The ranking estimators' ``kernel='pck'``: an unfitted ProbabilisticClusterKernel."""
    return _pck().ProbabilisticClusterKernel(**params)


# ranking resolves kernel='pck' by name, without importing the gmm family
_register_feature_map("pck", _pck_feature_map)


def _meanshift():
    import dkernel.meanshift.estimators as m

    return m


def _metrics():
    import dkernel.metrics as m

    return m


def _ranking():
    import dkernel.ranking as m

    return m


def _runtime():
    import dkernel.runtime as m

    return m


def _spectral():
    import dkernel.spectral as m

    return m


def _clustering():
    import dkernel.spectral.clustering as m

    return m


def _nystrom():
    import dkernel.spectral.nystrom as m

    return m


def _pck_spectral():
    import dkernel.spectral.pck as m

    return m


def _kmeans():
    import dkernel.kmeans as m

    return m


def _cca():
    import dkernel.cca as m

    return m


def _change():
    import dkernel.change as m

    return m


def _deep():
    import dkernel.deep as m

    return m


def _images():
    import dkernel.images as m

    return m


def _reservoir():
    import dkernel.reservoir as m

    return m


def _deep():
    import dkernel.deep as m

    return m


def _storage():
    import dkernel.storage as m

    return m


#: public name -> (the module's loader, its attribute); fixed statements, no dynamic imports
_LAZY = {
    "KernelDecompositionClustering": (_decomposition, "KernelDecompositionClustering"),
    "select_kdc_model": (_selection, "select_model"),
    "ProbabilisticClusterKernel": (_pck, "ProbabilisticClusterKernel"),
    "MSSC": (_meanshift, "MSSC"),
    "MeanShift": (_meanshift, "MeanShift"),
    "clustering_accuracy": (_metrics, "clustering_accuracy"),
    "clustering_scores": (_metrics, "clustering_scores"),
    "JointRankingClustering": (_ranking, "JointRankingClustering"),
    "KernelPersonalizedPageRank": (_ranking, "KernelPersonalizedPageRank"),
    "seed_scores": (_storage, "seed_scores"),
    "read_model_order": (_storage, "read_model_order"),
    "top_k": (_storage, "top_k"),
    "connect": (_runtime, "connect"),
    "KECA": (_spectral, "KECA"),
    "KernelPCAEmbedding": (_spectral, "KernelPCAEmbedding"),
    "SpectralClustering": (_clustering, "SpectralClustering"),
    "NystromEmbedding": (_nystrom, "NystromEmbedding"),
    "PCKSpectralClustering": (_pck_spectral, "PCKSpectralClustering"),
    "KernelKMeans": (_kmeans, "KernelKMeans"),
    "KernelCCA": (_cca, "KernelCCA"),
    "EchoStateNetwork": (_reservoir, "EchoStateNetwork"),
    "ChangeDetection": (_change, "ChangeDetection"),
    "detect_change": (_change, "detect_change"),
    "cluster_image": (_images, "cluster_image"),
    "DeepDivergenceClustering": (_deep, "DeepDivergenceClustering"),
    "DeepKernelizedAutoencoder": (_deep, "DeepKernelizedAutoencoder"),
    "ResultsStore": (_storage, "ResultsStore"),
    "open_results": (_storage, "open_results"),
    "recorded_path": (_storage, "recorded_path"),
}

if TYPE_CHECKING:
    from dkernel.cca import KernelCCA
    from dkernel.change import ChangeDetection, detect_change
    from dkernel.decomposition import KernelDecompositionClustering
    from dkernel.decomposition.selection import select_model as select_kdc_model
    from dkernel.deep import DeepDivergenceClustering, DeepKernelizedAutoencoder
    from dkernel.gmm.pck import ProbabilisticClusterKernel
    from dkernel.images import cluster_image
    from dkernel.kmeans import KernelKMeans
    from dkernel.meanshift.estimators import MSSC, MeanShift
    from dkernel.metrics import clustering_accuracy, clustering_scores
    from dkernel.ranking import JointRankingClustering, KernelPersonalizedPageRank
    from dkernel.reservoir import EchoStateNetwork
    from dkernel.runtime import connect
    from dkernel.spectral import KECA, KernelPCAEmbedding
    from dkernel.spectral.clustering import SpectralClustering
    from dkernel.spectral.nystrom import NystromEmbedding
    from dkernel.spectral.pck import PCKSpectralClustering
    from dkernel.storage import (
        ResultsStore,
        open_results,
        read_model_order,
        recorded_path,
        seed_scores,
        top_k,
    )


def __getattr__(name: str) -> Any:
    try:
        load, attribute = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module 'dkernel' has no attribute {name!r}") from None
    value = getattr(load(), attribute)
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
    "PCKSpectralClustering",
    "KernelPCAEmbedding",
    "NystromEmbedding",
    "SpectralClustering",
    "KernelKMeans",
    "KernelCCA",
    "EchoStateNetwork",
    "DeepDivergenceClustering",
    "DeepKernelizedAutoencoder",
    "ChangeDetection",
    "detect_change",
    "MSSC",
    "MeanShift",
    "ResultsStore",
    "cluster_image",
    "connect",
    "open_results",
    "read_model_order",
    "recorded_path",
    "clustering_accuracy",
    "clustering_scores",
]
