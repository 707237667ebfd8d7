"""Reading Compose files: the services of a `docker compose` file as community pages write them
(`command:` / `entrypoint:` as lists or strings, `environment:` as a map or a list, `$$`
escapes, `${VAR:-default}` interpolation) turned into the argv each container runs, its
environment and image. What is a launcher inside that argv is `launcher`'s job."""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from wikitools.core.errors import InputError
from wikitools.core.yamlload import load_yaml
from wikitools.runbook.engines import docker_cli as dk
from wikitools.runbook.engines.shell import split_words

# Compose interpolation: $$ (a literal $), ${VAR}, ${VAR:-default}, ${VAR-default},
# ${VAR:?message}, ${VAR?message}, ${VAR:+alt}, $VAR.
_INTERP = re.compile(
    r"\$(?:\{(?P<name>[A-Za-z_]\w*)(?:(?P<op>:?[-?+])(?P<arg>[^{}]*))?\}|(?P<bare>[A-Za-z_]\w*))"
)
_DOLLAR = "\0"  # stands for an escaped `$$` while variables are substituted
# Default file names `docker compose` looks for, in its order.
DEFAULT_FILES = ("compose.yaml", "compose.yml", "docker-compose.yml", "docker-compose.yaml")


class ComposeError(InputError, ValueError):
    """A compose file that cannot be read (YAML error, no services)."""


@dataclass(frozen=True, slots=True)
class Service:
    name: str
    image: str | None
    container_name: str | None
    argv: tuple[str, ...]  # entrypoint + command as the container runs them ( () = image default)
    entrypoint_set: bool  # the file sets entrypoint (the image's own entrypoint is replaced)
    env: tuple[tuple[str, str], ...]  # environment, interpolated, in file order
    gpus: bool  # asks for NVIDIA GPUs (deploy devices, runtime: nvidia, gpus:)
    network_mode: str | None
    labels: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class ComposeFile:
    services: tuple[Service, ...]
    name: str | None = None  # top-level `name:` (the project name), interpolated
    problems: tuple[str, ...] = field(default=())

    def service(self, name: str) -> Service | None:
        for s in self.services:
            if s.name == name:
                return s
        return None


def looks_like_compose(text: str) -> bool:
    """A YAML text with a top-level `services:` key (cheap test before parsing)."""
    return re.search(r"(?m)^services:\s*$", text) is not None


def interpolate(value: str, env: Mapping[str, str]) -> str:
    """Compose's variable substitution with `env` as the host environment: unknown variables
    take their default, or become empty as Compose does; `$$` becomes `$`. Defaults may hold
    variables themselves (`${IMAGE:-repo:${TAG:-v1}}`)."""

    def sub(m: re.Match[str]) -> str:
        name = m["name"] or m["bare"]
        op, arg = m["op"], m["arg"] or ""
        have = name in env
        val = env.get(name, "")
        if op in (":-", "-"):
            use_default = not have or (op == ":-" and val == "")
            return arg if use_default else val
        if op in (":+", "+"):
            present = have and (op == "+" or val != "")
            return arg if present else ""
        return val if have else (f"${{{name}}}".replace("$", _DOLLAR) if op in (":?", "?")
                                 else "")

    text = value.replace("$$", _DOLLAR)
    for _ in range(5):  # inner variables first, then the ones around them
        again = _INTERP.sub(sub, text)
        if again == text:
            break
        text = again
    return text.replace(_DOLLAR, "$")


def _strings(value: Any) -> list[str] | None:
    if value is None:
        return None
    if isinstance(value, list):
        return [str(v) for v in value]
    return [str(value)]


def _env_items(value: Any, host: Mapping[str, str]) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    if isinstance(value, dict):
        for k, v in value.items():
            out.append((str(k), "" if v is None else interpolate(_scalar(v), host)))
    elif isinstance(value, list):
        for item in value:
            k, eq, v = str(item).partition("=")
            out.append((k, interpolate(v, host) if eq else host.get(k, f"${{{k}}}")))
    return out


