"""Shared linear algebra: eigen-solvers and k-means variants (NumPy only)."""

from dkernel.linalg.eigen import dense_eigh, fix_signs
from dkernel.linalg.kmeans import angular_kmeans, euclidean_kmeans, keca_initial_centers

__all__ = ["dense_eigh", "fix_signs", "angular_kmeans", "euclidean_kmeans", "keca_initial_centers"]
