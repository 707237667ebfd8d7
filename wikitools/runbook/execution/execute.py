"""Carry out a Plan on this host: start the server in its own process group, wait until it is
really ready, run every client point against it, and always tear everything down and verify the
port and GPU memory came back. Returns the run Record; never prints (progress goes to on_event).

The steps are preflight, start, ready, warmup, one per client point, teardown; each runs inside
`step()`, which records it and reports its start and end."""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import httpx

from wikitools.runbook.engines import clients as result_parsers
from wikitools.runbook.engines.markers import scan_markers
from wikitools.runbook.execution import containers as docker
from wikitools.runbook.execution import server_api
from wikitools.runbook.execution.assemble import RunState, build_record
from wikitools.runbook.execution.host import gpu_memory_used, gpu_state, port_free
from wikitools.runbook.execution.logwatch import LogWatcher, tail_file
from wikitools.runbook.execution.model import Plan, PlannedClient, Verdict
from wikitools.runbook.execution.processes import (
    TAG_VAR,
    Interrupted,
    group_alive,
    new_tag,
    signals_ignored,
    signals_raise,
    spawn,
    stop_all_tagged,
    stop_group,
    wait_until,
)
from wikitools.runbook.execution.runstate import RunLock
from wikitools.runbook.records.record import RUN_ID, Point, Record, Step, make_run_id

POLL_S = 0.1  # readiness poll interval: readiness is seen within ~0.1 s of the engine answering
FATAL_GRACE_S = 10.0  # after a fatal-looking log line, how long the process may take to exit
CLIENT_GRACE_S = 5.0  # TERM → KILL grace for a client's process group
CONTAINER_GRACE_S = 30.0  # after `… up -d` returned, how long its containers may take to show
GPU_MEM_TOLERANCE_MIB = 64


# --------------------------------------------------------------------------- events


@dataclass(frozen=True, slots=True)
class Event:
    """Progress for the command layer. kind: step-start | step-end | waiting | point-start |
    point-end | note. `index`/`total` count client points."""

    kind: str
    step: str
    status: str | None = None
    message: str | None = None
    elapsed: float = 0.0
    index: int = 0
    total: int = 0


EventSink = Callable[[Event], None]


class StepFailed(Exception):
    def __init__(self, step: str, message: str, status: str = "failed") -> None:
        super().__init__(message)
        self.step = step
        self.message = message
        self.status = status


@dataclass(slots=True)
class StepOutcome:
    """What the body of a `step()` decided: its status and message (ok/None unless set), the
    seconds to record (measured when None) and the elapsed time its end event reports."""

    status: str = "ok"
    message: str | None = None
    seconds: float | None = None
    elapsed: float = 0.0


@contextlib.contextmanager
def step(
    st: RunState, emit: EventSink, name: str, start_message: str | None = None
) -> Iterator[StepOutcome]:
    """Report the step's start, run the body, then record a Step and report its end; a
    StepFailed from the body is recorded as this step's failure and raised on."""
    emit(Event("step-start", name, message=start_message))
    t = time.monotonic()
    out = StepOutcome()
    try:
        yield out
    except StepFailed as exc:
        secs = out.seconds if out.seconds is not None else round(time.monotonic() - t, 3)
        st.steps.append(Step(name, exc.status, secs, exc.message))
        emit(Event("step-end", name, exc.status, exc.message))
        raise
    secs = out.seconds if out.seconds is not None else round(time.monotonic() - t, 3)
    st.steps.append(Step(name, out.status, secs, out.message))
    emit(Event("step-end", name, out.status, out.message if out.status != "ok" else None,
               elapsed=out.elapsed))


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
    """Run the plan and return its record (not yet written). Teardown always runs; SIGINT and
    SIGTERM during the run end it as a failed step and still clean up. Every process started
    carries the run's tag (`run_lock` records them, so that the next run can stop them if this
    one is killed); teardown stops whatever still carries it and names it in the record."""
    emit = on_event or (lambda _e: None)
    verdict = verdict if verdict is not None else plan.verdict
    started = started or datetime.now(UTC)
    run_id = _run_id(plan, started)
    artifacts = root / plan.artifacts_dir
    artifacts.mkdir(parents=True, exist_ok=True)
    st = RunState(tag=run_lock.tag if run_lock is not None else new_tag(run_id), lock=run_lock)
    t0 = time.monotonic()
    baseline_gpu: dict[int, int] | None = None

    with signals_raise(handle_signals):
        try:
            _preflight(plan, verdict, st, emit)
            baseline_gpu = gpu_memory_used()
            _gpu_state(st, verdict, "before")
            _start(plan, root, st, emit)
            _wait_ready(plan, root, st, emit, http_timeout)
            _warmup(plan, st, emit, http_timeout)
            _run_clients(plan, root, st, emit, http_timeout)
        except StepFailed as exc:
            if not any(s.name == exc.step for s in st.steps):
                st.steps.append(Step(exc.step, exc.status, 0.0, exc.message))
            st.fail(exc.step, exc.message)
        except Interrupted as exc:
            _interrupted(plan, root, st, str(exc))
        finally:
            with signals_ignored(handle_signals):
                if st.server_started:
                    _gpu_state(st, verdict, "after")
                _teardown(plan, st, emit, baseline_gpu, verdict)
    if st.failed_step is not None and not st.log_tail and st.server_started:
        st.log_tail = tail_file(root / plan.server.log_path)
    st.timings["total_s"] = round(time.monotonic() - t0, 3)
    finished = datetime.now(UTC)
    return build_record(plan, verdict, st, run_id, started, finished)


