"""Missing entries (NaN) of the deep models' inputs: filled with their conditional means.

A network takes finite inputs. A sample with missing pixels or features goes in with them at
their conditional means given its observed ones, under the Gaussian
:class:`~dkernel.kernels.missing_model.MissingValueModel` of the training samples (fitted on at
most ``MISSING_MODEL_SAMPLE`` evenly spaced samples; a full covariance up to
``FULL_COVARIANCE_MAX_COLUMNS`` features, the features' means above): the fill
:class:`~dkernel.MeanShift` uses, and the "principled default" of issue 57 (item 3). New samples
are filled with the training samples' model, so ``predict`` sees what ``fit`` saw.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dkernel._random import systematic_rows
from dkernel._validation import is_dask_array
from dkernel.errors import InvalidInputError
from dkernel.kernels.missing_model import MISSING_MODEL_SAMPLE, MissingValueModel
from dkernel.rows import take_rows

#: The samples the model is fitted on take at most this many bytes (as float64): 2 000 RGB
#: images of 224 × 224 pixels would take 2.4 GB; above 1 000 features the model is the
#: features' means and variances, which a few hundred samples give.
MODEL_SAMPLE_BYTES = 256 << 20


def fit_missing_model(X: Any) -> MissingValueModel:
    """The missing-value model of the samples of ``X`` (NumPy or Dask, any sample shape), on
    at most ``MISSING_MODEL_SAMPLE`` evenly spaced samples (fewer where they would take more
    than ``MODEL_SAMPLE_BYTES``; one read of those rows of a Dask array)."""
    features = int(np.prod(X.shape[1:]))
    budget = max(3, MODEL_SAMPLE_BYTES // (8 * features))
    rows = systematic_rows(int(X.shape[0]), min(MISSING_MODEL_SAMPLE, budget))
    sample = take_rows(X, rows, np.float64).reshape(len(rows), -1)
    if np.isnan(sample).all(axis=0).any():
        # a feature never observed in the model's rows has no mean to fill it with
        column = int(np.flatnonzero(np.isnan(sample).all(axis=0))[0])
        raise InvalidInputError(
            f"feature {column} (counting pixels row by row) is NaN in every sample the "
            "missing-value model reads: there is nothing to fill it from. Drop it, or crop "
            "the images."
        )
    return MissingValueModel.fit(sample)


def filled(X: Any, model: MissingValueModel) -> Any:
    """``X`` as float32 with each sample's NaN at its conditional means under ``model``; a
    lazy Dask array (one task per row chunk) for Dask input, ``X`` itself when it has no NaN."""
    if is_dask_array(X):
        X = X.rechunk({i: -1 for i in range(1, X.ndim)})
        return X.map_blocks(_fill_block, model, dtype=np.float32)
    if not np.isnan(X).any():
        return X
    return _fill_block(X, model)


def _fill_block(block: np.ndarray, model: MissingValueModel) -> np.ndarray:
    block = np.asarray(block, dtype=np.float32)
    flat = block.reshape(len(block), -1)
    holes = np.isnan(flat).any(axis=1)
    if not holes.any():
        return block
    out = flat.copy()
    out[holes] = model.fill(flat[holes].astype(np.float64))[0]
    return out.reshape(block.shape)
