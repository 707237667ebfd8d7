"""Runbook blocks from parsed pages: `bash { #id .runbook-server … }`,
`bash { .runbook-client for=id … }` and `yaml { .runbook-file for=id path=… }` (a file the
server needs, such as its compose file) fences (the older `{ .bash … }` form is read too),
validated with located RB diagnostics."""

from __future__ import annotations

import math
import re
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from wikitools.core.diagnostics import Diagnostic, did_you_mean
from wikitools.pages.parse import CodeBlock, Page
from wikitools.runbook.blocks.attributes import Ctx, number, options, parse_env, sweep_value
from wikitools.runbook.blocks.declaration import (
    DECLARATION_ATTRS,
    declared_engine,
    read_declaration,
)
from wikitools.runbook.blocks.declared import (
    ClientBlock,
    FileBlock,
    Requirements,
    Runbook,
    RunbookSet,
    ServerBlock,
    run_files,
)
from wikitools.runbook.blocks.flagcheck import flag_findings
from wikitools.runbook.blocks.launch_checks import command_refusals
from wikitools.runbook.blocks.literals import reserved_refusals, variables_refusals
from wikitools.runbook.blocks.mistakes import mistakes
from wikitools.runbook.blocks.outside import pinned_source
from wikitools.runbook.blocks.refusals import static_refusals
from wikitools.runbook.blocks.repository import Repository, read_repository, repository_refusals
from wikitools.runbook.blocks.sources import assigned_values
from wikitools.runbook.blocks.sweep import Sweep
from wikitools.runbook.engines import catalog as engines
from wikitools.runbook.engines.command import parse_client_command, parse_server_command
from wikitools.runbook.engines.shell import heredoc_files
from wikitools.runbook.engines.types import EngineCommand

SERVER_CLASS = "runbook-server"
CLIENT_CLASS = "runbook-client"
FILE_CLASS = "runbook-file"
ROLES = (SERVER_CLASS, CLIENT_CLASS, FILE_CLASS)
FILE_ATTRS = ("for", "path", "repo", "commit", "title", "linenums", "hl_lines")
# How the site shows a block (pymdownx.superfences options); the runbook itself ignores them.
DISPLAY_ATTRS = ("title", "linenums", "hl_lines")
SERVER_ATTRS = ("engine", "gpus", "arch", "min_mem_gib", "port", "ready_timeout", "stop_timeout",
                "env", "variants", *DECLARATION_ATTRS, *DISPLAY_ATTRS)
MAX_VARIANTS = 32  # each variant starts a server of its own
CLIENT_ATTRS = ("for", "name", "kind", "sweep", "timeout", "reference", "min_duration",
                *DISPLAY_ATTRS)
KINDS = ("serving", "quality", "smoke", "kld", "probe")
DEFAULT_READY_TIMEOUT = 900.0
DEFAULT_STOP_TIMEOUT = 20.0
DEFAULT_CLIENT_TIMEOUT = 1800.0

SHELL_LANGS = ("bash", "sh", "shell", "zsh", "console", "shell-session")

ID_RE = re.compile(r"[a-z0-9][a-z0-9._-]*")
NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
ARCH_RE = re.compile(r"sm\d{2,3}[af]?")


def is_runbook_block(block: CodeBlock) -> bool:
    """A fence that carries a runbook role (or tries to: a malformed brace list naming one)."""
    attrs = block.attrs
    if not attrs.brace:
        return False
    if attrs.error:
        return "runbook" in block.info
    return any(c.startswith("runbook") for c in attrs.classes)


def file_targets(block: CodeBlock) -> list[str]:
    """The runbook ids a `.runbook-file` block's for= names (`for=a,b`: a block of variables
    several launches of the page read)."""
    value = next((v for k, v, _c in block.attrs.options if k == "for"), "")
    return [t for t in value.split(",") if t]


