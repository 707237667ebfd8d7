"""Launchers inside containers: `docker run … IMAGE CMD` (its `-e`, `--gpus`, `--name`, `-d`,
`--rm`, `--entrypoint`; images whose entrypoint is the server), `docker exec … CMD` and
`docker compose up` (the service's command in the compose file). What a container runs is
searched with the `find` the caller passes (the launcher finder itself)."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from wikitools.runbook.engines import catalog as engines
from wikitools.runbook.engines import docker_cli as dk
from wikitools.runbook.engines.compose import (
    DEFAULT_FILES,
    ComposeCall,
    ComposeError,
    parse_compose,
)
from wikitools.runbook.engines.found import ANY_FILE, OUTSIDE, Found, Scope
from wikitools.runbook.engines.shell import Word, basename, resolve, split_words
from wikitools.runbook.engines.types import ContainerUse

# find(argv, words, scope, depth, top) -> Found | None
Find = Callable[[list[str], "list[Word] | None", Scope, int, bool], "Found | None"]

_EMPTY_DEFAULT = re.compile(r"\$\{[A-Za-z_]\w*:?-\}")
_ARRAY = re.compile(r"\$\{([A-Za-z_]\w*)\[[@*]\]\}")


def not_top(use: ContainerUse) -> ContainerUse:
    return replace(use, top_level=False)


@dataclass
class _RunOptions:
    """What the options of `docker run` before the image say."""

    env: list[tuple[str, str]] = field(default_factory=list)
    gpus: str | None = None
    entrypoint: str | None = None
    name: str | None = None
    detached: bool = False
    remove: bool = False
    ports: list[str] = field(default_factory=list)

    def take(self, flag: str, value: str) -> None:
        if flag in dk.ENV_FLAGS:
            k, eq, v = value.partition("=")
            self.env.append((k, v if eq else f"${{{k}}}"))  # bare `-e K` passes the host's K
        elif flag == dk.GPUS_FLAG:
            self.gpus = value
        elif flag == dk.ENTRYPOINT_FLAG:
            self.entrypoint = value
        elif flag in dk.PUBLISH_FLAGS:
            self.ports.append(value)
        elif flag == dk.NAME_FLAG:
            self.name = value


def _option(argv: list[str], j: int, opts: _RunOptions) -> tuple[str, str | None, int]:
    """The option at `argv[j]`: (flag, its value or None, the index after it); sets the
    switches (-d, --rm) on `opts`."""
    a = argv[j]
    flag, eq, val = a.partition("=")
    if eq:
        return flag, val, j + 1
    if flag in dk.RUN_VALUE_FLAGS:
        return flag, (argv[j + 1] if j + 1 < len(argv) else None), j + 2
    if re.fullmatch(r"-[a-zA-Z]+", flag) and flag[-1] in dk.RUN_VALUE_SHORT and set(
            flag[1:-1]) <= dk.RUN_BOOL_SHORT:
        # combined short flags ending with a value flag, e.g. -itv /x:/y is rare; -e handled
        opts.detached = opts.detached or "d" in flag[1:-1]
        return "-" + flag[-1], (argv[j + 1] if j + 1 < len(argv) else None), j + 2
    if flag in dk.DETACH_FLAGS or (
            re.fullmatch(r"-[a-zA-Z]+", flag) and set(flag[1:]) <= dk.RUN_BOOL_SHORT
            and "d" in flag):
        opts.detached = True
    elif flag == dk.REMOVE_FLAG:
        opts.remove = True
    return flag, None, j + 1


def _run_options(argv: list[str], words: list[Word] | None, j: int, scope: Scope,
                 ) -> tuple[_RunOptions, list[str], list[Word] | None, int]:
    """The options of `docker run` from `argv[j]` on; with argv and words as read (an array
    of options expanded) and the index of the image."""
    opts = _RunOptions()
    while j < len(argv):
        a = argv[j]
        if a == "--":
            j += 1
            break
        if _EMPTY_DEFAULT.fullmatch(a):  # `${EXTRA_DOCKER_ARGS:-}`: nothing unless set
            j += 1
            continue
        array = _ARRAY.fullmatch(a)
        if array:  # `"${ENV_ARGS[@]}"` before the image: options, as the script set them
            argv = [*argv[:j], *scope.arrays.get(array[1], []), *argv[j + 1 :]]
            words = None
            continue
        if not a.startswith("-") or a == "-":
            break
        flag, value, j = _option(argv, j, opts)
        if value is not None:
            opts.take(flag, value)
    return opts, argv, words, j


def docker_run(
    argv: list[str], words: list[Word] | None, j: int, base: str, env: list[tuple[str, str]],
    scope: Scope, depth: int, top: bool, find: Find,
) -> Found | None:
    opts, argv, words, j = _run_options(argv, words, j, scope)
    if j >= len(argv):
        return None
    image = argv[j]
    cmd = argv[j + 1 :]
    if opts.entrypoint:
        cmd = split_words(opts.entrypoint) + cmd
    sub_words = words[j + 1 :] if words is not None and not opts.entrypoint else None
    found = find(cmd, sub_words, scope, depth + 1, False) if cmd else None
    if found is None:
        found = image_entrypoint(resolve(image, scope.values), cmd, sub_words) or \
            declared_program(scope, cmd, sub_words)
        if found is None:
            return None
    if found.words is not None and sub_words is None:
        found.words = None
    found.wrappers.insert(0, f"{base} run")
    found.image = image
    found.docker = True
    found.docker_gpus = opts.gpus
    found.docker_env = opts.env
    found.docker_ports = opts.ports
    found.env = env + opts.env + found.env
    found.container = ContainerUse(kind="run", detached=opts.detached, remove=opts.remove,
                                   name=opts.name, top_level=top)
    return found


_MODEL_REF = re.compile(r"[\w.-]+/[\w.@:+-]+|/\S+")
# a model id alone (a lone path or script may be a program in the image)
_HUB_ID = re.compile(r"[\w.-]+/[\w.-]+(?<!\.sh)(?<!\.py)")


def image_entrypoint(image: str, cmd: list[str], words: list[Word] | None) -> Found | None:
    """An image whose entrypoint is the server (the vllm-openai images: `vllm serve`, before
    that the API server): `IMAGE serve MODEL …`, `IMAGE --model X …`, `IMAGE MODEL --flag …`
    (engines with `image_entrypoint` in `engines`)."""
    eng = engines.engine_for_image(image)
    if eng is None or not eng.image_entrypoint or not cmd:
        return None
    sub = eng.image_subcommand
    if sub and cmd[0] == sub:
        return Found(kind="server", argv=cmd, words=words, start=0, engine=eng.name,
                     launcher=f"{image} {sub}", rest=cmd[1:])
    if cmd[0].startswith("-") or (_HUB_ID.fullmatch(cmd[0]) and len(cmd) == 1) or (
            _MODEL_REF.fullmatch(cmd[0]) and any(a.startswith("--") for a in cmd[1:])):
        return Found(kind="server", argv=cmd, words=words, start=0, engine=eng.name,
                     launcher=f"{image} (entrypoint)", rest=cmd)
    return None


def declared_program(scope: Scope, cmd: list[str], words: list[Word] | None) -> Found | None:
    """The program a container runs (its helper script, or the image's own entrypoint), taken
    as the server of the engine the block declares; its arguments are the helper's, not the
    engine's, so none is read as an engine flag."""
    if scope.declared is None:
        return None
    program = cmd[0] if cmd else "the image's entrypoint"
    return Found(kind="server", argv=cmd, words=words, start=0, engine=scope.declared,
                 launcher=f"{program} (declared {scope.declared})", rest=[])


def docker_exec(argv: list[str], j: int, spelling: str, env: list[tuple[str, str]],
                scope: Scope, depth: int, find: Find) -> Found | None:
    """`docker exec [options] CONTAINER CMD…` (also `docker compose exec SERVICE CMD…`): the
    launcher runs inside a container that something else started."""
    denv: list[tuple[str, str]] = []
    while j < len(argv) and argv[j].startswith("-"):
        flag, eq, val = argv[j].partition("=")
        value = val if eq else (argv[j + 1] if flag in dk.EXEC_VALUE_FLAGS and j + 1 < len(argv)
                                else None)
        j += 1 if eq or flag not in dk.EXEC_VALUE_FLAGS else 2
        if flag in dk.ENV_FLAGS and value:
            k, eq2, v = value.partition("=")
            denv.append((k, v if eq2 else f"${{{k}}}"))
    if j + 1 >= len(argv):
        return None
    target = argv[j]
    found = find(argv[j + 1 :], None, scope, depth + 1, False)
    if found is None:
        return None
    found.words = None
    found.wrappers.insert(0, spelling)
    found.docker = True
    found.env = env + denv + found.env
    found.container = ContainerUse(kind="exec", name=target, top_level=False)
    return found


def compose_up(call: ComposeCall, scope: Scope, depth: int, env: list[tuple[str, str]],
               find: Find) -> Found | None:
    """`docker compose … up` / `run`: the launcher is the service's command in the compose
    file; `docker compose exec SERVICE CMD` runs CMD in a service container."""
    spelling = " ".join(basename(p) if k == 0 else p for k, p in enumerate(call.program))
    if call.subcommand == "exec":
        return docker_exec([*call.program, "exec", *call.args], len(call.program) + 1,
                           f"{spelling} exec", env, scope, depth, find)
    if call.subcommand not in dk.COMPOSE_START_SUBCOMMANDS:
        return None
    names = call.files or DEFAULT_FILES
    # Only the very file the command reads: a file of the page or of the block itself (a
    # here-document) by that path (`./x` is `x`), never one that merely has the same name.
    wanted_paths = {posixpath.normpath(n): n for n in names}
    path = next((k for k in scope.files if k != ANY_FILE and
                 posixpath.normpath(k) in wanted_paths), None)
    outside = [n for n in call.files if n.startswith(("/", "~", "$")) or ".." in n.split("/")]
    if path is None and outside:
        return Found(kind="none", argv=[], words=None, start=0, compose_problem=(
            f"{spelling} -f {outside[0]} reads a file outside the run's folder, not a file "
            "block of the page: the plan could not say what runs; use the page's file by its "
            "path= name"))
    text = scope.files.get(path) if path else scope.files.get(ANY_FILE)
    if path is None and text is not None:
        path = names[0]  # the compose file the page showed before this block
    if path is None or text is None:
        problem = (f"{spelling} {call.subcommand} needs its compose file "
                   f"({', '.join(call.files) or 'compose.yaml'}) on the page, in a block "
                   "marked `yaml { .runbook-file for=ID path=… }`")
        return Found(kind="none", argv=[], words=None, start=0, compose_problem=problem)
    if text == OUTSIDE:  # what its services run is known once the plan has fetched it
        found = declared_program(scope, [], None)
        if found is None:
            return Found(kind="none", argv=[], words=None, start=0, compose_problem=(
                f"{path} is a file of another repository, read only when the run is planned: "
                "declare the server it starts (engine= model= tp= port=)"))
        found.wrappers.insert(0, f"{spelling} {call.subcommand}")
        found.docker, found.env = True, list(env)
        found.container = ContainerUse(
            kind="compose", detached=call.detached, compose_program=call.program,
            compose_args=call.globals, compose_file=path, project=call.project)
        return found
    try:
        compose = parse_compose(text)
    except ComposeError as exc:
        return Found(kind="none", argv=[], words=None, start=0,
                     compose_problem=f"{path}: {exc}")
    wanted = call.services if call.subcommand == "up" else call.services[:1]
    services = [s for s in compose.services if not wanted or s.name in wanted]
    for svc in services:
        found = find(list(svc.argv), None, scope, depth + 1, False) if svc.argv else None
        if found is None and svc.image:
            found = image_entrypoint(svc.image, list(svc.argv), None) or declared_program(
                scope, list(svc.argv), None)
        if found is None or found.kind != "server":
            continue
        found.words = None
        found.wrappers.insert(0, f"{spelling} {call.subcommand}")
        found.image = svc.image
        found.docker = True
        found.docker_gpus = "all" if svc.gpus else None
        found.docker_env = list(svc.env)
        found.env = env + list(svc.env) + found.env
        found.container = ContainerUse(
            kind="compose", detached=call.detached, name=svc.container_name,
            compose_program=call.program, compose_args=call.globals, compose_file=path,
            service=svc.name, project=call.project or compose.name)
        return found
    names_ = ", ".join(s.name for s in services) or "none"
    return Found(kind="none", argv=[], words=None, start=0,
                 compose_problem=f"{path}: no engine launcher in service {names_} (the image's "
                 "own entrypoint decides the flags)")
