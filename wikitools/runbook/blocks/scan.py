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

from wikitools.core.diagnostics import Diagnostic, Severity
from wikitools.pages.fences import format_fence_info
from wikitools.pages.parse import CodeBlock, Page
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
    scan = _Scan(root, set(taken))
    for page in sorted(pages, key=lambda p: p.path):
        _PageScan(scan, page).run()
    return ScanResult(scan.out, scan.refused)


@dataclass
class _Scan:
    """What the scan of the whole wiki gathers."""

    root: Path | None
    used: set[str]  # runbook ids taken
    out: list[Suggestion] = field(default_factory=list)
    refused: list[Diagnostic] = field(default_factory=list)
    declared: dict[str, str] = field(default_factory=dict)  # id → its declared server's attrs

    def new_id(self, cmd: EngineCommand, page: str) -> str:
        base = suggest_id(cmd, page)
        rid, n = base, 2
        while rid in self.used:
            rid = f"{base}-{n}"
            n += 1
        self.used.add(rid)
        return rid


@dataclass
class _Shell:
    """A plain shell block being read: the files it may run and the blocks whose files it runs."""

    block: CodeBlock
    files: dict[str, str]  # what it may run: a compose file shown, repository files, heredocs
    repo: Repository
    runs: dict[int, CodeBlock]  # line → earlier plain block whose written file it runs
    written: dict[str, str]  # the files those blocks write


