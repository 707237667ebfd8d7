"""The plan: exactly what a run will execute, as data. No process is started here.

The server command is the block text as written (it runs through `bash -c`), plus only what
the executor needs: `--port` when the port is overridden, CUDA_VISIBLE_DEVICES for the GPUs
preflight selected, and the folders of the engine's compile and kernel caches (one per run,
shared by its server variants) where nothing else places them. Client commands get
result-capture flags and a `--base-url` pointing at the server the executor started. Paths
are relative to the wiki root (commands run there).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from wikitools.core.errors import UsageError
from wikitools.runbook.blocks.declared import (
    DEFAULT_MIN_DURATION,
    ClientBlock,
    FileBlock,
    Runbook,
    ServerBlock,
)
from wikitools.runbook.blocks.repository import RUN_DIR_VAR, with_copies
from wikitools.runbook.blocks.sweep import Coords, Sweep, SweepError, point_name
from wikitools.runbook.engines import catalog as engines
from wikitools.runbook.engines import docker_cli
from wikitools.runbook.engines.container_edits import (
    docker_run_offset,
    own_compose_project,
    without_project,
)
from wikitools.runbook.engines.launcher import append_args
from wikitools.runbook.engines.secrets import mask_command, mask_env
from wikitools.runbook.execution.containers import RUN_LABEL
from wikitools.runbook.execution.fetch import fetch_file, sha256
from wikitools.runbook.execution.planned import (
    Plan,
    PlannedClient,
    PlannedContainer,
    PlannedCopy,
    PlannedPoint,
    PlannedRun,
    PlannedServer,
    PlannedVariant,
    Verdict,
)
from wikitools.runbook.execution.preflight import block_env
from wikitools.runbook.execution.processes import TAG_VAR

ARTIFACTS_ROOT = ".artifacts"
# A number measured once is not a result: serving benchmarks run each point three times after
# an unrecorded warm-up run; KLD captures three times (the spread of their means is the run SD);
# quality, probe and smoke clients once.
DEFAULT_REPEATS = {"serving": 3, "kld": 3}
WARMUP_KINDS = frozenset({"serving"})


@dataclass(frozen=True, slots=True)
class PlanOverrides:
    port: int | None = None  # serve on this port instead of the block's
    sweep: Sweep | None = None  # `--sweep`: these values for the variables it names
    variants: Sweep | None = None  # `--variant`: only the server variants it names
    clients: tuple[str, ...] | None = None  # run only these clients (by name), in page order
    host: str = "127.0.0.1"  # where clients and probes connect
    repeats: int | None = None  # measured runs per sweep point (default: DEFAULT_REPEATS)
    warmup: bool | None = None  # an unrecorded run before each point (default: serving only)
    done: frozenset[Coords] = frozenset()  # variants a resumed run took over: not run again
    caches_dir: str | None = None  # the cache folders' parent (default: the run's own folder)


def artifacts_dir_for(runbook: Runbook, run_id: str) -> str:
    return f"{ARTIFACTS_ROOT}/{runbook.id}/{run_id}"


def _slug(value: str | None) -> str:
    if value is None:
        return ""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", value)


def _with_args(text: str, args: list[str], what: str) -> str:
    if not args:
        return text
    new = append_args(text, args)
    if new is None:
        raise UsageError(f"cannot add {' '.join(args)} to the {what}: the command is wrapped "
                         "(bash -c or a docker entrypoint); state it in the block instead")
    return new


def _is_local(host: str | None) -> bool:
    return host in (None, "", "localhost", "127.0.0.1", "0.0.0.0", "::1")


def with_values(text: str, coords: Coords) -> str:
    """`text` with each `$VAR`, `${VAR}` and `${VAR:-default}` of the variables in `coords`
    replaced by its value: a variant's command as it runs (other variables stay as written)."""
    values = dict(coords)
    if not values:
        return text
    names = "|".join(re.escape(k) for k in values)
    pattern = re.compile(r"\$\{(" + names + r")(?::?[-=?][^}]*)?\}|\$(" + names + r")\b")
    return pattern.sub(lambda m: values[m.group(1) or m.group(2)], text)


def variant_sweep(runbook: Runbook, selection: Sweep | None) -> Sweep:
    """The server's variants, only those `selection` (`--variant`) names; UsageError when it
    names a variable or value the block does not have."""
    variants = runbook.server.variants
    if selection is None:
        return variants
    if not variants:
        raise UsageError(f"--variant: runbook '{runbook.id}' has no variants")
    try:
        return variants.selected(selection)
    except SweepError as exc:
        raise UsageError(f"--variant {selection.text()}: {exc.message}") from None


