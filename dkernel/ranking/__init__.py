"""Ranking: exact PPR, Kernel Personalized PageRank (KPPR), joint ranking and clustering (JRC)."""

from dkernel.ranking.affinity import make_knn_mean_kernel
from dkernel.ranking.graph import (
    make_projected_scorer,
    make_projector,
    make_scorer,
    project_graph,
    score_graph,
    scorer_for_seeds,
    scores_from_projection,
    top_k_graph,
)
from dkernel.ranking.jrc import (
    DegenerateClusterWarning,
    JointRankingClustering,
    jrc_embedding,
    jrc_normalized_embedding,
)
from dkernel.ranking.kppr import (
    KernelPersonalizedPageRank,
    normalized_eigenpairs,
    prop6_criterion,
    select_components,
)
from dkernel.ranking.metrics import ndcg_at_k, ndcg_at_k_columns, score_cosine
from dkernel.ranking.ppr import degrees, global_rank, ppr_exact, ppr_power, restart_beta
from dkernel.ranking.seeds import seed_vector

KPPR = KernelPersonalizedPageRank

__all__ = [
    "KPPR",
    "DegenerateClusterWarning",
    "JointRankingClustering",
    "KernelPersonalizedPageRank",
    "degrees",
    "global_rank",
    "jrc_embedding",
    "jrc_normalized_embedding",
    "make_knn_mean_kernel",
    "make_projected_scorer",
    "make_projector",
    "make_scorer",
    "project_graph",
    "ndcg_at_k",
    "ndcg_at_k_columns",
    "normalized_eigenpairs",
    "ppr_exact",
    "ppr_power",
    "prop6_criterion",
    "restart_beta",
    "score_cosine",
    "score_graph",
    "scorer_for_seeds",
    "scores_from_projection",
    "seed_vector",
    "select_components",
    "top_k_graph",
]
