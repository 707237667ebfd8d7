"""Carry out a Plan on this host, variant by variant: start the variant's server in its own
process group, wait until it is really ready, run every run of every client point against it,
and always tear everything down and verify the port and GPU memory came back before the next
variant. Returns the run Record; never prints (progress goes to on_event).

The steps are preflight, then per variant start, ready, warmup, one per client run, teardown
(named `[KV=fp8] start` when the server has variants); each runs inside `step()`, which records
it and reports its start and end."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import httpx

from wikitools.runbook.blocks.repository import RUN_DIR_VAR
from wikitools.runbook.engines import clients as result_parsers
from wikitools.runbook.engines import failure
from wikitools.runbook.engines.markers import MarkerError, scan_markers
from wikitools.runbook.execution import containers as docker
from wikitools.runbook.execution import receipt, server_api
from wikitools.runbook.execution.assemble import RunState, VariantState, build_record
from wikitools.runbook.execution.declared_check import declaration_problems, served_models
from wikitools.runbook.execution.folders import run_folder
from wikitools.runbook.execution.host import gpu_memory_used, gpu_state, port_free
from wikitools.runbook.execution.logwatch import LogWatcher, tail_file
from wikitools.runbook.execution.planned import (
    Plan,
    PlannedClient,
    PlannedPoint,
    PlannedRun,
    PlannedVariant,
    Verdict,
)
from wikitools.runbook.execution.processes import (
    TAG_VAR,
    Interrupted,
    group_alive,
    new_tag,
    signals_ignored,
    signals_raise,
    spawn,
    stop_group,
)
from wikitools.runbook.execution.runlock import RunLock
from wikitools.runbook.execution.steps import Event, EventSink, StepFailed, step
from wikitools.runbook.execution.teardown import CLIENT_GRACE_S, image_facts, teardown
from wikitools.runbook.records.record import RUN_ID, Point, Record, Step, make_run_id

POLL_S = 0.1  # readiness poll interval: readiness is seen within ~0.1 s of the engine answering
FATAL_GRACE_S = 10.0  # after a fatal-looking log line, how long the process may take to exit
CONTAINER_GRACE_S = 30.0  # after `… up -d` returned, how long its containers may take to show


# --------------------------------------------------------------------------- the executor


def execute(
    plan: Plan,
    *,
    root: Path,
    verdict: Verdict | None = None,
    on_event: EventSink | None = None,
    started: datetime | None = None,
    handle_signals: bool = True,
    http_timeout: float = 5.0,
    run_lock: RunLock | None = None,
) -> Record:
    """Run the plan and return its record (not yet written): preflight, then each variant in
    turn — start its server, wait until ready, run its clients, stop it and check that the
    port and GPU memory came back — before the next. A variant that fails is recorded and the
    next one runs; an interruption, or a teardown that leaves something behind, ends the run.
    Teardown always runs; SIGINT and SIGTERM end the run as a failed step and still clean up.
    Every process started carries the run's tag (`run_lock` records them, so that the next run
    can stop them if this one is killed); teardown stops whatever still carries it."""
    emit = on_event or (lambda _e: None)
    verdict = verdict if verdict is not None else plan.verdict
    started = started or datetime.now(UTC)
    run_id = _run_id(plan, started)
    run_folder(root, plan.artifacts_dir)
    st = RunState(tag=run_lock.tag if run_lock is not None else new_tag(run_id), lock=run_lock)
    t0 = time.monotonic()
    with signals_raise(handle_signals):
        try:
            _preflight(plan, verdict, st, emit)
        except StepFailed as exc:
            st.fail(exc.step, exc.message)
        except Interrupted as exc:
            st.steps.append(Step("preflight", "failed", 0.0, f"interrupted by {exc}"))
            st.fail("preflight", f"interrupted by {exc}")
    if st.failed_step is not None:
        st.steps.append(Step("teardown", "skipped", 0.0, "nothing was started"))
    else:
        with signals_raise(handle_signals):  # also between one variant's teardown and the next
            try:
                for variant in plan.variants:
                    if not _run_variant(plan, variant, root, st, emit, verdict, http_timeout,
                                        handle_signals):
                        break
            except Interrupted as exc:
                msg = f"interrupted by {exc} between server variants"
                st.fail("between variants", msg)
                st.steps.append(Step("between variants", "failed", 0.0, msg))
    if len(plan.variants) == 1:
        st.v.timings["total_s"] = round(time.monotonic() - t0, 3)
    finished = datetime.now(UTC)
    return build_record(plan, verdict, st, run_id, started, finished)


def _run_variant(
    plan: Plan,
    variant: PlannedVariant,
    root: Path,
    st: RunState,
    emit: EventSink,
    verdict: Verdict | None,
    http_timeout: float,
    handle_signals: bool,
) -> bool:
    """One variant from start to a verified stop; False when the run must not go on (it was
    interrupted, or the teardown left the port, GPU memory or a process behind)."""
    vs = VariantState(started=True)
    st.variants.append(vs)
    t0 = time.monotonic()
    run_folder(root, variant.artifacts_dir)
    baseline_gpu: dict[int, int] | None = None
    go_on = True
    with signals_raise(handle_signals):
        try:
            baseline_gpu = gpu_memory_used()
            _gpu_state(vs, verdict, "before")
            _start(variant, root, st, vs, emit)
            _wait_ready(variant, root, st, vs, emit, http_timeout)
            _check_declared(plan, variant, root, st, emit, http_timeout)
            _warmup(variant, st, vs, emit, http_timeout)
            _run_clients(variant, root, st, vs, emit, http_timeout)
        except StepFailed as exc:
            if not any(s.name == exc.step for s in st.steps):
                st.steps.append(Step(exc.step, exc.status, 0.0, exc.message))
            st.fail(exc.step, exc.message)
        except Interrupted as exc:
            _interrupted(variant, root, st, vs, str(exc))
            go_on = False
        finally:
            with signals_ignored(handle_signals):
                if vs.server_started:
                    _gpu_state(vs, verdict, "after")
                if not teardown(variant, st, vs, emit, baseline_gpu, verdict):
                    go_on = False
    if vs.failed_step is not None and not vs.log_tail and vs.server_started:
        vs.log_tail = tail_file(root / variant.server.log_path)
    if plan.variant_vars:
        vs.timings["total_s"] = round(time.monotonic() - t0, 3)
    return go_on


def _gpu_state(vs: VariantState, verdict: Verdict | None, when: str) -> None:
    """Clocks, power, link and other processes of the run's GPUs (`before` the server starts,
    `after` the clients, while it still serves); nothing on a host without GPUs."""
    if verdict is None or verdict.host.get("cpu_only") or not verdict.host.get("gpus"):
        return
    vs.gpu_state[when] = gpu_state(tuple(verdict.selected_gpus) or None)


def _run_id(plan: Plan, started: datetime) -> str:
    name = Path(plan.artifacts_dir).name
    return name if RUN_ID.match(name) else make_run_id(started, plan.runbook.blocks_hash)


def _interrupted(variant: PlannedVariant, root: Path, st: RunState, vs: VariantState,
                 signame: str) -> None:
    msg = f"interrupted by {signame}"
    if vs.current is not None:
        ci, pi, repeat = vs.current
        point = variant.clients[ci].points[pi]
        run = next(r for r in point.runs if r.repeat == repeat)
        vs.results[vs.current] = Point(point.value, "failed", result_file=run.result_path,
                                       message=msg)
        step_name = variant.step(run.label)
        st.fail(step_name, msg, tail_file(root / run.log_path))
    else:
        step_name = st.current
        st.fail(step_name, msg)
    st.steps.append(Step(step_name, "failed", 0.0, msg))


# --------------------------------------------------------------------------- steps


def _preflight(plan: Plan, verdict: Verdict | None, st: RunState, emit: EventSink) -> None:
    with step(st, emit, "preflight") as out:
        problems: list[str] = []
        if verdict is not None and not verdict.ok and not verdict.forced:
            problems.append(verdict.message or "preflight refused")
        if not port_free(plan.server.port, plan.server.host):
            problems.append(f"port {plan.server.port} is already in use on {plan.server.host}")
        if problems:
            raise StepFailed("preflight", "; ".join(dict.fromkeys(problems)))
        note = verdict.message if verdict is not None and verdict.forced else None
        out.message = f"forced: {note}" if note else None


def _write_copies(root: Path, variant: PlannedVariant) -> None:
    """The repository files the server command runs, as the plan read them, in the run's
    folder (the command names these copies, never the files themselves)."""
    for copy in variant.server.copies:
        target = root / copy.path
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(copy.text, encoding="utf-8")
            target.chmod(0o755)
        except OSError as exc:
            raise StepFailed(variant.step("start"), f"could not copy {copy.source} to "
                             f"{copy.path}: {exc.strerror or exc}") from None


def _start(variant: PlannedVariant, root: Path, st: RunState, vs: VariantState,
           emit: EventSink) -> None:
    srv = variant.server
    with step(st, emit, variant.step("start"), srv.command) as out:
        vs.t_start = time.monotonic()
        cwd = root
        env = {**srv.env, TAG_VAR: st.tag,
               RUN_DIR_VAR: str((root / variant.artifacts_dir).resolve())}
        _write_copies(root, variant)
        env.update(receipt.shared_cache_env(srv, root))
        vs.markers["caches_warm_at_start"] = receipt.warm_caches(srv, root)
        if srv.container is not None:
            docker.write_files(root, srv.container)
            cwd = root / srv.container.workdir
            vs.containers = docker.Containers(srv.container, root, root / srv.log_path, env)
        try:
            vs.server = spawn(srv.command, env, root / srv.log_path, cwd)
        except OSError as exc:
            raise StepFailed(variant.step("start"),
                             f"could not start bash: {exc.strerror}") from None
        vs.server_started = True
        if st.lock is not None:
            c = srv.container
            st.lock.started("server", vs.server.pid, docker=c is not None,
                            project=c.project if c is not None else None)
        vs.timings["start_s"] = out.seconds = round(time.monotonic() - vs.t_start, 3)


def _down_message(down: str, watcher: LogWatcher, vs: VariantState) -> str:
    """Why a server that went away during start-up did: the signal that killed it, else the
    cause its log gives."""
    killed = failure.signal_death(watcher.lines)
    if killed is not None:
        return f"{killed} during start-up ({down})"
    msg = f"{down} during start-up"
    cause = watcher.cause() or (_last_line(watcher) if vs.containers else None)
    if cause:
        msg += f": {docker.explain(cause) if vs.containers else cause}"
    return msg


def _wait_ready(variant: PlannedVariant, root: Path, st: RunState, vs: VariantState,
                emit: EventSink, http_timeout: float) -> None:
    """Poll health, then one real completion, until ready; fail on exit, on a fatal log line
    that is not followed by an exit within FATAL_GRACE_S, or at the ready timeout."""
    srv = variant.server
    assert vs.server is not None
    name = variant.step("ready")
    watcher = LogWatcher(root / srv.log_path, srv.fatal_patterns, srv.ready_log)
    t_start = vs.t_start
    deadline = t_start + srv.ready_timeout
    fatal_since: float | None = None
    state = "starting"
    with step(st, emit, name) as out, \
            httpx.Client(timeout=httpx.Timeout(http_timeout, connect=0.5)) as http:

        def failed(now: float, msg: str, status: str = "failed") -> StepFailed:
            out.seconds = round(now - t_start, 3)
            vs.log_tail = watcher.tail()
            return StepFailed(name, msg, status)

        while True:
            now = time.monotonic()
            watcher.poll()
            down = _server_down(vs, now - t_start, st.lock)
            if down is not None:
                time.sleep(POLL_S)  # the last lines of a followed log
                watcher.poll()
                raise failed(now, _down_message(down, watcher, vs))
            if watcher.fatal_line is not None:
                fatal_since = fatal_since or now
                if now - fatal_since >= FATAL_GRACE_S:
                    killed = failure.signal_death(watcher.lines)
                    raise failed(now, killed or f"fatal log line: {watcher.cause()}")
            if now >= deadline:
                raise failed(now, f"not ready after {srv.ready_timeout:g} s (last state: {state})",
                             "timeout")
            state = server_api.probe(http, srv.health_url)
            if state == "healthy":
                vs.timings.setdefault("health_s", round(time.monotonic() - t_start, 3))
                ok, detail, model_id = server_api.tiny_completion(http, srv)
                if model_id is not None:
                    vs.model_id = model_id
                if ok:
                    break
                state = f"healthy, completion failed: {detail}"
            elif watcher.ready_line is not None:
                state += "; the log says it is listening"
            emit(Event("waiting", name, state, elapsed=now - t_start))
            time.sleep(POLL_S)
        vs.timings["ready_s"] = out.seconds = out.elapsed = round(time.monotonic() - t_start, 3)
        watcher.poll()
        try:
            vs.markers.update(scan_markers(watcher.lines))
        except MarkerError as exc:
            raise failed(time.monotonic(), f"{srv.log_path}:{exc.line}: {exc}") from None
    if vs.containers is not None:
        image_facts(vs)
    version, facts = server_api.scrape_server(srv, http_timeout)
    vs.markers.update(facts)
    vs.engine_version = version or vs.markers.get("engine_version")
    if vs.engine_version is None and srv.version_command and not srv.docker:
        vs.engine_version = server_api.version_from_command(srv.version_command)


def _check_declared(plan: Plan, variant: PlannedVariant, root: Path, st: RunState,
                    emit: EventSink, http_timeout: float) -> None:
    """A server block that declares what it serves: the ready server checked against it."""
    declared = plan.runbook.server.declared
    if declared is None:
        return
    name = variant.step("declared")
    with step(st, emit, name), httpx.Client(timeout=http_timeout) as http:
        models = served_models(server_api.get_json(http, variant.server.models_url))
        lines = tail_file(root / variant.server.log_path, sys.maxsize)  # the whole log
        problems = declaration_problems(declared, lines, models)
        if problems:
            raise StepFailed(name, "; ".join(problems))


def _warmup(variant: PlannedVariant, st: RunState, vs: VariantState, emit: EventSink,
            http_timeout: float) -> None:
    """A few short completions before anything is measured; counted apart from the clients."""
    name = variant.step("warmup")
    with step(st, emit, name) as out:
        t = time.monotonic()
        problem = server_api.warmup(variant.server, vs.model_id, http_timeout)
        if problem:
            raise StepFailed(name, problem)
        vs.timings["warmup_s"] = out.seconds = round(time.monotonic() - t, 3)


def _run_clients(variant: PlannedVariant, root: Path, st: RunState, vs: VariantState,
                 emit: EventSink, http_timeout: float) -> None:
    """Every run of every point of every client, in plan order; the first that fails ends
    the variant (its later points are recorded as skipped)."""
    total = variant.runs
    index = 0
    for ci, client in enumerate(variant.clients):
        for pi, point in enumerate(client.points):
            for run in point.runs:
                index += 1
                label = variant.step(run.label)
                key = (ci, pi, run.repeat)
                down = _server_down(vs, lock=st.lock)
                if down is not None:
                    killed = _server_killed(root, variant)
                    msg = f"{killed} ({down}) before {run.label}" if killed else \
                        f"{down} before {run.label}"
                    vs.log_tail = tail_file(root / variant.server.log_path)
                    vs.results[key] = Point(point.value, "failed", message=msg)
                    st.steps.append(Step(label, "failed", 0.0, msg))
                    raise StepFailed(label, msg)
                emit(Event("point-start", label, index=index, total=total))
                vs.current = key
                result = _run_point(variant, client, point, run, root, st, vs, http_timeout)
                vs.current = None
                vs.results[key] = result
                st.steps.append(Step(label, result.status, result.seconds, result.message))
                emit(Event("point-end", label, result.status, result.message, result.seconds,
                           index, total))
                short = _too_short(client, result)
                if short:
                    emit(Event("note", label, message=f"{label}: {short}"))
                if result.status != "ok":
                    killed = _server_killed(root, variant)
                    if killed is not None:
                        result = replace(result, message=f"{result.message}; the server's {killed}")
                        vs.results[key] = result
                    if not vs.log_tail:
                        vs.log_tail = tail_file(root / run.log_path)
                    raise StepFailed(label, result.message or result.status, result.status)


def _run_point(variant: PlannedVariant, client: PlannedClient, point: PlannedPoint,
               run: PlannedRun, root: Path, st: RunState, vs: VariantState,
               http_timeout: float) -> Point:
    result = root / run.result_path if run.result_path else None
    if result is not None:
        # Some tools append to their output file; a stale file would be read as this run's result.
        result.parent.mkdir(parents=True, exist_ok=True)
        if result.is_file():
            result.unlink()
    srv = variant.server
    before = server_api.spec_snapshot(srv, http_timeout)
    t = time.monotonic()
    try:
        vs.client = spawn(run.command, {**point.env, TAG_VAR: st.tag}, root / run.log_path, root)
    except OSError as exc:
        return Point(point.value, "failed", message=f"could not start bash: {exc.strerror}")
    if st.lock is not None:
        st.lock.started(f"client {run.label}", vs.client.pid)
    try:
        code = vs.client.wait(timeout=client.timeout)
    except subprocess.TimeoutExpired:
        stop_group(vs.client, CLIENT_GRACE_S)
        vs.client = None
        secs = round(time.monotonic() - t, 3)
        return Point(point.value, "timeout", result_file=run.result_path,
                     message=f"no result after {client.timeout:g} s", seconds=secs)
    # The client's leader exited; anything it left in its group goes now.
    if group_alive(vs.client.pid):
        stop_group(vs.client, CLIENT_GRACE_S)
    vs.client = None
    secs = round(time.monotonic() - t, 3)
    if code != 0:
        tail = tail_file(root / run.log_path, 1)
        why = f": {tail[-1]}" if tail and tail[-1] else ""
        return Point(point.value, "failed", result_file=run.result_path,
                     message=f"client exited with code {code}{why}", seconds=secs)
    source = result if result is not None else root / run.log_path
    try:
        metrics = result_parsers.parse_result(client.parser, source, run.command,
                                              {**os.environ, **point.env})
    except result_parsers.ResultError as exc:
        return Point(point.value, "failed", result_file=run.result_path,
                     message=str(exc), seconds=secs)
    metrics.update(server_api.spec_delta(srv, before, http_timeout))
    if client.kind == "serving":
        metrics.setdefault("spec_decode_acceptance", None)
    if client.min_duration is not None:
        metrics["min_duration_s"] = client.min_duration  # the rule the run was held to
    return Point(point.value, "ok", metrics, run.result_path or run.log_path, None, secs)


def _too_short(client: PlannedClient, result: Point) -> str | None:
    """Why a serving run's throughput is no steady number (None when it is)."""
    took = result.metrics.get("duration")
    if client.min_duration is None or not isinstance(took, int | float) or \
            took >= client.min_duration:
        return None
    return (f"the benchmark ran {took:.1f} s, under the {client.min_duration:g} s minimum "
            "(min_duration=): its throughput is no steady number; send more requests")


