"""Conformance: every registered kernel, reader and job method keeps the same promises
(issue 33, item 5).

The lists come from the registries (``dkernel.kernels.registry.KERNELS``,
``dkernel.io.registry.READERS``, ``dkernel.jobs.registry.METHODS``), so a new entry is
covered as soon as it is registered; one without a case here fails, naming the table to add
it to.

* **Out-of-sample consistency.** Kernels: a block ``K(Y, L)`` equals the pairwise evaluation
  one entry at a time (and the closed form, the explicit feature map and the log form where
  the kernel has one), and the Nyström features of the training rows reproduce the training
  kernel (its positive part). Readers: the rows, labels and valid pixels agree. Methods: the
  estimators a method runs give their training rows' labels (and embedding) back out of
  sample.
* **Determinism.** The same seed gives bit-identical kernels, Nyström features, data and
  fits twice. Whole jobs: ``tests/ops/test_distributed.py`` (an embedded and a submitted run
  of every method store identical arrays) and the determinism tests of each family.
* **Bad input.** NaN or inf where the item does not model missing values, the wrong shape,
  no rows: a :class:`~dkernel.errors.DKernelError` with a message that says what is wrong
  (from the command line: exit status 2 and no traceback). Data-file problems of the table
  reader in depth: ``tests/ops/test_bad_input.py``.
"""

from __future__ import annotations

import io
import re
import warnings
from collections.abc import Callable
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from dkernel.errors import DKernelError, InvalidInputError
from dkernel.io.registry import READERS
from dkernel.jobs.registry import METHODS
from dkernel.kernels.nystrom import explicit_feature_map
from dkernel.kernels.pairwise import NONNEGATIVE_DATA, SKLEARN_KERNELS
from dkernel.kernels.registry import KERNELS, MISSING_VALUE_KERNELS, make_kernel
from dkernel.kmeans.features import features

DATA_ROOT = Path(__file__).resolve().parents[1] / "dkernel" / "data"


def _dense(A: Any) -> np.ndarray:
    return A.toarray() if hasattr(A, "toarray") else np.asarray(A)


def _missing_case(kind: str, name: str, table: str) -> None:
    pytest.fail(
        f"the {kind} {name!r} is registered but has no conformance case: add one to {table} "
        "in tests/test_conformance.py"
    )


