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
from functools import partial
from pathlib import Path
from typing import Any

import yaml

from dkernel.errors import SpecError
from dkernel.io.data import DATA_HELP, data_root
from dkernel.io.files import confine
from dkernel.io.registry import READERS, get_reader
from dkernel.io.remote import redact_storage_options
from dkernel.jobs.registry import METHODS, get_method
from dkernel.runtime.connect import IN_PROCESS_MAX_MEMORY, IN_PROCESS_MAX_SAMPLES
from dkernel.schema.params import REQUIRED, Param, validate_mapping
from dkernel.storage.remote import Location, as_location, check_job_store, inside, is_remote

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
    Param(
        "output",
        "str",
        doc="Path or URL (s3://bucket/x.zarr, ...) of the results store (ending in .zarr).",
    ),
    Param("seed", "int", default=0, low=0, high=2**32 - 1),
    Param("runtime", "mapping", default=None, nullable=True),
    Param("limits", "mapping", default=None, nullable=True),
    Param(
        "store_options",
        "mapping",
        default=None,
        nullable=True,
        doc="fsspec options of an object-store output (endpoint, anon, profile); never "
        "logged nor recorded in the store.",
    ),
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
    Param(
        "data_root",
        "str",
        default=None,
        nullable=True,
        doc="Refuse data files outside this directory (DKERNEL_DATA_ROOT, when set, wins).",
    ),
    Param("threads_per_worker", "int", default=None, nullable=True, low=1, high=256),
    Param(
        "in_process",
        "bool",
        default=True,
        doc=f"A small job (< {IN_PROCESS_MAX_SAMPLES:.0e} rows or pixels, <= "
        f"{IN_PROCESS_MAX_MEMORY / 2**30:g} GiB estimated) runs on Dask's threaded scheduler in "
        "this process: no cluster to start or stop (seconds saved), no dashboard; values computed "
        "outside the tasks may differ from a process-worker run in the last bits. false starts "
        "process workers and the dashboard.",
    ),
    Param(
        "memory_limit",
        "str",
        default="auto",
        check=lambda v: None if v == "auto" else _size_check(v),
        doc="Memory per worker of the embedded cluster: 'auto' or a size such as '4GiB'.",
    ),
)


def _size_check(value: str) -> str | None:
    from dkernel._budget import parse_size

    try:
        size = parse_size(value)
    except (ValueError, TypeError, OverflowError):
        return "must be a size such as '4GiB' or '500MB'"
    if not 0 < size < float("inf"):
        return "must be a positive size such as '4GiB' or '500MB'"
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
    output: Location
    seed: int
    description: str = ""
    runtime: dict[str, Any] = field(default_factory=dict)
    limits: dict[str, Any] = field(default_factory=dict)
    source: dict[str, Any] = field(default_factory=dict)
    path: Path | None = None
    #: fsspec options of an object-store ``output`` (then a URL string, not a Path).
    store_options: dict[str, Any] = field(default_factory=dict, repr=False)

    def to_dict(self) -> dict[str, Any]:
        """The spec as written by the user (for provenance)."""
        return dict(self.source)


#: Largest job spec accepted (bytes). Real specs are a few hundred bytes.
MAX_SPEC_BYTES = 1 << 20
#: Most YAML nodes a spec may hold once its aliases are expanded (``*a`` counts as a copy of
#: what ``&a`` names): an alias bomb of a few hundred bytes expands to billions.
MAX_SPEC_NODES = 100_000


class _SpecLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses duplicate keys, naming both lines."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        if isinstance(node, yaml.MappingNode):
            seen: dict[Any, int] = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                if not isinstance(key_node, yaml.ScalarNode):
                    continue  # unhashable keys are refused by the constructor itself
                key = self.construct_object(key_node, deep=True)
                line = key_node.start_mark.line + 1
                try:
                    first = seen.get(key)
                except TypeError:
                    continue
                if first is not None:
                    from dkernel.schema.params import show_value

                    raise SpecError(
                        f"duplicate key {show_value(key)} at line {line} (first at line "
                        f"{first}); YAML keeps only the last, so remove one of them."
                    )
                seen[key] = line
        return super().construct_mapping(node, deep=deep)


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    return []


