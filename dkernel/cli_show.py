"""``dkernel show``: a results store's status, provenance, timings and resources as text.

Every value read from the store is escaped and cut (:func:`_safe`) before it reaches the
terminal: a store is data, and its attributes may hold anything (``--json`` prints everything,
escaped by JSON). Split from :mod:`dkernel.cli` (the parser and the process handling stay there).
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

from dkernel.errors import StoreError

EXIT_OK = 0  # dkernel.cli.EXIT_OK


def _shown(text: Any) -> str:
    """A command-line value in a message: quoted, unprintable characters escaped, cut."""
    from dkernel.schema.params import show_value

    return show_value(text)  # a repr: ESC is written \x1b


#: Longest attribute value ``dkernel show`` prints (characters, after escaping); longer ones
#: are cut with a note of how much. ``--json`` prints everything, escaped by JSON.
SHOW_FIELD_MAX = 200
#: Most entries of a mapping attribute (versions, timings, workers) ``dkernel show`` lists.
SHOW_ENTRIES_MAX = 32


def _safe(value: Any, limit: int = SHOW_FIELD_MAX) -> str:
    """``value`` as text fit for a terminal: every unprintable character (C0 and C1 controls
    such as ESC, bidirectional overrides, lone surrogates, NUL) written as its Python escape
    (``\\x1b``, ``\\u202e``), cut to ``limit`` characters.

    Store attributes are whatever the store's ``zarr.json`` holds: a hand-edited or hostile
    one must not drive the terminal (colours, cursor moves, a title change, reordered text).

    Examples
    --------
    >>> _safe("ok\\x1b[2J")
    'ok\\\\x1b[2J'
    """
    if value is None:
        return "-"
    if isinstance(value, str):
        text = value
    else:
        from dkernel.schema.params import show_value

        plain = value if isinstance(value, int | float) else show_value(value)
        try:
            text = str(plain)
        except ValueError:  # an int past Python's digit limit
            text = f"<{type(value).__name__}>"
    return _escape(text, limit)


def _escape(text: str, limit: int | None = None, keep: str = "") -> str:
    """``text`` with unprintable characters (but those in ``keep``) escaped, cut to ``limit``
    characters of output (the rest counted in a note); stops reading at the limit."""
    out: list[str] = []
    size = 0
    for i, ch in enumerate(text):
        piece = ch if ch.isprintable() or ch in keep else repr(ch)[1:-1]
        if limit is not None and size + len(piece) > limit:
            return "".join(out) + f"… ({len(text) - i} characters cut)"
        out.append(piece)
        size += len(piece)
    return "".join(out)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _fmt_bytes(n: Any) -> str:
    from dkernel._budget import format_size

    return format_size(float(n)) if _is_number(n) and n >= 0 else _safe(n)


def _seconds(value: Any) -> str:
    return f"{value:.2f}s" if _is_number(value) else _safe(value, 60)


def _get(mapping: Any, key: str) -> Any:
    """``mapping[key]`` when ``mapping`` is a mapping that has it, else None."""
    return mapping.get(key) if isinstance(mapping, dict) else None


def _listing(value: Any, show: Any = None) -> str:
    """A mapping's first entries as ``key value, ...`` (anything else escaped as it is)."""
    if not isinstance(value, dict):
        return _safe(value)
    show = show or (lambda v: _safe(v, 60))
    items = [f"{_safe(k, 60)} {show(v)}" for k, v in list(value.items())[:SHOW_ENTRIES_MAX]]
    if len(value) > SHOW_ENTRIES_MAX:
        items.append(f"… ({len(value) - SHOW_ENTRIES_MAX} more)")
    return ", ".join(items)


def _cmd_show(args: argparse.Namespace) -> int:
    from dkernel.storage import describe_store
    from dkernel.storage.remote import as_location

    path = as_location(args.store, what="store", read_only=True)
    if isinstance(path, Path) and path.exists() and not path.is_dir():
        raise StoreError(
            f"{_safe(str(path))} is not a results store (a store is a directory, this is a "
            "file or a special file)."
        )
    info = describe_store(path)
    if args.json:
        print(json.dumps(info, indent=2, default=str))
        return EXIT_OK
    for line in _show_lines(info):
        print(line)
    return EXIT_OK


