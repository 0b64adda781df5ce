"""Feature maps by name (``dkernel._feature_maps``): how ``kernel='pck'`` reaches gmm's
estimator without ranking importing the gmm family."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from sklearn.datasets import make_blobs

from dkernel._feature_maps import FEATURE_MAPS, make_feature_map, register_feature_map
from dkernel.errors import InvalidInputError


def test_pck_is_registered_by_the_package():
    from dkernel.gmm.pck import ProbabilisticClusterKernel

    pck = make_feature_map("pck", random_state=3)
    assert type(pck) is ProbabilisticClusterKernel and pck.random_state == 3
    assert not hasattr(pck, "n_features_out_")  # unfitted


def test_unknown_names_and_double_registration():
    with pytest.raises(
        InvalidInputError, match=r"unknown feature map 'nope'\. Valid feature maps: .*pck"
    ):
        make_feature_map("nope")
    factory = FEATURE_MAPS["pck"]
    register_feature_map("pck", factory)  # the same factory again: nothing changes
    with pytest.raises(ValueError, match="'pck' is already registered"):
        register_feature_map("pck", lambda **params: None)
    assert FEATURE_MAPS["pck"] is factory


def test_kppr_with_pck_by_name_equals_the_explicit_estimator():
    from dkernel.gmm.pck import ProbabilisticClusterKernel
    from dkernel.ranking import KernelPersonalizedPageRank

    X, _ = make_blobs(n_samples=150, centers=3, n_features=3, random_state=0)
    by_name = KernelPersonalizedPageRank(kernel="pck", random_state=5).fit(X[::2])
    explicit = KernelPersonalizedPageRank(
        kernel=ProbabilisticClusterKernel(random_state=5), random_state=5
    ).fit(X[::2])
    assert by_name.kernel_params_["kernel"] == "pck"
    np.testing.assert_array_equal(by_name.rank(0), explicit.rank(0))
    np.testing.assert_array_equal(
        by_name.score_samples(X[1::2], 0), explicit.score_samples(X[1::2], 0)
    )


def test_ranking_alone_resolves_pck():
    """A fresh process that imports only dkernel.ranking still gets kernel='pck'."""
    code = (
        "import sys, numpy as np\n"
        "from dkernel.ranking import KernelPersonalizedPageRank\n"
        "assert 'dkernel.gmm.pck' not in sys.modules\n"
        "X = np.random.default_rng(0).normal(size=(70, 2))\n"
        "m = KernelPersonalizedPageRank(kernel='pck', random_state=0).fit(X)\n"
        "assert type(m.kernel_.transformer).__name__ == 'ProbabilisticClusterKernel'\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