def _file(ctx: Ctx) -> list[FileBlock]:
    opts = options(ctx, FILE_ATTRS, "runbook-file")
    if "for" not in opts or not opts["for"][0]:
        ctx.error("RB002", "runbook-file block without for= (name the runbook whose server "
                  "needs it)", ctx.col_of("." + FILE_CLASS))
        return []
    block = ctx.block
    targets = file_targets(block)
    if "path" not in opts and (block.attrs.lang or "").lower() in SHELL_LANGS:
        if ctx.refuse(variables_refusals(block)):
            return []
        writes = heredoc_files(block.content) if "<<" in block.content else {}
        sets = tuple(assigned_values(block))
        if not writes and not sets:
            ctx.error("RB004", "shell runbook-file block without path= that neither writes a "
                      "file with a here-document (cat > FILE <<'EOF' … EOF) nor sets a "
                      "variable (export NAME=value)", ctx.col_of("." + FILE_CLASS))
            return []
        return [FileBlock(runbook_id=rid, path="", page=ctx.page.path, line=block.line,
                          col=block.col, content=block.content, info=block.info,
                          writes=tuple(sorted(writes.items())), sets=sets) for rid in targets]
    if len(targets) > 1:
        ctx.error("RB004", f"bad value for for: '{opts['for'][0]}' (a file with path= belongs "
                  "to one runbook)", opts["for"][1])
        return []
    if "path" not in opts or not opts["path"][0]:
        ctx.error("RB004", "runbook-file block without path= (the file name the server "
                  "command uses, e.g. path=compose.yaml)", ctx.col_of("." + FILE_CLASS))
        return []
    path, col = opts["path"]
    if path.startswith("/") or "\\" in path or any(p in ("", ".", "..") for p in path.split("/")):
        ctx.error("RB004", f"bad value for path: '{path}' (a relative file name inside the run's "
                  "folder, without '..')", col)
        return []
    source, ok = pinned_source(opts, block.content, ctx.error)
    return [] if not ok else [FileBlock(
        runbook_id=opts["for"][0], path=path, page=ctx.page.path, line=block.line, col=block.col,
        content=block.content, info=block.info, source=source)]


def _server(ctx: Ctx, files: dict[str, str], page_env: dict[str, str], repo: Repository,
            ) -> ServerBlock | None:
    """The server block; `page_env`: what the page's blocks of variables that run first set
    (to read `$IMAGE`, `--port ${PORT}` with); `repo`: the repository files it runs."""
    block = ctx.block
    rid = block.attrs.id
    opts = options(ctx, SERVER_ATTRS, "runbook-server")
    if rid is None:
        ctx.error("RB005", "runbook-server block without an #id (add `#my-runbook-id` to the "
                  "attribute list)", ctx.col_of("." + SERVER_CLASS))
        return None
    if not ID_RE.fullmatch(rid):
        ctx.error("RB004", f"bad runbook id '#{rid}' (lower-case letters, digits, '.', '_', '-'; "
                  "starting with a letter or digit)", ctx.col_of("#" + rid))
    env = parse_env(ctx, *opts["env"]) if "env" in opts else ()
    cmd = parse_server_command(block.content, {**page_env, **dict(env)},
                               {**files, **repo.texts()}, declared_engine(opts))
    ctx.diags.extend(flag_findings(ctx.page, block, cmd))
    cmd, declaration = read_declaration(opts, cmd, ctx.error)
    engine_attr = _engine_attr(ctx, opts, cmd)
    _command_refusals(ctx, cmd, {**files, **repo.texts()}, repo)
    gpus = None
    if "gpus" in opts:
        n = number(ctx, "gpus", *opts["gpus"], integer=True)
        gpus = int(n) if n is not None else None
    arch = _arch(ctx, opts)
    min_mem = number(ctx, "min_mem_gib", *opts["min_mem_gib"]) if "min_mem_gib" in opts else None
    port = _port(ctx, opts)
    ready = (number(ctx, "ready_timeout", *opts["ready_timeout"], allow_zero=False)
             if "ready_timeout" in opts else None)
    stop = (number(ctx, "stop_timeout", *opts["stop_timeout"])
            if "stop_timeout" in opts else None)
    variants = _variants(ctx, opts) if "variants" in opts else Sweep()
    engine = engine_attr or cmd.engine
    return ServerBlock(
        runbook_id=rid,
        page=ctx.page.path,
        line=block.line,
        col=block.col,
        content=block.content,
        info=block.info,
        attrs=tuple((k, v) for k, v, _ in block.attrs.options),
        requirements=Requirements(gpus=gpus, arch=arch, min_mem_gib=min_mem),
        engine=engine,
        port=port or cmd.published_port or cmd.port or engines.default_port(engine),
        ready_timeout=ready if ready is not None else DEFAULT_READY_TIMEOUT,
        stop_timeout=stop if stop is not None else DEFAULT_STOP_TIMEOUT,
        extra_env=env,
        command=cmd,
        variants=variants,
        declared=declaration,
    )


