"""exp_floored against NumPy's exp (dkernel.linalg.elementwise)."""

from __future__ import annotations

import numpy as np
import pytest

from dkernel.linalg.elementwise import EXP_FLOOR_MARGIN, exp_floored


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_exp_floored_is_exp_down_to_its_floor_and_never_subnormal(dtype):
    rng = np.random.default_rng(0)
    tiny = np.finfo(dtype).tiny
    floor = np.log(tiny) + EXP_FLOOR_MARGIN
    x = np.concatenate(
        [
            -rng.random(4000) * 3 * abs(floor),  # down through the subnormal range and below
            np.linspace(floor - 1, floor + 1, 101),
            [0.0, -np.inf],
        ]
    ).astype(dtype)
    got = exp_floored(x.copy())
    with np.errstate(under="ignore"):
        exact = np.exp(x.astype(np.float64))
    above = x >= floor
    # where the argument is above the floor: NumPy's exp in the same dtype, bit for bit
    np.testing.assert_array_equal(got[above], np.exp(x[above]))
    # below it: the floor's exp, a normal number within e^MARGIN of the smallest one
    assert np.all(got[~above] == np.exp(dtype(floor)))
    assert np.all(got >= tiny) and np.all(got <= 1)
    # what changed moved by at most the floor's exp: far below float resolution next to 1
    change = np.abs(got[~above] - exact[~above])
    assert np.max(change) <= np.exp(floor) < np.finfo(dtype).eps * 1e-20


def test_exp_floored_works_in_place_and_keeps_the_dtype():
    G = -np.arange(12, dtype=np.float32).reshape(3, 4) * 10
    out = exp_floored(G)
    assert out is G and out.dtype == np.float32