def _scalar(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def _wants_gpus(svc: dict[str, Any]) -> bool:
    if str(svc.get("runtime", "")).lower() == "nvidia" or svc.get("gpus"):
        return True
    devices = (((svc.get("deploy") or {}).get("resources") or {}).get("reservations") or {}).get(
        "devices") or []
    for d in devices if isinstance(devices, list) else []:
        if isinstance(d, dict) and ("gpu" in (d.get("capabilities") or []) or
                                    str(d.get("driver", "")).lower() == "nvidia"):
            return True
    return False


def service_argv(entrypoint: Any, command: Any, host: Mapping[str, str]) -> tuple[list[str], bool]:
    """The argv a service's container runs: entrypoint then command, each a list or a string
    (a string is split the way a shell would, as Compose does). When the entrypoint ends with a
    shell's `-c`, a string command is kept whole as the script: that is what page authors mean
    by `entrypoint: ["/bin/bash", "-lc"]` + `command: |`."""
    ep = _strings(entrypoint)
    cmd = _strings(command)
    if ep is None:
        ep_words: list[str] = []
    elif isinstance(entrypoint, list):
        ep_words = ep
    else:
        ep_words = split_words(ep[0])
    ep_list = [interpolate(a, host) for a in ep_words]
    script = bool(ep_list) and re.fullmatch(r"-\w*c", ep_list[-1]) is not None
    if cmd is None:
        cmd_list: list[str] = []
    elif isinstance(command, list):
        cmd_list = [interpolate(a, host) for a in cmd]
        if script and len(cmd_list) > 1:
            cmd_list = [" ".join(cmd_list)]
    else:
        text = interpolate(cmd[0], host)
        cmd_list = [text] if script else split_words(text)
    return ep_list + cmd_list, entrypoint is not None


def parse_compose(text: str, host: Mapping[str, str] | None = None) -> ComposeFile:
    """The services of a compose file. `host` stands for the environment `docker compose` would
    interpolate from (default: none, so every `${VAR:-default}` takes its default)."""
    return _parse_compose(text, tuple(sorted((host or {}).items())))


@functools.lru_cache(maxsize=16)  # a page's compose file is read again by each later block
def _parse_compose(text: str, host_items: tuple[tuple[str, str], ...]) -> ComposeFile:
    host = dict(host_items)
    try:
        data = load_yaml(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        raise ComposeError(f"compose file is not valid YAML{where}: "
                           f"{getattr(exc, 'problem', None) or exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("services"), dict):
        raise ComposeError("compose file has no `services:` map")
    services: list[Service] = []
    problems: list[str] = []
    for name, svc in data["services"].items():
        if not isinstance(svc, dict):
            problems.append(f"service {name} is not a map")
            continue
        argv, ep_set = service_argv(svc.get("entrypoint"), svc.get("command"), host)
        labels = svc.get("labels") or {}
        label_items = (
            [(str(k), interpolate(_scalar(v), host)) for k, v in labels.items()]
            if isinstance(labels, dict) else
            [(str(x).partition("=")[0], interpolate(str(x).partition("=")[2], host))
             for x in labels] if isinstance(labels, list) else []
        )
        image = svc.get("image")
        cname = svc.get("container_name")
        services.append(Service(
            name=str(name),
            image=interpolate(str(image), host) if image is not None else None,
            container_name=interpolate(str(cname), host) if cname is not None else None,
            argv=tuple(argv),
            entrypoint_set=ep_set,
            env=tuple(_env_items(svc.get("environment"), host)),
            gpus=_wants_gpus(svc),
            network_mode=str(svc["network_mode"]) if svc.get("network_mode") else None,
            labels=tuple(label_items),
        ))
    top = data.get("name")
    return ComposeFile(tuple(services), interpolate(str(top), host) if top else None,
                       tuple(problems))


# --------------------------------------------------------------------------- paths beside it


def _relative(path: Any, bind: bool = False) -> bool:
    """A path Compose reads relative to the compose file's folder. With `bind` (a volume's
    short syntax) only `.`-paths are: a bare name is a named volume."""
    text = str(path).strip()
    if not text or text.startswith(("/", "$", "~")):
        return False
    return text.startswith(".") if bind else True


def _listed(value: Any, key: str) -> list[Any]:
    """The paths of a `env_file:` / `include:` value: a string, or a list of strings or of
    maps holding `key`."""
    items = value if isinstance(value, list) else [value] if value is not None else []
    return [i.get(key) if isinstance(i, dict) else i for i in items if i is not None]


def _service_paths(svc: dict[str, Any]) -> list[tuple[str, Any]]:
    found: list[tuple[str, Any]] = [("env_file", p) for p in _listed(svc.get("env_file"), "path")
                                    if _relative(p)]
    volumes = svc.get("volumes")
    for v in volumes if isinstance(volumes, list) else ():
        if isinstance(v, str) and _relative(v.split(":", 1)[0], bind=True):
            found.append(("volumes", v))
        elif isinstance(v, dict) and v.get("type") == "bind" and _relative(v.get("source")):
            found.append(("volumes", v.get("source")))
    build = svc.get("build")
    context = build.get("context", ".") if isinstance(build, dict) else build
    if build is not None and _relative(context):
        found.append(("build", context))
    extends = svc.get("extends")
    if isinstance(extends, dict) and extends.get("file") and _relative(extends["file"]):
        found.append(("extends", extends["file"]))
    return found


def beside_paths(text: str) -> list[tuple[str, str]]:
    """(key, path) of every path a compose file reads relative to its own folder (env files,
    bind mounts, build contexts, extended and included files, config and secret files): they
    name other files when the file is run from a copy elsewhere. Nothing for invalid YAML."""
    try:
        data = load_yaml(text)
    except yaml.YAMLError:
        return []
    if not isinstance(data, dict):
        return []
    found = [("include", p) for p in _listed(data.get("include"), "path") if _relative(p)]
    services = data.get("services")
    for svc in services.values() if isinstance(services, dict) else ():
        if isinstance(svc, dict):
            found += _service_paths(svc)
    for key in ("configs", "secrets"):
        group = data.get(key)
        for item in group.values() if isinstance(group, dict) else ():
            if isinstance(item, dict) and item.get("file") and _relative(item["file"]):
                found.append((key, item["file"]))
    return [(k, str(p)) for k, p in found]


# --------------------------------------------------------------------------- the CLI


@dataclass(frozen=True, slots=True)
class ComposeCall:
    """A `docker compose …` / `docker-compose …` command: which program, its global options,
    the subcommand and that subcommand's arguments."""

    program: tuple[str, ...]  # ("docker", "compose") or ("docker-compose",)
    globals: tuple[str, ...]  # e.g. ("-f", "compose.yaml", "-p", "demo")
    subcommand: str | None
    args: tuple[str, ...]

    @property
    def files(self) -> tuple[str, ...]:
        return tuple(_option_values(self.globals, dk.COMPOSE_FILE_FLAGS))

    @property
    def project(self) -> str | None:
        values = _option_values(self.globals, dk.COMPOSE_PROJECT_FLAGS)
        return values[-1] if values else None

    @property
    def detached(self) -> bool:
        return self.subcommand == "up" and any(
            a in dk.DETACH_FLAGS or (re.fullmatch(r"-[a-zA-Z]+", a) is not None and "d" in a)
            for a in self.args)

    @property
    def services(self) -> tuple[str, ...]:
        """Service names given to the subcommand (its non-option arguments)."""
        out: list[str] = []
        skip = False
        for a in self.args:
            if skip:
                skip = False
                continue
            if a in dk.COMPOSE_UP_VALUE_FLAGS:
                skip = True
                continue
            if not a.startswith("-"):
                out.append(a)
        return tuple(out)


def _option_values(args: tuple[str, ...], names: tuple[str, ...]) -> list[str]:
    out: list[str] = []
    i = 0
    while i < len(args):
        a = args[i]
        name, eq, val = a.partition("=")
        if name in names:
            if eq:
                out.append(val)
            elif i + 1 < len(args):
                out.append(args[i + 1])
                i += 1
        i += 1
    return out


def compose_call(argv: list[str], i: int) -> ComposeCall | None:
    """Read `docker compose …` or `docker-compose …` starting at argv[i]; None otherwise."""
    if i < len(argv) and argv[i].rsplit("/", 1)[-1] == dk.COMPOSE_PROGRAM:
        program: tuple[str, ...] = (argv[i],)
        j = i + 1
    elif argv[i : i + 2] and argv[i].rsplit("/", 1)[-1] in dk.COMPOSE_HOSTS and \
            argv[i + 1 : i + 2] == ["compose"]:
        program = (argv[i], "compose")
        j = i + 2
    else:
        return None
    globals_: list[str] = []
    while j < len(argv) and argv[j].startswith("-"):
        a = argv[j]
        globals_.append(a)
        if "=" not in a and a in dk.COMPOSE_GLOBAL_VALUE_FLAGS and j + 1 < len(argv):
            globals_.append(argv[j + 1])
            j += 1
        j += 1
    sub = argv[j] if j < len(argv) else None
    return ComposeCall(program, tuple(globals_), sub, tuple(argv[j + 1 :]))
