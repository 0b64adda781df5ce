"""Job parameters are derived from their estimators: one default, one kind, one range.

For every registered method and every estimator it declares, each job parameter named like an
estimator parameter has the estimator's default (``get_params()``), its kind, and a range
within the estimator's; estimator parameters the job leaves out say why.
"""

from __future__ import annotations

import io
import re
from contextlib import redirect_stdout
from numbers import Integral, Real

import numpy as np
import pytest
from sklearn.base import BaseEstimator
from sklearn.utils._param_validation import Interval, StrOptions

from dkernel.cli import main
from dkernel.errors import SpecError
from dkernel.jobs.registry import METHODS
from dkernel.schema.estimator import (
    JOB_SUPPLIED,
    EstimatorSchema,
    SchemaDerivationError,
    derive_param,
    parameter_doc,
)
from dkernel.schema.params import REQUIRED, validate_mapping

#: Job defaults that differ from the estimator's on purpose, with the reason (none: one set of
#: defaults).
DEFAULT_EXCEPTIONS: dict[tuple[str, str], str] = {}

CASES = [(name, schema) for name in METHODS.names() for schema in METHODS[name].estimators]


def test_every_method_declares_its_estimators():
    for name in METHODS.names():
        assert METHODS[name].estimators, f"{name} derives no parameters from an estimator"


def _within(job, est) -> list[str]:
    """Ways ``job``'s range is wider than ``est``'s."""
    problems = []
    if job.nullable and not est.nullable:
        problems.append("accepts null")
    if est.low is not None and (
        job.low is None
        or job.low < est.low
        or (job.low == est.low and est.low_open and not job.low_open)
    ):
        problems.append(f"low {job.low} below {est.low}")
    if est.high is not None and (
        job.high is None
        or job.high > est.high
        or (job.high == est.high and est.high_open and not job.high_open)
    ):
        problems.append(f"high {job.high} above {est.high}")
    if est.choices is not None and (job.choices is None or set(job.choices) - set(est.choices)):
        problems.append(f"choices {job.choices} outside {est.choices}")
    return problems


@pytest.mark.parametrize(
    ("method", "schema"), CASES, ids=[f"{m}-{s.estimator.__name__}" for m, s in CASES]
)
def test_shared_parameters_have_the_estimators_default_kind_and_range(method, schema):
    job = {p.name: p for p in METHODS[method].params}
    defaults = schema.estimator().get_params(deep=False)
    names = schema.include if schema.include is not None else tuple(defaults)
    checked = 0
    for name in names:
        if name in JOB_SUPPLIED:
            assert schema.prefix + name not in job, f"{name} is supplied by the job"
            continue
        if name in schema.exclude:
            assert schema.exclude[name].strip(), f"{method}: exclude {name!r} without a reason"
            continue
        key = schema.prefix + name
        assert key in job, f"{method}: {schema.estimator.__name__}.{name} is not a job parameter"
        param, plain = job[key], derive_param(schema.estimator, name, prefix=schema.prefix)
        if (method, key) not in DEFAULT_EXCEPTIONS and param.default is not REQUIRED:
            assert param.default == defaults[name], f"{method}.{key}"
        assert param.kind == plain.kind, f"{method}.{key}"
        assert not _within(param, plain), f"{method}.{key}: {_within(param, plain)}"
        checked += 1
    assert checked >= 4


@pytest.mark.parametrize("method", METHODS.names())
def test_cli_methods_shows_the_estimators_defaults(method):
    """``dkernel methods NAME`` prints ``(default X)`` with the estimator's ``get_params()``."""
    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["methods", method]) == 0
    lines = {m.group(1): m.group(0) for m in re.finditer(r"^  (\w+): .*$", out.getvalue(), re.M)}
    for schema in METHODS[method].estimators:
        for name, value in schema.estimator().get_params(deep=False).items():
            key = schema.prefix + name
            if name in schema.exclude or key not in lines or (method, key) in DEFAULT_EXCEPTIONS:
                continue
            param = next(p for p in METHODS[method].params if p.name == key)
            expected = "(required)" if param.default is REQUIRED else f"(default {value!r})"
            assert expected in lines[key], lines[key]


# --- derivation ------------------------------------------------------------------------------


