"""Frey faces (Brendan Frey, via Sam Roweis): 1965 grey images of 28 × 20 pixels, no labels.

The original ``frey_rawface.mat`` holds ``ff`` (uint8, 560 × 1965), one image per column, row
major within an image: ``ff.T.reshape(-1, 28, 20)``. See ``$DKERNEL_DATA/MANIFEST.md`` §7.
Used for joint ranking and clustering in Løkse (2014), §10.2 [Lokse2014].
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from dkernel.errors import InvalidInputError
from dkernel.io.data import LoadedData, data_root, expand_data_path

FREY_SHAPE = (28, 20)
FREY_RELATIVE = Path("frey_faces") / "frey_rawface.mat"


def frey_path(path: str | os.PathLike | None = None) -> Path:
    """The ``.mat`` file: ``path`` if given (a file or the data folder), else ``$DKERNEL_DATA``."""
    if path is None:
        path = data_root()
    p = expand_data_path(path)
    if p.is_dir():
        p = p / FREY_RELATIVE if (p / FREY_RELATIVE).exists() else p / "frey_rawface.mat"
    if not p.is_file():
        raise InvalidInputError(f"Frey faces file {str(p)!r} not found (expected {FREY_RELATIVE}).")
    return p


def load_frey_faces(path: str | None = None, scale: bool = True) -> LoadedData:
    """Load the Frey faces as a (1965, 560) table, one flattened 28 × 20 image per row.

    Parameters
    ----------
    path : str, optional
        ``frey_rawface.mat`` or the folder holding it; default ``$DKERNEL_DATA``.
    scale : bool, default=True
        Divide the 8-bit grey levels by 255 (values in [0, 1]); False keeps 0–255.

    Returns
    -------
    LoadedData
        ``X`` float64, ``y`` None, ``meta['image_shape'] == [28, 20]``.
    """
    from scipy.io import loadmat

    p = frey_path(path)
    try:
        mat = loadmat(str(p))
    except Exception as exc:  # scipy raises several types for corrupt files
        raise InvalidInputError(f"could not read {p} as a MATLAB file: {exc}") from exc
    if "ff" not in mat:
        raise InvalidInputError(
            f"{p} has no variable 'ff'; keys: {sorted(k for k in mat if not k.startswith('__'))}."
        )
    ff = np.asarray(mat["ff"])
    n_pix = FREY_SHAPE[0] * FREY_SHAPE[1]
    if ff.ndim != 2 or ff.shape[0] != n_pix:
        raise InvalidInputError(f"{p}: 'ff' has shape {ff.shape}; expected ({n_pix}, n_images).")
    X = ff.T.astype(np.float64)
    if scale:
        X /= 255.0
    return LoadedData(
        X=X,
        y=None,
        feature_names=[
            f"pixel_{r}_{c}" for r in range(FREY_SHAPE[0]) for c in range(FREY_SHAPE[1])
        ],
        meta={
            "source": str(p),
            "dataset": "frey_faces",
            "image_shape": list(FREY_SHAPE),
            "n_images": int(X.shape[0]),
            "scaled": bool(scale),
        },
    )


def frey_images(X: np.ndarray) -> np.ndarray:
    """Rows of the Frey table back to images, shape (n, 28, 20)."""
    X = np.asarray(X)
    return X.reshape(-1, *FREY_SHAPE)
