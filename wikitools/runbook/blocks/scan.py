"""`wiki runbook scan`: plain blocks that hold an engine launcher or a client command and could
become runbook blocks; each finding suggests the attribute list (`bash { #id .runbook-server
… }`). Shell blocks are read as shell (docker run, docker exec, wrappers, here-documents); YAML
blocks with `services:` as compose files. A `docker compose … up` block reads the compose file
shown before it on the page."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from wikitools.diagnostics import Diagnostic, Severity
from wikitools.pages import CodeBlock, Page
from wikitools.runbook.blocks.extract import is_runbook_block
from wikitools.runbook.engines.command import mentions_launcher, parse_server_command
from wikitools.runbook.engines.compose import (
    DEFAULT_FILES,
    ComposeError,
    looks_like_compose,
    parse_compose,
)
from wikitools.runbook.engines.launcher import ANY_FILE, find_launcher
from wikitools.runbook.engines.shell import heredoc_files
from wikitools.runbook.engines.types import ClientCommand, EngineCommand

SHELL_LANGS = (None, "bash", "sh", "shell", "zsh", "console", "shell-session")
YAML_LANGS = ("yaml", "yml")


@dataclass(frozen=True, slots=True)
class Suggestion:
    path: str
    line: int  # the block's opening fence
    col: int
    role: str  # server | client | file (a compose file the server block runs)
    summary: str  # what was understood
    brace: str  # the suggested info string, `bash { #id .runbook-server … }`
    runbook: str  # the runbook id the block would belong to
    end_line: int = 0  # the block's last line (its closing fence)
    source_line: int = 0  # the block holding the launcher (a compose file for `up` blocks)
    command: EngineCommand | ClientCommand | None = field(default=None, compare=False,
                                                          hash=False)

    @property
    def fence(self) -> str:
        return "```" + self.brace

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


def understand_compose(text: str, path: str = DEFAULT_FILES[0]) -> EngineCommand | None:
    """The launcher in a compose file (the first service that holds one)."""
    cmd = parse_server_command("docker compose up", files={path: text})
    return cmd if cmd.engine else None


def _lang(block: CodeBlock) -> str | None:
    return (block.attrs.lang or "").lower() or None


def _describe(cmd: EngineCommand) -> str:
    return "(" + ", ".join(x for x in (
        cmd.engine, cmd.model, f"tp={cmd.tp}" if cmd.tp else None,
        f"image {cmd.image}" if cmd.image else None,
        "in a running container" if cmd.container and cmd.container.kind == "exec" else None,
    ) if x) + ")"


def scan_pages(pages: Iterable[Page], taken: Iterable[str] = ()) -> list[Suggestion]:
    out: list[Suggestion] = []
    used = set(taken)

    def new_id(cmd: EngineCommand) -> str:
        rid, n = suggest_id(cmd), 2
        while rid in used:
            rid = f"{suggest_id(cmd)}-{n}"
            n += 1
        used.add(rid)
        return rid

    for page in sorted(pages, key=lambda p: p.path):
        current: str | None = None  # the runbook a following client would belong to
        compose: tuple[CodeBlock, EngineCommand, str] | None = None  # last compose file shown
        pending_file: Suggestion | None = None  # its suggestion, until a server block uses it
        for block in page.code_blocks:
            if is_runbook_block(block):
                if "runbook-server" in block.attrs.classes and block.attrs.id:
                    current = block.attrs.id
                continue
            lang = _lang(block)
            if block.attrs.brace:
                continue
            if lang in YAML_LANGS and looks_like_compose(block.content):
                cmd = understand_compose(block.content)
                if cmd is None:  # the image decides the flags: a later `up` is not understood
                    compose, pending_file = None, None
                    continue
                rid = new_id(cmd)
                compose = (block, cmd, rid)
                pending_file = Suggestion(
                    page.path, block.line, block.col, "file", _describe(cmd),
                    f"yaml {{ .runbook-file for={rid} path={DEFAULT_FILES[0]} }}", rid,
                    block.end_line, block.line, cmd)
                out.append(pending_file)
                continue
            if lang not in SHELL_LANGS:
                continue
            files = {ANY_FILE: compose[0].content} if compose else {}
            found = mentions_launcher(block.content, files)
            if found is None:
                continue
            if isinstance(found, EngineCommand):
                use = found.container
                from_page = (compose is not None and use is not None and use.kind == "compose"
                             and use.compose_file not in heredoc_files(block.content))
                if from_page and compose is not None and pending_file is not None and use:
                    _block, cmd, rid = compose
                    path = use.compose_file or DEFAULT_FILES[0]
                    if path != DEFAULT_FILES[0]:
                        out[out.index(pending_file)] = _with_path(pending_file, path)
                    pending_file = None
                    source = _block.line
                else:
                    rid, source = new_id(found), block.line
                current = rid
                attrs = f"engine={found.engine} gpus={found.gpus}"
                out.append(Suggestion(
                    page.path, block.line, block.col, "server", _describe(found),
                    f"bash {{ #{rid} .runbook-server {attrs} }}", rid, block.end_line, source,
                    found))
            else:
                target = current or "RUNBOOK-ID"
                kind = found.default_kind or "smoke"
                out.append(Suggestion(
                    page.path, block.line, block.col, "client", f"({found.launcher})",
                    f"bash {{ .runbook-client for={target} kind={kind} }}", target,
                    block.end_line, block.line, found))
    return out


def _with_path(s: Suggestion, path: str) -> Suggestion:
    brace = s.brace.replace(f"path={DEFAULT_FILES[0]}", f"path={path}")
    return Suggestion(s.path, s.line, s.col, s.role, s.summary, brace, s.runbook, s.end_line,
                      s.source_line, s.command)


_CONTAINERISH = re.compile(r"docker|podman|compose|^services:", re.M)


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
        if is_runbook_block(block) or block.attrs.brace or not _CONTAINERISH.search(block.content):
            continue
        lang = _lang(block)
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
        if lang not in SHELL_LANGS:
            continue
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