def _server_down(st: VariantState, elapsed: float | None = None,
                 lock: RunLock | None = None) -> str | None:
    """Why the server is no longer running (None while it runs). A detached container's
    launcher (`docker run -d`, `compose up -d`) returns at once: then the container counts."""
    assert st.server is not None
    code = st.server.poll()
    box = st.containers
    if box is not None:
        box.poll(code)
        if lock is not None:  # so that the next run can stop them if this runner is killed
            for cid in box.ids:
                if cid not in lock.containers:
                    lock.started("container", container=cid)
        if box.spec.detached and code == 0:
            if not box.ids:
                if elapsed is not None and elapsed > CONTAINER_GRACE_S:
                    return "no container of the run was found after its launcher returned"
                return None
            ex = box.exited()
            if ex == docker.REMOVED:
                return f"container {docker.short(box.ids[0])} stopped and was removed (--rm)"
            if ex is not None:
                return f"container {docker.short(box.ids[0])} exited with code {ex}"
            return None
    if code is None:
        return None
    return f"server exited with code {code}"


def _server_killed(root: Path, variant: PlannedVariant) -> str | None:
    """"worker killed by SIGILL (…)" when the server's log says a signal killed one of its
    processes; None otherwise (and when the log cannot be read)."""
    try:
        with (root / variant.server.log_path).open(encoding="utf-8", errors="replace") as log:
            return failure.signal_death(log)
    except OSError:
        return None


def _last_line(watcher: LogWatcher) -> str | None:
    lines = [ln.strip() for ln in watcher.tail(5) if ln.strip()]
    return lines[-1] if lines else None


