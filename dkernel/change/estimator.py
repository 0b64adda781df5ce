"""``ChangeDetection``: MAD, IR-MAD or kernel MAD between two co-registered rasters, fitted on a
sample of the pixels valid at both dates and mapped strip by strip with Dask; or between the two
halves of a pixel table (the before bands, then the after bands), as a scikit-learn transformer."""

from __future__ import annotations

import os
from numbers import Integral, Real
from typing import Any

import dask.array as da
import numpy as np
import xarray as xr
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.utils._param_validation import Interval, StrOptions

from dkernel._budget import rows_of_max_samples
from dkernel._random import derive_rng, seed_from_random_state
from dkernel._validation import (
    ParameterConstraintsMixin,
    as_numpy,
    check_is_fitted,
    max_samples_constraint,
    validate_input,
)
from dkernel.change.detect import METHODS, change_maps, fit_change, open_pair, sample_pixels
from dkernel.change.mad import same_up_to_affine
from dkernel.change.threshold import THRESHOLDS, change_threshold
from dkernel.errors import InvalidInputError
from dkernel.kernels.aliases import resolve_renamed
from dkernel.kernels.widths import KERNEL_MAD_SIGMA_FRACTION


def _is_image(X: Any) -> bool:
    """A raster (a path or a (band, y, x) DataArray) rather than a pixel table."""
    return isinstance(X, str | os.PathLike | xr.DataArray)


