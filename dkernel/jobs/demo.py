"""The demo job run by ``dkernel demo`` (and the README's first command).

Mean Shift Spectral Clustering of the vendored CC0 Landsat 7 scene (718 × 791 × 3, EPSG:32618),
so it runs on a fresh install with no data download. It is the same job as
``jobs/demo-landsat-mssc.yaml`` (a test keeps the two equal); it writes the results store and,
beside it, the label COG (``<store stem>.labels.tif``), its class table
(``<store stem>.labels.classes.csv``), a quick-look PNG (``<store stem>.quicklook.png``) and
the label regions as polygons (``<store stem>.segments.gpkg``).
"""

from __future__ import annotations

from typing import Any

from dkernel.jobs.spec import JobSpec, validate_spec

LANDSAT_DEMO: dict[str, Any] = {
    "name": "demo-landsat-mssc",
    "description": "k-means seeds -> mean shift on a pixel sample -> streamed pixel partitions "
    "-> Cauchy-Schwarz affinity on a stratified pixel sample -> KPCA + k-means",
    "seed": 0,
    "data": {"reader": "demo-landsat", "scale": "standardize", "coord_scale": 1.0},
    "method": "mssc",
    "params": {
        "n_clusters": 5,
        "embedding": "kpca",
        "seeds": "kmeans",
        "n_seeds": 500,
        "n_density": 20000,
        "density": "seeds",
        "sigma_fraction": 0.2,
        "segments": "gpkg",
    },
    "output": "results/demo-landsat-mssc.zarr",
}


def demo_spec() -> JobSpec:
    """The validated demo spec."""
    return validate_spec(LANDSAT_DEMO)
