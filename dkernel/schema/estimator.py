"""Parameter schemas derived from an estimator: one declaration, read by jobs and the CLI.

An estimator declares each parameter once: its default in ``__init__``, its type and range in
``_parameter_constraints`` (scikit-learn's), its meaning in the numpydoc ``Parameters``
section of the class docstring. :class:`EstimatorSchema` reads the three into a tuple of
:class:`~dkernel.schema.params.Param` for a job step, and builds the estimator back from the
validated parameters. A step names its estimator by import path, and the derivation is read
from the stored copy (``dkernel.schema.cache``, kept equal to this derivation by a test), so
that listing and validating jobs does not import scikit-learn.

Constraint → ``Param``: ``Interval(Integral, ...)`` → ``'int'``, ``Interval(Real, ...)`` →
``'float'`` (bounds and open/closed ends kept), ``StrOptions`` → ``'str'`` with choices (the
default first, then sorted), ``"boolean"`` → ``'bool'``, ``str`` / ``dict`` → ``'str'`` /
``'mapping'``, ``None`` → nullable, an interval together with ``StrOptions`` → the
interval's kind with ``str_options`` (``n_clusters``: an int >= 1, or ``'auto'``), an int
interval together with a float one of (0, 1] → ``'count_or_fraction'`` (scikit-learn's
``max_samples``). Alternatives that only Python can pass (callables,
classes such as ``np.dtype``, fitted transformers) are left out: a job spec cannot write them.
Anything else (two numeric kinds, array-likes, ``"random_state"``) cannot be written as one
``Param`` and raises at derivation unless the step excludes the parameter.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from numbers import Integral, Real
from typing import Any

from dkernel._lazy import resolve
from dkernel.schema import cache
from dkernel.schema.params import REQUIRED, Param

#: Estimator parameters a job supplies itself: ``random_state`` is the job's ``seed`` and
#: ``progress`` the command line's switch. Never part of a job's ``params``.
JOB_SUPPLIED = ("random_state", "progress")

#: ``Param`` fields a step may narrow or replace (``overrides``).
_OVERRIDABLE = {
    "default", "low", "high", "low_open", "high_open", "choices", "nullable", "doc", "check"
}  # fmt: skip


class SchemaDerivationError(TypeError):
    """An estimator parameter whose constraints cannot be written as one ``Param``."""


@dataclass(frozen=True)
class EstimatorSchema:
    """The job parameters of one estimator, derived from the estimator itself.

    Parameters
    ----------
    source : type or str
        A scikit-learn-style estimator class with ``_parameter_constraints``, or its import
        path ``'package.module:Class'``. A path is imported only to build the estimator (or
        to derive what the stored derivation lacks): the parameters come from
        ``dkernel.schema.cache``, so a job step declares them without importing
        scikit-learn.
    prefix : str
        Prefix of the job parameter names (``'pck_'``: ``pck_n_estimators`` is ``n_estimators``), for a
        step that configures a second estimator.
    include : tuple of str, optional
        Only these estimator parameters (default: all but ``exclude`` and
        :data:`JOB_SUPPLIED`).
    exclude : mapping of str to str
        Estimator parameters the job does not expose, each with the reason (a step declares
        its own parameter of that name, or supplies the value itself).
    overrides : mapping of str to mapping
        ``Param`` fields replaced for a parameter (``{'kernel': {'choices': (...)}}``): a
        narrower range or choice list than the estimator accepts, a ``check`` the spec's
        validation runs early (what ``fit`` would refuse), or a required value where the
        estimator has a default. A replaced ``default`` is a second default: avoid it.
    """

    source: type | str
    prefix: str = ""
    include: tuple[str, ...] | None = None
    exclude: Mapping[str, str] = field(default_factory=dict)
    overrides: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    @property
    def path(self) -> str:
        """The estimator's import path, ``'package.module:Class'``."""
        if isinstance(self.source, str):
            return self.source
        return f"{self.source.__module__}:{self.source.__qualname__}"

    @cached_property
    def estimator(self) -> type:
        """The estimator class (imported on first use when given by path)."""
        return resolve(self.source) if isinstance(self.source, str) else self.source

    def _stored(self) -> dict[str, Any] | None:
        """The stored derivation of a class given by path (None for a class or a path the
        cache lacks: derived from the class then)."""
        if not isinstance(self.source, str):
            return None
        entry = cache.lookup("estimators", self.source)
        return None if entry is cache.MISSING else entry

    def _param(self, name: str) -> Param:
        entry = self._stored()
        if entry is not None and name in entry["params"]:
            return cache.decode_param(self.prefix + name, entry["params"][name])
        return derive_param(self.estimator, name, prefix=self.prefix)

    def names(self) -> tuple[str, ...]:
        """Estimator parameter names in the job's schema, in signature order."""
        entry = self._stored()
        signature = entry["signature"] if entry is not None else list(_signature(self.estimator))
        names = self.include if self.include is not None else tuple(signature)
        unknown = sorted((set(names) | set(self.exclude) | set(self.overrides)) - set(signature))
        if unknown:
            owner = self.path.rpartition(":")[2].rpartition(".")[2]
            raise SchemaDerivationError(
                f"{owner} has no parameters {unknown}; its parameters are {', '.join(signature)}."
            )
        return tuple(n for n in names if n not in self.exclude and n not in JOB_SUPPLIED)

    @property
    def params(self) -> tuple[Param, ...]:
        """The derived ``Param`` of every exposed parameter, overrides applied."""
        out = []
        for name in self.names():
            param = self._param(name)
            changes = dict(self.overrides.get(name, {}))
            bad = sorted(set(changes) - _OVERRIDABLE)
            if bad:
                raise SchemaDerivationError(f"cannot override {bad} of {name!r}")
            if "default" in changes and "choices" not in changes and param.choices:
                changes["choices"] = _default_first(param.choices, changes["default"])
            out.append(replace(param, **changes))
        return tuple(out)

    def build(self, params: Mapping[str, Any], **fixed: Any) -> Any:
        """The estimator from validated job ``params``; ``fixed`` values (the seed, values the
        step resolved itself) take precedence."""
        kwargs = {
            name: params[self.prefix + name]
            for name in self.names()
            if self.prefix + name in params and name not in fixed
        }
        return self.estimator(**kwargs, **fixed)


