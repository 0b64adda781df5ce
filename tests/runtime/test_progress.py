"""Progress: a bar only on a terminal, plain lines in a log, nothing when switched off."""

from __future__ import annotations

import io

import dask.array as da
import numpy as np
import pytest

import dkernel.runtime.progress as P
from dkernel import ProbabilisticClusterKernel


class _Log(io.StringIO):
    def isatty(self) -> bool:
        return False


def test_plain_lines_without_a_terminal(client, monkeypatch):
    monkeypatch.setattr(P, "LINE_INTERVAL", 0.05)
    slow = da.from_array(np.arange(8.0), chunks=2).map_blocks(
        lambda b: (__import__("time").sleep(0.2), b)[1]
    )
    log = _Log()
    future = client.compute(slow.sum())
    P.wait_with_progress([future], what="summing", stream=log)
    text = log.getvalue()
    assert "\x1b[" not in text and "\r" not in text
    assert "[dkernel] summing: 1/1 done in" in text.splitlines()[-1]


def test_compute_with_progress_switched_off_writes_nothing(client, capfd):
    x = da.ones(10, chunks=5)
    assert P.compute_with_progress(x.sum(), client, show=False) == 10
    assert P.compute_with_progress(x.sum(), None, show=False) == 10
    assert P.compute_with_progress((x.sum(), x.max()), client, show=False) == (10, 1)
    out, err = capfd.readouterr()
    assert out == "" and err == ""


@pytest.mark.parametrize("progress", [True, False])
def test_pck_progress_option(client, capfd, progress):
    X = np.random.default_rng(0).normal(size=(60, 3))
    ProbabilisticClusterKernel(
        n_estimators=2, max_components=3, progress=progress, random_state=0
    ).fit(X)
    out, err = capfd.readouterr()
    assert ("PCK ensemble" in out + err) == progress


def test_nested_tuples_of_collections(client):
    x = da.arange(6, chunks=3)
    (a, b), c = P.compute_with_progress(((x.sum(), x.max()), x + 1), client, show=False)
    assert (a, b) == (15, 5) and c.tolist() == [1, 2, 3, 4, 5, 6]


def _chain(i: int):
    """One part of a pass: a chunk, then a small result from it (a little slow)."""
    import dask

    chunk = dask.delayed(lambda i: np.full(1000, i), pure=True)(i)
    return dask.delayed(_known_tasks, pure=True)(chunk)


def _known_tasks(chunk: np.ndarray) -> tuple[int, int]:
    """The chunk's value and how many tasks its worker still knows of."""
    import time

    from distributed import get_worker

    time.sleep(0.05)
    return int(chunk[0]), len(get_worker().state.tasks)


def test_compute_parts_keeps_order_and_lets_workers_forget_finished_parts(client, capfd):
    parts = [_chain(i) for i in range(40)]
    values = P.compute_parts([*parts, parts[3]], client, show=True, what="parts")
    assert [v for v, _ in values] == [*range(40), 3]
    # each part is released once its value is in: a worker knows a few parts' tasks at a time
    assert max(n for _, n in values) < 20
    # one future for the whole pass: the finished parts, and the chunks behind them, pile up
    held = P.compute_with_progress(tuple(_chain(i) for i in range(40, 80)), client, show=False)
    assert max(n for _, n in held) > 30
    assert "[dkernel] parts: 41/41 done in" in capfd.readouterr().err
    assert P.compute_parts([], client) == []
    assert P.compute_parts([parts[1], 7, None], client)[1:] == [7, None]
    # the default client's values (the task counts beside them depend on timing)
    assert [v for v, _ in P.compute_parts(parts[:2], None)] == [0, 1]


def test_compute_parts_on_a_client_that_is_not_the_default(client):
    """A job's client need not be the process's default client (``dkernel submit`` from a
    process that has another): the parts are awaited on the given client's loop."""
    from concurrent.futures import ThreadPoolExecutor

    from distributed import Client

    # the embedded cluster takes only clients with its credentials (tls://, issue 34)
    with Client(client.scheduler.address, security=client.security, set_as_default=False) as other:
        with ThreadPoolExecutor(1) as pool:
            values = pool.submit(P.compute_parts, [_chain(i) for i in range(200, 204)], other)
            assert [v for v, _ in values.result(timeout=60)] == [200, 201, 202, 203]


