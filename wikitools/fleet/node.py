"""One runbook on the node Ray placed it on: the same preparation (runbook lookup, preflight,
plan) and executor as `wiki runbook run`, in the node's copy of the wiki. Progress goes back as
messages; the record is returned to the driver, never written here. No Ray import: the driver
wraps `run_job`."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wikitools.core.errors import InputError
from wikitools.fleet.records import opening_record
from wikitools.runbook.blocks.declared import Runbook
from wikitools.runbook.execution import locks
from wikitools.runbook.execution.execute import Event
from wikitools.runbook.execution.host import free_port, port_free
from wikitools.runbook.execution.processes import environ_of
from wikitools.runbook.session import RunOptions, prepare, run_prepared

Message = dict[str, Any]
Send = Callable[[Message], None]
WAITING_EVERY_S = 10.0  # readiness polls are forwarded at most this often
PORTS_DIR = "fleet-ports"  # in the user's lock folder: ports held by runs on this host


class CheckoutDiffers(InputError):
    """The node's copy of the wiki does not hold the runbook the driver selected."""


@dataclass(frozen=True, slots=True)
class Job:
    """One runbook as the driver sends it. The node finds it again in its own checkout and
    refuses to run when the blocks differ from the driver's (the record would not match)."""

    runbook: Runbook
    workdir: str  # the wiki root on the node: commands run there, artifacts stay there
    force: bool = False
    port: int | None = None  # None: the block's port when free on the node, else a free one
    submitted: float = 0.0  # driver wall clock at submission


def run_job(job: Job, node_id: str, send: Send) -> dict[str, Any]:
    """Run the job here; return the record as a dict. Sends `begin` (before preflight),
    `opening` (the record as it stands before any step), `event` lines and `record`."""
    rb = job.runbook
    base: Message = {"runbook": rb.id, "node_id": node_id}
    send({**base, "kind": "begin", "t": time.time(), "pid": os.getpid(),
          "submitted": job.submitted})
    root = Path(job.workdir)
    if not root.is_dir():
        raise FileNotFoundError(f"the wiki root {job.workdir} does not exist on this node")
    with _port_for(rb, job.port) as port, _launch_environment():
        override = None if port == rb.server.port else port
        options = RunOptions(port=override, force=job.force, render=False, write=False)
        prepared = prepare(rb.ref, root, options)
        if prepared.runbook.blocks_hash != rb.blocks_hash:
            raise CheckoutDiffers(
                f"the checkout in {job.workdir} holds other blocks for runbook '{rb.id}' than "
                "the driver's (update it to the same commit)")
        opening = opening_record(prepared.plan, prepared.verdict, prepared.run_id,
                                 prepared.started)
        send({**base, "kind": "opening", "record": opening.to_dict()})
        result = run_prepared(prepared, _forward(base, send))
    for left in result.leftovers:
        send({**base, "kind": "note",
              "text": f"stopped, left by an earlier run that was killed: {left.describe()}"})
    record = result.record
    data = record.to_dict()
    # Also through the message channel: a cancelled task's return value may not arrive.
    send({**base, "kind": "record", "record": data})
    return data


def _forward(base: Message, send: Send) -> Callable[[Event], None]:
    last_wait = [time.monotonic()]

    def on_event(e: Event) -> None:
        if e.kind == "waiting":
            now = time.monotonic()
            if now - last_wait[0] < WAITING_EVERY_S:
                return
            last_wait[0] = now
        send({**base, "kind": "event", "event": e.kind, "step": e.step, "status": e.status,
              "message": e.message, "elapsed": e.elapsed, "index": e.index, "total": e.total})

    return on_event


# --------------------------------------------------------------------------- environment

# Ray's own: a worker adds these to what `ray start` had (OMP_NUM_THREADS=1 would starve a CPU
# engine). CUDA_VISIBLE_DEVICES stays: it is Ray's choice of GPUs for this task.
KEEP_FROM_RAY = ("CUDA_VISIBLE_DEVICES",)


@contextlib.contextmanager
def _launch_environment() -> Iterator[None]:
    """For the run, the environment the node was started with (the raylet's), so commands
    see what they would see in a shell on that host; restored afterwards (workers are reused)."""
    launch = _raylet_environ()
    if launch is None:
        yield
        return
    removed = {k: v for k, v in os.environ.items() if k not in launch and k not in KEEP_FROM_RAY}
    for k in removed:
        del os.environ[k]
    try:
        yield
    finally:
        os.environ.update(removed)


def _raylet_environ() -> dict[str, str] | None:
    pid = os.environ.get("RAY_RAYLET_PID", "")
    if not pid.isdigit():
        return None
    return environ_of(int(pid)) or None


# --------------------------------------------------------------------------- ports


def ports_dir() -> Path:
    """Where the runs on this host hold their ports: the user's own lock folder."""
    return locks.private_dir(locks.user_state_dir() / PORTS_DIR)


@contextlib.contextmanager
def _port_for(runbook: Runbook, wanted: int | None) -> Iterator[int]:
    """Hold a port for this run on this node: `wanted`, else the block's when nothing listens
    there and no other fleet run here holds it, else a free one. Held by a lock file (the one
    lock primitive), so runs sharing a host never pick the same port; holds whose holder died
    (a lost node's) are removed first."""
    if wanted:
        yield wanted
        return
    folder = ports_dir()
    locks.remove_stale(folder)
    held = _hold(folder, runbook.server.port) if port_free(runbook.server.port) else None
    while held is None:
        held = _hold(folder, free_port())
    try:
        yield int(held.path.name)
    finally:
        held.release(remove=True)


def _hold(folder: Path, port: int) -> locks.Lock | None:
    held = locks.try_lock(folder / str(port))
    if held is not None:
        held.write(f"{os.getpid()}\n".encode())
    return held


def remove_stale_holds() -> list[str]:
    """Drop the port holds on this host whose holder is gone (a lost node's); their ports."""
    return [p.name for p in locks.remove_stale(ports_dir())]
