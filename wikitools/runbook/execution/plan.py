"""The plan: exactly what a run will execute, as data. No process is started here.

The server command is the block text as written (it runs through `bash -c`), plus only what
the executor needs: `--port` when the port is overridden, and CUDA_VISIBLE_DEVICES for the GPUs
preflight selected. Client commands get result-capture flags and a `--base-url` pointing at the
server the executor started. Paths are relative to the wiki root (commands run there).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from wikitools.errors import UsageError
from wikitools.runbook.blocks.model import ClientBlock, Runbook
from wikitools.runbook.engines import catalog as engines
from wikitools.runbook.engines.launcher import append_args, docker_run_offset
from wikitools.runbook.engines.secrets import mask_command, mask_env
from wikitools.runbook.engines.shell import shell_quote
from wikitools.runbook.execution.model import (
    Plan,
    PlannedClient,
    PlannedContainer,
    PlannedServer,
    Verdict,
)
from wikitools.runbook.execution.preflight import MULTICAST_OFF, block_env
from wikitools.runbook.execution.processes import TAG_VAR

ARTIFACTS_ROOT = ".artifacts"
# A number measured once is not a result: serving benchmarks run each point three times after
# an unrecorded warm-up run; quality and smoke clients once (their numbers do not jitter).
DEFAULT_REPEATS = {"serving": 3}
WARMUP_KINDS = frozenset({"serving"})


@dataclass(frozen=True, slots=True)
class PlanOverrides:
    port: int | None = None  # serve on this port instead of the block's
    sweep_values: tuple[str, ...] | None = None  # replace the values of every swept client
    clients: tuple[str, ...] | None = None  # run only these clients (by name), in page order
    host: str = "127.0.0.1"  # where clients and probes connect
    repeats: int | None = None  # measured runs per sweep point (default: DEFAULT_REPEATS)
    warmup: bool | None = None  # an unrecorded run before each point (default: serving only)


def artifacts_dir_for(runbook: Runbook, run_id: str) -> str:
    return f"{ARTIFACTS_ROOT}/{runbook.id}/{run_id}"


def _point_slug(value: str | None) -> str:
    if value is None:
        return ""
    return "-" + re.sub(r"[^A-Za-z0-9._-]+", "_", value)


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


def make_plan(
    runbook: Runbook,
    *,
    root: Path | str = ".",
    artifacts_dir: str,
    overrides: PlanOverrides | None = None,
    verdict: Verdict | None = None,
) -> Plan:
    """The final commands for `runbook`. `artifacts_dir` is relative to `root`
    (`.artifacts/<id>/<run-id>`); `verdict` supplies the selected GPUs."""
    del root  # paths stay relative to the root; kept for callers that pass it
    ov = overrides or PlanOverrides()
    server = runbook.server
    cmd = server.command
    eng = engines.engine(server.engine)
    notes: list[str] = []

    port = ov.port or server.port
    args: list[str] = []
    if cmd.port != port and port != cmd.published_port and not (
            cmd.port is None and port == engines.default_port(server.engine)):
        args = ["--port", str(port)]
        notes.append(f"--port {port} added to the server command")
    text = _with_args(server.content.rstrip("\n"), args, "server command")

    env: dict[str, str] = dict(server.extra_env)
    own = block_env(server)
    if cmd.docker:
        missing = [k for k in MULTICAST_OFF if k not in own]
        if missing and cmd.container is not None and cmd.container.kind == "compose":
            notes.append("the container does not inherit the run's environment; add "
                         + " ".join(f"{k}={MULTICAST_OFF[k]}" for k in missing)
                         + " to the service's environment: to keep NVLink multicast off")
        elif missing:
            notes.append("the container does not inherit the run's environment; add "
                         + " ".join(f"-e {k}={MULTICAST_OFF[k]}" for k in missing)
                         + " to keep NVLink multicast off")
    else:
        env.update(MULTICAST_OFF)  # whatever env= says; preflight refuses a block that differs
    if verdict is not None and verdict.selected_gpus and not cmd.docker:
        if "CUDA_VISIBLE_DEVICES" in own:
            notes.append(f"GPUs chosen by the block: CUDA_VISIBLE_DEVICES="
                         f"{own['CUDA_VISIBLE_DEVICES']}")
        else:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in verdict.selected_gpus)
    elif cmd.docker:
        notes.append(f"GPUs chosen by docker --gpus {cmd.docker_gpus or '(none given)'}")

    container = None
    use = cmd.container
    if use is not None and use.kind == "run":
        cidfile = f"{artifacts_dir}/server.cid"
        at = docker_run_offset(text)
        if at is None:
            raise UsageError("the server's docker run is not a command of its own: the run "
                             "could not learn its container ID")
        text = f"{text[:at]} --cidfile {shell_quote(cidfile)}{text[at:]}"
        notes.append("--cidfile added to docker run: the run stops only the container it "
                     "started, by its ID")
        container = PlannedContainer(kind="run", detached=use.detached, remove=use.remove,
                                     name=use.name, cidfile=cidfile, gpus=cmd.docker_gpus)
    elif use is not None and use.kind == "compose":
        project = use.project
        if project is None:
            project = "wiki-" + re.sub(r"[^a-z0-9_-]", "-", Path(artifacts_dir).name.lower())
            env["COMPOSE_PROJECT_NAME"] = project
        container = PlannedContainer(
            kind="compose", detached=use.detached, name=use.name,
            compose_program=use.compose_program, compose_args=use.compose_args,
            project=project, workdir=artifacts_dir,
            files=tuple((f.path, f.content) for f in runbook.files), gpus=cmd.docker_gpus)
        notes.append(f"the server command runs in {artifacts_dir}/, where the page's files are "
                     f"written; Compose project {project}")

    base = f"http://{ov.host}:{port}"
    planned_server = PlannedServer(
        command=text,
        env=env,
        display_env=mask_env(env),
        display_command=mask_command(text),
        log_path=f"{artifacts_dir}/server.log",
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
        + (engines.DOCKER_FATAL_LOG if container else ()),
        ready_log=eng.ready_log if eng else (),
        version_command=eng.version_command if eng and not cmd.docker else (),
        container=container,
        container_env=mask_env(dict(cmd.docker_env)) if container else {},
    )

    chosen = list(runbook.clients)
    if ov.clients is not None:
        unknown = [n for n in ov.clients if n not in {c.name for c in chosen}]
        if unknown:
            runbook.client(unknown[0])  # raises UsageError with a suggestion
        chosen = [c for c in chosen if c.name in ov.clients]
    planned: list[PlannedClient] = []
    for client in chosen:
        repeats = ov.repeats if ov.repeats is not None else DEFAULT_REPEATS.get(client.kind, 1)
        warmup = (ov.warmup if ov.warmup is not None else client.kind in WARMUP_KINDS)
        runs = ([0] if warmup else []) + list(range(1, repeats + 1))
        for coords in _points(client, ov.sweep_values):
            for repeat in runs:
                planned.append(_client(client, coords, repeat, repeats, artifacts_dir, base,
                                       port, notes))
    return Plan(runbook=runbook, artifacts_dir=artifacts_dir, server=planned_server,
                clients=tuple(planned), verdict=verdict, notes=tuple(dict.fromkeys(notes)))


def _points(client: ClientBlock,
            override: tuple[str, ...] | None) -> tuple[tuple[tuple[str, str], ...], ...]:
    """Each sweep point's (variable, value) pairs; `--sweep` replaces the first variable's
    values."""
    if override and client.sweep_var:
        axes = [(client.sweep_var, override), *[(v, vals) for v, vals in client.sweep[1:]]]
        points: list[tuple[tuple[str, str], ...]] = [()]
        for var, values in axes:
            points = [(*p, (var, v)) for p in points for v in values]
        return tuple(points)
    return client.sweep_points()


def _point_value(coords: tuple[tuple[str, str], ...]) -> str | None:
    """The point's name: the value of a plain sweep, `A=1,B=512` for a grid, None unswept."""
    if not coords:
        return None
    if len(coords) == 1:
        return coords[0][1]
    return ",".join(f"{k}={v}" for k, v in coords)


