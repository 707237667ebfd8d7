"""What a server or client block's command says: the engine or client tool, the model, parallel
sizes, port, speculative decoding and the other flags, read with their aliases (tables in
`engines`). Finding the launcher is `launcher`'s job; reading the shell is `shell`'s."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from wikitools.runbook.engines import catalog as engines
from wikitools.runbook.engines.launcher import find_launcher
from wikitools.runbook.engines.shell import resolve as expand
from wikitools.runbook.engines.types import ClientCommand, EngineCommand

# --------------------------------------------------------------------------- flags

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
            if (name in engines.BOOL_FLAGS or base in engines.BOOL_FLAGS) and "." not in name:
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


def _norm_flag(name: str, canonical: Mapping[str, str] | None = None) -> str:
    """The canonical spelling: `--a_b` → `--a-b`, then the engine's own and the common
    canonical names."""
    if name.startswith("--"):
        head, dot, tail = name.partition(".")
        head = head.replace("_", "-")
        name = head + dot + tail
    if canonical and name in canonical:
        return canonical[name]
    return engines.CANONICAL_FLAGS.get(name, name)


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



_HOST_NETWORK = re.compile(r"--net(?:work)?[= ]+host\b")


def _published(maps: list[str], port: int | None, scope: dict[str, str], text: str,
               ) -> int | None:
    """The host port that `docker run -p [IP:]HOST:CONTAINER` maps to the engine's port; None
    without such a map (or with host networking, where -p does nothing)."""
    if port is None or _HOST_NETWORK.search(text):
        return None
    for spec in maps:
        parts = expand(spec, scope).split("/")[0].split(":")
        if len(parts) >= 2 and parts[-1] == str(port) and parts[-2].isdigit():
            return int(parts[-2])
    return None


def _scope(extra_env: dict[str, str] | None, env: list[tuple[str, str]],
           positional: list[str]) -> dict[str, str]:
    """What `${VAR}` in a flag value expands to: the block's env=, the launch's environment,
    the script's positional arguments."""
    scope = dict(extra_env or {})
    for var, setting in env:
        # `docker run -e PORT="$PORT"` passes the host's PORT on: it keeps the value the
        # script gave PORT before (`PORT="${PORT:-5329}"`) instead of hiding it; so does a
        # script's own default when its caller set the variable (`PORT=8402 ./run`)
        if var in scope and re.fullmatch(rf"\$\{{?{var}\}}?|\$\{{{var}:?[-=][^}}]*\}}",
                                         setting.strip('"')):
            continue
        scope[var] = setting
    scope.update((str(n), v) for n, v in enumerate(positional, start=1))
    return scope


def _read_flags(raw_flags: list[tuple[str, str | None]], eng: engines.Engine,
                aliases: dict[str, str],
                scope: dict[str, str], problems: list[str],
                ) -> tuple[dict[str, Any], dict[str, Any] | None, list[tuple[str, str | None]]]:
    """The flags of the launch: the values of the settings the engine names (model, port, TP,
    …), the speculative-decoding settings, and every other flag as written."""
    values: dict[str, Any] = {}
    spec: dict[str, Any] | None = None
    flag_spec: dict[str, Any] = {}  # from `--speculative-*` flags, where the engine has them
    flags: list[tuple[str, str | None]] = []
    for name, value in raw_flags:
        norm = _norm_flag(name, eng.canonical_flags)
        key = aliases.get(name) or aliases.get(norm)
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
        prefix = eng.spec_flag_prefix
        if prefix and norm.startswith(prefix):
            field_name = norm[len(prefix):].replace("-", "_")
            flag_spec[field_name] = _json_value(expand(value, scope)) if value else True
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
    if flag_spec:
        spec = {**flag_spec, **(spec or {})}
        if "algo" in spec:
            spec["algorithm"] = spec.pop("algo")
    return values, spec, flags


