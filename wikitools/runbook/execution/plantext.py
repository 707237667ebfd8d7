"""A plan as text, summary first: the verdict, what runs (every variant's exact server command)
and the variables a command needs that are not set; then the details (each variant's server,
each client's points and runs, notes) and the preflight checks."""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from pathlib import PurePosixPath

from wikitools.runbook.blocks.declared import ServerBlock
from wikitools.runbook.blocks.sweep import coords_label
from wikitools.runbook.execution.containers import RUN_LABEL
from wikitools.runbook.execution.fetch import sha256
from wikitools.runbook.execution.plan import with_values
from wikitools.runbook.execution.planned import Plan, PlannedClient, PlannedVariant, Verdict
from wikitools.runbook.execution.processes import TAG_VAR


def verdict_line(verdict: Verdict | None) -> str:
    if verdict is None:
        return "verdict: not checked (no preflight)"
    if verdict.ok:
        forced = verdict.forced and any(c.status == "warn" for c in verdict.checks)
        return "verdict: ok" + (" (forced)" if forced else "")
    return f"verdict: refused: {verdict.message}"


def _client_line(c: PlannedClient) -> str:
    runs = (("warm-up + " if c.warmup else "") + f"{c.repeats} run{'s' * (c.repeats != 1)}")
    if c.sweep_vars:
        sweep = "; ".join(f"{v}={','.join(dict.fromkeys(dict(p.coords)[v] for p in c.points))}"
                          for v in c.sweep_vars)
        what = f"{len(c.points)} point{'s' * (len(c.points) != 1)} ({sweep})"
    else:
        what = "1 point"
    least = (f"; a run under {c.min_duration:g} s is too short (min_duration=)"
             if c.min_duration else "")
    return f"  client {c.name} ({c.kind}): {what}, each {runs}{least}"


def format_summary(plan: Plan, unset: Sequence[tuple[str, str]] | None = None) -> str:
    """What `plan` and `run` print first: the verdict, what runs, what is missing."""
    rb = plan.runbook
    n = len(plan.variants)
    out = [f"runbook {rb.ref}", verdict_line(plan.verdict)]
    runs = plan.runs
    if plan.variant_vars:
        out.append(f"runs: {n} server variant{'s' * (n != 1)} one after the other, each "
                   f"started, measured and stopped (port free, GPU memory back) before the "
                   f"next; {runs} client run{'s' * (runs != 1)} in all")
    else:
        out.append(f"runs: one server; {runs} client run{'s' * (runs != 1)}")
    if unset:
        names = ", ".join(f"{name} (read by {where})" for name, where in unset)
        out.append(f"unset: {names}: set {'them' if len(unset) > 1 else 'it'} before the run")
    for v in plan.variants:
        head = f"server, variant {coords_label(v.coords)}:" if v.coords else "server:"
        out.append(head)
        out += ["    " + line for line in
                with_values(v.server.display_command, v.coords).splitlines()]
    out += _served_lines(rb.server)
    clients = plan.variants[0].clients if plan.variants else ()
    out += [_client_line(c) for c in clients]
    if not clients:
        out.append("  no clients: the run starts the server, checks readiness and stops it")
    return "\n".join(out) + "\n"


def _served_lines(server: ServerBlock) -> list[str]:
    """What the server serves, and whence the plan knows it: the compose service's command as
    read from its file, and a declaration (the block's own word, checked after readiness)."""
    cmd = server.command
    out: list[str] = []
    use = cmd.container
    if use is not None and use.kind == "compose" and use.service:
        out.append(f"  compose service {use.service} of {use.compose_file} runs: "
                   f"{shlex.join(cmd.argv) or '(the image entrypoint)'}")
    if server.declared is not None:
        said = " ".join(f"{k}={v}" for k, v in server.declared.pairs())
        out.append(f"  declared by the block, not read from its command: {said} "
                   f"port={server.port}; checked against the server after readiness "
                   "(/v1/models for the model, its log for the engine and TP)")
    elif cmd.engine:
        shown = [f"engine={cmd.engine}", f"model={cmd.model}", f"tp={cmd.tp or 1}"]
        out.append(f"  read from the command: {' '.join(shown)} port={server.port}")
    return out


