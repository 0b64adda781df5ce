"""PCA projection of centred data with missing values (NaN), for the PCK ensemble.

Fit: the leading eigenvectors of the second-moment matrix of the centred data with every
missing value set to 0 (the column mean: mean imputation), from one streaming pass for Dask
input. Project: a complete row ``x`` maps to ``Wᵀ x``; a row observed on the coordinates ``O``
maps to the minimum-norm least-squares coefficients ``z = (W_Oᵀ W_O)⁺ W_Oᵀ x_O`` of its observed
part, which is ``Wᵀ x`` again when nothing is missing (``W`` has orthonormal columns). A row
with no observed value stays all-NaN (the ensemble gives it the mixture weights).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dkernel._budget import SCRATCH_BLOCK_BYTES, rows_for_budget
from dkernel._validation import is_dask_array
from dkernel.linalg.pca import principal_axes


def fit_pca_projection(Xc: Any, n_components: int | float) -> tuple[np.ndarray, np.ndarray]:
    """Leading principal axes of centred ``Xc`` (NaN = missing, imputed by the column mean 0).

    ``Xc`` (ndarray or dask.array.Array, n_samples × p) is centred data; ``n_components`` and
    the returned ``(components, variance_ratio)`` are those of
    ``dkernel.linalg.pca.principal_axes``, applied to the second-moment matrix.

    Notes
    -----
    O(N p²) for the second-moment matrix (one pass) and O(p³) for its eigendecomposition.
    """
    if is_dask_array(Xc):
        import dask.array as da

        X0 = da.where(da.isnan(Xc), 0.0, Xc).astype(np.float64)
        C = np.asarray((X0.T @ X0).compute())
    else:
        X0 = np.where(np.isnan(Xc), 0.0, Xc).astype(np.float64)
        C = X0.T @ X0
    C /= max(int(Xc.shape[0]) - 1, 1)
    return principal_axes(C, n_components)


def project_observed(Xc: np.ndarray, components: np.ndarray, dtype: Any) -> np.ndarray:
    """Coordinates of the rows of centred ``Xc`` on ``components`` from their observed values.

    Complete rows: ``Xc @ W``. Rows with missing values: minimum-norm least squares on the
    observed coordinates. Rows with no observed value: NaN.

    Notes
    -----
    O(N p d) for complete rows; O(p d²) more per row with missing values (a batched
    pseudo-inverse of a d × d matrix).
    """
    X = np.asarray(Xc, dtype=np.float64)
    W = np.asarray(components, dtype=np.float64)
    obs = ~np.isnan(X)
    X0 = np.where(obs, X, 0.0)
    Z = X0 @ W
    partial = ~obs.all(axis=1)
    if partial.any():
        rows = np.flatnonzero(partial)
        step = rows_for_budget(SCRATCH_BLOCK_BYTES, W.shape[0] * W.shape[1] + 1, 8)
        for start in range(0, rows.size, step):
            r = rows[start : start + step]
            O = obs[r].astype(np.float64)
            A = np.einsum("np,pd,pe->nde", O, W, W, optimize=True)
            Z[r] = np.einsum("nde,ne->nd", np.linalg.pinv(A, rcond=1e-8, hermitian=True), Z[r])
        Z[~obs.any(axis=1)] = np.nan
    return Z.astype(dtype, copy=False)


def project_observed_dask(Xc: Any, components: np.ndarray, dtype: Any) -> Any:
    """:func:`project_observed` over the row blocks of a Dask array (lazy)."""
    X = Xc.rechunk({1: -1}) if Xc.numblocks[1] > 1 else Xc
    d = int(components.shape[1])
    return X.map_blocks(
        project_observed,
        components,
        np.dtype(dtype),
        dtype=np.dtype(dtype),
        chunks=(X.chunks[0], (d,)),
    )