def parse_server_command(text: str, extra_env: dict[str, str] | None = None,
                         files: Mapping[str, str] | None = None, declared: str | None = None,
                         ) -> EngineCommand:
    """Understand a server block. `extra_env` (the block's env= attribute) is used only to
    expand `${VAR}` in flag values; `files` are the runbook's file blocks (a compose file);
    `declared`: the engine the block declares it serves (see `launcher.find_launcher`)."""
    found, env, problems = find_launcher(text, files, extra_env, declared)
    if found is None or found.kind != "server":
        if not problems:
            problems.append(f"no engine launcher found ({', '.join(engines.SERVER_EXAMPLES)})")
        return EngineCommand(text=text, env=tuple(env), problems=tuple(problems))
    eng = engines.engine(found.engine)
    assert eng is not None  # launchers name known engines
    aliases = {**engines.SERVER_FLAG_ALIASES, **eng.flag_aliases}
    scope = _scope(extra_env, env, found.positional)
    positionals, raw_flags = parse_flags(found.rest)
    values, spec, flags = _read_flags(raw_flags, eng, aliases, scope, problems)
    model = values.get("model")
    if model is None and positionals and eng.model_positional:
        model = positionals[0]
    model = expand(model, scope) if model else None
    port = _to_int(values.get("port"), scope)
    if values.get("port") is not None and port is None:
        problems.append(f"--port value not understood: {values['port']}")
    published = _published(found.docker_ports, port or eng.default_port, scope, text)
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
        published_port=published,
        host=expand(values["host"], scope) if values.get("host") else None,
        quantization=expand(values["quantization"], scope) if values.get("quantization") else None,
        kv_cache_dtype=(
            expand(values["kv_cache_dtype"], scope) if values.get("kv_cache_dtype") else None
        ),
        speculative=spec,
        image=expand(found.image, scope) if found.image else None,
        docker=found.docker,
        docker_gpus=found.docker_gpus,
        docker_env=tuple(found.docker_env),
        container=found.container,
        wrappers=tuple(found.wrappers),
        flags=tuple(flags),
        problems=tuple(problems),
        written_flags=tuple(name for name, _ in raw_flags),
    )



def parse_client_command(text: str) -> ClientCommand:
    found, env, problems = find_launcher(text)
    if found is None or found.kind != "client":
        if not problems:
            problems.append(f"no client command found ({', '.join(engines.CLIENT_EXAMPLES)})")
        return ClientCommand(text=text, env=tuple(env), problems=tuple(problems))
    _positionals, raw_flags = parse_flags(found.rest)
    values: dict[str, str | None] = {}
    flags: list[tuple[str, str | None]] = []
    url = None
    tool = engines.client_tool(found.tool)
    assert tool is not None  # launchers name known tools
    keys = engines.CLIENT_FLAG_KEYS if tool.flag_keys is None else tool.flag_keys
    if tool.url_argument:
        # such tools take many flags with values; only the target URL matters
        for a in found.rest:
            if re.match(r"^https?://", a) or re.match(r"^(localhost|127\.0\.0\.1|\[::1\])[:/]", a):
                url = a
                break
    else:
        for name, value in raw_flags:
            norm = _norm_flag(name)
            if norm == tool.model_args_flag and value:
                m = re.search(r"base_url=([^,]+)", value)
                if m:
                    values["base_url"] = m.group(1)
                m = re.search(r"(?:^|,)model=([^,]+)", value)
                if m:
                    values["model"] = m.group(1)
                flags.append((norm, value))
                continue
            key = keys.get(norm)
            if key:
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


def mentions_launcher(text: str, files: Mapping[str, str] | None = None,
                      values: Mapping[str, str] | None = None,
                      ) -> EngineCommand | ClientCommand | None:
    """For `wiki runbook scan`: the server or client command a plain block holds, if any.
    `files`: compose files the page shows (see `launcher.find_launcher`); `values`: variables
    the page's earlier blocks set."""
    found, _env, _problems = find_launcher(text, files, values)
    if found is None:
        return None
    if found.kind == "server":
        return parse_server_command(text, dict(values or {}), files)
    return parse_client_command(text)
