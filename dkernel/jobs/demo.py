"""The demo job run by ``dkernel demo`` (and the README's first command)."""

from __future__ import annotations

from dkernel.jobs.spec import JobSpec, validate_spec

# Until the MSSC Landsat demo is registered, the demo is the wine KPCA job.
WINE_DEMO = {
    "name": "demo-wine-rbf-kpca",
    "description": "RBF KPCA + k-means on scikit-learn's wine data",
    "seed": 0,
    "data": {"reader": "sklearn", "name": "wine", "standardize": True},
    "method": "rbf-spectral",
    "params": {"embedding": "kpca", "n_components": 3, "n_clusters": 3, "n_init": 20},
    "output": "results/demo.zarr",
}


def demo_spec() -> JobSpec:
    """The validated demo spec."""
    return validate_spec(WINE_DEMO)
