"""`wiki runbook scan --write`: turn plain launcher blocks into runbook blocks in place. Only the
opening fence line changes (its info string becomes the attribute list `scan` suggests); the
command inside is left exactly as it was. Runbook fences in the older `{ .bash … }` form get the
canonical `bash { … }` form the same way. A conversion that would not give a valid runbook block
is not made; the reason is reported instead."""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from wikitools.core.diagnostics import Diagnostic, Severity
from wikitools.pages.fences import modernise_info
from wikitools.pages.parse import Page, parse_page
from wikitools.runbook.blocks.extract import extract_runbooks, is_runbook_block
from wikitools.runbook.blocks.scan import Suggestion, merged_suggestions

_FENCE = re.compile(r"^(?P<indent>[ \t>]*)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")


@dataclass(frozen=True, slots=True)
class Adopted:
    path: str
    text: str  # the page after the conversion
    converted: tuple[Suggestion, ...]  # blocks now marked
    skipped: tuple[Diagnostic, ...]  # blocks left alone, with the reason


def _rewrite(text: str, suggestions: Sequence[Suggestion]) -> str:
    lines = text.split("\n")
    suggestions = merged_suggestions(suggestions)
    for s in suggestions:
        m = _FENCE.match(lines[s.line - 1])
        if m is None or s.insert:
            continue
        lines[s.line - 1] = m["indent"] + m["fence"] + s.brace
    for s in sorted((s for s in suggestions if s.insert), key=lambda s: -s.end_line):
        m = _FENCE.match(lines[s.line - 1])
        indent = m["indent"] if m else ""
        lines[s.end_line:s.end_line] = ["", indent + s.fence, indent + s.insert, indent + "```"]
    return "\n".join(lines)


_ADDED = 4  # lines an added server block takes: a blank line, two fences and the command


def _shift(line: int, added: Sequence[Suggestion]) -> int:
    """Where line `line` of the page is once the server blocks `added` are in."""
    return line + _ADDED * sum(1 for a in added if a.end_line < line)


def _block_lines(s: Suggestion, added: Sequence[Suggestion] = ()) -> set[int]:
    """The lines of the block `s` stands for, in the rewritten page."""
    if s.insert:
        start = _shift(s.end_line, added) + 2
        return set(range(start, start + 3))
    return set(range(_shift(s.line, added), _shift(s.end_line, added) + 1))


_KIND = re.compile(r"\bkind=(\w+)")


def _with_regions(page: Page, text: str, converted: Sequence[Suggestion]) -> str:
    """`text` with an empty results region after the last client block of each new runbook
    that measures something (a serving or quality client), unless the page has one for it."""
    lines = text.split("\n")
    have = {m[1] for m in re.finditer(r"<!--\s*wiki:results\b[^>]*\brunbook=([\w.-]+)",
                                       page.text)}
    inserts: list[tuple[int, list[str]]] = []
    added = [s for s in converted if s.insert]
    for rid in dict.fromkeys(s.runbook for s in converted if s.role == "server"):
        clients = [s for s in converted if s.role == "client" and s.runbook == rid]
        kinds = [k[1] for s in clients if (k := _KIND.search(s.brace))]
        view = "serving" if "serving" in kinds else "quality" if "quality" in kinds else None
        if rid in have or view is None:
            continue
        last = max(clients, key=lambda s: s.end_line)
        m = _FENCE.match(lines[_shift(last.line, added) - 1])
        indent = m["indent"] if m else ""
        region = [f"{indent}<!-- wiki:results runbook={rid} view={view} -->",
                  f"{indent}<!-- wiki:end -->"]
        inserts.append((_shift(last.end_line, added), ["", *region]))
    for after, new in sorted(inserts, reverse=True):
        lines[after:after] = new
    return "\n".join(lines)


def keep_layout(stored: str, old: str, new: str) -> str:
    """`new` (a rewrite of the page model's text `old`) in the layout of the file as stored:
    its byte-order mark and CRLF line endings kept, unchanged lines byte for byte."""
    if stored == old:
        return new
    bom = "\ufeff" if stored.startswith("\ufeff") else ""
    raw = stored.removeprefix("\ufeff").split("\n")
    plain = [ln.rstrip("\r") for ln in raw]
    if plain != old.split("\n"):
        return new  # not the text that was parsed: nothing to map
    crlf = "\r\n" in stored
    out: list[str] = []
    new_lines = new.split("\n")
    ops = difflib.SequenceMatcher(None, plain, new_lines, autojunk=False).get_opcodes()
    for tag, i1, i2, j1, j2 in ops:
        if tag == "equal":
            out += raw[i1:i2]
        else:
            out += [ln.rstrip("\r") + ("\r" if crlf else "") for ln in new_lines[j1:j2]]
    if out and crlf and not stored.endswith("\r\n") and out[-1].endswith("\r"):
        out[-1] = out[-1][:-1]
    return bom + "\n".join(out)


def adopt_page(page: Page, suggestions: Sequence[Suggestion],
               other_pages: Sequence[Page], root: Path | None) -> Adopted:
    """`page` with the runbook blocks of `suggestions` (for this page) written in. A runbook
    whose blocks would not be valid (e.g. a launcher that cannot be run from a page) is left
    out with its diagnostics; its client blocks go with it. `root`: the wiki's folder, where
    the scripts and compose files of the repository that server blocks run are read."""
    mine = [s for s in suggestions if s.path == page.path]
    skipped: list[Diagnostic] = []
    served = {s.runbook for s in mine if s.role == "server"}
    for s in mine:
        if s.role != "server" and s.runbook not in served:
            what = ("no `docker compose … up` block follows it on the page to run it"
                    if s.role == "file" else "no server block before it on the page")
            skipped.append(Diagnostic(page.path, s.line, s.col, "RB012",
                                      f"{s.role} block not converted: {what}", Severity.WARNING))
    mine = [s for s in mine if s.role == "server" or s.runbook in served]
    while True:
        text = _rewrite(page.text, mine)
        new = parse_page(text, page.path)
        _runbooks, diags = extract_runbooks([new, *other_pages], root)
        bad_lines = {d.line for d in diags if d.path == page.path}
        added = [s for s in mine if s.insert]
        bad_ids = {s.runbook for s in mine if _block_lines(s, added) & bad_lines}
        if not bad_ids:
            return Adopted(page.path, _with_regions(page, text, mine), tuple(mine),
                           tuple(skipped))
        for s in mine:
            if s.runbook in bad_ids:
                why = next((d.message for d in diags if d.path == page.path
                            and d.line in _block_lines(s, added)), None)
                why = why or "another block of the same runbook cannot be converted"
                skipped.append(Diagnostic(page.path, s.line, s.col, "RB012",
                                          f"{s.role} block not converted: {why}",
                                          Severity.WARNING))
        mine = [s for s in mine if s.runbook not in bad_ids]


def modernise_fences(page: Page) -> tuple[str, tuple[int, ...]]:
    """The page with each runbook fence in the older `{ .bash … }` form rewritten as
    `bash { … }` (same attributes, same block hash), and the lines that changed."""
    lines = page.text.split("\n")
    changed: list[int] = []
    for block in page.code_blocks:
        if not (block.fenced and is_runbook_block(block)) or block.attrs.lang_first:
            continue
        m = _FENCE.match(lines[block.line - 1])
        new = modernise_info(m["info"]) if m else None
        if m is None or new is None:
            continue
        lines[block.line - 1] = m["indent"] + m["fence"] + new
        changed.append(block.line)
    return "\n".join(lines), tuple(changed)