def _gpu_state(st: RunState, verdict: Verdict | None, when: str) -> None:
    """Clocks, power, link and other processes of the run's GPUs (`before` the server starts,
    `after` the clients, while it still serves); nothing on a host without GPUs."""
    if verdict is None or verdict.host.get("cpu_only") or not verdict.host.get("gpus"):
        return
    st.gpu_state[when] = gpu_state(tuple(verdict.selected_gpus) or None)


def _run_id(plan: Plan, started: datetime) -> str:
    name = Path(plan.artifacts_dir).name
    return name if RUN_ID.match(name) else make_run_id(started, plan.runbook.blocks_hash)


def _interrupted(plan: Plan, root: Path, st: RunState, signame: str) -> None:
    step_name = _current_step(st, plan)
    msg = f"interrupted by {signame}"
    for c in plan.clients:
        if c.label == step_name:
            _record_point(st, c, Point(c.point_value, "failed", result_file=c.result_path,
                                       message=msg))
            st.fail(step_name, msg, tail_file(root / c.log_path))
            break
    else:
        st.fail(step_name, msg)
    st.steps.append(Step(step_name, "failed", 0.0, msg))


def _current_step(st: RunState, plan: Plan) -> str:
    if not any(s.name == "preflight" for s in st.steps):
        return "preflight"
    if not st.server_started:
        return "start"
    if "ready_s" not in st.timings:
        return "ready"
    if "warmup_s" not in st.timings:
        return "warmup"
    done = sum(len(v) for v in st.points.values())
    if done < len(plan.clients):
        return plan.clients[done].label
    return "teardown"


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


def _start(plan: Plan, root: Path, st: RunState, emit: EventSink) -> None:
    srv = plan.server
    with step(st, emit, "start", srv.command) as out:
        st.t_start = time.monotonic()
        cwd = root
        if srv.container is not None:
            docker.write_files(root, srv.container)
            cwd = root / srv.container.workdir
            st.containers = docker.Containers(srv.container, root, root / srv.log_path,
                                              {**srv.env, TAG_VAR: st.tag})
        try:
            st.server = spawn(srv.command, {**srv.env, TAG_VAR: st.tag}, root / srv.log_path,
                              cwd)
        except OSError as exc:
            raise StepFailed("start", f"could not start bash: {exc.strerror}") from None
        st.server_started = True
        if st.lock is not None:
            c = srv.container
            st.lock.started("server", st.server.pid, docker=c is not None,
                            project=c.project if c is not None else None)
        st.timings["start_s"] = out.seconds = round(time.monotonic() - st.t_start, 3)