class ChangeDetection(
    ParameterConstraintsMixin, ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator
):
    """Change between two dates: MAD variates, χ² change intensity and a change mask.

    Fitted on a sample of the pixels valid at both dates (one pass over the two images);
    :meth:`transform` maps any pair on the same grid lazily, one row strip per Dask task.

    Two forms of data: two rasters, ``fit(before, after)`` and ``transform(before, after)``
    (paths or (band, y, x) DataArrays, maps as an ``xarray.Dataset``); or one pixel table
    ``X = np.hstack([before, after])``, the before date's bands in the first ``p // 2``
    columns and the after date's in the others (one more when ``p`` is odd: MAD pairs dates
    of different band counts), as a scikit-learn transformer: ``fit(X)``, ``transform(X)``
    gives the MAD variates (n_pixels, n_components) and ``predict(X)`` the change mask (1
    change, 0 no change).

    Parameters
    ----------
    method : {'kernel', 'irmad', 'mad'}, default='kernel'
        kernel: kernel MAD (kernel CCA fitted on the half of the pixels IR-MAD ranks least
        changed); irmad: iteratively re-weighted MAD; mad: MAD.
    threshold : {'otsu', 'mixture'}, default='otsu'
        Automatic threshold of sqrt(intensity): Otsu's or a two-Gaussian mixture's.
    threshold_value : float, default=None
        A fixed intensity threshold instead (e.g. the chi-squared 99 % quantile).
    n_components : int, default=None
        Kernel MAD's canonical pairs (default: the smaller band count).
    max_samples : int or float, default=20000
        Pixels the fit and the threshold see, a uniform sample of the valid pixels:
        scikit-learn's ``max_samples``, at most this many (int; all of them when there are
        fewer) or this fraction of them (float). Formerly ``sample_size``.
    regularization : float, default=0.01
        Kernel MAD: kernel CCA's regularisation κ.
    sigma_fraction : float, default=KERNEL_MAD_SIGMA_FRACTION
        Kernel MAD: RBF width per date, this fraction of the median pixel distance.
    n_landmarks : int, default=300
        Kernel MAD: Nyström landmarks.
    max_iter : int, default=50
        IR-MAD: re-weighting iterations at most.
    tol : float, default=1e-6
        IR-MAD: tolerance on the canonical correlations.
    chunk_rows : int, default=None
        Rows per strip of images read from paths or NumPy.
    random_state : int, RandomState instance or None, default=None
        Seed of the sample and of the landmarks.
    sample_size : int, optional
        Deprecated: the former name of ``max_samples`` (a ``FutureWarning``), kept for one
        release.

    Attributes
    ----------
    transformation_ : object
        The fitted MAD transformation (``variates``, ``intensity``, ``correlations``,
        ``sigma``).
    threshold_ : float
        The intensity threshold of the change mask; infinite when ``no_change_``.
    no_change_ : bool
        Whether the fitted dates are the same up to an affine map of their bands
        (``dkernel.change.mad.same_up_to_affine``): no pixel is change, whatever the
        threshold.
    correlations_ : ndarray of shape (n_components,)
        Canonical correlations of the two dates.
    n_sample_ : int
        Pixels the fit saw.

    See Also
    --------
    dkernel.detect_change : The same in one call.
    dkernel.KernelCCA : The kernel CCA behind kernel MAD.

    References
    ----------
    - MAD [Nielsen1998]; IR-MAD [Nielsen2007]; kernel CCA [MLSlides2012], [Bach2002].

    Examples
    --------
    >>> est = ChangeDetection(method="irmad").fit("before.tif", "after.tif")  # doctest: +SKIP
    >>> est.transform("before.tif", "after.tif")["labels"]  # doctest: +SKIP
    """

    _parameter_constraints: dict = {
        "method": [StrOptions(set(METHODS))],
        "threshold": [StrOptions(set(THRESHOLDS))],
        "threshold_value": [Interval(Real, 0, None, closed="left"), None],
        "n_components": [Interval(Integral, 1, None, closed="left"), None],
        "max_samples": max_samples_constraint(10),
        "regularization": [Interval(Real, 0, None, closed="left")],
        "sigma_fraction": [Interval(Real, 0, None, closed="neither")],
        "n_landmarks": [Interval(Integral, 2, None, closed="left")],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "tol": [Interval(Real, 0, None, closed="neither")],
        "chunk_rows": [Interval(Integral, 1, None, closed="left"), None],
        "random_state": ["random_state"],
        # the former name of max_samples (dkernel.kernels.aliases.RENAMED_PARAMETERS)
        "sample_size": [Interval(Integral, 10, None, closed="left"), None],
    }

    def __init__(
        self,
        method: str = "kernel",
        threshold: str = "otsu",
        threshold_value: float | None = None,
        n_components: int | None = None,
        max_samples: int | float = 20_000,
        regularization: float = 0.01,
        sigma_fraction: float = KERNEL_MAD_SIGMA_FRACTION,
        n_landmarks: int = 300,
        max_iter: int = 50,
        tol: float = 1e-6,
        chunk_rows: int | None = None,
        random_state: Any = None,
        sample_size: int | None = None,
    ) -> None:
        self.method = method
        self.threshold = threshold
        self.threshold_value = threshold_value
        self.n_components = n_components
        self.max_samples = max_samples
        self.regularization = regularization
        self.sigma_fraction = sigma_fraction
        self.n_landmarks = n_landmarks
        self.max_iter = max_iter
        self.tol = tol
        self.chunk_rows = chunk_rows
        self.random_state = random_state
        self.sample_size = sample_size

    @property
    def _expected_failed_checks(self) -> dict[str, str]:
        """scikit-learn's checks that fail by design, with the reason
        (tests/test_estimator_checks.py)."""
        if self.method == "irmad":
            return {}
        return {"check_transformer_n_iter": "n_iter_ counts IR-MAD's re-weightings: 0 here"}

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # a pixel table is split in two halves (a one-column one is refused in fit)
        tags.input_tags.two_d_array = True
        return tags

    @property
    def _n_features_out(self) -> int:
        return int(self.transformation_.sigma.size)

    def fit(self, X: Any, y: Any = None) -> ChangeDetection:
        """Fit the transformation and the threshold on a sample of the two dates.

        Parameters
        ----------
        X : str, path, xarray.DataArray (band, y, x), or array-like (n_pixels, p)
            The before raster, or the pixel table of both dates: the before bands in the
            first ``p // 2`` columns, the after bands in the others.
        y : str, path or xarray.DataArray (band, y, x), optional
            The after raster, on the before raster's grid (CRS, transform and shape); ignored
            with a pixel table.

        Returns
        -------
        self : ChangeDetection
        """
        if _is_image(X):
            self._fit(X, self._after(y))
        else:
            self._validate_params()
            before, after = self._halves(X, reset=True)
            seed = seed_from_random_state(self.random_state)
            size = rows_of_max_samples(self._max_samples(), before.shape[0])
            if before.shape[0] > size:
                rows = np.sort(
                    derive_rng(seed, "change-sample").choice(before.shape[0], size, replace=False)
                )
                before, after = before[rows], after[rows]
            self._fit_sample(before, after, seed)
        return self

    def transform(self, X: Any, y: Any = None) -> Any:
        """The MAD variates of new data (lazy maps for rasters).

        Parameters
        ----------
        X : str, path, xarray.DataArray (band, y, x), or array-like (n_pixels, p)
            The before raster, or a pixel table of both dates (as in :meth:`fit`).
        y : str, path or xarray.DataArray (band, y, x), optional
            The after raster; ignored with a pixel table.

        Returns
        -------
        xarray.Dataset or ndarray (n_pixels, n_components)
            Rasters: ``variates``, ``intensity``, ``labels`` (1 change, 0 no change, -1 no
            data) and ``valid``, with the before image's CRS (see
            :func:`dkernel.detect_change`). A pixel table: the variates (lazy, chunk by chunk,
            for a Dask array).
        """
        check_is_fitted(self, "transformation_")
        if _is_image(X):
            return change_maps(
                *open_pair(X, self._after(y), self.chunk_rows),
                self.transformation_,
                self.threshold_,
                self._attrs(),
            )
        return self._map_table(X, _variates_block)

    def predict(self, X: Any) -> Any:
        """The change mask of a pixel table: 1 where the change intensity exceeds
        ``threshold_``, else 0 (rasters: the ``labels`` of :meth:`transform`).

        Parameters
        ----------
        X : array-like (n_pixels, p)
            A pixel table of both dates (as in :meth:`fit`).

        Returns
        -------
        ndarray of int64 (n_pixels,)
        """
        check_is_fitted(self, "transformation_")
        return self._map_table(X, _labels_block)

    def fit_transform(self, X: Any, y: Any = None, **fit_params: Any) -> Any:
        """:meth:`fit`, then :meth:`transform` of the same data (rasters opened once)."""
        if not _is_image(X):
            return self.fit(X).transform(X)
        b, a, valid = self._fit(X, self._after(y))
        return change_maps(b, a, valid, self.transformation_, self.threshold_, self._attrs())

    # -- pixel tables ----------------------------------------------------------------------
    def _after(self, y: Any) -> Any:
        if y is None:
            raise InvalidInputError(
                f"{type(self).__name__} needs the after raster with the before one: "
                "fit(before, after), transform(before, after)."
            )
        return y

    def _halves(self, X: Any, *, reset: bool) -> tuple[np.ndarray, np.ndarray]:
        """The before and after halves of a pixel table (in memory: the fit's sample)."""
        X = as_numpy(validate_input(self, X, reset=reset, min_samples=3, dtype=np.float64))
        self._check_width(X.shape[1])
        half = X.shape[1] // 2
        return X[:, :half], X[:, half:]

    def _check_width(self, width: int) -> None:
        owner = type(self).__name__
        if width < 2:
            raise InvalidInputError(
                f"{owner} reads a pixel table as the before bands then the after bands, so it "
                f"needs at least 2 columns; got n_features = {width}. Pass "
                "np.hstack([before, after])."
            )

    def _map_table(self, X: Any, block: Any) -> Any:
        X = validate_input(self, X, reset=False, dtype=np.float64)
        self._check_width(int(X.shape[1]))
        t, threshold = self.transformation_, float(self.threshold_)
        if isinstance(X, da.Array):
            k = int(t.sigma.size)
            one = block is _labels_block
            return X.map_blocks(
                block,
                t,
                threshold,
                drop_axis=1 if one else None,
                chunks=X.chunks[:1] if one else (X.chunks[0], (k,)),
                dtype=np.int64 if one else np.float64,
            )
        return block(np.asarray(X), t, threshold)

    def _max_samples(self) -> int | float:
        """``max_samples``, or its former name ``sample_size`` when given (warns)."""
        return resolve_renamed(self, "max_samples")

    def _fit(self, before: Any, after: Any) -> tuple[Any, Any, Any]:
        self._validate_params()
        b, a, valid = open_pair(before, after, self.chunk_rows)
        seed = seed_from_random_state(self.random_state)
        X, Y = sample_pixels(b.data, a.data, valid, self._max_samples(), seed)
        self._fit_sample(X, Y, seed)
        return b, a, valid

    def _fit_sample(self, X: np.ndarray, Y: np.ndarray, seed: int | None) -> None:
        """Fit the transformation and the threshold on the sampled pixels of both dates."""
        t = fit_change(
            X,
            Y,
            method=self.method,
            n_components=self.n_components,
            regularization=self.regularization,
            sigma_fraction=self.sigma_fraction,
            n_landmarks=self.n_landmarks,
            max_iter=self.max_iter,
            tol=self.tol,
            random_state=seed,
        )
        self.transformation_ = t
        self.correlations_ = np.asarray(t.correlations)
        self.n_sample_ = int(X.shape[0])
        self.n_iter_ = int(getattr(t, "n_iter", 0))
        # a test of "no change" before any threshold: the dates the same up to an affine map
        # (which every method ignores) have no changed pixel, whatever their variates' noise
        self.no_change_ = same_up_to_affine(X, Y)
        if self.no_change_:
            self.threshold_ = float("inf")
        elif self.threshold_value is not None:
            self.threshold_ = float(self.threshold_value)
        else:
            self.threshold_ = change_threshold(t.intensity(t.variates(X, Y)), self.threshold)

    def _attrs(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "threshold_method": "fixed" if self.threshold_value is not None else self.threshold,
            "n_sample": self.n_sample_,
            "n_iter": self.n_iter_,
            "no_change": self.no_change_,
        }


