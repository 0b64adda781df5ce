"""Lazy package exports (PEP 562): a family's ``__init__`` names what it re-exports, and the
submodule holding it is imported on first access.

Importing one NumPy kernel module of a family (``dkernel.gmm.em``) runs the family's
``__init__`` first; with eager re-exports that imported the family's estimators and, through
them, Dask. Declared here, the numeric modules stay Dask-free at run time, as
``tests/test_layers.py`` checks in a fresh interpreter.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any


def attach(
    package: str, exports: Mapping[str, Sequence[str]]
) -> tuple[Callable[[str], Any], Callable[[], list[str]], list[str]]:
    """``__getattr__``, ``__dir__`` and ``__all__`` for ``package``.

    Parameters
    ----------
    package : str
        The package's ``__name__``.
    exports : mapping
        Submodule name (relative to ``package``) -> the names it provides.

    Examples
    --------
    In ``dkernel/gmm/__init__.py``::

        __getattr__, __dir__, __all__ = attach(__name__, {"pck": ["ProbabilisticClusterKernel"]})
    """
    where = {name: module for module, names in exports.items() for name in names}

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        setattr(importlib.import_module(package), name, value)  # later lookups skip this
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(importlib.import_module(package))) | set(where))

    return __getattr__, __dir__, sorted(where)