def _client(client: ClientBlock, coords: tuple[tuple[str, str], ...], repeat: int,
            repeats: int, artifacts_dir: str, base: str, port: int,
            notes: list[str]) -> PlannedClient:
    cmd = client.command
    value = _point_value(coords)
    run = "" if repeats == 1 and repeat == 1 else ("-warmup" if repeat == 0 else f"-r{repeat}")
    stem = f"{artifacts_dir}/{client.name}{_point_slug(value)}{run}"
    result_path: str | None = None
    args: list[str] = []
    parser = cmd.parser
    wants_base = not (cmd.base_url == base or (
        cmd.base_url is None and cmd.port == port and _is_local(cmd.host)))
    tool = engines.client_tool(cmd.tool)
    if tool is not None and tool.result_suffix is not None:
        result_path = f"{stem}{tool.result_suffix}"
        fill = {"path": result_path, "dir": artifacts_dir, "name": Path(result_path).name}
        args = [a.format(**fill) for a in tool.capture_args]
        if tool.base_url_flag and wants_base:
            args += [tool.base_url_flag, base]
    text = client.content.rstrip("\n")
    if args:
        new = append_args(text, args)
        if new is None:
            notes.append(f"client {client.name}: command is wrapped; results read from its "
                         "output only")
            result_path, parser = None, "text"
        else:
            text = new
    env = dict(coords)
    return PlannedClient(
        name=client.name,
        kind=client.kind,
        sweep_var=client.sweep_var,
        point_value=value,
        command=text,
        env=env,
        display_env=mask_env(env),
        display_command=mask_command(text),
        result_path=result_path,
        log_path=f"{stem}.log",
        timeout=client.timeout,
        parser=parser,
        repeat=repeat,
        repeats=repeats,
        coords=coords,
        sweep_vars=client.sweep_vars,
    )


