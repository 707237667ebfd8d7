"""Compose files as pages show them, for `scan`: what a compose file's services launch, the
page's one compose file shown below the `docker compose up` that runs it ("create compose.yaml
from the section below"), and the languages of the blocks scan reads."""

from __future__ import annotations

import re

from wikitools.pages.parse import CodeBlock, Page
from wikitools.runbook.engines.command import parse_server_command
from wikitools.runbook.engines.compose import DEFAULT_FILES, looks_like_compose
from wikitools.runbook.engines.types import EngineCommand

SHELL_LANGS = (None, "bash", "sh", "shell", "zsh", "console", "shell-session")
YAML_LANGS = ("yaml", "yml")
_COMPOSE_UP = re.compile(r"\bdocker[ -]compose\b[^\n]*\bup\b")


def block_lang(block: CodeBlock) -> str | None:
    return (block.attrs.lang or "").lower() or None


def understand_compose(text: str, path: str = DEFAULT_FILES[0]) -> EngineCommand | None:
    """The launcher in a compose file (the first service that holds one)."""
    cmd = parse_server_command("docker compose up", files={path: text})
    return cmd if cmd.engine else None


def compose_below(page: Page) -> tuple[CodeBlock, EngineCommand] | None:
    """The compose file of a page whose `docker compose up` comes before it: only when the
    page shows exactly one compose file, the reader understands it, and an `up` block stands
    above it."""
    composes = [b for b in page.code_blocks if b.fenced and not b.attrs.brace
                and block_lang(b) in YAML_LANGS and looks_like_compose(b.content)]
    if len(composes) != 1:
        return None
    ups = [b for b in page.code_blocks if b.line < composes[0].line and runs_compose(b)]
    cmd = understand_compose(composes[0].content) if ups else None
    return (composes[0], cmd) if cmd is not None else None


def runs_compose(block: CodeBlock) -> bool:
    """A plain shell block that runs `docker compose … up` (of no file it writes itself)."""
    if block.attrs.brace or block_lang(block) not in SHELL_LANGS or \
            "compose" not in block.content:
        return False
    return "<<" not in block.content and bool(_COMPOSE_UP.search(block.content))


__all__ = ["SHELL_LANGS", "YAML_LANGS", "block_lang", "compose_below", "runs_compose",
           "understand_compose"]