Options = dict[str, tuple[str, int]]


def _engine_attr(ctx: Ctx, opts: Options, cmd: EngineCommand) -> str | None:
    """The engine= attribute when it names a known engine (RB004 else; RB010 when the command
    starts another)."""
    if "engine" not in opts:
        return None
    value, col = opts["engine"]
    if value not in engines.ENGINES:
        ctx.error("RB004", f"bad value for engine: '{value}' (expected "
                  f"{engines.engine_names()})"
                  f"{did_you_mean(value, engines.ENGINES)}", col)
        return None
    if cmd.engine and cmd.engine != value:
        ctx.error("RB010", f"engine={value} but the command starts {cmd.engine} "
                  f"({cmd.launcher})", col)
    return value


def _command_refusals(ctx: Ctx, cmd: EngineCommand, texts: dict[str, str],
                      repo: Repository) -> None:
    """Why the server command cannot be run: not understood (RB007), a container the run
    could not stop (RB011), or what the static checks refuse."""
    block = ctx.block
    if cmd.engine is None and repo.unreadable:
        ctx.refuse(repository_refusals(block, repo))
    elif cmd.engine is None:
        why = repo.missing_reason() or "; ".join(cmd.problems) or "no engine launcher found"
        ctx.error("RB007", f"server command not understood: {why}", line=block.content_line,
                  col=1)
    elif cmd.container is not None and cmd.container.kind == "exec":
        ctx.error("RB011", f"the server starts inside a running container "
                  f"({cmd.container.name}) that the run does not start, so it could not stop it "
                  "or check that it is gone; start it with docker run or docker compose",
                  line=block.content_line, col=1)
    elif cmd.container is not None and cmd.container.kind == "run" and \
            not cmd.container.top_level:
        ctx.error("RB011", "docker run inside a shell string: the run could not learn the "
                  "container's ID to stop it; write docker run as a command of its own",
                  line=block.content_line, col=1)
    else:
        ctx.refuse([*(static_refusals(block, texts) or command_refusals(block, cmd, texts)),
                    *repository_refusals(block, repo)])


def _arch(ctx: Ctx, opts: Options) -> tuple[str, ...]:
    if "arch" not in opts:
        return ()
    value, col = opts["arch"]
    items = tuple(a.strip().lower() for a in value.split(",") if a.strip())
    bad = [a for a in items if not ARCH_RE.fullmatch(a)]
    if bad or not items:
        ctx.error("RB004", f"bad value for arch: '{value}' (expected smXY[,smXY…], e.g. "
                  "sm120 for compute capability 12.0)", col)
    return items


def _port(ctx: Ctx, opts: Options) -> int | None:
    if "port" not in opts:
        return None
    value, col = opts["port"]
    n = number(ctx, "port", value, col, integer=True)
    if n is not None and not 1 <= n <= 65535:
        ctx.error("RB004", f"bad value for port: '{value}' (expected 1-65535)", col)
        return None
    return int(n) if n is not None else None


def _variants(ctx: Ctx, opts: Options) -> Sweep:
    """The variants= sweep: at most MAX_VARIANTS (each starts a server of its own)."""
    variants = sweep_value(ctx, "variants", *opts["variants"], max_vars=None)
    if len(variants) > MAX_VARIANTS:
        ctx.error("RB004", f"bad value for variants: {len(variants)} variants (at most "
                  f"{MAX_VARIANTS}: each starts a server of its own)", opts["variants"][1])
        return Sweep()
    return variants


@dataclass(slots=True)
class _PendingClient:
    ctx: Ctx
    for_id: str
    for_col: int
    name: str | None
    name_col: int
    kind: str | None
    timeout: float
    sweep: Sweep = field(default_factory=Sweep)
    reference: str | None = None
    min_duration: float | None = None


