"""The passes over a page's source up to markdown-it's syntax tree: the front matter taken off
and parsed (located FM001/FM002 problems), the bodies of Material containers (admonitions,
content tabs) dedented so that they parse as ordinary Markdown, and the parse itself, with
backticks the parser fails on written as a stand-in. Line numbers never change."""

from __future__ import annotations

import os
import re
from typing import Any

import yaml
from markdown_it_pyrs import MarkdownIt, Node

from wikitools.core.diagnostics import Diagnostic, Severity, yaml_problem
from wikitools.core.yamlload import load_yaml
from wikitools.pages.page import Page, TextSpan

# Material containers whose bodies are indented by four spaces: admonitions, collapsible
# admonitions and content tabs. Plain CommonMark would read those bodies as indented code.
_MD = MarkdownIt("commonmark").enable("table")  # HTML blocks and inline HTML included
_CONTAINER = re.compile(
    r'^(?:(?P<admonition>!!!|\?\?\?\+?)[ \t]+(?P<kind>[\w-]+)|(?P<tab>===[!+]?)[ \t]+(?=["\'])'
    r')(?P<rest>.*)$'
)
_MAYBE_CONTAINER = re.compile(r"^[ \t]*(?:!!!|\?\?\?|===)", re.MULTILINE)
_FENCE_ANY = re.compile(r"^ *(?P<fence>`{3,}|~{3,})(?P<info>.*)$")  # in a list item too
_OPENING = frozenset("`~!?=")  # what a line that opens a fence or a container starts with


def _yaml_problem(page: Page, exc: yaml.YAMLError) -> dict[str, Any]:
    """Record a located FM001 for malformed front matter; the page then has none."""
    mark_line, mark_col, problem = yaml_problem(exc)
    line = mark_line + 2 if mark_line is not None else 1
    col = mark_col + 1 if mark_col is not None else 1
    page.problems.append(
        Diagnostic(page.path, line, col, "FM001", f"malformed front matter: {problem}")
    )
    return {}


def take_front_matter(page: Page, lines: list[str]) -> list[str]:
    """Parse a leading `---` YAML block; return the lines with it blanked (numbers kept)."""
    if not lines or lines[0].rstrip() != "---":
        return list(lines)
    end = next((i for i in range(1, len(lines)) if lines[i].rstrip() in ("---", "...")), None)
    if end is None:
        page.problems.append(
            Diagnostic(
                page.path, 1, 1, "FM001", "front matter starts with '---' but is never closed"
            )
        )
        return list(lines)
    source = "\n".join(lines[1:end])
    try:
        data = load_yaml(source) if source.strip() else {}
    except yaml.YAMLError:
        data = None
    if data is None and source.strip():
        try:  # the pure-Python loader words its errors the same on every machine
            data = load_yaml(source, yaml.SafeLoader)
        except yaml.YAMLError as exc:
            data = _yaml_problem(page, exc)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        page.problems.append(
            Diagnostic(page.path, 2, 1, "FM002", "front matter must be a mapping of keys to values")
        )
        data = {}
    page.front_matter = {str(k): v for k, v in data.items()}
    page.front_matter_end = end + 1
    return [""] * (end + 1) + lines[end + 1 :]


def indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def flatten_containers(page: Page, lines: list[str]) -> list[str]:
    """Dedent the bodies of admonitions and content tabs so that markdown-it parses them as
    ordinary Markdown. A container may sit inside a list item or another container (`    ===
    "Tab"` under `1. …`): its body is indented four columns more than its own line. Line numbers
    are kept; columns are read back from the original lines. Blank lines are made empty."""
    text = "\n".join(lines)
    if not (("!!!" in text or "???" in text or "===" in text) and _MAYBE_CONTAINER.search(text)):
        return [line if line.strip() else "" for line in lines]
    out: list[str] = []
    bodies: list[int] = []  # for each open container, the original indent of its body
    fence: tuple[str, int] | None = None  # (char, length) of an open fence
    for number, original in enumerate(lines, start=1):
        if not bodies and fence is None and original.lstrip(" ")[:1] not in _OPENING:
            out.append(original if original.strip() else "")  # opens nothing: kept as it is
            continue
        line, removed = original, 0
        if bodies and line.strip():
            if fence is None:
                while bodies and indent(original) < bodies[-1]:
                    bodies.pop()
            cut = min(4 * len(bodies), indent(original))
            line, removed = original[cut:], cut
        elif not line.strip():
            line, removed = "", 0
        if fence is not None:
            stripped = line.strip()
            char, length = fence
            if stripped.startswith(char * length) and not stripped.strip(char):
                fence = None
        else:
            opened = _FENCE_ANY.match(line)
            own = indent(line)
            match = _CONTAINER.match(line[own:]) if own % 4 == 0 and own <= 12 else None
            if opened:
                fence = (opened["fence"][0], len(opened["fence"]))
            elif match and (own == 0 or (out and _in_list_or_container(out, own))):
                _add_container_title(page, original, removed, number, match["rest"])
                bodies.append(indent(original) + 4)
                line = ""
        out.append(line)
    return out


_LIST_ITEM = re.compile(r"^(?P<indent> *)(?:[-*+]|\d{1,9}[.)])[ \t]+\S")


