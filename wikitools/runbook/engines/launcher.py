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
import shlex
from collections.abc import Mapping
from urllib.parse import urlsplit

from wikitools.runbook.engines import catalog as engines
from wikitools.runbook.engines import docker_cli
from wikitools.runbook.engines import launch_containers as lc
from wikitools.runbook.engines.cases import choose_cases
from wikitools.runbook.engines.compose import compose_call, looks_like_compose
from wikitools.runbook.engines.found import ANY_FILE, OUTSIDE, Found, Scope
from wikitools.runbook.engines.shell import (
    ShellSyntaxError,
    SimpleCommand,
    Word,
    assignment,
    assignments,
    basename,
    heredoc_files,
    split_commands,
    tokenize,
)

__all__ = ["ANY_FILE", "Found", "Scope", "append_args", "find_in_script",
           "find_launcher", "insertion_point", "strip_prefixes", "top_level_launches"]

_PY = re.compile(r"^(?:.*/)?python(?:\d+(?:\.\d+)?)?$")
_PY_OPTS_WITH_VALUE = {"-X", "-W", "-c"}
_UV_VALUE_OPTIONS = {"--with", "--python", "-p", "--project", "--directory", "--env-file",
                     "--extra", "--group", "--index", "--with-requirements", "--package"}
_SHELLS = ("bash", "sh", "zsh", "dash")


def strip_prefixes(argv: list[str], env: list[tuple[str, str]], wrappers: list[str]) -> int:
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
        if base in engines.COMMAND_WRAPPERS:
            i = _past_wrapper(argv, i, engines.COMMAND_WRAPPERS[base])
            wrappers.append(base)
            continue
        if base == "uv" and argv[i + 1 : i + 2] == ["run"]:
            i += 2
            while i < len(argv) and argv[i].startswith("-"):
                takes = argv[i] in _UV_VALUE_OPTIONS
                i += 2 if takes else 1
            continue
        break
    return i


def _past_wrapper(argv: list[str], i: int, subcommands: tuple[str, ...]) -> int:
    """Index of the command a wrapper runs (`numactl -N 0 -m 0 CMD`, `taskset -c 0-7 CMD`,
    `nsys profile -o x --trace cuda CMD`): the first later word that starts a launcher the
    reader knows; else the first word after the wrapper's options, each option taken as
    holding its own value (`--membind=0`), as it cannot tell which options take one."""
    j = i + 1
    if argv[j : j + 1] and argv[j] in subcommands:
        j += 1
    hit = next((k for k in range(j, len(argv)) if not argv[k].startswith("-")
                and _classify(argv, k) is not None), None)
    if hit is not None:
        return hit
    while j < len(argv) and argv[j].startswith("-"):
        j += 1
    return j


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


_CAT_HEREDOC = re.compile(
    r"\$\(\s*cat\s+<<-?\s*(['\"]?)(\w+)\1[ \t]*\n(.*?)\n[ \t]*\2[ \t]*\n?\s*\)", re.S)


def _cat_heredoc(script: str) -> str:
    """The script a `bash -lc "$(cat <<EOF … EOF)"` runs: the here-document's text."""
    m = _CAT_HEREDOC.fullmatch(script.strip())
    return m[3] if m else script


def _find(argv: list[str], words: list[Word] | None, scope: Scope, depth: int = 0,
          top: bool = True) -> Found | None:
    env: list[tuple[str, str]] = []
    wrappers: list[str] = []
    i = strip_prefixes(argv, env, wrappers)
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
        f.wrappers = wrappers
        return f
    base = basename(argv[i])
    if depth > 4:
        return None
    if base in _SHELLS:
        return _shell_c(argv, i, base, env, scope, depth)
    call = compose_call(argv, i)
    if call is not None:
        composed = lc.compose_up(call, scope, depth, env, _find)
        if composed is not None and not top and composed.container is not None:
            composed.container = lc.not_top(composed.container)
        return composed
    if base in docker_cli.CONTAINER_PROGRAMS:
        return _container(argv, words, i, base, env, scope, depth, top)
    return None


def _shell_c(argv: list[str], i: int, base: str, env: list[tuple[str, str]], scope: Scope,
             depth: int) -> Found | None:
    """The launcher in the script of `bash -c SCRIPT [NAME ARGS…]` (`argv[i]`: the shell)."""
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
    inner = find_in_script(_cat_heredoc(script), depth + 1, scope)
    if inner is None:
        return None
    found, inner_env = inner
    passed = argv[j + 2 :]  # `sh -c SCRIPT NAME ARGS…`: NAME is $0, ARGS are "$@"
    if passed and any(_FORWARD.match(a) for a in found.rest):
        _forward(found, passed[1:])
    found.words = None
    found.wrappers.insert(0, f"{base} {argv[j]}")
    found.env = env + inner_env + found.env
    if found.container is not None and found.container.top_level:
        found.container = lc.not_top(found.container)
    return found


