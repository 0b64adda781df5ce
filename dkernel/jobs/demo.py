"""The demo job run by ``dkernel demo`` (and the README's first command).

Mean Shift Spectral Clustering of the vendored CC0 Landsat 7 scene (718 × 791 × 3, EPSG:32618),
so it runs on a fresh install with no data download. It is the same job as
``jobs/demo-landsat-mssc.yaml`` (a test keeps the two equal); it writes the results store and,
beside it, the label COG (``<store stem>.labels.tif``), its class table
(``<store stem>.labels.classes.csv``), a quick-look PNG (``<store stem>.quicklook.png``) and
the label regions as polygons (``<store stem>.segments.gpkg``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dkernel.errors import StoreError
from dkernel.jobs.spec import JobSpec, validate_spec

#: Only what a user chooses for this scene: the number of classes, the polygons, and standardised
#: bands (an RGB scene with clouds: min-max scaling squeezes the ground's colours into a small part
#: of [0, 1], and the pixel coordinates then draw the segments). MSSC runs at its defaults and the
#: pixel coordinates at the reader's, the same as the README's ``dkernel.cluster_image(cube,
#: scale="standardize")``, the number of classes included (``n_clusters='auto'``) (``tests/meanshift/test_demo_classes.py``).
LANDSAT_DEMO: dict[str, Any] = {
    "name": "demo-landsat-mssc",
    "description": "k-means seeds -> mean shift on a pixel sample -> streamed pixel partitions "
    "-> Cauchy-Schwarz affinity on a stratified pixel sample -> normalized spectral clustering",
    "seed": 0,
    "data": {"reader": "demo-landsat", "scale": "standardize"},
    "method": "mssc",
    "params": {"segments": "gpkg"},
    "output": "results/demo-landsat-mssc.zarr",
}


def demo_spec() -> JobSpec:
    """The validated demo spec."""
    return validate_spec(LANDSAT_DEMO)


def is_demo_job(job: Any) -> bool:
    """Whether ``job`` (a store's ``job`` attribute) is the demo's: its name and reader."""
    data = job.get("data") if isinstance(job, dict) else None
    return (
        isinstance(data, dict)
        and job.get("name") == LANDSAT_DEMO["name"]
        and data.get("reader") == LANDSAT_DEMO["data"]["reader"]
    )


def demo_may_replace(output: str | Path, *, overwrite: bool = False) -> bool:
    """The ``overwrite`` that ``dkernel demo`` runs with at ``output``.

    The demo replaces its own earlier results (a store of the demo job, whatever its status),
    so it can be run again; a store of any other job, complete or not, only with
    ``overwrite``. Checked before the scene is read.

    Raises
    ------
    StoreError
        When ``output`` holds another job's store and ``overwrite`` is False, or anything
        that is not a results store (a file, a folder of other files).
    """
    path = Path(output)
    if not (path.exists() or path.is_symlink()):
        return overwrite
    from dkernel.schema.params import show_value
    from dkernel.storage.store import STORE_FORMAT, ResultsStore, check_target

    check_target(path, overwrite=True)  # what is not a store is refused, --overwrite or not
    if overwrite:
        return True

    try:
        attrs = ResultsStore(path).attrs
    except Exception:  # noqa: BLE001  (not a readable store: check_target refuses it)
        return False
    if attrs.get("format") != STORE_FORMAT:
        return False
    job = attrs.get("job")
    if is_demo_job(job):
        return True
    name = job.get("name") if isinstance(job, dict) else job
    raise StoreError(
        f"{path} holds the results store of another job ({show_value(name)}, status "
        f"{show_value(attrs.get('status'))}); pass --overwrite to replace it with the demo, "
        "or choose another --output."
    )
