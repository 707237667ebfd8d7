"""The glossary page as data: terms and expansions read from its Markdown tables, and the
abbreviation definitions (`*[TERM]: Expansion`) that give the site its tooltips.

A table is a glossary table when its header has a term column (Acronym / Term / Abbreviation)
and an expansion column (Meaning / Expansion / Stands for / Definition); a Notes column is kept
as notes and every other table on the page is ignored. Cells lose their inline markup. One row
may define several terms: `cc1 / cc64` (with `Concurrency 1 / concurrency 64` the expansions are
paired up), `TP, DP`, and `ctx0 / 100k` (a bare number after a prefixed term takes the prefix:
`ctx100k`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path

from wikitools.core.diagnostics import Diagnostic, Severity
from wikitools.core.errors import ConfigError
from wikitools.pages.parse import Cell, Table, read_page

TERM_HEADERS = frozenset(
    {"acronym", "acronyms", "term", "terms", "abbreviation", "abbreviations", "abbr"}
)
EXPANSION_HEADERS = frozenset(
    {"meaning", "meanings", "expansion", "expansions", "stands for", "definition", "expands to"}
)
NOTES_HEADERS = frozenset({"notes", "note", "comment", "comments", "details", "remarks"})


_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_REF_LINK = re.compile(r"!?\[([^\]]*)\]\[[^\]]*\]")
_TAG = re.compile(r"</?[A-Za-z][^>]*>")
_EMPHASIS = re.compile(r"(\*\*|__|\*|~~)(?=\S)(.+?)(?<=\S)\1")
_UNDERSCORE_EM = re.compile(r"(?<![\w])_(?=\S)(.+?)(?<=\S)_(?![\w])")
_COMBINED_SPLIT = re.compile(r"\s+/\s+|\s*,\s+|\s*;\s*")
_PREFIXED = re.compile(r"^([A-Za-z]+)\d")


@dataclass(frozen=True, slots=True)
class Entry:
    """One glossary term. `name` is True when the expansion contains the term itself
    ("vLLM inference engine"): the term is a name, not an abbreviation, so the acronym
    checker does not ask for it to be expanded."""

    term: str
    expansion: str
    notes: str
    line: int
    col: int
    name: bool = field(init=False, default=False)

    def __post_init__(self) -> None:
        pattern = r"(?<![A-Za-z0-9])" + re.escape(self.term) + r"(?![A-Za-z0-9])"
        named = re.search(pattern, self.expansion, re.IGNORECASE) is not None
        object.__setattr__(self, "name", named)


@dataclass(slots=True)
class Glossary:
    path: str  # POSIX, relative to the root when inside it
    entries: list[Entry] = field(default_factory=list)
    problems: list[Diagnostic] = field(default_factory=list)  # warnings found while loading

    def __len__(self) -> int:
        return len(self.entries)

    @property
    def terms(self) -> dict[str, Entry]:
        return {e.term: e for e in self.entries}


def clean_cell(text: str) -> str:
    """Plain text of a table cell: code spans, emphasis, links and HTML tags removed."""
    text = text.replace("\\|", "|")
    text = re.sub(r"(`+)(.+?)\1", lambda m: m.group(2).strip(), text)
    text = _LINK.sub(r"\1", text)
    text = _REF_LINK.sub(r"\1", text)
    text = _TAG.sub("", text)
    for _ in range(2):
        text = _EMPHASIS.sub(r"\2", text)
        text = _UNDERSCORE_EM.sub(r"\1", text)
    text = re.sub(r"\\([\\`*_{}\[\]()#+\-.!|<>])", r"\1", text)
    return " ".join(text.split())


def _column(header: tuple[Cell, ...], names: frozenset[str]) -> int | None:
    for i, cell in enumerate(header):
        if clean_cell(cell.text).rstrip(":").strip().casefold() in names:
            return i
    return None


def split_terms(term_text: str, expansion: str) -> list[tuple[str, str]]:
    """Split a combined entry into (term, expansion) pairs."""
    terms = [t for t in _COMBINED_SPLIT.split(term_text) if t]
    if len(terms) <= 1:
        return [(term_text, expansion)]
    prefix = _PREFIXED.match(terms[0])
    if prefix:
        terms = [prefix.group(1) + t if t[0].isdigit() else t for t in terms]
    expansions = [x for x in _COMBINED_SPLIT.split(expansion) if x]
    if len(expansions) == len(terms):
        return list(zip(terms, expansions, strict=True))
    return [(t, expansion) for t in terms]


def _table_entries(glossary: Glossary, table: Table) -> bool:
    term_col = _column(table.header, TERM_HEADERS)
    exp_col = _column(table.header, EXPANSION_HEADERS)
    if term_col is None or exp_col is None:
        return False
    notes_col = _column(table.header, NOTES_HEADERS)
    for row in table.rows:
        if term_col >= len(row) or exp_col >= len(row):
            continue
        term_cell = row[term_col]
        term_text = clean_cell(term_cell.text)
        expansion = clean_cell(row[exp_col].text)
        notes = (
            clean_cell(row[notes_col].text)
            if notes_col is not None and notes_col < len(row)
            else ""
        )
        if not term_text and not expansion:
            continue
        if not term_text or not expansion:
            missing = "term" if not term_text else "expansion"
            glossary.problems.append(
                _warn(glossary, term_cell, "GLO002", f"row has no {missing}; skipped")
            )
            continue
        for term, exp in split_terms(term_text, expansion):
            if len(term) < 2:
                glossary.problems.append(
                    _warn(
                        glossary,
                        term_cell,
                        "GLO003",
                        f'term "{term}" is shorter than 2 characters; skipped',
                    )
                )
                continue
            glossary.entries.append(Entry(term, exp, notes, term_cell.line, term_cell.col))
    return True


def _warn(glossary: Glossary, cell: Cell, code: str, message: str) -> Diagnostic:
    return Diagnostic(glossary.path, cell.line, cell.col, code, message, Severity.WARNING)


def load_glossary(path: Path, root: Path) -> Glossary:
    """Read the glossary page. No usable table (or no file) is a ConfigError (exit 2);
    a duplicate term is a located GLO001 warning and the first definition wins."""
    try:
        rel = path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        rel = path.as_posix()
    if not path.is_file():
        raise ConfigError(f"{rel}: glossary not found (use --glossary PATH to name another file)")
    page = read_page(path.resolve(), path.resolve().parent)
    glossary = Glossary(path=rel)
    # Bytes that are not text are read as U+FFFD and reported, so that no row is lost.
    glossary.problems.extend(
        replace(p, path=rel) for p in page.problems if p.code in ("PG002", "PG006")
    )
    usable = [t for t in page.tables if _table_entries(glossary, t)]
    if not usable or not glossary.entries:
        where = f"{rel}:{page.tables[0].line}:1" if page.tables else f"{rel}:1:1"
        raise ConfigError(
            f"{where}: no glossary table: expected a table whose header has a term column "
            "(Acronym, Term or Abbreviation) and an expansion column (Meaning, Expansion, "
            "Stands for or Definition), with at least one row"
        )
    seen: dict[str, Entry] = {}
    kept: list[Entry] = []
    for entry in glossary.entries:
        first = seen.get(entry.term)
        if first is not None:
            glossary.problems.append(
                Diagnostic(
                    rel,
                    entry.line,
                    entry.col,
                    "GLO001",
                    f'duplicate term "{entry.term}" (first defined at line {first.line}); '
                    "this row is ignored",
                    Severity.WARNING,
                )
            )
            continue
        seen[entry.term] = entry
        kept.append(entry)
    glossary.entries = kept
    return glossary


# --------------------------------------------------------------------------- tooltips


def _abbr_safe(term: str) -> bool:
    # Python-Markdown's abbr definition regex stops the term at `]` and refuses `\`.
    return "]" not in term and "\\" not in term and "\n" not in term


def _plural_allowed(term: str) -> bool:
    # Python-Markdown wraps whole words only (`\bGPU\b` misses "GPUs"), so all-caps terms get
    # a plural entry of their own; mixed-case names and lowercase terms do not need one.
    return term.isalpha() and term.isupper() and not term.endswith("S")


def abbreviation_lines(glossary: Glossary) -> str:
    """One `*[TERM]: Expansion` line per term (and its plural), sorted: the definitions that,
    appended to a page, give each term a tooltip through Python-Markdown's abbr extension."""
    return "".join(f"*[{term}]: {title}\n" for term, title in abbreviations(glossary).items())


def abbreviations(glossary: Glossary) -> dict[str, str]:
    """Term (and plural) -> tooltip text, sorted by term: what the site extension hands to the
    abbr extension of each page."""
    lines: dict[str, str] = {}
    for entry in glossary.entries:
        if not _abbr_safe(entry.term):
            continue
        title = " ".join(entry.expansion.split())
        if title in ('""', "''"):  # an empty title deletes the abbreviation in Python-Markdown
            continue
        lines.setdefault(entry.term, title)
    for entry in glossary.entries:
        if _plural_allowed(entry.term) and entry.term in lines:
            lines.setdefault(entry.term + "s", lines[entry.term])
    return dict(sorted(lines.items(), key=lambda kv: (kv[0].casefold(), kv[0])))
