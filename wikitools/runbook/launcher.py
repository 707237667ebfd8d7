"""Finding the engine launcher or benchmark client in a block: past `K=V` prefixes and
`exec`/`env`/`nohup`/`timeout`/`uv run` wrappers, inside `bash -lc "…"`, and through
`docker run … IMAGE CMD` (with its `-e`, `--gpus`, `-p`). Which spellings are launchers is data
in `engines`; reading the shell text is `shell`'s job."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from wikitools.runbook import engines
from wikitools.runbook.shell import (
    ShellSyntaxError,
    Word,
    assignment,
    assignments,
    basename,
    shell_quote,
    split_commands,
)


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


_PY = re.compile(r"^(?:.*/)?python(?:\d+(?:\.\d+)?)?$")
_PY_OPTS_WITH_VALUE = {"-X", "-W", "-c"}


def _strip_prefixes(argv: list[str], env: list[tuple[str, str]], wrappers: list[str]) -> int:
    """Index of the real command after `K=V` prefixes and exec/env/nohup/time/sudo/uv run."""
    i = 0
    while i < len(argv):
        a = argv[i]
        pair = assignment(a)
        if pair:
            env.append(pair)
            i += 1
            continue
        base = basename(a)
        if base in ("exec", "nohup", "time", "command", "stdbuf"):
            i += 1
            continue
        if base == "sudo":
            i += 1
            while i < len(argv) and argv[i].startswith("-"):
                i += 1
            continue
        if base == "env":
            i += 1
            while i < len(argv) and (argv[i].startswith("-") and argv[i] != "-"):
                i += 1
            continue
        if base == "timeout":
            i += 1
            while i < len(argv) and argv[i].startswith("-"):
                i += 1
            i += 1  # duration
            continue
        if base == "numactl" or base == "taskset":
            i += 1
            while i < len(argv) and argv[i].startswith("-"):
                i += 1
            if base == "taskset" and i < len(argv):
                i += 1
            continue
        if base == "uv" and argv[i + 1 : i + 2] == ["run"]:
            i += 2
            while i < len(argv) and argv[i].startswith("-"):
                i += 1
            continue
        break
    return i


def _classify(argv: list[str], i: int) -> tuple[str, str | None, str, int] | None:
    """(kind, engine-or-tool, launcher spelling, index after launcher) or None, from the
    launcher table in `engines`."""
    if i >= len(argv):
        return None
    a = argv[i]
    base = basename(a)
    table = engines.launchers()
    for kind, name, ln in table:
        if ln.command and base == ln.command[0] and argv[i + 1 : i + len(ln.command)] == list(
            ln.command[1:]
        ):
            return kind, name, " ".join([a, *ln.command[1:]]), i + len(ln.command)
        if ln.script and base == ln.script:
            return kind, name, a, i + 1
    if not _PY.match(a):
        return None
    j = i + 1
    while j < len(argv) and argv[j].startswith("-") and argv[j] != "-m":
        j += 2 if argv[j] in _PY_OPTS_WITH_VALUE else 1
    if j < len(argv) and argv[j] == "-m" and j + 1 < len(argv):
        after = j + 1
        for kind, name, ln in table:
            n = len(ln.module)
            if ln.module and argv[after : after + n] == list(ln.module):
                return kind, name, " ".join([a, "-m", *ln.module]), after + n
        return None
    for kind, name, ln in table:
        if j < len(argv) and ln.script and basename(argv[j]) == ln.script:
            return kind, name, f"{a} {argv[j]}", j + 1
    return None


def _find(argv: list[str], words: list[Word] | None, depth: int = 0) -> Found | None:
    env: list[tuple[str, str]] = []
    wrappers: list[str] = []
    i = _strip_prefixes(argv, env, wrappers)
    if i >= len(argv):
        return None
    hit = _classify(argv, i)
    if hit:
        kind, name, spelling, after = hit
        f = Found(kind=kind, argv=argv, words=words, start=i, launcher=spelling, rest=argv[after:])
        if kind == "server":
            f.engine = name
        else:
            f.tool = name
        f.env = env
        return f
    base = basename(argv[i])
    if depth > 4:
        return None
    if base in ("bash", "sh", "zsh", "dash"):
        j = i + 1
        script = None
        while j < len(argv):
            a = argv[j]
            if a.startswith("-") and not a.startswith("--") and "c" in a[1:]:
                script = argv[j + 1] if j + 1 < len(argv) else None
                break
            if a.startswith("-"):
                j += 1
                continue
            break
        if script is None:
            return None
        inner = find_in_script(script, depth + 1)
        if inner is None:
            return None
        found, inner_env = inner
        found.words = None
        found.wrappers.insert(0, f"{base} {argv[j]}")
        found.env = env + inner_env + found.env
        return found
    if base in ("docker", "podman", "nerdctl") and argv[i + 1 : i + 2] in (["run"], ["container"]):
        j = i + 2 if argv[i + 1] == "run" else i + 3
        return _docker(argv, words, j, base, env, depth)
    return None


def _docker(
    argv: list[str], words: list[Word] | None, j: int, base: str, env: list[tuple[str, str]],
    depth: int,
) -> Found | None:
    denv: list[tuple[str, str]] = []
    gpus = None
    entrypoint = None
    ports: list[str] = []
    while j < len(argv):
        a = argv[j]
        if a == "--":
            j += 1
            break
        if not a.startswith("-") or a == "-":
            break
        name, eq, val = a.partition("=")
        if eq:
            value: str | None = val
            j += 1
        elif name in engines.DOCKER_VALUE_FLAGS:
            value = argv[j + 1] if j + 1 < len(argv) else None
            j += 2
        elif re.fullmatch(r"-[a-zA-Z]+", name) and name[-1] in "evpwuml" and set(name[1:-1]) <= (
            engines.DOCKER_BOOL_SHORT
        ):
            # combined short flags ending with a value flag, e.g. -itv /x:/y is rare; -e handled
            value = argv[j + 1] if j + 1 < len(argv) else None
            name = "-" + name[-1]
            j += 2
        else:
            value = None
            j += 1
        if value is None:
            continue
        if name in ("-e", "--env"):
            k, eq2, v = value.partition("=")
            denv.append((k, v if eq2 else f"${{{k}}}"))  # bare `-e K` passes the host's K
        elif name == "--gpus":
            gpus = value
        elif name == "--entrypoint":
            entrypoint = value
        elif name in ("-p", "--publish"):
            ports.append(value)
    if j >= len(argv):
        return None
    image = argv[j]
    cmd = argv[j + 1 :]
    if entrypoint:
        cmd = entrypoint.split() + cmd
    sub_words = words[j + 1 :] if words is not None and not entrypoint else None
    found = _find(cmd, sub_words, depth + 1) if cmd else None
    if found is None:
        # An image whose entrypoint is the launcher: `IMAGE serve MODEL …` or `IMAGE --flag …`.
        eng = engines.engine_for_image(image)
        if eng is None or not eng.image_entrypoint:
            return None
        sub = eng.image_subcommand
        if sub and cmd[:1] == [sub]:
            found = Found(kind="server", argv=cmd, words=sub_words, start=0, engine=eng.name,
                          launcher=f"{image} {sub}", rest=cmd[1:])
        elif cmd[:1] and cmd[0].startswith("-"):
            found = Found(kind="server", argv=cmd, words=sub_words, start=0, engine=eng.name,
                          launcher=f"{image} (entrypoint)", rest=cmd)
        else:
            return None
    if found.words is not None and sub_words is None:
        found.words = None
    found.wrappers.insert(0, f"{base} run")
    found.image = image
    found.docker = True
    found.docker_gpus = gpus
    found.docker_env = denv
    found.docker_ports = ports
    found.env = env + denv + found.env
    return found


def find_in_script(script: str, depth: int = 0) -> tuple[Found, list[tuple[str, str]]] | None:
    """First launcher in a script, with the environment set before it (export / K=V / unset)."""
    env: list[tuple[str, str]] = []
    for cmd in split_commands(script):
        argv = cmd.argv
        if not argv:
            continue
        if argv[0] == "export":
            env.extend(assignments(argv[1:]))
            continue
        if argv[0] == "unset":
            names = {a for a in argv[1:] if not a.startswith("-")}
            env = [(k, v) for k, v in env if k not in names]
            continue
        pairs = assignments(argv)
        if len(pairs) == len(argv):
            env.extend(pairs)
            continue
        found = _find(argv, cmd.words if depth == 0 else None, depth)
        if found is not None:
            return found, env
    return None



def find_launcher(text: str) -> tuple[Found | None, list[tuple[str, str]], list[str]]:
    problems: list[str] = []
    try:
        res = find_in_script(text)
    except ShellSyntaxError as exc:
        return None, [], [str(exc)]
    if res is None:
        return None, [], problems
    found, env = res
    return found, env + found.env, problems



def insertion_point(text: str) -> int | None:
    """Offset in `text` just after the last argument of the first launcher or client command,
    where extra arguments can be inserted so that they reach the engine or client. None when the
    command sits inside a quoted string (`bash -lc "…"`) or an entrypoint, where an insertion
    would not reach it."""
    try:
        res = find_in_script(text)
    except ShellSyntaxError:
        return None
    if res is None:
        return None
    found, _ = res
    if found.words is None or not found.words:
        return None
    return found.words[-1].end


def append_args(text: str, args: list[str]) -> str | None:
    """`text` with `args` (shell-quoted) added to the end of its launcher or client command;
    None when that is not possible (see insertion_point)."""
    at = insertion_point(text)
    if at is None:
        return None
    if not args:
        return text
    return text[:at] + " " + " ".join(shell_quote(a) for a in args) + text[at:]

