"""The edits a run makes to a container launch of a server command: where `docker run`
options go (the run's `--label`), the run's own Compose project in place of the page's."""

from __future__ import annotations

import shlex

from wikitools.runbook.engines import docker_cli
from wikitools.runbook.engines.compose import compose_call
from wikitools.runbook.engines.launcher import strip_prefixes
from wikitools.runbook.engines.shell import (
    ShellSyntaxError,
    SimpleCommand,
    basename,
    split_commands,
)


def _programs(text: str) -> list[tuple[SimpleCommand, int]]:
    """Each top-level command of `text` with the index of its program word, past environment
    assignments and wrappers; none when the text does not parse."""
    try:
        cmds = split_commands(text)
    except ShellSyntaxError:
        return []
    return [(cmd, strip_prefixes(cmd.argv, [], [])) for cmd in cmds]


def docker_run_offset(text: str) -> int | None:
    """Offset just after `run` in the block's first top-level `docker run` (or `docker container
    run`), where docker options can be added; None when there is none."""
    for cmd, i in _programs(text):
        argv = cmd.argv
        if i + 1 >= len(argv) or basename(argv[i]) not in docker_cli.CONTAINER_PROGRAMS:
            continue
        if argv[i + 1] == "run":
            return cmd.words[i + 1].end
        if argv[i + 1 : i + 3] == ["container", "run"]:
            return cmd.words[i + 2].end
    return None


def own_compose_project(text: str, project: str) -> str | None:
    """`text` with its first top-level `docker compose …` / `docker-compose …` call set to the
    Compose project `project`: the page's own `-p X`, `-pX`, `--project-name X` or
    `--project-name=X` replaced, or `-p project` added after the program. A `-p` given on the
    command line outranks COMPOSE_PROJECT_NAME and the file's `name:`, so the call acts on
    `project` only. None when there is no such call outside a quoted string."""
    for cmd, i in _programs(text):
        argv = cmd.argv
        call = compose_call(argv, i) if i < len(argv) else None
        if call is None:
            continue
        j = i + len(call.program)
        edits: list[tuple[int, int, str]] = []
        new = shlex.quote(project)
        while j < len(argv) and argv[j].startswith("-"):
            a, w = argv[j], cmd.words[j]
            name, eq, _ = a.partition("=")
            if a in docker_cli.COMPOSE_PROJECT_FLAGS and j + 1 < len(argv):
                edits.append((cmd.words[j + 1].start, cmd.words[j + 1].end, new))
                j += 2
                continue
            if name == "--project-name" and eq:
                edits.append((w.start, w.end, f"--project-name={new}"))
            elif a.startswith("-p") and not a.startswith("--"):
                edits.append((w.start, w.end, f"-p {new}"))
            elif "=" not in a and a in docker_cli.COMPOSE_GLOBAL_VALUE_FLAGS and j + 1 < len(argv):
                j += 1
            j += 1
        if not edits:
            at = cmd.words[i + len(call.program) - 1].end
            edits.append((at, at, f" -p {new}"))
        for start, end, repl in sorted(edits, reverse=True):
            text = text[:start] + repl + text[end:]
        return text
    return None


def without_project(args: tuple[str, ...]) -> tuple[str, ...]:
    """Compose global options without any project name (the run adds its own)."""
    out: list[str] = []
    skip = False
    for a in args:
        if skip:
            skip = False
            continue
        if a in docker_cli.COMPOSE_PROJECT_FLAGS:
            skip = True
        elif not (a.startswith("--project-name=") or (a.startswith("-p") and
                                                        not a.startswith("--"))):
            out.append(a)
    return tuple(out)
