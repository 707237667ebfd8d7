"""What a launch or client command means once read: engine, model, flags, container use."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from wikitools.runbook.engines import catalog as engines

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
    published_port: int | None = None  # the host's port for it (`docker run -p HOST:PORT`)
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
    written_flags: tuple[str, ...] = ()  # every flag after the launcher, as written

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

    @property
    def gpus(self) -> int:
        """Tensor × pipeline × data parallel sizes (1 each by default); data-parallel ranks
        that run on the tensor-parallel GPUs (SGLang's DP attention) add none."""
        eng = engines.engine(self.engine)
        shared = eng is not None and eng.dp_on_tp_flag is not None and self.has_flag(
            eng.dp_on_tp_flag)
        return (self.tp or 1) * (self.pp or 1) * (1 if shared else self.dp or 1)


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


