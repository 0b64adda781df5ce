"""MSSC's defaults on the labelled scenes, the synthetic scene and the demo (issue 32).

One table per question, written to ``benchmarks/results/mssc_defaults.md``:

* ``scenes``: Samson (k = 3) and Jasper Ridge (k = 4) with the ``samson`` / ``jasper`` readers'
  features (reflectance unscaled, pixel coordinates in [0, 0.25]; the jobs' features), MSSC at its
  defaults and one change at a time (``wide_limit='never'``: the defaults before stage two could
  take the wide limit), ``random_state=0``; ARI and NMI against the argmax of the
  abundances. Beside them k-means (``n_init=10``) on the bands alone, unscaled and standardised
  (the "k-means on raw pixels" of ``docs/pck_results.md`` is the standardised one), and on
  bands scaled to unit length as MSSC's ``band_norm`` does; and the bound of stage two: every
  pixel given the majority class of its stage-one partition.
* ``synthetic``: the six-class scene of ``benchmarks/bench_full_tile.py`` at 300² pixels
  (min-max bands, the image readers' default), ARI against the generating classes.
* ``demo``: the Landsat demo scene, every third row and column (as
  ``tests/meanshift/test_demo_classes.py``): whether the classes follow the colours (the label
  map of the scene with its halves swapped, swapped back, against the map of the scene; ARI),
  and the class sizes.

Run: ``DKERNEL_DATA=/work/shared/data OMP_NUM_THREADS=1 python benchmarks/bench_mssc_defaults.py``
(about 3 minutes on one core).
"""

from __future__ import annotations

import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.cluster import KMeans
from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

#: One change at a time from MSSC's defaults (reader options first: scale, coord_scale).
VARIANTS: list[tuple[str, dict]] = [
    ("defaults", {}),
    ("wide_limit='never' (before issue 32's last change)", {"wide_limit": "never"}),
    ("wide_limit='always'", {"wide_limit": "always"}),
    ("bandwidth_factor=0.5 (before issue 32)", {"bandwidth_factor": 0.5}),
    ("bandwidth_factor=0.35", {"bandwidth_factor": 0.35}),
    ("path_radius=0.3 (before issue 32's last change)", {"path_radius": 0.3}),
    ("sigma_fraction=0.2", {"sigma_fraction": 0.2}),
    ("sigma_fraction=0.707", {"sigma_fraction": 0.707}),
    ("regularization=0", {"regularization": 0.0}),
    ("embedding='kpca'", {"embedding": "kpca"}),
    ("band_norm='none'", {"band_norm": "none"}),
    ("coordinates='both'", {"coordinates": "both"}),
    ("scale='minmax'", {"scale": "minmax"}),
    ("scale='standardize'", {"scale": "standardize"}),
    ("scale='standardize', regularization=0", {"scale": "standardize", "regularization": 0.0}),
    ("coord_scale=0", {"coord_scale": 0.0}),
    ("coord_scale=1", {"coord_scale": 1.0}),
]


def _scene(name: str, scale: str, coord_scale: float):
    from dkernel.io.raster import load_hyperspectral

    data = load_hyperspectral(name, os.environ.get("DKERNEL_DATA"), scale, coord_scale)
    return np.asarray(data.X, dtype=np.float64), np.asarray(data.y).ravel()


def _mssc(X: np.ndarray, k: int, n_bands: int, params: dict):
    from dkernel.meanshift.estimators import MSSC

    return MSSC(n_clusters=k, n_bands=n_bands, random_state=0, **params).fit(X)


def scenes() -> list[str]:
    out = [
        "## Samson and Jasper Ridge (the jobs' features, one change at a time)",
        "",
        "| variant | Samson ARI | Samson NMI | Jasper ARI | Jasper NMI | time s |",
        "|---|---|---|---|---|---|",
    ]
    for label, change in VARIANTS:
        params = dict(change)
        scale = params.pop("scale", "none")
        coord_scale = params.pop("coord_scale", 0.25)
        cells, t = [], time.perf_counter()
        for name, k in (("samson", 3), ("jasper", 4)):
            X, y = _scene(name, scale, coord_scale)
            n_bands = X.shape[1] - (2 if coord_scale > 0 else 0)
            labels = _mssc(X, k, n_bands, params).labels_
            cells += [adjusted_rand_score(y, labels), normalized_mutual_info_score(y, labels)]
        row = " | ".join(f"{v:.3f}" for v in cells)
        out.append(f"| {label} | {row} | {time.perf_counter() - t:.1f} |")
        print(out[-1], flush=True)
    cells = []
    for name, k in (("samson", 3), ("jasper", 4)):
        X, y = _scene(name, "none", 0.25)
        partitions = _mssc(X, k, X.shape[1] - 2, {}).pixel_partitions_
        labels = _majority_class(partitions, y)
        cells += [adjusted_rand_score(y, labels), normalized_mutual_info_score(y, labels)]
    out.append("| stage one's partitions, each its majority class (stage two's bound) | ")
    out[-1] += " | ".join(f"{v:.3f}" for v in cells) + " | |"
    print(out[-1], flush=True)
    for label, features in (
        ("k-means, bands unscaled", "none"),
        ("k-means, standardised", "standardised"),
        ("k-means, bands to unit length (MSSC's band_norm)", "unit"),
    ):
        cells = []
        for name, k in (("samson", 3), ("jasper", 4)):
            X, y = _scene(name, "none", 0.0)
            if features == "standardised":
                X = (X - X.mean(0)) / X.std(0)
            elif features == "unit":
                X = X / np.linalg.norm(X, axis=1, keepdims=True)
            labels = KMeans(k, n_init=10, random_state=0).fit_predict(X)
            cells += [adjusted_rand_score(y, labels), normalized_mutual_info_score(y, labels)]
        out.append(f"| {label} | " + " | ".join(f"{v:.3f}" for v in cells) + " | |")
        print(out[-1], flush=True)
    out += [
        "",
        "The classes are the argmax of linear-mixing abundances. The stage-one partitions are",
        "not the limit (each labelled with its majority class they score far above any",
        "clustering of them); stage two's geometry is. With the Gaussian affinity at sigma_",
        "(wide_limit='never') Jasper's water splits into its dark and its brighter pixels, and",
        "road and soil merge: the graph's 4th and 5th directions are almost degenerate. The",
        "wide limit of the same affinity (sigma -> infinity: a size-weighted PCA of the",
        "partition means, rows to unit length) has the linear geometry of a mixture, and",
        "wide_limit='auto' takes it on both scenes, its eigengap ratio lambda_{k+1}/lambda_k",
        "being the smaller (Samson 0.102 against 0.429, Jasper 0.396 against 0.897).",
    ]
    return out


