"""`wiki runbook scan`: plain blocks that hold an engine launcher or a client command and could
become runbook blocks; each finding suggests the attribute list (`bash { #id .runbook-server
… }`). Shell blocks are read as shell (docker run, docker exec, wrappers, here-documents); YAML
blocks with `services:` as compose files. A `docker compose … up` block reads the compose file
shown before it on the page."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from wikitools.core.diagnostics import Diagnostic, Severity
from wikitools.pages.fences import format_fence_info
from wikitools.pages.parse import CodeBlock, Page
from wikitools.runbook.blocks.extract import file_targets, is_runbook_block
from wikitools.runbook.blocks.refusals import (
    Refusal,
    later_runner,
    page_scripts,
    runner_reason,
    runs_file,
    static_refusals,
    unproposed_reason,
    writer_refusals,
)
from wikitools.runbook.blocks.repository import (
    Repository,
    read_repository,
    repository_file,
    repository_launch,
    repository_refusals,
)
from wikitools.runbook.blocks.sources import (
    assigned,
    assigned_values,
    earlier_values,
    page_sources,
    unset_refusals,
    variable_source,
)
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
    # A server block to add after the compose file at `line` (its `up` is only in the prose):
    # the command it holds. Empty for blocks that are marked where they are.
    insert: str = ""

    @property
    def fence(self) -> str:
        return "```" + self.brace

    def format(self) -> str:
        where = f"{self.path}:{self.line}:{self.col}"
        if self.insert:
            return (f"{where}: compose file {self.summary} with no `up` block; add after it: "
                    f"{self.fence} {self.insert}")
        return f"{where}: {self.role} {self.summary}; mark it: {self.fence}"


def _up_block(pending: Suggestion) -> Suggestion:
    """The server block that runs a compose file the page shows but runs only in its prose."""
    cmd = pending.command
    assert isinstance(cmd, EngineCommand)
    attrs = f"engine={cmd.engine} gpus={cmd.gpus}"
    return Suggestion(pending.path, pending.line, pending.col, "server", pending.summary,
                      format_fence_info("bash", f"#{pending.runbook} .runbook-server {attrs}"),
                      pending.runbook, pending.end_line, pending.line, cmd,
                      insert="docker compose up -d")


_FOR = re.compile(r"(?<=\bfor=)[\w.,-]+")


def merged_suggestions(suggestions: Sequence[Suggestion]) -> list[Suggestion]:
    """One suggestion per block: a block of variables several runbooks read is a file block
    of each (`for=a,b`). Blocks are told apart by page and line: pages share line numbers."""
    out: dict[tuple[str, int, bool], Suggestion] = {}
    for s in suggestions:
        key = (s.path, s.line, bool(s.insert))
        prev = out.get(key)
        if prev is None or s.insert or s.role != "file" or prev.role != "file":
            out[key] = s
            continue
        have = _FOR.search(prev.brace)
        new = _FOR.search(s.brace)
        if have and new:
            ids = dict.fromkeys([*have[0].split(","), *new[0].split(",")])
            out[key] = replace(prev, brace=_FOR.sub(",".join(ids), prev.brace, count=1))
    return list(out.values())


@dataclass(frozen=True, slots=True)
class ScanResult:
    suggestions: list[Suggestion]
    refused: list[Diagnostic]  # launch blocks not proposed, each with its located reason


_SNAPSHOT = re.compile(r"^[0-9a-f]{40}$|^[0-9a-f]{64}$")
_GENERIC = {"model", "models", "weights", "checkpoint", "checkpoints", "hf", "hub", "snapshots",
            "main", "latest", "local", "data", "mnt", "root", "workspace", "runbook"}
_QUANTS = ("nvfp4", "mxfp4", "fp8", "int4", "int8", "awq", "gptq", "w4a8", "w4a16", "w8a8",
           "bf16", "fp4", "mxfp8", "gguf")


def _model_name(model: str | None) -> str | None:
    """The model's own name in a repository id or a local path: the last component that is
    not a snapshot hash or a generic folder (`…/models--org--Name/snapshots/<hash>` → Name)."""
    if not model or "$" in model or model.startswith("<"):
        return None
    parts = [p for p in model.rstrip("/").split("/") if p]
    for part in reversed(parts):
        if part.startswith("models--"):
            return part.split("--")[-1]
        if _SNAPSHOT.match(part) or part.lower() in _GENERIC:
            continue
        return part
    return None


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9._-]+", "-", text.lower()).strip("-._")


def suggest_id(cmd: EngineCommand, page: str = "") -> str:
    """A runbook id from the model's name and the launch's shape: quantization when the name
    does not say it, then TP/PP/DP sizes, e.g. kimi-k2.6-nvfp4-tp8. Without a readable model
    name: the served model name, else the page's file name."""
    name = _model_name(cmd.model) or _model_name(cmd.flag("--served-model-name"))
    stem = page.rsplit("/", 1)[-1].removesuffix(".md")
    base = _slug(name or stem or cmd.engine or "server") or "server"
    quant = (cmd.quantization or "").lower()
    if quant in _QUANTS and quant not in base:
        base += f"-{quant}"
    for key, value in (("tp", cmd.tp), ("pp", cmd.pp), ("dp", cmd.dp), ("dcp", cmd.dcp)):
        if value and value > 1:
            base += f"-{key}{value}"
    if not (cmd.tp and cmd.tp > 1) and cmd.gpus == 1 and not base.endswith("-tp1"):
        base += "-tp1"
    return base


