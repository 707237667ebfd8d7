"""The end of a variant: stop the client, the server's process group and its containers, then
check that the port is free and the GPU memory came back before anything else starts."""

from __future__ import annotations

import time

from wikitools.runbook.execution import containers as docker
from wikitools.runbook.execution.assemble import RunState, VariantState
from wikitools.runbook.execution.host import gpu_memory_used, port_free
from wikitools.runbook.execution.planned import PlannedVariant, Verdict
from wikitools.runbook.execution.processes import stop_all_tagged, stop_group, wait_until
from wikitools.runbook.execution.steps import EventSink, step
from wikitools.runbook.records.record import Step

CLIENT_GRACE_S = 5.0  # TERM → KILL grace for a client's process group
GPU_MEM_TOLERANCE_MIB = 64


def image_facts(vs: VariantState) -> None:
    """The image the variant's container runs (its ID and digest), once it has one."""
    box = vs.containers
    if box is None or not box.ids:
        return
    facts = docker.image_of(box.ids[0])
    vs.image_id = facts.image_id
    vs.image_digest = facts.digest or facts.image_id


def teardown(
    variant: PlannedVariant,
    st: RunState,
    vs: VariantState,
    emit: EventSink,
    baseline_gpu: dict[int, int] | None,
    verdict: Verdict | None,
) -> bool:
    """Stop everything the variant started and check that its port and GPU memory came back;
    False when something was left behind (then no later variant may start)."""
    name = variant.step("teardown")
    if not vs.server_started:
        st.steps.append(Step(name, "skipped", 0.0, "nothing was started"))
        return True
    with step(st, emit, name) as out:
        t = time.monotonic()
        problems, notes = _stop_everything(variant, st, vs)
        if baseline_gpu is not None:
            leak = _gpu_leak(baseline_gpu, verdict)
            if leak:
                problems.append(leak)
        vs.timings["teardown_s"] = out.seconds = round(time.monotonic() - t, 3)
        if problems:
            out.status, out.message = "failed", "; ".join(problems)
            st.fail(name, out.message)
        else:
            out.message = "; ".join(notes) or None
    return not problems


def _stop_everything(variant: PlannedVariant, st: RunState,
                     vs: VariantState) -> tuple[list[str], list[str]]:
    """Stop the client and server groups and the container; check the port. (problems, notes)"""
    problems: list[str] = []
    notes: list[str] = []
    if vs.client is not None:
        _clean, note = stop_group(vs.client, CLIENT_GRACE_S)
        vs.client = None
        if note and "survived" in note:
            problems.append(f"client {note}")
    if vs.containers is not None:
        # Only the containers that carry this run's label or are of its own Compose project.
        if vs.image_id is None:
            image_facts(vs)
        bad, done = vs.containers.stop(variant.server.stop_timeout)
        problems += bad
        notes += done
    if vs.server is not None:
        code = vs.server.poll()
        detached = vs.containers is not None and vs.containers.spec.detached and code == 0
        if code is not None and not detached:
            notes.append(f"server had exited with code {code}")
        _clean, note = stop_group(vs.server, variant.server.stop_timeout)
        if note:
            (problems if "survived" in note else notes).append(f"server {note}")
    # What left the process groups (a `setsid` grandchild) still carries the run's tag.
    strays = stop_all_tagged(st.tag, CLIENT_GRACE_S)
    if strays:
        named = ", ".join(s.describe() for s in strays)
        problems.append(f"{len(strays)} process{'es' * (len(strays) != 1)} left running outside "
                        f"the server's and clients' process groups, stopped: {named}")
    if not wait_until(lambda: port_free(variant.server.port, variant.server.host), 5.0):
        problems.append(f"port {variant.server.port} still in use after teardown")
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
