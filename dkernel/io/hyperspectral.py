"""Hyperspectral unmixing scenes (Samson, Jasper Ridge) in Zhu's ``.mat`` layout.

The cubes store ``Y`` as bands × pixels with pixels in MATLAB column-major order and the
ground-truth abundances ``A`` (endmembers × pixels) in a companion ``_End*.mat`` file. The
hard ground truth is ``argmax`` of the abundances. See ``$DKERNEL_DATA/MANIFEST.md`` §2a.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from dkernel.errors import InvalidInputError
from dkernel.io.data import data_root, expand_data_path

SAMSON_DIR = "hyperspectral_unmixing_samson_jasper"

SAMSON_CLASSES = ("rock", "tree", "water")
JASPER_CLASSES = ("tree", "water", "dirt", "road")


def _resolve_dir(data_dir: str | os.PathLike | None) -> Path:
    if data_dir is None:
        data_dir = data_root()
    path = expand_data_path(data_dir)
    if (path / SAMSON_DIR).is_dir():
        path = path / SAMSON_DIR
    if not path.is_dir():
        raise InvalidInputError(
            f"Hyperspectral data directory {str(path)!r} does not exist. Pass the folder that "
            f"holds Samson.mat (or its parent, the DKERNEL_DATA folder)."
        )
    return path


def _loadmat(path: Path) -> dict:
    from scipy.io import loadmat

    from dkernel.io.files import check_regular

    if not path.exists():
        raise InvalidInputError(
            f"Missing hyperspectral file {str(path)!r}; see MANIFEST.md §2a for the expected files."
        )
    check_regular(path, "hyperspectral file")
    return loadmat(str(path))


def _scalar(m: dict, key: str) -> int:
    return int(np.asarray(m[key]).ravel()[0])


def _cube_and_labels(Y: np.ndarray, A: np.ndarray, n_row: int, n_col: int):
    n_band, n_pix = Y.shape
    if n_pix != n_row * n_col or A.shape[1] != n_pix:
        raise InvalidInputError(
            f"Inconsistent scene: Y has {n_pix} pixels, A has {A.shape[1]}, nRow*nCol = "
            f"{n_row * n_col}."
        )
    # Column-major (MATLAB) pixel order: pixel p sits at (p % nRow, p // nRow).
    cube = np.ascontiguousarray(Y.T.reshape(n_row, n_col, n_band, order="F"), dtype=np.float32)
    labels = np.ascontiguousarray(A.argmax(axis=0).reshape(n_row, n_col, order="F")).astype(
        np.int64
    )
    return cube, labels


#: The cube and ground-truth files of each scene.
SCENE_FILES = {
    "samson": ("Samson.mat", "_EndSamson.mat"),
    "jasper": ("JasperRidge2_R198.mat", "_EndJasperRidge2_R198.mat"),
}


def scene_files(scene: str, data_dir: str | os.PathLike | None = None) -> list[Path]:
    """The files read for ``scene`` ('samson' or 'jasper'): its cube and its ground truth."""
    folder = _resolve_dir(data_dir)
    return [folder / name for name in SCENE_FILES[scene]]


def _load_scene(
    scene: str, data_dir: str | os.PathLike | None, scale_by: str | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Cube and labels of ``scene``; ``Y`` divided by the cube file's scalar ``scale_by``."""
    cube_file, truth_file = scene_files(scene, data_dir)
    m = _loadmat(cube_file)
    gt = _loadmat(truth_file)
    Y = np.asarray(m["Y"], dtype=np.float64)
    if scale_by is not None:
        Y = Y / float(_scalar(m, scale_by))
    return _cube_and_labels(Y, np.asarray(gt["A"]), _scalar(m, "nRow"), _scalar(m, "nCol"))


def load_samson(data_dir: str | os.PathLike | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Load the Samson scene.

    Parameters
    ----------
    data_dir : path, optional
        The ``DKERNEL_DATA`` folder or its ``hyperspectral_unmixing_samson_jasper`` subfolder;
        defaults to ``$DKERNEL_DATA``.

    Returns
    -------
    cube : ndarray of shape (95, 95, 156), float32
        Reflectances in [0, 1], ``cube[row, col, band]``.
    labels : ndarray of shape (95, 95), int64
        ``argmax`` of the ground-truth abundances: 0 rock, 1 tree, 2 water.

    Notes
    -----
    Reads ~3.7 MB; O(rows·cols·bands) time and memory.
    """
    return _load_scene("samson", data_dir)


def load_jasper(data_dir: str | os.PathLike | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Load the Jasper Ridge scene (198 bands), scaled to reflectance by ``maxValue``.

    Parameters
    ----------
    data_dir : path, optional
        The ``DKERNEL_DATA`` folder or its ``hyperspectral_unmixing_samson_jasper`` subfolder;
        defaults to ``$DKERNEL_DATA``.

    Returns
    -------
    cube : ndarray of shape (100, 100, 198), float32
        ``Y / maxValue`` (≈ [0, 1.09]), ``cube[row, col, band]``.
    labels : ndarray of shape (100, 100), int64
        ``argmax`` of the ground-truth abundances: 0 tree, 1 water, 2 dirt, 3 road.

    Notes
    -----
    Reads ~3.2 MB; O(rows·cols·bands) time and memory.
    """
    return _load_scene("jasper", data_dir, scale_by="maxValue")
