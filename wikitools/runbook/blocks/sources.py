"""Where a server block's variables come from when the block does not set them itself: an
earlier block of the same page that only sets variables (`export IMAGE=…`, `PORT=5002`, an
array), read top to bottom the way a reader pasting the blocks in order gets them. Such a block
becomes a path-less `.runbook-file` of the runbook: the run runs it first and the runbook's hash
covers it. A variable set only after the block, in another content tab, in sibling sections
that set it differently (alternatives), in a block that runs more than assignments, or to a
placeholder, has no source; the reason says which."""

from __future__ import annotations

import functools
import re
from collections.abc import Container, Iterable, Mapping
from dataclasses import dataclass

from wikitools.pages.page import CodeBlock, Page
from wikitools.runbook.blocks.declared import Runbook
from wikitools.runbook.blocks.literals import variables_refusals
from wikitools.runbook.blocks.refusals import (
    UNSET_CODE,
    Refusal,
    placeholders,
    position,
    required_variables,
)
from wikitools.runbook.blocks.variables import reads
from wikitools.runbook.engines.shell import ShellSyntaxError, split_commands

SHELL_LANGS = (None, "bash", "sh", "shell", "zsh", "console", "shell-session")
_ASSIGN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(?:\[[^\]]*\])?\+?=")
_DECLARE = ("export", "declare", "typeset", "readonly")
_TAB = re.compile(r"^(?P<indent>[ \t]*)===\+?[ \t]+[\"']")


@dataclass(frozen=True, slots=True)
class Source:
    """The block that sets `name` for a server block, or why none can (`block` is None)."""

    name: str
    block: CodeBlock | None
    line: int = 0  # the assignment's line (0: the page sets it nowhere before the block)
    value: str = ""
    why: str = ""  # "; the page sets it only after the block, at line 80" (empty: nowhere)


def _lang(block: CodeBlock) -> str | None:
    return (block.attrs.lang or "").lower() or None


def assigned(block: CodeBlock) -> dict[str, tuple[int, str]]:
    """Each variable the block's top-level commands set (`NAME=value`, `export NAME=value`,
    `declare -a NAME=(…)`) → (page line of its last assignment, value as written)."""
    return dict(_assigned(block.content, block.content_line))


@functools.lru_cache(maxsize=4096)
def _assigned(content: str, first_line: int) -> tuple[tuple[str, tuple[int, str]], ...]:
    try:
        cmds = split_commands(content)
    except ShellSyntaxError:
        return ()
    out: dict[str, tuple[int, str]] = {}
    for cmd in cmds:
        argv = cmd.argv
        words = cmd.words
        lead = 1 if argv and argv[0] in _DECLARE else 0
        rest = [(w, a) for w, a in zip(words[lead:], argv[lead:], strict=True)
                if not (lead and a.startswith("-"))]
        if not rest or not all(_ASSIGN.match(a) for _w, a in rest) or (
                not lead and len(rest) != len(argv)):
            continue
        for word, arg in rest:
            name, _eq, value = arg.partition("=")
            line = first_line + content.count("\n", 0, word.start)
            out[name.split("[")[0].rstrip("+")] = (line, value)
    return tuple(out.items())


def assigned_values(block: CodeBlock) -> list[tuple[str, str]]:
    """(name, value) of each variable the block sets, in the order a shell would set them."""
    return [(name, value) for name, (_line, value) in assigned(block).items()]


def variables_only(block: CodeBlock) -> str | None:
    """None when every command of the block sets variables (or it holds only comments);
    else the first other command, as written."""
    try:
        cmds = split_commands(block.content)
    except ShellSyntaxError:
        return block.content.strip().split("\n", 1)[0]
    for cmd in cmds:
        argv = cmd.argv
        if not argv:
            continue
        lead = 1 if argv[0] in _DECLARE else 0
        words = [a for a in argv[lead:] if not (lead and a.startswith("-"))]
        if (lead == 0 and not all(_ASSIGN.match(a) for a in argv)) or \
                not all(_ASSIGN.match(a) for a in words) or \
                any("$(" in a or "`" in a for a in argv):
            start = cmd.words[0].start
            end = block.content.find("\n", start)
            return block.content[start:end if end >= 0 else None].strip()
    return None


def sections(page: Page, line: int) -> tuple[int, ...]:
    """The lines of the headings that enclose `line`, outermost first."""
    path: list[tuple[int, int]] = []
    for h in page.headings:
        if h.line >= line:
            break
        while path and path[-1][0] >= h.level:
            path.pop()
        path.append((h.level, h.line))
    return tuple(n for _lvl, n in path)


def tabs(page: Page, block: CodeBlock) -> tuple[int, ...]:
    """The lines of the content tabs (`=== "Name"`) that hold the block, outermost first."""
    lines = page.text.split("\n")
    indent = block.col - 1
    out: list[int] = []
    for n in range(block.line - 1, 0, -1):
        text = lines[n - 1]
        if not text.strip():
            continue
        width = len(text) - len(text.lstrip(" \t"))
        m = _TAB.match(text)
        if m and width < indent:
            out.append(n)
            indent = width
        elif width == 0 and not m:
            break
    return tuple(reversed(out))


def _setters(page: Page, name: str) -> list[tuple[CodeBlock, int, str]]:
    out: list[tuple[CodeBlock, int, str]] = []
    for b in page.code_blocks:
        if b.fenced and _lang(b) in SHELL_LANGS and name in b.content:
            hit = assigned(b).get(name)
            if hit is not None:
                out.append((b, *hit))
    return out


