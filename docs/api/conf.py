"""Sphinx configuration of the API reference, built from dkernel's numpydoc docstrings.

Build it with ``python3 tasks.py docs`` (into ``docs/_build/html``) or
``sphinx-build -W --keep-going -b html docs/api docs/_build/html``.
No network is used: references into other packages are left as plain text.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # document this checkout, not an installed copy

import dkernel  # noqa: E402

project = "dkernel"
author = "the dkernel developers"
copyright = "2026, the dkernel developers"
version = release = dkernel.__version__

extensions = ["sphinx.ext.autodoc", "numpydoc"]
exclude_patterns = ["_build"]
html_theme = "alabaster"
html_static_path: list[str] = []

# Types are written in each docstring's Parameters/Returns; signatures stay short.
autodoc_typehints = "none"
autodoc_member_order = "bysource"
autodoc_default_options = {"members": True}


def _skip_sklearn_plumbing(app, what, name, obj, skip, options):
    """Leave out scikit-learn's generated ``set_*_request`` and ``set_output`` methods."""
    if name == "set_output" or (name.startswith("set_") and name.endswith("_request")):
        return True
    return None


def setup(app):
    app.connect("autodoc-skip-member", _skip_sklearn_plumbing)


numpydoc_show_class_members = False  # the :members: directive lists them already
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False

# Broken references to dkernel's own objects fail the build; references into other packages
# (no intersphinx: the build runs offline) are not checked.
nitpicky = True
_THIRD_PARTY = (
    "numpy|np|scipy|sklearn|dask|distributed|xarray|xr|zarr|pandas|matplotlib|rioxarray|"
    "rasterio|yaml|threadpoolctl|pathlib|typing|collections|os|concurrent|datetime"
)
nitpick_ignore_regex = [
    (r"py:.*", rf"({_THIRD_PARTY})(\..*)?"),
    (r"py:.*", r"(int|float|str|bool|bytes|dict|list|tuple|set|None|object|callable|Path)"),
]