def _container(argv: list[str], words: list[Word] | None, i: int, base: str,
               env: list[tuple[str, str]], scope: Scope, depth: int, top: bool) -> Found | None:
    """`docker run …` / `docker exec …` (`argv[i]`: the container program)."""
    sub = argv[i + 1 : i + 3]
    if sub[:1] == ["run"] or sub == ["container", "run"]:
        j = i + 2 if argv[i + 1] == "run" else i + 3
        return lc.docker_run(argv, words, j, base, env, scope, depth, top, _find)
    if sub[:1] == ["exec"] or sub == ["container", "exec"]:
        j = i + 2 if argv[i + 1] == "exec" else i + 3
        return lc.docker_exec(argv, j, f"{base} exec", env, scope, depth, _find)
    return None


def _array_items(value: str) -> list[str] | None:  # the items of `( a "b c" … )`
    text = value.strip()
    if not (text.startswith("(") and text.endswith(")")):
        return None
    try:
        return [w.value for w in tokenize(text[1:-1]) if not w.op]
    except ShellSyntaxError:
        return None


def _callables(script: str) -> dict[str, str | None]:  # shell functions (name → None)
    return {m[1]: None for m in re.finditer(
        r"(?m)^[ \t]*(?:function[ \t]+)?([A-Za-z_][\w.-]*)[ \t]*\([ \t]*\)[ \t]*\{?", script)}


_FORWARD = re.compile(r"^\$(?:@|\*|\{@\}|\{\*\})$")


def find_in_script(script: str, depth: int = 0, scope: Scope | None = None,
                   ) -> tuple[Found, list[tuple[str, str]]] | None:
    """First launcher in a script, with the environment set before it (export / local / K=V /
    unset). A launcher that forwards "$@" takes its arguments from the script's call of the
    function or here-document script that holds it."""
    scope = _learn_scripts(script, scope if scope is not None else Scope())
    env: list[tuple[str, str]] = []
    cmds = split_commands(script)
    first_problem: Found | None = None
    first_poll: tuple[Found, list[tuple[str, str]]] | None = None
    for index, cmd in enumerate(cmds):
        argv = cmd.argv
        if not argv:
            continue
        assigned = _assigned(argv, env, scope)
        if assigned is not None:
            env = assigned
            continue
        lead = 0  # `PORT=8402 /tmp/run-x`: the assignments before the script are its env
        while lead < len(argv) - 1 and assignment(argv[lead]) is not None:
            lead += 1
        run = _script_word(argv, lead)
        script_body = scope.callables.get(basename(argv[run])) if run < len(argv) else None
        if script_body:  # a script of the runbook (`/tmp/run-x`, `bash x.sh`) with arguments
            called = _called_script(script_body, argv, lead, run, env, scope, depth)
            if called is not None:
                return called
            continue
        hit = _find(argv, cmd.words if depth == 0 else None, scope, depth)
        if hit is not None and hit.kind == "none":
            first_problem = first_problem or hit
            continue
        if hit is not None and _health_poll(hit):  # waits for a server: a later one is the launch
            first_poll = first_poll or (hit, list(env))
            continue
        if hit is not None:
            hit.rest = _arrays(hit.rest, scope)
            if any(_FORWARD.match(a) for a in hit.rest):
                call = _call_of(cmds[index + 1 :], scope)
                if call is not None:
                    _forward(hit, call)
                    hit.words = None
            return hit, env
    if first_problem is not None:
        return first_problem, env
    return first_poll


def _health_poll(hit: Found) -> bool:
    """A `curl` of an engine's readiness path (`curl -sf http://…:8000/health`): a script
    waiting for a server, not the command it runs."""
    if hit.kind != "client" or hit.tool != "curl":
        return False
    urls = [a for a in hit.rest if "://" in a]
    return any(urlsplit(u).path.rstrip("/") in engines.HEALTH_PATHS for u in urls)


def _learn_scripts(script: str, scope: Scope) -> Scope:
    """`scope` with the here-document files and shell functions `script` defines."""
    if "<<" in script:  # here-documents
        for path, body in heredoc_files(script).items():
            scope.files.setdefault(path, body)
            scope.callables.setdefault(basename(path), body)
    for name, fn_body in _callables(script).items():
        scope.callables.setdefault(name, fn_body)
    return scope


def _assigned(argv: list[str], env: list[tuple[str, str]], scope: Scope,
              ) -> list[tuple[str, str]] | None:
    """The environment after a command that only sets or unsets variables (export, local,
    unset, K=V, arrays); None for any other command."""
    if argv[0] in ("export", "local", "declare", "typeset", "readonly"):
        pairs = assignments([a for a in argv[1:] if not a.startswith("-")])
        scope.values.update(pairs)
        return [*env, *pairs]
    if argv[0] == "unset":
        names = {a for a in argv[1:] if not a.startswith("-")}
        return [(k, v) for k, v in env if k not in names]
    pairs = assignments(argv)
    if len(pairs) != len(argv):
        return None
    out = list(env)
    for k, v in pairs:
        items = _array_items(v)
        if items is not None:
            scope.arrays[k] = items
        else:
            out.append((k, v))
            scope.values[k] = v  # `"$IMAGE"` in a later docker run
    return out


