"""Declarative parameter schemas for job specs, readers and methods.

A schema is a tuple of :class:`Param`; :func:`validate_mapping` checks a user mapping against
it completely (unknown keys, types, ranges, choices) and returns the mapping with defaults
filled in. Every error is a :class:`~dkernel.errors.SpecError` naming the key, the value and
what is allowed.
"""

from __future__ import annotations

import difflib
import numbers
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from dkernel.errors import SpecError


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED: Any = _Required()

_KIND_NAMES = {
    "int": "an int",
    "float": "a number",
    "str": "a string",
    "bool": "true or false",
    "list": "a list",
    "mapping": "a mapping",
    "int_list": "a list of ints",
    "float_list": "a list of numbers",
}


@dataclass(frozen=True)
class Param:
    """One parameter of a schema.

    Parameters
    ----------
    name : str
        Key in the mapping.
    kind : {'int', 'float', 'str', 'bool', 'list', 'mapping', 'int_list', 'float_list'}
        Expected type ('float' accepts ints too).
    default : Any
        Value used when the key is absent; ``REQUIRED`` makes the key mandatory.
    low, high : float, optional
        Inclusive bounds unless ``low_open`` / ``high_open``.
    choices : tuple, optional
        Allowed values.
    nullable : bool
        Accept ``null`` (None).
    doc : str
        One line shown by ``dkernel validate --explain`` and in errors.
    check : callable, optional
        Extra check ``value -> error text or None``.
    """

    name: str
    kind: str
    default: Any = REQUIRED
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    choices: tuple | None = None
    nullable: bool = False
    doc: str = ""
    check: Callable[[Any], str | None] | None = None

    def describe(self) -> str:
        text = _KIND_NAMES[self.kind]
        if self.choices is not None:
            return "one of " + ", ".join(repr(c) for c in self.choices)
        bounds = []
        if self.low is not None:
            bounds.append(f"{'>' if self.low_open else '>='} {self.low}")
        if self.high is not None:
            bounds.append(f"{'<' if self.high_open else '<='} {self.high}")
        if bounds:
            text += " " + " and ".join(bounds)
        if self.nullable:
            text += " (or null)"
        return text


def _type_ok(kind: str, value: Any) -> bool:
    if kind == "int":
        return isinstance(value, numbers.Integral) and not isinstance(value, bool)
    if kind == "float":
        return isinstance(value, numbers.Real) and not isinstance(value, bool)
    if kind == "str":
        return isinstance(value, str)
    if kind == "bool":
        return isinstance(value, bool)
    if kind == "list":
        return isinstance(value, list)
    if kind == "mapping":
        return isinstance(value, Mapping)
    if kind == "int_list":
        return isinstance(value, list) and all(_type_ok("int", v) for v in value)
    if kind == "float_list":
        return isinstance(value, list) and all(_type_ok("float", v) for v in value)
    raise ValueError(f"unknown parameter kind {kind!r}")


def _show(value: Any) -> str:
    return f"{value!r} ({type(value).__name__})"


def check_value(param: Param, value: Any, where: str) -> Any:
    """Validate one value; returns it (ints promoted to float for 'float')."""
    key = f"{where}.{param.name}" if where else param.name
    if value is None:
        if param.nullable:
            return None
        raise SpecError(f"must be {param.describe()}; got null.", key)
    if not _type_ok(param.kind, value):
        raise SpecError(f"must be {param.describe()}; got {_show(value)}.", key)
    if param.choices is not None and value not in param.choices:
        close = difflib.get_close_matches(str(value), [str(c) for c in param.choices], n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise SpecError(f"must be {param.describe()}; got {value!r}.{hint}", key)
    if param.kind in ("int", "float"):
        if value != value or value in (float("inf"), float("-inf")):
            raise SpecError(f"must be a finite number; got {value!r}.", key)
        too_low = param.low is not None and (
            value <= param.low if param.low_open else value < param.low
        )
        too_high = param.high is not None and (
            value >= param.high if param.high_open else value > param.high
        )
        if too_low or too_high:
            raise SpecError(f"must be {param.describe()}; got {value!r}.", key)
        if param.kind == "float":
            value = float(value)
    if param.check is not None:
        problem = param.check(value)
        if problem:
            raise SpecError(f"{problem}; got {value!r}.", key)
    return value


def validate_mapping(
    raw: Any, schema: tuple[Param, ...], where: str, *, extra_ok: bool = False
) -> dict[str, Any]:
    """Validate ``raw`` against ``schema``; fill defaults; reject unknown keys.

    Parameters
    ----------
    raw : mapping or None
        The user's mapping (``None`` is treated as empty).
    schema : tuple of Param
    where : str
        Dotted location used in messages (``"params"``).
    extra_ok : bool
        Keep unknown keys instead of rejecting them.
    """
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise SpecError(f"must be a mapping of keys to values; got {_show(raw)}.", where or None)
    names = [p.name for p in schema]
    if not extra_ok:
        for key in raw:
            if key not in names:
                close = difflib.get_close_matches(str(key), names, n=1)
                hint = f" Did you mean {close[0]!r}?" if close else ""
                valid = ", ".join(names) if names else "(none)"
                raise SpecError(
                    f"unknown key {key!r}.{hint} Valid keys: {valid}.",
                    f"{where}.{key}" if where else str(key),
                )
    out: dict[str, Any] = dict(raw) if extra_ok else {}
    for param in schema:
        if param.name in raw:
            out[param.name] = check_value(param, raw[param.name], where)
        elif param.default is REQUIRED:
            key = f"{where}.{param.name}" if where else param.name
            raise SpecError(f"is required ({param.describe()}). {param.doc}".rstrip(), key)
        else:
            out[param.name] = param.default
    return out
