"""Records a fleet run writes for runs whose node cannot send one: the record as it stood when
the run began (built on the node from its plan), completed on the driver with what the node's
progress messages said once the node is lost. Same schema and keys as the executor's records."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime

from wikitools.runbook.execution.assemble import RunState, build_record
from wikitools.runbook.execution.planned import Plan, Verdict
from wikitools.runbook.records.record import Record, Step, utc_stamp

LOST_POINT = "measured, but the result stayed on the lost node"


def opening_record(plan: Plan, verdict: Verdict, run_id: str, started: datetime) -> Record:
    """The record of `plan` before any step ran (every point skipped), built as the executor
    builds its own; completed by `lost_record` if the node goes away."""
    # The run's tag is chosen by the executor on the node when the run starts: not known here.
    return build_record(plan, verdict, RunState(), run_id, started, started)


@dataclass
class Progress:
    """What the node said so far about one run: steps ended, the step under way."""

    steps: list[Step] = field(default_factory=list)
    current: str | None = None

    def started(self, step: str) -> None:
        self.current = step

    def ended(self, step: str, status: str, seconds: float, message: str | None) -> None:
        self.steps.append(Step(step, status, round(seconds, 3), message))
        self.current = None
        if step == "ready" and status == "ok":
            self.current = "warmup"


def lost_record(opening: Record, progress: Progress, message: str, finished: datetime) -> Record:
    """`opening` completed for a run whose node went away: the step under way failed with
    `message`; points that ended keep their status (their numbers were lost with the node)."""
    done = {s.name: s for s in progress.steps}
    if progress.current is not None:
        failed = progress.current
    elif not progress.steps:
        failed = "preflight"
    else:
        failed = _next_step(opening, done)
    clients = []
    for c in opening.clients:
        points = []
        for p in c.points:
            label = f"client:{c.name}" + (f"[{p.value}]" if p.value is not None else "")
            runs = [s for name, s in done.items() if _of_point(name, label)]
            bad = next((s for s in runs if s.status != "ok"), None)
            measured = [s for s in runs if not s.name.endswith(" warm-up")]
            if bad is not None:
                points.append(replace(p, status=bad.status, message=bad.message,
                                      seconds=bad.seconds))
            elif _of_point(failed, label):
                points.append(replace(p, status="failed", message=message))
            elif len(measured) >= c.repeats:
                points.append(replace(p, status="ok", message=LOST_POINT,
                                      seconds=round(sum(s.seconds for s in runs), 3)))
            else:
                points.append(p)
        clients.append(replace(c, points=tuple(points)))
    steps = (*progress.steps, Step(failed, "failed", 0.0, message))
    return replace(opening, status="failed", failed_step=failed, message=message,
                   finished_at=utc_stamp(finished), steps=steps, clients=tuple(clients))


def _of_point(step: str, label: str) -> bool:
    """True for the step of a point's run: `client:x[8]`, `… warm-up`, `… run 2/3`."""
    return step == label or step.startswith(label + " ")


def _next_step(opening: Record, done: dict[str, Step]) -> str:
    order = ["preflight", "start", "ready", "warmup"]
    for c in opening.clients:
        order += [f"client:{c.name}" + (f"[{p.value}]" if p.value is not None else "")
                  for p in c.points]
    return next((s for s in order if s not in done), "teardown")
