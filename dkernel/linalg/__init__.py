"""Shared linear algebra: eigen-solvers, k-means variants and sums by label (NumPy only)."""

from dkernel.linalg.eigen import dense_eigh, fix_signs
from dkernel.linalg.groups import label_sums
from dkernel.linalg.kmeans import angular_kmeans, euclidean_kmeans, keca_initial_centers

__all__ = [
    "dense_eigh",
    "fix_signs",
    "angular_kmeans",
    "euclidean_kmeans",
    "keca_initial_centers",
    "label_sums",
]
