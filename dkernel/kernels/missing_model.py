"""What a missing entry is expected to be: a Gaussian of the columns, fitted with NaN by EM.

The expected squared distance between rows with missing entries (:mod:`dkernel.kernels.missing`)
needs, for each row, the mean of its missing entries and the total variance left about them:

``E‖x − y‖² = ‖x̃ − ỹ‖² + r_x + r_y``,   ``x̃_M = E[x_M | x_O]``,   ``r_x = tr Cov[x_M | x_O]``

for independent draws of the two rows' missing parts (``M`` the missing columns of x, ``O``
the observed). :class:`MissingValueModel` gives both under a multivariate Gaussian
``N(μ, Σ)`` of the columns, fitted to the observed values by EM (Little & Rubin 2002,
§11.2 [LittleRubin2002]; Dempster, Laird & Rubin 1977 [Dempster1977]): the conditional mean
is the regression of the missing columns on the observed ones, and the conditional variance
is what that regression leaves, so a missing pixel next to observed ones is filled from them
and counts little, where the column's mean and variance treated it as unknown. Columns
independent (``Σ`` diagonal) is the special case, the column means and variances: it is what
rows of more than :data:`FULL_COVARIANCE_MAX_COLUMNS` columns get (the full model is
O(p²) memory).

Measured on the 9 sets with missing values of ``benchmarks/bench_realdata.py`` (3 000-row
samples, seeds 0–2; ``benchmarks/results/realdata.md``), see :class:`MissingValueModel`.

NumPy only (no Dask, no I/O).
"""

from __future__ import annotations

import hashlib

import numpy as np

from dkernel._cache import LRUCache
from dkernel._random import systematic_rows
from dkernel.errors import InvalidInputError, NumericalWarning, warn_caller

#: The full model's conditional moments cost a solve of the missing block per row (and per
#: pattern in every EM iteration): O(|M|³). Where rows miss more than this many entries (the
#: cube root of the mean of |M|³ over the fitted rows), the model keeps independent columns.
#: The holed MNIST rows miss up to 196 of 648 (EM 5 s, filling 3 000 rows 0.7 s); 250 would
#: cost twice that.
FULL_COVARIANCE_MAX_MISSING = 200
#: Rows the model is fitted on at most (evenly spaced rows of larger inputs).
MISSING_MODEL_SAMPLE = 2000
#: Columns up to which the model is a full-covariance Gaussian (above: independent columns).
FULL_COVARIANCE_MAX_COLUMNS = 1000
#: EM iterations at most, and the stopping change of the moments (relative to their scale).
#: Ten: a column observed in few rows keeps drifting for hundreds of iterations (its covariance
#: is barely determined), and each iteration costs a solve per pattern of missing entries;
#: the measurements in ``docs/real_data.md`` are of this schedule.
EM_MAX_ITER = 10
EM_TOL = 1e-4
#: Fitted models (and fills) kept by the content of the rows they came from: an estimator
#: that builds several kernels or graphs of one X (widths compared, a neighbour index and a
#: kernel) fits one model and fills each block of rows once.
CACHED_MODELS = 4
CACHED_FILLS = 8
#: Inputs larger than this are filled without keeping the result (a Dask chunk's rows).
CACHED_FILL_BYTES = 32 * 2**20
#: The covariance's ridge, a fraction of its mean variance, so every observed block of it is
#: invertible (constant and collinear columns).
COVARIANCE_RIDGE = 1e-3


