"""Automatic thresholds of a change intensity: Otsu's and a two-component Gaussian mixture's.

Both work on a 1-D sample of values (the intensities of a sample of pixels) and return one
threshold; pixels above it are change. ``change_threshold`` applies them on ``sqrt(Z)`` (the
Mahalanobis length of the MAD variates), chosen by measurement: on the Taizhou pair and a
synthetic change, Otsu on ``sqrt(Z)`` gave an F1 of 0.85-1.0 where Otsu on ``log(1 + Z)`` gave
0.49-0.76 and on ``Z`` 0.08-1.0 (``benchmarks/bench_change.py``). NumPy only.
"""

from __future__ import annotations

import numpy as np

from dkernel.errors import InvalidInputError

THRESHOLDS = ("otsu", "mixture")


def _finite(values: np.ndarray) -> np.ndarray:
    v = np.asarray(values, np.float64).ravel()
    v = v[np.isfinite(v)]
    if v.size < 2 or v.min() == v.max():
        raise InvalidInputError(
            "a threshold needs at least two different finite values; the intensity is "
            "constant (the two dates are the same up to a gain and an offset?)."
        )
    return v


def otsu_threshold(values: np.ndarray, bins: int = 256) -> float:
    """Otsu's threshold: the histogram split of maximal between-class variance.

    Parameters
    ----------
    values : ndarray
        Values to split (NaN ignored).
    bins : int
        Histogram bins over ``[min, max]``.

    Returns
    -------
    float
        A bin edge; values above it form the upper class.

    Notes
    -----
    O(n + bins). Otsu (1979), "A threshold selection method from gray-level histograms",
    IEEE Trans. SMC 9.
    """
    v = _finite(values)
    counts, edges = np.histogram(v, bins=int(bins))
    centers = 0.5 * (edges[:-1] + edges[1:])
    w0 = np.cumsum(counts)[:-1].astype(np.float64)  # split after bin j: j + 1 bins below
    w1 = v.size - w0
    s0 = np.cumsum(counts * centers)[:-1]
    m0 = s0 / np.maximum(w0, 1)
    m1 = (float(counts @ centers) - s0) / np.maximum(w1, 1)
    between = w0 * w1 * (m0 - m1) ** 2
    between[(w0 == 0) | (w1 == 0)] = -1.0
    return float(edges[int(np.argmax(between)) + 1])


def _normal_pdf(x: np.ndarray, mean: float, var: float) -> np.ndarray:
    return np.exp(-0.5 * (x - mean) ** 2 / var) / np.sqrt(2 * np.pi * var)


def fit_two_gaussians(
    values: np.ndarray, *, max_iter: int = 200, tol: float = 1e-8
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """EM for a 1-D mixture of two Gaussians, started from Otsu's split.

    Returns the weights, means and variances, the component of the smaller mean first.
    """
    v = _finite(values)
    t = otsu_threshold(v)
    low = v <= t
    if low.all() or not low.any():
        low = v <= np.median(v)
    resp = np.c_[low, ~low].astype(np.float64)
    floor = 1e-6 * float(np.var(v))
    previous = -np.inf
    for _ in range(int(max_iter)):
        nk = resp.sum(axis=0) + 1e-300
        pi = nk / v.size
        mu = resp.T @ v / nk
        var = np.maximum((resp * (v[:, None] - mu) ** 2).sum(axis=0) / nk, floor)
        dens = pi * np.c_[_normal_pdf(v, mu[0], var[0]), _normal_pdf(v, mu[1], var[1])]
        total = dens.sum(axis=1) + 1e-300
        resp = dens / total[:, None]
        loglik = float(np.log(total).mean())
        if loglik - previous < tol:
            break
        previous = loglik
    order = np.argsort(mu)
    return pi[order], mu[order], var[order]


def mixture_threshold(values: np.ndarray) -> float:
    """Where a fitted two-Gaussian mixture's posterior of the upper component is 1/2.

    The root of ``log π₀ N(x; μ₀, σ₀²) = log π₁ N(x; μ₁, σ₁²)`` between the two means
    (a quadratic in x); Otsu's threshold when the mixture has no such root.

    Parameters
    ----------
    values : ndarray
        Values to split (NaN ignored).

    Returns
    -------
    float
    """
    v = _finite(values)
    pi, mu, var = fit_two_gaussians(v)
    a = 0.5 / var[1] - 0.5 / var[0]
    b = mu[0] / var[0] - mu[1] / var[1]
    c = (
        0.5 * mu[1] ** 2 / var[1]
        - 0.5 * mu[0] ** 2 / var[0]
        + np.log(pi[0] / pi[1])
        - 0.5 * np.log(var[0] / var[1])
    )
    roots = [-c / b] if abs(a) < 1e-12 * max(abs(b), 1e-300) else np.roots([a, b, c])
    inside = [float(r.real) for r in np.atleast_1d(roots) if abs(np.imag(r)) < 1e-12]
    inside = [r for r in inside if mu[0] <= r <= mu[1]]
    if not inside:
        return otsu_threshold(v)
    return min(inside, key=lambda r: abs(r - 0.5 * (mu[0] + mu[1])))


def change_threshold(intensity: np.ndarray, method: str = "otsu") -> float:
    """The change threshold of a χ² change intensity ``Z`` (found on ``sqrt(Z)``, returned on Z).

    Parameters
    ----------
    intensity : ndarray
        Intensities of a sample of pixels, >= 0.
    method : {'otsu', 'mixture'}

    Returns
    -------
    float
        Pixels with ``Z`` above it are change.
    """
    if method not in THRESHOLDS:
        raise InvalidInputError(
            f"threshold must be one of {', '.join(THRESHOLDS)} or a number; got {method!r}."
        )
    root = np.sqrt(np.maximum(np.asarray(intensity, np.float64), 0.0))
    t = otsu_threshold(root) if method == "otsu" else mixture_threshold(root)
    return float(t) ** 2
