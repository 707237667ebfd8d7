"""The run record from what a run collected: the host, and for each server variant its engine,
server command and log tail, startup markers and every client point (planned points that never
ran are recorded as skipped). The plan's shape (variant -> client -> point -> runs) is walked as
is; each run's result is found by its place in that shape."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from wikitools.runbook.engines.secrets import mask_command
from wikitools.runbook.execution.host import gpu_memory_used
from wikitools.runbook.execution.planned import Plan, PlannedClient, PlannedVariant, Verdict
from wikitools.runbook.execution.runlock import RunLock
from wikitools.runbook.records.record import (
    ClientResult,
    Point,
    Record,
    Sample,
    Step,
    VariantResult,
    point_from_samples,
    utc_stamp,
)

RunKey = tuple[int, int, int]  # (client index, point index, repeat) within a variant


@dataclass
class VariantState:
    """What one server variant has collected so far."""

    results: dict[RunKey, Point] = field(default_factory=dict)  # every client run, warm-ups too
    markers: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, Any] = field(default_factory=dict)
    gpu_state: dict[str, Any] = field(default_factory=dict)  # "before" / "after" the clients
    failed_step: str | None = None
    message: str | None = None
    started: bool = False  # False: never started (an earlier variant stopped the run)
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
    current: RunKey | None = None  # the client run under way

    def fail(self, step: str, message: str, tail: list[str] | None = None) -> None:
        if self.failed_step is None:
            self.failed_step = step
            self.message = message
            if tail is not None:
                self.log_tail = tail


@dataclass
class RunState:
    """What a run has collected so far; the pipeline fills it, `build_record` reads it."""

    steps: list[Step] = field(default_factory=list)
    variants: list[VariantState] = field(default_factory=list)  # one per variant started
    failed_step: str | None = None
    message: str | None = None
    tag: str = ""  # in the environment of every process of the run (its run id)
    lock: RunLock | None = None  # records each process started, for the next run
    current: str = "preflight"  # the step under way (what an interruption fails)

    @property
    def v(self) -> VariantState:
        """The variant under way (a fresh one before the first starts)."""
        if not self.variants:
            self.variants.append(VariantState())
        return self.variants[-1]

    def fail(self, step: str, message: str, tail: list[str] | None = None) -> None:
        """The run's first failure; also the current variant's."""
        if self.failed_step is None:
            self.failed_step = step
            self.message = message
        self.v.fail(step, message, tail)


def build_record(
    plan: Plan,
    verdict: Verdict | None,
    st: RunState,
    run_id: str,
    started: datetime,
    finished: datetime,
) -> Record:
    host = dict(verdict.host) if verdict is not None and verdict.host else _fallback_host()
    results = [_variant(v, st.variants[i] if i < len(st.variants) else VariantState(), st.tag)
               for i, v in enumerate(plan.variants)]
    status = "ok" if st.failed_step is None else "failed"
    record = Record(
        runbook=plan.runbook.id, page=plan.runbook.page, blocks_hash=plan.runbook.blocks_hash,
        run_id=run_id, started_at=utc_stamp(started), finished_at=utc_stamp(finished),
        status=status, failed_step=st.failed_step, message=_one_line(st.message), host=host,
        steps=tuple(st.steps), artifacts_dir=plan.artifacts_dir)
    if plan.variant_vars:
        return replace(record, variants=tuple(results))
    only = results[0]
    return replace(record, engine=only.engine, server=only.server, markers=only.markers,
                   timings=only.timings, clients=only.clients, gpu_state=only.gpu_state)


def _variant(planned: PlannedVariant, vs: VariantState, tag: str) -> VariantResult:
    srv = planned.server
    status = "ok" if vs.failed_step is None else "failed"
    if not vs.started:
        status = "skipped"
    clients = tuple(_client(c, ci, vs) for ci, c in enumerate(planned.clients))
    return VariantResult(
        coords=planned.coords,
        status=status,
        failed_step=vs.failed_step,
        message=_one_line(vs.message) if status == "failed" else (
            "not run: an earlier variant stopped the run" if status == "skipped" else None),
        engine={
            "name": srv.engine,
            "version": vs.engine_version,
            "image": srv.image,
            "image_digest": vs.image_digest,
            **({"image_id": vs.image_id} if srv.container is not None else {}),
        },
        server={
            "command": srv.display_command or mask_command(srv.command),
            "env": dict(sorted({**srv.container_env, **srv.display_env}.items())),
            **({"containers": list(vs.containers.ids) if vs.containers is not None else []}
               if srv.container is not None else {}),
            "port": srv.port,
            "model": vs.model_id,
            "log_tail": vs.log_tail if status == "failed" else [],
            "run_tag": tag or None,
        },
        markers=dict(sorted(vs.markers.items())),
        timings=dict(sorted(vs.timings.items())),
        gpu_state=dict(sorted(vs.gpu_state.items())),
        clients=clients,
    )


def _client(c: PlannedClient, ci: int, vs: VariantState) -> ClientResult:
    """One Point per sweep point, in plan order, from its measured runs; a failed warm-up
    fails the point; points that never ran are skipped."""
    points = []
    for pi, p in enumerate(c.points):
        coords = tuple(sorted(p.coords))
        warm = vs.results.get((ci, pi, 0))
        if warm is not None and warm.status != "ok":
            points.append(Point(p.value, warm.status, result_file=warm.result_file,
                                message=f"warm-up run: {warm.message or warm.status}",
                                seconds=warm.seconds, coords=coords))
            continue
        samples = [_sample(vs.results[(ci, pi, r.repeat)]) for r in p.runs
                   if not r.warmup and (ci, pi, r.repeat) in vs.results]
        if not samples:
            points.append(Point(p.value, "skipped", message="not run: an earlier step failed",
                                coords=coords))
            continue
        points.append(point_from_samples(p.value, samples, p.coords))
    sweep_var = c.sweep_vars[0] if c.sweep_vars else None
    return ClientResult(c.name, c.kind, c.display_command, sweep_var, tuple(points),
                        sweep_vars=c.sweep_vars, repeats=c.repeats, warmup=c.warmup)


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
