"""The Ray side of a fleet run: connect to the cluster, submit one task per runbook (its GPUs,
its architecture as a custom resource), relay the nodes' progress, collect each record, and on
Ctrl-C cancel the tasks so every node tears its run down. Placement, queueing and retries are
Ray's. Never prints: lines go to `on_line`, results come back as Outcomes."""

from __future__ import annotations

import contextlib
import logging
import re
import socket
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypedDict

import ray
from ray import exceptions as rex
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from wikitools.core.errors import UsageError
from wikitools.fleet.node import Job, remove_stale_holds, run_job
from wikitools.fleet.records import Progress, lost_record, opening_record
from wikitools.fleet.select import Demand, place
from wikitools.runbook.blocks.declared import Runbook
from wikitools.runbook.execution.host import HostFacts
from wikitools.runbook.execution.planned import Verdict
from wikitools.runbook.execution.preflight import host_record, required_gpus
from wikitools.runbook.execution.processes import swapped_handlers
from wikitools.runbook.records.record import Record, RecordError, make_run_id
from wikitools.runbook.session import plan_elsewhere

POLL_S = 0.2
CONNECT_S = 5.0  # to check that the head answers at all
FLUSH_S = 30.0  # how long a task waits for its messages to reach the driver's side
CANCEL_WAIT_S = 120.0  # after an unexpected error: how long to wait for the nodes' teardowns
HUB_START_S = 60.0  # how long the head node may take to start the message hub
TIDY_S = 20.0  # how long the nodes may take to drop a lost run's port holds
LineSink = Callable[[str, str, str], None]  # (node, runbook id, text)


@dataclass(frozen=True, slots=True)
class Outcome:
    """How one runbook of the fleet ended. status: ok | failed | lost | cancelled | no-node |
    error. `record` is set for ok, failed and lost (it is what gets written)."""

    runbook: Runbook
    status: str
    node: str | None = None
    record: Record | None = None
    message: str | None = None
    submitted: float = 0.0  # driver wall clock
    began: float | None = None  # node wall clock when the task body started
    ended: float = 0.0  # driver wall clock when the outcome was known

    @property
    def dispatch_s(self) -> float | None:
        """Submission to the start of the run on its node."""
        return None if self.began is None else self.began - self.submitted


@ray.remote(max_retries=0)
def _run_remote(job: Job, hub: Any) -> dict[str, Any]:
    node_id = ray.get_runtime_context().get_node_id()
    sent: list[Any] = []
    try:
        return run_job(job, node_id, lambda msg: sent.append(hub.put.remote(msg)))
    finally:
        # Messages first: when the driver sees this task end, it has all the node said.
        with contextlib.suppress(Exception):
            ray.wait(sent, num_returns=len(sent), timeout=FLUSH_S)


class _Hub:
    """Collects the nodes' messages for the driver to drain."""

    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []

    def node(self) -> str:
        return str(ray.get_runtime_context().get_node_id())

    def put(self, msg: dict[str, Any]) -> None:
        self.items.append(msg)

    def drain(self) -> list[dict[str, Any]]:
        out, self.items = self.items, []
        return out


# Made an actor by a call, not a class decorator: type checkers keep a decorated class's own type.
_HubActor = ray.remote(_Hub)


@contextlib.contextmanager
def connect(address: str | None, on_line: LineSink | None = None) -> Iterator[None]:
    """Join the cluster at `address` (host:port, ray://host:port, or auto) as a driver. What
    Ray itself prints meanwhile goes to `on_line`, with a node's name in front."""
    _reachable(address)
    try:
        ray.init(address=address or "auto", log_to_driver=False,
                 logging_level=logging.WARNING, include_dashboard=False)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UsageError(f"cannot reach the Ray cluster at {address or 'auto'}: {first}") from None
    with _ray_says(on_line or (lambda _n, _r, _t: None)):
        try:
            yield
        finally:
            ray.shutdown()


def _reachable(address: str | None) -> None:
    """Fail fast with a clear message when HOST:PORT does not answer (Ray itself retries for
    minutes before giving up)."""
    if not address or address == "auto":
        return
    host, sep, port = address.removeprefix("ray://").rpartition(":")
    if not sep or not port.isdigit():
        raise UsageError(f"--address {address}: expected HOST:PORT, ray://HOST:PORT or auto")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_S):
            pass
    except OSError as exc:
        why = exc.strerror or type(exc).__name__
        raise UsageError(f"cannot reach the Ray cluster at {address}: {why}") from None


