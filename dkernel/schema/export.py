"""JSON Schema (draft 2020-12) of ``Param`` tuples, for editors that complete job specs.

The JSON Schema says what :func:`~dkernel.schema.params.validate_mapping` checks by type,
range and choices; checks written as code (``Param.check``: path existence, sizes such as
``'4GiB'``) are left to ``dkernel validate``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from dkernel.schema.params import REQUIRED, Param, effective_high

#: The dialect of every schema written here.
DRAFT = "https://json-schema.org/draft/2020-12/schema"

_TYPES: dict[str, dict[str, Any]] = {
    "int": {"type": "integer"},
    "float": {"type": "number"},
    "str": {"type": "string"},
    "bool": {"type": "boolean"},
    "list": {"type": "array"},
    "mapping": {"type": "object"},
    # one value stands for a one-entry list
    "int_list": {"type": ["integer", "array"], "items": {"type": "integer"}},
    "float_list": {"type": ["number", "array"], "items": {"type": "number"}},
    "column": {"type": ["integer", "string"]},
    "column_list": {
        "type": ["integer", "string", "array"],
        "items": {"type": ["integer", "string"]},
    },
    "count_or_fraction": {"type": "number"},
}


def _plain(value: Any) -> Any:
    """A default as JSON: tuples become lists."""
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return value


def param_schema(param: Param) -> dict[str, Any]:
    """The JSON Schema of one parameter's value."""
    out: dict[str, Any] = dict(_TYPES[param.kind])
    if param.nullable:
        kinds = out["type"]
        out["type"] = [*(kinds if isinstance(kinds, list) else [kinds]), "null"]
    if param.choices is not None:
        out["enum"] = [*param.choices, *([None] if param.nullable else [])]
    if param.kind in ("int", "float"):
        if param.low is not None:
            out["exclusiveMinimum" if param.low_open else "minimum"] = param.low
        high = effective_high(param)
        if high is not None:
            out["exclusiveMaximum" if param.high_open else "maximum"] = high
    if param.kind == "count_or_fraction":
        count = {"type": "integer", "minimum": param.low, "maximum": effective_high(param)}
        fraction = {"type": "number", "exclusiveMinimum": 0, "maximum": 1}
        out = {"anyOf": [count, fraction]}
        if param.nullable:
            out["anyOf"].append({"type": "null"})
    if param.str_options:
        out = {"anyOf": [out, {"type": "string", "enum": list(param.str_options)}]}
    if param.default is not REQUIRED:
        out["default"] = _plain(param.default)
    if param.doc:
        out["description"] = param.doc
    return out


def object_schema(params: Iterable[Param], *, description: str = "") -> dict[str, Any]:
    """A closed object with one property per parameter; required ones are listed."""
    params = tuple(params)
    out: dict[str, Any] = {
        "type": "object",
        "properties": {p.name: param_schema(p) for p in params},
        "additionalProperties": False,
    }
    required = [p.name for p in params if p.default is REQUIRED]
    if required:
        out["required"] = required
    if description:
        out["description"] = description
    return out
