"""Ranking: exact PPR, Kernel Personalized PageRank (KPPR), joint ranking and clustering (JRC)."""

from dkernel._lazy import attach

__getattr__, __dir__, __all__ = attach(
    __name__,
    {
        "affinity": ["make_knn_mean_kernel"],
        "graph": [
            "make_projected_scorer",
            "make_projector",
            "make_scorer",
            "project_graph",
            "score_graph",
            "scorer_for_seeds",
            "scores_from_projection",
            "top_k_graph",
        ],
        "jrc": [
            "DegenerateClusterWarning",
            "JointRankingClustering",
            "jrc_embedding",
            "jrc_normalized_embedding",
        ],
        "kppr": [
            "KPPR",
            "KernelPersonalizedPageRank",
            "normalized_eigenpairs",
            "prop6_criterion",
            "select_components",
        ],
        "metrics": ["ndcg_at_k", "ndcg_at_k_columns", "score_cosine"],
        "ppr": ["degrees", "global_rank", "ppr_exact", "ppr_power", "restart_beta"],
        "seeds": ["seed_vector"],
    },
)