def estimator_entry(estimator: type) -> dict[str, Any]:
    """What ``dkernel.schema.cache`` stores of an estimator: its signature and the encoded
    ``Param`` of every parameter a job spec can express (the others are left out)."""
    signature = list(_signature(estimator))
    params = {}
    for name in signature:
        try:
            params[name] = cache.encode_param(derive_param(estimator, name))
        except SchemaDerivationError:
            continue
    return {"signature": signature, "params": params}


def derive_requested() -> dict[str, dict[str, Any]]:
    """Every value asked of ``dkernel.schema.cache`` in this process, derived now from its
    module (imported here): what ``derived.json`` must hold once every job step and reader
    is imported."""
    return {
        "estimators": {p: estimator_entry(resolve(p)) for p in cache.requested("estimators")},
        "constants": {p: cache.encode(resolve(p)) for p in cache.requested("constants")},
    }


def _signature(estimator: type) -> dict[str, inspect.Parameter]:
    # the class's signature is its constructor's, without self
    parameters = inspect.signature(estimator).parameters
    return {
        name: p
        for name, p in parameters.items()
        if name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    }


def derive_param(estimator: type, name: str, *, prefix: str = "") -> Param:
    """One job ``Param`` from an estimator's constraint, default and docstring.

    Raises
    ------
    SchemaDerivationError
        The parameter has no constraint, or one a job spec cannot express.
    """
    owner = estimator.__name__
    constraints = getattr(estimator, "_parameter_constraints", {}).get(name)
    if constraints is None:
        raise SchemaDerivationError(f"{owner}._parameter_constraints has no entry {name!r}")
    default = _signature(estimator)[name].default
    default = REQUIRED if default is inspect.Parameter.empty else default
    nullable = any(c is None for c in constraints)
    kinds: list[dict[str, Any]] = []
    for c in constraints:
        if c is None:
            continue
        kind = _kind_of(c, owner, name)
        if kind is not None:
            kinds.append(kind)
    kinds = _merge_str_options(_merge_count_or_fraction(kinds))
    if len(kinds) != 1:
        what = "no constraint a job spec can express" if not kinds else "several kinds"
        raise SchemaDerivationError(
            f"{owner}.{name}: {what} ({constraints!r}); exclude it from the job's schema and "
            "declare a job parameter instead."
        )
    spec = kinds[0]
    if spec.get("choices") is not None:
        spec["choices"] = _default_first(sorted(spec["choices"]), default)
    return Param(
        prefix + name,
        default=default,
        nullable=nullable,
        doc=parameter_doc(estimator, name),
        **spec,
    )


