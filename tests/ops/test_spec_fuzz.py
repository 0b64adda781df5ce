"""Property-based fuzzing of the spec loader and validator (issue 19, item 10).

Random YAML documents, and random mutations (text and structure) of every spec under
``jobs/``, go through ``dkernel validate --no-data`` in-process. Whatever the input:

* the exit code is 0 (valid) or 2 (refused with a message), never 1 and never a traceback;
* each case returns within a hang guard (``tests/limits.py``) and allocates < 200 MiB (tracemalloc peak, on every 4th case);
* messages stay short (< 2,500 characters: values are cut).

Only validation runs: no data is read beyond the spec, no cluster starts, no store is written.
``DKERNEL_FUZZ_EXAMPLES`` sets the number of examples per test (CI default 1100, so ≥ 2,000
cases across the two tests; derandomized, so every run tries the same cases). The two fuzz
tests take a minute or more together: marked ``slow`` (``tasks.py test --fast`` skips them,
and CI's workers take this module early).
"""

from __future__ import annotations

import io
import os
import time
import tracemalloc
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest
import yaml

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from dkernel.cli import main  # noqa: E402
from dkernel.jobs.registry import METHODS  # noqa: E402
from tests.limits import REFUSAL_S  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
JOB_FILES = sorted((REPO / "jobs").glob("*.yaml"))
EXAMPLES = int(os.environ.get("DKERNEL_FUZZ_EXAMPLES", "1100"))
MAX_SECONDS, MAX_MIB, MAX_MESSAGE = REFUSAL_S, 200, 2500
MEMORY_EVERY = 4

FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,  # timed below, with the limit
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

KEYS = [
    "name", "data", "method", "params", "output", "seed", "runtime", "limits", "reader",
    "path", "n_clusters", "n_init", "sigma", "seeds", "label_column", "skip_columns",
    "memory_limit", "n_rff", "kernel", "<<", "standardize", "description", "data_root",
]  # fmt: skip

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=30),
    st.sampled_from(KEYS),
    # every registered method's name, readers' names and nonsense
    st.sampled_from([*METHODS.names(), "csv", "npy", "auto", "banana", "1e9"]),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=6),
        st.dictionaries(st.one_of(st.sampled_from(KEYS), st.text(max_size=10)), inner, max_size=6),
    ),
    max_leaves=30,
)


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory):
    """A working directory (the output root) for the module; restored afterwards."""
    root = tmp_path_factory.mktemp("fuzz")
    old = Path.cwd()
    os.chdir(root)
    saved = os.environ.pop("DKERNEL_OUTPUT_ROOT", None)
    try:
        yield root
    finally:
        os.chdir(old)
        if saved is not None:
            os.environ["DKERNEL_OUTPUT_ROOT"] = saved


_CASES = [0]


def check_case(root: Path, text: str | bytes) -> int:
    path = root / "case.yaml"
    path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass"))
    err = io.StringIO()
    _CASES[0] += 1
    trace = _CASES[0] % MEMORY_EVERY == 0  # tracemalloc slows a case 4×: every 4th one
    if trace:
        tracemalloc.start()
    t = time.perf_counter()
    try:
        with redirect_stderr(err), redirect_stdout(io.StringIO()):
            code = main(["validate", str(path), "--no-data"])
    finally:
        seconds = time.perf_counter() - t
        peak = tracemalloc.get_traced_memory()[1] / 2**20 if trace else 0.0
        if trace:
            tracemalloc.stop()
    message = err.getvalue()
    assert code in (0, 2), f"exit {code} for {text[:300]!r}:\n{message[:2000]}"
    assert "Traceback" not in message
    assert seconds < MAX_SECONDS, (seconds, text[:300])
    assert peak < MAX_MIB, (peak, text[:300])
    assert len(message) < MAX_MESSAGE, message[:500]
    return code


# ------------------------------------------------------------------------------------------
# random documents
# ------------------------------------------------------------------------------------------


def _spec_like(draw_values: dict) -> dict:
    base = {
        "name": "fuzz",
        "data": {"reader": "sklearn", "name": "wine"},
        "method": "rbf-spectral",
        "params": {"n_clusters": 3},
        "output": "out.zarr",
    }
    base.update(draw_values)
    return base


@pytest.mark.slow
@FUZZ
@given(
    st.one_of(
        values,
        st.dictionaries(st.sampled_from(KEYS), values, max_size=8).map(_spec_like),
        st.text(max_size=200),
        st.binary(max_size=200),
    )
)
def test_random_documents(sandbox, doc) -> None:
    if isinstance(doc, str | bytes):
        check_case(sandbox, doc)
        return
    try:
        text = yaml.safe_dump(doc, sort_keys=False, allow_unicode=True)
    except (yaml.YAMLError, UnicodeEncodeError):
        return
    check_case(sandbox, text)


# ------------------------------------------------------------------------------------------
# mutations of the shipped specs
# ------------------------------------------------------------------------------------------


def _paths(node, prefix=()):
    yield prefix
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _paths(v, (*prefix, i))


def _set(doc, path, value, delete=False):
    if not path:
        return value
    node = doc
    for key in path[:-1]:
        node = node[key]
    if delete:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return doc


@st.composite
def mutated_job(draw):
    job = draw(st.sampled_from(JOB_FILES))
    text = job.read_text()
    kind = draw(st.sampled_from(["structure", "structure", "text", "alias", "duplicate"]))
    if kind == "structure":
        doc = yaml.safe_load(text)
        for _ in range(draw(st.integers(1, 3))):
            paths = list(_paths(doc))
            path = draw(st.sampled_from(paths))
            action = draw(st.sampled_from(["replace", "delete", "add"]))
            if action == "delete" and path:
                doc = _set(doc, path, None, delete=True)
            elif action == "add" and isinstance(_get(doc, path), dict):
                _get(doc, path)[draw(st.sampled_from(KEYS))] = draw(values)
            else:
                doc = _set(doc, path, draw(values))
        try:
            return yaml.safe_dump(doc, sort_keys=False, allow_unicode=True)
        except (yaml.YAMLError, UnicodeEncodeError):
            return text
    lines = text.splitlines()
    i = draw(st.integers(0, len(lines) - 1))
    if kind == "duplicate":
        lines.insert(i, lines[draw(st.integers(0, len(lines) - 1))])
    elif kind == "alias":
        lines[i] = lines[i] + " &x"
        lines.insert(draw(st.integers(0, len(lines))), "  y: [*x, *x, *x]")
    else:
        pos = draw(st.integers(0, len(text)))
        span = draw(st.integers(0, 20))
        insert = draw(st.text(max_size=20))
        return text[:pos] + insert + text[pos + span :]
    return "\n".join(lines) + "\n"


def _get(doc, path):
    for key in path:
        doc = doc[key]
    return doc


def test_every_job_file_is_valid_unmutated(sandbox) -> None:
    assert JOB_FILES, "no specs under jobs/"
    for job in JOB_FILES:
        assert check_case(sandbox, job.read_text()) in (0, 2)  # 2 only without the datasets


@pytest.mark.slow
@FUZZ
@given(mutated_job())
def test_mutated_job_files(sandbox, text) -> None:
    check_case(sandbox, text)
