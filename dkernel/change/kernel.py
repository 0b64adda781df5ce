"""Kernel MAD: MAD variates from regularised kernel CCA of the two dates' bands.

Each date's bands are standardised on the fit sample (so that a global gain and offset per
band between the dates changes nothing), then :class:`dkernel.KernelCCA` finds the canonical
pairs ``f(x)``, ``g(y)`` of maximal correlation in the two RBF feature spaces; the kernel MAD
variates are ``f(x) - g(y)`` of the pairs, least correlated first, and the change intensity
``Z = Σ_i (MAD_i / σ_i)²`` with ``σ_i`` their standard deviation on the fit sample. Where the
relation between the dates is non-linear (a class that brightens while another darkens)
linear MAD counts the departure from the best *linear* fit as change; kernel MAD follows
the non-linear relation and keeps Z low on unchanged land.

The fit sees a sample of pixels (exact kernel CCA up to ``n_landmarks`` pixels, Nyström
features beyond); the transform is O(n_landmarks) kernel evaluations per pixel.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from dkernel.cca import KernelCCA
from dkernel.change.mad import check_pair
from dkernel.kernels.widths import KERNEL_MAD_SIGMA_FRACTION


@dataclass(frozen=True)
class KernelMADTransform:
    """A fitted kernel MAD: the standardisation, the kernel CCA and the variates' scales.

    Attributes
    ----------
    x_mean, x_scale, y_mean, y_scale : ndarray
        Per-band standardisation of each date (from the fit sample).
    cca : KernelCCA
        The fitted kernel CCA.
    order : ndarray (k,)
        Canonical pairs by increasing correlation.
    correlations : ndarray (k,)
        Training canonical correlations, increasing.
    sigma : ndarray (k,)
        Standard deviations of the MAD variates on the fit sample.
    """

    x_mean: np.ndarray
    x_scale: np.ndarray
    y_mean: np.ndarray
    y_scale: np.ndarray
    cca: Any
    order: np.ndarray
    correlations: np.ndarray
    sigma: np.ndarray

    def _raw(self, X: np.ndarray, Y: np.ndarray) -> np.ndarray:
        Xs = (np.asarray(X, np.float64) - self.x_mean) / self.x_scale
        Ys = (np.asarray(Y, np.float64) - self.y_mean) / self.y_scale
        U, V = self.cca.transform(Xs, Ys)
        return (np.asarray(U) - np.asarray(V))[:, self.order]

    def variates(self, X: np.ndarray, Y: np.ndarray) -> np.ndarray:
        """Kernel MAD variates ``(n, k)`` of pixel rows ``X`` (before) and ``Y`` (after)."""
        return self._raw(X, Y)

    def intensity(self, mad: np.ndarray) -> np.ndarray:
        """``Z = Σ_i (MAD_i / σ_i)²``."""
        return np.sum((np.asarray(mad, np.float64) / self.sigma) ** 2, axis=1)


def _scale(V: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    mean, std = V.mean(axis=0), V.std(axis=0)
    return mean, np.where(std > 0, std, 1.0)


def fit_kernel_mad(
    X: np.ndarray,
    Y: np.ndarray,
    *,
    n_components: int | None = None,
    regularization: float = 0.01,
    n_landmarks: int = 500,
    sigma_fraction: float = KERNEL_MAD_SIGMA_FRACTION,
    random_state: int | None = None,
) -> KernelMADTransform:
    """Fit kernel MAD on the pixel rows ``X`` (before) and ``Y`` (after).

    Parameters
    ----------
    X, Y : ndarray (n, p), (n, q)
        Band values of the same pixels at the two dates (a sample of the scene).
    n_components : int, optional
        Canonical pairs; ``min(p, q)`` (as linear MAD) by default.
    regularization : float
        κ of :class:`dkernel.KernelCCA`.
    n_landmarks : int
        Nyström landmarks per date (exact kernel CCA when ``n <= n_landmarks``).
    sigma_fraction : float
        RBF width of each date: this fraction of the median pairwise distance.
    random_state : int, optional
        Seed of the landmarks.

    Returns
    -------
    KernelMADTransform

    Notes
    -----
    Cost: :class:`dkernel.KernelCCA`'s, O(n m (p + m)) with ``m = n_landmarks``.
    """
    X, Y = check_pair(X, Y)
    k = int(n_components or min(X.shape[1], Y.shape[1]))
    mx, sx = _scale(X)
    my, sy = _scale(Y)
    cca = KernelCCA(
        k,
        regularization=regularization,
        n_landmarks=n_landmarks,
        sigma_fraction=sigma_fraction,
        random_state=random_state,
    ).fit((X - mx) / sx, (Y - my) / sy)
    order = np.argsort(cca.canonical_correlations_, kind="stable")
    U, V = cca.transform((X - mx) / sx, (Y - my) / sy)
    mad = (np.asarray(U) - np.asarray(V))[:, order]
    sigma = np.maximum(mad.std(axis=0), np.finfo(float).eps)
    return KernelMADTransform(
        mx, sx, my, sy, cca, order, np.asarray(cca.canonical_correlations_)[order], sigma
    )
