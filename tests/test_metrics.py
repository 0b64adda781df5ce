import numpy as np
import pytest
from sklearn.metrics import adjusted_rand_score

from dkernel.metrics import clustering_accuracy, clustering_scores, scores_of_contingency
from dkernel.rows import chunked_contingency_table


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


@pytest.mark.parametrize(
    ("n", "n_classes", "n_clusters"), [(1000, 3, 4), (50_000, 5, 5), (40, 1, 1), (40, 1, 3)]
)
def test_labels_scored_from_their_chunked_contingency_table_as_scikit_learn_scores_them(
    n, n_classes, n_clusters
):
    import dask.array as da

    rng = np.random.default_rng(n)
    truth = rng.integers(0, n_classes, n) * 3 + 1  # classes that are not 0 … k - 1
    labels = rng.integers(0, n_clusters, n)
    labels[: n // 2] = truth[: n // 2] % max(n_clusters, 1)
    expected = clustering_scores(truth, labels)  # scikit-learn's ARI and NMI
    chunked = scores_of_contingency(
        chunked_contingency_table(
            da.from_array(truth, chunks=n // 3 + 1), da.from_array(labels, chunks=n // 4 + 1)
        )
    )
    assert chunked.keys() == expected.keys()
    for name, value in expected.items():
        assert chunked[name] == pytest.approx(value, rel=1e-12, abs=1e-12), name
    table = chunked_contingency_table(truth, da.from_array(labels, chunks=max(7, n // 5)))
    assert table.sum() == n and table.shape == (np.unique(truth).size, np.unique(labels).size)