def _merge_count_or_fraction(kinds: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """scikit-learn's ``max_samples`` (an int interval and a float interval (0, 1],
    ``dkernel._validation.max_samples_constraint``) as one 'count_or_fraction' ``Param``;
    other lists unchanged."""
    ints = [k for k in kinds if k["kind"] == "int"]
    interval = (0, 1, True, False)  # (0, 1]
    fractions = [
        k
        for k in kinds
        if k["kind"] == "float" and (k["low"], k["high"], k["low_open"], k["high_open"]) == interval
    ]
    if len(kinds) != 2 or len(ints) != 1 or len(fractions) != 1:
        return kinds
    return [{"kind": "count_or_fraction", "low": ints[0]["low"]}]


def _merge_str_options(kinds: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A number range and string choices (``[Interval(Integral, 1, None), StrOptions({'auto'})]``)
    as one ``Param`` fields: the range with ``str_options``; other lists unchanged."""
    numbers = [k for k in kinds if k["kind"] in ("int", "float")]
    strings = [k for k in kinds if k["kind"] == "str" and k.get("choices")]
    if len(kinds) != 2 or len(numbers) != 1 or len(strings) != 1:
        return kinds
    return [numbers[0] | {"str_options": tuple(sorted(strings[0]["choices"]))}]


def _default_first(choices: Any, default: Any) -> tuple:
    """``choices`` with ``default`` moved to the front (a set has no order of its own)."""
    return tuple(sorted(choices, key=lambda c: c != default))


def _kind_of(constraint: Any, owner: str, name: str) -> dict[str, Any] | None:
    """``Param`` fields for one constraint; ``None`` for a Python-only alternative."""
    from sklearn.utils._param_validation import HasMethods, Interval, Options, StrOptions

    if isinstance(constraint, Interval):
        is_int = constraint.type is Integral
        if not is_int and constraint.type is not Real and constraint.type.__name__ != "RealNotInt":
            raise SchemaDerivationError(f"{owner}.{name}: interval of {constraint.type!r}")
        closed = constraint.closed
        return {
            "kind": "int" if is_int else "float",
            "low": constraint.left,
            "high": constraint.right,
            "low_open": constraint.left is not None and closed in ("right", "neither"),
            "high_open": constraint.right is not None and closed in ("left", "neither"),
        }
    if isinstance(constraint, StrOptions):
        return {"kind": "str", "choices": set(constraint.options) - set(constraint.deprecated)}
    if isinstance(constraint, Options):
        raise SchemaDerivationError(f"{owner}.{name}: Options of {constraint.type!r}")
    if constraint == "boolean" or constraint is bool:
        return {"kind": "bool"}
    if constraint is str:
        return {"kind": "str"}
    if constraint is dict:
        return {"kind": "mapping"}
    if constraint is callable or isinstance(constraint, HasMethods):
        return None
    if isinstance(constraint, type) and constraint not in (int, float, list, tuple):
        return None  # a class such as np.dtype or np.random.Generator: Python callers only
    raise SchemaDerivationError(f"{owner}.{name}: constraint {constraint!r}")


# --------------------------------------------------------------------------------------------
# the one-line description of a parameter, from the numpydoc ``Parameters`` section

_SECTION = re.compile(r"^Parameters\n-{3,}\n", re.MULTILINE)
_NEXT_SECTION = re.compile(r"^\S[^\n]*\n-{3,}$", re.MULTILINE)
_ROLE = re.compile(r":(?:class|func|meth|attr|data|mod|obj):`~?([^`]+)`")
_LITERAL = re.compile(r"``([^`]+)``")
#: Parentheticals that cite the sources (kept in the docstrings, not in the CLI's one line).
_CITATION = re.compile(
    r"\s*\((?:[^()]*\b(?:00\d|Eq\.|Paper [IV]+|Alg\.|Fig\.|Def\.|Prop\.)|[^()]*§"
    r"|[^()]*\[[A-Z][A-Za-z]*\d{4}[a-z]?\])[^()]*\)"  # or a key of docs/references.md
)
#: A sentence ends at ``. `` before a capital, a digit or a quote, except after the
#: abbreviations that cite (``Eq. 5``, ``Prop. 6``) or abbreviate (``e.g. 5``).
_SENTENCE_END = re.compile(
    r"(?<=[.!?])(?<!\bEq\.)(?<!\bProp\.)(?<!\bDef\.)(?<!\bAlg\.)(?<!\bFig\.)"
    r"(?<!\be\.g\.)(?<!\bi\.e\.)(?<!\bcf\.)(?<!\bvs\.)\s+(?=[A-Z0-9'\"(])"
)


def _parameter_entries(doc: str) -> dict[str, tuple[str, str]]:
    """``{name: (type, description)}`` of a numpydoc ``Parameters`` section; an entry
    ``a, b : x`` gives both names. Paragraphs of a description are separated by a blank line
    (``"\\n\\n"``), lines of one paragraph by a space."""
    doc = inspect.cleandoc(doc)
    match = _SECTION.search(doc)
    if match is None:
        return {}
    body = doc[match.end() :]
    following = _NEXT_SECTION.search(body)
    if following is not None:
        body = body[: following.start()]
    entries: dict[str, tuple[str, str]] = {}
    for block in re.split(r"^(?=\S)", body, flags=re.MULTILINE):
        if not block.strip():
            continue
        head, _, rest = block.partition("\n")
        names, _, kind = head.partition(" : ")
        paragraphs = re.split(r"\n\s*\n", rest.strip())
        text = "\n\n".join(" ".join(p.split()) for p in paragraphs)
        for n in names.split(","):
            entries.setdefault(n.strip().strip("*"), (kind.strip(), text))
    return entries


def _one_line(text: str) -> str:
    text = _ROLE.sub(lambda m: m.group(1).split(".")[-1], text)
    text = _LITERAL.sub(r"\1", text)
    text = _CITATION.sub("", text)
    paragraph = text.split("\n\n")[0]
    first = _SENTENCE_END.split(paragraph.strip(), maxsplit=1)[0]
    return " ".join(first.split())


def parameter_doc(estimator: type, name: str) -> str:
    """The first sentence of ``name``'s description in the class docstring, plain text.

    Citations in parentheses are dropped and RST markup is flattened. An entry that only
    refers elsewhere (``see :class:`MeanShift```) is looked up in the base classes.
    """
    for cls in inspect.getmro(estimator):
        kind, text = _parameter_entries(cls.__doc__ or "").get(name, ("", ""))
        if text and not (kind.lower().startswith("see ") or text.lower().startswith("see ")):
            return _one_line(text)
    return ""