def _wait_ready(
    plan: Plan, root: Path, st: RunState, emit: EventSink, http_timeout: float
) -> None:
    """Poll health, then one real completion, until ready; fail on exit, on a fatal log line
    that is not followed by an exit within FATAL_GRACE_S, or at the ready timeout."""
    srv = plan.server
    assert st.server is not None
    watcher = LogWatcher(root / srv.log_path, srv.fatal_patterns, srv.ready_log)
    t_start = st.t_start
    deadline = t_start + srv.ready_timeout
    fatal_since: float | None = None
    state = "starting"
    with step(st, emit, "ready") as out, \
            httpx.Client(timeout=httpx.Timeout(http_timeout, connect=0.5)) as http:

        def failed(now: float, msg: str, status: str = "failed") -> StepFailed:
            out.seconds = round(now - t_start, 3)
            st.log_tail = watcher.tail()
            return StepFailed("ready", msg, status)

        while True:
            now = time.monotonic()
            watcher.poll()
            down = _server_down(st, now - t_start)
            if down is not None:
                time.sleep(POLL_S)  # the last lines of a followed log
                watcher.poll()
                msg = f"{down} during start-up"
                cause = watcher.cause() or (_last_line(watcher) if st.containers else None)
                if cause:
                    msg += f": {docker.explain(cause) if st.containers else cause}"
                raise failed(now, msg)
            if watcher.fatal_line is not None:
                fatal_since = fatal_since or now
                if now - fatal_since >= FATAL_GRACE_S:
                    raise failed(now, f"fatal log line: {watcher.cause()}")
            if now >= deadline:
                raise failed(now, f"not ready after {srv.ready_timeout:g} s (last state: {state})",
                             "timeout")
            state = server_api.probe(http, srv.health_url)
            if state == "healthy":
                st.timings.setdefault("health_s", round(time.monotonic() - t_start, 3))
                ok, detail, model_id = server_api.tiny_completion(http, srv)
                if model_id is not None:
                    st.model_id = model_id
                if ok:
                    break
                state = f"healthy, completion failed: {detail}"
            elif watcher.ready_line is not None:
                state += "; the log says it is listening"
            emit(Event("waiting", "ready", state, elapsed=now - t_start))
            time.sleep(POLL_S)
        st.timings["ready_s"] = out.seconds = out.elapsed = round(time.monotonic() - t_start, 3)
    if st.containers is not None:
        _image_facts(st)
    watcher.poll()
    st.markers.update(scan_markers(watcher.lines))
    version, facts = server_api.scrape_server(srv, http_timeout)
    st.markers.update(facts)
    st.engine_version = version or st.markers.get("engine_version")
    if st.engine_version is None and srv.version_command and not srv.docker:
        st.engine_version = server_api.version_from_command(srv.version_command)


def _warmup(plan: Plan, st: RunState, emit: EventSink, http_timeout: float) -> None:
    """A few short completions before anything is measured; counted apart from the clients."""
    with step(st, emit, "warmup") as out:
        t = time.monotonic()
        problem = server_api.warmup(plan.server, st.model_id, http_timeout)
        if problem:
            raise StepFailed("warmup", problem)
        st.timings["warmup_s"] = out.seconds = round(time.monotonic() - t, 3)


def _run_clients(
    plan: Plan, root: Path, st: RunState, emit: EventSink, http_timeout: float
) -> None:
    total = len(plan.clients)
    for index, client in enumerate(plan.clients, start=1):
        down = _server_down(st)
        if down is not None:
            msg = f"{down} before {client.label}"
            st.log_tail = tail_file(root / plan.server.log_path)
            _record_point(st, client, Point(client.point_value, "failed", message=msg))
            st.steps.append(Step(client.label, "failed", 0.0, msg))
            raise StepFailed(client.label, msg)
        emit(Event("point-start", client.label, index=index, total=total))
        point = _run_point(plan, client, root, st, http_timeout)
        _record_point(st, client, point)
        st.steps.append(Step(client.label, point.status, point.seconds, point.message))
        emit(Event("point-end", client.label, point.status, point.message, point.seconds,
                   index, total))
        if point.status != "ok":
            if not st.log_tail:
                st.log_tail = tail_file(root / client.log_path)
            raise StepFailed(client.label, point.message or point.status, point.status)


def _record_point(st: RunState, client: PlannedClient, point: Point) -> None:
    st.points.setdefault(client.name, []).append((client, point))


def _run_point(
    plan: Plan, client: PlannedClient, root: Path, st: RunState, http_timeout: float
) -> Point:
    result = root / client.result_path if client.result_path else None
    if result is not None:
        # Some tools append to their output file; a stale file would be read as this run's result.
        result.parent.mkdir(parents=True, exist_ok=True)
        if result.is_file():
            result.unlink()
    before = server_api.spec_snapshot(plan.server, http_timeout)
    t = time.monotonic()
    try:
        st.client = spawn(client.command, {**client.env, TAG_VAR: st.tag},
                          root / client.log_path, root)
    except OSError as exc:
        return Point(client.point_value, "failed", message=f"could not start bash: {exc.strerror}")
    if st.lock is not None:
        st.lock.started(f"client {client.label}", st.client.pid)
    try:
        code = st.client.wait(timeout=client.timeout)
    except subprocess.TimeoutExpired:
        stop_group(st.client, CLIENT_GRACE_S)
        st.client = None
        secs = round(time.monotonic() - t, 3)
        return Point(client.point_value, "timeout", result_file=client.result_path,
                     message=f"no result after {client.timeout:g} s", seconds=secs)
    # The client's leader exited; anything it left in its group goes now.
    if group_alive(st.client.pid):
        stop_group(st.client, CLIENT_GRACE_S)
    st.client = None
    secs = round(time.monotonic() - t, 3)
    if code != 0:
        tail = tail_file(root / client.log_path, 1)
        why = f": {tail[-1]}" if tail and tail[-1] else ""
        return Point(client.point_value, "failed", result_file=client.result_path,
                     message=f"client exited with code {code}{why}", seconds=secs)
    source = result if result is not None else root / client.log_path
    try:
        metrics = result_parsers.parse_result(client.parser, source, client.command,
                                              {**os.environ, **client.env})
    except result_parsers.ResultError as exc:
        return Point(client.point_value, "failed", result_file=client.result_path,
                     message=str(exc), seconds=secs)
    metrics.update(server_api.spec_delta(plan.server, before, http_timeout))
    if client.kind == "serving":
        metrics.setdefault("spec_decode_acceptance", None)
    return Point(client.point_value, "ok", metrics, client.result_path or client.log_path,
                 None, secs)