def make_plan(
    runbook: Runbook,
    *,
    root: Path | str = ".",
    artifacts_dir: str,
    overrides: PlanOverrides | None = None,
    verdict: Verdict | None = None,
) -> Plan:
    """The final commands for `runbook`: each variant's server and its clients' points and
    runs. `artifacts_dir` is relative to `root` (`.artifacts/<id>/<run-id>`); `verdict`
    supplies the selected GPUs."""
    del root  # paths stay relative to the root; kept for callers that pass it
    ov = overrides or PlanOverrides()
    variants = variant_sweep(runbook, ov.variants)
    chosen = _chosen_clients(runbook, ov)
    notes: list[str] = []
    planned = []
    caches = ov.caches_dir or f"{artifacts_dir}/caches"
    for coords in variants.points():
        if coords in ov.done:
            continue
        name = ",".join(f"{k}={v}" for k, v in coords)
        folder = f"{artifacts_dir}/{_slug(name)}" if coords else artifacts_dir
        server = _server(runbook, coords, folder, ov, verdict, notes, caches)
        clients = tuple(_client(c, coords, folder, ov, server, notes) for c in chosen)
        planned.append(PlannedVariant(coords, folder, server, clients))
    if not planned:
        raise UsageError("--resume: every variant this run would measure is finished in the "
                         "run it resumes; nothing is left to run")
    return Plan(runbook=runbook, artifacts_dir=artifacts_dir, variants=tuple(planned),
                verdict=verdict, notes=tuple(dict.fromkeys(notes)), variant_vars=variants.vars)


def _chosen_clients(runbook: Runbook, ov: PlanOverrides) -> list[ClientBlock]:
    chosen = list(runbook.clients)
    if ov.clients is not None:
        unknown = [n for n in ov.clients if n not in {c.name for c in chosen}]
        if unknown:
            runbook.client(unknown[0])  # raises UsageError with a suggestion
        chosen = [c for c in chosen if c.name in ov.clients]
    if ov.sweep is not None:
        swept = {v for c in chosen for v in c.sweep.vars}
        unknown = [v for v in ov.sweep.vars if v not in swept]
        if unknown:
            have = ", ".join(sorted(swept)) or "none"
            raise UsageError(f"--sweep {unknown[0]}: runbook '{runbook.id}' sweeps {have}")
    return chosen


def _shared_caches(eng: engines.Engine | None, own: Mapping[str, str], folder: str,
                   notes: list[str]) -> tuple[tuple[str, str], ...]:
    """The engine's compile and kernel caches that neither the block nor this environment
    places: each in a folder of the run's own, which every variant of the run starts with."""
    out = tuple((c.env, f"{folder}/{_slug(c.name)}") for c in (eng.cache_dirs if eng else ())
                if c.env not in own and c.env not in os.environ)
    if out:
        notes.append(f"compile and kernel caches in {folder}/, shared by every server start of "
                     "this run and new with it (the first start fills them): "
                     + ", ".join(var for var, _ in out))
    return out


