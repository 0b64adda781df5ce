"""Clustering by kernel decomposition: the aggregate Markov model of Szymkowiak-Have, Girolami
& Larsen (2006) [SzymkowiakHave2006]; equation numbers are theirs.

Row-normalised kernels (the self-tuning local-scaling kernel of the default, the Gaussian
density kernel Eq. 15, cosine Eq. 16; k-NN sparsified), their
stochastic NMF / PLSA factorisation ``G = W H``, out-of-sample posteriors (Eq. 8-10) and
log-likelihood (Eq. 11-14), the :class:`KernelDecompositionClustering` estimator and
:func:`select_model` over width, neighbours and number of clusters.
"""

from dkernel._lazy import attach

__getattr__, __dir__, __all__ = attach(
    __name__,
    {
        "estimator": ["KernelDecompositionClustering"],
        "kernels": ["density_log_kernel", "knn_log_kernel", "knn_to_csr", "row_normalize_log"],
        "nmf": [
            "AggregateMarkovFit",
            "fit_aggregate_markov",
            "spectral_embedding",
        ],
        "nmf_posteriors": ["log_likelihood", "posteriors"],
    },
)