def understand_compose(text: str, path: str = DEFAULT_FILES[0]) -> EngineCommand | None:
    """The launcher in a compose file (the first service that holds one)."""
    cmd = parse_server_command("docker compose up", files={path: text})
    return cmd if cmd.engine else None


def _lang(block: CodeBlock) -> str | None:
    return (block.attrs.lang or "").lower() or None


_DISPLAY = re.compile(r"""\b(?P<key>title|linenums|hl_lines)=(?P<v>"[^"]*"|'[^']*'|[^\s}"']+)""")


def fence_info(block: CodeBlock, default_lang: str, inner: str) -> str:
    """The info string for a newly marked block: its own language (or `default_lang`), the
    runbook attributes, and the display options it had (title=, linenums=, hl_lines=)."""
    lang = block.attrs.lang or default_lang
    shown = " ".join(f"{m['key']}={m['v']}" for m in _DISPLAY.finditer(block.info))
    return format_fence_info(lang, f"{inner} {shown}".strip())


def _describe(cmd: EngineCommand) -> str:
    return "(" + ", ".join(x for x in (
        cmd.engine, cmd.model, f"tp={cmd.tp}" if cmd.tp else None,
        f"image {cmd.image}" if cmd.image else None,
        "in a running container" if cmd.container and cmd.container.kind == "exec" else None,
    ) if x) + ")"


def _refuse(page: Page, block: CodeBlock, files: dict[str, str], repo: Repository,
            ) -> tuple[list[Diagnostic], list[CodeBlock]]:
    """Why the server block cannot be proposed (located warnings), or the earlier blocks of the
    page that set the variables it needs (to become its path-less file blocks). `repo`: the
    repository files it runs, whose own variables (a long script's function locals, `read`
    targets) are the script's business, not the page's."""
    found = [*static_refusals(block, {**files, **repo.texts()}), *repository_refusals(block, repo)]
    unset, sources = page_sources(page, block, {k: v for k, v in files.items()
                                                if k not in repo.texts()})
    diags = [Diagnostic(page.path, r.line, r.col, r.code,
                        f"not proposed as a runbook: {r.message}", Severity.WARNING)
             for r in [*found, *unset]]
    return diags, sources


def scan_pages(pages: Iterable[Page], taken: Iterable[str] = ()) -> list[Suggestion]:
    return scan_wiki(pages, taken).suggestions