def _blobs(n: int = 60, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Three well separated Gaussian blobs in 2-D and their labels."""
    rng = np.random.default_rng(seed)
    centres = np.array([[0.0, 0.0], [6.0, 0.0], [0.0, 6.0]])
    labels = np.arange(n) % 3
    return centres[labels] + rng.normal(scale=0.5, size=(n, 2)), labels


# ------------------------------------------------------------------------------------------
# kernels
# ------------------------------------------------------------------------------------------


def _pck_params(X: np.ndarray) -> dict:
    from dkernel.gmm.pck import ProbabilisticClusterKernel

    return {"model": ProbabilisticClusterKernel(3, max_components=3, random_state=0).fit(X)}


#: Kernel name -> the parameters of a small, quick kernel on the training data ``X``.
KERNEL_CASES: dict[str, Callable[[np.ndarray], dict]] = {
    "rbf": lambda X: {"seed": 0},
    "cosine": lambda X: {},
    "local_scaling": lambda X: {"scale_neighbors": 5, "n_reference": 30, "seed": 0},
    "knn": lambda X: {"n_neighbors": 5, "n_reference": 30, "seed": 0},
    "knn_mean": lambda X: {"n_neighbors": 5, "n_reference": 30, "seed": 0},
    "landmark": lambda X: {"n_landmarks": 12, "n_neighbors": 3, "seed": 0},
    "pck": _pck_params,
    # the data of a precomputed kernel are kernel rows: see _kernel_data
    "precomputed": lambda X: {},
    # scikit-learn's kernels, at scikit-learn's defaults (chi2's on non-negative data)
    **{name: (lambda X: {}) for name in SKLEARN_KERNELS},
}


def _rbf_formula(k: Any, A: np.ndarray, B: np.ndarray) -> np.ndarray:
    s = k.params["sigma"]
    return np.array([[np.exp(-np.sum((a - b) ** 2) / (2 * s * s)) for b in B] for a in A])


def _cosine_formula(k: Any, A: np.ndarray, B: np.ndarray) -> np.ndarray:
    return np.array([[a @ b / (np.linalg.norm(a) * np.linalg.norm(b)) for b in B] for a in A])


#: Closed forms, one pair at a time, for the kernels that have a short one.
FORMULAS = {"rbf": _rbf_formula, "cosine": _cosine_formula}


def _kernel_data(name: str) -> tuple[np.ndarray, np.ndarray]:
    """Training rows (40) and new rows (9) as the kernel takes them."""
    X, _ = _blobs(49, seed=1)
    X = np.c_[X, np.random.default_rng(2).normal(size=49)] + [1.0, 1.0, 0.0]
    train, new = X[:40], X[40:]
    if name in NONNEGATIVE_DATA:
        return np.abs(train), np.abs(new)
    if name == "precomputed":
        rbf = make_kernel("rbf", sigma=2.0)
        return rbf(train, train), rbf(new, train)
    return train, new


def _make(name: str) -> tuple[Any, np.ndarray, np.ndarray]:
    if name not in KERNEL_CASES:
        _missing_case("kernel", name, "KERNEL_CASES")
    train, new = _kernel_data(name)
    fit_on = _kernel_data("rbf")[0] if name == "precomputed" else train
    return make_kernel(name, train, **KERNEL_CASES[name](fit_on)), train, new


@pytest.mark.parametrize("name", KERNELS.names())
def test_kernel_block_equals_the_pairwise_reference(name):
    k, train, new = _make(name)
    ref = k.landmark_data(train, np.arange(0, train.shape[0], 3))
    block = k.cross(new, ref)
    assert block.shape == (new.shape[0], ref.shape[0])
    pairwise = np.array(
        [
            [k.cross(new[i : i + 1], ref[j : j + 1])[0, 0] for j in range(len(ref))]
            for i in range(len(new))
        ]
    )
    np.testing.assert_allclose(block, pairwise, rtol=1e-10, atol=1e-12)
    if name in FORMULAS:
        np.testing.assert_allclose(block, FORMULAS[name](k, new, ref), rtol=1e-10, atol=1e-12)
    if k.feature_map is not None:
        G_new, G_ref = features(k.feature_map, new), features(k.feature_map, ref)
        via_map = _dense(G_new @ G_ref.T)
        np.testing.assert_allclose(block, via_map, rtol=1e-5, atol=1e-6)
    if k.log_block is not None:
        with np.errstate(divide="ignore"):
            np.testing.assert_allclose(np.exp(k.log(new, ref)), np.maximum(block, 0), atol=1e-12)


@pytest.mark.parametrize("name", KERNELS.names())
def test_kernel_nystrom_features_of_the_training_rows_reproduce_it(name):
    """With every training row a landmark, ``Φ Φᵀ`` is the training kernel's positive part
    (the kernel itself for a PSD kernel)."""
    k, train, _ = _make(name)
    n = train.shape[0]
    kernel, fmap, _ = explicit_feature_map(train, k, n)
    Phi = _dense(features(fmap, train))
    K = kernel.cross(train, kernel.landmark_data(train, np.arange(n)))
    values, vectors = np.linalg.eigh(0.5 * (K + K.T))
    keep = values > 1e-10 * values.max()
    positive = (vectors[:, keep] * values[keep]) @ vectors[:, keep].T
    np.testing.assert_allclose(Phi @ Phi.T, positive, atol=1e-6 * np.abs(K).max())


@pytest.mark.parametrize("name", KERNELS.names())
def test_kernel_is_deterministic(name):
    (a, train, new), (b, _, _) = _make(name), _make(name)
    assert {key: repr(v) for key, v in a.params.items()} == {
        key: repr(v) for key, v in b.params.items()
    }
    ref = a.landmark_data(train, np.arange(0, train.shape[0], 2))
    assert np.array_equal(a.cross(new, ref), b.cross(new, ref))
    # the landmark draws (k-means++) of the Nyström stage too
    fa = explicit_feature_map(train, a, 10, random_state=3)[1]
    fb = explicit_feature_map(train, b, 10, random_state=3)[1]
    assert np.array_equal(_dense(features(fa, new)), _dense(features(fb, new)))


def _with(values: np.ndarray, value: float) -> np.ndarray:
    out = values.astype(np.float64, copy=True)
    out[1, 1] = value
    return out


@pytest.mark.parametrize("name", KERNELS.names())
def test_kernel_refuses_bad_input(name):
    k, train, new = _make(name)
    fit_on = _kernel_data("rbf")[0] if name == "precomputed" else train
    params = KERNEL_CASES[name](fit_on)
    ref = k.landmark_data(train, np.arange(0, train.shape[0], 3))
    if name in MISSING_VALUE_KERNELS:
        # NaN is a missing value: the kernel of such rows is still finite (distance kernels:
        # fitted on rows with NaN, whose columns' moments give expected distances; fitted on
        # complete rows they refuse)
        distance = name != "pck"
        fitted = make_kernel(name, _with(train, np.nan), **params) if distance else k
        assert np.isfinite(fitted.cross(_with(new, np.nan), ref)).all()
        if distance:
            with pytest.raises(InvalidInputError, match=r"non-finite values \(NaN or inf\)"):
                k.cross(_with(new, np.nan), ref)
            with pytest.raises(InvalidInputError, match="infinite"):
                make_kernel(name, _with(train, np.inf), **params)
    else:
        for bad in (np.nan, np.inf):
            with pytest.raises(InvalidInputError, match=r"non-finite values \(NaN or inf\)"):
                make_kernel(name, _with(train, bad), **params)
            with pytest.raises(InvalidInputError, match=r"non-finite values \(NaN or inf\)"):
                k.cross(_with(new, bad), ref)
        with pytest.raises(InvalidInputError, match="no rows"):
            make_kernel(name, train[:0], **params)
        with pytest.raises(InvalidInputError, match=r"shape \(n_samples, n_features\)"):
            make_kernel(name, train[:, 0], **params)
    # one feature too many; for kernel rows, too few columns for the landmarks
    wrong = new[:, : int(ref.max())] if k.precomputed else np.c_[new, new[:, :1]]
    with pytest.raises(InvalidInputError, match="features|shape"):
        k.cross(wrong, ref)


# ------------------------------------------------------------------------------------------
# readers
# ------------------------------------------------------------------------------------------


@dataclass
class ReaderCase:
    """``good``: the ``data:`` options of a small valid input (None: skipped, ``skip`` says
    why); ``bad``: ``(options, pattern of the message)`` pairs that must be refused."""

    good: dict | None
    bad: list[tuple[dict, str]] = field(default_factory=list)
    skip: str = ""


def _csv(path: Path, rows: np.ndarray) -> Path:
    path.write_text("\n".join(",".join(str(v) for v in r) for r in rows) + "\n")
    return path


def _parquet(path: Path, rows: np.ndarray) -> Path:
    import pandas as pd

    pd.DataFrame(rows, columns=[f"f{i}" for i in range(rows.shape[1])]).to_parquet(path)
    return path


def _geotiff(path: Path, rows: int, cols: int, seed: int = 0) -> Path:
    """A small 2-band float GeoTIFF in UTM metres."""
    import rasterio
    from rasterio.transform import from_origin

    data = np.random.default_rng(seed).uniform(size=(2, rows, cols)).astype("float32")
    profile = {
        "driver": "GTiff",
        "height": rows,
        "width": cols,
        "count": 2,
        "dtype": "float32",
        "crs": "EPSG:32618",
        "transform": from_origin(500000.0, 4000000.0, 30.0, 30.0),
    }
    with rasterio.open(path, "w", **profile) as dst:
        dst.write(data)
    return path


def _image(path: Path, nan: bool = False) -> Path:
    rng = np.random.default_rng(0)
    img = rng.uniform(size=(6, 7, 3))
    if nan:
        img[:] = np.nan
    np.save(path, img)
    return path


def _zarr_cube(path: Path) -> Path:
    import zarr

    root = zarr.open_group(str(path), mode="w")
    arr = root.create_array("cube", shape=(3, 6, 7), dtype="float64", chunks=(3, 6, 7))
    arr[...] = np.random.default_rng(0).uniform(size=(3, 6, 7))
    return path


def _zarr_table(path: Path, rows: np.ndarray) -> Path:
    import zarr

    root = zarr.open_group(str(path), mode="w")
    root.create_array("X", shape=rows.shape, dtype="float64", chunks=(8, rows.shape[1]))[...] = rows
    root.create_array("cube", shape=(2, 3, 4), dtype="float64")[...] = 1.0
    return path


def _dataset(name: str, tmp: Path, options: dict, empty_dir_option: str) -> ReaderCase:
    """A reader of a data set under ``DKERNEL_DATA``: the real files when they are here, and
    an empty folder refused."""
    import os

    root = os.environ.get("DKERNEL_DATA")
    empty = tmp / "empty"
    empty.mkdir(exist_ok=True)
    bad = [
        (
            {"reader": name, **options, empty_dir_option: str(empty)},
            r"(?i)not found|no such|missing|does not exist|cannot find|not a",
        )
    ]
    if not root or not Path(root).is_dir():
        return ReaderCase(None, bad, skip="DKERNEL_DATA is not set")
    return ReaderCase({"reader": name, **options}, bad)


def _reader_cases(tmp: Path) -> dict[str, ReaderCase]:
    rows = np.random.default_rng(0).normal(size=(20, 3)).round(4)
    nan_rows = rows.astype(object)
    nan_rows[3, 1] = "nan"
    np.save(tmp / "x.npy", rows)
    np.save(tmp / "flat.npy", rows[:, 0])
    np.save(tmp / "none.npy", rows[:0])
    return {
        "csv": ReaderCase(
            {"reader": "csv", "path": str(_csv(tmp / "x.csv", rows))},
            [
                ({"reader": "csv", "path": str(_csv(tmp / "blank.csv", rows[:0]))}, "no data rows"),
                (
                    {
                        "reader": "csv",
                        "path": str(_csv(tmp / "txt.csv", np.array([["a", "b"]] * 3))),
                    },
                    "numeric|not a number|could not",
                ),
            ],
        ),
        "series": ReaderCase(
            {"reader": "series", "name": "mso", "n_samples": 50},
            [
                ({"reader": "series", "name": "mso", "n_samples": 5}, "n_samples"),
                ({"reader": "series", "name": "lorenz"}, "name"),
            ],
        ),
        "npy": ReaderCase(
            {"reader": "npy", "path": str(tmp / "x.npy")},
            [
                ({"reader": "npy", "path": str(tmp / "flat.npy")}, "1-D|2-D|shape"),
                ({"reader": "npy", "path": str(tmp / "none.npy")}, "empty|no rows|no data"),
            ],
        ),
        "npy-raster": ReaderCase(
            {"reader": "npy-raster", "path": str(_image(tmp / "img.npy"))},
            [
                ({"reader": "npy-raster", "path": str(tmp / "flat.npy")}, "3-D|shape"),
                (
                    {"reader": "npy-raster", "path": str(_image(tmp / "nan.npy", nan=True))},
                    "valid|missing|nodata|NaN",
                ),
            ],
        ),
        "zarr-raster": ReaderCase(
            {
                "reader": "zarr-raster",
                "path": str(_zarr_cube(tmp / "cube.zarr")),
                "variable": "cube",
            },
            [
                (
                    {"reader": "zarr-raster", "path": str(tmp / "cube.zarr"), "variable": "nope"},
                    "nope",
                )
            ],
        ),
        "zarr": ReaderCase(
            {"reader": "zarr", "path": str(_zarr_table(tmp / "table.zarr", rows)), "array": "X"},
            [
                ({"reader": "zarr", "path": str(tmp / "table.zarr")}, "set data.array"),
                ({"reader": "zarr", "path": str(tmp / "table.zarr"), "array": "cube"}, "2-D"),
            ],
        ),
        "geotiff": ReaderCase(
            {
                "reader": "geotiff",
                "path": str(DATA_ROOT / "RGB.byte.tif"),
                "roi": {"window": [300, 300, 12, 10]},
            },
            [
                (
                    {"reader": "geotiff", "path": str(_csv(tmp / "fake.tif", rows))},
                    "geotiff|GeoTIFF|failed|not a",
                )
            ],
        ),
        "demo-landsat": ReaderCase(
            {"reader": "demo-landsat"}, [({"reader": "demo-landsat", "scale": "bogus"}, "scale")]
        ),
        "parquet": ReaderCase(
            {"reader": "parquet", "path": str(_parquet(tmp / "x.parquet", rows))},
            [({"reader": "parquet", "path": str(tmp / "x.parquet"), "columns": ["nope"]}, "nope")],
        ),
        "geotiff-pair": ReaderCase(
            {
                "reader": "geotiff-pair",
                "path": str(_geotiff(tmp / "before.tif", 5, 6)),
                "after_path": str(_geotiff(tmp / "after.tif", 5, 6, seed=1)),
            },
            [
                (
                    {
                        "reader": "geotiff-pair",
                        "path": str(tmp / "before.tif"),
                        "after_path": str(_geotiff(tmp / "other.tif", 4, 6)),
                    },
                    "(?i)grid|shape|differ",
                )
            ],
        ),
        # a STAC item needs a catalogue of assets; its reader's own tests load one
        "stac": ReaderCase(
            None,
            [
                (
                    {"reader": "stac", "path": str(_csv(tmp / "item.json", rows))},
                    "(?i)stac|json|item",
                )
            ],
            skip="no STAC item here (tests/io covers loading one)",
        ),
        "sklearn": ReaderCase(
            {"reader": "sklearn", "name": "iris"},
            [({"reader": "sklearn", "name": "no-such-set"}, "no-such-set")],
        ),
        "ecoli": _dataset("ecoli", tmp, {}, "data_dir"),
        "wisconsin": _dataset("wisconsin", tmp, {}, "data_dir"),
        "statlog-landsat": _dataset("statlog-landsat", tmp, {}, "data_dir"),
        "shapes": _dataset("shapes", tmp, {"name": "jain"}, "path"),
        "samson": _dataset("samson", tmp, {}, "path"),
        "jasper": _dataset("jasper", tmp, {}, "path"),
        "frey-faces": _dataset("frey-faces", tmp, {}, "path"),
    }


def _load(data: dict, tmp: Path) -> Any:
    from dkernel.jobs.prepare import load_data
    from dkernel.jobs.spec import validate_spec

    spec = validate_spec(
        {
            "name": "conformance",
            "method": "rbf-spectral",
            "data": data,
            "params": {"n_clusters": 2},
            "output": str(tmp / "o.zarr"),
        }
    )
    return load_data(spec)


@pytest.fixture(scope="module")
def reader_cases(tmp_path_factory):
    return _reader_cases(tmp_path_factory.mktemp("readers"))


def _reader_case(cases: dict[str, ReaderCase], name: str) -> ReaderCase:
    if name not in cases:
        _missing_case("reader", name, "_reader_cases")
    return cases[name]


@pytest.mark.parametrize("name", READERS.names())
def test_reader_is_consistent_and_deterministic(name, reader_cases, tmp_path):
    case = _reader_case(reader_cases, name)
    if case.good is None:
        pytest.skip(case.skip)
    a, b = _load(case.good, tmp_path), _load(case.good, tmp_path)
    Xa, Xb = np.asarray(a.X), np.asarray(b.X)
    assert Xa.ndim == 2 and Xa.shape[0] > 0 and Xa.shape[1] > 0
    assert np.array_equal(Xa, Xb, equal_nan=True)
    if a.y is not None:
        assert len(a.y) == Xa.shape[0]
        assert np.array_equal(a.y, b.y)
    if a.feature_names is not None:
        assert len(a.feature_names) == Xa.shape[1]
    if READERS[name].raster:
        assert a.raster is not None, f"{name} is a raster reader but set no raster"


@pytest.mark.parametrize("name", READERS.names())
def test_reader_refuses_bad_input(name, reader_cases, tmp_path):
    case = _reader_case(reader_cases, name)
    assert case.bad, f"the conformance case of reader {name!r} lists no bad input"
    for data, pattern in case.bad:
        with pytest.raises(DKernelError) as info:
            _load(data, tmp_path)
        assert re.search(pattern, str(info.value)), f"{pattern!r} not in: {info.value}"


@pytest.mark.parametrize("name", [n for n in READERS.names() if READERS[n].raster])
def test_raster_reader_masks_non_finite_pixels(name, reader_cases, tmp_path):
    """A NaN or infinite band value makes its pixel nodata: never a value of ``X``."""
    case = _reader_case(reader_cases, name)
    if case.good is None:
        pytest.skip(case.skip)
    if name not in NON_FINITE_IMAGES:
        pytest.skip(f"{name} reads a fixed file (no image with non-finite values to give it)")
    data = NON_FINITE_IMAGES[name](tmp_path)
    X = np.asarray(_load(data, tmp_path).X)
    assert np.isfinite(X).all()
    assert X.shape[0] == 6 * 7 - 2


def _npy_with_non_finite(tmp: Path) -> dict:
    img = np.random.default_rng(0).uniform(size=(6, 7, 3))
    img[2, 3, 1], img[4, 0, 2] = np.nan, np.inf
    np.save(tmp / "nonfinite.npy", img)
    return {"reader": "npy-raster", "path": str(tmp / "nonfinite.npy")}


def _zarr_with_non_finite(tmp: Path) -> dict:
    import zarr

    cube = np.random.default_rng(0).uniform(size=(3, 6, 7))
    cube[1, 2, 3], cube[2, 4, 0] = np.nan, np.inf
    root = zarr.open_group(str(tmp / "nonfinite.zarr"), mode="w")
    root.create_array("cube", shape=cube.shape, dtype="float64", chunks=cube.shape)[...] = cube
    return {"reader": "zarr-raster", "path": str(tmp / "nonfinite.zarr"), "variable": "cube"}


#: Image readers that take any file -> an image of 6 x 7 pixels, one NaN and one inf.
NON_FINITE_IMAGES: dict[str, Callable[[Path], dict]] = {
    "npy-raster": _npy_with_non_finite,
    "zarr-raster": _zarr_with_non_finite,
}


# ------------------------------------------------------------------------------------------
# job methods
# ------------------------------------------------------------------------------------------


@dataclass
class EstimatorCase:
    """Small parameters of an estimator a method runs; ``checks``: (out-of-sample method,
    fitted attribute, exact?) pairs that must agree on the training rows; ``why_none``: why an
    estimator has none."""

    params: dict
    checks: list[tuple[str, str, bool]] = field(default_factory=list)
    why_none: str = ""


ESTIMATOR_CASES: dict[str, EstimatorCase] = {
    "JointRankingClustering": EstimatorCase(
        {"n_clusters": 3, "n_init": 2, "random_state": 0},
        [("predict", "labels_", True), ("transform", "embedding_", False)],
    ),
    "KernelDecompositionClustering": EstimatorCase(
        {"n_clusters": 3, "n_init": 1, "random_state": 0}, [("predict", "labels_", True)]
    ),
    "KernelKMeans": EstimatorCase(
        {"n_clusters": 3, "n_init": 2, "random_state": 0}, [("predict", "labels_", True)]
    ),
    "MSSC": EstimatorCase(
        {
            "n_clusters": 3,
            "n_seeds": 20,
            "density_max_samples": 60,
            "n_rff": 50,
            "n_init": 3,
            "random_state": 0,
        },
        [("predict", "labels_", True)],
    ),
    "KernelPCAEmbedding": EstimatorCase(
        {"n_components": 2, "n_clusters": 3, "n_init": 2, "random_state": 0},
        [("predict", "labels_", True), ("transform", "embedding_", False)],
    ),
    "KECA": EstimatorCase(
        {"n_components": 2, "n_clusters": 3, "n_init": 2, "random_state": 0},
        [("predict", "labels_", True), ("transform", "embedding_", False)],
    ),
    "SpectralClustering": EstimatorCase(
        {"n_clusters": 3, "n_init": 2, "random_state": 0}, [("predict", "labels_", True)]
    ),
    "ProbabilisticClusterKernel": EstimatorCase(
        {"n_estimators": 3, "max_components": 3, "random_state": 0},
        why_none="a feature map: no fitted output of the training rows to compare with",
    ),
    "KernelPersonalizedPageRank": EstimatorCase(
        {"random_state": 0},
        why_none="no labels; its out-of-sample scores are the k-component form (Prop. 8) of "
        "the exact in-sample rank",
    ),
    "DeepKernelizedAutoencoder": EstimatorCase(
        {
            "n_components": 2,
            "hidden_layer_sizes": (8,),
            "prior": "rbf",
            "max_iter": 2,
            "batch_size": 20,
            "random_state": 0,
        },
        why_none="a feature map: no fitted output of the training rows to compare with",
    ),
    "DeepDivergenceClustering": EstimatorCase(
        {"n_clusters": 3, "max_iter": 2, "batch_size": 20, "random_state": 0},
        [("predict", "labels_", True)],
    ),
}


#: Estimators whose ``fit`` takes no ``X`` array, with where their out-of-sample
#: consistency and determinism are tested instead.
NOT_ARRAY_ESTIMATORS = {
    "ChangeDetection": "fits two rasters; tests/change/test_detect.py refits it and compares",
    "EchoStateNetwork": "fits a series and its targets (fit(X, y)); tests/reservoir/test_esn.py "
    "tests its predictions on the training steps and its determinism",
}


def _method_estimators() -> list[tuple[str, str]]:
    out = []
    for method in METHODS.names():
        for schema in METHODS[method].estimators:
            name = schema.path.rpartition(":")[2]
            if name not in NOT_ARRAY_ESTIMATORS:
                out.append((method, name))
    return out


def _estimator(path_name: str) -> type:
    import dkernel
    from dkernel._lazy import resolve

    if hasattr(dkernel, path_name):
        return getattr(dkernel, path_name)
    for method in METHODS.names():
        for schema in METHODS[method].estimators:
            if schema.path.endswith(":" + path_name):
                return resolve(schema.path)
    raise AssertionError(path_name)


@pytest.mark.parametrize(("method", "name"), _method_estimators())
def test_method_estimator_out_of_sample_and_determinism(method, name):
    if name not in ESTIMATOR_CASES:
        _missing_case(f"estimator of method {method!r}", name, "ESTIMATOR_CASES")
    case = ESTIMATOR_CASES[name]
    cls = _estimator(name)
    X, _ = _blobs(60)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = cls(**case.params).fit(X)
        b = cls(**case.params).fit(X)
    fitted = [attr for attr in ("labels_", "embedding_") if hasattr(a, attr)]
    if not fitted:  # a transformer without fitted rows: its features of the same rows
        assert np.array_equal(np.asarray(a.transform(X)), np.asarray(b.transform(X)))
    for attr in fitted:
        assert np.array_equal(np.asarray(getattr(a, attr)), np.asarray(getattr(b, attr))), attr
    assert case.checks or case.why_none
    for how, attr, exact in case.checks:
        got, want = np.asarray(getattr(a, how)(X)), np.asarray(getattr(a, attr))
        if exact:
            assert np.array_equal(got, want), f"{name}.{how}(X_train) != {attr}"
        else:
            np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-8 * np.abs(want).max())


#: Method -> (``params`` on 30 rows of 3 columns or a 6 x 7 image, whether NaN is a missing
#: value it models).
def _change_pair(tmp: Path, problem: str) -> dict:
    size = 1 if problem == "one-row" else 5
    before, after = _geotiff(tmp / "b.tif", size, size), _geotiff(tmp / "a.tif", size, size, 1)
    return {"reader": "geotiff-pair", "path": str(before), "after_path": str(after)}


#: Methods that need their own reader: method -> (tmp, problem) -> ``data:``.
METHOD_DATA: dict[str, Callable[[Path, str], dict]] = {"change-detection": _change_pair}


def _run_cli(tmp: Path, spec: dict) -> tuple[int, str]:
    from dkernel.cli import main

    path = tmp / "job.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    err, out = io.StringIO(), io.StringIO()
    with redirect_stderr(err), redirect_stdout(out):
        code = main(["validate", str(path)])
        if code == 0:
            code = main(["run", str(path), "--no-progress", "--workers", "1", "--threads", "1"])
    return code, err.getvalue()


@pytest.mark.parametrize("method", METHODS.names())
@pytest.mark.parametrize("problem", ["nan", "inf", "one-row"])
def test_method_refuses_bad_data(method, problem, tmp_path, monkeypatch):
    # the case is the method's own (Method.bad_data, Method.handles_missing)
    params = dict(METHODS[method].bad_data)
    if problem == "nan" and METHODS[method].allows_missing(params):
        pytest.skip(f"{method} models NaN as a missing value")
    if problem != "one-row" and METHODS[method].needs_raster:
        pytest.skip("image readers mask non-finite pixels as nodata (test_raster_reader_masks_*)")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DKERNEL_OUTPUT_ROOT", raising=False)
    if method in METHOD_DATA:
        data = METHOD_DATA[method](tmp_path, problem)
    elif METHODS[method].needs_raster:
        if problem == "one-row":
            img = np.random.default_rng(0).uniform(size=(1, 1, 3))
        else:
            img = np.random.default_rng(0).uniform(size=(6, 7, 3))
            img[2, 3, 1] = np.nan if problem == "nan" else np.inf
        np.save(tmp_path / "img.npy", img)
        data = {"reader": "npy-raster", "path": str(tmp_path / "img.npy")}
    else:
        rows = np.random.default_rng(0).normal(size=(30, 3)).round(4).astype(object)
        if problem == "one-row":
            rows = rows[:1]
        else:
            rows[3, 1] = "nan" if problem == "nan" else "inf"
        data = {"reader": "csv", "path": str(_csv(tmp_path / "data.csv", rows))}
    spec = {"name": "bad", "method": method, "data": data, "params": params, "output": "o.zarr"}
    code, err = _run_cli(tmp_path, spec)
    assert code == 2, f"exit status {code}, stderr:\n{err}"
    assert "Traceback" not in err
    pattern = {"nan": "missing|NaN", "inf": "infinite|non-finite", "one-row": "sample|row|pixel"}
    pattern = pattern[problem]
    assert re.search(pattern, err), f"{pattern!r} not in:\n{err}"