def node_names() -> dict[str, str]:
    """Node id → the name given with `ray start --node-name` (its IP address by default)."""
    return {n["NodeID"]: n.get("NodeName") or n.get("NodeManagerAddress") or n["NodeID"][:8]
            for n in ray.nodes()}


def _head_node() -> str | None:
    for n in ray.nodes():
        if n.get("Alive") and "node:__internal_head__" in n.get("Resources", {}):
            return str(n["NodeID"])
    return None


def _hub_on_head(names: dict[str, str], say: LineSink) -> Any:
    """The message hub, on the head node and nowhere else: a worker node can be lost, and the
    progress of runs on healthy nodes with it. A hard constraint: Ray never puts it elsewhere."""
    home = _head_node()
    if home is None:
        raise UsageError("the Ray cluster has no live head node to collect progress on")
    hub: Any = _HubActor.options(
        num_cpus=0, scheduling_strategy=NodeAffinitySchedulingStrategy(home, soft=False)
    ).remote()
    where = str(ray.get(hub.node.remote(), timeout=HUB_START_S))
    say("driver", "-", f"progress collected on the head node {names.get(where, where[:8])}")
    return hub


@ray.remote(num_cpus=0, max_retries=0)
def _tidy() -> list[str]:
    return remove_stale_holds()


def _tidy_after_loss(names: dict[str, str], say: LineSink) -> None:
    """After a lost node: every live node drops the port holds whose holder is gone (a node
    sharing the lost one's host removes its hold file)."""
    refs = {n["NodeID"]: _tidy.options(scheduling_strategy=NodeAffinitySchedulingStrategy(
        n["NodeID"], soft=False)).remote() for n in ray.nodes() if n.get("Alive")}
    ready, _ = ray.wait(list(refs.values()), num_returns=len(refs), timeout=TIDY_S)
    for node_id, ref in refs.items():
        if ref not in ready:
            continue
        with contextlib.suppress(rex.RayError):
            ports = ray.get(ref)
            if ports:
                say(names.get(node_id, node_id[:8]), "-",
                    f"removed the port holds of a lost run: {', '.join(ports)}")


def node_totals() -> list[dict[str, float]]:
    """Total resources of each live node."""
    return [dict(n["Resources"]) for n in ray.nodes() if n.get("Alive")]


class _Interrupts:
    """SIGINT/SIGTERM set a flag instead of raising, so the loop can cancel and wait. Swapped
    in and out by the executor's own helper (signals blocked during each swap, always
    restored)."""

    def __init__(self) -> None:
        self.count = 0
        self._swap = contextlib.ExitStack()

    def __enter__(self) -> _Interrupts:
        self._swap.enter_context(swapped_handlers(self._handle))
        return self

    def _handle(self, _signum: int, _frame: Any) -> None:
        self.count += 1

    def __exit__(self, *exc: object) -> None:
        self._swap.close()


_NODE_NAMED = re.compile(r"node name: (?P<name>[^\s,]+)|node id: (?P<id>[0-9a-f]{16,})")
_COLOUR = re.compile(r"\x1b\[[0-9;]*m")


@contextlib.contextmanager
def _ray_says(say: LineSink) -> Iterator[None]:
    """What Ray itself prints on the driver while the fleet runs (a lost node's raylet crash
    dump, "node … marked dead") goes to `say` with the node's name in front, never bare onto
    stdout. Ray publishes these messages without saying which node they are about: the node
    the text names, else the node most recently seen dead, else "ray"."""
    from ray._private import worker as ray_worker

    alive = {n["NodeID"] for n in ray.nodes() if n.get("Alive")}

    def about(text: str) -> str:
        with contextlib.suppress(Exception):  # also after ray.shutdown(): then "ray"
            names = node_names()
            m = _NODE_NAMED.search(text)
            if m and m["name"]:
                return m["name"]
            if m and m["id"]:
                return names.get(m["id"], m["id"][:8])
            dead = [n["NodeID"] for n in ray.nodes() if not n.get("Alive")
                    and n["NodeID"] in alive]
            if dead:
                return names.get(dead[-1], dead[-1][:8])
        return "ray"

    def print_to_stdstream(data: dict[str, Any], ignore_prefix: bool = False) -> None:
        del ignore_prefix
        text = "\n".join(str(x) for x in data.get("lines") or [])
        node = about(text)
        for line in _COLOUR.sub("", text).splitlines():
            if line.strip():
                say(node, "-", f"ray: {line.strip()}")

    original = ray_worker.print_to_stdstream
    ray_worker.print_to_stdstream = print_to_stdstream
    try:
        yield
    finally:
        ray_worker.print_to_stdstream = original