def _show_lines(info: dict[str, Any]) -> list[str]:
    """``dkernel show``'s text: every attribute escaped and cut (:func:`_safe`), and shown
    whatever its type (a hand-edited store keeps its lines, with the odd values as they are)."""
    attrs = info["attrs"]
    job = attrs.get("job")
    error, resumes = attrs.get("error"), attrs.get("resumes")
    lines = [
        f"store:    {_safe(info['path'], 1000)}",
        f"status:   {_safe(attrs.get('status'))}"
        + (f" ({_safe(error, 500)})" if error else "")
        + (f", resumed {_safe(resumes, 20)}×" if resumes else ""),
    ]
    if isinstance(job, dict):
        what = f"{_safe(job.get('name'))} (method {_safe(job.get('method'))}, "
    else:
        what = f"{_safe(job)} ("
    lines += [
        f"job:      {what}seed {_safe(attrs.get('seed'))})",
        f"created:  {_safe(attrs.get('created'))}  finished: {_safe(attrs.get('finished'))}",
        f"git:      {_safe(attrs.get('git_revision'))}",
        f"versions: {_listing(attrs.get('versions') or {})}",
    ]
    runtime = attrs.get("runtime")
    if isinstance(runtime, dict) and runtime:
        lines.append(
            f"cluster:  {_safe(runtime.get('scheduler'))}, "
            f"{_count(runtime.get('n_workers'), 'worker')}, "
            f"{_count(runtime.get('n_threads'), 'thread')}"
        )
    elif runtime:
        lines.append(f"cluster:  {_safe(runtime)}")
    timings = attrs.get("timings")
    if timings:
        lines.append(f"timings:  {_listing(timings, _seconds)}")
    lines += _resource_lines(attrs.get("resources"))
    lines.append("arrays:")
    for a in info["arrays"]:
        dims = ", ".join(f"{_safe(d, 60)}={s}" for d, s in zip(a["dims"], a["shape"], strict=True))
        name = f"{_safe(a['group'], 100)}/{_safe(a['name'], 100)}"
        chunks = f" chunks {tuple(a['chunks'])}" if a["chunks"] else ""
        values = a.get("values")
        if values is not None:
            shown = f"{values:.6g}" if isinstance(values, float) else _safe(values)
            lines.append(f"  {name} = {shown}  ({dims}) {_safe(a['dtype'])}")
        else:
            lines.append(f"  {name}: ({dims}) {_safe(a['dtype'])}{chunks}")
    lines += _group_attribute_lines(info.get("groups"))
    lines += _model_order_lines(info.get("model_order"))
    lines += _stage_two_lines(info.get("stage_two"))
    return lines


#: Leading items of a list of numbers that ``dkernel show`` prints.
SHOW_LIST_MAX = 8


def _attribute_value(value: Any) -> str:
    """A group attribute as ``dkernel show`` prints it: numbers to 4 significant digits,
    lists of numbers by their first ``SHOW_LIST_MAX`` items, anything else escaped and cut."""
    if isinstance(value, float) and _is_number(value):
        return f"{value:.4g}"
    if isinstance(value, list) and value and all(_is_number(v) for v in value[:SHOW_LIST_MAX]):
        head = ", ".join(
            f"{v:.4g}" if isinstance(v, float) else str(v) for v in value[:SHOW_LIST_MAX]
        )
        more = len(value) - SHOW_LIST_MAX
        return f"[{head}" + (f", … ({more} more)]" if more > 0 else "]")
    return _safe(value, 80)


def _group_attribute_lines(groups: Any) -> list[str]:
    """Each group's attributes (``/embedding: sigma 3.538, sigma_fraction 0.7071, ...``), but
    the model-order and stage-two evidence, which have lines of their own."""
    if not isinstance(groups, list) or not groups:
        return []
    from dkernel.storage.reader import MODEL_ORDER_SUMMARY, STAGE_TWO_EVIDENCE

    elsewhere = {"/model_order": set(MODEL_ORDER_SUMMARY), "/mssc": set(STAGE_TWO_EVIDENCE)}
    lines = []
    for entry in groups[:SHOW_ENTRIES_MAX]:
        group, attrs = _get(entry, "group"), _get(entry, "attrs")
        if not isinstance(attrs, dict):
            continue
        skip = elsewhere.get(group, set()) if isinstance(group, str) else set()
        kept = {key: value for key, value in attrs.items() if key not in skip}
        if kept:
            lines.append(f"  {_safe(group, 100)}: {_listing(kept, _attribute_value)}")
    if len(groups) > SHOW_ENTRIES_MAX:
        lines.append(f"  … and {len(groups) - SHOW_ENTRIES_MAX} more groups")
    return ["group attributes:", *lines] if lines else []


