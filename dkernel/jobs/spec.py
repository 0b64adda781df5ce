"""Job specifications: YAML → a validated, typed :class:`JobSpec`.

Validation is complete before any cluster starts: unknown keys, wrong types, out-of-range
values, unknown methods/readers and missing files each raise one :class:`SpecError` naming the
key, the value and what is allowed.

Example
-------
.. code-block:: yaml

    name: wine-rbf-kpca
    seed: 0
    data:
      reader: sklearn
      name: wine
      standardize: true
    method: rbf-spectral
    params:
      embedding: kpca
      n_components: 3
      n_clusters: 3
    output: results/wine-rbf-kpca.zarr
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from dkernel.errors import SpecError
from dkernel.io.data import DATA_HELP, data_root
from dkernel.jobs.params import Param, validate_mapping

TOP_LEVEL = (
    Param(
        "name",
        "str",
        doc="A short job name.",
        check=lambda v: (
            None
            if re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", v)
            else "must be letters, digits, '.', '_' or '-' (no spaces or slashes)"
        ),
    ),
    Param("description", "str", default=""),
    Param("data", "mapping", doc="What to read: 'reader' plus that reader's options."),
    Param("method", "str", doc="The method to run."),
    Param("params", "mapping", default=None, nullable=True),
    Param("output", "str", doc="Path of the results store (a directory ending in .zarr)."),
    Param("seed", "int", default=0, low=0, high=2**32 - 1),
    Param("runtime", "mapping", default=None, nullable=True),
    Param("limits", "mapping", default=None, nullable=True),
)

DATA_COMMON = (
    Param("reader", "str", doc="One of the registered readers."),
    Param(
        "standardize",
        "bool",
        default=False,
        doc="Scale every feature to zero mean and unit variance.",
    ),
)

RUNTIME = (
    Param("n_workers", "int", default=None, nullable=True, low=1, high=1024),
    Param("threads_per_worker", "int", default=None, nullable=True, low=1, high=256),
    Param("memory_limit", "str", default="auto"),
)


def _size_check(value: str) -> str | None:
    from dkernel._budget import parse_size

    try:
        parse_size(value)
    except ValueError:
        return "must be a size such as '4GiB' or '500MB'"
    return None


LIMITS = (
    Param(
        "max_memory",
        "str",
        default=None,
        nullable=True,
        check=_size_check,
        doc="Refuse work estimated to need more memory (default DKERNEL_MAX_MEMORY or 4GiB).",
    ),
    Param(
        "max_disk",
        "str",
        default=None,
        nullable=True,
        check=_size_check,
        doc="Refuse work estimated to write more (default DKERNEL_MAX_DISK or 50GiB).",
    ),
)

_ENV = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)")


def expand_env(value: str, key: str) -> str:
    """Expand ``${VAR}`` / ``$VAR``; an unset variable is an error naming it.

    ``DKERNEL_DATA`` falls back to ``../shared/data`` beside a source checkout
    (:func:`dkernel.io.data.data_root`).
    """

    def repl(match: re.Match) -> str:
        var = match.group(1) or match.group(2)
        if var == "DKERNEL_DATA":
            root = data_root(required=False)
            if root is None:
                raise SpecError(
                    f"{value!r} uses ${{DKERNEL_DATA}}, which is not set, and no ../shared/data "
                    f"was found beside the checkout. {DATA_HELP}",
                    key,
                )
            return str(root)
        if var not in os.environ:
            raise SpecError(
                f"environment variable {var!r} in {value!r} is not set; export it "
                f"(e.g. export {var}=/path) or write the path out.",
                key,
            )
        return os.environ[var]

    return os.path.expanduser(_ENV.sub(repl, value))


@dataclass(frozen=True)
class JobSpec:
    """A validated job specification (paths expanded, defaults filled)."""

    name: str
    method: str
    reader: str
    data: dict[str, Any]
    standardize: bool
    params: dict[str, Any]
    output: Path
    seed: int
    description: str = ""
    runtime: dict[str, Any] = field(default_factory=dict)
    limits: dict[str, Any] = field(default_factory=dict)
    source: dict[str, Any] = field(default_factory=dict)
    path: Path | None = None

    def to_dict(self) -> dict[str, Any]:
        """The spec as written by the user (for provenance)."""
        return dict(self.source)


def parse_yaml(text: str, origin: str = "<spec>") -> Any:
    """Parse YAML safely (no tags that construct objects), with a clear syntax error."""
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise SpecError(f"{origin}: YAML syntax error{where}: {problem}.") from exc


def load_spec(path: str | Path) -> JobSpec:
    """Read and validate a YAML job spec file."""
    path = Path(path)
    if not path.exists():
        raise SpecError(f"job spec {path} does not exist.")
    if path.is_dir():
        raise SpecError(f"job spec {path} is a directory; give the path of a .yaml file.")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError(f"job spec {path} could not be read: {exc}.") from exc
    return validate_spec(parse_yaml(text, str(path)), path=path)


def validate_spec(raw: Any, *, path: Path | None = None) -> JobSpec:
    """Validate a parsed spec mapping completely; return the typed :class:`JobSpec`."""
    from dkernel.io.registry import READERS, get_reader
    from dkernel.jobs.registry import get_method

    if not isinstance(raw, Mapping):
        got = "an empty file" if raw is None else f"{type(raw).__name__}"
        raise SpecError(
            f"a job spec must be a YAML mapping with keys name, data, method, params, output; "
            f"got {got}."
        )
    top = validate_mapping(raw, TOP_LEVEL, "")
    method = get_method(top["method"])
    params = validate_mapping(top["params"], method.params, "params")

    data_raw = dict(top["data"])
    common = validate_mapping(
        {k: data_raw[k] for k in ("reader", "standardize") if k in data_raw}, DATA_COMMON, "data"
    )
    reader = get_reader(common["reader"])
    options_raw = {k: v for k, v in data_raw.items() if k not in ("reader", "standardize")}
    options = validate_mapping(options_raw, reader.params, "data")
    for p in reader.params:
        if p.kind == "str" and (p.name == "path" or p.name.endswith("_path")) and options[p.name]:
            options[p.name] = str(_existing_file(options[p.name], f"data.{p.name}"))

    if method.needs_raster and not reader.raster:
        raster_readers = sorted(name for name, r in READERS.items() if r.raster)
        raise SpecError(
            f"method {method.name!r} needs an image; reader {reader.name!r} reads tables. "
            f"Use one of: {', '.join(raster_readers) or '(none registered)'}.",
            "data.reader",
        )

    output = Path(expand_env(top["output"], "output"))
    runtime = validate_mapping(top["runtime"], RUNTIME, "runtime")
    limits = validate_mapping(top["limits"], LIMITS, "limits")
    return JobSpec(
        name=top["name"],
        description=top["description"],
        method=method.name,
        reader=reader.name,
        data=options,
        standardize=common["standardize"],
        params=params,
        output=output,
        seed=top["seed"],
        runtime=runtime,
        limits=limits,
        source=_plain(raw),
        path=path,
    )


def _existing_file(value: str, key: str) -> Path:
    expanded = Path(expand_env(value, key))
    if not expanded.exists():
        shown = f"{value!r}" + (
            f" (expanded to {str(expanded)!r})" if str(expanded) != value else ""
        )
        raise SpecError(f"file not found: {shown}.", key)
    if not os.access(expanded, os.R_OK):
        raise SpecError(f"file is not readable: {str(expanded)!r}; check its permissions.", key)
    # absolute: lazy readers open the file later, in worker processes with another cwd
    return expanded.resolve()


def _plain(raw: Mapping) -> dict[str, Any]:
    import json

    return json.loads(json.dumps(raw, default=str))


#: Environment variable naming the directory job outputs are confined to.
OUTPUT_ROOT_ENV = "DKERNEL_OUTPUT_ROOT"


@dataclass(frozen=True)
class OutputPolicy:
    """Where a job spec may write: ``roots`` (resolved) and the ``base`` of relative paths."""

    roots: tuple[Path, ...]
    base: Path

    @classmethod
    def default(
        cls, spec_path: str | Path | None = None, root: str | Path | None = None
    ) -> OutputPolicy:
        """``root`` (``--output-root``), else ``$DKERNEL_OUTPUT_ROOT``, else the current
        directory together with the directory holding the spec file.

        With an explicit root, relative outputs are taken relative to it; otherwise relative
        to the current directory.
        """
        chosen = root if root is not None else (os.environ.get(OUTPUT_ROOT_ENV) or None)
        if chosen is not None:
            resolved = Path(expand_env(str(chosen), "--output-root")).resolve()
            return cls(roots=(resolved,), base=resolved)
        roots = [Path.cwd().resolve()]
        if spec_path is not None:
            roots.append(Path(spec_path).resolve().parent)
        return cls(roots=tuple(roots), base=Path.cwd())

    def confine(self, output: str | Path) -> Path:
        """Resolve ``output`` and refuse it unless it lies strictly inside one of the roots.

        ``..`` components and symbolic links are resolved before the check, so neither can
        escape.

        Raises
        ------
        SpecError
            Naming the output, what it resolves to, the allowed root(s) and the override.
        """
        output = Path(output)
        resolved = (self.base / output).resolve()
        if any(resolved != r and resolved.is_relative_to(r) for r in self.roots):
            return resolved
        shown = ", ".join(str(r) for r in self.roots)
        raise SpecError(
            f"{output} is outside the output root ({shown}); it resolves to {resolved}. Job "
            f"specs may only write below the output root. Choose a path inside it, or set "
            f"{OUTPUT_ROOT_ENV}=DIR (or pass --output-root DIR, or --output PATH on the "
            "command line) to choose where results go.",
            "output",
        )
