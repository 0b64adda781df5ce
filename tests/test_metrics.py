import numpy as np
import pytest
from sklearn.metrics import adjusted_rand_score

from dkernel.metrics import clustering_accuracy, clustering_scores


def _brute_force_acc(y, p):
    from itertools import permutations

    labels = np.unique(y)
    best = 0.0
    for perm in permutations(labels):
        mapping = dict(zip(np.unique(p), perm, strict=False))
        best = max(best, np.mean([mapping.get(v, -1) == t for v, t in zip(p, y, strict=True)]))
    return best


def test_accuracy_matches_brute_force_over_permutations(rng):
    y = rng.integers(0, 4, size=200)
    p = np.where(rng.random(200) < 0.7, (y + 1) % 4, rng.integers(0, 4, size=200))
    assert clustering_accuracy(y, p) == pytest.approx(_brute_force_acc(y, p))


def test_scores_bundle():
    s = clustering_scores([0, 0, 1, 1], [1, 1, 0, 0])
    assert s == {"acc": 1.0, "nmi": 1.0, "ari": 1.0}
    assert clustering_scores([0, 0, 1, 1], [0, 1, 0, 1])["ari"] == adjusted_rand_score(
        [0, 0, 1, 1], [0, 1, 0, 1]
    )