@dataclass
class _Run:
    runbook: Runbook
    ref: Any
    submitted: float
    node: str | None = None
    began: float | None = None
    opening: Record | None = None
    record: dict[str, Any] | None = None
    progress: Progress | None = None


def run_fleet(
    runbooks: Sequence[Runbook],
    *,
    workdir: str,
    force: bool = False,
    retries: int = 0,
    on_line: LineSink | None = None,
    on_outcome: Callable[[Outcome], None] | None = None,
) -> tuple[list[Outcome], bool]:
    """Submit every runbook and wait for all of them. Returns the outcomes in the order of
    `runbooks` and whether the run was interrupted. Needs `connect` first."""
    say = on_line or (lambda _n, _r, _t: None)
    names = node_names()
    totals = node_totals()
    outcomes: dict[str, Outcome] = {}

    def finish(o: Outcome) -> None:
        outcomes[o.runbook.id] = o
        if on_outcome is not None:
            on_outcome(o)

    hub = _hub_on_head(names, say)
    runs: dict[str, _Run] = {}
    with _Interrupts() as sig:
        for rb in runbooks:
            d = place(rb, totals)
            if sig.count:
                finish(Outcome(rb, "cancelled", message="interrupted before it was submitted",
                               ended=time.time()))
            elif d is None:
                finish(Outcome(rb, "no-node", message=_no_node(rb), ended=time.time()))
            else:
                t = time.time()
                ref = _submit(rb, d, Job(rb, workdir, force, None, t), hub, retries)
                runs[rb.id] = _Run(rb, ref, t, progress=Progress())
                say("driver", rb.id, f"submitted ({d.describe()})")
        pending = {r.ref: r for r in runs.values()}
        try:
            _wait_all(pending, runs, hub, names, sig, say, finish)
        except BaseException:
            # Whatever went wrong here, the nodes still tear their runs down.
            for ref in pending:
                ray.cancel(ref)
            ray.wait(list(pending), num_returns=len(pending), timeout=CANCEL_WAIT_S)
            raise
        interrupted = sig.count > 0
    if any(o.status == "lost" for o in outcomes.values()):
        _tidy_after_loss(names, say)
    order = {rb.id: i for i, rb in enumerate(runbooks)}
    return sorted(outcomes.values(), key=lambda o: order[o.runbook.id]), interrupted


def _wait_all(pending: dict[Any, _Run], runs: dict[str, _Run], hub: Any,
              names: dict[str, str], sig: _Interrupts, say: LineSink,
              finish: Callable[[Outcome], None]) -> None:
    """Relay progress and collect outcomes until every task has ended; on the first Ctrl-C,
    cancel what is left (each node then tears its run down) and keep waiting."""
    cancelled_at = 0
    relay = _Relay(hub, runs, names, say)
    while pending:
        ready, _ = ray.wait(list(pending), num_returns=len(pending), timeout=POLL_S)
        relay()
        for ref in ready:
            run = pending.pop(ref)
            relay()
            finish(_outcome(run, ref, names))
        if sig.count > cancelled_at and pending:
            if cancelled_at == 0:
                say("driver", "-", "interrupted: cancelling; each node tears its run down")
                for ref in pending:
                    ray.cancel(ref)
            else:
                say("driver", "-", f"waiting for {len(pending)} run(s) to finish tearing down")
            cancelled_at = sig.count


class _Relay:
    """Drains the hub and prints what the nodes said. If the hub is lost, progress lines stop
    (said once) but the runs go on: their records come back as the tasks' results."""

    def __init__(self, hub: Any, runs: dict[str, _Run], names: dict[str, str],
                 say: LineSink) -> None:
        self.hub, self.runs, self.names, self.say = hub, runs, names, say

    def __call__(self) -> None:
        if self.hub is None:
            return
        try:
            msgs = ray.get(self.hub.drain.remote())
        except rex.RayActorError as exc:
            self.hub = None
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            self.say("driver", "-", f"progress messages lost ({type(exc).__name__}: {first}); "
                     "records still come back")
            return
        for msg in msgs:
            _message(msg, self.runs, self.names, self.say)


def _submit(rb: Runbook, d: Demand, job: Job, hub: Any, retries: int) -> Any:
    return _run_remote.options(
        num_gpus=d.num_gpus, num_cpus=d.num_cpus, resources=dict(d.resources),
        max_retries=retries, name=f"wiki-runbook:{rb.id}",
    ).remote(job, hub)


