"""Data model for executable runbooks: what a block's command means, the blocks themselves, the
preflight verdict and the plan the executor carries out. Everything here is plain frozen data;
parsing lives in `command`/`extract`, decisions in `preflight`/`plan`."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from wikitools.diagnostics import did_you_mean
from wikitools.errors import UsageError
from wikitools.runbook import engines

Env = tuple[tuple[str, str], ...]  # ordered (name, value) pairs


# --------------------------------------------------------------------------- commands


@dataclass(frozen=True, slots=True)
class ContainerUse:
    """How a server block runs its container, as written on the page."""

    kind: str  # run (docker run) | compose (docker compose up) | exec (docker exec: not ours)
    detached: bool = False  # docker run -d / compose up -d
    remove: bool = False  # docker run --rm
    name: str | None = None  # --name / container_name, as written (may hold ${VAR})
    compose_program: tuple[str, ...] = ()  # ("docker", "compose") or ("docker-compose",)
    compose_args: tuple[str, ...] = ()  # global options as written, e.g. ("-f", "x.yaml")
    compose_file: str | None = None  # the file the service was read from
    service: str | None = None  # the compose service holding the launcher
    project: str | None = None  # -p / top-level name:, when the page sets one
    top_level: bool = True  # the docker command is a top-level command of the block


@dataclass(frozen=True, slots=True)
class EngineCommand:
    """A server launch command as understood from the block text.

    `text` is the block content exactly as on the page (it is what runs, through `bash -c`);
    everything else is understanding for checks, plans and tables.
    """

    text: str
    env: Env = ()  # `export K=V` lines, `K=V cmd` prefixes and `docker run -e K=V`, page order
    argv: tuple[str, ...] = ()  # the engine command after unwrapping docker / bash -c
    engine: str | None = None  # an engine of `engines.ENGINES`; None: no launcher found
    launcher: str | None = None  # the launcher as spelled in the block
    model: str | None = None
    tp: int | None = None
    pp: int | None = None
    dp: int | None = None
    dcp: int | None = None
    ep: bool = False
    port: int | None = None
    host: str | None = None
    quantization: str | None = None
    kv_cache_dtype: str | None = None
    speculative: dict[str, Any] | None = field(default=None, hash=False, compare=False)
    image: str | None = None
    docker: bool = False
    docker_gpus: str | None = None
    docker_env: Env = ()  # only the container's part of `env` (`-e`, compose `environment:`)
    container: ContainerUse | None = None  # how the block starts its container, when it does
    wrappers: tuple[str, ...] = ()  # outermost first, e.g. ("docker run", "bash -c")
    flags: tuple[tuple[str, str | None], ...] = ()  # other flags, canonical long names, in order
    problems: tuple[str, ...] = ()  # things not understood (unbalanced quote, bad JSON, ...)

    def env_dict(self) -> dict[str, str]:
        return dict(self.env)

    def flag(self, name: str) -> str | None:
        """Value of an extra flag by canonical name (`--max-model-len`); None if absent."""
        for key, value in self.flags:
            if key == name:
                return value
        return None

    def has_flag(self, name: str) -> bool:
        return any(key == name for key, _ in self.flags)


@dataclass(frozen=True, slots=True)
class ClientCommand:
    """A client command (benchmark, evaluation or smoke request) as understood."""

    text: str
    env: Env = ()
    argv: tuple[str, ...] = ()
    tool: str | None = None  # a tool of `engines.CLIENT_TOOLS`; None: no client found
    launcher: str | None = None  # the launcher as spelled in the block
    model: str | None = None
    base_url: str | None = None
    host: str | None = None
    port: int | None = None
    backend: str | None = None
    dataset: str | None = None
    num_prompts: str | None = None  # strings: may be "${N:-200}"
    max_concurrency: str | None = None
    request_rate: str | None = None
    url: str | None = None  # the target of a smoke request
    docker: bool = False
    wrappers: tuple[str, ...] = ()
    flags: tuple[tuple[str, str | None], ...] = ()
    problems: tuple[str, ...] = ()

    @property
    def default_kind(self) -> str | None:
        tool = engines.client_tool(self.tool)
        return tool.default_kind if tool else None

    @property
    def parser(self) -> str:
        """How the executor reads the result: the tool's name when it writes a result file
        the executor reads, else "text"."""
        tool = engines.client_tool(self.tool)
        return tool.name if tool and tool.result.kind != "text" else "text"


# --------------------------------------------------------------------------- blocks


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


@dataclass(frozen=True, slots=True)
class ClientBlock:
    runbook_id: str
    name: str
    kind: str  # serving | quality | smoke
    sweep_var: str | None  # the first swept variable
    sweep_values: tuple[str, ...]
    timeout: float
    page: str
    line: int
    col: int
    content: str
    info: str
    command: ClientCommand
    sweep: tuple[tuple[str, tuple[str, ...]], ...] = ()  # every swept variable; two: a grid

    @property
    def sweep_vars(self) -> tuple[str, ...]:
        if self.sweep:
            return tuple(var for var, _ in self.sweep)
        return (self.sweep_var,) if self.sweep_var else ()

    def sweep_points(self) -> tuple[tuple[tuple[str, str], ...], ...]:
        """Each point's (variable, value) pairs, the first variable outermost; one empty point
        when nothing is swept."""
        axes = self.sweep
        if not axes and self.sweep_var:
            axes = ((self.sweep_var, self.sweep_values),)
        points: list[tuple[tuple[str, str], ...]] = [()]
        for var, values in axes:
            points = [(*p, (var, v)) for p in points for v in values]
        return tuple(points)


@dataclass(frozen=True, slots=True)
class FileBlock:
    """A file the runbook's server needs (a compose file), written where the server runs."""

    runbook_id: str
    path: str  # relative, POSIX, inside the run's folder
    page: str
    line: int
    col: int
    content: str
    info: str


