"""The light commands stay light (issue 33, item 5).

``dkernel --help``, ``dkernel run --help``, ``dkernel methods [NAME]``, ``dkernel cluster-config``
and ``dkernel validate`` of a table job import neither Dask nor scikit-learn nor SciPy (nor xarray and Zarr, which
alone would cost half of their one-second budget). Each command runs in a fresh interpreter,
and what it imported is read from ``sys.modules`` at exit. How long they take is measured by
``benchmarks/bench_cli_startup.py``, not here.

What makes it possible is tested here too: the job steps' parameters come from the stored
derivation of their estimators (``dkernel.schema.cache``), which must equal the live one, and
the steps' and readers' heavy imports are deferred (``dkernel._lazy.deferred``).
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from dkernel.io.data import data_root

ROOT = Path(__file__).resolve().parents[1]

#: Modules the light commands must not import.
HEAVY = ("dask", "distributed", "sklearn", "scipy", "xarray", "zarr")

#: Runs ``dkernel.cli.main(argv)`` and reports the heavy modules it imported.
WRAPPER = f"""
import sys
from dkernel.cli import main
try:
    code = main(sys.argv[1:])
except SystemExit as exc:  # --help exits
    code = exc.code
print("IMPORTED:", " ".join(m for m in {HEAVY!r} if m in sys.modules))
sys.exit(code)
"""


def _run(*argv: str, env: dict[str, str] | None = None) -> tuple[str, set[str]]:
    out = subprocess.run(
        [sys.executable, "-c", WRAPPER, *argv],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        timeout=120,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    text, _, imported = out.stdout.rpartition("IMPORTED:")
    return text, set(imported.split())


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--help"], "validate"),
        (["run", "--help"], "--scheduler"),
        (["methods"], "rbf-spectral"),
        (["methods", "mssc"], "method mssc:"),
        (["methods", "sklearn"], "reader sklearn:"),
        (["cluster-config"], "work-stealing: false"),
    ],
)
def test_help_and_methods_import_no_heavy_module(argv, expected):
    text, imported = _run(*argv)
    assert expected in text
    assert not imported, f"dkernel {' '.join(argv)} imported {sorted(imported)}"


def test_validate_of_a_table_job_imports_no_heavy_module(tmp_path):
    # scikit-learn's bundled wine data: read from its files, without importing scikit-learn
    text, imported = _run("validate", "jobs/wine-rbf-kpca.yaml", "--output-root", str(tmp_path))
    assert "valid (rbf-spectral on 178 × 13" in text
    assert not imported, f"dkernel validate imported {sorted(imported)}"


def test_validate_of_a_job_on_data_files_imports_no_heavy_module(tmp_path):
    root = data_root(required=False)
    if root is None or not (root / "breast_cancer_wisconsin_original").is_dir():
        pytest.skip("needs DKERNEL_DATA with the Wisconsin table (../shared/data in CI)")
    argv = ("validate", "jobs/pck-wisconsin.yaml", "--output-root", str(tmp_path))
    text, imported = _run(*argv, env={"DKERNEL_DATA": str(root)})
    assert "valid (pck-spectral on 699 × 9" in text
    assert not imported, f"dkernel validate imported {sorted(imported)}"


def test_the_check_sees_a_heavy_import():
    """The wrapper reports what the command imported (here: SciPy)."""
    code = WRAPPER.replace("from dkernel.cli import main", "import scipy.sparse\nmain = len")
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert out.stdout.split("IMPORTED:")[1].split() == ["scipy"]


# -- the stored derivation ---------------------------------------------------------------------


def test_the_stored_derivation_is_the_live_one():
    """``dkernel/schema/derived.json`` holds what the estimators give now: every schema and
    constant a step or reader asks for, and nothing else (derived in a fresh interpreter,
    where only the steps and readers ask)."""
    out = subprocess.run(
        [sys.executable, "-m", "dkernel.jobs.derived"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert out.returncode == 0, out.stdout + out.stderr


def test_steps_read_their_parameters_from_the_stored_derivation():
    """Every step names its estimators by import path, and the stored derivation gives the
    parameters the class gives."""
    from dataclasses import replace

    from dkernel.jobs.registry import METHODS
    from dkernel.schema import cache

    schemas = [(m.name, s) for m in METHODS.values() for s in m.estimators]
    assert {s.path for _, s in schemas} <= set(cache.stored()["estimators"])
    for name, schema in schemas:
        assert isinstance(schema.source, str), f"{name}: {schema.path} given as a class"
        assert schema.params == replace(schema, source=schema.estimator).params


def test_a_value_round_trips_through_the_stored_form():
    from dkernel.schema import cache
    from dkernel.schema.params import REQUIRED, Param

    value = {"a": (1, 2.5, None, "x"), "b": [True, (REQUIRED,)], "c": float("inf")}
    assert cache.decode(cache.encode(value)) == value
    assert type(cache.decode(cache.encode((1,)))) is tuple
    param = Param("n", "int", default=REQUIRED, low=1, choices=(1, 2), doc="N.")
    assert cache.decode_param("n", cache.encode_param(param)) == param
    with pytest.raises(TypeError, match="cannot store"):
        cache.encode({1, 2})


def test_differences_name_what_is_stale():
    from dkernel.jobs.derived import differences

    stored = {"estimators": {"m:A": {"x": 1}, "m:B": {}}, "constants": {}}
    derived = {"estimators": {"m:A": {"x": 2}, "m:C": {}}, "constants": {}}
    assert differences(derived, stored) == [
        "estimators: m:A changed",
        "estimators: m:B is stored but no step asks for it",
        "estimators: m:C is not stored",
    ]
    assert differences(stored, stored) == []


# -- deferred imports --------------------------------------------------------------------------


def test_deferred_imports_on_first_use_and_acts_as_the_object():
    code = (
        "import sys\n"
        "from dkernel._lazy import deferred\n"
        "fractions = deferred('fractions')\n"
        "Fraction, Decimal = deferred('fractions', 'Fraction', 'Decimal')\n"
        "print('fractions' in sys.modules)\n"
        "half = Fraction(1, 2)\n"
        "print('fractions' in sys.modules, isinstance(half, Fraction), type(half).__name__)\n"
        "print(fractions.Fraction is type(half))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.stdout.split() == ["False", "True", "True", "Fraction", "True"], out.stderr


def test_deferred_pickles_as_the_object_it_stands_for():
    from dkernel._lazy import deferred

    dedent = deferred("textwrap", "dedent")
    import textwrap

    assert pickle.loads(pickle.dumps(dedent)) is textwrap.dedent
    assert dedent("  a") == "a" and dedent.__name__ == "dedent"
    assert issubclass(pickle.PickleError, deferred("pickle", "PickleError"))
    assert repr(deferred("textwrap")) == "<deferred textwrap>"


# -- sizes without Dask ------------------------------------------------------------------------

SIZES = ["100", "100 MB", "100M", "5kB", "5.4 kB", "1kiB", "1e6", "1e6 kB", "MB", "4GiB"]
SIZES += ["4 gib", "2.5TB", "1 b", "B", "7Pi", "0.5GB", "1E9", "kib", ".MB", "", "1."]
BAD_SIZES = ["5 foos", "x1", "1e", "1bb", "nan", "inf GB", "--1", "1\n2GB", "1e400GB", "2 ÄB"]


def test_sizes_are_read_and_written_as_dask_does():
    """``dkernel validate`` reads the spec's limits without importing Dask: the same units
    as :func:`dask.utils.parse_bytes` and the text of :func:`dask.utils.format_bytes`."""
    from dask.utils import format_bytes, parse_bytes

    from dkernel._budget import _bytes_of, format_size

    for text in SIZES:
        assert _bytes_of(text) == float(parse_bytes(text)), text
    for text in BAD_SIZES:
        with pytest.raises((ValueError, KeyError, OverflowError)):
            parse_bytes(text)
        with pytest.raises((ValueError, KeyError, OverflowError)):
            _bytes_of(text)
    sizes = [0, 1, 921, 922, 1023, 1024, int(0.9 * 2**30) - 1, int(0.9 * 2**30), 3 * 2**50]
    sizes += [int(1.7**k) for k in range(80)]
    for n in sizes:
        assert format_size(n) == format_bytes(n), n
