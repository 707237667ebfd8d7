"""The run record from what a run collected: the host, the engine, the server command and log
tail, the startup markers, every step and every client point (planned points that never ran are
recorded as skipped)."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from wikitools.runbook.engines.secrets import mask_command
from wikitools.runbook.execution.host import gpu_memory_used
from wikitools.runbook.execution.model import Plan, PlannedClient, Verdict
from wikitools.runbook.execution.runstate import RunLock
from wikitools.runbook.records.record import (
    ClientResult,
    Point,
    Record,
    Sample,
    Step,
    point_from_samples,
    utc_stamp,
)


@dataclass
class RunState:
    """What a run has collected so far; the pipeline fills it, `build_record` reads it."""

    steps: list[Step] = field(default_factory=list)
    markers: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, Any] = field(default_factory=dict)
    # every client run in order, warm-up runs included: (what was planned, what it gave)
    points: dict[str, list[tuple[PlannedClient, Point]]] = field(default_factory=dict)
    gpu_state: dict[str, Any] = field(default_factory=dict)  # "before" / "after" the clients
    failed_step: str | None = None
    message: str | None = None
    log_tail: list[str] = field(default_factory=list)
    engine_version: str | None = None
    model_id: str | None = None
    server: subprocess.Popen[bytes] | None = None
    client: subprocess.Popen[bytes] | None = None
    server_started: bool = False
    t_start: float = 0.0  # monotonic time the server was started
    containers: Any = None  # containers.Containers when the server runs in containers
    image_id: str | None = None  # the image the server's container runs (docker image ID)
    image_digest: str | None = None  # its registry digest, else its ID
    tag: str = ""  # in the environment of every process of the run (its run id)
    lock: RunLock | None = None  # records each process started, for the next run

    def fail(self, step: str, message: str, tail: list[str] | None = None) -> None:
        if self.failed_step is None:
            self.failed_step = step
            self.message = message
            if tail is not None:
                self.log_tail = tail



def build_record(
    plan: Plan,
    verdict: Verdict | None,
    st: RunState,
    run_id: str,
    started: datetime,
    finished: datetime,
) -> Record:
    srv = plan.server
    host = dict(verdict.host) if verdict is not None and verdict.host else _fallback_host()
    clients: list[ClientResult] = []
    seen: list[str] = []
    for c in plan.clients:
        if c.name not in seen:
            seen.append(c.name)
    for name in seen:
        planned = [c for c in plan.clients if c.name == name]
        first = next((c for c in planned if not c.warmup), planned[0])
        shown = first.display_command or mask_command(first.command)
        clients.append(ClientResult(
            name, first.kind, shown, first.sweep_var, _points(planned, st.points.get(name, [])),
            sweep_vars=first.sweep_vars, repeats=first.repeats,
            warmup=any(c.warmup for c in planned)))
    status = "ok" if st.failed_step is None else "failed"
    return Record(
        runbook=plan.runbook.id,
        page=plan.runbook.page,
        blocks_hash=plan.runbook.blocks_hash,
        run_id=run_id,
        started_at=utc_stamp(started),
        finished_at=utc_stamp(finished),
        status=status,
        failed_step=st.failed_step,
        message=_one_line(st.message),
        host=host,
        engine={
            "name": srv.engine,
            "version": st.engine_version,
            "image": srv.image,
            "image_digest": st.image_digest,
            **({"image_id": st.image_id} if srv.container is not None else {}),
        },
        server={
            "command": srv.display_command or mask_command(srv.command),
            "env": dict(sorted({**srv.container_env, **srv.display_env}.items())),
            **({"containers": list(st.containers.ids) if st.containers is not None else []}
               if srv.container is not None else {}),
            "port": srv.port,
            "model": st.model_id,
            "log_tail": st.log_tail if status == "failed" else [],
            "run_tag": st.tag or None,
        },
        markers=dict(sorted(st.markers.items())),
        timings=dict(sorted(st.timings.items())),
        steps=tuple(st.steps),
        clients=tuple(clients),
        artifacts_dir=plan.artifacts_dir,
        gpu_state=dict(sorted(st.gpu_state.items())),
    )


def _points(planned: list[PlannedClient],
            done: list[tuple[PlannedClient, Point]]) -> tuple[Point, ...]:
    """One Point per sweep point, in plan order, from its measured runs; a failed warm-up
    fails the point; points that never ran are skipped."""
    ran = {(c.point_value, c.repeat): p for c, p in done}
    order: list[PlannedClient] = []
    for c in planned:
        if all(o.point_value != c.point_value for o in order):
            order.append(c)
    points = []
    for c in order:
        runs = [r for r in planned if r.point_value == c.point_value]
        warm = next((ran[(r.point_value, 0)] for r in runs
                     if r.warmup and (r.point_value, 0) in ran), None)
        if warm is not None and warm.status != "ok":
            points.append(Point(c.point_value, warm.status, result_file=warm.result_file,
                                message=f"warm-up run: {warm.message or warm.status}",
                                seconds=warm.seconds, coords=tuple(sorted(c.coords))))
            continue
        samples = [_sample(ran[(r.point_value, r.repeat)]) for r in runs
                   if not r.warmup and (r.point_value, r.repeat) in ran]
        if not samples:
            points.append(Point(c.point_value, "skipped", message="not run: an earlier step "
                                "failed", coords=tuple(sorted(c.coords))))
            continue
        points.append(point_from_samples(c.point_value, samples, c.coords))
    return tuple(points)


def _sample(point: Point) -> Sample:
    return Sample(point.status, point.metrics, point.seconds, point.result_file, point.message)


def _one_line(text: str | None) -> str | None:
    if text is None:
        return None
    line = " ".join(text.split())
    return line if len(line) <= 300 else line[:297] + "..."


def _fallback_host() -> dict[str, Any]:
    """Host facts when no preflight verdict is given: just enough to tell a CPU-only host."""
    return {"gpus": [], "gpu_count": 0, "driver": None, "cuda": None, "topology": "none",
            "hostname_hash": None, "cpu_only": gpu_memory_used() is None}