def _blocks_digest(blocks: list[tuple[str, str]]) -> str:
    h = hashlib.sha256()
    for info, content in blocks:
        h.update(info.strip().encode("utf-8"))
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

    @property
    def ref(self) -> str:
        return f"{self.page}#{self.id}"

    @property
    def blocks_hash(self) -> str:
        """"sha256:<hex>" over each block's info string (stripped) + "\\n" + content + NUL,
        server first, then clients in page order, then file blocks in page order. Any edit to a
        command, a file or an attribute changes it."""
        blocks = [(self.server.info, self.server.content)]
        blocks += [(c.info, c.content) for c in sorted(self.clients, key=lambda c: c.line)]
        blocks += [(f.info, f.content) for f in sorted(self.files, key=lambda f: f.line)]
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


@dataclass(frozen=True, slots=True)
class GpuInfo:
    index: int
    name: str
    compute_capability: str  # "12.0"
    memory_total_mib: int
    memory_used_mib: int
    memory_free_mib: int
    driver: str
    pci_bus_id: str
    uuid: str

    @property
    def arch(self) -> str:
        """"sm120" for compute capability 12.0, "sm90" for 9.0."""
        major, _, minor = self.compute_capability.partition(".")
        return f"sm{major}{minor or '0'}"


@dataclass(frozen=True, slots=True)
class Check:
    name: str  # nvidia-smi | gpu-count | arch | memory | busy | port | docker | env | ...
    status: str  # ok | warn | fail
    message: str


@dataclass(frozen=True, slots=True)
class Verdict:
    checks: tuple[Check, ...]
    selected_gpus: tuple[int, ...]  # physical indices for CUDA_VISIBLE_DEVICES
    host: dict[str, Any] = field(hash=False, compare=False)  # the record's "host" object
    forced: bool = False

    @property
    def ok(self) -> bool:
        return all(c.status != "fail" for c in self.checks)

    @property
    def failures(self) -> tuple[Check, ...]:
        return tuple(c for c in self.checks if c.status == "fail")

    @property
    def message(self) -> str | None:
        """One line: why it was refused (None when ok)."""
        fails = self.failures
        return "; ".join(c.message for c in fails) if fails else None


# --------------------------------------------------------------------------- plan