def _expanded_size(root: yaml.Node, cap: int) -> int:
    """Number of nodes of ``root`` with every alias expanded; stops past ``cap``.

    Shared nodes are counted once per use but visited once (memoised), so this is linear in
    the size of the document, not of its expansion.

    Raises
    ------
    SpecError
        Past ``cap`` nodes, or for a recursive alias (a node that contains itself).
    """
    sizes: dict[int, int] = {}
    active: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, finished = stack.pop()
        nid = id(node)
        if finished:
            active.discard(nid)
            total = 1 + sum(sizes[id(c)] for c in _children(node))
            if total > cap:
                raise SpecError(
                    f"the document expands to more than {cap:,} YAML nodes (its aliases, "
                    f"'*name', each repeat what '&name' marks; from line "
                    f"{node.start_mark.line + 1}). Job specs need far fewer: write the "
                    "values out, or read large values from a file."
                )
            sizes[nid] = total
            continue
        if nid in sizes:
            continue
        if nid in active:
            raise SpecError(
                f"a recursive YAML alias at line {node.start_mark.line + 1} (a value that "
                "contains itself); job specs cannot hold one."
            )
        active.add(nid)
        stack.append((node, True))
        stack.extend((c, False) for c in _children(node) if id(c) not in sizes)
    return sizes[id(root)]