class _Toy(BaseEstimator):
    """A toy estimator.

    Parameters
    ----------
    n_things : int
        How many things (Paper II Eq. 4). A second sentence.
    width : float, optional
        Width of a thing (:class:`~dkernel.Thing`, ``x`` units; [Agersborg2012]).
    mode : {'b', 'a', 'c'}
        The mode.

        A second paragraph.
    flag : bool
    fraction, other : float
        Shared description.
    random_state : int, optional
    memory : str or float
        Not expressible.

    Attributes
    ----------
    n_things_ : int
        Not a parameter.
    """

    _parameter_constraints: dict = {
        "n_things": [Interval(Integral, 1, 100, closed="left")],
        "width": [Interval(Real, 0, None, closed="neither"), None],
        "mode": [StrOptions({"a", "b", "c"}), callable],
        "flag": ["boolean"],
        "fraction": [Interval(Real, 0, 1, closed="right")],
        "other": [np.dtype],
        "random_state": ["random_state"],
        "memory": [str, Interval(Real, 0, None, closed="neither"), None],
    }

    def __init__(
        self,
        n_things=3,
        *,
        width=None,
        mode="c",
        flag=False,
        fraction=0.5,
        other=None,
        random_state=None,
        memory=None,
    ):
        self.n_things = n_things
        self.width = width
        self.mode = mode
        self.flag = flag
        self.fraction = fraction
        self.other = other
        self.random_state = random_state
        self.memory = memory


def test_derive_kinds_bounds_defaults_and_docs():
    n = derive_param(_Toy, "n_things")
    assert (n.kind, n.default, n.low, n.high, n.low_open, n.high_open) == (
        "int", 3, 1, 100, False, True
    )  # fmt: skip
    assert n.doc == "How many things."
    w = derive_param(_Toy, "width", prefix="toy_")
    assert (w.name, w.kind, w.nullable, w.low, w.low_open) == ("toy_width", "float", True, 0, True)
    assert w.doc == "Width of a thing."
    m = derive_param(_Toy, "mode")
    assert m.choices == ("c", "a", "b")  # the default first, then sorted; callable dropped
    assert m.doc == "The mode."
    assert derive_param(_Toy, "flag").kind == "bool"
    f = derive_param(_Toy, "fraction")
    assert (f.low_open, f.high_open, f.doc) == (True, False, "Shared description.")
    assert parameter_doc(_Toy, "other") == "Shared description."
    with pytest.raises(SchemaDerivationError, match="several kinds"):
        derive_param(_Toy, "memory")
    with pytest.raises(SchemaDerivationError, match="no constraint a job spec can express"):
        derive_param(_Toy, "other")


def test_schema_excludes_builds_and_validates():
    schema = EstimatorSchema(
        _Toy,
        exclude={"memory": "the job's limits", "other": "Python only"},
        overrides={"mode": {"choices": ("a", "c")}},
    )
    names = [p.name for p in schema.params]
    assert names == ["n_things", "width", "mode", "flag", "fraction"]  # no random_state
    params = validate_mapping({"width": 2}, schema.params, "params")
    toy = schema.build({**params, "unrelated": 1}, random_state=7)
    assert toy.get_params()["width"] == 2.0 and toy.random_state == 7 and toy.mode == "c"
    assert EstimatorSchema(_Toy).build({"n_things": 5, "x": 1}).n_things == 5
    with pytest.raises(SchemaDerivationError, match="no parameters"):
        EstimatorSchema(_Toy, exclude={"nope": "?"}).names()
    with pytest.raises(SchemaDerivationError, match="several kinds"):
        _ = EstimatorSchema(_Toy, exclude={"other": "Python only"}).params


class _Auto(BaseEstimator):
    """Toy with an int-or-'auto' parameter.

    Parameters
    ----------
    n_clusters : int or 'auto'
        How many clusters.
    """

    _parameter_constraints: dict = {
        "n_clusters": [Interval(Integral, 1, None, closed="left"), StrOptions({"auto"})]
    }

    def __init__(self, n_clusters=2):
        self.n_clusters = n_clusters


