"""Understanding shell commands from runbook blocks.

The text of a block is what runs (through `bash -c`); this module only reads it: it splits the
text the way a POSIX shell does (quotes, escapes, backslash-newline continuations, comments,
`;`/`&&`/`||`/`|`/newline separators, heredocs), collects environment assignments (`export`
lines, `K=V cmd` prefixes, `docker run -e`), unwraps `docker run … IMAGE CMD`, `bash -lc "…"`,
`exec`, `env`, `nohup`, and reads the engine or client flags with their aliases.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from wikitools.runbook import engines
from wikitools.runbook.model import ClientCommand, EngineCommand

# --------------------------------------------------------------------------- shell words


@dataclass(slots=True)
class Word:
    value: str  # after quote removal (no expansion)
    start: int  # offset of the first raw character in the text
    end: int  # offset after the last raw character
    quoted: bool = False  # any quoting inside the word
    op: bool = False  # an operator (; && || | & ( ) newline) or redirection


@dataclass(slots=True)
class SimpleCommand:
    words: list[Word] = field(default_factory=list)

    @property
    def argv(self) -> list[str]:
        return [w.value for w in self.words]


class ShellSyntaxError(ValueError):
    pass


_SEPARATORS = {";", "&&", "||", "|", "&", "\n", "(", ")", "|&", ";;"}
_REDIRECT = re.compile(r"^(\d*)(>>|>&|<&|>\||>|<<<|<<-|<<|<)$|^&>>?$")


def tokenize(text: str) -> list[Word]:
    """Split shell text into words and operators. Raises ShellSyntaxError on an unclosed quote."""
    out: list[Word] = []
    i, n = 0, len(text)
    heredocs: list[tuple[str, bool]] = []  # (delimiter, strip tabs) pending at the next newline

    while i < n:
        c = text[i]
        if c in " \t\r":
            i += 1
            continue
        if c == "\\" and i + 1 < n and text[i + 1] == "\n":
            i += 2
            continue
        if c == "#":
            while i < n and text[i] != "\n":
                i += 1
            continue
        if c == "\n":
            out.append(Word("\n", i, i + 1, op=True))
            i += 1
            if heredocs:
                i = _skip_heredocs(text, i, heredocs)
                heredocs = []
            continue
        two = text[i : i + 2]
        if two == "&>":  # &> file, &>> file: redirection of both streams
            op = "&>>" if text[i : i + 3] == "&>>" else "&>"
            out.append(Word(op, i, i + len(op), op=True))
            i += len(op)
            continue
        if two in ("&&", "||", "|&", ";;"):
            out.append(Word(two, i, i + 2, op=True))
            i += 2
            continue
        if c in ";&|()":
            out.append(Word(c, i, i + 1, op=True))
            i += 1
            continue
        # redirections: [n]> >> < << <<- <<< >& <&
        m = re.match(r"\d*(?:>>|>&|<&|>\||<<<|<<-|<<|>|<)", text[i:])
        if m and (m.group(0)[0] in "<>" or _at_word_start(text, i)):
            op = m.group(0)
            out.append(Word(op, i, i + len(op), op=True))
            i += len(op)
            if op.endswith(("<<", "<<-")):
                j = i
                while j < n and text[j] in " \t":
                    j += 1
                word, j = _read_word(text, j)
                if word is not None:
                    out.append(word)
                    heredocs.append((word.value, op.endswith("-")))
                i = j
            continue
        word, i = _read_word(text, i)
        if word is not None:
            out.append(word)
    return out


def _at_word_start(text: str, i: int) -> bool:
    return i == 0 or text[i - 1] in " \t\n;&|()"


def _skip_heredocs(text: str, i: int, heredocs: list[tuple[str, bool]]) -> int:
    for delim, strip in heredocs:
        while i < len(text):
            eol = text.find("\n", i)
            line = text[i:] if eol == -1 else text[i:eol]
            i = len(text) if eol == -1 else eol + 1
            if (line.lstrip("\t") if strip else line) == delim:
                break
    return i


def _read_word(text: str, i: int) -> tuple[Word | None, int]:
    start = i
    n = len(text)
    buf: list[str] = []
    quoted = False
    while i < n:
        c = text[i]
        if c in " \t\r\n;&|()<>":
            if c in "<>" and buf and buf[-1] == "=":  # a=<x> is unusual; stop anyway
                break
            break
        if c == "\\":
            if i + 1 < n and text[i + 1] == "\n":
                i += 2
                continue
            if i + 1 < n:
                buf.append(text[i + 1])
                quoted = True
                i += 2
                continue
            i += 1
            continue
        if c == "'":
            end = text.find("'", i + 1)
            if end == -1:
                raise ShellSyntaxError(f"unclosed single quote at offset {i}")
            buf.append(text[i + 1 : end])
            quoted = True
            i = end + 1
            continue
        if c == '"':
            i += 1
            quoted = True
            while True:
                if i >= n:
                    raise ShellSyntaxError(f"unclosed double quote at offset {start}")
                d = text[i]
                if d == '"':
                    i += 1
                    break
                if d == "\\" and i + 1 < n and text[i + 1] in '$`"\\\n':
                    if text[i + 1] != "\n":
                        buf.append(text[i + 1])
                    i += 2
                    continue
                if d == "$" and text[i + 1 : i + 2] == "(":
                    j = _match_paren(text, i + 1)
                    buf.append(text[i:j])
                    i = j
                    continue
                buf.append(d)
                i += 1
            continue
        if c == "$" and text[i + 1 : i + 2] in ("(", "{"):
            j = _match_paren(text, i + 1) if text[i + 1] == "(" else _match_brace(text, i + 1)
            buf.append(text[i:j])
            i = j
            continue
        if c == "=" and text[i + 1 : i + 2] == "(" and re.fullmatch(r"[A-Za-z_]\w*", "".join(buf)):
            j = _match_paren(text, i + 1)  # bash array assignment NAME=( … )
            buf.append(text[i:j])
            i = j
            continue
        buf.append(c)
        i += 1
    if i == start:
        return None, i
    return Word("".join(buf), start, i, quoted=quoted), i


def _match_paren(text: str, i: int) -> int:
    """`text[i]` is '('; return the offset after its match (quotes respected)."""
    depth = 0
    n = len(text)
    while i < n:
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if c == "'":
            end = text.find("'", i + 1)
            i = n if end == -1 else end + 1
            continue
        if c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            i = j + 1
            continue
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    raise ShellSyntaxError("unclosed '('")


def _match_brace(text: str, i: int) -> int:
    end = text.find("}", i)
    if end == -1:
        raise ShellSyntaxError("unclosed '${'")
    return end + 1


def split_commands(text: str) -> list[SimpleCommand]:
    """Simple commands in order; redirections (and their targets) are dropped."""
    cmds: list[SimpleCommand] = []
    cur = SimpleCommand()
    words = tokenize(text)
    skip_next = False
    for w in words:
        if skip_next:
            skip_next = False
            continue
        if w.op and _REDIRECT.match(w.value):
            skip_next = True  # the target file, or the heredoc delimiter
            continue
        if w.op:
            if cur.words:
                cmds.append(cur)
            cur = SimpleCommand()
            continue
        cur.words.append(w)
    if cur.words:
        cmds.append(cur)
    return cmds


# --------------------------------------------------------------------------- expansion

_ASSIGN = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.S)
_VAR = re.compile(r"\$\{([A-Za-z_]\w*)(?:(:?[-=+?])([^}]*))?\}|\$([A-Za-z_]\w*)")


def expand(value: str, env: dict[str, str]) -> str:
    """Expand `$V`, `${V}`, `${V:-default}` from `env`; unknown variables become their default
    (or stay as written when there is none). No command substitution."""

    def sub(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(4)
        op, default = m.group(2), m.group(3)
        if name in env and (env[name] != "" or not (op or "").startswith(":")):
            return env[name] if op not in ("+", ":+") else (default or "")
        if op in ("-", ":-", "=", ":="):
            return expand(default or "", env)
        return m.group(0)

    return _VAR.sub(sub, value)


# --------------------------------------------------------------------------- interpretation


def _basename(path: str) -> str:
    return path.rstrip("/").rsplit("/", 1)[-1]


@dataclass(slots=True)
class _Found:
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

# docker run options that take a value (long names without '='; short ones)
_DOCKER_VALUE = {
    "-e", "--env", "-v", "--volume", "-p", "--publish", "--gpus", "--ipc", "--shm-size", "--name",
    "--network", "--net", "--entrypoint", "-w", "--workdir", "-u", "--user", "--ulimit",
    "--runtime", "--env-file", "--mount", "-l", "--label", "--cpus", "--cpuset-cpus", "-m",
    "--memory", "--device", "--add-host", "--cap-add", "--cap-drop", "--security-opt",
    "--restart", "--platform", "--pull", "--pid", "--hostname", "-h", "--log-driver", "--log-opt",
    "--memory-swap", "--group-add", "--stop-signal", "--stop-timeout", "--tmpfs", "--dns",
    "--cgroupns", "--uts", "--userns", "--health-cmd", "--gpus-all", "--cidfile",
    "--volumes-from", "--link", "--mac-address", "--ip", "--expose", "--label-file",
}
_DOCKER_BOOL_SHORT = set("dit")  # -d -i -t and combinations (-it, -dit)


def _assignments(words: list[str]) -> list[tuple[str, str]]:
    """The `NAME=value` words among `words`, as (name, value), in order."""
    return [(m.group(1), m.group(2)) for m in map(_ASSIGN.match, words) if m]


def _strip_prefixes(argv: list[str], env: list[tuple[str, str]], wrappers: list[str]) -> int:
    """Index of the real command after `K=V` prefixes and exec/env/nohup/time/sudo/uv run."""
    i = 0
    while i < len(argv):
        a = argv[i]
        m = _ASSIGN.match(a)
        if m:
            env.append((m.group(1), m.group(2)))
            i += 1
            continue
        base = _basename(a)
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
    """(kind, engine-or-tool, launcher spelling, index after launcher) or None."""
    if i >= len(argv):
        return None
    a = argv[i]
    base = _basename(a)
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
        if j < len(argv) and _basename(argv[j]) == "benchmark_serving.py":
            return "client", "vllm-bench", f"{a} {argv[j]}", j + 1
    return None


def _find(argv: list[str], words: list[Word] | None, depth: int = 0) -> _Found | None:
    env: list[tuple[str, str]] = []
    wrappers: list[str] = []
    i = _strip_prefixes(argv, env, wrappers)
    if i >= len(argv):
        return None
    hit = _classify(argv, i)
    if hit:
        kind, name, spelling, after = hit
        f = _Found(kind=kind, argv=argv, words=words, start=i, launcher=spelling, rest=argv[after:])
        if kind == "server":
            f.engine = name
        else:
            f.tool = name
        f.env = env
        return f
    base = _basename(argv[i])
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
        inner = _find_in_script(script, depth + 1)
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
) -> _Found | None:
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
        elif name in _DOCKER_VALUE:
            value = argv[j + 1] if j + 1 < len(argv) else None
            j += 2
        elif re.fullmatch(r"-[a-zA-Z]+", name) and name[-1] in "evpwuml" and set(name[1:-1]) <= (
            _DOCKER_BOOL_SHORT
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
        # the vllm-openai image's entrypoint is `vllm`: `IMAGE serve MODEL …`; SGLang images
        # have no launcher entrypoint, but `IMAGE --model-path …` is read the same way.
        eng = engines.engine_for_image(image)
        if eng == "vllm" and cmd[:1] == ["serve"]:
            found = _Found(kind="server", argv=cmd, words=sub_words, start=0, engine="vllm",
                           launcher=f"{image} serve", rest=cmd[1:])
        elif eng == "vllm" and cmd[:1] and cmd[0].startswith("--"):
            found = _Found(kind="server", argv=cmd, words=sub_words, start=0, engine="vllm",
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


def _find_in_script(script: str, depth: int = 0) -> tuple[_Found, list[tuple[str, str]]] | None:
    """First launcher in a script, with the environment set before it (export / K=V / unset)."""
    env: list[tuple[str, str]] = []
    for cmd in split_commands(script):
        argv = cmd.argv
        if not argv:
            continue
        if argv[0] == "export":
            env.extend(_assignments(argv[1:]))
            continue
        if argv[0] == "unset":
            names = {a for a in argv[1:] if not a.startswith("-")}
            env = [(k, v) for k, v in env if k not in names]
            continue
        pairs = _assignments(argv)
        if len(pairs) == len(argv):
            env.extend(pairs)
            continue
        found = _find(argv, cmd.words if depth == 0 else None, depth)
        if found is not None:
            return found, env
    return None


# --------------------------------------------------------------------------- flags

_SERVER_ALIASES = {
    "--tensor-parallel-size": "tp", "-tp": "tp", "--tp": "tp", "--tp-size": "tp",
    "--pipeline-parallel-size": "pp", "-pp": "pp", "--pp": "pp", "--pp-size": "pp",
    "--data-parallel-size": "dp", "-dp": "dp", "--dp": "dp", "--dp-size": "dp",
    "--decode-context-parallel-size": "dcp", "-dcp": "dcp", "--dcp": "dcp", "--dcp-size": "dcp",
    "--enable-expert-parallel": "ep", "--ep": "ep", "-ep": "ep",
    "--expert-parallel-size": "ep_size", "--ep-size": "ep_size",
    "--port": "port", "--host": "host",
    "--quantization": "quantization", "-q": "quantization",
    "--kv-cache-dtype": "kv_cache_dtype",
    "--model": "model", "--model-path": "model",
    "--speculative-config": "speculative", "-sc": "speculative",
}
# canonical spellings for flags kept in `flags`
_CANONICAL = {
    "--speculative-algo": "--speculative-algorithm",
    "-O": "--compilation-config",
    "-cc": "--compilation-config",
}
_BOOL_FLAGS = {
    "--trust-remote-code", "--enable-expert-parallel", "--enable-prefix-caching",
    "--no-enable-prefix-caching", "--enable-chunked-prefill", "--no-enable-chunked-prefill",
    "--enable-auto-tool-choice", "--async-scheduling", "--no-async-scheduling", "--enforce-eager",
    "--disable-custom-all-reduce", "--enable-metrics", "--disable-log-requests",
    "--disable-log-stats", "--enable-flashinfer-autotune", "--sleep-on-idle",
    "--language-model-only", "--enable-pcie-oneshot-allreduce", "--no-scheduler-reserve-full-isl",
    "--disable-radix-cache", "--enable-torch-compile", "--disable-cuda-graph", "--ep",
    "--enable-dp-attention", "--skip-server-warmup", "--enable-log-requests",
    "--enable-mixed-chunk", "--save-result", "--save-detailed", "--append-result",
    "--ignore-eos", "--disable-tqdm", "--disable-ignore-eos", "--disable-stream",
    "--apply-chat-template", "--flush-cache", "--output-details", "--return-logprob",
    "--profile", "--log_samples", "--log-samples", "--apply_chat_template",
    "--fewshot_as_multiturn", "--enable-sleep-mode", "--enable-lora", "-it",
    "--headless", "--skip-tokenizer-init", "--cache-report", "--plot-throughput",
    "--tokenize-prompt", "--enable-expert-parallel-load-balancer", "--enable-eplb",
    "--enable-dbo", "--enable-return-routed-experts",
}


def _looks_like_value(tok: str) -> bool:
    return not tok.startswith("-") or tok == "-" or bool(re.fullmatch(r"-\d+(\.\d+)?", tok))


def parse_flags(args: list[str]) -> tuple[list[str], list[tuple[str, str | None]]]:
    """(positionals, [(flag, value-or-None)]) with `--flag=value` and `--flag value` both read."""
    pos: list[str] = []
    flags: list[tuple[str, str | None]] = []
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            pos.extend(args[i + 1 :])
            break
        if a.startswith("-") and not _looks_like_value(a):
            name, eq, val = a.partition("=")
            if eq:
                flags.append((name, val))
                i += 1
                continue
            base = name.split(".", 1)[0]
            if (name in _BOOL_FLAGS or base in _BOOL_FLAGS) and "." not in name:
                flags.append((name, None))
                i += 1
                continue
            if i + 1 < len(args) and _looks_like_value(args[i + 1]):
                flags.append((name, args[i + 1]))
                i += 2
                continue
            flags.append((name, None))
            i += 1
            continue
        pos.append(a)
        i += 1
    return pos, flags


def _norm_flag(name: str) -> str:
    if name.startswith("--"):
        head, dot, tail = name.partition(".")
        head = head.replace("_", "-")
        name = head + dot + tail
    return _CANONICAL.get(name, name)


def _to_int(value: str | None, env: dict[str, str]) -> int | None:
    if value is None:
        return None
    v = expand(value, env).strip()
    return int(v) if re.fullmatch(r"\d+", v) else None


def _json_value(value: str) -> Any:
    try:
        return json.loads(value)
    except ValueError:
        low = value.lower()
        if low in ("true", "false"):
            return low == "true"
        return value


def _parse_json_arg(value: str, problems: list[str], flag: str) -> dict[str, Any] | None:
    for candidate in (value, value.replace('\\"', '"')):
        try:
            data = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(data, dict):
            return data
    problems.append(f"{flag} value is not a JSON object: {value[:60]}")
    return None


# --------------------------------------------------------------------------- public API


def _script_env_and_found(text: str) -> tuple[_Found | None, list[tuple[str, str]], list[str]]:
    problems: list[str] = []
    try:
        res = _find_in_script(text)
    except ShellSyntaxError as exc:
        return None, [], [str(exc)]
    if res is None:
        return None, [], problems
    found, env = res
    return found, env + found.env, problems


def parse_server_command(text: str, extra_env: dict[str, str] | None = None) -> EngineCommand:
    """Understand a server block. `extra_env` (the block's env= attribute) is used only to
    expand `${VAR}` in flag values."""
    found, env, problems = _script_env_and_found(text)
    if found is None or found.kind != "server":
        if not problems:
            problems.append("no engine launcher found (vllm serve, python -m "
                            "vllm.entrypoints.openai.api_server, python -m sglang.launch_server)")
        return EngineCommand(text=text, env=tuple(env), problems=tuple(problems))
    scope = dict(extra_env or {})
    scope.update(env)
    positionals, raw_flags = parse_flags(found.rest)
    values: dict[str, Any] = {}
    spec: dict[str, Any] | None = None
    sglang_spec: dict[str, Any] = {}
    flags: list[tuple[str, str | None]] = []
    for name, value in raw_flags:
        key = _SERVER_ALIASES.get(name) or _SERVER_ALIASES.get(_norm_flag(name))
        norm = _norm_flag(name)
        if key == "speculative":
            if value is not None:
                parsed = _parse_json_arg(expand(value, scope), problems, norm)
                if parsed is not None:
                    spec = {**(spec or {}), **parsed}
            continue
        if norm.startswith("--speculative-config."):
            spec = spec or {}
            spec[norm.split(".", 1)[1]] = _json_value(expand(value or "true", scope))
            continue
        if found.engine == "sglang" and norm.startswith("--speculative-"):
            field_name = norm[len("--speculative-"):].replace("-", "_")
            sglang_spec[field_name] = _json_value(expand(value, scope)) if value else True
            flags.append((norm, value))
            continue
        if key == "ep":
            values["ep"] = True if value is None else expand(value, scope).lower() not in (
                "0", "false", "no")
            continue
        if key == "ep_size":
            n = _to_int(value, scope)
            values["ep"] = bool(n and n > 1)
            flags.append((norm, value))
            continue
        if key:
            values[key] = value
            continue
        flags.append((norm, value))
    if sglang_spec:
        spec = {**sglang_spec, **(spec or {})}
        if "algo" in spec:
            spec["algorithm"] = spec.pop("algo")
    model = values.get("model")
    if model is None and positionals and found.engine == "vllm":
        model = positionals[0]
    model = expand(model, scope) if model else None
    port = _to_int(values.get("port"), scope)
    if values.get("port") is not None and port is None:
        problems.append(f"--port value not understood: {values['port']}")
    return EngineCommand(
        text=text,
        env=tuple(env),
        argv=tuple(found.argv[found.start :]),
        engine=found.engine,
        launcher=found.launcher,
        model=model,
        tp=_to_int(values.get("tp"), scope),
        pp=_to_int(values.get("pp"), scope),
        dp=_to_int(values.get("dp"), scope),
        dcp=_to_int(values.get("dcp"), scope),
        ep=bool(values.get("ep", False)),
        port=port,
        host=expand(values["host"], scope) if values.get("host") else None,
        quantization=expand(values["quantization"], scope) if values.get("quantization") else None,
        kv_cache_dtype=(
            expand(values["kv_cache_dtype"], scope) if values.get("kv_cache_dtype") else None
        ),
        speculative=spec,
        image=found.image,
        docker=found.docker,
        docker_gpus=found.docker_gpus,
        docker_env=tuple(found.docker_env),
        wrappers=tuple(found.wrappers),
        flags=tuple(flags),
        problems=tuple(problems),
    )


_CLIENT_KEYS = {
    "--model": "model", "--base-url": "base_url", "--host": "host", "--port": "port",
    "--backend": "backend", "--dataset-name": "dataset", "--dataset": "dataset",
    "--num-prompts": "num_prompts", "--max-concurrency": "max_concurrency",
    "--request-rate": "request_rate",
}


def parse_client_command(text: str) -> ClientCommand:
    found, env, problems = _script_env_and_found(text)
    if found is None or found.kind != "client":
        if not problems:
            problems.append("no client command found (vllm bench serve, python -m "
                            "sglang.bench_serving, lm_eval, curl)")
        return ClientCommand(text=text, env=tuple(env), problems=tuple(problems))
    _positionals, raw_flags = parse_flags(found.rest)
    values: dict[str, str | None] = {}
    flags: list[tuple[str, str | None]] = []
    url = None
    if found.tool == "curl":
        # curl flags with values are many; only the URL matters
        for a in found.rest:
            if re.match(r"^https?://", a) or re.match(r"^(localhost|127\.0\.0\.1|\[::1\])[:/]", a):
                url = a
                break
    else:
        for name, value in raw_flags:
            norm = _norm_flag(name)
            if found.tool == "lm-eval" and norm == "--model-args" and value:
                m = re.search(r"base_url=([^,]+)", value)
                if m:
                    values["base_url"] = m.group(1)
                m = re.search(r"(?:^|,)model=([^,]+)", value)
                if m:
                    values["model"] = m.group(1)
                flags.append((norm, value))
                continue
            key = _CLIENT_KEYS.get(norm)
            if key and found.tool != "lm-eval":
                values[key] = value
                continue
            flags.append((norm, value))
    scope = dict(env)
    port = _to_int(values.get("port"), scope)
    return ClientCommand(
        text=text,
        env=tuple(env),
        argv=tuple(found.argv[found.start :]),
        tool=found.tool,
        launcher=found.launcher,
        model=values.get("model"),
        base_url=values.get("base_url"),
        host=values.get("host"),
        port=port,
        backend=values.get("backend"),
        dataset=values.get("dataset"),
        num_prompts=values.get("num_prompts"),
        max_concurrency=values.get("max_concurrency"),
        request_rate=values.get("request_rate"),
        url=url,
        docker=found.docker,
        wrappers=tuple(found.wrappers),
        flags=tuple(flags),
        problems=tuple(problems),
    )


def insertion_point(text: str) -> int | None:
    """Offset in `text` just after the last argument of the first launcher or client command,
    where extra arguments can be inserted so that they reach the engine or client. None when the
    command sits inside a quoted string (`bash -lc "…"`) or an entrypoint, where an insertion
    would not reach it."""
    try:
        res = _find_in_script(text)
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


def shell_quote(arg: str) -> str:
    if arg and re.fullmatch(r"[A-Za-z0-9_./:=,+@%-]+", arg):
        return arg
    return "'" + arg.replace("'", "'\"'\"'") + "'"


def mentions_launcher(text: str) -> EngineCommand | ClientCommand | None:
    """For `wiki runbook scan`: the server or client command a plain block holds, if any."""
    found, _env, _problems = _script_env_and_found(text)
    if found is None:
        return None
    if found.kind == "server":
        return parse_server_command(text)
    return parse_client_command(text)


def env_assignments(text: str) -> list[tuple[str, str, str]]:
    """Every environment assignment in a block, wherever it is: (name, value, how) with how one
    of prefix | export | docker-e | assign. Used by operational-rule checks (empty
    NCCL_GRAPH_FILE)."""
    out: list[tuple[str, str, str]] = []
    _collect_env(text, out, 0)
    return out


def _collect_env(text: str, out: list[tuple[str, str, str]], depth: int) -> None:
    try:
        cmds = split_commands(text)
    except ShellSyntaxError:
        return
    for cmd in cmds:
        argv = cmd.argv
        if not argv:
            continue
        if argv[0] == "export":
            out.extend((k, v, "export") for k, v in _assignments(argv[1:]))
            continue
        i = 0
        while i < len(argv) and _ASSIGN.match(argv[i]):
            m = _ASSIGN.match(argv[i])
            assert m
            out.append((m.group(1), m.group(2), "prefix" if i + 1 < len(argv) or i else "assign"))
            i += 1
        rest = argv[i:]
        if i == len(argv) and i == 1:
            out[-1] = (out[-1][0], out[-1][1], "assign")
        for j, a in enumerate(rest):
            if a in ("-e", "--env") and j + 1 < len(rest):
                k, eq, v = rest[j + 1].partition("=")
                if eq:
                    out.append((k, v, "docker-e"))
            elif a.startswith("--env="):
                k, eq, v = a[len("--env="):].partition("=")
                if eq:
                    out.append((k, v, "docker-e"))
            elif a.startswith("-") and "c" in a[1:] and not a.startswith("--") and depth < 4:
                base = _basename(rest[0]) if rest else ""
                if base in ("bash", "sh", "zsh", "dash") and j + 1 < len(rest):
                    _collect_env(rest[j + 1], out, depth + 1)
