"""`wiki lint` warnings (RB013) for plain container blocks that could not become runbooks: a
compose file whose services start no engine themselves, `docker compose up` without its compose
file on the page, a server started with `docker exec`, or `docker run` inside a shell string."""

from __future__ import annotations

import re

from wikitools.core.diagnostics import Diagnostic, Severity
from wikitools.pages.parse import CodeBlock, Page
from wikitools.runbook.blocks.extract import is_runbook_block
from wikitools.runbook.blocks.page_compose import (
    SHELL_LANGS,
    YAML_LANGS,
    block_lang,
    understand_compose,
)
from wikitools.runbook.engines.compose import ComposeError, looks_like_compose, parse_compose
from wikitools.runbook.engines.launcher import ANY_FILE, find_launcher

_SERVICES_LINE = re.compile(r"^services:", re.M)


def _containerish(text: str) -> bool:
    """Mentions docker, podman or compose, or is a compose file (substrings first: a pattern
    of these alternatives is tried at every position)."""
    return ("docker" in text or "podman" in text or "compose" in text
            or ("services:" in text and _SERVICES_LINE.search(text) is not None))


_WARNED_WORDS = ("run", "exec", "compose")  # `docker run`, `… exec`, `docker compose …`


def container_findings(page: Page) -> list[Diagnostic]:
    """Plain container blocks that could not become runbooks, and why (warnings for `wiki
    lint`): a compose file whose services start no engine themselves, `docker compose up`
    without its compose file on the page, a server started with `docker exec` in a container
    the page does not start, or `docker run` hidden inside a shell string."""
    out: list[Diagnostic] = []
    compose: str | None = None
    helper_line: int | None = None  # the last compose file shown, when it starts no engine

    def warn(block: CodeBlock, message: str) -> None:
        out.append(Diagnostic(page.path, block.line, block.col, "RB013", message,
                              Severity.WARNING))

    for block in page.code_blocks:
        if is_runbook_block(block) or block.attrs.brace or not _containerish(block.content):
            continue
        lang = block_lang(block)
        if lang in YAML_LANGS and looks_like_compose(block.content):
            try:
                services = parse_compose(block.content).services
            except ComposeError as exc:
                warn(block, f"compose file not readable: {exc}")
                compose = None
                continue
            compose, helper_line = block.content, None
            if understand_compose(block.content) is None:
                runs = "; ".join(
                    f"service {s.name} runs {' '.join(s.argv) or 'its image default'}"
                    f"{f' in {s.image}' if s.image else ''}" for s in services[:3])
                warn(block, "compose file whose services start no engine themselves "
                     f"({runs}): a runbook cannot tell the engine, model or port from it")
                compose, helper_line = None, block.line
            continue
        if lang not in SHELL_LANGS or not any(w in block.content for w in _WARNED_WORDS):
            continue  # what is warned about below needs one of these words
        found, _env, problems = find_launcher(block.content,
                                              {ANY_FILE: compose} if compose else None)
        if found is None:
            if any("compose" in p for p in problems):
                warn(block, problems[0] if helper_line is None else
                     "docker compose runs the compose file shown at line "
                     f"{helper_line}, whose services start no engine themselves")
            continue
        use = found.container
        if use is not None and use.kind == "exec":
            warn(block, f"the server starts inside a running container ({use.name}) that the "
                 "page does not start: a runbook could not stop it; start it with docker run "
                 "or docker compose")
        elif use is not None and use.kind == "run" and not use.top_level:
            warn(block, "docker run inside a shell string: a runbook could not learn the "
                 "container's ID to stop it")
    return out


__all__ = ["container_findings"]
