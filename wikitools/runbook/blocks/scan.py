"""`wiki runbook scan`: plain blocks that hold an engine launcher or a client command and could
become runbook blocks; each finding suggests the attribute list (`bash { #id .runbook-server
… }`). Shell blocks are read as shell (docker run, docker exec, wrappers, here-documents); YAML
blocks with `services:` as compose files. A `docker compose … up` block reads the compose file
shown before it on the page (or the page's one compose file, shown below it). A helper inside an
engine's image gets a declared server proposed (`propose`)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from wikitools.diagnostics import Diagnostic, Severity
from wikitools.fences import format_fence_info
from wikitools.pages import CodeBlock, Page
from wikitools.runbook.blocks.extract import file_targets, is_runbook_block
from wikitools.runbook.blocks.launch_checks import command_refusals
from wikitools.runbook.blocks.outside import outside_file, outside_message
from wikitools.runbook.blocks.page_compose import (
    SHELL_LANGS,
    YAML_LANGS,
    block_lang,
    compose_below,
    runs_compose,
    understand_compose,
)
from wikitools.runbook.blocks.propose import (
    DECLARE_CODE,
    as_declared,
    declare_message,
    declared_proposal,
)
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
    compose_reason,
    read_repository,
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
    looks_like_compose,
)
from wikitools.runbook.engines.launcher import ANY_FILE, find_launcher
from wikitools.runbook.engines.shell import heredoc_files
from wikitools.runbook.engines.types import ClientCommand, EngineCommand


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


def _up_block(pending: Suggestion, declared: str | None = None) -> Suggestion:
    """The server block that runs a compose file the page shows but runs only in its prose
    (`declared`: the attributes of the declared server it stands for)."""
    cmd = pending.command
    assert isinstance(cmd, EngineCommand)
    attrs = declared or f"engine={cmd.engine} gpus={cmd.gpus}"
    return Suggestion(pending.path, pending.line, pending.col, "server", pending.summary,
                      format_fence_info("bash", f"#{pending.runbook} .runbook-server {attrs}"),
                      pending.runbook, pending.end_line, pending.line, cmd,
                      insert="docker compose up -d")


_FOR = re.compile(r"(?<=\bfor=)[\w.,-]+")


def merged_suggestions(suggestions: Sequence[Suggestion]) -> list[Suggestion]:
    """One suggestion per block: a block of variables several runbooks read is a file block
    of each (`for=a,b`)."""
    out: dict[tuple[int, bool], Suggestion] = {}
    for s in suggestions:
        key = (s.line, bool(s.insert))
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
            cmd: EngineCommand) -> tuple[list[Diagnostic], list[CodeBlock]]:
    """Why the server block cannot be proposed (located warnings), or the earlier blocks of the
    page that set the variables it needs (to become its path-less file blocks). `repo`: the
    repository files it runs, whose own variables (a long script's function locals, `read`
    targets) are the script's business, not the page's."""
    shown = {**files, **repo.texts()}
    found = [*(static_refusals(block, shown) or command_refusals(block, cmd, shown)),
             *repository_refusals(block, repo)]
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
    declared: dict[str, str] = {}  # runbook id → the attributes of its declared server

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
        below = compose_below(page)  # the page's one compose file, shown after its `up`
        for block in page.code_blocks:
            if not block.fenced:
                continue
            if below is not None and block is below[0] and compose is not None and \
                    compose[0] is below[0]:
                continue  # an `up` above took it as its file block
            if below is not None and compose is None and block.line < below[0].line and \
                    runs_compose(block):
                rid = new_id(below[1], page.path)
                compose = (below[0], below[1], rid)
                pending_file = Suggestion(
                    page.path, below[0].line, below[0].col, "file", _describe(below[1]),
                    fence_info(below[0], "yaml",
                               f".runbook-file for={rid} path={DEFAULT_FILES[0]}"), rid,
                    below[0].end_line, below[0].line, below[1])
                out.append(pending_file)
            if is_runbook_block(block):
                if "runbook-server" in block.attrs.classes and block.attrs.id:
                    current = block.attrs.id
                continue
            lang = block_lang(block)
            if block.attrs.brace:
                continue
            if lang in YAML_LANGS and looks_like_compose(block.content):
                cmd = understand_compose(block.content)
                if pending_file is not None:
                    out.append(_up_block(pending_file, declared.get(pending_file.runbook)))
                proposal = None if cmd else declared_proposal(
                    "docker compose up", {DEFAULT_FILES[0]: block.content}, {})
                if proposal is not None and not proposal.missing:
                    cmd = proposal.command  # a helper a declared server stands for
                if cmd is None:  # the image decides the flags: a later `up` is not understood
                    compose, pending_file = None, None
                    compose_why = compose_reason(block, root, page.path)
                    if compose_why:
                        refused.append(Diagnostic(page.path, block.line, block.col, "RB016",
                                                  f"not proposed as a runbook: {compose_why}",
                                                  Severity.WARNING))
                    continue
                rid = new_id(cmd, page.path)
                compose = (block, cmd, rid)
                if proposal is not None:
                    declared[rid] = proposal.attrs()
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
            if found is None and compose is not None and compose[2] in declared:
                found = as_declared(parse_server_command(block.content, visible, files,
                                                          compose[1].engine), compose[1],
                                    {*repo.texts(), *written, *heredoc_files(block.content)})
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
                proposal = (declared_proposal(block.content, files, visible)
                            if why is not None and why.reason == "opaque" and not repo.files
                            else None)
                if proposal is not None and not proposal.missing:
                    rid = current = new_id(proposal.command, page.path)
                    claimed.update((w.line, rid) for w in runs.values())
                    out += [_writer_file(page, w, rid) for w in runs.values()]
                    out.append(Suggestion(
                        page.path, block.line, block.col, "server", _describe(
                            proposal.command), fence_info(
                            block, "bash", f"#{rid} .runbook-server {proposal.attrs()}"),
                        rid, block.end_line, block.line, proposal.command))
                    continue
                outside = outside_file(page, block) if why is not None and any(
                    "needs its compose file" in p for p in problems) else None
                if outside is not None and why is not None:
                    why = replace(why, message=outside_message(outside))
                if proposal is not None and why is not None:
                    why = replace(why, code=DECLARE_CODE, message=declare_message(
                        proposal, why.message, suggest_id(proposal.command, page.path)))
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
                                           {**(files if from_page else {}), **written}, repo,
                                           found)
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
                out += [_writer_file(page, w, rid) for w in runs.values()]
                attrs = declared.get(rid) or f"engine={found.engine} gpus={found.gpus}"
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
            out.append(_up_block(pending_file, declared.get(pending_file.runbook)))
    return ScanResult(out, refused)


def _writer_file(page: Page, w: CodeBlock, rid: str) -> Suggestion:
    """The file suggestion for a block that writes the launcher runbook `rid` runs."""
    return Suggestion(page.path, w.line, w.col, "file",
                      f"(writes {', '.join(heredoc_files(w.content))})",
                      fence_info(w, "bash", f".runbook-file for={rid}"), rid, w.end_line, w.line)


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