def _no_node(rb: Runbook) -> str:
    need = required_gpus(rb.server)
    what = f"{need} GPU{'s' * (need != 1)}" if need else "a CPU"
    archs = rb.server.requirements.arch
    return f"no node of the cluster has {what}" + (
        f" and the resource {' or '.join(archs)}" if archs else "")


def _message(msg: dict[str, Any], runs: dict[str, _Run], names: dict[str, str],
             say: LineSink) -> None:
    run = runs.get(msg.get("runbook", ""))
    if run is None:
        return
    node_id = msg.get("node_id", "")
    if node_id not in names:
        names.update(node_names())
    run.node = names.get(node_id, node_id[:8])
    kind = msg.get("kind")
    assert run.progress is not None
    if kind == "begin":
        run.began = float(msg["t"])
        say(run.node, run.runbook.id, f"started (pid {msg.get('pid')})")
    elif kind == "opening":
        with contextlib.suppress(RecordError):
            run.opening = Record.from_dict(msg["record"])
    elif kind == "record":
        run.record = msg["record"]
    elif kind == "note":
        say(run.node, run.runbook.id, str(msg.get("text")))
    elif kind == "event":
        text = _event_text(msg, run.progress)
        if text:
            say(run.node, run.runbook.id, text)


def _event_text(msg: dict[str, Any], progress: Progress) -> str | None:
    ev, step, status = msg["event"], msg["step"], msg.get("status")
    message = msg.get("message")
    if ev in ("step-start", "point-start"):
        progress.started(step)
        if ev == "point-start":
            return f"{step} ({msg['index']}/{msg['total']})"
        return None if step in ("preflight", "start") else step
    if ev in ("step-end", "point-end"):
        progress.ended(step, status or "?", float(msg.get("elapsed") or 0.0), message)
        return f"{status} {step}" + (f": {message}" if message and status != "ok" else "")
    if ev == "waiting":
        return f"waiting for readiness: {status} ({float(msg['elapsed']):.0f} s)"
    return None


class _Times(TypedDict):
    """Where and when a run went, common to every Outcome."""

    node: str | None
    submitted: float
    began: float | None
    ended: float


def _outcome(run: _Run, ref: Any, names: dict[str, str]) -> Outcome:
    now = time.time()
    base = _Times(node=run.node, submitted=run.submitted, began=run.began, ended=now)
    try:
        data = ray.get(ref)
    except rex.TaskCancelledError:
        if run.record is not None:  # cancelled while running: the node still sent its record
            return _from_record(run, run.record, base)
        return Outcome(run.runbook, "cancelled", message="cancelled before it started", **base)
    except (rex.NodeDiedError, rex.WorkerCrashedError, rex.RaySystemError,
            rex.ObjectLostError) as exc:
        if run.record is not None:
            return _from_record(run, run.record, base)
        return _lost(run, exc, base)
    except rex.RayTaskError as exc:
        cause = exc.cause if getattr(exc, "cause", None) is not None else exc
        text = f"{type(cause).__name__}: {cause}".splitlines()[0]
        return Outcome(run.runbook, "error", message=text, **base)
    return _from_record(run, data, base)


def _from_record(run: _Run, data: dict[str, Any], base: _Times) -> Outcome:
    record = Record.from_dict(data)
    return Outcome(run.runbook, "ok" if record.ok else "failed", record=record,
                   message=record.message, **base)


def _lost(run: _Run, exc: Exception, base: _Times) -> Outcome:
    where = run.node or "its node"
    message = f"node {where} was lost during the run ({type(exc).__name__})"
    opening = run.opening or _opening_here(run)
    assert run.progress is not None
    record = lost_record(opening, run.progress, message, datetime.now(UTC))
    return Outcome(run.runbook, "lost", record=record, message=message, **base)



def _opening_here(run: _Run) -> Record:
    """The opening record made on the driver, for a node lost before it sent its own: the
    host section says nothing is known about that host."""
    rb = run.runbook
    started = datetime.fromtimestamp(run.began or run.submitted, UTC)
    run_id = make_run_id(started, rb.blocks_hash)
    plan = plan_elsewhere(rb, run_id)
    host = host_record(HostFacts(smi_found=False), (), required_gpus(rb.server) == 0)
    return opening_record(plan, Verdict(checks=(), selected_gpus=(), host=host), run_id, started)
