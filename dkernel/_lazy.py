"""Lazy imports: package exports (PEP 562) and deferred module-level imports.

Importing one NumPy kernel module of a family (``dkernel.gmm.em``) runs the family's
``__init__`` first; with eager re-exports that imported the family's estimators and, through
them, Dask. Declared with :func:`attach`, the numeric modules stay Dask-free at run time, as
``tests/test_layers.py`` checks in a fresh interpreter.

:func:`deferred` does the same for a module's own imports: the job steps and readers are all
imported by ``dkernel validate`` and ``dkernel methods``, which start without Dask,
scikit-learn or SciPy (``tests/test_cli_imports.py``); what their ``run`` needs is imported
when it runs.
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


def resolve(path: str) -> Any:
    """The object named by ``'package.module:name'`` (the module itself without ``:name``).

    Paths are written in dkernel's own code (a job step's estimator, a deferred import),
    never taken from a spec.
    """
    module, _, name = path.partition(":")
    value = importlib.import_module(module)
    return getattr(value, name) if name else value


class _Deferred:
    """Stands for a module, or an object of one, that is imported on first use.

    Calling it, reading an attribute, ``isinstance`` / ``issubclass`` against it and pickling
    it all act on the real object (imported then); pickled, it travels as the real object's
    import path, so Dask workers get the real function.
    """

    __slots__ = ("_path", "_value")

    def __init__(self, path: str) -> None:
        self._path = path
        self._value: Any = None

    def _resolve(self) -> Any:
        if self._value is None:
            self._value = resolve(self._path)
        return self._value

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._resolve()(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._resolve(), name)

    def __instancecheck__(self, obj: Any) -> bool:
        return isinstance(obj, self._resolve())

    def __subclasscheck__(self, cls: type) -> bool:
        return issubclass(cls, self._resolve())

    def __mro_entries__(self, bases: tuple) -> tuple:
        return (self._resolve(),)

    def __reduce__(self) -> tuple:
        return (resolve, (self._path,))

    def __repr__(self) -> str:
        return f"<deferred {self._path}>"


def deferred(module: str, *names: str) -> Any:
    """A module, or objects of it, imported when first used rather than now.

    For modules that must load without their heavy dependencies (``dkernel validate`` and
    ``dkernel methods`` import every job step and reader, and start without Dask,
    scikit-learn or SciPy): ``da = deferred("dask.array")`` stands for ``import dask.array as
    da``, and ``f, g = deferred("dkernel.x", "f", "g")`` for ``from dkernel.x import f, g``,
    the import done on the first call or attribute read. Only for functions, classes and
    modules used inside functions: a constant that is read at import time needs its value
    (``dkernel.schema.cache.constants``).

    Parameters
    ----------
    module : str
        The module's full name.
    *names : str
        Names to take from it; none: the module itself.

    Returns
    -------
    object or tuple
        One stand-in for the module or a single name, a tuple of them for several names.

    Examples
    --------
    >>> dedent = deferred("textwrap", "dedent")
    >>> dedent
    <deferred textwrap:dedent>
    >>> dedent("  a")
    'a'
    """
    if not names:
        return _Deferred(module)
    proxies = tuple(_Deferred(f"{module}:{name}") for name in names)
    return proxies[0] if len(proxies) == 1 else proxies
