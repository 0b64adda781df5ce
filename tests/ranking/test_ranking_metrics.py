"""NDCG@k and score cosine against slow obvious references."""

from __future__ import annotations

import numpy as np
import pytest

from dkernel.errors import InvalidInputError
from dkernel.ranking import ndcg_at_k, ndcg_at_k_columns, score_cosine


def reference_ndcg(rel, scores, k):
    order = np.argsort(-scores, kind="stable")[:k]
    dcg = sum(rel[i] / np.log2(r + 2) for r, i in enumerate(order))
    ideal = np.sort(rel)[::-1][:k]
    idcg = sum(g / np.log2(r + 2) for r, g in enumerate(ideal))
    return dcg / idcg


@pytest.mark.parametrize("k", [1, 5, 10, 40])
def test_ndcg_matches_reference(rng, k):
    rel = rng.random(80)
    scores = rel + 0.3 * rng.standard_normal(80)
    assert ndcg_at_k(rel, scores, k) == pytest.approx(reference_ndcg(rel, scores, k), rel=1e-12)
    assert ndcg_at_k(rel, rel, k) == pytest.approx(1.0)
    assert ndcg_at_k(rel, -rel, k) < 1.0


def test_ndcg_exclude_drops_the_seed(rng):
    rel = rng.random(30)
    scores = rel.copy()
    scores[4] = -10.0  # a badly ranked seed would lower NDCG unless excluded
    rel[4] = 100.0
    assert ndcg_at_k(rel, scores, 5) < 0.5
    assert ndcg_at_k(rel, scores, 5, exclude=4) == pytest.approx(1.0)


@pytest.mark.parametrize("k", [1, 10, 40])
def test_ndcg_columns_equal_per_column(rng, k):
    rel = rng.random((60, 7))
    scores = rel + 0.3 * rng.standard_normal((60, 7))
    scores[:, 3] = np.round(scores[:, 3], 1)  # ties: handed to the per-column function
    seeds = rng.integers(0, 60, size=7)
    for exclude in (None, seeds):
        got = ndcg_at_k_columns(rel, scores, k, exclude=exclude)
        want = [
            ndcg_at_k(rel[:, j], scores[:, j], k, exclude=None if exclude is None else seeds[j])
            for j in range(7)
        ]
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=0)
    with pytest.raises(InvalidInputError):
        ndcg_at_k_columns(rel, scores[:, :3], k)
    with pytest.raises(InvalidInputError):
        ndcg_at_k_columns(-rel, scores, k)


def test_cosine():
    assert score_cosine([1.0, 1.0], [2.0, 2.0]) == pytest.approx(1.0)
    assert score_cosine([1.0, 0.0], [0.0, 3.0]) == pytest.approx(0.0)
    with pytest.raises(InvalidInputError):
        score_cosine([0.0, 0.0], [1.0, 0.0])
