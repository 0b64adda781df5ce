"""Choosing an RBF width for a clustering: the estimator fitted at a few widths, the partition
kept whose silhouette is highest in the feature space of one reference kernel
(``sigma_fraction='auto'`` of ``KernelKMeans`` and ``KernelPCAEmbedding``).

No one width suits a kernel clustering everywhere: a narrow kernel (half the median distance)
follows non-convex groups drawn in the plane, a wide one (twice the median distance, nearly
k-means) keeps the unequal, overlapping classes of real tables together where the narrow one
splits them evenly. Each candidate partition is scored by its silhouette (Rousseeuw 1987
[Rousseeuw1987]) with the distances ``‖φ(x) − φ(y)‖ = √(2 − 2 k(x, y))`` of one fixed RBF
kernel, ``SILHOUETTE_SIGMA_FRACTION`` = 0.5 × the median distance, so that the scores compare
partitions, not kernels.

Measured with ``benchmarks/bench_realdata.py``'s harness (35 real sets × seeds 0-2, 3 000-row
samples; mean ARI / sets ≥ k-means' 0.397) and the 23-set suite of
``benchmarks/bench_defaults.py`` (2 000 points, seed 0):

* ``KernelKMeans``: the width 0.5 alone 0.393 / 17, suite 0.578; 2.0 alone 0.404 / 21, suite
  0.561; the candidates 0.5, 1, 2 scored by the Euclidean silhouette 0.405 / 22, suite 0.568;
  by the silhouette in the 0.5 kernel 0.419 / 22, suite 0.589.
* ``KernelPCAEmbedding`` with ``n_clusters``: 1/√2 alone 0.394 / 20, suite 0.560; 2.0 alone
  0.401 / 17; the candidates 1/√2, 1, 2 scored in the 0.5 kernel 0.407 / 23, suite 0.566 (in
  the 1/√2 kernel 0.401 / 17, by the Euclidean silhouette 0.403 / 18).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from dkernel._random import derive_rng
from dkernel._validation import as_numpy
from dkernel.errors import warn_caller
from dkernel.kernels.registry import make_kernel
from dkernel.kernels.widths import SILHOUETTE_SIGMA_FRACTION
from dkernel.metrics import mean_silhouette
from dkernel.rows import take_rows

#: Rows the widths are compared on (a uniform sample above; O(rows²) kernel and distances).
WIDTH_SAMPLE = 3000
#: ``verify``: the next setting is fitted on every row while its sample score exceeds the
#: best score verified so far by more than this.
VERIFY_TOLERANCE = 0.01
#: At most this many settings are fitted on every row when verifying (the best first).
MAX_VERIFIED_FITS = 3


def kernel_silhouette(K: np.ndarray, labels: np.ndarray) -> float:
    """Mean silhouette of ``labels`` in the feature space of a kernel with ``k(x, x) = 1``.

    Parameters
    ----------
    K : ndarray of shape (n, n)
        Kernel matrix of the points (an RBF kernel: unit self-similarity).
    labels : ndarray of shape (n,)

    Returns
    -------
    float
        In [-1, 1]; ``UNDEFINED_SILHOUETTE`` when ``labels`` has one cluster or one per point.
    """
    D = np.sqrt(np.clip(2.0 - 2.0 * np.asarray(K, dtype=np.float64), 0.0, None))
    np.fill_diagonal(D, 0.0)
    return mean_silhouette(D, labels, metric="precomputed")


def width_sample(n: int, rng: np.random.Generator) -> np.ndarray | None:
    """Sorted rows the widths are compared on, or None for all ``n``."""
    if n <= WIDTH_SAMPLE:
        return None
    return np.sort(rng.choice(n, size=WIDTH_SAMPLE, replace=False))


def reference_kernel(sample: np.ndarray, seed: int | None) -> np.ndarray:
    """The RBF kernel matrix of ``sample`` at ``SILHOUETTE_SIGMA_FRACTION`` × its median
    distance (rows with NaN compared by their expected distances, as the estimators do)."""
    kernel = make_kernel("rbf", sample, sigma_fraction=SILHOUETTE_SIGMA_FRACTION, seed=seed)
    return np.asarray(kernel(sample), dtype=np.float64)


class SettingChoice(NamedTuple):
    """The outcome of :func:`choose_setting`."""

    #: The first of the highest-scoring settings.
    setting: dict[str, Any]
    #: Every setting compared, in order, and its :func:`kernel_silhouette`.
    settings: list[dict[str, Any]]
    scores: np.ndarray
    #: The clone fitted with ``setting`` when it saw every row of ``X`` (the fit itself, which
    #: the caller may adopt), else None.
    model: Any
    #: ``verify`` above the sample: each setting's partition fitted on every row, scored on
    #: the sample's rows (NaN: not fitted on every row); None otherwise.
    verified_scores: np.ndarray | None = None


def choose_setting(
    estimator: Any,
    X: Any,
    seed: int | None,
    settings: Sequence[dict[str, Any]],
    *,
    verify: bool = False,
    **overrides: Any,
) -> SettingChoice:
    """The parameter setting (a width, with other parameters) whose partition scores highest.

    Parameters
    ----------
    estimator : clusterer with ``labels_``
        Its clones, one per setting (with ``overrides`` set), are fitted on at most
        ``WIDTH_SAMPLE`` rows of ``X``; their warnings are left to the final fit.
    X : ndarray or dask array of shape (n, p)
        Validated training data.
    seed : int, optional
        Seeds the sample, the reference width's median and every clone.
    settings : sequence of dict
        The parameter values compared, each a ``set_params`` mapping.
    verify : bool
        Above ``WIDTH_SAMPLE`` rows, fit the best-scored setting on every row and score that
        partition on the sample's rows too (:func:`verified_fit`): a setting whose fit on
        every row is not the partition its sample fit scored gives way to the next one. The
        fit on every row is returned as ``model``.
    """
    from sklearn.base import clone

    rows = width_sample(int(X.shape[0]), derive_rng(seed, "width-selection"))
    sample = as_numpy(X, np.float64) if rows is None else take_rows(X, rows, np.float64)
    models = []
    # the clones of one comparison fit the same sample: what settings with the same width
    # have in common (KECA's eigenpairs) may be kept here by the estimator and reused
    shared: dict[Any, Any] = {}
    for setting in settings:
        model = clone(estimator).set_params(random_state=seed, **setting, **overrides)
        model._width_selection_shared = shared
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            models.append(model.fit(sample))
    reference = reference_kernel(sample, seed)
    scores = np.array([kernel_silhouette(reference, model.labels_) for model in models])
    best = int(np.argmax(scores))
    model, verified = (models[best] if rows is None else None), None
    if rows is not None and verify:
        best, model, verified = verified_fit(
            estimator, X, rows, reference, settings, scores, seed, overrides
        )
    return SettingChoice(dict(settings[best]), [dict(s) for s in settings], scores, model, verified)


def verified_fit(
    estimator: Any,
    X: Any,
    rows: np.ndarray,
    reference: np.ndarray,
    settings: Sequence[dict[str, Any]],
    scores: np.ndarray,
    seed: int | None,
    overrides: dict[str, Any],
) -> tuple[int, Any, np.ndarray]:
    """The setting whose fit on every row scores best on the sample, trying the settings in
    the order of their sample scores.

    A sample of ``WIDTH_SAMPLE`` rows can score a setting whose fit on every row is another
    partition: KECA ranks its axes by their entropy contributions, which past the first are
    near zero and noisy, so the rows change which axes are kept. Three overlapping 4-D blobs
    at 20 000 rows (``benchmarks/bench_kpca_scale.py``, seed 0): k axes at 0.35 × the median
    scored 0.2198 on the sample, tied with 2k axes; fitted on every row they kept other axes
    (0.135 on the sample, ARI 0.47), where 2k axes keep theirs (0.2197, ARI 0.88). The next
    setting is fitted while its sample score exceeds the best verified score by more than
    ``VERIFY_TOLERANCE``, at most ``MAX_VERIFIED_FITS`` fits; the one taken is that of the
    highest verified score. When the best-scored setting holds, it is the one fit on every
    row that the estimator needed anyway.

    Returns
    -------
    (index of the setting, its fit on every row, verified scores with NaN where not fitted)
    """
    from sklearn.base import clone

    verified = np.full(len(settings), np.nan)
    best, best_model, best_caught = -1, None, []
    for index in np.argsort(-scores, kind="stable")[:MAX_VERIFIED_FITS]:
        index = int(index)
        if best >= 0 and scores[index] <= verified[best] + VERIFY_TOLERANCE:
            break
        model = clone(estimator).set_params(random_state=seed, **settings[index], **overrides)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            model.fit(X)
        verified[index] = kernel_silhouette(reference, np.asarray(model.labels_)[rows])
        if best < 0 or verified[index] > verified[best]:
            best, best_model, best_caught = index, model, list(caught)
    for record in best_caught:  # the warnings of the fit adopted, at the user's line
        warn_caller(str(record.message), record.category)
    return best, best_model, verified


class WidthResolution(NamedTuple):
    """An estimator's ``sigma_fraction`` as :func:`resolve_sigma_fraction` settled it."""

    fraction: float
    #: The fraction of every setting compared and its score (None unless chosen).
    candidates: np.ndarray | None
    scores: np.ndarray | None
    #: The adoptable fit of :func:`choose_setting` (None unless chosen on every row).
    model: Any
    #: The chosen setting and every setting compared (None unless chosen).
    setting: dict[str, Any] | None
    settings: list[dict[str, Any]] | None
    #: ``SettingChoice.verified_scores`` (None unless verified).
    verified_scores: np.ndarray | None = None


