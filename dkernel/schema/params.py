"""Declarative parameter schemas for job specs, readers and methods.

A schema is a tuple of :class:`Param`; :func:`validate_mapping` checks a user mapping against
it completely (unknown keys, types, ranges, choices) and returns the mapping with defaults
filled in. Every error is a :class:`~dkernel.errors.SpecError` naming the key, the value and
what is allowed.
"""

from __future__ import annotations

import difflib
import math
import numbers
from collections.abc import Callable, Iterable, Mapping
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
    "int_list": "an int or a list of ints",
    "float_list": "a number or a list of numbers",
    "column": "a column index (an int) or name (a string)",
    "column_list": "a column index or name, or a list of them",
}


@dataclass(frozen=True)
class Param:
    """One parameter of a schema.

    Parameters
    ----------
    name : str
        Key in the mapping.
    kind : {'int', 'float', 'str', 'bool', 'list', 'mapping', 'int_list', 'float_list', \
'column', 'column_list', 'count_or_fraction'}
        Expected type ('float' accepts ints too; 'column': a table's column by index or by
        header name; 'count_or_fraction': scikit-learn's ``max_samples``, an int >= ``low``
        rows or a float in (0, 1] of them, so ``1`` is one row and ``1.0`` all).
    default : Any
        Value used when the key is absent; ``REQUIRED`` makes the key mandatory.
    low, high : float, optional
        Inclusive bounds unless ``low_open`` / ``high_open``.
    choices : tuple, optional
        Allowed values.
    str_options : tuple of str, optional
        Strings accepted besides a number of ``kind`` 'int' or 'float' in its range
        (``n_clusters``: an int >= 1, or ``'auto'``).
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
    str_options: tuple[str, ...] | None = None
    nullable: bool = False
    doc: str = ""
    check: Callable[[Any], str | None] | None = None

    def describe(self, *, with_cap: bool = False) -> str:
        """``an int >= 1`` etc.; ``with_cap`` adds a :data:`COUNT_CAPS` / :data:`INT_MAX`
        bound that the schema does not state itself."""
        if self.kind == "count_or_fraction":
            text = (
                f"a count (an int >= {self.low}) or a fraction of the rows (a number > 0 and <= 1)"
            )
            return text + (" (or null)" if self.nullable else "")
        text = _KIND_NAMES[self.kind]
        if self.choices is not None:
            return "one of " + ", ".join(repr(c) for c in self.choices)
        bounds = []
        if self.low is not None:
            bounds.append(f"{'>' if self.low_open else '>='} {self.low}")
        high = effective_high(self) if with_cap else self.high
        if high is not None:
            bounds.append(f"{'<' if self.high_open else '<='} {high}")
        if bounds:
            text += " " + " and ".join(bounds)
        if self.str_options:
            text += ", or " + " or ".join(repr(c) for c in self.str_options)
        if self.nullable:
            text += " (or null)"
        return text


#: Caps of count parameters that set how often work is repeated, applied by name to every
#: schema whose ``Param`` sets no ``high`` of its own: a typo such as ``n_init: 1000000000``
#: is refused at validation instead of running for days. Sizes (samples, features, memory)
#: are checked by each method's cost estimate instead.
COUNT_CAPS = {
    "n_init": 10_000,
    "n_estimators": 1_000,
    "pck_n_estimators": 1_000,
    "n_inits": 1_000,  # the former name of n_estimators
    "pck_n_inits": 1_000,
    "n_iter": 100_000,
    "pck_n_iter": 100_000,
    "max_iter": 100_000,
    "n_repeats": 1_000,
    "n_rff": 1_000_000,
    "n_seeds": 1_000_000,
    "density_max_samples": 10_000_000,
    "n_density": 10_000_000,  # the former name of density_max_samples
    "n_clusters": 100_000,
}

#: Every integer parameter without a cap of its own is at most this (32-bit signed).
INT_MAX = 2**31 - 1


def effective_high(param: Param) -> float | None:
    """``param.high``, else its :data:`COUNT_CAPS` entry, else :data:`INT_MAX` for ints."""
    if param.high is not None:
        return param.high
    if param.kind in ("int", "count_or_fraction"):
        return COUNT_CAPS.get(param.name, INT_MAX)
    return None


#: The entries' kind of each list kind.
_ENTRY_KINDS = {"int_list": "int", "float_list": "float", "column_list": "column"}


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
    if kind == "column":
        return _type_ok("int", value) or isinstance(value, str)
    if kind == "column_list":
        return isinstance(value, list) and all(_type_ok("column", v) for v in value)
    if kind == "count_or_fraction":
        return _type_ok("float", value)
    raise ValueError(f"unknown parameter kind {kind!r}")


#: Longest value shown in an error message (characters); longer ones are cut, with their
#: type and length.
SHOW_LIMIT = 200


def _bounded_repr(value: Any) -> str:
    import reprlib

    r = reprlib.Repr()
    r.maxlevel, r.maxlist, r.maxtuple, r.maxdict, r.maxset = 4, 12, 12, 12, 12
    r.maxstring, r.maxother, r.maxlong = SHOW_LIMIT, SHOW_LIMIT, 60
    try:
        text = r.repr(value)
    except Exception:  # noqa: BLE001  (a value whose repr fails is shown by its type)
        text = f"<{type(value).__name__}>"
    return text


def show_value(value: Any) -> str:
    """``value`` for an error message: its repr cut to :data:`SHOW_LIMIT` characters (and
    nested containers to a few items), followed by its type and, for sized values, length."""
    text = _bounded_repr(value)
    if len(text) > SHOW_LIMIT:
        text = text[:SHOW_LIMIT] + "…"
    return text


def did_you_mean(value: Any, names: Iterable[Any]) -> str:
    """``" Did you mean 'x'?"`` for the name closest to ``value`` among ``names``, else ``""``."""
    text = value if isinstance(value, str) else show_value(value)
    close = difflib.get_close_matches(text[:100], [str(n) for n in names], n=1)
    return f" Did you mean {close[0]!r}?" if close else ""


def _show(value: Any) -> str:
    """``show_value`` plus the type, and the length when the value was cut."""
    text = show_value(value)
    extra = ""
    cut = "..." in text or "…" in text  # reprlib and show_value mark what they cut
    if isinstance(value, str | list | tuple | Mapping) and cut:
        extra = f", length {len(value)}"
    return f"{text} ({type(value).__name__}{extra})"


def _number_hint(value: Any) -> str:
    """A hint for a number YAML read as text (``1e9``: YAML 1.1 needs ``1.0e+9``)."""
    if not isinstance(value, str):
        return ""
    try:
        number = float(value)
    except ValueError:
        return ""
    if not math.isfinite(number) or len(value) > 40:
        return ""
    shown = f"{int(number)}" if number.is_integer() and abs(number) < 1e18 else repr(number)
    return f" YAML reads {value} as text; write the number out ({shown})."


def check_value(param: Param, value: Any, where: str) -> Any:
    """Validate one value; returns it (ints promoted to float for 'float')."""
    key = f"{where}.{param.name}" if where else param.name
    if value is None:
        if param.nullable:
            return None
        raise SpecError(f"must be {param.describe()}; got null.", key)
    if param.str_options is not None and isinstance(value, str):
        if value in param.str_options:
            return value
        hint = did_you_mean(value, param.str_options)
        raise SpecError(f"must be {param.describe()}; got {_show(value)}.{hint}", key)
    if param.kind in _ENTRY_KINDS and _type_ok(_ENTRY_KINDS[param.kind], value):
        value = [value]  # one value: a one-entry list
    if not _type_ok(param.kind, value):
        raise SpecError(
            f"must be {param.describe()}; got {_show(value)}.{_number_hint(value)}", key
        )
    if param.choices is not None and value not in param.choices:
        hint = did_you_mean(value, param.choices)
        raise SpecError(f"must be {param.describe()}; got {_show(value)}.{hint}", key)
    if param.kind in ("int", "float"):
        if value != value or value in (float("inf"), float("-inf")):
            raise SpecError(f"must be a finite number; got {_show(value)}.", key)
        too_low = param.low is not None and (
            value <= param.low if param.low_open else value < param.low
        )
        high = effective_high(param)
        too_high = high is not None and (value >= high if param.high_open else value > high)
        if too_low or too_high:
            shown = param.describe(with_cap=too_high)
            raise SpecError(f"must be {shown}; got {_show(value)}.", key)
        if param.kind == "float":
            value = float(value)
    if param.kind == "count_or_fraction":
        count = isinstance(value, numbers.Integral)
        in_range = (
            (param.low is None or value >= param.low) and value <= effective_high(param)
            if count
            else math.isfinite(value) and 0 < value <= 1
        )
        if not in_range:
            raise SpecError(f"must be {param.describe()}; got {_show(value)}.", key)
        value = int(value) if count else float(value)
    if param.kind in ("int_list", "float_list"):
        high = INT_MAX if param.kind == "int_list" else None
        if high is not None and any(abs(v) > high for v in value):
            raise SpecError(
                f"must be {param.describe()} between -{high} and {high}; got {_show(value)}.",
                key,
            )
        if param.kind == "float_list" and not all(math.isfinite(v) for v in value):
            raise SpecError(f"must hold finite numbers; got {_show(value)}.", key)
    if param.check is not None:
        problem = param.check(value)
        if problem:
            raise SpecError(f"{problem}; got {_show(value)}.", key)
    return value


#: Parameter names that changed (old -> new, issue 16's one name per concept): a spec that
#: still uses an old name is told the new one.
RENAMED = {
    "spectral_bandwidth": "sigma",
    "spectral_fraction": "sigma_fraction",
    "bandwidths": "sigmas",
    "block_size": "block_rows",
}


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
                hint = did_you_mean(key, names)
                if RENAMED.get(key) in names:
                    hint = f" It was renamed to {RENAMED[key]!r}."
                valid = ", ".join(names) if names else "(none)"
                raise SpecError(
                    f"unknown key {show_value(key)}.{hint} Valid keys: {valid}.",
                    f"{where}.{str(key)[:100]}" if where else str(key)[:100],
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
