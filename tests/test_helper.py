"""The helper process (dkernel._helper): calls, errors, its end, and what callers do then."""

from __future__ import annotations

import operator
import threading

import pytest

from dkernel._helper import HelperProcess, HelperUnavailable, shared_helper


@pytest.fixture
def helper():
    h = HelperProcess()
    yield h
    h.close()


def test_calls_run_in_another_process_in_order(helper):
    import os

    assert helper.call(operator.add, 2, 3) == 5
    assert helper.call(os.getpid) != os.getpid()
    futures = [helper.submit(operator.mul, i, 10) for i in range(20)]
    assert [f.result() for f in futures] == [10 * i for i in range(20)]


def test_an_error_comes_back_with_its_type_and_the_helper_goes_on(helper):
    with pytest.raises(ValueError, match="invalid literal"):
        helper.call(int, "not a number")
    # what a call prints goes to stderr: the replies stay readable
    assert helper.call(print, "from the helper") is None
    assert helper.call(operator.add, 1, 1) == 2


def test_an_unpicklable_result_is_an_error_not_a_broken_helper(helper):
    with pytest.raises(RuntimeError, match="cannot be pickled"):
        helper.call(threading.Lock)
    assert helper.call(operator.add, 1, 2) == 3


def test_a_dead_helper_raises_unavailable(helper):
    helper._process.kill()
    helper._process.wait()
    assert not helper.alive
    with pytest.raises(HelperUnavailable, match="ended"):
        helper.call(operator.add, 1, 2)
    with pytest.raises(HelperUnavailable, match="closed"):
        helper.submit(operator.add, 1, 2)


def test_close_ends_the_process(helper):
    helper.close()
    assert helper._process.returncode == 0


def test_the_shared_helper_is_started_again_after_it_died():
    assert shared_helper() is shared_helper(start=False) is not None
    first = shared_helper()
    first._process.kill()
    first._process.wait()
    assert shared_helper(start=False) is None
    second = shared_helper()
    assert second is not first and second.call(operator.sub, 5, 2) == 3
