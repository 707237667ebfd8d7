"""The steps of a run as the executor records and reports them: progress events, a step's
outcome, and `step()`, which records a Step and reports its start and end."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from wikitools.runbook.execution.assemble import RunState
from wikitools.runbook.records.record import Step


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
    st.current = name
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