def scan_wiki(pages: Iterable[Page], taken: Iterable[str] = (), root: Path | None = None,
              ) -> ScanResult:
    """Suggestions for every plain launch and client block of `pages`, and the launch blocks
    refused with their reasons. Ids are unique against `taken` and each other. `root`: the
    wiki's folder, to say which launches run a script or compose file of the repository."""
    out: list[Suggestion] = []
    refused: list[Diagnostic] = []
    used = set(taken)

    def new_id(cmd: EngineCommand, page: str) -> str:
        base = suggest_id(cmd, page)
        rid, n = base, 2
        while rid in used:
            rid = f"{base}-{n}"
            n += 1
        used.add(rid)
        return rid

    for page in sorted(pages, key=lambda p: p.path):
        current: str | None = None  # the runbook a following client would belong to
        compose: tuple[CodeBlock, EngineCommand, str] | None = None  # last compose file shown
        pending_file: Suggestion | None = None  # its suggestion, until a server block uses it
        scripts = page_scripts(page)
        writers: dict[str, CodeBlock] = {}  # files plain blocks write, for a later block to run
        claimed: dict[int, str] = {}  # line of such a block → the runbook it became a file of
        for block in page.code_blocks:
            if not block.fenced:
                continue
            if is_runbook_block(block):
                if "runbook-server" in block.attrs.classes and block.attrs.id:
                    current = block.attrs.id
                continue
            lang = _lang(block)
            if block.attrs.brace:
                continue
            if lang in YAML_LANGS and looks_like_compose(block.content):
                cmd = understand_compose(block.content)
                if pending_file is not None:
                    out.append(_up_block(pending_file))
                if cmd is None:  # the image decides the flags: a later `up` is not understood
                    compose, pending_file = None, None
                    compose_why = _compose_reason(block, root, page.path)
                    if compose_why:
                        refused.append(Diagnostic(page.path, block.line, block.col, "RB016",
                                                  f"not proposed as a runbook: {compose_why}",
                                                  Severity.WARNING))
                    continue
                rid = new_id(cmd, page.path)
                compose = (block, cmd, rid)
                pending_file = Suggestion(
                    page.path, block.line, block.col, "file", _describe(cmd),
                    fence_info(block, "yaml",
                               f".runbook-file for={rid} path={DEFAULT_FILES[0]}"), rid,
                    block.end_line, block.line, cmd)
                out.append(pending_file)
                current = rid  # clients that follow measure it, whichever block runs it
                continue
            if lang not in SHELL_LANGS:
                continue
            files = {ANY_FILE: compose[0].content} if compose else {}
            repo = read_repository(root, page.path, block.content)
            files.update(repo.texts())
            runs = {w.line: w for path, w in writers.items() if w is not block
                    and runs_file(block.content, path)}
            written = {p: t for w in runs.values() for p, t in heredoc_files(w.content).items()}
            files.update(written)
            owner = next((w for w in runs.values() if w.line in claimed), None)
            if owner is not None:
                refused.append(Diagnostic(
                    page.path, block.line, block.col, "RB016",
                    f"not proposed as a runbook: runs what the block at line {owner.line} "
                    f"writes, which is the file block of runbook #{claimed[owner.line]}: a "
                    "block belongs to one runbook; write the file in this block too",
                    Severity.WARNING))
                current = None
                continue
            visible = earlier_values(page, block) if "$" in block.content else {}
            found = mentions_launcher(block.content, files, visible)
            if isinstance(found, ClientCommand) and repo.files:  # a client only by its own text
                found = mentions_launcher(block.content, {k: v for k, v in files.items()
                                                          if k not in repo.texts()}, visible)
            own = heredoc_files(block.content) if "<<" in block.content else {}
            if found is None and not runs and later_runner(page, block) is not None and \
                    not any(runs_file(block.content, p) for p in own):  # runs it elsewhere
                for path in heredoc_files(block.content):  # decided where it is run
                    writers.setdefault(path, block)
                continue
            if found is None:
                _f, _env, problems = find_launcher(block.content, files, visible)
                why = (runner_reason(block, runs, files, problems) if runs else
                       unproposed_reason(page, block, problems, scripts))
                if why is not None and why.reason == "unknown":  # an image read from a
                    why = next((r for r in unset_refusals(  # variable the page leaves open
                        page, block, visible, files.values())
                        if variable_source(page, block, r.variables[0]).line), why)
                if repo.unreadable:
                    why = repository_refusals(block, repo)[0]
                elif repo.files and (why is None or why.reason in ("opaque", "unknown")):
                    why = repository_launch(repo, block, next(iter(problems), None) or (
                        why.message if why else "no engine launcher found in it")) or why
                if why is not None:
                    refused.append(Diagnostic(page.path, why.line, why.col, why.code,
                                              f"not proposed as a runbook: {why.message}",
                                              Severity.WARNING))
                    refused += writer_refusals(page, block, runs, why, claimed)
                    current = None
                continue
            if isinstance(found, EngineCommand):
                use = found.container
                from_page = (compose is not None and use is not None and use.kind == "compose"
                             and use.compose_file not in heredoc_files(block.content)
                             and use.compose_file not in written)
                reasons, sources = _refuse(page, block,
                                           {**(files if from_page else {}), **written}, repo)
                if reasons:
                    refused += reasons
                    first = reasons[0]
                    refused += writer_refusals(page, block, runs, claimed=claimed, why=Refusal(
                        first.line, first.col, first.code, "", first.message.split(": ", 1)[-1]))
                    current = None
                    continue
                if sources:
                    env = {k: v for src in sources for k, v in assigned_values(src)}
                    resolved = parse_server_command(block.content, env, files)
                    found = resolved if resolved.engine else found
                if from_page and compose is not None and pending_file is not None and use:
                    _block, cmd, rid = compose
                    path = (use.compose_file or DEFAULT_FILES[0]).removeprefix("./")
                    if path != DEFAULT_FILES[0]:
                        out[out.index(pending_file)] = _with_path(pending_file, path)
                    pending_file = None
                    source = _block.line
                else:
                    assert isinstance(found, EngineCommand)
                    rid, source = new_id(found, page.path), block.line
                current = rid
                assert isinstance(found, EngineCommand)
                claimed.update((w.line, rid) for w in runs.values())
                out += [Suggestion(page.path, w.line, w.col, "file",
                                   f"(writes {', '.join(heredoc_files(w.content))})",
                                   fence_info(w, "bash", f".runbook-file for={rid}"), rid,
                                   w.end_line, w.line) for w in runs.values()]
                attrs = f"engine={found.engine} gpus={found.gpus}"
                out += [_source_file(page, src, rid) for src in sources]
                out.append(Suggestion(
                    page.path, block.line, block.col, "server", _describe(found),
                    fence_info(block, "bash", f"#{rid} .runbook-server {attrs}"), rid,
                    block.end_line, source, found))
            else:
                target = current or "RUNBOOK-ID"
                kind = found.default_kind or "smoke"
                out.append(Suggestion(
                    page.path, block.line, block.col, "client", f"({found.launcher})",
                    fence_info(block, "bash", f".runbook-client for={target} kind={kind}"),
                    target, block.end_line, block.line, found))
        if pending_file is not None:
            out.append(_up_block(pending_file))
    return ScanResult(out, refused)