@pytest.mark.slow
def test_run_job_in_jupyter_without_ipywidgets(tmp_path):
    """The default ``progress=True`` in a real Jupyter kernel where ipywidgets cannot be
    imported: the job completes and a text bar is drawn in the cell's output."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    rng = np.random.default_rng(0)
    np.savetxt(tmp_path / "data.csv", rng.normal(size=(60, 3)), delimiter=",")
    (tmp_path / "job.yaml").write_text(
        "name: nb\ndata: {reader: csv, path: data.csv}\n"
        "method: rbf-spectral\nparams: {n_clusters: 2}\noutput: out.zarr\n"
    )
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(
            "import sys\nsys.modules['ipywidgets'] = None  # as if not installed\n"
            "from dkernel.jobs.runner import run_job\nstore = run_job('job.yaml')\nprint(store)"
        )
    ]
    nbclient.NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    ).execute()
    outputs = nb.cells[0].outputs
    assert not [o for o in outputs if o.output_type == "error"]
    text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    assert "out.zarr" in text
    assert "[" in text and "%" in text  # distributed's text progress bar
    assert (tmp_path / "out.zarr" / "zarr.json").exists()


_PTY_SCRIPT = """
import time, dask, numpy as np
from distributed import Client
from dkernel.runtime import progress as P
P.BAR_INTERVAL = 0.0

def slow(i):
    time.sleep(0.05)
    return i

if __name__ == "__main__":
    with Client(processes=False, n_workers=1, threads_per_worker=1, dashboard_address=None) as c:
        parts = [dask.delayed(slow)(i) for i in range(12)]
        values = P.compute_parts(parts, c, show=True, what="stage one")
        assert values == list(range(12)), values
"""


def _read_all(fd: int) -> bytes:
    import os

    out = b""
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # EIO: the other side closed
            return out
        if not chunk:
            return out
        out += chunk


def test_compute_parts_draws_a_bar_on_a_terminal(tmp_path):
    """Through a pseudo-terminal: the bar is redrawn in place (``\\r``) with the parts done,
    a rate and an ETA, and ends on a line with the total time."""
    import os
    import pty
    import subprocess
    import sys

    script = tmp_path / "bar.py"
    script.write_text(_PTY_SCRIPT)
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, str(script)], stdin=subprocess.DEVNULL, stdout=slave, stderr=slave
    )
    os.close(slave)
    text = _read_all(master).decode("utf-8", "replace")
    os.close(master)
    assert proc.wait(timeout=120) == 0, text[-3000:]
    draws = [d for d in text.split("\r") if d.startswith("[dkernel] stage one: [")]
    assert len(draws) >= 3, text
    assert "ETA" in text and "/s" in text
    assert "[" + "#" * P.BAR_WIDTH + "] 12/12  done in" in draws[-1]
    assert "\x1b[K" in text


def test_compute_parts_writes_plain_lines_off_a_terminal(client, capfd, monkeypatch):
    import dask

    monkeypatch.setattr(P, "LINE_INTERVAL", 0.0)
    parts = [dask.delayed(int)(i) for i in range(4)]
    assert P.compute_parts(parts, client, show=True, what="stage one") == [0, 1, 2, 3]
    err = capfd.readouterr().err
    assert "\r" not in err and "#" not in err
    assert "[dkernel] stage one: 4/4 done in" in err


def test_compute_parts_without_a_client_counts_parts_in_plain_lines(capfd, monkeypatch):
    """On dask's local scheduler (no client): the values in order, and the parts counted as
    each one's last key is done."""
    import dask

    from dkernel.runtime.threads import InProcessScheduler

    monkeypatch.setattr(P, "LINE_INTERVAL", 0.0)
    parts = [dask.delayed(np.max)(dask.delayed(np.full, pure=True)(10, i)) for i in range(5)] + [7]
    with InProcessScheduler(2):
        values = P.compute_parts(parts, show=True, what="stage one")
    assert values == [0, 1, 2, 3, 4, 7]
    err = capfd.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("[dkernel] stage one:")]
    # one part (the 7) is done from the start; a line per part after that, and the last one
    assert [line.split()[3] for line in lines[:-1]] == [f"{n}/6" for n in range(2, 7)]
    assert lines[-1].startswith("[dkernel] stage one: 6/6 done in")
    assert P.compute_parts([dask.delayed(int)(3)]) == [3]