def _called_script(body: str, argv: list[str], lead: int, run: int, env: list[tuple[str, str]],
                   scope: Scope, depth: int) -> tuple[Found, list[tuple[str, str]]] | None:
    """The launcher inside a script of the runbook that `argv` calls with arguments."""
    known = dict(env + assignments(argv[:lead]))  # what the caller sets for it
    inner = find_in_script(choose_cases(body, known), depth + 1, scope)
    if inner is None:
        return None
    found, inner_env = inner
    _forward(found, argv[run + 1 :])
    found.words = None
    return found, env + assignments(argv[:lead]) + inner_env


def _script_word(argv: list[str], lead: int) -> int:
    """Index of the word naming the script a command runs: the command itself, or the file a
    shell runs (`bash x.sh ARGS`; not `bash -c "…"`, whose string `_find` reads)."""
    if basename(argv[lead]) not in _SHELLS:
        return lead
    k = lead + 1
    while k < len(argv) and argv[k].startswith("-"):
        if not argv[k].startswith("--") and "c" in argv[k][1:]:
            return lead
        k += 1
    return k


def _arrays(rest: list[str], scope: Scope) -> list[str]:
    out: list[str] = []
    for a in rest:
        m = re.fullmatch(r"\$\{([A-Za-z_]\w*)\[[@*]\]\}", a)
        if m and m[1] in scope.arrays:
            out.extend(scope.arrays[m[1]])
        else:
            out.append(a)
    return out


def _call_of(later: list[SimpleCommand], scope: Scope) -> list[str] | None:
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


def _scope(files: Mapping[str, str] | None, values: Mapping[str, str] | None = None,
           declared: str | None = None) -> Scope:
    """A block's scope with the runbook's files (one that is not a compose file is a script the
    block may run by its path), the values and arrays set before it runs, and the engine the
    block declares."""
    scope = Scope(files=dict(files or {}), values=dict(values or {}), declared=declared)
    for k, v in (values or {}).items():
        if (items := _array_items(v)) is not None:
            scope.arrays[k] = items
    for path, body in scope.files.items():
        if path != ANY_FILE and body != OUTSIDE and not looks_like_compose(body):
            scope.callables.setdefault(basename(path), body)
    return scope


def find_launcher(text: str, files: Mapping[str, str] | None = None, values: Mapping[str,
                  str] | None = None, declared: str | None = None,
                  ) -> tuple[Found | None, list[tuple[str, str]], list[str]]:
    """The first launcher or client in `text`, the environment it gets, and problems. `files`:
    the runbook's file blocks (path → text); `values`: variables set before the block runs;
    `declared`: the engine the block declares (a container's unknown program serves it)."""
    problems: list[str] = []
    scope = _scope(files, values, declared)
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


def top_level_launches(text: str, files: Mapping[str, str] | None = None,
                       ) -> list[tuple[int, str]]:
    """Every top-level command of `text` that starts a server (an engine launcher, `docker run`
    of one, `docker compose … up`, or a here-document script or function that holds one), as
    (offset of the command, its first words). More than one means the block lists alternatives
    (or starts several servers), which one runbook cannot stand for."""
    try:
        cmds = split_commands(text)
    except ShellSyntaxError:
        return []
    scope = _scope(files)
    scripts = heredoc_files(text) if "<<" in text else {}
    for path, body in scripts.items():
        scope.files.setdefault(path, body)
        scope.callables.setdefault(basename(path), body)
    functions = _callables(text)
    out: list[tuple[int, str]] = []
    for cmd in cmds:
        argv = cmd.argv
        if not argv or argv[0] in ("export", "local", "declare", "readonly", "unset"):
            continue
        env: list[tuple[str, str]] = []
        i = strip_prefixes(argv, env, [])
        if i >= len(argv):
            continue
        head = " ".join(argv[i : i + 3])
        fn_body = scope.callables.get(basename(argv[i]))
        if fn_body:
            try:
                inner = find_in_script(fn_body, 1, Scope(files=dict(scope.files)))
            except ShellSyntaxError:
                inner = None
            if inner is not None and inner[0].kind == "server":
                out.append((cmd.words[0].start, head))
            continue
        if argv[i] in functions or argv[i] == "{":
            continue  # a shell function: its call and its body are not counted apart
        call = compose_call(argv, i)
        if call is not None:
            if call.subcommand == "up":
                out.append((cmd.words[0].start, head))
            continue
        try:
            found = _find(argv, cmd.words, Scope(files=dict(scope.files)), 0)
        except ShellSyntaxError:
            found = None
        if found is not None and found.kind == "server":
            out.append((cmd.words[0].start, head))
    return out


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
    return text[:at] + " " + shlex.join(args) + text[at:]