_ENGINE_IMAGE = re.compile(r"vllm|sglang|llama", re.I)
_ENGINE_REF = re.compile(r"[\w./-]*(?:vllm|sglang|llama)[\w./-]*:[\w.-]+", re.I)


def _compose_reason(block: CodeBlock, root: Path | None = None, page: str = "") -> str | None:
    """Why a compose file whose services start an engine image cannot be read, or None when
    its images are not engines (a database, a proxy) or it is not readable at all."""
    try:
        services = parse_compose(block.content).services
    except ComposeError:
        return None
    if not any(_ENGINE_IMAGE.search(s.image or "") for s in services) and \
            not _ENGINE_REF.search(block.content):  # nor passes one on (a launcher's IMAGE)
        return None
    inside = next(((s, p) for s in services for p in s.argv[:1]
                   if root is not None and repository_file(root, page, "", p)), None)
    if inside is not None:  # the container sees the repository only through the file's mounts
        return (f"service {inside[0].name} runs {inside[1]}, a script of the repository, inside "
                "its container, which sees the script only through the compose file's mounts: "
                "a run could not give it the copy it planned; run the script from the block")
    runs = "; ".join(f"service {s.name} runs {' '.join(s.argv) or 'its image default'}"
                     for s in services[:2])
    return (f"compose file whose services start no engine the reader knows ({runs}): the "
            "engine, model and port cannot be read from it")


def _source_file(page: Page, src: CodeBlock, rid: str) -> Suggestion:
    """The file suggestion for an earlier block that sets variables runbook `rid` reads; a
    block already marked for other runbooks keeps them (several launches share it)."""
    ids = [*file_targets(src), rid] if is_runbook_block(src) else [rid]
    names = ", ".join(assigned(src))
    return Suggestion(page.path, src.line, src.col, "file", f"(sets {names})",
                      fence_info(src, "bash", f".runbook-file for={','.join(dict.fromkeys(ids))}"),
                      rid, src.end_line, src.line)


def _with_path(s: Suggestion, path: str) -> Suggestion:
    brace = s.brace.replace(f"path={DEFAULT_FILES[0]} ", f"path={path} ")
    return Suggestion(s.path, s.line, s.col, s.role, s.summary, brace, s.runbook, s.end_line,
                      s.source_line, s.command)


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