def variable_source(page: Page, block: CodeBlock, name: str) -> Source:
    """The earlier block of the page that sets `name` for `block` (the last one before it, as
    a reader pasting the blocks in order would have it), or why none can stand for it."""
    found = _setters(page, name)
    before = [s for s in found if s[0].end_line < block.line]
    after = [s for s in found if s[0].line > block.end_line]
    if not before:
        why = f"; the page sets it only after the block, at line {after[0][1]}" if after else ""
        return Source(name, None, after[0][1] if after else 0, why=why)
    setter, line, value = before[-1]
    where = f"; the page sets it at line {line}"
    if placeholders(page.text.split("\n")[line - 1]):
        return Source(name, None, line, value, where + " to a placeholder")
    if not set(tabs(page, setter)) <= set(tabs(page, block)):
        return Source(name, None, line, value, where + ", in another content tab than the "
                      "block's: alternatives to choose from")
    mine = sections(page, block.line)
    inside = lambda b: set(sections(page, b.line)) <= set(mine)  # noqa: E731
    here = sections(page, setter.line)
    # another value in the same section ("or, to compare, use …"), or, when the setter's
    # section is closed, in another closed one: choices, not steps (a placeholder an earlier
    # step writes, `MODEL=/path/to/x`, is a template the later value fills in, not a choice)
    lines_of = page.text.split("\n")
    rivals = [n for b, n, v in before if v != value and not placeholders(lines_of[n - 1]) and (
        sections(page, b.line) == here or not (inside(setter) or inside(b)))]
    if rivals:
        lines = sorted({*rivals, line})
        return Source(name, None, line, value,
                      f"; the page sets it differently before the block (lines "
                      f"{', '.join(map(str, lines))}): alternatives to choose from")
    other = variables_only(setter)
    if other is not None:
        return Source(name, None, line, value,
                      f"{where} ({name}={value}), in a block that also runs `{other[:60]}`: "
                      "only a block of assignments can run first")
    if placeholders(setter.content):
        return Source(name, None, line, value,
                      f"{where} ({name}={value}), in a block that holds a placeholder")
    refused = variables_refusals(setter)
    if refused:
        return Source(name, None, line, value,
                      f"{where} ({name}={value}), in a block the run cannot run first: "
                      f"{refused[0].message}")
    return Source(name, setter, line, value)


def earlier_values(page: Page, block: CodeBlock) -> dict[str, str]:
    """The values the page's earlier blocks of variables give the variables `block` reads
    (those a source stands for), to read the block with (an image written as `"$IMAGE"`)."""
    out: dict[str, str] = {}
    for name in reads(block.content):
        src = variable_source(page, block, name)
        if src.block is not None:
            out[name] = src.value
    return out


def unset_refusals(page: Page | None, block: CodeBlock, defined: Container[str],
                   files: Iterable[str] = ()) -> list[Refusal]:
    """RB015 for each variable the command needs that is neither set by the block, by the
    runbook's files nor in `defined` (its env= attribute, the environment a run starts from),
    with where the page sets it and why that does not count."""
    out: list[Refusal] = []
    for name, offset in required_variables(block.content, files):
        if name in defined:
            continue
        line, col = (position(block, block.content, offset) if offset >= 0
                     else (block.line, block.col))
        src = variable_source(page, block, name) if page is not None else Source(name, None)
        where = src.why if src.block is None else \
            f"; the block at line {src.block.line} sets it ({name}={src.value}): mark it " \
            f"`.runbook-file for=ID` so that the run runs it first"
        out.append(Refusal(line, col, UNSET_CODE, "unset",
                           f"{name} is not set: the command needs it{where}", (name,)))
    return out


def page_sources(page: Page, block: CodeBlock, files: Mapping[str, str],
                 ) -> tuple[list[Refusal], list[CodeBlock]]:
    """The earlier blocks of the page that set the variables `block` needs (in page order), or
    RB015 refusals for those no block can stand for (then no sources)."""
    chosen: dict[int, CodeBlock] = {}
    while True:
        texts = [*files.values(), *(b.content for b in chosen.values())]
        unset = unset_refusals(page, block, (), texts)
        if not unset:
            return [], [chosen[n] for n in sorted(chosen)]
        srcs = [variable_source(page, block, v) for r in unset for v in r.variables]
        if any(s.block is None for s in srcs):
            unset = unset_refusals(page, block, (), texts)
            unset.sort(key=lambda r: variable_source(page, block, r.variables[0]).block
                       is not None)  # those with no source first
            return [r for r in unset if variable_source(page, block, r.variables[0]).block
                    is None], []
        new = {s.block.line: s.block for s in srcs if s.block is not None}
        if set(new) <= set(chosen):
            return unset, []  # the sources read variables nothing sets
        chosen.update(new)


def runbook_unset(runbook: Runbook, pages: Iterable[Page], environ: Mapping[str, str],
                  ) -> list[Refusal]:
    """The variables `runbook`'s server command needs that neither the block, its env=
    attribute, its files nor `environ` (the environment a run starts from) sets, located in
    its page."""
    page = next((p for p in pages if p.path == runbook.page), None)
    block = next((b for b in page.code_blocks if b.line == runbook.server.line), None) \
        if page is not None else None
    if block is None:
        return []
    defined = {*environ, *(k for k, _v in runbook.server.extra_env)}
    return unset_refusals(page, block, defined,
                          (t for f in runbook.files for t in (
                              [f.content] if f.path else [f.content, *(b for _p, b in f.writes)])))


__all__ = ["Source", "assigned", "assigned_values", "earlier_values", "page_sources",
           "runbook_unset", "sections", "tabs", "unset_refusals", "variable_source",
           "variables_only"]