def resolve_sigma_fraction(
    estimator: Any,
    X: Any,
    seed: int | None,
    *,
    candidates: Sequence[float | dict[str, Any]],
    fallback: float,
    chooses: bool,
    verify: bool = False,
    **overrides: Any,
) -> WidthResolution:
    """An estimator's ``sigma_fraction``: a number as given; 'auto' chosen among
    ``candidates`` by :func:`choose_setting` when ``chooses`` (the caller's rbf width is left
    to the data and there is a partition to score), else ``fallback``.

    ``candidates`` are fractions, or settings (``set_params`` mappings with a
    ``sigma_fraction``) when other parameters are chosen with the width; ``verify`` as for
    :func:`choose_setting`.
    """
    if estimator.sigma_fraction != "auto":
        return WidthResolution(float(estimator.sigma_fraction), None, None, None, None, None)
    if not chooses:
        return WidthResolution(float(fallback), None, None, None, None, None)
    settings = [c if isinstance(c, dict) else {"sigma_fraction": float(c)} for c in candidates]
    choice = choose_setting(estimator, X, seed, settings, verify=verify, **overrides)
    fractions = np.array([s["sigma_fraction"] for s in choice.settings], dtype=np.float64)
    return WidthResolution(
        float(choice.setting["sigma_fraction"]),
        fractions,
        choice.scores,
        choice.model,
        choice.setting,
        choice.settings,
        choice.verified_scores,
    )


def rbf_width_from_data(estimator: Any) -> bool:
    """Whether the estimator's kernel is the rbf with its width left to the rule of thumb."""
    kernel = estimator.kernel
    return isinstance(kernel, str) and kernel == "rbf" and estimator.sigma is None
