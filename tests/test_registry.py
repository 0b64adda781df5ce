"""The generic registry behind readers, job methods and kernels."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from dkernel.errors import InvalidInputError, SpecError
from dkernel.registry import Registry

REPO = Path(__file__).resolve().parents[1]


def test_register_lookup_and_messages():
    reg: Registry[int] = Registry("colour", error=lambda m: SpecError(m, "colour"))
    assert reg.register("red", 1) == 1 and reg.register("blue", 2) == 2
    with pytest.raises(ValueError, match="colour 'red' is already registered"):
        reg.register("red", 3)
    assert reg.lookup("red") == 1 and reg["blue"] == 2 and "red" in reg and len(reg) == 2
    assert reg.names() == ["blue", "red"] and dict(reg) == {"red": 1, "blue": 2}
    with pytest.raises(SpecError, match=r"colour: unknown colour 'rde'\. Did you mean 'red'\? "):
        reg.lookup("rde")
    with pytest.raises(SpecError, match=r"unknown colour 5\. Valid colours: blue, red\.$"):
        reg.lookup(5)
    with pytest.raises(SpecError) as info:  # a huge name is cut in the message
        reg.lookup("x" * 10_000)
    assert len(str(info.value)) < 300
    del reg["blue"]
    assert reg.names() == ["red"]


def test_discovery_finds_every_step_module():
    from dkernel.jobs.registry import METHODS

    modules = {p.stem for p in (REPO / "dkernel" / "jobs" / "steps").glob("[!_]*.py")}
    # one method per step module, named after it, found without a list of modules
    assert {name.replace("-", "_") for name in METHODS.names()} == modules
    assert len(METHODS) == len(modules) >= 12
    init = ast.parse((REPO / "dkernel" / "jobs" / "steps" / "__init__.py").read_text())
    assert not [n for n in ast.walk(init) if isinstance(n, ast.Import | ast.ImportFrom)]


def test_discovery_finds_every_reader_module():
    """Readers are found as methods are: every module of ``dkernel/io/readers/`` registers its
    own, and nothing lists the modules by hand."""
    from dkernel.io.registry import READERS

    folder = REPO / "dkernel" / "io" / "readers"
    modules = {p.stem for p in folder.glob("[!_]*.py")}
    assert modules == {"tables", "images", "pairs", "parquet", "series", "zarr_table"}
    assert len(READERS) == 19 and {"sklearn", "csv", "npy", "geotiff", "samson"} <= set(READERS)
    raster = {name for name in READERS if READERS[name].raster}
    assert raster == {
        "geotiff",
        "geotiff-pair",
        "demo-landsat",
        "npy-raster",
        "zarr-raster",
        "stac",
        "samson",
        "jasper",
    }
    init = ast.parse((folder / "__init__.py").read_text())
    imported = [n for n in ast.walk(init) if isinstance(n, ast.Import | ast.ImportFrom)]
    assert [n.module for n in imported] == ["dkernel._lazy"]  # the lazy re-exports only


def test_kernel_registry_keeps_its_message():
    from dkernel.kernels.registry import make_kernel

    with pytest.raises(
        InvalidInputError, match=r"Did you mean 'rbf'\? .*, or a callable f\(X, Y\)"
    ):
        make_kernel("rbff")


def test_a_suggestion_by_another_spelling_comes_before_the_close_match():
    colours = Registry("colour", error=KeyError, suggest={"rouge": "red"}.get)
    colours.register("red", 1)
    colours.register("rose", 2)
    with pytest.raises(KeyError, match="Did you mean 'red'"):
        colours.lookup("rouge")
    with pytest.raises(KeyError, match="Did you mean 'rose'"):  # no other spelling: difflib
        colours.lookup("rosy")