def _server_down(st: RunState, elapsed: float | None = None) -> str | None:
    """Why the server is no longer running (None while it runs). A detached container's
    launcher (`docker run -d`, `compose up -d`) returns at once: then the container counts."""
    assert st.server is not None
    code = st.server.poll()
    box = st.containers
    if box is not None:
        box.poll(code)
        if st.lock is not None:  # so that the next run can stop them if this runner is killed
            for cid in box.ids:
                if cid not in st.lock.containers:
                    st.lock.started("container", container=cid)
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


def _last_line(watcher: LogWatcher) -> str | None:
    lines = [ln.strip() for ln in watcher.tail(5) if ln.strip()]
    return lines[-1] if lines else None


def _image_facts(st: RunState) -> None:
    box = st.containers
    if box is None or not box.ids:
        return
    facts = docker.image_of(box.ids[0])
    st.image_id = facts.image_id
    st.image_digest = facts.digest or facts.image_id


# --------------------------------------------------------------------------- teardown


def _teardown(
    plan: Plan,
    st: RunState,
    emit: EventSink,
    baseline_gpu: dict[int, int] | None,
    verdict: Verdict | None,
) -> None:
    if not st.server_started:
        st.steps.append(Step("teardown", "skipped", 0.0, "nothing was started"))
        return
    with step(st, emit, "teardown") as out:
        t = time.monotonic()
        problems, notes = _stop_everything(plan, st)
        if baseline_gpu is not None:
            leak = _gpu_leak(baseline_gpu, verdict)
            if leak:
                problems.append(leak)
        st.timings["teardown_s"] = out.seconds = round(time.monotonic() - t, 3)
        if problems:
            out.status, out.message = "failed", "; ".join(problems)
            st.fail("teardown", out.message)
        else:
            out.message = "; ".join(notes) or None


def _stop_everything(plan: Plan, st: RunState) -> tuple[list[str], list[str]]:
    """Stop the client and server groups and the container; check the port. (problems, notes)"""
    problems: list[str] = []
    notes: list[str] = []
    if st.client is not None:
        _clean, note = stop_group(st.client, CLIENT_GRACE_S)
        st.client = None
        if note and "survived" in note:
            problems.append(f"client {note}")
    if st.containers is not None:
        # Only the containers that carry this run's label or are of its own Compose project.
        if st.image_id is None:
            _image_facts(st)
        bad, done = st.containers.stop(plan.server.stop_timeout)
        problems += bad
        notes += done
    if st.server is not None:
        code = st.server.poll()
        detached = st.containers is not None and st.containers.spec.detached and code == 0
        if code is not None and not detached:
            notes.append(f"server had exited with code {code}")
        _clean, note = stop_group(st.server, plan.server.stop_timeout)
        if note:
            (problems if "survived" in note else notes).append(f"server {note}")
    # What left the process groups (a `setsid` grandchild) still carries the run's tag.
    strays = stop_all_tagged(st.tag, CLIENT_GRACE_S)
    if strays:
        named = ", ".join(s.describe() for s in strays)
        problems.append(f"{len(strays)} process{'es' * (len(strays) != 1)} left running outside "
                        f"the server's and clients' process groups, stopped: {named}")
    if not wait_until(lambda: port_free(plan.server.port, plan.server.host), 5.0):
        problems.append(f"port {plan.server.port} still in use after teardown")
    return problems, notes


def _gpu_leak(baseline: dict[int, int], verdict: Verdict | None) -> str | None:
    watch = set(verdict.selected_gpus) if verdict and verdict.selected_gpus else set(baseline)
    last: dict[int, int] | None = None

    def back() -> bool:
        nonlocal last
        last = gpu_memory_used()
        if last is None:
            return True
        return all(last.get(i, 0) <= baseline.get(i, 0) + GPU_MEM_TOLERANCE_MIB for i in watch)

    if wait_until(back, 15.0):
        return None
    assert last is not None
    extra = ", ".join(
        f"GPU {i}: {last.get(i, 0)} MiB used (was {baseline.get(i, 0)})" for i in sorted(watch)
    )
    return f"GPU memory not returned after teardown ({extra})"