#: Candidates per line of ``dkernel show``'s model-order table.
SHOW_CANDIDATES_PER_LINE = 8


def _model_order_lines(order: Any) -> list[str]:
    """The evidence of ``n_clusters: auto`` (``/model_order``): the rule, the chosen k and
    every candidate's score, the chosen one in brackets."""
    if not isinstance(order, dict):
        return []
    chosen = order.get("n_clusters_chosen")
    better = order.get("higher_is_better")
    which = "" if not isinstance(better, bool) else f", {'higher' if better else 'lower'} wins"
    lines = [
        f"model order: k = {_safe(chosen, 20)} by the {_safe(order.get('rule'), 60)} rule{which}"
    ]
    ks, scores = order.get("n_clusters"), order.get("score")
    if not isinstance(ks, list) or not isinstance(scores, list) or len(ks) != len(scores):
        return lines
    cells = []
    for k, score in zip(ks, scores, strict=True):
        shown = f"{score:.4g}" if _is_number(score) else _safe(score, 20)
        cell = f"{_safe(k, 20)}: {shown}"
        cells.append(f"[{cell}]" if k == chosen and not isinstance(k, bool) else cell)
    lines.append("  k: score")
    for i in range(0, len(cells), SHOW_CANDIDATES_PER_LINE):
        lines.append("  " + "  ".join(cells[i : i + SHOW_CANDIDATES_PER_LINE]))
    return lines


def _score(value: Any) -> str:
    return f"{value:.3f}" if _is_number(value) else _safe(value, 20)


def _stage_two_lines(stage: Any) -> list[str]:
    """MSSC's stage-two choices (``/mssc``): the partition graph kept with each graph's
    silhouette, and the affinity's wide limit or its width with their eigengap ratios."""
    if not isinstance(stage, dict):
        return []
    lines = []
    graph = stage.get("normalization_chosen")
    if graph is not None:
        scores = stage.get("normalization_silhouettes")
        evidence = ""
        if isinstance(scores, dict) and scores:
            listed = ", ".join(
                f"{_safe(name, 20)} {_score(score)}"
                for name, score in list(scores.items())[:SHOW_ENTRIES_MAX]
            )
            evidence = f" (silhouettes {listed})"
        lines.append(f"partition graph: {_safe(graph, 20)}{evidence}")
    wide = stage.get("wide_limit_chosen")
    if isinstance(wide, bool):
        ratios = stage.get("eigengap_ratios")
        evidence = ""
        if isinstance(ratios, list) and len(ratios) == 2:
            evidence = (
                f" (eigengap ratios {_score(ratios[0])} at sigma, {_score(ratios[1])} in the "
                "wide limit; the smaller wins)"
            )
        kept = "the wide limit of the affinity" if wide else "the affinity at sigma"
        lines.append(f"stage two: {kept}{evidence}")
    return lines


def _count(n: Any, noun: str) -> str:
    """``1 worker``, ``2 workers``; a stored value that is not a count as it is."""
    plural = "" if isinstance(n, int) and not isinstance(n, bool) and n == 1 else "s"
    return f"{_safe(n)} {noun}{plural}"


def _resource_lines(resources: Any) -> list[str]:
    if not resources:
        return []
    if not isinstance(resources, dict):
        return [f"tasks:    {_safe(resources)}"]
    lines = [
        f"tasks:    {_safe(resources.get('n_tasks'))} on "
        f"{_count(resources.get('n_workers'), 'worker')}; "
        f"peak worker memory {_fmt_bytes(resources.get('peak_worker_memory'))}"
    ]
    workers = resources.get("workers")
    if isinstance(workers, dict):
        for name, w in list(workers.items())[:SHOW_ENTRIES_MAX]:
            lines.append(
                f"  worker {_safe(name, 100)}: {_safe(_get(w, 'tasks'))} tasks, "
                f"peak {_fmt_bytes(_get(w, 'peak_memory'))}"
            )
        if len(workers) > SHOW_ENTRIES_MAX:
            lines.append(f"  … and {len(workers) - SHOW_ENTRIES_MAX} more workers")
    elif workers:
        lines.append(f"  workers: {_safe(workers)}")
    return lines