def _server(runbook: Runbook, coords: Coords, folder: str, ov: PlanOverrides,
            verdict: Verdict | None, notes: list[str], caches_dir: str) -> PlannedServer:
    server = runbook.server
    cmd = server.command
    eng = engines.engine(server.engine)
    port = ov.port or server.port
    args: list[str] = []
    opaque = server.declared is not None and server.declared.stands_in
    if opaque and port != server.port:
        raise UsageError(f"--port {port}: runbook '{runbook.id}' declares what its server "
                         f"serves, on port {server.port}; the plan cannot move it")
    if not opaque and cmd.port != port and port != cmd.published_port and not (
            cmd.port is None and port == engines.default_port(server.engine)):
        args = ["--port", str(port)]
        notes.append(f"--port {port} added to the server command")
    text = _with_args(server.content.rstrip("\n"), args, "server command")
    copies = [PlannedCopy(f"{folder}/{f.spelled}", f.path, f.sha256, f.content)
              for f in runbook.repository]
    if copies:  # the run executes its own copy of what was read with the runbook
        text = with_copies(text, runbook.repository)
        notes.append(f"the server command runs copies of the repository files it names, "
                     f"written to {folder}/ when the run starts (${RUN_DIR_VAR} is that "
                     "folder's absolute path), with the text the plan read: an edit made "
                     "after the plan does not reach the run")
    writers = sorted((f for f in runbook.files if not f.path), key=lambda f: f.line)
    if writers:  # the page's blocks that write the launcher or set its variables come first
        text = "\n".join([*(f.content.rstrip("\n") for f in writers), text])
        for f in writers:
            did = [*(["writes " + ", ".join(p for p, _t in f.writes)] if f.writes else []),
                   *(["sets " + ", ".join(k for k, _v in f.sets)] if f.sets else [])]
            notes.append(f"the block at {f.page}:{f.line} runs first: it {' and '.join(did)}")

    env, caches = _server_env(server, coords, verdict, notes, eng, caches_dir)

    container = None
    use = cmd.container
    if use is not None and use.kind == "run":
        # Double quotes: the shell puts in the run's tag from the environment of every run.
        label = f' --label "{RUN_LABEL}${{{TAG_VAR}}}"'
        at = docker_run_offset(text)
        inside = next((k for k, c in enumerate(copies)
                       if at is None and docker_run_offset(c.text) is not None), None)
        if inside is not None:  # the docker run is in a repository script: label the copy
            c = copies[inside]
            at = docker_run_offset(c.text)
            assert at is not None
            copies[inside] = replace(c, text=f"{c.text[:at]}{label}{c.text[at:]}",
                                     labelled=True)
        elif at is None:
            raise UsageError("the server's docker run is not a command of its own: the run "
                             "could not label its container")
        else:
            text = f"{text[:at]}{label}{text[at:]}"
        notes.append("--label added to docker run: the run finds, follows and stops only the "
                     "container that carries its own tag")
        container = PlannedContainer(kind="run", detached=use.detached, remove=use.remove,
                                     name=use.name, gpus=cmd.docker_gpus)
    elif use is not None and use.kind == "compose":
        # The run's own project, whatever the page says (-p, COMPOSE_PROJECT_NAME, name:).
        project = "wiki-" + re.sub(r"[^a-z0-9_-]", "-", Path(folder).name.lower())
        owned = own_compose_project(text, project)
        if owned is None:
            raise UsageError("the server's docker compose is not a command of its own: the run "
                             "could not give it its own Compose project")
        text = owned
        env["COMPOSE_PROJECT_NAME"] = project
        container = PlannedContainer(
            kind="compose", detached=use.detached, name=use.name,
            compose_program=use.compose_program,
            compose_args=(*without_project(use.compose_args), "-p", project),
            project=project, workdir=folder,
            files=tuple((f.path, _file_text(f, notes)) for f in runbook.files if f.path),
            gpus=cmd.docker_gpus)
        page = f" (instead of the page's {use.project})" if use.project else ""
        notes.append(f"the server command runs in {folder}/, where the page's files are "
                     f"written; Compose project {project}{page}")

    base = f"http://{ov.host}:{port}"
    return PlannedServer(
        command=text,
        env=env,
        display_env=mask_env(env),
        display_command=mask_command(text),
        log_path=f"{folder}/server.log",
        port=port,
        host=ov.host,
        health_url=base + (eng.health_path if eng else "/health"),
        models_url=base + (eng.models_path if eng else "/v1/models"),
        metrics_url=base + (eng.metrics_path if eng else "/metrics"),
        ready_timeout=server.ready_timeout,
        stop_timeout=server.stop_timeout,
        engine=server.engine,
        image=cmd.image,
        docker=cmd.docker,
        fatal_patterns=(eng.fatal_log if eng else ())
        + (docker_cli.FATAL_LOG if container else ()),
        ready_log=eng.ready_log if eng else (),
        version_command=eng.version_command if eng and not cmd.docker else (),
        container=container,
        container_env=mask_env(dict(cmd.docker_env)) if container else {},
        copies=tuple(copies),
        caches=caches,
    )


def _file_text(f: FileBlock, notes: list[str]) -> str:
    """A file block's text: the block's own, or the file of another repository at the commit
    it names, fetched now (the plan names its sha256)."""
    if f.source is None:
        return f.content
    repo, commit = f.source
    text = fetch_file(repo, commit, f.path)
    notes.append(f"{f.path} fetched from {repo} at commit {commit} ({sha256(text)})")
    return text