def test_int_or_string_kind_is_derived_described_and_validated():
    from dkernel.errors import SpecError
    from dkernel.schema import cache
    from dkernel.schema.export import param_schema

    param = derive_param(_Auto, "n_clusters")
    assert (param.kind, param.low, param.str_options, param.choices) == ("int", 1, ("auto",), None)
    assert param.describe() == "an int >= 1, or 'auto'"
    assert cache.decode_param("n_clusters", cache.encode_param(param)) == param
    assert param_schema(param)["anyOf"][1] == {"type": "string", "enum": ["auto"]}
    schema = (param,)
    assert validate_mapping({"n_clusters": 3}, schema, "params") == {"n_clusters": 3}
    assert validate_mapping({"n_clusters": "auto"}, schema, "params") == {"n_clusters": "auto"}
    assert validate_mapping({}, schema, "params") == {"n_clusters": 2}
    with pytest.raises(SpecError, match=r"params\.n_clusters.*an int >= 1, or 'auto'.*'foo'"):
        validate_mapping({"n_clusters": "foo"}, schema, "params")
    with pytest.raises(SpecError, match="Did you mean 'auto'"):
        validate_mapping({"n_clusters": "atuo"}, schema, "params")
    with pytest.raises(SpecError, match=r"an int >= 1.*or 'auto'.*got 0"):
        validate_mapping({"n_clusters": 0}, schema, "params")
    with pytest.raises(SpecError, match="or 'auto'"):
        validate_mapping({"n_clusters": 2.5}, schema, "params")


@pytest.mark.parametrize("method", ["mssc", "spectral-clustering", "kernel-decomposition"])
def test_jobs_accept_auto_n_clusters(method):
    (param,) = [p for p in METHODS[method].params if p.name == "n_clusters"]
    assert param.str_options == ("auto",)
    assert "or 'auto'" in param.describe()
    assert validate_mapping({"n_clusters": "auto"}, (param,), "params")["n_clusters"] == "auto"
    buf = io.StringIO()
    with redirect_stdout(buf):
        main(["methods", method])
    assert re.search(r"n_clusters: an? (int >= 1|int or a list of ints), or 'auto'", buf.getvalue())


def test_one_value_of_a_list_parameter_is_a_one_entry_list():
    # kernel-decomposition compares lists of models; one C is written as every method takes it
    (param,) = [p for p in METHODS["kernel-decomposition"].params if p.name == "n_clusters"]
    assert validate_mapping({"n_clusters": 3}, (param,), "params")["n_clusters"] == [3]
    assert validate_mapping({"n_clusters": [2, 3]}, (param,), "params")["n_clusters"] == [2, 3]
    (sigmas,) = [p for p in METHODS["kernel-decomposition"].params if p.name == "sigmas"]
    assert validate_mapping({"sigmas": 0.5}, (sigmas,), "params")["sigmas"] == [0.5]
    with pytest.raises(SpecError, match="an int or a list of ints"):
        validate_mapping({"n_clusters": 2.5}, (param,), "params")


def test_max_samples_is_a_count_or_a_fraction_as_in_scikit_learn():
    # one meaning of max_samples across the package (tests/test_vocabulary.py): an int is a
    # count, a float in (0, 1] a fraction of the rows, so 1 is one row and 1.0 all of them
    from dkernel.errors import SpecError
    from dkernel.schema import cache
    from dkernel.schema.export import param_schema

    for method, least in (("pck-spectral", 2), ("change-detection", 10), ("kppr", 3)):
        (param,) = [p for p in METHODS[method].params if p.name == "max_samples"]
        assert (param.kind, param.low) == ("count_or_fraction", least)
        assert cache.decode_param("max_samples", cache.encode_param(param)) == param
        schema = (param,)
        assert validate_mapping({"max_samples": 500}, schema, "params") == {"max_samples": 500}
        fraction = validate_mapping({"max_samples": 1.0}, schema, "params")["max_samples"]
        assert fraction == 1.0 and isinstance(fraction, float)
        for bad in (1.5, 0.0, -0.5, least - 1, float("nan"), "half", True):
            with pytest.raises(SpecError, match=rf"a count \(an int >= {least}\) or a fraction"):
                validate_mapping({"max_samples": bad}, schema, "params")
        count, share = param_schema(param)["anyOf"]
        assert count["type"] == "integer" and count["minimum"] == least
        assert share == {"type": "number", "exclusiveMinimum": 0, "maximum": 1}
