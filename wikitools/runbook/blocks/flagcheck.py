"""RB017: a server block's flag that misspells, by one or two letters, a flag the engine's own
parser defines (engines/flag_lists.py, one version), located where the block writes it, with the
flag it means. A flag the list lacks altogether is not judged: it may be another version's or a
fork's. The runbook stays readable; plan and run refuse it through its page's block errors,
naming the line."""

from __future__ import annotations

import re

from wikitools.core.diagnostics import Diagnostic
from wikitools.pages.parse import CodeBlock, Page
from wikitools.runbook.engines import catalog as engines
from wikitools.runbook.engines.types import EngineCommand


def flag_findings(page: Page, block: CodeBlock, cmd: EngineCommand) -> list[Diagnostic]:
    eng = engines.engine(cmd.engine) if cmd.engine else None
    if eng is None or eng.flags is None:
        return []
    flags = eng.flags
    # spellings the catalog already reads as another flag (`--tp` for the tensor-parallel size,
    # as community pages write it) are the catalog's call, not a typo
    known = {*engines.SERVER_FLAG_ALIASES, *eng.flag_aliases, *engines.CANONICAL_FLAGS,
             *eng.canonical_flags}
    out = []
    for name in dict.fromkeys(cmd.written_flags):
        if name in known or flags.accepts(name):
            continue
        typo = flags.typo_of(name)
        if typo is None:
            continue
        line, col = _locate_word(page, block, name)
        out.append(Diagnostic(
            page.path, line, col, "RB017",
            f"unknown flag '{name}': {eng.display_name} {flags.version} has no such server "
            f"flag; did you mean '{typo}'?"))
    return out


def _locate_word(page: Page, block: CodeBlock, word: str) -> tuple[int, int]:
    """Line and column of `word` as a whole word in the block's content (the first content
    line when the block does not hold it: a compose file block does)."""
    lines = page.text.split("\n")
    pattern = re.compile(rf"(?<![\w-]){re.escape(word)}(?![\w-])")
    for number in range(block.content_line, block.end_line + 1):
        found = pattern.search(lines[number - 1]) if number - 1 < len(lines) else None
        if found:
            return number, found.start() + 1
    return block.content_line, 1