def column_moments(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and variance of the observed values of every column (0 and 0 for an empty column).

    Notes
    -----
    O(N p).
    """
    X = np.asarray(X, dtype=np.float64)
    observed = ~np.isnan(X)
    count = observed.sum(axis=0)
    safe = np.maximum(count, 1)
    mean = np.where(observed, X, 0.0).sum(axis=0) / safe
    centred = np.where(observed, X - mean, 0.0)
    var = (centred * centred).sum(axis=0) / safe
    return mean, var


#: Fitted models by the content of their rows (one per worker process, shared by its threads).
_MODELS: LRUCache[MissingValueModel] = LRUCache(CACHED_MODELS)


def _digest(A: np.ndarray) -> tuple:
    """The content of an array, for the caches: shape, dtype and a hash of the bytes."""
    A = np.ascontiguousarray(A)
    return A.shape, A.dtype.str, hashlib.blake2b(A.view(np.uint8).ravel(), digest_size=16).digest()


def warn_of_empty_rows(X: np.ndarray) -> None:
    """Warn, at the caller's line, when rows of the training data ``X`` have no observed value.

    Such a row carries no information: every distance-based kernel and graph puts it at the
    data's expected value (the model's mean), all of them alike, so it takes the label of
    whichever cluster lies there. (``MeanShift`` makes them nodata instead, and the PCK gives
    them the mixture weights; both say so.)
    """
    empty = int(np.isnan(X).all(axis=1).sum())
    if empty:
        warn_caller(
            f"{empty} of {X.shape[0]} rows have no observed value: each is placed at the "
            "data's mean, all of them alike, and takes the label of the cluster there. Drop "
            "them (X[~np.isnan(X).all(axis=1)]) or treat their labels as unknown.",
            NumericalWarning,
        )


def model_rows(n: int) -> np.ndarray:
    """The rows of ``n`` that :meth:`MissingValueModel.fit` uses: all of them up to
    :data:`MISSING_MODEL_SAMPLE`, else that many evenly spaced (no seed: the model is a
    function of the data)."""
    return systematic_rows(n, MISSING_MODEL_SAMPLE)


def _patterns(missing: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """``(rows, missing columns)`` of every pattern of missing entries that misses any."""
    incomplete = np.flatnonzero(missing.any(axis=1))
    if incomplete.size == 0:
        return []
    patterns, inverse = np.unique(missing[incomplete], axis=0, return_inverse=True)
    inverse = inverse.ravel()
    order = np.argsort(inverse, kind="stable")
    bounds = np.searchsorted(inverse[order], np.arange(len(patterns) + 1))
    return [
        (incomplete[order[a:b]], np.flatnonzero(pattern))
        for pattern, a, b in zip(patterns, bounds[:-1], bounds[1:], strict=True)
    ]


class MissingValueModel:
    """A Gaussian ``N(μ, Σ)`` of the columns whose conditional moments fill missing entries.

    ``fill`` returns each row with its missing entries at ``E[x_M | x_O]`` and
    ``r = tr Cov[x_M | x_O]`` (both from the precision ``Λ = (Σ + εI)⁻¹``:
    ``Cov[x_M | x_O] = Λ_MM⁻¹`` and ``E[x_M | x_O] = μ_M − Λ_MM⁻¹ Λ_MO (x_O − μ_O)``, one
    solve of the size of the missing block per pattern of missing entries). With a diagonal
    ``Σ`` (``covariance`` a vector) these are the column means and the sum of the missing
    columns' variances.

    Parameters
    ----------
    mean : ndarray (p,)
    covariance : ndarray (p, p) or (p,)
        The full covariance, or the variances of independent columns.

    Notes
    -----
    Measured against the columns' means and variances (the model before issue 57's last
    change) on the 9 sets with missing values of ``benchmarks/bench_realdata.py``: see
    ``docs/real_data.md``.
    """

    def __init__(self, mean: np.ndarray, covariance: np.ndarray) -> None:
        self.mean = np.asarray(mean, dtype=np.float64)
        self.covariance = np.asarray(covariance, dtype=np.float64)
        p = self.mean.size
        if self.mean.ndim != 1 or self.covariance.shape not in ((p,), (p, p)):
            raise InvalidInputError(
                f"covariance has shape {self.covariance.shape}; expected ({p},) or ({p}, {p}) "
                f"for a mean of {p} columns."
            )
        self.independent = self.covariance.ndim == 1
        self._precision = None if self.independent else np.linalg.inv(_ridged(self.covariance))
        self._fills: LRUCache[tuple[np.ndarray, np.ndarray]] = LRUCache(CACHED_FILLS)

    def __getstate__(self) -> dict:
        return {"mean": self.mean, "covariance": self.covariance}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["mean"], state["covariance"])  # type: ignore[misc]

    @classmethod
    def fit(cls, X: np.ndarray) -> MissingValueModel:
        """The model of the rows X (NaN = missing), fitted on the :func:`model_rows` of X: EM
        for a full-covariance Gaussian up to :data:`FULL_COVARIANCE_MAX_COLUMNS` columns, the
        columns' moments above, where rows miss more than
        :data:`FULL_COVARIANCE_MAX_MISSING` entries, or for fewer than 3 rows; the sample
        mean and covariance (divided by N, as EM's) of complete rows.

        Notes
        -----
        Each EM iteration: one p × p inversion and, per pattern of missing entries, one
        inversion of the missing block; O(N p²) for the moments. Deterministic.
        """
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2:
            raise InvalidInputError(f"expected a 2-D array; got shape {X.shape}.")
        X = np.ascontiguousarray(X[model_rows(X.shape[0])])
        return _MODELS.get(_digest(X), lambda: cls._fit_rows(X))

    @classmethod
    def _fit_rows(cls, X: np.ndarray) -> MissingValueModel:
        mean, var = column_moments(X)
        missing = np.isnan(X)
        if X.shape[1] > FULL_COVARIANCE_MAX_COLUMNS or X.shape[0] < 3:
            return cls(mean, var)
        if np.mean(missing.sum(axis=1) ** 3.0) > FULL_COVARIANCE_MAX_MISSING**3:
            return cls(mean, var)
        if not missing.any():
            centred = X - mean
            return cls(mean, centred.T @ centred / X.shape[0])
        return cls(*_em(X, missing, mean, var))

    @property
    def variances(self) -> np.ndarray:
        """The columns' variances (the diagonal of ``Σ``)."""
        return self.covariance if self.independent else np.diag(self.covariance).copy()

    def _check(self, X: np.ndarray) -> np.ndarray:
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2 or X.shape[1] != self.mean.size:
            raise InvalidInputError(
                f"expected a 2-D array with {self.mean.size} columns (those of the data the "
                f"missing-value model was fitted on); got shape {X.shape}."
            )
        return X

    def fill(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Rows of X with their NaN at the conditional means, and each row's ``r``.

        Parameters
        ----------
        X : ndarray (n, p)

        Returns
        -------
        filled : ndarray (n, p)
        extra : ndarray (n,)
            0 for complete rows.

        Notes
        -----
        One inversion of the missing block per pattern of missing entries among the rows,
        O(|M|³), and O(n p |M|) for the conditional means; rows sharing a pattern (a table's
        few gaps) share the inversion, rows with holes of their own (images) do not.
        """
        X = self._check(X)
        if self.independent or X.nbytes > CACHED_FILL_BYTES:
            return self._fill(X)
        filled, extra = self._fills.get(_digest(X), lambda: self._fill(X))
        return filled.copy(), extra.copy()  # callers may change them in place

    def _fill(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        missing = np.isnan(X)
        filled = np.where(missing, self.mean[None, :], X)
        extra = np.zeros(X.shape[0])
        if self.independent:
            return filled, missing.astype(np.float64) @ self.covariance
        for rows, M in _patterns(missing):
            C, shift = _conditional(self._precision, self.mean, X[rows], M)
            filled[np.ix_(rows, M)] = shift
            extra[rows] = np.trace(C)
        return filled, extra


def _ridged(covariance: np.ndarray) -> np.ndarray:
    scale = float(np.mean(np.diag(covariance)))
    ridge = COVARIANCE_RIDGE * (scale if scale > 0 else 1.0)
    return covariance + ridge * np.eye(covariance.shape[0])


def _conditional(
    precision: np.ndarray, mean: np.ndarray, rows: np.ndarray, M: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``Cov[x_M | x_O]`` (|M|, |M|) and the conditional means (rows, |M|) of rows that miss
    the columns ``M`` (and observe the others)."""
    O = np.setdiff1d(np.arange(mean.size), M, assume_unique=True)
    C = np.linalg.inv(precision[np.ix_(M, M)])
    C = 0.5 * (C + C.T)
    shift = np.broadcast_to(mean[M], (rows.shape[0], M.size)).copy()
    if O.size:
        shift -= ((rows[:, O] - mean[O]) @ precision[np.ix_(O, M)]) @ C
    return C, shift


def _em(
    X: np.ndarray, missing: np.ndarray, mean: np.ndarray, var: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """EM for the mean and covariance of a Gaussian from rows with NaN, started from the
    mean-imputed rows' covariance (Little & Rubin's usual start; from independent columns,
    ten iterations left hawks' two columns missing in 92 % of its rows far from where EM
    settles, and the clusterings of the filled rows with them)."""
    n = X.shape[0]
    patterns = _patterns(missing)
    imputed = np.where(missing, mean, X) - mean
    covariance = imputed.T @ imputed / n
    scale = max(float(np.mean(var)), np.finfo(float).tiny)
    for _ in range(EM_MAX_ITER):
        precision = np.linalg.inv(_ridged(covariance))
        filled = np.where(missing, 0.0, X)
        residual = np.zeros_like(covariance)
        for rows, M in patterns:
            C, shift = _conditional(precision, mean, X[rows], M)
            filled[np.ix_(rows, M)] = shift
            residual[np.ix_(M, M)] += rows.size * C
        new_mean = filled.mean(axis=0)
        centred = filled - new_mean
        new_covariance = (centred.T @ centred + residual) / n
        change = max(
            float(np.max(np.abs(new_mean - mean))),
            float(np.max(np.abs(new_covariance - covariance))),
        )
        mean, covariance = new_mean, new_covariance
        if change < EM_TOL * scale:
            break
    return mean, covariance
