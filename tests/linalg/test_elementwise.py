"""exp_flushed against NumPy's exp, and flush_for (dkernel.linalg.elementwise)."""

from __future__ import annotations

import numpy as np
import pytest

from dkernel.linalg.elementwise import EXP_FLOOR_MARGIN, exp_flushed, flush_for


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_exp_flushed_is_exp_with_the_smallest_results_flushed_to_zero(dtype):
    rng = np.random.default_rng(0)
    tiny = np.finfo(dtype).tiny
    floor = dtype(np.log(tiny) + EXP_FLOOR_MARGIN)
    x = np.concatenate(
        [
            -rng.random(4000) * 3 * abs(floor),  # down through the subnormal range and below
            np.linspace(floor - 1, floor + 40, 411),
            [0.0, -np.inf],
        ]
    ).astype(dtype)
    got = exp_flushed(x.copy())
    with np.errstate(under="ignore"):
        reference = np.exp(x)  # the slow, obvious one: subnormals and all
    # below the floor: zero, as an underflow gives
    assert np.all(got[x <= floor] == 0)
    # above 4 exp(floor) / eps: NumPy's exp bit for bit
    eps = np.finfo(dtype).eps
    far = reference >= 4 * np.exp(floor) / eps
    assert far.sum() > 1000
    np.testing.assert_array_equal(got[far], reference[far])
    # everywhere: within exp(floor) of it (and the subtraction's rounding), never subnormal
    assert np.all(np.abs(got - reference) <= np.exp(floor) + eps * reference)
    assert not np.any((got > 0) & (got < tiny))


def test_exp_flushed_with_a_ceiling_clips_both_ends_in_one_pass():
    G = np.array([1.5, 0.0, -2.0, -1000.0])
    out = exp_flushed(G, ceiling=0.0)
    assert out is G
    np.testing.assert_array_equal(out, [1.0, 1.0, np.exp(-2.0), 0.0])


def test_exp_flushed_keeps_the_dtype():
    G = -np.arange(12, dtype=np.float32).reshape(3, 4) * 10
    assert exp_flushed(G).dtype == np.float32


def test_flush_for_zeroes_what_float32_would_hold_near_or_below_subnormal():
    tiny32 = float(np.finfo(np.float32).tiny)
    floor = tiny32 * np.exp(EXP_FLOOR_MARGIN)
    A = np.array([0.5, 1e-20, floor * 1.01, floor * 0.99, 1e-40, 1e-300, 0.0])
    got = flush_for(A.copy(), np.float32)
    np.testing.assert_array_equal(got, [0.5, 1e-20, floor * 1.01, 0, 0, 0, 0])
    as32 = got.astype(np.float32)
    assert not np.any((as32 > 0) & (as32 < tiny32))
    # float64 results kept in float64: exp_flushed's floor there already holds
    np.testing.assert_array_equal(flush_for(A.copy(), np.float64), A)
