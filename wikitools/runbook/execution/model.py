"""What a run will do: GPUs found, preflight checks and verdict, the planned server and clients."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from wikitools.runbook.blocks.model import Runbook


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