def _command_lines(env: dict[str, str], command: str, where: str = "the wiki root") -> list[str]:
    """The `env added` and `command` lines shared by the server and each client."""
    out = []
    if env:
        pairs = " ".join(f"{k}={shell_quote(v)}" for k, v in sorted(env.items()))
        out.append(f"  env added: {pairs}")
    out.append(f"  command (bash -c, in {where}):")
    return out + ["    " + line for line in command.splitlines()]


def _container_lines(plan: Plan) -> list[str]:
    c = plan.server.container
    if c is None:
        return []
    out: list[str] = []
    for path, _text in c.files:
        out.append(f"  file: {c.workdir}/{path} (from the page)")
    if plan.server.container_env:
        pairs = " ".join(f"{k}={shell_quote(v)}" for k, v in plan.server.container_env.items())
        out.append(f"  container env: {pairs}")
    if c.kind == "run":
        how = "detached: its log followed with docker logs -f" if c.detached else "attached"
        out.append(f"  container: docker run, {how}; ID read from {c.cidfile}")
        out.append("  stop: docker stop <that ID>" + ("" if c.remove else ", docker rm")
                   + "; then the ID checked gone")
    else:
        prog = " ".join(c.compose_program + c.compose_args)
        how = "detached: logs followed" if c.detached else "attached"
        out.append(f"  containers: Compose project {c.project} ({how})")
        out.append(f"  stop: {prog} down; then each container ID checked gone")
    return out


def format_plan(plan: Plan) -> str:
    """Human-readable plan (what `wiki runbook plan` prints, before the verdict)."""
    rb = plan.runbook
    srv = plan.server
    out = [f"runbook {rb.ref}", f"blocks  {rb.blocks_hash}", f"artifacts {plan.artifacts_dir}/",
           f"tag     {TAG_VAR}={PurePosixPath(plan.artifacts_dir).name}-<16 random hex digits> "
           "(added to the environment of every process the run starts)", "", "server:"]
    where = (f"{srv.container.workdir}/" if srv.container and srv.container.workdir != "."
             else "the wiki root")
    out += _command_lines(srv.display_env, srv.display_command, where)
    out += _container_lines(plan)
    out.append(f"  ready: {srv.health_url} within {srv.ready_timeout:g} s; "
               f"stop: TERM, KILL after {srv.stop_timeout:g} s")
    out.append(f"  log: {srv.log_path}")
    if srv.image:
        out.append(f"  image: {srv.image}")
    for c in plan.clients:
        out.append("")
        point = f" [{c.sweep_var}={c.point_value}]" if c.point_value is not None else ""
        if len(c.coords) > 1:
            point = f" [{c.point_value}]"
        run = (" warm-up (not recorded)" if c.warmup else
               f" run {c.repeat}/{c.repeats}" if c.repeats > 1 else "")
        out.append(f"client {c.name} ({c.kind}){point}{run}:")
        out += _command_lines(c.display_env, c.display_command)
        out.append(f"  timeout: {c.timeout:g} s; result: {c.result_path or '(output only)'} "
                   f"({c.parser}); log: {c.log_path}")
    if not plan.clients:
        out += ["", "no clients: the run starts the server, checks readiness and stops it"]
    if plan.notes:
        out += ["", "notes:"] + [f"  - {n}" for n in plan.notes]
    return "\n".join(out) + "\n"


def format_verdict(verdict: Verdict) -> str:
    out = ["preflight:"]
    for c in verdict.checks:
        out.append(f"  {c.status:<4} {c.name}: {c.message}")
    host = verdict.host
    gpus = host.get("gpus") or []
    if gpus:
        names = sorted({g["name"] for g in gpus})
        out.append(f"  selected GPUs: {','.join(str(i) for i in verdict.selected_gpus)} "
                   f"({', '.join(names)}; topology {host.get('topology')})")
    if verdict.ok:
        out.append("verdict: ok" + (" (forced)" if verdict.forced and any(
            c.status == "warn" for c in verdict.checks) else ""))
    else:
        out.append(f"verdict: refused: {verdict.message}")
    return "\n".join(out) + "\n"
