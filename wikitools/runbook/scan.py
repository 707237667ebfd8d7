"""`wiki runbook scan`: plain shell blocks that hold an engine launcher or a client command and
could become runbook blocks; each finding suggests the brace form."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from wikitools.pages import Page
from wikitools.runbook.command import mentions_launcher
from wikitools.runbook.extract import is_runbook_block
from wikitools.runbook.model import EngineCommand

SHELL_LANGS = (None, "bash", "sh", "shell", "zsh", "console", "shell-session")


@dataclass(frozen=True, slots=True)
class Suggestion:
    path: str
    line: int
    col: int
    role: str  # server | client
    summary: str  # what was understood
    fence: str  # the suggested opening fence

    def format(self) -> str:
        where = f"{self.path}:{self.line}:{self.col}"
        return f"{where}: {self.role} {self.summary}; mark it: {self.fence}"


def suggest_id(cmd: EngineCommand) -> str:
    """A runbook id from the model name and parallel sizes, e.g. gpt-oss-120b-tp2."""
    model = (cmd.model or cmd.engine or "runbook").rstrip("/").rsplit("/", 1)[-1]
    base = re.sub(r"[^a-z0-9._-]+", "-", model.lower()).strip("-._") or "runbook"
    for key, value in (("tp", cmd.tp), ("pp", cmd.pp), ("dp", cmd.dp)):
        if value and value > 1:
            base += f"-{key}{value}"
    return base


def scan_pages(pages: Iterable[Page], taken: Iterable[str] = ()) -> list[Suggestion]:
    out: list[Suggestion] = []
    used = set(taken)
    for page in sorted(pages, key=lambda p: p.path):
        current: str | None = None  # the runbook a following client would belong to
        for block in page.code_blocks:
            if is_runbook_block(block):
                if "runbook-server" in block.attrs.classes and block.attrs.id:
                    current = block.attrs.id
                continue
            lang = (block.attrs.lang or "").lower() or None
            if lang not in SHELL_LANGS or block.attrs.brace:
                continue
            found = mentions_launcher(block.content)
            if found is None:
                continue
            if isinstance(found, EngineCommand):
                rid = suggest_id(found)
                n = 2
                while rid in used:
                    rid = f"{suggest_id(found)}-{n}"
                    n += 1
                used.add(rid)
                current = rid
                attrs = [f"engine={found.engine}"]
                gpus = (found.tp or 1) * (found.pp or 1) * (found.dp or 1)
                attrs.append(f"gpus={gpus}")
                what = ", ".join(x for x in (found.engine, found.model,
                                             f"tp={found.tp}" if found.tp else None,
                                             f"image {found.image}" if found.image else None) if x)
                out.append(Suggestion(page.path, block.line, block.col, "server",
                                      f"({what})",
                                      f"```{{ .bash #{rid} .runbook-server {' '.join(attrs)} }}"))
            else:
                target = current or "RUNBOOK-ID"
                kind = found.default_kind or "smoke"
                out.append(Suggestion(page.path, block.line, block.col, "client",
                                      f"({found.launcher})",
                                      f"```{{ .bash .runbook-client for={target} kind={kind} }}"))
    return out
