"""dkernel: kernel methods for unsupervised learning at scale on Dask, stored in Zarr."""

from dkernel.decomposition import KernelDecompositionClustering
from dkernel.decomposition.selection import select_model as select_kdc_model
from dkernel.errors import (
    DKernelError,
    DKernelWarning,
    InvalidInputError,
    NumericalWarning,
    ResourceLimitError,
    SpecError,
    StoreError,
)
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

__version__ = "0.1.0"

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
