"""Values derived from modules that the light commands must not import, stored with the code.

``dkernel validate``, ``dkernel methods`` and ``--help`` start without Dask, scikit-learn or
SciPy, yet each job step's parameters are derived from an estimator
(:class:`~dkernel.schema.estimator.EstimatorSchema`), and the estimators subclass
scikit-learn's ``BaseEstimator``. So the derivation is stored: ``derived.json`` beside this
module holds, for every estimator a step names by import path, its signature and each
parameter's derived :class:`~dkernel.schema.params.Param`, and the few constants of estimator
modules that a step reads when it is imported (:func:`constants`).

The file is generated: ``python -m dkernel.jobs.derived --write`` (or ``python3 tasks.py
schemas``) derives every value that the steps and readers ask for and writes it, and a test
derives them again and compares, so the file cannot drift from the estimators. A value missing
from the file is derived on the spot (importing its module), so a new estimator works before
the file is regenerated, only not lightly.
"""

from __future__ import annotations

import json
from dataclasses import fields
from functools import cache
from pathlib import Path
from typing import Any

from dkernel.schema.params import REQUIRED, Param

#: The stored values.
CACHE_FILE = Path(__file__).with_name("derived.json")

#: The two kinds of stored values: estimator schemas and constants, by import path.
SECTIONS = ("estimators", "constants")

#: What :func:`lookup` returns for a path that the file does not hold.
MISSING: Any = object()

_requested: dict[str, set[str]] = {section: set() for section in SECTIONS}


@cache
def stored() -> dict[str, dict[str, Any]]:
    """The stored values, ``{section: {path: encoded value}}`` (read once per process)."""
    try:
        text = CACHE_FILE.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {section: {} for section in SECTIONS}
    data = json.loads(text)
    return {section: data.get(section, {}) for section in SECTIONS}


def lookup(section: str, path: str) -> Any:
    """The stored, still encoded value of ``path`` (``'module:name'``), or :data:`MISSING`;
    records that it was asked for (what :func:`dkernel.schema.estimator.derive_requested`
    derives)."""
    _requested[section].add(path)
    return stored()[section].get(path, MISSING)


def requested(section: str) -> list[str]:
    """The paths of ``section`` asked for in this process, sorted."""
    return sorted(_requested[section])


def constants(module: str, *names: str) -> Any:
    """Constants of ``module`` (one value, or a tuple of them for several names), taken from
    the stored values when there, so that ``module`` is not imported.

    For the values a module reads while it is imported (a step's parameter choices, a default
    its ``check_data`` uses) that live in a module that imports scikit-learn or Dask. Functions
    and classes are imported on first use instead (``dkernel._lazy.deferred``).

    Examples
    --------
    >>> constants("dkernel.schema.params", "INT_MAX")
    2147483647
    """
    values = []
    for name in names:
        path = f"{module}:{name}"
        value = lookup("constants", path)
        if value is MISSING:
            from dkernel._lazy import resolve

            values.append(resolve(path))
        else:
            values.append(decode(value))
    return values[0] if len(values) == 1 else tuple(values)


def encode(value: Any) -> Any:
    """``value`` as JSON that :func:`decode` turns back into an equal value of the same types:
    tuples, mappings and ``REQUIRED`` are tagged (``{"tuple": [...]}``)."""
    if value is REQUIRED:
        return {"required": True}
    if isinstance(value, tuple):
        return {"tuple": [encode(v) for v in value]}
    if isinstance(value, list):
        return [encode(v) for v in value]
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {"dict": {k: encode(v) for k, v in value.items()}}
    if value is None or isinstance(value, bool | int | float | str):
        return value
    raise TypeError(f"cannot store {type(value).__name__} {value!r} in {CACHE_FILE.name}")


def decode(value: Any) -> Any:
    """The value :func:`encode` wrote."""
    if isinstance(value, list):
        return [decode(v) for v in value]
    if isinstance(value, dict):
        (tag, inner), *_ = value.items()
        if tag == "required":
            return REQUIRED
        if tag == "tuple":
            return tuple(decode(v) for v in inner)
        return {k: decode(v) for k, v in inner.items()}
    return value


#: The fields of a ``Param`` stored (``name`` is the key; a derived ``Param`` has no ``check``).
_PARAM_FIELDS = (
    "kind", "default", "low", "high", "low_open", "high_open", "choices", "str_options",
    "nullable", "doc",
)  # fmt: skip
_PARAM_DEFAULTS = {f.name: f.default for f in fields(Param)}


def encode_param(param: Param) -> dict[str, Any]:
    """A derived ``Param`` as JSON: the fields that differ from ``Param``'s defaults, but
    ``name`` (the key) and ``check`` (a derived ``Param`` has none)."""
    if param.check is not None:
        raise TypeError(f"cannot store the check of {param.name!r}")
    out = {}
    for f in _PARAM_FIELDS:
        value = getattr(param, f)
        if f == "kind" or f == "default" or value != _PARAM_DEFAULTS[f]:
            # choices, str_options: tuples
            out[f] = list(value) if f in ("choices", "str_options") else encode(value)
    return out


def decode_param(name: str, values: dict[str, Any]) -> Param:
    """The ``Param`` named ``name`` that :func:`encode_param` wrote."""
    kwargs = {f: decode(v) for f, v in values.items()}
    for f in ("choices", "str_options"):
        if f in kwargs:
            kwargs[f] = tuple(kwargs[f])
    return Param(name, **kwargs)


def render(values: dict[str, dict[str, Any]]) -> str:
    """The text of ``derived.json`` for encoded ``values`` (sorted, one entry per line)."""
    return json.dumps(values, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def write(values: dict[str, dict[str, Any]], path: Path = CACHE_FILE) -> Path:
    """Write encoded ``values`` (``{section: {path: value}}``) to ``path``."""
    path.write_text(render(values), encoding="utf-8")
    stored.cache_clear()
    return path
