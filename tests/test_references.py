"""Every cited source resolves inside the repository (issue 33).

Citations carry a key of ``docs/references.md`` (``[Lokse2020]``); the labels that named files
outside the repository ("seed 003", "001 §5", "DESIGN.md") are gone; a paper of a thesis
("Paper II") or a thesis author is cited with its key close by; every estimator exported from
``dkernel`` has numpydoc ``See Also`` and ``References`` sections whose keys exist.
"""

from __future__ import annotations

import inspect
import json
import re
from pathlib import Path

import pytest
from sklearn.base import BaseEstimator

import dkernel

REPO = Path(__file__).resolve().parents[1]
REFERENCES = REPO / "docs" / "references.md"
#: Where citations live: the package, the documentation, benchmarks (and their results),
#: notebooks (markdown and code cells, not outputs), the example jobs and the README.
SCANNED = ("dkernel", "docs", "benchmarks", "notebooks", "jobs", "README.md")
#: The old labels must be gone from the tests too (this file quotes them on purpose).
STALE_SCANNED = SCANNED + ("tests", "CHANGELOG.md")
SUFFIXES = {".py", ".md", ".rst", ".yaml", ".yml", ".ipynb", ".txt"}

KEY = re.compile(r"\[([A-Z][A-Za-z]*\d{4}[a-z]?)\]")
#: An entry of docs/references.md: the key as a section title, underlined (Markdown and reST).
ENTRY = re.compile(r"^\[([A-Z][A-Za-z]*\d{4}[a-z]?)\]\n(-+)$", re.MULTILINE)
#: Labels that point outside the repository.
STALE = {
    "seed file": re.compile(r"\bseeds? 00[0-4]\b", re.IGNORECASE),
    # "000 Alg. 7", "(001 §6.1.2)", "001's protocol": a seed file's number used as its name
    # (not a number such as "2 000" or "1.000")
    "seed number": re.compile(r"(?<![\w.,])(?<!\d[  ])(?<!chmod )00[0-4](?![\w.,])"),
    "design brief": re.compile(r"\bDESIGN\b"),
}
#: Mentions that need a key within WINDOW lines: a paper of the PhD thesis, a primary source's
#: author, or "thesis" (not inside an identifier or a quoted string such as ``"thesis"``).
NEEDS_KEY = re.compile(
    r"\bPaper (?:I|II|III|IV|V)\b|\b(?:Løkse|Agersborg|Szymkowiak)|(?<![\w\"'])(?i:thesis)(?![\w\"'])"
)
THESIS_KEYS = {"Lokse2014", "Agersborg2012", "Lokse2020"}
WINDOW = 3


def _files(roots=SCANNED):
    for name in roots:
        path = REPO / name
        if path.is_file():
            yield path
            continue
        for file in sorted(path.rglob("*")):
            if file.suffix in SUFFIXES and not {"_build", ".ipynb_checkpoints"} & set(file.parts):
                yield file


def _text(file: Path) -> str:
    text = file.read_text(encoding="utf-8")
    if file.suffix == ".ipynb":  # the cells' sources, not their outputs
        return "\n".join("".join(cell["source"]) for cell in json.loads(text)["cells"])
    return text


@pytest.fixture(scope="module")
def texts() -> dict[str, str]:
    return {f.relative_to(REPO).as_posix(): _text(f) for f in _files()}


@pytest.fixture(scope="module")
def all_texts() -> dict[str, str]:
    own = Path(__file__).resolve()
    return {f.relative_to(REPO).as_posix(): _text(f) for f in _files(STALE_SCANNED) if f != own}


@pytest.fixture(scope="module")
def defined() -> set[str]:
    return {key for key, _ in ENTRY.findall(REFERENCES.read_text(encoding="utf-8"))}


def test_references_entries_are_unique_and_build_in_sphinx():
    text = REFERENCES.read_text(encoding="utf-8")
    entries = ENTRY.findall(text)
    keys = [key for key, _ in entries]
    assert len(keys) >= 5 and len(keys) == len(set(keys)), keys
    # a reST section underline shorter than its title is a warning, and the docs build with -W
    assert all(len(line) >= len(key) + 2 for key, line in entries)
    # the primary sources, with the thesis' paper map the code's citations rely on
    assert {"Lokse2014", "Agersborg2012", "Lokse2020", "SzymkowiakHave2006"} <= set(keys)
    assert "**Paper I**" in text and "**Paper II**" in text
    page = (REPO / "docs" / "api" / "references.rst").read_text(encoding="utf-8")
    assert ".. include:: ../references.md" in page
    index = (REPO / "docs" / "api" / "index.rst").read_text(encoding="utf-8")
    assert re.search(r"^\s+references$", index, re.MULTILINE)