def _majority_class(partitions: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Every point labelled with the most frequent true class of its partition."""
    counts = np.zeros((int(partitions.max()) + 1, int(y.max()) + 1), dtype=np.int64)
    np.add.at(counts, (partitions, y), 1)
    return counts.argmax(axis=1)[partitions]


def synthetic(side: int = 300) -> list[str]:
    from bench_full_tile import N_CLASSES, scene_strip

    from dkernel.io.raster import image_from_array, raster_to_loaded

    bands, classes = scene_strip(0, side, side)
    image = image_from_array(bands.transpose(1, 2, 0).astype(np.float32), layout="yxb", name="s")
    out = [
        "",
        f"## Synthetic scene of `bench_full_tile.py` ({side}² pixels, {N_CLASSES} classes)",
        "",
        "| variant | ARI | partitions |",
        "|---|---|---|",
    ]
    # the stage-one and width variants, and the scale of the demo
    chosen = VARIANTS[:7] + [v for v in VARIANTS if v[0] == "scale='standardize'"]
    for label, change in chosen:
        params = dict(change)
        scale = params.pop("scale", "minmax")
        data = raster_to_loaded(image, scale=scale, coord_scale=0.25)
        est = _mssc(np.asarray(data.X), N_CLASSES, bands.shape[0], params)
        ari = adjusted_rand_score(classes.ravel(), est.labels_)
        out.append(f"| {label} | {ari:.4f} | {est.n_partitions_} |")
        print(out[-1], flush=True)
    return out


def demo() -> list[str]:
    sys.path.insert(0, str(ROOT / "tests" / "meanshift"))
    import test_demo_classes as demo_test

    from dkernel.io.raster import image_from_array, raster_to_loaded
    from dkernel.meanshift.estimators import MSSC

    cube = demo_test._demo_cube()
    half = cube.shape[2] // 2

    def label_map(c: np.ndarray, scale: str, params: dict) -> np.ndarray:
        data = raster_to_loaded(
            image_from_array(c.transpose(1, 2, 0), layout="yxb", name="demo"),
            scale=scale,
            coord_scale=0.25,
        )
        valid = np.asarray(data.raster["valid"].values, dtype=bool)
        est = MSSC(n_clusters=5, n_bands=c.shape[0], random_state=0, **params)
        out = np.full(valid.shape, -1, dtype=np.int64)
        out[valid] = est.fit(np.asarray(data.X)).labels_
        return out

    out = [
        "",
        f"## Demo scene, every {demo_test.STEP}rd row and column (k = 5)",
        "",
        "| variant | swapped halves ARI | class sizes |",
        "|---|---|---|",
    ]
    demo_variants = [
        ("minmax (the readers' default), defaults", "minmax", {}),
        ("standardize (the demo), defaults", "standardize", {}),
        ("standardize, bandwidth_factor=0.5", "standardize", {"bandwidth_factor": 0.5}),
        ("standardize, bandwidth_factor=0.35", "standardize", {"bandwidth_factor": 0.35}),
        (
            "standardize, kpca, sigma_fraction=0.2 (the demo before issue 32)",
            "standardize",
            {"embedding": "kpca", "sigma_fraction": 0.2, "bandwidth_factor": 0.5},
        ),
    ]
    for label, scale, params in demo_variants:
        a = label_map(cube, scale, params)
        b = np.roll(label_map(np.roll(cube, half, axis=2), scale, params), -half, axis=1)
        both = (a >= 0) & (b >= 0)
        sizes = sorted(np.bincount(a[a >= 0]).tolist(), reverse=True)
        out.append(f"| {label} | {adjusted_rand_score(a[both], b[both]):.3f} | {sizes} |")
        print(out[-1], flush=True)
    return out


def main() -> None:
    warnings.simplefilter("ignore")
    text = [
        "# MSSC defaults on the labelled scenes (`benchmarks/bench_mssc_defaults.py`)",
        "",
        "Seed 0, MSSC in process; see the module docstring for the protocol.",
        "",
        *scenes(),
        *synthetic(),
        *demo(),
        "",
    ]
    (ROOT / "benchmarks" / "results" / "mssc_defaults.md").write_text("\n".join(text))


if __name__ == "__main__":
    main()