def parse_yaml(text: str, origin: str = "<spec>") -> Any:
    """Parse YAML safely, within limits, with a clear error.

    Safe: no tags that construct objects. Limits: at most :data:`MAX_SPEC_BYTES` of text and
    :data:`MAX_SPEC_NODES` nodes with aliases expanded (alias bombs); duplicate keys are
    refused with both line numbers.

    Raises
    ------
    SpecError
        For a syntax error (with line and column), a limit exceeded or a duplicate key.
    """
    size = len(text.encode("utf-8", errors="replace"))
    if size > MAX_SPEC_BYTES:
        raise SpecError(
            f"{origin}: the job spec is {size:,} bytes; at most {MAX_SPEC_BYTES:,} are "
            "accepted. Job specs name their data files rather than holding the data."
        )
    loader = None
    try:
        loader = _SpecLoader(text)  # the reader checks the characters already
        node = loader.get_single_node()
        if node is None:
            return None
        _expanded_size(node, MAX_SPEC_NODES)
        return loader.construct_document(node)
    except SpecError as exc:
        raise SpecError(f"{origin}: {exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        from dkernel.schema.params import show_value

        problem = show_value(problem).strip("'\"")
        raise SpecError(f"{origin}: YAML syntax error{where}: {problem}.") from None
    except RecursionError:
        raise SpecError(
            f"{origin}: the YAML is nested too deeply; job specs need a few levels only."
        ) from None
    except (ValueError, TypeError, OverflowError) as exc:  # e.g. an int of 10,000 digits
        from dkernel.schema.params import show_value

        raise SpecError(
            f"{origin}: a value could not be read: {show_value(str(exc))[:300]}."
        ) from None
    finally:
        if loader is not None:
            loader.dispose()


def load_spec(path: str | Path) -> JobSpec:
    """Read and validate a YAML job spec file.

    Only a regular file is read (a FIFO would block, ``/dev/zero`` never ends), and its size
    is checked from ``fstat`` before a byte is read: at most ``MAX_SPEC_BYTES`` (1 MiB).
    """
    path = Path(path)
    if not path.exists():
        raise SpecError(f"job spec {path} does not exist.")
    if path.is_dir():
        raise SpecError(f"job spec {path} is a directory; give the path of a .yaml file.")
    return validate_spec(parse_yaml(read_spec_text(path), str(path)), path=path)


def read_spec_text(path: Path) -> str:
    """The text of the spec file ``path``: a regular file of at most :data:`MAX_SPEC_BYTES`,
    UTF-8; never more than that is read."""
    from dkernel.io.files import open_regular

    fd, st = open_regular(path, "job spec", error=SpecError)
    try:
        if st.st_size > MAX_SPEC_BYTES:
            raise SpecError(
                f"{path}: the job spec is {st.st_size:,} bytes; at most {MAX_SPEC_BYTES:,} are "
                "accepted. Job specs name their data files rather than holding the data."
            )
        with os.fdopen(os.dup(fd), "rb") as fh:
            data = fh.read(MAX_SPEC_BYTES + 1)
    except OSError as exc:
        raise SpecError(f"job spec {path} could not be read: {exc}.") from exc
    finally:
        os.close(fd)
    if len(data) > MAX_SPEC_BYTES:
        raise SpecError(
            f"{path}: the job spec grew past {MAX_SPEC_BYTES:,} bytes while it was read; "
            "at most that many are accepted."
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SpecError(f"job spec {path} could not be read: {exc}.") from exc


def validate_spec(raw: Any, *, path: Path | None = None) -> JobSpec:
    """Validate a parsed spec mapping completely; return the typed :class:`JobSpec`."""
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
    runtime = validate_mapping(top["runtime"], RUNTIME, "runtime")
    limits = validate_mapping(top["limits"], LIMITS, "limits")
    confine_to = data_root_confinement(runtime.get("data_root"))
    for p in reader.params:
        if p.kind == "str" and is_path_option(p.name) and options[p.name]:
            if p.name in reader.urls and _remote_input(options, p.name, confine_to):
                continue
            found = _existing_file(options[p.name], f"data.{p.name}")
            if confine_to is not None:
                confine(found, confine_to, error=partial(SpecError, key=f"data.{p.name}"))
            options[p.name] = str(found)
    if confine_to is not None and reader.files is not None:
        _confine_reader_files(reader, options, confine_to)

    if method.needs_raster and not reader.raster:
        raster_readers = sorted(name for name, r in READERS.items() if r.raster)
        raise SpecError(
            f"method {method.name!r} needs an image; reader {reader.name!r} reads tables. "
            f"Use one of: {', '.join(raster_readers) or '(none registered)'}.",
            "data.reader",
        )

    output = _output_location(expand_env(top["output"], "output"))
    base = os.environ.get(OUTPUT_ROOT_ENV) or "."  # where the CLI puts a relative output
    local = not isinstance(output, str) and not is_remote(base)
    limits = effective_limits(limits, Path(base).expanduser() / output if local else None)
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
        source=_plain(_redact_store_options(redact_storage_options(raw))),
        path=path,
        store_options=dict(top["store_options"] or {}),
    )


def _redact_store_options(raw: Any) -> Any:
    """``raw`` with the values of ``store_options`` replaced by ``'***'`` (credentials)."""
    if not isinstance(raw, Mapping) or not isinstance(raw.get("store_options"), Mapping):
        return raw
    return {**raw, "store_options": {key: "***" for key in raw["store_options"]}}


def _output_location(text: str) -> Path | str:
    """The spec's ``output``: a Path, or a URL string (an unknown scheme is refused)."""
    from dkernel.errors import StoreError

    try:
        location = as_location(text)
        check_job_store(location)
    except StoreError as exc:
        raise SpecError(str(exc), "output") from None
    return location


def effective_limits(limits: Mapping[str, Any], output: Path | None) -> dict[str, Any]:
    """``limits`` as the machine can honour them (:class:`dkernel._budget.SizeLimit` bytes):
    ``max_memory`` (or ``DKERNEL_MAX_MEMORY``, or the default) capped at the machine's memory,
    ``max_disk`` at the free space of the file system ``output`` would be written to. A cap
    is logged as a warning (when the limit was set) and named in any refusal.

    Raises
    ------
    SpecError
        When ``DKERNEL_MAX_MEMORY`` / ``DKERNEL_MAX_DISK`` cannot be read as a size.
    """
    from dkernel._budget import disk_limit, memory_limit
    from dkernel.errors import InvalidInputError

    try:
        return {
            **limits,
            "max_memory": memory_limit(limits.get("max_memory")),
            "max_disk": disk_limit(limits.get("max_disk"), output),
        }
    except InvalidInputError as exc:
        raise SpecError(str(exc)) from None


#: Environment variable confining the data files a job spec may read (optional).
DATA_ROOT_ENV = "DKERNEL_DATA_ROOT"


def data_root_confinement(spec_root: str | None = None) -> Path | None:
    """The directory data files must lie in, resolved: ``$DKERNEL_DATA_ROOT`` when set (a
    spec's ``runtime.data_root`` may then only narrow it), else ``runtime.data_root``, else
    None (no confinement).

    Raises
    ------
    SpecError
        When ``runtime.data_root`` lies outside ``$DKERNEL_DATA_ROOT``.
    """
    env = os.environ.get(DATA_ROOT_ENV) or None
    env_root = Path(expand_env(env, DATA_ROOT_ENV)).resolve() if env else None
    spec_path = Path(expand_env(spec_root, "runtime.data_root")).resolve() if spec_root else None
    if env_root is not None and spec_path is not None:
        if not spec_path.is_relative_to(env_root):
            raise SpecError(
                f"{spec_path} is outside {DATA_ROOT_ENV} ({env_root}); a spec may only "
                "narrow the data root.",
                "runtime.data_root",
            )
        return spec_path
    root = env_root if env_root is not None else spec_path
    if root is not None and not root.is_dir():
        source = DATA_ROOT_ENV if root is env_root else "runtime.data_root"
        raise SpecError(
            f"the data root {root} ({source}) is not an existing folder, so no file can lie "
            "below it. Point it at the folder that holds the job's data.",
            "runtime.data_root",
        )
    return root


def is_path_option(name: str) -> bool:
    """Whether a reader option names a file or folder (``path``, ``*_path``, ``data_dir``,
    ``*_dir``): it is expanded, must exist, and is confined to the data root."""
    return name in ("path", "data_dir") or name.endswith(("_path", "_dir"))


def _remote_input(options: dict[str, Any], name: str, confine_to: Path | None) -> bool:
    """Check a reader option that is a URL (``dkernel.io.remote``): a ``file://`` URL
    becomes its local path (False: checked as a file), a remote input must exist and answer
    (True), and none is read while a data root confines the job."""
    from dkernel.io.remote import check_input
    from dkernel.storage.remote import is_url, local_path

    value = expand_env(options[name], f"data.{name}")
    if not is_url(value):
        return False
    if not is_remote(value):
        options[name] = local_path(value)
        return False
    if confine_to is not None:
        confine(value, confine_to, error=lambda m: SpecError(m, f"data.{name}"))
    storage = options.get("storage_options")
    check_input(value, "", storage, error=lambda m: SpecError(m, f"data.{name}"))
    options[name] = value
    return True


def _existing_file(value: str, key: str) -> Path:
    expanded = Path(expand_env(value, key))
    if not expanded.exists():
        shown = f"{value!r}" + (
            f" (expanded to {str(expanded)!r})" if str(expanded) != value else ""
        )
        from dkernel.data.registry import missing_path_hint

        where = (
            ""
            if expanded.is_absolute()
            else f" A relative path is read from the working directory ({os.getcwd()}), not "
            "from the spec's folder."
        )
        raise SpecError(f"file not found: {shown}.{where}{missing_path_hint(value)}", key)
    if not os.access(expanded, os.R_OK):
        raise SpecError(f"file is not readable: {str(expanded)!r}; check its permissions.", key)
    from dkernel.io.files import check_regular

    # a FIFO would block the reader, a device never ends: regular files and folders only
    check_regular(expanded, "", allow_dir=True, error=lambda m: SpecError(m, key))
    # absolute: lazy readers open the file later, in worker processes with another cwd
    return expanded.resolve()


def _confine_reader_files(reader: Any, options: dict[str, Any], root: Path) -> None:
    """Refuse a reader whose files (those its path options lead to: a dataset folder's
    files, a GeoTIFF's sidecars, the links inside a Zarr store, a STAC item's assets, a
    Parquet folder's members) resolve outside ``root`` or are remote: the check of
    :func:`dkernel.io.files.confine`, as for the path options themselves."""
    for file in reader.files(**options):
        confine(
            file,
            root,
            via=f"reader {reader.name!r} would read ",
            error=lambda m: SpecError(m, "data"),
        )


def _plain(raw: Mapping) -> dict[str, Any]:
    import json

    return json.loads(json.dumps(raw, default=str))


#: Environment variable naming the directory job outputs are confined to.
OUTPUT_ROOT_ENV = "DKERNEL_OUTPUT_ROOT"


@dataclass(frozen=True)
class OutputPolicy:
    """Where a job spec may write: ``roots`` (resolved) and the ``base`` of relative paths.

    A root may be an object-store URL (``--output-root s3://bucket/results``): relative
    outputs are then joined to it as URLs. A spec whose ``output`` is itself a URL writes
    there when no root was chosen (the credentials at hand bound its reach), and only below
    the root when one was.
    """

    roots: tuple[Path | str, ...]
    base: Path | str
    explicit: bool = False

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
            try:
                location = as_location(
                    expand_env(str(chosen), "--output-root"), what="--output-root"
                )
                check_job_store(location, what="--output-root")
            except SpecError:
                raise
            except Exception as exc:  # a StoreError: bad scheme (exit 2 either way)
                raise SpecError(str(exc), "--output-root") from None
            resolved = location if isinstance(location, str) else location.resolve()
            return cls(roots=(resolved,), base=resolved, explicit=True)
        roots: list[Path | str] = [Path.cwd().resolve()]
        if spec_path is not None:
            roots.append(Path(spec_path).resolve().parent)
        return cls(roots=tuple(roots), base=Path.cwd())

    def confine(self, output: str | Path) -> Path | str:
        """Resolve ``output`` and refuse it unless it lies strictly inside one of the roots.

        ``..`` components and symbolic links are resolved before the check, so neither can
        escape.

        Raises
        ------
        SpecError
            Naming the output, what it resolves to, the allowed root(s) and the override.
        """
        if isinstance(output, str) and not is_remote(output):
            output = _output_location(output)
        if isinstance(output, str):  # a URL
            if not self.explicit or any(
                isinstance(r, str) and inside(output, r) for r in self.roots
            ):
                return output
            resolved: Path | str = output
        elif isinstance(self.base, str):  # a relative path below a URL root
            if output.is_absolute():
                resolved = output.resolve()
            else:
                from dkernel.storage.remote import join

                try:
                    return join(self.base, output)
                except Exception as exc:  # a StoreError: climbs out of the root
                    raise SpecError(str(exc), "output") from None
        else:
            resolved = (self.base / output).resolve()
            if any(
                isinstance(r, Path) and resolved != r and resolved.is_relative_to(r)
                for r in self.roots
            ):
                return resolved
        shown = ", ".join(str(r) for r in self.roots)
        raise SpecError(
            f"{output} is outside the output root ({shown}); it resolves to {resolved}. Job "
            f"specs may only write below the output root. Choose a path inside it, or set "
            f"{OUTPUT_ROOT_ENV}=DIR (or pass --output-root DIR, or --output PATH on the "
            "command line) to choose where results go.",
            "output",
        )


def job_spec_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a job spec, from the same ``Param`` tuples the
    validation reads: top-level keys, ``data`` per reader, ``method`` and ``params`` per
    method (``if``/``then`` on ``data.reader`` and ``method``).

    Checks written as code (file existence, sizes, seed specs) stay with ``dkernel validate``.
    """
    from dkernel.schema.export import DRAFT, object_schema

    methods, readers = METHODS.names(), READERS.names()
    top = object_schema(TOP_LEVEL)
    props = top["properties"]
    props["name"]["pattern"] = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"
    props["data"] = {"$ref": "#/$defs/data", "description": props["data"]["description"]}
    props["method"] = {**props["method"], "enum": methods}
    props["runtime"] = {"anyOf": [{"type": "null"}, object_schema(RUNTIME)], "default": None}
    props["limits"] = {"anyOf": [{"type": "null"}, object_schema(LIMITS)], "default": None}
    defs: dict[str, Any] = {
        "data": {
            "type": "object",
            "required": ["reader"],
            "properties": {"reader": {"type": "string", "enum": readers}},
            "allOf": [
                {
                    "if": {"properties": {"reader": {"const": r}}, "required": ["reader"]},
                    "then": {"$ref": f"#/$defs/data-{r}"},
                }
                for r in readers
            ],
        }
    }
    for r in readers:
        reader = READERS[r]
        defs[f"data-{r}"] = object_schema(
            (*DATA_COMMON, *reader.params), description=reader.description
        )
    rules = []
    for m in methods:
        method = METHODS[m]
        defs[f"params-{m}"] = object_schema(method.params, description=method.description)
        ref = {"$ref": f"#/$defs/params-{m}"}
        if any(p.default is REQUIRED for p in method.params):
            then = {"required": ["params"], "properties": {"params": ref}}
        else:
            then = {"properties": {"params": {"anyOf": [{"type": "null"}, ref]}}}
        rules.append(
            {"if": {"properties": {"method": {"const": m}}, "required": ["method"]}, "then": then}
        )
    return {
        "$schema": DRAFT,
        "title": "dkernel job spec",
        "description": "A YAML job for `dkernel run` / `dkernel submit`.",
        **top,
        "allOf": rules,
        "$defs": defs,
    }
