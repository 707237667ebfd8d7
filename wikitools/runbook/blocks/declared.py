"""The blocks of a runbook as a page declares them: server, clients, files, and the runbook."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from wikitools.core.diagnostics import did_you_mean
from wikitools.core.errors import UsageError
from wikitools.pages.fences import block_hash_info
from wikitools.runbook.blocks.declaration import Declaration
from wikitools.runbook.blocks.sweep import Sweep
from wikitools.runbook.engines.found import OUTSIDE
from wikitools.runbook.engines.types import ClientCommand, EngineCommand, Env


@dataclass(frozen=True, slots=True)
class Requirements:
    gpus: int | None = None  # None: not stated (inferred from tp*pp*dp when planning)
    arch: tuple[str, ...] = ()  # ("sm120",) ; empty = any
    min_mem_gib: float | None = None  # free memory per GPU


@dataclass(frozen=True, slots=True)
class ServerBlock:
    runbook_id: str
    page: str
    line: int  # line of the opening fence
    col: int
    content: str
    info: str  # the fence info string as written
    attrs: tuple[tuple[str, str], ...]  # options as written (key, value)
    requirements: Requirements
    engine: str | None  # attribute or inferred
    port: int  # attribute, else command, else engine default
    ready_timeout: float
    stop_timeout: float
    extra_env: Env
    command: EngineCommand
    # `variants=`: each point starts a server of its own, with its values in the environment
    variants: Sweep = field(default_factory=Sweep)
    declared: Declaration | None = None  # what the block says it serves (model=, tp=)


DEFAULT_MIN_DURATION = 10.0  # seconds: the shortest serving run whose throughput is steady


@dataclass(frozen=True, slots=True)
class ClientBlock:
    runbook_id: str
    name: str
    kind: str  # serving | quality | smoke | kld | probe
    timeout: float
    page: str
    line: int
    col: int
    content: str
    info: str
    command: ClientCommand
    sweep: Sweep = field(default_factory=Sweep)  # `sweep=`: every swept variable; two make a grid
    # kind=kld: the reference capture (a file under runbooks/, another runbook's id, or a
    # variant such as `KV=auto`); None: the first run of the first configuration
    reference: str | None = None
    # kind=serving: the shortest run (seconds) whose throughput counts as steady; a shorter run
    # measures start-up and tail. None: DEFAULT_MIN_DURATION
    min_duration: float | None = None


@dataclass(frozen=True, slots=True)
class FileBlock:
    """A file the runbook's server needs (a compose file), written where the server runs; or,
    with no path, a shell block of the page that writes the launcher or compose file the server
    runs with here-documents (`cat > /tmp/run-x <<'EOF'`), or sets the variables it reads
    (`export IMAGE=…`): the run runs it first."""

    runbook_id: str
    path: str  # relative, POSIX, inside the run's folder; "" for a shell block that writes files
    page: str
    line: int
    col: int
    content: str
    info: str
    writes: tuple[tuple[str, str], ...] = ()  # (path, text) of each here-document it writes
    sets: tuple[tuple[str, str], ...] = ()  # (name, value) of each variable it sets, in order
    # (repository, commit): a file of another repository at a commit (`repo= commit=`),
    # fetched when the run is planned; the block itself shows none of it
    source: tuple[str, str] | None = None


@dataclass(frozen=True, slots=True)
class RepoFile:
    """A file of the wiki's own repository that the server command runs (a script, a compose
    file), read when the runbooks are read: a run executes a copy of this text."""

    spelled: str  # the path as the command names it (normalised: `./x.sh` is `x.sh`)
    path: str  # POSIX, relative to the wiki root
    content: str

    @property
    def sha256(self) -> str:
        return "sha256:" + hashlib.sha256(self.content.encode("utf-8")).hexdigest()


def run_files(blocks: Iterable[FileBlock]) -> dict[str, str]:
    """The files a runbook's server command reads, by the path it uses: the file blocks, and
    the here-documents of the shell blocks that write them."""
    out: dict[str, str] = {}
    for fb in blocks:
        if fb.path:
            out[fb.path] = OUTSIDE if fb.source else fb.content
        out.update(fb.writes)
    return out


def _blocks_digest(blocks: list[tuple[str, str]]) -> str:
    h = hashlib.sha256()
    for info, content in blocks:
        h.update(block_hash_info(info).encode("utf-8"))
        h.update(b"\n")
        h.update(content.encode("utf-8"))
        h.update(b"\0")
    return "sha256:" + h.hexdigest()


@dataclass(frozen=True, slots=True)
class Runbook:
    id: str
    page: str
    server: ServerBlock
    clients: tuple[ClientBlock, ...] = ()
    files: tuple[FileBlock, ...] = ()
    repository: tuple[RepoFile, ...] = ()  # files of the repository the server runs, by path

    @property
    def ref(self) -> str:
        return f"{self.page}#{self.id}"

    @property
    def blocks_hash(self) -> str:
        """"sha256:<hex>" over each block's info string (`block_hash_info`, alike for both fence
        forms) + "\\n" + content + NUL, server first, then clients in page order, then file
        blocks in page order, then each repository file the server runs (`repository <path>`
        + "\\n" + its text + NUL) by path. Any edit to a command, a file or an attribute
        changes it, and so does any edit to a script or compose file of the repository it runs.
        """
        blocks = [(self.server.info, self.server.content)]
        blocks += [(c.info, c.content) for c in sorted(self.clients, key=lambda c: c.line)]
        blocks += [(f.info, f.content) for f in sorted(self.files, key=lambda f: f.line)]
        blocks += [(f"repository {f.path}", f.content)
                   for f in sorted(self.repository, key=lambda f: f.path)]
        return _blocks_digest(blocks)

    @property
    def short_hash(self) -> str:
        return self.blocks_hash.split(":", 1)[1][:8]

    def client(self, name: str) -> ClientBlock:
        for c in self.clients:
            if c.name == name:
                return c
        names = [c.name for c in self.clients]
        hint = did_you_mean(name, names, cutoff=0.5)
        raise UsageError(f"runbook '{self.id}' has no client '{name}'{hint}")


@dataclass(frozen=True, slots=True)
class RunbookSet:
    """Every runbook of a wiki, in (page, line) order."""

    runbooks: tuple[Runbook, ...] = ()
    broken: tuple[tuple[str, str], ...] = ()  # (id, "path:line") of server blocks with errors
    # (id, ("path:line" of the original, of each copy)) of ids that several server blocks share
    duplicates: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def __iter__(self) -> Iterator[Runbook]:
        return iter(self.runbooks)

    def __len__(self) -> int:
        return len(self.runbooks)

    def __contains__(self, runbook_id: object) -> bool:
        return any(r.id == runbook_id for r in self.runbooks)

    def ids(self) -> list[str]:
        return [r.id for r in self.runbooks]

    def get(self, ref: str) -> Runbook:
        """Look up `ID` or `path/to/page.md#ID`; UsageError with a suggestion when unknown."""
        page, _, rid = ref.rpartition("#")
        rid = rid.strip()
        for did, places in self.duplicates:
            if did == rid:
                raise UsageError(f"runbook id '{rid}' is defined {len(places)} times: "
                                 f"{' and '.join(places)}; rename the copy's id "
                                 f"({places[-1]}) before planning or running it")
        for r in self.runbooks:
            if r.id == rid:
                want = page.removeprefix("./")
                if want and want != r.page and not r.page.endswith("/" + want):
                    raise UsageError(f"runbook '{rid}' is on {r.page}, not {page}")
                return r
        for bid, where in self.broken:
            if bid == rid:
                raise UsageError(f"runbook '{rid}' ({where}) has errors; `wiki runbook list` "
                                 "shows them")
        raise UsageError(f"unknown runbook '{rid}'{did_you_mean(rid, self.ids(), cutoff=0.5)}")


# --------------------------------------------------------------------------- preflight


