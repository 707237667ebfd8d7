"""What a run will do: GPUs found, preflight checks and verdict, the planned server and clients."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from wikitools.runbook.blocks.declared import Runbook
from wikitools.runbook.blocks.sweep import Coords


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
    compose_program: tuple[str, ...] = ()
    compose_args: tuple[str, ...] = ()  # global options for `… down` / `… logs -f`
    project: str | None = None  # the run's own Compose project (never the page's)
    workdir: str = "."  # where the server command runs (relative to the root)
    files: tuple[tuple[str, str], ...] = ()  # (path in workdir, text) written before the start
    gpus: str | None = None  # docker --gpus value / compose GPU devices ("all")


@dataclass(frozen=True, slots=True)
class PlannedCopy:
    """A repository file the server command runs, copied into the run's folder before the
    start: the text read with the runbook (the run never executes the file itself)."""

    path: str  # where the copy is written, relative to the root (inside the run's folder)
    source: str  # the repository file, relative to the root
    sha256: str  # of the repository file's text, as the runbook's hash covers it
    text: str  # what is written: that text, with the run's --label when it holds the docker run
    labelled: bool = False


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
    copies: tuple[PlannedCopy, ...] = ()  # of the repository files the command runs
    # (variable, folder relative to the root): the compile and kernel caches every variant of
    # the run shares, a fresh folder per run, set where the block and the environment set none
    caches: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class PlannedRun:
    """One execution of a point's command: the warm-up (repeat 0, not recorded) or measured run
    `repeat` of `repeats`."""

    repeat: int
    label: str  # the step's name in the record: `client:<name>[<point>] run 2/3`
    command: str  # final shell text, run as `bash -c command`
    display_command: str
    result_path: str | None  # where the client's JSON result lands (None: stdout only)
    log_path: str  # stdout+stderr of this run

    @property
    def warmup(self) -> bool:
        return self.repeat == 0


@dataclass(frozen=True, slots=True)
class PlannedPoint:
    """One sweep point of a client (the only point of a client without a sweep) and its runs."""

    coords: Coords  # (variable, value) of every swept variable, in sweep order
    value: str | None  # the point's name: point_name(coords)
    label: str  # client:<name> or client:<name>[<value>]
    env: dict[str, str] = field(hash=False, compare=False)  # the swept variables (and variant's)
    display_env: dict[str, str] = field(hash=False, compare=False)
    runs: tuple[PlannedRun, ...] = ()  # the warm-up first when there is one


@dataclass(frozen=True, slots=True)
class PlannedClient:
    """A client block as planned: client -> points -> runs, in the order they execute."""

    name: str
    kind: str
    parser: str  # a client tool name (its result format) or "text"
    timeout: float  # per run
    sweep_vars: tuple[str, ...]  # every swept variable of the block (two for a grid)
    repeats: int  # measured runs of each point
    warmup: bool  # an unrecorded run before each point's measured runs
    points: tuple[PlannedPoint, ...]
    min_duration: float | None = None  # serving: the shortest run counted as steady (s)

    @property
    def display_command(self) -> str:
        """The command as the record shows it: the first measured run's."""
        for point in self.points:
            for run in point.runs:
                if not run.warmup:
                    return run.display_command
        return self.points[0].runs[0].display_command if self.points else ""


@dataclass(frozen=True, slots=True)
class PlannedVariant:
    """One server configuration and the clients run against it. A server without `variants=`
    has one, with no coordinates; each of several starts, serves and stops before the next."""

    coords: Coords  # (variable, value) of the server's variant variables; () without variants
    artifacts_dir: str  # the run's folder, or a folder per variant inside it
    server: PlannedServer
    clients: tuple[PlannedClient, ...]

    @property
    def name(self) -> str | None:
        """`KV=fp8,MTP=3`, None for the one variant of a server without variants."""
        return ",".join(f"{k}={v}" for k, v in self.coords) if self.coords else None

    def step(self, name: str) -> str:
        """A step's name in the record: `[KV=fp8,MTP=3] start`; `start` without variants."""
        return f"[{self.name}] {name}" if self.coords else name

    @property
    def runs(self) -> int:
        return sum(len(p.runs) for c in self.clients for p in c.points)


@dataclass(frozen=True, slots=True)
class Plan:
    """Everything a run does: its variants in order, each a server and its clients. Paths are
    POSIX and relative to the wiki root; the executor runs each command with `bash -c` in the
    root (or the variant's folder for Compose), with os.environ updated by `env`."""

    runbook: Runbook
    artifacts_dir: str  # relative to the root, POSIX: .artifacts/<id>/<run-id>
    variants: tuple[PlannedVariant, ...]
    verdict: Verdict | None = None  # None when preflight was not run (plan without host checks)
    notes: tuple[str, ...] = ()  # human-readable remarks (overrides applied, inferred values)
    variant_vars: tuple[str, ...] = ()  # the server's variant variables; () without variants

    @property
    def server(self) -> PlannedServer:
        """The first variant's server: port, host and engine are the same in every variant."""
        return self.variants[0].server

    @property
    def runs(self) -> int:
        """Client runs in all (warm-ups included): what a progress bar counts."""
        return sum(v.runs for v in self.variants)