def _server_env(server: ServerBlock, coords: Coords, verdict: Verdict | None,
                notes: list[str], eng: engines.Engine | None, caches_dir: str,
                ) -> tuple[dict[str, str], tuple[tuple[str, str], ...]]:
    """The server's environment: env=, the sweep point, NVLink multicast off, the run's shared
    compile and kernel caches and the GPUs the preflight chose (a container's: what the notes
    say to add); and those caches."""
    cmd = server.command
    env: dict[str, str] = dict(server.extra_env)
    caches: tuple[tuple[str, str], ...] = ()
    env.update(coords)
    own = block_env(server)
    if cmd.docker:
        missing = [k for k in engines.MULTICAST_OFF if k not in own]
        if missing and cmd.container is not None and cmd.container.kind == "compose":
            notes.append("the container does not inherit the run's environment; add "
                         + " ".join(f"{k}={engines.MULTICAST_OFF[k]}" for k in missing)
                         + " to the service's environment: to keep NVLink multicast off")
        elif missing:
            notes.append("the container does not inherit the run's environment; add "
                         + " ".join(f"-e {k}={engines.MULTICAST_OFF[k]}" for k in missing)
                         + " to keep NVLink multicast off")
    else:
        # whatever env= says; preflight refuses a block that differs
        env.update(engines.MULTICAST_OFF)
        for k, v in engines.FAULT_REPORT.items():
            env.setdefault(k, own.get(k, v))
        caches = _shared_caches(eng, own, caches_dir, notes)
    if verdict is not None and verdict.selected_gpus and not cmd.docker:
        if "CUDA_VISIBLE_DEVICES" in own:
            notes.append(f"GPUs chosen by the block: CUDA_VISIBLE_DEVICES="
                         f"{own['CUDA_VISIBLE_DEVICES']}")
        else:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in verdict.selected_gpus)
    elif cmd.docker:
        notes.append(f"GPUs chosen by docker --gpus {cmd.docker_gpus or '(none given)'}")
    return env, caches


def _client(client: ClientBlock, variant: Coords, folder: str, ov: PlanOverrides,
            server: PlannedServer, notes: list[str]) -> PlannedClient:
    """A client block against one variant's server: its points, each with its runs."""
    sweep = client.sweep.replaced(ov.sweep) if ov.sweep is not None else client.sweep
    repeats = ov.repeats if ov.repeats is not None else DEFAULT_REPEATS.get(client.kind, 1)
    warmup = ov.warmup if ov.warmup is not None else client.kind in WARMUP_KINDS
    cmd = client.command
    base = f"http://{server.host}:{server.port}"
    wants_base = not (cmd.base_url == base or (
        cmd.base_url is None and cmd.port == server.port and _is_local(cmd.host)))
    tool = engines.client_tool(cmd.tool)
    text = client.content.rstrip("\n")
    parser = cmd.parser
    captured = tool is not None and tool.result_suffix is not None
    if captured and append_args(text, ["--x"]) is None:
        notes.append(f"client {client.name}: command is wrapped; results read from its "
                     "output only")
        captured, parser = False, "text"
    points = []
    for coords in sweep.points():
        value = point_name(coords)
        label = f"client:{client.name}" + (f"[{value}]" if value is not None else "")
        stem = f"{folder}/{client.name}" + (f"-{_slug(value)}" if value is not None else "")
        runs = []
        for repeat in ([0] if warmup else []) + list(range(1, repeats + 1)):
            run = "" if repeats == 1 and repeat == 1 else (
                "-warmup" if repeat == 0 else f"-r{repeat}")
            result_path: str | None = None
            command = text
            if captured:
                assert tool is not None and tool.result_suffix is not None
                result_path = f"{stem}{run}{tool.result_suffix}"
                fill = {"path": result_path, "dir": folder, "name": Path(result_path).name}
                args = [a.format(**fill) for a in tool.capture_args]
                if tool.base_url_flag and wants_base:
                    args += [tool.base_url_flag, base]
                command = _with_args(text, args, f"client {client.name}")
            what = (" warm-up" if repeat == 0 else
                    f" run {repeat}/{repeats}" if repeats > 1 else "")
            runs.append(PlannedRun(repeat, label + what, command, mask_command(command),
                                   result_path, f"{stem}{run}.log"))
        env = {**dict(variant), **dict(coords)}
        points.append(PlannedPoint(coords, value, label, env, mask_env(env), tuple(runs)))
    least = (client.min_duration or DEFAULT_MIN_DURATION) if client.kind == "serving" else None
    return PlannedClient(client.name, client.kind, parser, client.timeout, sweep.vars, repeats,
                         warmup, tuple(points), least)