class _PageScan:
    """The scan of one page, block by block in page order."""

    def __init__(self, scan: _Scan, page: Page) -> None:
        self.scan = scan
        self.page = page
        self.current: str | None = None  # the runbook a following client would belong to
        self.compose: tuple[CodeBlock, EngineCommand, str] | None = None  # last compose file
        self.pending_file: Suggestion | None = None  # its suggestion, until a server uses it
        self.scripts = page_scripts(page)
        self.writers: dict[str, CodeBlock] = {}  # files plain blocks write, for a later block
        self.claimed: dict[int, str] = {}  # line of such a block → the runbook it is a file of
        self.below = compose_below(page)  # the page's one compose file, shown after its `up`

    def run(self) -> None:
        for block in self.page.code_blocks:
            if not block.fenced or self._compose_below(block):
                continue
            if is_runbook_block(block):
                if "runbook-server" in block.attrs.classes and block.attrs.id:
                    self.current = block.attrs.id
                continue
            lang = block_lang(block)
            if block.attrs.brace:
                continue
            if lang in YAML_LANGS and looks_like_compose(block.content):
                self._compose_file(block)
            elif lang in SHELL_LANGS:
                self._shell(block)
        if self.pending_file is not None:
            self.scan.out.append(self._up_block(self.pending_file))

    def _up_block(self, pending: Suggestion) -> Suggestion:
        return _up_block(pending, self.scan.declared.get(pending.runbook))

    def _compose_below(self, block: CodeBlock) -> bool:
        """The page's one compose file shown below the `up` that runs it: the `up` takes it as
        its file block (True: `block` is that file, already taken)."""
        below, page = self.below, self.page
        if below is None:
            return False
        if block is below[0] and self.compose is not None and self.compose[0] is below[0]:
            return True  # an `up` above took it as its file block
        if self.compose is None and block.line < below[0].line and runs_compose(block):
            rid = self.scan.new_id(below[1], page.path)
            self.compose = (below[0], below[1], rid)
            self.pending_file = Suggestion(
                page.path, below[0].line, below[0].col, "file", _describe(below[1]),
                fence_info(below[0], "yaml", f".runbook-file for={rid} path={DEFAULT_FILES[0]}"),
                rid, below[0].end_line, below[0].line, below[1])
            self.scan.out.append(self.pending_file)
        return False

    def _refuse(self, line: int, col: int, code: str, message: str) -> None:
        self.scan.refused.append(Diagnostic(self.page.path, line, col, code,
                                            f"not proposed as a runbook: {message}",
                                            Severity.WARNING))

    def _compose_file(self, block: CodeBlock) -> None:
        scan, page = self.scan, self.page
        cmd = understand_compose(block.content)
        if self.pending_file is not None:
            scan.out.append(self._up_block(self.pending_file))
        proposal = None if cmd else declared_proposal(
            "docker compose up", {DEFAULT_FILES[0]: block.content}, {})
        if proposal is not None and not proposal.missing:
            cmd = proposal.command  # a helper a declared server stands for
        if cmd is None:  # the image decides the flags: a later `up` is not understood
            self.compose, self.pending_file = None, None
            compose_why = compose_reason(block, scan.root, page.path)
            if compose_why:
                self._refuse(block.line, block.col, "RB016", compose_why)
            return
        rid = scan.new_id(cmd, page.path)
        self.compose = (block, cmd, rid)
        if proposal is not None:
            scan.declared[rid] = proposal.attrs()
        self.pending_file = Suggestion(
            page.path, block.line, block.col, "file", _describe(cmd),
            fence_info(block, "yaml", f".runbook-file for={rid} path={DEFAULT_FILES[0]}"), rid,
            block.end_line, block.line, cmd)
        scan.out.append(self.pending_file)
        self.current = rid  # clients that follow measure it, whichever block runs it

    def _shell(self, block: CodeBlock) -> None:
        page = self.page
        files = {ANY_FILE: self.compose[0].content} if self.compose else {}
        repo = read_repository(self.scan.root, page.path, block.content)
        files.update(repo.texts())
        runs = {w.line: w for path, w in self.writers.items() if w is not block
                and runs_file(block.content, path)}
        written = {p: t for w in runs.values() for p, t in heredoc_files(w.content).items()}
        files.update(written)
        owner = next((w for w in runs.values() if w.line in self.claimed), None)
        if owner is not None:
            self._refuse(block.line, block.col, "RB016",
                         f"runs what the block at line {owner.line} writes, which is the file "
                         f"block of runbook #{self.claimed[owner.line]}: a block belongs to one "
                         "runbook; write the file in this block too")
            self.current = None
            return
        shell = _Shell(block, files, repo, runs, written)
        visible = earlier_values(page, block) if "$" in block.content else {}
        found = mentions_launcher(block.content, files, visible)
        if found is None and self.compose is not None and self.compose[2] in self.scan.declared:
            found = as_declared(parse_server_command(block.content, visible, files,
                                                      self.compose[1].engine), self.compose[1],
                                {*repo.texts(), *written, *heredoc_files(block.content)})
        if isinstance(found, ClientCommand) and repo.files:  # a client only by its own text
            found = mentions_launcher(block.content, {k: v for k, v in files.items()
                                                      if k not in repo.texts()}, visible)
        if found is None:
            self._no_launcher(shell, visible)
        elif isinstance(found, EngineCommand):
            self._server(shell, found)
        else:
            target = self.current or "RUNBOOK-ID"
            kind = found.default_kind or "smoke"
            self.scan.out.append(Suggestion(
                page.path, block.line, block.col, "client", f"({found.launcher})",
                fence_info(block, "bash", f".runbook-client for={target} kind={kind}"),
                target, block.end_line, block.line, found))

    def _no_launcher(self, shell: _Shell, visible: dict[str, str]) -> None:
        """A block that starts no engine: one that writes a file a later block runs, a helper
        a declared server is proposed for, or one refused with the reason."""
        page, block, files, repo, runs = self.page, shell.block, shell.files, shell.repo, shell.runs
        own = heredoc_files(block.content) if "<<" in block.content else {}
        if not runs and later_runner(page, block) is not None and \
                not any(runs_file(block.content, p) for p in own):  # runs it elsewhere
            for path in heredoc_files(block.content):  # decided where it is run
                self.writers.setdefault(path, block)
            return
        _f, _env, problems = find_launcher(block.content, files, visible)
        why = (runner_reason(block, runs, files, problems) if runs else
               unproposed_reason(page, block, problems, self.scripts))
        if why is not None and why.reason == "unknown":  # an image read from a
            why = next((r for r in unset_refusals(  # variable the page leaves open
                page, block, visible, files.values())
                if variable_source(page, block, r.variables[0]).line), why)
        proposal = (declared_proposal(block.content, files, visible)
                    if why is not None and why.reason == "opaque" and not repo.files else None)
        if proposal is not None and not proposal.missing:
            self._declared_server(shell, proposal.command, proposal.attrs())
            return
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
            self._refuse(why.line, why.col, why.code, why.message)
            self.scan.refused += writer_refusals(page, block, runs, why, self.claimed)
            self.current = None

    def _declared_server(self, shell: _Shell, cmd: EngineCommand, attrs: str) -> None:
        """The server suggestion for a helper a declared server stands for."""
        scan, page, block = self.scan, self.page, shell.block
        rid = self.current = scan.new_id(cmd, page.path)
        self.claimed.update((w.line, rid) for w in shell.runs.values())
        scan.out += [_writer_file(page, w, rid) for w in shell.runs.values()]
        scan.out.append(Suggestion(
            page.path, block.line, block.col, "server", _describe(cmd),
            fence_info(block, "bash", f"#{rid} .runbook-server {attrs}"),
            rid, block.end_line, block.line, cmd))

    def _server(self, shell: _Shell, found: EngineCommand) -> None:
        """A launch block: refused with the reasons, or a server suggestion with the file
        suggestions of the blocks it needs."""
        scan, page, block, runs = self.scan, self.page, shell.block, shell.runs
        use = found.container
        compose, pending_file = self.compose, self.pending_file
        from_page = (compose is not None and use is not None and use.kind == "compose"
                     and use.compose_file not in heredoc_files(block.content)
                     and use.compose_file not in shell.written)
        reasons, sources = _refuse(page, block,
                                   {**(shell.files if from_page else {}), **shell.written},
                                   shell.repo, found)
        if reasons:
            scan.refused += reasons
            first = reasons[0]
            scan.refused += writer_refusals(page, block, runs, claimed=self.claimed, why=Refusal(
                first.line, first.col, first.code, "", first.message.split(": ", 1)[-1]))
            self.current = None
            return
        if sources:
            env = {k: v for src in sources for k, v in assigned_values(src)}
            resolved = parse_server_command(block.content, env, shell.files)
            found = resolved if resolved.engine else found
        if from_page and compose is not None and pending_file is not None and use:
            _block, _cmd, rid = compose
            path = (use.compose_file or DEFAULT_FILES[0]).removeprefix("./")
            if path != DEFAULT_FILES[0]:
                scan.out[scan.out.index(pending_file)] = _with_path(pending_file, path)
            self.pending_file = None
            source = _block.line
        else:
            rid, source = scan.new_id(found, page.path), block.line
        self.current = rid
        self.claimed.update((w.line, rid) for w in runs.values())
        scan.out += [_writer_file(page, w, rid) for w in runs.values()]
        attrs = scan.declared.get(rid) or f"engine={found.engine} gpus={found.gpus}"
        scan.out += [_source_file(page, src, rid) for src in sources]
        scan.out.append(Suggestion(
            page.path, block.line, block.col, "server", _describe(found),
            fence_info(block, "bash", f"#{rid} .runbook-server {attrs}"), rid,
            block.end_line, source, found))


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
