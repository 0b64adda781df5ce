"""The SIPU 2-D clustering shape sets (Fränti et al.) in ``$DKERNEL_DATA/shapes_2d_sipu``.

``jain``, ``Aggregation``, ``Compound``, ``pathbased``, ``spiral``, ``flame`` and ``R15`` are
``x y label`` text files (tabs or spaces, CRLF or LF); ``D31`` is Gagolewski's gzip pair
``d31.data.gz`` / ``d31.labels0.gz``. See ``$DKERNEL_DATA/MANIFEST.md`` §6. Labels are
returned as 0-based integers.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from dkernel.errors import InvalidInputError
from dkernel.io.data import LoadedData, data_root, expand_data_path

SHAPES_DIR = "shapes_2d_sipu"
SHAPE_SETS = ("jain", "Aggregation", "Compound", "pathbased", "spiral", "flame", "R15", "D31")


def _folder(path: str | os.PathLike | None) -> Path:
    if path is None:
        path = data_root()
    p = expand_data_path(path)
    if (p / SHAPES_DIR).is_dir():
        p = p / SHAPES_DIR
    if not p.is_dir():
        raise InvalidInputError(f"shape-set folder {str(p)!r} not found (expected {SHAPES_DIR}/).")
    return p


def shape_files(name: str, path: str | os.PathLike | None = None) -> list[Path]:
    """The files :func:`load_shapes` reads for the shape set ``name``."""
    folder = _folder(path)
    if name == "D31":
        return [folder / "d31.data.gz", folder / "d31.labels0.gz"]
    return [folder / f"{name}.txt"]


def load_shapes(name: str, path: str | os.PathLike | None = None) -> LoadedData:
    """Load one shape set: ``X`` (n, 2) float64 and ``y`` 0-based labels.

    Parameters
    ----------
    name : str
        One of ``jain, Aggregation, Compound, pathbased, spiral, flame, R15, D31``.
    path : str, optional
        The data folder (or the shapes folder); ``$DKERNEL_DATA`` by default.

    Examples
    --------
    >>> data = load_shapes("jain")  # doctest: +SKIP
    >>> data.X.shape, np.bincount(data.y)  # doctest: +SKIP
    ((373, 2), array([276,  97]))
    """
    if name not in SHAPE_SETS:
        raise InvalidInputError(f"unknown shape set {name!r}. Valid sets: {', '.join(SHAPE_SETS)}.")
    from dkernel.io.files import check_regular

    for file in shape_files(name, path):
        if file.exists():
            check_regular(file, "shape set file")
    folder = _folder(path)
    if name == "D31":
        src = folder / "d31.data.gz"
        X = np.loadtxt(src, dtype=np.float64)
        labels = np.loadtxt(folder / "d31.labels0.gz", dtype=np.int64)
    else:
        src = folder / f"{name}.txt"
        if not src.is_file():
            raise InvalidInputError(f"shape set file {str(src)!r} not found.")
        table = np.loadtxt(src, dtype=np.float64)
        X, labels = table[:, :2], table[:, 2].astype(np.int64)
    _, y = np.unique(labels, return_inverse=True)
    return LoadedData(
        X=np.ascontiguousarray(X),
        y=y.astype(np.int64),
        feature_names=["x", "y"],
        meta={"source": str(src), "dataset": name, "n_clusters": int(y.max()) + 1},
    )