def test_every_cited_key_is_defined(texts, defined):
    undefined = {
        f"{path}: [{key}]"
        for path, text in texts.items()
        for key in KEY.findall(text)
        if key not in defined
    }
    assert not undefined, sorted(undefined)


@pytest.mark.parametrize("label", sorted(STALE))
def test_no_label_points_outside_the_repository(all_texts, label):
    found = [
        f"{path}:{number}: {line.strip()[:120]}"
        for path, text in all_texts.items()
        if path != "docs/references.md"
        for number, line in enumerate(text.splitlines(), 1)
        if STALE[label].search(line)
    ]
    assert not found, "\n".join(found)


def test_thesis_papers_and_authors_are_cited_with_a_key(texts):
    missing = []
    for path, text in texts.items():
        if path == "docs/references.md":
            continue
        lines = text.splitlines()
        for i, line in enumerate(lines):
            if not NEEDS_KEY.search(line):
                continue
            near = "\n".join(lines[max(0, i - WINDOW) : i + WINDOW + 1])
            if not (THESIS_KEYS | {"SzymkowiakHave2006"}) & set(KEY.findall(near)):
                missing.append(f"{path}:{i + 1}: {line.strip()[:120]}")
    assert not missing, "\n".join(missing)


def test_the_checks_can_fail():
    assert STALE["seed file"].search("the aggregate Markov model (seed 003)")
    assert STALE["seed number"].search("the global rank (000 Alg. 7)")
    assert STALE["seed number"].search("as in 001's protocol")
    assert not STALE["seed number"].search("2 000 points, ARI 1.000, 0.003 at 10^4, chmod 000")
    assert STALE["design brief"].search("Layout (DESIGN.md §5)")
    assert NEEDS_KEY.search("'ignorable' is Paper I's PCKID")
    assert not NEEDS_KEY.search('silverman_thesis(X); ("thesis", "kpca")')
    assert KEY.findall("Løkse (2020), Paper II, Prop. 6 [Lokse2020]") == ["Lokse2020"]


def test_the_cli_one_liners_drop_keyed_citations():
    """``dkernel methods NAME`` shows a parameter's first sentence without its citations."""
    from dkernel.schema.estimator import _CITATION

    text = "Restart probability ([Lokse2014], §9.1.2, uses 0.15). Width (x [ZelnikManor2005])."
    assert _CITATION.sub("", text) == "Restart probability. Width."
    assert _CITATION.sub("", "Keep (this) aside.") == "Keep (this) aside."


ESTIMATORS = sorted(
    name
    for name in dkernel.__all__
    if isinstance(getattr(dkernel, name), type)
    and issubclass(getattr(dkernel, name), BaseEstimator)
)


def _section(doc: str, title: str) -> str | None:
    match = re.search(
        rf"^{title}\n-{{{len(title)}}}\n(.*?)(?=^\S[^\n]*\n-{{3,}}\n|\Z)", doc, re.M | re.S
    )
    return None if match is None else match.group(1)


@pytest.mark.parametrize("name", ESTIMATORS)
def test_exported_estimator_has_references_and_see_also(name, defined):
    doc = inspect.getdoc(getattr(dkernel, name))
    references = _section(doc, "References")
    assert references is not None, f"{name}: no References section"
    keys = set(KEY.findall(references))
    assert keys and keys <= defined, f"{name}: References keys {sorted(keys)}"
    see_also = _section(doc, "See Also")
    assert see_also is not None, f"{name}: no See Also section"
    # the names of each entry ("name : description" or "name, name : description")
    entries = [line.split(" : ")[0] for line in see_also.splitlines() if line[:1].strip()]
    named = {n.strip().removeprefix("dkernel.") for e in entries for n in e.split(",")}
    related = named - {name}
    assert related & set(ESTIMATORS), f"{name}: See Also names no other dkernel estimator"
    # numpydoc's order: See Also before Notes, References after it
    assert doc.index("\nSee Also\n") < doc.index("\nReferences\n")
