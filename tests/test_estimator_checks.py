"""scikit-learn's common estimator checks over every exported estimator (issue 16, item 5).

One place for ``parametrize_with_checks``: every estimator ``dkernel`` exports, at its default
construction (the acceptance: 0 failed checks, at most 5 declared expected failures each,
every one with its reason), then a few non-default constructions that reach other code paths
(Nyström and clustering variants, PCK's dtypes, covariances, missingness and projection).
The family test files keep what is specific to each estimator (pickling, ``GridSearchCV``
over a pipeline, ``set_output``, Dask input).
"""

from __future__ import annotations

import warnings

from sklearn.base import BaseEstimator
from sklearn.utils.estimator_checks import parametrize_with_checks

import dkernel
from dkernel.errors import DKernelWarning
from dkernel.ranking.jrc import DegenerateClusterWarning

#: Exported estimators whose ``fit`` takes no ``X`` array, so scikit-learn's checks cannot run
#: them (each has its own tests).
NOT_ARRAY_ESTIMATORS = {
    "ChangeDetection": "fits two co-registered rasters (before, after); tests/change checks it",
}

#: Every estimator class that ``dkernel`` exports (a new export is checked automatically).
EXPORTED = sorted(
    (
        obj
        for obj in (getattr(dkernel, name) for name in dkernel.__all__)
        if isinstance(obj, type)
        and issubclass(obj, BaseEstimator)
        and obj.__name__ not in NOT_ARRAY_ESTIMATORS
    ),
    key=lambda cls: cls.__name__,
)

_NAN_LABEL = "predict gives rows with NaN the label -1 (masked pixels) instead of raising"
_TEN_POINTS = "the default 10-NN graph needs more than the check's 10 samples"

#: Checks that fail by design, with the reason (scikit-learn's ``expected_failed_checks``);
#: at most 5 per estimator (``test_expected_failures_are_few_and_explained``).
EXPECTED_FAILED_CHECKS: dict[str, dict[str, str]] = {
    "MeanShift": {"check_estimators_nan_inf": _NAN_LABEL},
    "MSSC": {"check_estimators_nan_inf": _NAN_LABEL},
    "JointRankingClustering": {
        "check_estimators_nan_inf": _TEN_POINTS,
        "check_fit2d_1feature": _TEN_POINTS,
    },
}

#: Warnings the checks' tiny or structureless data rightly raise (category, message start);
#: the test suite turns every other DKernelWarning into an error.
EXPECTED_WARNINGS: dict[str, list[tuple[type[Warning], str]]] = {
    # 60 rows at most: half of them (the subsample) are fewer than the default G = 30, so G
    # is capped with a warning
    "ProbabilisticClusterKernel": [
        (DKernelWarning, "The subsample of ProbabilisticClusterKernel has"),
    ],
    # the same capped G, of the kernel it fits
    "PCKSpectralClustering": [
        (DKernelWarning, "The subsample of ProbabilisticClusterKernel has"),
    ],
    # structureless noise: a one-point cluster is rightly reported
    "JointRankingClustering": [(DegenerateClusterWarning, "JointRankingClustering: ")],
}

#: Non-default constructions for the code paths the defaults do not reach.
VARIANTS = [
    dkernel.SpectralClustering(n_landmarks=20, random_state=0),
    dkernel.KernelPCAEmbedding(n_clusters=2, random_state=0),
    dkernel.KECA(n_clusters=2, random_state=0),
    dkernel.NystromEmbedding(embedding="normalized", degrees="landmarks"),
    dkernel.ProbabilisticClusterKernel(n_inits=3, max_components=3, random_state=0),
    dkernel.ProbabilisticClusterKernel(
        n_inits=3, max_components=3, random_state=0, dtype="float64"
    ),
    dkernel.ProbabilisticClusterKernel(
        n_inits=3, max_components=3, random_state=0, covariance_type="full"
    ),
    dkernel.ProbabilisticClusterKernel(
        n_inits=3, max_components=3, random_state=0, missingness="informative"
    ),
    # float32 posteriors of projected rows differ in the last bits (5e-7 absolute, above the
    # check's atol=1e-7) between a batch and its subset: BLAS blocking, not a bug
    dkernel.ProbabilisticClusterKernel(
        n_inits=3, max_components=3, random_state=0, projection=1, dtype="float64"
    ),
    # the normalised embedding of a sparse Γ, and the subsample route of a lazy one
    dkernel.PCKSpectralClustering(
        pck=dkernel.ProbabilisticClusterKernel(n_inits=3, max_components=3),
        embedding="normalized",
        placement="sparse",
        random_state=0,
    ),
    dkernel.PCKSpectralClustering(
        pck=dkernel.ProbabilisticClusterKernel(n_inits=3, max_components=3),
        placement="lazy",
        chunk_rows=16,
        random_state=0,
    ),
    # kernel k-means: Nyström features on a sample, K chosen by BIC from a KPCA start, and the
    # landmark kernel's own sparse features
    dkernel.KernelKMeans(solver="nystrom", n_landmarks=20, kmeans_sample=30, random_state=0),
    dkernel.KernelKMeans("auto", max_clusters=4, init="kpca", random_state=0),
    dkernel.KernelKMeans(kernel="landmark", random_state=0),
    dkernel.KernelCCA(solver="nystrom", n_landmarks=10, random_state=0),
]


def expected_failed_checks(estimator: BaseEstimator) -> dict[str, str]:
    """The declared expected failures of ``estimator``'s class (check name -> reason)."""
    return EXPECTED_FAILED_CHECKS.get(type(estimator).__name__, {})


def _run(estimator: BaseEstimator, check) -> None:
    with warnings.catch_warnings():
        for category, message in EXPECTED_WARNINGS.get(type(estimator).__name__, ()):
            warnings.filterwarnings("ignore", message=message, category=category)
        check(estimator)


def test_every_exported_estimator_is_checked():
    names = {cls.__name__ for cls in EXPORTED}
    assert len(names) == 13, names
    assert set(EXPECTED_FAILED_CHECKS) <= names and set(EXPECTED_WARNINGS) <= names


def test_expected_failures_are_few_and_explained():
    for name, checks in EXPECTED_FAILED_CHECKS.items():
        assert len(checks) <= 5, name
        assert all(check.startswith("check_") and reason for check, reason in checks.items())


@parametrize_with_checks([cls() for cls in EXPORTED], expected_failed_checks=expected_failed_checks)
def test_default_construction(estimator, check):
    _run(estimator, check)


@parametrize_with_checks(VARIANTS, expected_failed_checks=expected_failed_checks)
def test_other_code_paths(estimator, check):
    _run(estimator, check)