def _in_list_or_container(done: list[str], own: int) -> bool:
    """Whether a line indented `own` columns continues a list item (`1. …` whose content starts
    at that column or before) rather than being an indented code block."""
    for prev in reversed(done):
        if not prev.strip():
            continue
        m = _LIST_ITEM.match(prev)
        if m and len(m["indent"]) < own:
            return True
        if indent(prev) < own and not m:
            return False
    return False


def _add_container_title(page: Page, original: str, removed: int, number: int, rest: str) -> None:
    title = re.search(r'"([^"]*)"', rest)
    if title and title.group(1).strip():
        col = original.index('"', removed) + 2
        page.spans.append(TextSpan(title.group(1), number, col, "admonition_title"))


# Stand-ins for a backtick that are punctuation too, as a backtick is (emphasis reads them alike).
MARKS = "\u2e3b\u2e3a\u2e2e\u2e18\u2e1f"
_BLANK_LINES = re.compile(r"(\n[ \t]*\n)")
_TICKS = re.compile(r"`+")
_PREFIX = r"(?:[ \t>]|[-*+][ \t]|\d{1,9}[.)][ \t])*"  # quote and list item markers
_FENCE_PREFIX = re.compile(_PREFIX)
_OWN_LINE = re.compile(r"[ \t>]*#|.*\|")  # a heading or a table row: inline content of its own
_ITEM_START = re.compile(r"[ \t>]*(?:[-*+]|\d{1,9}[.)])(?:[ \t]|$)")


def inert_backticks(body: str, mark: str, unmatched_only: bool) -> str:
    """The body with backtick runs written as `mark`: those that no run of the same length
    follows in their block of lines (between blank lines, list items, headings and table rows),
    or all; never a fence's opening run."""
    out: list[str] = []
    for chunk in _BLANK_LINES.split(body):
        if "`" not in chunk:
            out.append(chunk)
            continue
        groups: list[list[str]] = [[]]
        for line in chunk.split("\n"):
            if _OWN_LINE.match(line):
                groups += [[line], []]
            elif _ITEM_START.match(line) and groups[-1]:
                groups.append([line])
            else:
                groups[-1].append(line)
        out.append("\n".join(_inert_runs("\n".join(g), mark, unmatched_only)
                             for g in groups if g))
    return "".join(out)


def _inert_runs(text: str, mark: str, unmatched_only: bool) -> str:
    later: set[int] = set()
    inert: list[tuple[int, int]] = []
    for m in reversed(list(_TICKS.finditer(text))):
        size = m.end() - m.start()
        line_start = text.rfind("\n", 0, m.start()) + 1
        opener = size >= 3 and _FENCE_PREFIX.fullmatch(text, line_start, m.start()) is not None
        if not opener and (not unmatched_only or size not in later):
            inert.append((m.start(), m.end()))
        later.add(size)
    parts, last = [], 0
    for start, end in reversed(inert):
        parts += [text[last:start], mark * (end - start)]
        last = end
    return "".join(parts) + text[last:]


def syntax_tree(
    page: Page, lines: list[str], body_lines: list[str]
) -> tuple[Node, str, str | None]:
    """The syntax tree of the body, the body it was parsed from, and the character that stands
    for a backtick in it, if any. markdown-it-pyrs 0.4 panics on some backtick runs that close
    no code span, when it scans one twice (inside an unclosed `[`; markdown-it-rust/markdown-it
    issue 40). Such a run is text in CommonMark: the page is parsed again with the runs that no
    run of their length follows written as a stand-in character (read back as a backtick), else
    with every backtick so written, with a PG008 warning at the first."""
    body = "\n".join(body_lines)
    tree = _quiet_tree(body)
    if tree is not None:
        return tree, body, None
    mark = next((ch for ch in MARKS if ch not in body), None)
    for unmatched_only in (True, False) if mark else ():
        marked = inert_backticks(body, mark or "", unmatched_only)
        tree = _quiet_tree(marked)
        if tree is None:
            continue
        at = next((i for i, (x, y) in enumerate(zip(body, marked, strict=True)) if x != y), 0)
        k = body.count("\n", 0, at)
        col = at - body.rfind("\n", 0, at) + len(lines[k]) - len(body_lines[k])
        page.problems.append(Diagnostic(
            page.path, k + 1, col, "PG008",
            "this backtick closes no code span and the Markdown parser fails on it: write it "
            "as \\` (it is read as text)" if unmatched_only else "the Markdown parser fails on "
            "this page's backticks: every backtick is read as text", Severity.WARNING))
        return tree, marked, mark
    page.problems.append(Diagnostic(
        page.path, 1, 1, "PG008", "the Markdown parser fails on this page; its body is not read"))
    return _MD.tree(""), "", None


_STDERR: list[int] = []  # a duplicate of file descriptor 2 and one of /dev/null, once opened


def _quiet_tree(body: str) -> Node | None:
    """The syntax tree, or None where the parser panics (the Rust panic message it writes on
    file descriptor 2 is discarded)."""
    try:
        if not _STDERR:
            _STDERR.extend((os.dup(2), os.open(os.devnull, os.O_WRONLY)))
        os.dup2(_STDERR[1], 2)
    except OSError:
        pass
    try:
        return _MD.tree(body)
    except BaseException as exc:  # pyo3's PanicException derives from BaseException
        if type(exc).__name__ != "PanicException":
            raise
        return None
    finally:
        if _STDERR:
            os.dup2(_STDERR[0], 2)