def _client(ctx: Ctx) -> _PendingClient | None:
    opts = options(ctx, CLIENT_ATTRS, "runbook-client")
    if "for" not in opts or not opts["for"][0]:
        ctx.error("RB002", "runbook-client block without for= (name the runbook it runs "
                  "against)", ctx.col_of("." + CLIENT_CLASS))
        return None
    for_id, for_col = opts["for"]
    name, name_col = opts.get("name", (None, ctx.block.col))
    if name is not None and not NAME_RE.fullmatch(name):
        ctx.error("RB004", f"bad value for name: '{name}' (letters, digits, '.', '_', '-')",
                  name_col)
    kind = None
    if "kind" in opts:
        value, col = opts["kind"]
        if value not in KINDS:
            ctx.error("RB004", f"bad value for kind: '{value}' (expected serving, quality, "
                      f"smoke, kld or probe){did_you_mean(value, KINDS)}", col)
        else:
            kind = value
    sweep = sweep_value(ctx, "sweep", *opts["sweep"], max_vars=2) if "sweep" in opts else Sweep()
    timeout = DEFAULT_CLIENT_TIMEOUT
    if "timeout" in opts:
        t = number(ctx, "timeout", *opts["timeout"], allow_zero=False)
        timeout = t if t is not None else timeout
    reference = opts["reference"][0] if "reference" in opts else None
    if reference is not None and kind not in (None, "kld"):
        ctx.error("RB004", "reference= belongs to kind=kld clients", opts["reference"][1])
    least = (number(ctx, "min_duration", *opts["min_duration"], allow_zero=False)
             if "min_duration" in opts else None)
    if least is not None and kind not in (None, "serving"):
        ctx.error("RB004", "min_duration= belongs to serving clients", opts["min_duration"][1])
    return _PendingClient(ctx, for_id, for_col, name, name_col, kind, timeout, sweep, reference,
                          least)


# Which of several server blocks sharing a runbook id is the original and which are copies: the
# block git saw first is the original; a block git has not seen (a copy not yet committed) is a
# copy; without history to tell, page order decides.


