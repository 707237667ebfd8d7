"""Finding the engine launcher or benchmark client in a block: past `K=V` prefixes and
`exec`/`env`/`nohup`/`timeout`/`uv run` wrappers, inside `bash -lc "…"`, through
`docker run … IMAGE CMD` (with its `-e`, `--gpus`, `--name`, `-d`, `--rm`; images whose
entrypoint is the server), `docker exec … CMD`, `docker compose up` (the service's command in
the compose file, from a file block of the page or a here-document of the block), and wrapper
functions or scripts that forward "$@" (their call supplies the arguments). Which spellings are
launchers is data in `engines`; reading the shell text is `shell`'s job, compose files
`compose`'s."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from wikitools.runbook import engines
from wikitools.runbook.compose import (
    DEFAULT_FILES,
    ComposeError,
    compose_call,
    parse_compose,
)
from wikitools.runbook.model import ContainerUse
from wikitools.runbook.shell import (
    ShellSyntaxError,
    Word,
    assignment,
    assignments,
    basename,
    heredoc_files,
    shell_quote,
    split_commands,
    tokenize,
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
    container: ContainerUse | None = None
    compose_problem: str | None = None  # why a `docker compose up` could not be read
    positional: list[str] = field(default_factory=list)  # $1 $2 … from a wrapper's call


ANY_FILE = "*"  # key of `files` for a compose file shown on the page under no stated name


@dataclass(slots=True)
class Scope:
    """What a block knows besides its own command: files (the page's file blocks and the
    block's here-documents), wrapper functions and scripts, and bash arrays."""

    files: dict[str, str] = field(default_factory=dict)
    callables: dict[str, str | None] = field(default_factory=dict)  # name → script (None: fn)
    arrays: dict[str, list[str]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


_PY = re.compile(r"^(?:.*/)?python(?:\d+(?:\.\d+)?)?$")
_PY_OPTS_WITH_VALUE = {"-X", "-W", "-c"}
_UV_VALUE_OPTIONS = {"--with", "--python", "-p", "--project", "--directory", "--env-file",
                     "--extra", "--group", "--index", "--with-requirements", "--package"}
_SHELLS = ("bash", "sh", "zsh", "dash")
# docker exec / compose exec options that take a value
_EXEC_VALUE = {"-e", "--env", "-w", "--workdir", "-u", "--user", "--env-file", "--detach-keys",
               "--index"}


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
                takes = argv[i] in _UV_VALUE_OPTIONS
                i += 2 if takes else 1
            continue
        break
    return i


def _classify(argv: list[str], i: int) -> tuple[str, str | None, str, int] | None:
    """(kind, engine-or-tool, launcher spelling, index after launcher) or None."""
    if i >= len(argv):
        return None
    a = argv[i]
    base = basename(a)
    nxt = argv[i + 1] if i + 1 < len(argv) else ""
    if base == "vllm":
        if nxt == "serve":
            return "server", "vllm", f"{a} serve", i + 2
        if nxt == "bench" and argv[i + 2 : i + 3] == ["serve"]:
            return "client", "vllm-bench", f"{a} bench serve", i + 3
        return None
    if base == "sglang" and nxt in ("serve", "launch_server"):
        return "server", "sglang", f"{a} {nxt}", i + 2
    if base in ("lm_eval", "lm-eval"):
        return "client", "lm-eval", a, i + 1
    if base == "curl":
        return "client", "curl", a, i + 1
    if base in ("benchmark_serving.py",) or a.endswith("/benchmark_serving.py"):
        return "client", "vllm-bench", a, i + 1
    if _PY.match(a):
        j = i + 1
        while j < len(argv) and argv[j].startswith("-") and argv[j] != "-m":
            j += 2 if argv[j] in _PY_OPTS_WITH_VALUE else 1
        if j < len(argv) and argv[j] == "-m" and j + 1 < len(argv):
            mod = argv[j + 1]
            spelling = f"{a} -m {mod}"
            after = j + 2
            if mod == "vllm.entrypoints.openai.api_server":
                return "server", "vllm", spelling, after
            if mod == "vllm.entrypoints.cli.main":
                sub = argv[after : after + 2]
                if sub[:1] == ["serve"]:
                    return "server", "vllm", spelling + " serve", after + 1
                if sub == ["bench", "serve"]:
                    return "client", "vllm-bench", spelling + " bench serve", after + 2
                return None
            if mod in ("sglang.launch_server",):
                return "server", "sglang", spelling, after
            if mod in engines.CLIENT_MODULES:
                return "client", engines.CLIENT_MODULES[mod], spelling, after
            return None
        if j < len(argv) and basename(argv[j]) == "benchmark_serving.py":
            return "client", "vllm-bench", f"{a} {argv[j]}", j + 1
    return None


def _find(argv: list[str], words: list[Word] | None, scope: Scope, depth: int = 0,
          top: bool = True) -> Found | None:
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
    if base in _SHELLS:
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
        inner = find_in_script(script, depth + 1, scope)
        if inner is None:
            return None
        found, inner_env = inner
        found.words = None
        found.wrappers.insert(0, f"{base} {argv[j]}")
        found.env = env + inner_env + found.env
        if found.container is not None and found.container.top_level:
            found.container = _not_top(found.container)
        return found
    call = compose_call(argv, i)
    if call is not None:
        found = _compose(call, scope, depth, env)
        if found is not None and not top and found.container is not None:
            found.container = _not_top(found.container)
        return found
    if base in ("docker", "podman", "nerdctl"):
        sub = argv[i + 1 : i + 3]
        if sub[:1] == ["run"] or sub == ["container", "run"]:
            j = i + 2 if argv[i + 1] == "run" else i + 3
            return _docker(argv, words, j, base, env, scope, depth, top)
        if sub[:1] == ["exec"] or sub == ["container", "exec"]:
            j = i + 2 if argv[i + 1] == "exec" else i + 3
            return _exec(argv, j, f"{base} exec", env, scope, depth)
    return None


def _not_top(use: ContainerUse) -> ContainerUse:
    from dataclasses import replace

    return replace(use, top_level=False)


def _docker(
    argv: list[str], words: list[Word] | None, j: int, base: str, env: list[tuple[str, str]],
    scope: Scope, depth: int, top: bool,
) -> Found | None:
    denv: list[tuple[str, str]] = []
    gpus = None
    entrypoint = None
    name = None
    detached = remove = False
    ports: list[str] = []
    while j < len(argv):
        a = argv[j]
        if a == "--":
            j += 1
            break
        if not a.startswith("-") or a == "-":
            break
        flag, eq, val = a.partition("=")
        if eq:
            value: str | None = val
            j += 1
        elif flag in engines.DOCKER_VALUE_FLAGS:
            value = argv[j + 1] if j + 1 < len(argv) else None
            j += 2
        elif re.fullmatch(r"-[a-zA-Z]+", flag) and flag[-1] in "evpwuml" and set(flag[1:-1]) <= (
            engines.DOCKER_BOOL_SHORT
        ):
            # combined short flags ending with a value flag, e.g. -itv /x:/y is rare; -e handled
            detached = detached or "d" in flag[1:-1]
            value = argv[j + 1] if j + 1 < len(argv) else None
            flag = "-" + flag[-1]
            j += 2
        else:
            if flag in ("-d", "--detach") or (re.fullmatch(r"-[dit]+", flag) and "d" in flag):
                detached = True
            elif flag == "--rm":
                remove = True
            value = None
            j += 1
        if value is None:
            continue
        if flag in ("-e", "--env"):
            k, eq2, v = value.partition("=")
            denv.append((k, v if eq2 else f"${{{k}}}"))  # bare `-e K` passes the host's K
        elif flag == "--gpus":
            gpus = value
        elif flag == "--entrypoint":
            entrypoint = value
        elif flag in ("-p", "--publish"):
            ports.append(value)
        elif flag == "--name":
            name = value
    if j >= len(argv):
        return None
    image = argv[j]
    cmd = argv[j + 1 :]
    if entrypoint:
        cmd = entrypoint.split() + cmd
    sub_words = words[j + 1 :] if words is not None and not entrypoint else None
    found = _find(cmd, sub_words, scope, depth + 1, top=False) if cmd else None
    if found is None:
        found = _image_entrypoint(image, cmd, sub_words)
        if found is None:
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
    found.container = ContainerUse(kind="run", detached=detached, remove=remove, name=name,
                                   top_level=top)
    return found


_MODEL_REF = re.compile(r"[\w.-]+/[\w.@:+-]+|/\S+")


def _image_entrypoint(image: str, cmd: list[str], words: list[Word] | None) -> Found | None:
    """An image whose entrypoint is the server (the vllm-openai images: `vllm serve`, before
    that the API server): `IMAGE serve MODEL …`, `IMAGE --model X …`, `IMAGE MODEL --flag …`.
    SGLang images have no server entrypoint, but `IMAGE --model-path …` reads the same way."""
    eng = engines.engine_for_image(image)
    if eng is None or not cmd:
        return None
    if eng == "vllm" and cmd[0] == "serve":
        return Found(kind="server", argv=cmd, words=words, start=0, engine=eng,
                     launcher=f"{image} serve", rest=cmd[1:])
    if cmd[0].startswith("--") or (
            _MODEL_REF.fullmatch(cmd[0]) and any(a.startswith("--") for a in cmd[1:])):
        return Found(kind="server", argv=cmd, words=words, start=0, engine=eng,
                     launcher=f"{image} (entrypoint)", rest=cmd)
    return None


def _exec(argv: list[str], j: int, spelling: str, env: list[tuple[str, str]], scope: Scope,
          depth: int) -> Found | None:
    """`docker exec [options] CONTAINER CMD…` (also `docker compose exec SERVICE CMD…`): the
    launcher runs inside a container that something else started."""
    denv: list[tuple[str, str]] = []
    while j < len(argv) and argv[j].startswith("-"):
        flag, eq, val = argv[j].partition("=")
        value = val if eq else (argv[j + 1] if flag in _EXEC_VALUE and j + 1 < len(argv)
                                else None)
        j += 1 if eq or flag not in _EXEC_VALUE else 2
        if flag in ("-e", "--env") and value:
            k, eq2, v = value.partition("=")
            denv.append((k, v if eq2 else f"${{{k}}}"))
    if j + 1 >= len(argv):
        return None
    target = argv[j]
    found = _find(argv[j + 1 :], None, scope, depth + 1, top=False)
    if found is None:
        return None
    found.words = None
    found.wrappers.insert(0, spelling)
    found.docker = True
    found.env = env + denv + found.env
    found.container = ContainerUse(kind="exec", name=target, top_level=False)
    return found


def _compose(call: object, scope: Scope, depth: int, env: list[tuple[str, str]]) -> Found | None:
    """`docker compose … up` / `run`: the launcher is the service's command in the compose
    file; `docker compose exec SERVICE CMD` runs CMD in a service container."""
    from wikitools.runbook.compose import ComposeCall

    assert isinstance(call, ComposeCall)
    spelling = " ".join(basename(p) if k == 0 else p for k, p in enumerate(call.program))
    if call.subcommand == "exec":
        return _exec([*call.program, "exec", *call.args], len(call.program) + 1,
                     f"{spelling} exec", env, scope, depth)
    if call.subcommand not in ("up", "run", "start", "create"):
        return None
    names = call.files or DEFAULT_FILES
    path = next((n for n in names if n in scope.files), None)
    if path is None:
        path = next((k for k in scope.files for n in names
                     if basename(k) == basename(n)), None)
    text = scope.files.get(path) if path else scope.files.get(ANY_FILE)
    if path is None and text is not None:
        path = names[0]  # the compose file the page showed before this block
    if path is None or text is None:
        problem = (f"{spelling} {call.subcommand} needs its compose file "
                   f"({', '.join(call.files) or 'compose.yaml'}) on the page, in a block "
                   "marked `{ .yaml .runbook-file for=ID path=… }`")
        return Found(kind="none", argv=[], words=None, start=0, compose_problem=problem)
    try:
        compose = parse_compose(text)
    except ComposeError as exc:
        return Found(kind="none", argv=[], words=None, start=0,
                     compose_problem=f"{path}: {exc}")
    wanted = call.services if call.subcommand == "up" else call.services[:1]
    services = [s for s in compose.services if not wanted or s.name in wanted]
    for svc in services:
        found = _find(list(svc.argv), None, scope, depth + 1, top=False) if svc.argv else None
        if found is None and svc.image:
            found = _image_entrypoint(svc.image, list(svc.argv), None)
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


def _array_items(value: str) -> list[str] | None:
    """The items of a bash array assignment value `( a "b c" … )`."""
    text = value.strip()
    if not (text.startswith("(") and text.endswith(")")):
        return None
    try:
        return [w.value for w in tokenize(text[1:-1]) if not w.op]
    except ShellSyntaxError:
        return None


def _callables(script: str) -> dict[str, str | None]:
    """Shell functions defined in a script (name → None)."""
    return {m[1]: None for m in re.finditer(
        r"(?m)^[ \t]*(?:function[ \t]+)?([A-Za-z_][\w.-]*)[ \t]*\([ \t]*\)[ \t]*\{?", script)}


_FORWARD = re.compile(r"^\$(?:@|\*|\{@\}|\{\*\})$")


def find_in_script(script: str, depth: int = 0, scope: Scope | None = None,
                   ) -> tuple[Found, list[tuple[str, str]]] | None:
    """First launcher in a script, with the environment set before it (export / local / K=V /
    unset). A launcher that forwards "$@" takes its arguments from the script's call of the
    function or here-document script that holds it."""
    scope = scope if scope is not None else Scope()
    if depth == 0 or "<<" in script:
        for path, body in heredoc_files(script).items():
            scope.files.setdefault(path, body)
            scope.callables.setdefault(basename(path), body)
    for name, body in _callables(script).items():
        scope.callables.setdefault(name, body)
    env: list[tuple[str, str]] = []
    cmds = split_commands(script)
    first_problem: Found | None = None
    for index, cmd in enumerate(cmds):
        argv = cmd.argv
        if not argv:
            continue
        if argv[0] in ("export", "local", "declare", "typeset", "readonly"):
            env.extend(assignments([a for a in argv[1:] if not a.startswith("-")]))
            continue
        if argv[0] == "unset":
            names = {a for a in argv[1:] if not a.startswith("-")}
            env = [(k, v) for k, v in env if k not in names]
            continue
        pairs = assignments(argv)
        if len(pairs) == len(argv):
            for k, v in pairs:
                items = _array_items(v)
                if items is not None:
                    scope.arrays[k] = items
                else:
                    env.append((k, v))
            continue
        script_body = scope.callables.get(basename(argv[0]))
        if script_body:  # a here-document script called with arguments
            inner = find_in_script(script_body, depth + 1, scope)
            if inner is not None:
                found, inner_env = inner
                _forward(found, argv[1:])
                found.words = None
                return found, env + inner_env
            continue
        found = _find(argv, cmd.words if depth == 0 else None, scope, depth)
        if found is not None and found.kind == "none":
            first_problem = first_problem or found
            continue
        if found is not None:
            found.rest = _arrays(found.rest, scope)
            if any(_FORWARD.match(a) for a in found.rest):
                call = _call_of(cmds[index + 1 :], scope)
                if call is not None:
                    _forward(found, call)
                    found.words = None
            return found, env
    if first_problem is not None:
        return first_problem, env
    return None


def _arrays(rest: list[str], scope: Scope) -> list[str]:
    out: list[str] = []
    for a in rest:
        m = re.fullmatch(r"\$\{([A-Za-z_]\w*)\[[@*]\]\}", a)
        if m and m[1] in scope.arrays:
            out.extend(scope.arrays[m[1]])
        else:
            out.append(a)
    return out


def _call_of(later: list, scope: Scope) -> list[str] | None:
    """The arguments of the first later call of a function defined in the script."""
    for cmd in later:
        argv = cmd.argv
        if argv and argv[0] in scope.callables and scope.callables[argv[0]] is None:
            return argv[1:]
    return None


def _forward(found: Found, args: list[str]) -> None:
    """Put the call's arguments where the launcher forwards "$@"; positional parameters ($1,
    ${1:-default}) take the call's values."""
    rest: list[str] = []
    for a in found.rest:
        if _FORWARD.match(a):
            rest.extend(args)
        else:
            rest.append(a)
    found.rest = rest
    found.positional = list(args)


def find_launcher(text: str, files: Mapping[str, str] | None = None,
                  ) -> tuple[Found | None, list[tuple[str, str]], list[str]]:
    """The first launcher or client in `text`, the environment it gets, and problems. `files`:
    the file blocks of the runbook (path → text), for `docker compose up`."""
    problems: list[str] = []
    scope = Scope(files=dict(files or {}))
    try:
        res = find_in_script(text, 0, scope)
    except ShellSyntaxError as exc:
        return None, [], [str(exc)]
    if res is None:
        return None, [], problems
    found, env = res
    if found.kind == "none":
        return None, [], [found.compose_problem or "no engine launcher found"]
    if any(_FORWARD.match(a) for a in found.rest):
        _forward(found, [])  # forwards "$@" but nothing on the page calls it
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


def docker_run_offset(text: str) -> int | None:
    """Offset just after `run` in the block's first top-level `docker run` (or `docker container
    run`), where docker options can be added; None when there is none."""
    try:
        cmds = split_commands(text)
    except ShellSyntaxError:
        return None
    for cmd in cmds:
        argv = cmd.argv
        i = _strip_prefixes(argv, [], [])
        if i + 1 >= len(argv) or basename(argv[i]) not in ("docker", "podman", "nerdctl"):
            continue
        if argv[i + 1] == "run":
            return cmd.words[i + 1].end
        if argv[i + 1 : i + 3] == ["container", "run"]:
            return cmd.words[i + 2].end
    return None
