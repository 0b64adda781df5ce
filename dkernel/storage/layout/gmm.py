"""The ``/gmm`` group: every Gaussian mixture of a PCK ensemble, NaN-padded to G components."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import xarray as xr

GMM_DESCRIPTION = (
    "means are in input coordinates (after data.standardize), or with "
    "a projection in the coordinates x_c @ projection of the centred used columns; "
    "padding components are NaN; mean_entropy is the mean posterior entropy (nats) of "
    "each model over all samples."
)


def gmm_dataset(
    *,
    inits: Sequence[int],
    components: Sequence[int],
    means: Sequence[np.ndarray],
    second_moments: Sequence[np.ndarray],
    weights: Sequence[np.ndarray],
    n_inits: int,
    max_components: int,
    covariance_type: str,
    location: np.ndarray,
    feature_index: np.ndarray,
    mean_entropy: np.ndarray,
    missing_probs: Sequence[np.ndarray] | None = None,
    projection: np.ndarray | None = None,
    projection_variance_ratio: np.ndarray | None = None,
    attrs: Mapping[str, Any] | None = None,
) -> xr.Dataset:
    """The ``/gmm`` group: the parameters of every model ``(q, g)`` of a PCK ensemble.

    Model ``m`` (initial condition ``q = inits[m]``, ``g = components[m]`` components) fills
    ``[q, g - 2, :g]``; the components a model does not have are NaN.

    Parameters
    ----------
    inits, components : sequence of int (n_models,)
        ``q`` and ``g`` of every model, in the order of the per-model parameters (and of
        ``mean_entropy``: ``q``-major, ``g`` ascending).
    means : sequence of ndarray (g, p)
        Component means of every model, in the coordinates it was fitted in: centred used
        columns (stored shifted back by ``location``) or, with a projection, the projection
        axes (stored as they are).
    second_moments : sequence of ndarray (g, p) or (g, p, p)
        Diagonal variances or full covariances.
    weights : sequence of ndarray (g,)
    n_inits, max_components : int
        Q and G.
    covariance_type : {'diag', 'full'}
    location : ndarray (p_used,)
        Per-feature offset subtracted before fitting.
    feature_index : ndarray (p_used,)
        Input column of every used feature.
    mean_entropy : ndarray (n_models,)
        Mean posterior entropy (nats) of every model over all samples.
    missing_probs : sequence of ndarray (g, p), optional
        Per-component probability that a feature is missing (informative missingness).
    projection : ndarray (p_used, n_axes), optional
        The projection the mixtures were fitted in.
    projection_variance_ratio : ndarray (n_axes,), optional
    attrs : mapping, optional
        The ensemble's parameters (``n_iter``, ``subsample``, ``reg_covar``, ``seed``, …).

    Returns
    -------
    Dataset
        ==============================  ==================================================
        variable                        dims
        ==============================  ==================================================
        ``means``                       ``init``, ``n_components``, ``component``, ``f``
        ``weights``                     ``init``, ``n_components``, ``component``
        ``variances`` (diag)            ``init``, ``n_components``, ``component``, ``f``
        ``covariances`` (full)          ``init``, ``n_components``, ``component``, ``f``,
                                        ``feature_``
        ``missing_probs`` (optional)    ``init``, ``n_components``, ``component``, ``f``
        ``mean_entropy``                ``init``, ``n_components``
        ``location``                    ``feature``
        ``feature_index``               ``feature``
        ``projection`` (optional)       ``feature``, ``axis``
        ``projection_variance_ratio``   ``axis``
        ==============================  ==================================================

        ``f`` is ``feature`` without a projection and ``axis`` with one. Coordinates
        ``init`` (0 … Q-1), ``n_components`` (2 … G) and ``component`` (0 … G-1);
        attributes ``n_inits``, ``max_components``, ``covariance_type``, the given ``attrs``
        and ``description``.
    """
    Q, G = int(n_inits), int(max_components)
    p = int(len(feature_index)) if projection is None else int(projection.shape[1])
    padded_means = np.full((Q, G - 1, G, p), np.nan)
    padded_weights = np.full((Q, G - 1, G), np.nan)
    var_shape = (Q, G - 1, G, p) if covariance_type == "diag" else (Q, G - 1, G, p, p)
    second = np.full(var_shape, np.nan)
    rho = None if missing_probs is None else np.full((Q, G - 1, G, p), np.nan)
    for m, (q, g) in enumerate(zip(inits, components, strict=True)):
        mu = means[m]
        padded_means[q, g - 2, :g] = mu + location[None, :] if projection is None else mu
        second[q, g - 2, :g] = second_moments[m]
        padded_weights[q, g - 2, :g] = weights[m]
        if rho is not None and missing_probs is not None:
            rho[q, g - 2, :g] = missing_probs[m]
    coords = {"init": np.arange(Q), "n_components": np.arange(2, G + 1), "component": np.arange(G)}
    feature = "feature" if projection is None else "axis"
    dims = ("init", "n_components", "component", feature)
    data = {
        "means": (dims, padded_means),
        "weights": (dims[:3], padded_weights),
        "mean_entropy": (dims[:2], mean_entropy.reshape(Q, G - 1)),
        "location": (("feature",), location),
        "feature_index": (("feature",), np.asarray(feature_index).astype(np.int64)),
    }
    if projection is not None:
        data["projection"] = (("feature", "axis"), projection)
        if projection_variance_ratio is not None:
            data["projection_variance_ratio"] = (("axis",), projection_variance_ratio)
    if covariance_type == "diag":
        data["variances"] = (dims, second)
        if rho is not None:
            data["missing_probs"] = (dims, rho)
    else:
        data["covariances"] = ((*dims, "feature_"), second)
    return xr.Dataset(
        data,
        coords=coords,
        attrs={
            "n_estimators": Q,
            "n_inits": Q,  # the key before n_estimators: kept for readers
            "max_components": G,
            **(attrs or {}),
            "covariance_type": covariance_type,
            "description": GMM_DESCRIPTION,
        },
    )