def _command_lines(env: Mapping[str, str], command: str, where: str = "the wiki root"
                   ) -> list[str]:
    """The `env added` and `command` lines shared by the server and each client."""
    out = []
    if env:
        pairs = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(env.items()))
        out.append(f"  env added: {pairs}")
    out.append(f"  command (bash -c, in {where}):")
    return out + ["    " + line for line in command.splitlines()]


def _container_lines(v: PlannedVariant, fetched: Mapping[str, str]) -> list[str]:
    """`fetched`: path → where a file of another repository came from."""
    c = v.server.container
    if c is None:
        return []
    out: list[str] = []
    for path, text in c.files:
        origin = (f"fetched from {fetched[path]}, {sha256(text)}" if path in fetched
                  else "from the page")
        out.append(f"  file: {c.workdir}/{path} ({origin})")
    if v.server.container_env:
        pairs = " ".join(f"{k}={shlex.quote(val)}" for k, val in v.server.container_env.items())
        out.append(f"  container env: {pairs}")
    if c.kind == "run":
        how = "detached: its log followed with docker logs -f" if c.detached else "attached"
        out.append(f"  container: docker run, {how}; found by its label {RUN_LABEL}<tag>")
        out.append("  stop: docker stop <that ID>" + ("" if c.remove else ", docker rm")
                   + "; then the ID checked gone")
    else:
        prog = shlex.join(c.compose_program + c.compose_args)
        how = "detached: logs followed" if c.detached else "attached"
        out.append(f"  containers: Compose project {c.project} ({how})")
        out.append(f"  stop: {prog} down; then each container ID checked gone")
    return out


def _variant_lines(v: PlannedVariant, fetched: Mapping[str, str]) -> list[str]:
    srv = v.server
    out = ["", f"server (variant {coords_label(v.coords)}):" if v.coords else "server:"]
    where = (f"{srv.container.workdir}/" if srv.container and srv.container.workdir != "."
             else "the wiki root")
    out += _command_lines(srv.display_env, srv.display_command, where)
    for copy in srv.copies:
        label = f"; --label {RUN_LABEL}<tag> added to its docker run" if copy.labelled else ""
        out.append(f"  file: {copy.path} (from the repository: {copy.source}, "
                   f"{copy.sha256}{label})")
    out += _container_lines(v, fetched)
    out.append(f"  ready: {srv.health_url} within {srv.ready_timeout:g} s; "
               f"stop: TERM, KILL after {srv.stop_timeout:g} s; then the port and GPU memory "
               "checked back")
    out.append(f"  log: {srv.log_path}")
    if srv.image:
        out.append(f"  image: {srv.image}")
    for c in v.clients:
        for p in c.points:
            out.append("")
            point = ""
            if p.coords:
                point = (f" [{p.coords[0][0]}={p.value}]" if len(p.coords) == 1
                         else f" [{p.value}]")
            out.append(f"client {c.name} ({c.kind}){point}:")
            first = p.runs[0]
            out += _command_lines(p.display_env, first.display_command)
            out.append(f"  timeout: {c.timeout:g} s per run; parser: {c.parser}")
            what = ("warm-up (not recorded) + " if c.warmup else "") + (
                f"{c.repeats} measured" if c.repeats > 1 else "1 run")
            results = [PurePosixPath(r.result_path).name for r in p.runs if r.result_path]
            logs = [PurePosixPath(r.log_path).name for r in p.runs]
            out.append(f"  runs: {what}; in {v.artifacts_dir}/: "
                       + (f"results {', '.join(results)}; " if results else "output only; ")
                       + f"logs {', '.join(logs)}")
    return out


def format_plan(plan: Plan) -> str:
    """The details after the summary: each variant's server, each point of each client with
    its runs (the command shown is its first run's: the others differ only in their result
    file), notes."""
    rb = plan.runbook
    out = ["details:", f"runbook {rb.ref}", f"blocks  {rb.blocks_hash}",
           f"artifacts {plan.artifacts_dir}/",
           f"tag     {TAG_VAR}={PurePosixPath(plan.artifacts_dir).name}-<16 random hex digits> "
           "(added to the environment of every process the run starts)"]
    fetched = {f.path: f"{f.source[0]} at commit {f.source[1]}" for f in rb.files if f.source}
    for v in plan.variants:
        out += _variant_lines(v, fetched)
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
    out.append(verdict_line(verdict))
    return "\n".join(out) + "\n"
