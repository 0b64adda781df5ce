"""dkernel's warnings point at the user's line (``dkernel.errors.warn_caller``), not at
scikit-learn's wrappers or dkernel's own modules."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.datasets import make_blobs

from dkernel import MeanShift, ProbabilisticClusterKernel
from dkernel.errors import DKernelWarning, NumericalWarning, warn_caller


def _caught(fn, category):
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        fn()
    found = [w for w in seen if issubclass(w.category, category)]
    assert found, f"no {category.__name__} was emitted"
    return found[0]


def test_warn_caller_outside_the_package_is_a_plain_warning():
    w = _caught(lambda: warn_caller("plain", DKernelWarning), DKernelWarning)
    assert w.filename == __file__ and str(w.message) == "plain"


@pytest.mark.parametrize(
    ("fit", "category"),
    [
        (
            lambda X: MeanShift(max_iter=1, random_state=0).fit(X),
            DKernelWarning,  # MeanShiftConvergenceWarning, through scikit-learn's _fit_context
        ),
        (
            lambda X: ProbabilisticClusterKernel(
                n_estimators=2, max_components=3, random_state=0
            ).fit(np.column_stack([X, np.zeros(len(X))])),
            NumericalWarning,  # a zero-variance column dropped
        ),
    ],
)
def test_estimator_warnings_name_the_callers_line(fit, category):
    X, _ = make_blobs(200, centers=3, random_state=0)
    w = _caught(lambda: fit(X), category)
    assert w.filename == __file__, (w.filename, w.lineno, str(w.message))


def test_scikit_learns_feature_name_warning_names_the_callers_line():
    import pandas as pd

    from dkernel import SpectralClustering

    X, _ = make_blobs(120, centers=3, random_state=0)
    frame = pd.DataFrame(X, columns=["a", "b"])
    est = SpectralClustering(3, random_state=0).fit(frame)
    w = _caught(lambda: est.predict(X), UserWarning)
    assert "feature names" in str(w.message)
    assert w.filename == __file__, (w.filename, w.lineno, str(w.message))
    # the echo state network validates its series through the same path
    from dkernel import EchoStateNetwork

    series = pd.DataFrame({"u": np.sin(np.arange(300) / 5.0)})
    esn = EchoStateNetwork(n_components=20, random_state=0).fit(series, series)
    w = _caught(lambda: esn.predict(series.to_numpy()), UserWarning)
    assert "feature names" in str(w.message)
    assert w.filename == __file__, (w.filename, w.lineno, str(w.message))
