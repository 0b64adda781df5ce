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
#: A Dask input's filled training rows are persisted when they take at most this many bytes:
#: the fill solves for each row's missing block (0.4 ms for an MNIST image missing a quarter),
#: which every epoch's pass over the chunks would repeat: 10 DDC epochs (random start) on the
#: holed MNIST subset in 1 000-image chunks took 27.9 s filled every epoch, 15.9 s filled once.
FILLED_CACHE_BYTES = 1 << 30


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
            f"value {column} of each sample (counting from 0; an image's pixels row by row) "
            "is NaN in every sample the missing-value model reads: there is nothing to fill "
            "it from. Drop that column, or crop the images."
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


def missing_model_of(network: Any) -> MissingValueModel | None:
    """The missing-value model a ``ddc`` or ``dkae`` job stored beside its network (the
    ``/network`` group as a Dataset); None for stores written before it was stored."""
    if "missing_mean" not in network:
        return None
    return MissingValueModel(network["missing_mean"].values, network["missing_covariance"].values)


def refuse_nan(block: np.ndarray, owner: str) -> np.ndarray:
    """``block`` itself when it has no NaN; an error naming the fix otherwise (an estimator
    rebuilt from weights alone has no model to fill missing values with)."""
    if np.isnan(block).any():
        raise InvalidInputError(
            f"X has missing values (NaN), and this {owner} has no model to fill them with: it "
            "was rebuilt from weights (from_weights, or from_results of a store older than "
            "the missing-value model), which do not hold the training data's. Use the fitted "
            "estimator or a newer store's from_results, or fill the NaN first."
        )
    return block


def fill_or_refuse(X: Any, model: MissingValueModel | None, owner: str) -> Any:
    """New samples for a fitted deep model: NaN filled with ``model`` (:func:`filled`), or,
    without one, refused where present (lazily, per chunk, for Dask input)."""
    if model is not None:
        return filled(X, model)
    if is_dask_array(X):
        return X.map_blocks(refuse_nan, owner, dtype=X.dtype)
    return refuse_nan(X, owner)


def with_observed(X: Any, model: MissingValueModel) -> Any:
    """``[filled X, observed mask]`` side by side, float32 (2 × the features): training rows
    for a network whose reconstruction loss counts the observed entries only (lazy for Dask
    input, one task per row chunk)."""
    if is_dask_array(X):
        X = X.rechunk({1: -1})
        width = 2 * int(X.shape[1])
        return X.map_blocks(
            _with_observed_block, model, dtype=np.float32, chunks=(X.chunks[0], (width,))
        )
    return _with_observed_block(X, model)


def _with_observed_block(block: np.ndarray, model: MissingValueModel) -> np.ndarray:
    block = np.asarray(block, dtype=np.float32)
    return np.concatenate([_fill_block(block, model), ~np.isnan(block)], axis=1, dtype=np.float32)


def training_rows(rows: Any, incomplete: bool) -> Any:
    """Filled ``rows`` to train on for many epochs: persisted when they are a Dask array, the
    input had missing values (``incomplete``) and they fit ``FILLED_CACHE_BYTES``, so the fill
    runs once; else as they are (NumPy rows are filled once already, complete rows need no
    fill, and larger ones are filled chunk by chunk every epoch, keeping memory flat)."""
    if incomplete and is_dask_array(rows) and rows.nbytes <= FILLED_CACHE_BYTES:
        return rows.persist()
    return rows