def _variates_block(X: np.ndarray, transformation: Any, threshold: float) -> np.ndarray:
    half = X.shape[1] // 2
    return np.asarray(transformation.variates(X[:, :half], X[:, half:]), dtype=np.float64)


def _labels_block(X: np.ndarray, transformation: Any, threshold: float) -> np.ndarray:
    intensity = transformation.intensity(_variates_block(X, transformation, threshold))
    return (intensity > threshold).astype(np.int64)


# detect_change's defaults are the estimator's (its signature still shows their values)
_DEFAULTS = ChangeDetection().get_params()


def detect_change(
    before: Any,
    after: Any,
    *,
    method: str = _DEFAULTS["method"],
    threshold: str | float = _DEFAULTS["threshold"],
    n_components: int | None = _DEFAULTS["n_components"],
    max_samples: int | float = _DEFAULTS["max_samples"],
    regularization: float = _DEFAULTS["regularization"],
    sigma_fraction: float = _DEFAULTS["sigma_fraction"],
    n_landmarks: int = _DEFAULTS["n_landmarks"],
    max_iter: int = _DEFAULTS["max_iter"],
    tol: float = _DEFAULTS["tol"],
    chunk_rows: int | None = _DEFAULTS["chunk_rows"],
    random_state: int | None = _DEFAULTS["random_state"],
    sample_size: int | None = None,
) -> xr.Dataset:
    """Change between two co-registered rasters: MAD variates, χ² intensity, change mask.

    Parameters
    ----------
    before, after : str, path or xarray.DataArray (band, y, x)
        The two dates on the same grid (CRS, transform and shape); GeoTIFF paths or
        DataArrays from ``rioxarray.open_rasterio`` (NumPy- or Dask-backed). A pixel counts
        when it has data at both dates.
    method : {'kernel', 'irmad', 'mad'}
        ``'mad'``: MAD, linear CCA of the bands ([Nielsen1998]). ``'irmad'``: iteratively
        re-weighted MAD ([Nielsen2007]). ``'kernel'``: kernel MAD, regularised kernel CCA
        (:class:`dkernel.KernelCCA`, RBF per date) fitted on pixels drawn from the half
        of the sample IR-MAD ranks least changed.
    threshold : {'otsu', 'mixture'} or float
        Otsu's threshold or a two-Gaussian mixture's, on ``sqrt(Z)`` of the sample; or a
        fixed intensity (e.g. ``scipy.stats.chi2.isf(0.01, k)`` for a 1 % test of no change).
    n_components : int, optional
        Kernel MAD's canonical pairs (min of the band counts by default; linear MAD always
        has that many).
    max_samples : int or float
        Pixels (about) the fit and the threshold see: at most this many (int) or this
        fraction of the valid pixels (float). Formerly ``sample_size``.
    regularization, sigma_fraction, n_landmarks : float, float, int
        Kernel MAD: κ, RBF width as a fraction of the median distance, Nyström landmarks.
    max_iter, tol : int, float
        IR-MAD iterations and tolerance on the canonical correlations.
    chunk_rows : int, optional
        Rows per strip of the images read from paths or NumPy.
    random_state : int, optional
        Seed of the sample and of the landmarks.
    sample_size : int, optional
        Deprecated: the former name of ``max_samples`` (a ``FutureWarning``).

    Returns
    -------
    xarray.Dataset
        Lazy (Dask) maps on the before image's grid with its CRS: ``variates`` (component,
        y, x), ``intensity``, ``labels`` (the change mask: 1, 0, -1 for no data) and
        ``valid``; ``correlations`` and ``sigma`` per component; attributes ``method``,
        ``threshold`` (on Z; null when ``no_change``), ``threshold_method``, ``n_sample``,
        ``n_iter``, ``no_change`` (the dates the same up to an affine map of their bands:
        no pixel is change).

    Raises
    ------
    InvalidInputError
        Images on different grids (naming the difference), an unknown method or threshold,
        too few valid pixels.

    See Also
    --------
    dkernel.KernelCCA : The kernel CCA behind kernel MAD.

    Notes
    -----
    One pass over the two images for the sample, one for the maps when they are computed.
    Memory O(sample · bands + one strip per task). Kernel MAD's transform costs
    O(n_landmarks) kernel evaluations per pixel.

    References
    ----------
    - MAD [Nielsen1998]; IR-MAD [Nielsen2007]; kernel CCA [MLSlides2012], [Bach2002].

    Examples
    --------
    >>> ds = detect_change("before.tif", "after.tif")  # doctest: +SKIP
    >>> ds["labels"].rio.to_raster("change.tif")  # doctest: +SKIP
    """
    if not (isinstance(threshold, int | float) or threshold in THRESHOLDS):
        raise InvalidInputError(
            f"threshold must be one of {', '.join(THRESHOLDS)} or a number; got {threshold!r}."
        )
    if method not in METHODS:
        raise InvalidInputError(f"method must be one of {', '.join(METHODS)}; got {method!r}.")
    fixed = not isinstance(threshold, str)
    return ChangeDetection(
        method=method,
        threshold="otsu" if fixed else threshold,
        threshold_value=float(threshold) if fixed else None,
        n_components=n_components,
        max_samples=max_samples,
        regularization=regularization,
        sigma_fraction=sigma_fraction,
        n_landmarks=n_landmarks,
        max_iter=max_iter,
        tol=tol,
        chunk_rows=chunk_rows,
        random_state=random_state,
        sample_size=sample_size,
    ).fit_transform(before, after)