@dataclass(frozen=True, slots=True)
class PlannedContainer:
    """What the executor needs to follow and stop the run's own containers."""

    kind: str  # run | compose
    detached: bool = False
    remove: bool = False  # docker run --rm: docker removes it when it stops
    name: str | None = None  # container name as written (may hold ${VAR})
    cidfile: str | None = None  # docker run --cidfile the plan added (relative to the root)
    compose_program: tuple[str, ...] = ()
    compose_args: tuple[str, ...] = ()  # global options for `… down` / `… logs -f`
    project: str | None = None  # the run's own Compose project
    workdir: str = "."  # where the server command runs (relative to the root)
    files: tuple[tuple[str, str], ...] = ()  # (path in workdir, text) written before the start
    gpus: str | None = None  # docker --gpus value / compose GPU devices ("all")


@dataclass(frozen=True, slots=True)
class PlannedServer:
    command: str  # final shell text, run as `bash -c command` (block text + executor additions)
    env: dict[str, str] = field(hash=False, compare=False)  # added to os.environ (real values)
    display_env: dict[str, str] = field(hash=False, compare=False)  # same, secrets as ***
    display_command: str = ""  # `command` with secret assignments as *** (for records, output)
    log_path: str = ""  # artifacts_dir/server.log
    port: int = 8000
    host: str = "127.0.0.1"  # where the executor connects
    health_url: str = ""  # e.g. http://127.0.0.1:8000/health
    models_url: str = ""  # /v1/models
    metrics_url: str = ""  # the engine's metrics_path
    ready_timeout: float = 900.0
    stop_timeout: float = 20.0
    engine: str | None = None
    image: str | None = None
    docker: bool = False
    fatal_patterns: tuple[str, ...] = ()  # regexes: a log line matching means startup failed
    ready_log: tuple[str, ...] = ()  # log lines that mean the server says it is listening
    version_command: tuple[str, ...] = ()  # argv that prints the engine version (None if docker)
    container: PlannedContainer | None = None  # the run's containers (docker run / compose)
    # the container's own environment (`-e`, compose `environment:`), secrets masked
    container_env: dict[str, str] = field(default_factory=dict, hash=False, compare=False)


@dataclass(frozen=True, slots=True)
class PlannedClient:
    name: str
    kind: str
    sweep_var: str | None
    point_value: str | None  # sweep value for this point (None when no sweep)
    command: str  # final shell text, run as `bash -c command`
    env: dict[str, str] = field(hash=False, compare=False)
    display_env: dict[str, str] = field(hash=False, compare=False)
    display_command: str = ""
    result_path: str | None = None  # where the client's JSON result lands (None: stdout only)
    log_path: str = ""  # stdout+stderr of this point
    timeout: float = 1800.0
    parser: str = "text"  # a client tool name (its result format) or "text"
    repeat: int = 1  # which run of this point: 1..repeats; 0 is the unrecorded warm-up run
    repeats: int = 1  # measured runs of this point
    coords: tuple[tuple[str, str], ...] = ()  # (variable, value) of every swept variable
    sweep_vars: tuple[str, ...] = ()  # every swept variable of the block (two for a grid)

    @property
    def warmup(self) -> bool:
        return self.repeat == 0

    @property
    def point_label(self) -> str:
        """client:<name> or client:<name>[<value>]: the point, whichever run of it."""
        point = f"[{self.point_value}]" if self.point_value is not None else ""
        return f"client:{self.name}{point}"

    @property
    def label(self) -> str:
        """Step name in the record: the point, then `warm-up` or `run i/n` when repeated."""
        if self.warmup:
            return f"{self.point_label} warm-up"
        return self.point_label + (f" run {self.repeat}/{self.repeats}" if self.repeats > 1
                                   else "")


@dataclass(frozen=True, slots=True)
class Plan:
    """Everything a run does. Paths are POSIX and relative to the wiki root; the executor runs
    each command with `bash -c` in the root, with os.environ updated by `env`."""

    runbook: Runbook
    artifacts_dir: str  # relative to the root, POSIX: .artifacts/<id>/<run-id>
    server: PlannedServer
    clients: tuple[PlannedClient, ...]
    verdict: Verdict | None = None  # None when preflight was not run (plan without host checks)
    notes: tuple[str, ...] = ()  # human-readable remarks (overrides applied, inferred values)
