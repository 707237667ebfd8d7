"""What finding a launcher yields (`Found`) and what a block knows besides its own command
(`Scope`): shared by `launcher` and `launch_containers`."""

from __future__ import annotations

from dataclasses import dataclass, field

from wikitools.runbook.engines.shell import Word
from wikitools.runbook.engines.types import ContainerUse


@dataclass(slots=True)
class Found:
    kind: str  # server | client
    argv: list[str]
    words: list[Word] | None  # top-level words (None when found inside a bash -c string)
    start: int  # index in argv/words where the launcher starts
    engine: str | None = None
    tool: str | None = None
    launcher: str = ""
    rest: list[str] = field(default_factory=list)  # arguments after the launcher
    image: str | None = None
    docker: bool = False
    docker_gpus: str | None = None
    docker_env: list[tuple[str, str]] = field(default_factory=list)
    docker_ports: list[str] = field(default_factory=list)
    wrappers: list[str] = field(default_factory=list)
    env: list[tuple[str, str]] = field(default_factory=list)
    container: ContainerUse | None = None
    compose_problem: str | None = None  # why a `docker compose up` could not be read
    positional: list[str] = field(default_factory=list)  # $1 $2 … from a wrapper's call


ANY_FILE = "*"  # key of `files` for a compose file shown on the page under no stated name
# The text of a file of another repository that the plan fetches: not known when reading.
OUTSIDE = "\0a file of another repository, fetched when the run is planned\0"


@dataclass(slots=True)
class Scope:
    """What a block knows besides its own command: files (the page's file blocks and the
    block's here-documents), wrapper functions and scripts, and bash arrays."""

    files: dict[str, str] = field(default_factory=dict)
    callables: dict[str, str | None] = field(default_factory=dict)  # name → script (None: fn)
    arrays: dict[str, list[str]] = field(default_factory=dict)
    # values of variables set so far (the block's assignments, the page's blocks that run
    # first): to tell an engine image written as `"$IMAGE"`
    values: dict[str, str] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    # the engine a server block declares it serves: a container whose program the reader
    # does not know (a helper script inside the image) is taken as that engine's server
    declared: str | None = None
