"""Principal axes from a second-moment matrix (the PCA projections of the PCK and of mean shift)."""

from __future__ import annotations

import numpy as np

from dkernel.linalg.eigen import fix_signs


def principal_axes(
    second_moment: np.ndarray, n_components: int | float
) -> tuple[np.ndarray, np.ndarray]:
    """The leading eigenvectors of a p × p second-moment (covariance) matrix.

    Parameters
    ----------
    second_moment : ndarray (p, p)
        Symmetric positive semi-definite.
    n_components : int or float
        The number of axes (capped at p), or, when below 1, the smallest number whose
        cumulative explained variance reaches this fraction.

    Returns
    -------
    components : ndarray (p, d)
        Orthonormal columns, sign-fixed (largest entry positive).
    variance_ratio : ndarray (d,)
        Fraction of the total variance along each axis.

    Notes
    -----
    O(p³) for the eigendecomposition.
    """
    vals, vecs = np.linalg.eigh(np.asarray(second_moment, dtype=np.float64))
    vals, vecs = np.clip(vals[::-1], 0.0, None), vecs[:, ::-1]
    total = vals.sum()
    ratio = vals / total if total > 0 else np.zeros_like(vals)
    if n_components < 1:
        d = int(np.searchsorted(np.cumsum(ratio), float(n_components) - 1e-12) + 1)
    else:
        d = int(n_components)
    d = max(1, min(d, vecs.shape[1]))
    return fix_signs(vecs[:, :d]), ratio[:d]