def _introduced(root: Path, path: str, rid: str) -> float:
    """When git first saw `#rid` in the page (commit time); infinity when it never did (a copy
    not yet committed) or the wiki is not in a git repository."""
    try:
        proc = subprocess.run(
            ["git", "-C", str(root), "log", "--format=%ct", "--reverse", "-S", f"#{rid}",
             "--", path], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return math.inf
    first = proc.stdout.split()
    return float(first[0]) if proc.returncode == 0 and first else math.inf


def find_originals(places: Mapping[str, Sequence[tuple[str, int]]], root: Path | None,
                   ) -> dict[str, tuple[str, int]]:
    """For each id that several server blocks share (`places`: id → (page path, line) of each
    block), where the original stands."""
    out = {}
    for rid, where in places.items():
        if len(where) < 2:
            continue
        def age(place: tuple[str, int], rid: str = rid) -> tuple[float, str, int]:
            when = _introduced(root, place[0], rid) if root is not None else math.inf
            return (when, place[0], place[1])
        out[rid] = min(where, key=age)
    return out


def _server_ids(pages: list[Page]) -> dict[str, list[tuple[str, int]]]:
    """Each id of a server block and where it stands (page path, line), in page order."""
    out: dict[str, list[tuple[str, int]]] = {}
    for page in pages:
        for block in page.code_blocks:
            if is_runbook_block(block) and not block.attrs.error and block.attrs.id and \
                    SERVER_CLASS in block.attrs.classes:
                out.setdefault(block.attrs.id, []).append((page.path, block.line))
    return out


FileBlocks = dict[str, list[tuple[FileBlock, Ctx]]]


@dataclass(slots=True)
class _Found:
    """What the pass over the runbook blocks has found so far."""

    diags: list[Diagnostic]
    originals: dict[str, tuple[str, int]]  # where the original of each shared id stands
    files: FileBlocks  # the file blocks of each runbook id, with their context
    servers: dict[str, ServerBlock] = field(default_factory=dict)
    repository: dict[str, Repository] = field(default_factory=dict)
    broken: dict[str, str] = field(default_factory=dict)  # ids of servers with errors → place
    pending: list[_PendingClient] = field(default_factory=list)
    duplicates: dict[str, list[str]] = field(default_factory=dict)
    refused: dict[str, str] = field(default_factory=dict)  # id → a file block of it with errors

    def known(self, rid: str) -> bool:
        return rid in self.servers or rid in self.broken

    def no_runbook(self, ctx: Ctx, rid: str, col: int) -> None:
        ctx.error("RB002", f"for={rid} names no runbook"
                  f"{did_you_mean(rid, list(self.servers) + list(self.broken))}", col)


def extract_runbooks(pages: Iterable[Page], root: Path | None,
                     ) -> tuple[RunbookSet, list[Diagnostic]]:
    """Every runbook of the wiki and the RB diagnostics of all runbook blocks. `root`: the
    wiki's folder (None: pages of no folder), passed by every reader so all see one hash: the
    scripts and compose files of the repository that server blocks run are read there, and its
    git history tells an original server block from its copy (RB001 blames the copy)."""
    diags: list[Diagnostic] = []
    pages = sorted(pages, key=lambda p: p.path)
    originals = find_originals(_server_ids(pages), root)
    refused: dict[str, str] = {}
    found = _Found(diags, originals, _file_blocks(pages, diags, refused),
                   duplicates={rid: [f"{p}:{n}"] for rid, (p, n) in originals.items()},
                   refused=refused)
    for page in pages:
        for block in page.code_blocks:
            if is_runbook_block(block):
                _read_block(found, Ctx(page, block, diags), root)
    clients = _clients(found)
    own_files = _own_files(found)
    servers, repository = found.servers, found.repository
    runbooks = tuple(
        Runbook(id=rid, page=s.page, server=s, clients=tuple(clients.get(rid, ())),
                files=tuple(own_files.get(rid, ())), repository=repository[rid].files)
        for rid, s in sorted(servers.items(), key=lambda kv: (kv[1].page, kv[1].line))
    )
    duplicates = tuple((rid, tuple(places)) for rid, places in sorted(found.duplicates.items()))
    return (RunbookSet(runbooks, tuple(sorted(found.broken.items())), duplicates),
            [*diags, *mistakes(runbooks)])


def _file_blocks(pages: list[Page], diags: list[Diagnostic], refused: dict[str, str],
                 ) -> FileBlocks:
    """The file blocks of each runbook id (read before the servers that run them); `refused`
    gets, for each runbook id, where a file block of it with errors stands."""
    files: FileBlocks = {}
    for page in pages:
        for block in page.code_blocks:
            if is_runbook_block(block) and not block.attrs.error and \
                    block.attrs.classes.count(FILE_CLASS) and not any(
                        c in block.attrs.classes for c in (SERVER_CLASS, CLIENT_CLASS)):
                ctx = Ctx(page, block, diags)
                for fb in _file(ctx):
                    files.setdefault(fb.runbook_id, []).append((fb, ctx))
                if ctx.failed:
                    for target in file_targets(block):
                        refused.setdefault(target, f"{page.path}:{block.line}")
    return files


def _role(ctx: Ctx) -> str | None:
    """The block's one runbook role; None (said why) for a malformed attribute list, an
    unknown or second role, or no role."""
    attrs = ctx.block.attrs
    if attrs.error:
        ctx.error("RB006", f"malformed attribute list: {attrs.error}", ctx.col_of("{"))
        return None
    roles = [c for c in attrs.classes if c.startswith("runbook")]
    for cls in (c for c in roles if c not in ROLES):
        ctx.error("RB003", f"unknown runbook class '.{cls}'"
                  f"{did_you_mean('.' + cls, ['.' + r for r in ROLES])}",
                  ctx.col_of("." + cls))
    known = [c for c in roles if c in ROLES]
    if len(set(known)) > 1:
        ctx.error("RB006", "a block is one of .runbook-server, .runbook-client or "
                  ".runbook-file", ctx.col_of("." + known[-1]))
        return None
    return known[0] if known else None


def _read_block(found: _Found, ctx: Ctx, root: Path | None) -> None:
    block = ctx.block
    role = _role(ctx)
    rid = block.attrs.id
    if role is None:
        if rid and not block.attrs.error and not _several_roles(block):
            found.broken.setdefault(rid, f"{ctx.page.path}:{block.line}")
        return
    if role == FILE_CLASS:
        return  # read before (_file_blocks)
    ctx.refuse(reserved_refusals(block))
    if role == SERVER_CLASS:
        _read_server(found, ctx, root)
    else:
        client = _client(ctx)
        if client is not None:
            found.pending.append(client)


def _several_roles(block: CodeBlock) -> bool:
    return len({c for c in block.attrs.classes if c in ROLES}) > 1


def _read_server(found: _Found, ctx: Ctx, root: Path | None) -> None:
    page, block = ctx.page, ctx.block
    rid = block.attrs.id
    mine = [fb for fb, _ in found.files.get(rid or "", [])]
    repo = read_repository(root, page.path, block.content)
    server = _server(ctx, run_files(mine),
                     {k: v for fb in sorted(mine, key=lambda f: f.line) for k, v in fb.sets}, repo)
    if rid is None:
        return
    here = f"{page.path}:{block.line}"
    if rid in found.originals and found.originals[rid] != (page.path, block.line):
        orig = found.duplicates[rid][0]
        found.duplicates[rid].append(here)
        ctx.error("RB001", f"duplicate runbook id '{rid}' (first defined at {orig})",
                  ctx.col_of("#" + rid))
        return
    if rid in found.refused:
        ctx.error("RB004", f"the runbook's file block at {found.refused[rid]} has errors "
                  "(reported there): the run would start without it", ctx.col_of("#" + rid))
    if server is None or ctx.failed:
        found.broken[rid] = here
    else:
        found.servers[rid] = server
        found.repository[rid] = repo


def _clients(found: _Found) -> dict[str, list[ClientBlock]]:
    """The client blocks of each runbook: named (client1, client2, … when unnamed), each name
    once, each command understood."""
    clients: dict[str, list[ClientBlock]] = {}
    names: dict[str, dict[str, str]] = {}
    counters: dict[str, int] = {}
    for pc in found.pending:
        ctx = pc.ctx
        rid = pc.for_id
        if not found.known(rid):
            found.no_runbook(ctx, rid, pc.for_col)
            continue
        counters[rid] = counters.get(rid, 0) + 1
        name = pc.name or f"client{counters[rid]}"
        taken = names.setdefault(rid, {})
        if name in taken:
            ctx.error("RB008", f"duplicate client name '{name}' in runbook '{rid}' (first at "
                      f"{taken[name]})", pc.name_col)
            continue
        taken[name] = f"{ctx.page.path}:{ctx.block.line}"
        cmd = parse_client_command(ctx.block.content)
        kind = pc.kind or cmd.default_kind
        if kind is None:
            why = "; ".join(cmd.problems) or "no client command found"
            ctx.error("RB007", f"client command not understood: {why}; name its kind with "
                      "kind=serving|quality|smoke|kld|probe", line=ctx.block.content_line, col=1)
            continue
        if ctx.failed or rid not in found.servers:
            continue
        clients.setdefault(rid, []).append(ClientBlock(
            runbook_id=rid, name=name, kind=kind,
            sweep=pc.sweep, timeout=pc.timeout, page=ctx.page.path,
            line=ctx.block.line, col=ctx.block.col, content=ctx.block.content,
            info=ctx.block.info, command=cmd, reference=pc.reference,
            min_duration=pc.min_duration))
    return clients


def _own_files(found: _Found) -> dict[str, list[FileBlock]]:
    """The file blocks of each runbook, each path once."""
    own_files: dict[str, list[FileBlock]] = {}
    for rid, items in found.files.items():
        seen: dict[str, str] = {}
        for fb, ctx in items:
            if not found.known(rid):
                found.no_runbook(ctx, rid, ctx.col_of("for="))
                continue
            if fb.path and fb.path in seen:
                ctx.error("RB008", f"file '{fb.path}' given twice for runbook '{rid}' (first at "
                          f"{seen[fb.path]})", ctx.col_of("path="))
                continue
            seen[fb.path] = f"{fb.page}:{fb.line}"
            own_files.setdefault(rid, []).append(fb)
    return own_files


def load_runbooks(root: Path) -> tuple[RunbookSet, list[Diagnostic], list[Page]]:
    """Read the wiki at `root` (wiki.yml honoured) and extract its runbooks; the diagnostics
    include the page files left unread (PG004, PG005), as `wiki check` reports them."""
    from wikitools.core.config import list_pages, load_config
    from wikitools.pages.load import load_pages

    config = load_config(root)
    files = list_pages(config)
    pages = load_pages(config, list(files.paths))
    runbooks, diags = extract_runbooks(pages, config.root)
    return runbooks, [*files.problems, *diags], pages
