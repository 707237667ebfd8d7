"""One runbook run from start to finish, shared by `wiki runbook plan`, `wiki runbook run` and
anything else that runs runbooks (a fleet of hosts): find the runbook, check the host, make the
plan, hold the runbook and its port for the run, execute it, write the record (or keep it
elsewhere when it cannot be written) and re-render the pages that show it. Never prints."""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

from wikitools.core.config import PAGE_FILE_CODES, load_config
from wikitools.core.diagnostics import Diagnostic, Severity, sort_diagnostics
from wikitools.core.errors import InputError, UsageError
from wikitools.core.fsio import write_if_changed
from wikitools.pages.parse import Page
from wikitools.runbook.blocks.declared import Runbook, RunbookSet
from wikitools.runbook.blocks.extract import load_runbooks
from wikitools.runbook.blocks.regions import unshown_runbooks
from wikitools.runbook.blocks.sources import runbook_unset
from wikitools.runbook.blocks.sweep import Sweep, SweepError, parse_sweep
from wikitools.runbook.blocks.variables import unset_variables
from wikitools.runbook.execution.execute import EventSink, execute
from wikitools.runbook.execution.host import HostFacts, gather_host
from wikitools.runbook.execution.plan import (
    ARTIFACTS_ROOT,
    PlanOverrides,
    artifacts_dir_for,
    make_plan,
)
from wikitools.runbook.execution.planned import Plan, Verdict
from wikitools.runbook.execution.preflight import preflight
from wikitools.runbook.execution.processes import (
    Interrupted,
    Leftover,
    signals_ignored,
    signals_raise,
)
from wikitools.runbook.execution.receipt import build_receipt, cache_state, named_paths, snapshot
from wikitools.runbook.execution.runlock import RunLock, remove_temp_files
from wikitools.runbook.execution.steps import Event
from wikitools.runbook.records.compare import Comparison, compare_variants, previous_comparable
from wikitools.runbook.records.kld_scores import keep_references, score_record
from wikitools.runbook.records.record import (
    RECORDS_DIR,
    Record,
    RecordError,
    Step,
    VariantResult,
    dumps,
    load_records,
    make_run_id,
    masked,
    record_rel_path,
    write_record,
)
from wikitools.runbook.records.resume import (
    carried,
    check_same_gpus,
    check_same_runs,
    merged,
    receipt_entry,
    resumed_record,
)
from wikitools.runbook.rendering.render import Change, render_pages


class BlockErrors(InputError):
    """The runbook's page has block errors (a typo in a client block, say): nothing starts."""


@dataclass(frozen=True, slots=True)
class RunOptions:
    """How to run: the command-line options of `wiki runbook run` as data."""

    port: int | None = None  # serve on this port instead of the block's
    sweep: str | None = None  # "VAR=v1,v2[;VAR2=…]": these sweep values instead of the block's
    variant: str | None = None  # "KV=fp8[;MTP=3]": only the server variants it names
    clients: tuple[str, ...] | None = None  # run only these clients
    force: bool = False  # run although preflight refuses
    render: bool = True  # re-render the pages that show this runbook's results
    repeats: int | None = None  # measured runs per sweep point (default 3 for serving clients)
    warmup: bool | None = None  # an unrecorded run before each point (default: serving clients)
    write: bool = True  # write the record here (a fleet node returns it to the driver instead)
    resume: str | None = None  # a run id, or "latest": continue that run's unfinished variants


@dataclass(frozen=True, slots=True)
class Prepared:
    """A runbook ready to run: what preflight said and exactly what would execute."""

    root: Path
    options: RunOptions
    runbook: Runbook
    runbooks: RunbookSet
    pages: tuple[Page, ...]
    verdict: Verdict
    plan: Plan
    started: datetime
    run_id: str
    unset: tuple[tuple[str, str], ...] = ()  # (variable, which block reads it) not set here
    warnings: tuple[Diagnostic, ...] = ()  # block warnings of the runbook's page (RB017 …)
    resumed: Record | None = None  # the earlier run `--resume` continues


@dataclass(frozen=True, slots=True)
class RunResult:
    record: Record  # as stored: secrets masked
    record_path: Path | None  # where the record was written; None when it could not be
    rendered: tuple[str, ...]  # pages re-rendered (paths relative to the root)
    diagnostics: tuple[Diagnostic, ...]  # from rendering those pages
    leftovers: tuple[Leftover, ...] = ()  # processes of a dead earlier run, stopped first
    removed: tuple[str, ...] = ()  # half-written files of a dead earlier run, removed first
    record_error: str | None = None  # why the record could not be written
    kept_at: Path | None = None  # where the record was kept instead
    previous: Record | None = None  # the last successful record on the same GPUs, if any
    comparisons: tuple[Comparison, ...] = ()  # with `previous`, one per server variant


def prepare(
    selector: str,
    root: Path,
    options: RunOptions | None = None,
    *,
    facts: HostFacts | None = None,
) -> Prepared:
    """Find the runbook (`ID` or `path/to/page.md#ID`), run preflight on this host (`facts`
    when given, else nvidia-smi) and make the plan. Raises UsageError for a bad selector or
    option; starts nothing and writes nothing."""
    options = options or RunOptions()
    if options.port is not None and not 1 <= options.port <= 65535:
        raise UsageError(f"--port {options.port}: expected 1-65535")
    if options.repeats is not None and not 1 <= options.repeats <= 100:
        raise UsageError(f"--repeats {options.repeats}: expected 1-100")
    config = load_config(root)
    runbooks, diags, pages = load_runbooks(config.root)
    if not selector.strip("#").strip():
        raise UsageError("name a runbook: ID or path/to/page.md#ID")
    unread = [d for d in diags if d.code in PAGE_FILE_CODES]
    runbook = _find(runbooks, selector, unread)
    block_errors(runbook, diags)
    sweep = option_sweep("--sweep", options.sweep)
    variants = option_sweep("--variant", options.variant)
    facts = facts if facts is not None else gather_host()
    verdict = preflight(runbook, force=options.force, port=options.port, facts=facts)
    started = datetime.now(UTC)
    run_id = make_run_id(started, runbook.blocks_hash)
    overrides = PlanOverrides(port=options.port, sweep=sweep, variants=variants,
                              clients=options.clients, repeats=options.repeats,
                              warmup=options.warmup)
    resumed = None
    if options.resume is not None:
        resumed = resumed_record(config.root, runbook.id, runbook.blocks_hash, options.resume,
                                 runbook.server.variants.points())
        check_same_gpus(resumed, [g.name for g in facts.gpus])
        kept = carried(resumed)
        overrides = _resuming(overrides, resumed, kept, config.root)
    plan = make_plan(runbook, root=config.root, artifacts_dir=artifacts_dir_for(runbook, run_id),
                     overrides=overrides, verdict=verdict)
    if resumed is not None:
        plan = _resume_checked(plan, record_rel_path(resumed), kept)
    shown = [*diags, *unshown_runbooks(pages, [runbook])]
    warnings = tuple(d for d in sort_diagnostics(shown)
                     if d.path == runbook.page or d.code in PAGE_FILE_CODES)
    return Prepared(config.root, options, runbook, runbooks, tuple(pages), verdict, plan,
                    started, run_id, unset_here(runbook, pages), warnings, resumed)


def _resuming(overrides: PlanOverrides, resumed: Record, kept: tuple[VariantResult, ...],
              root: Path) -> PlanOverrides:
    """The plan overrides of a run that resumes `resumed`: its finished variants left out, its
    repeats and warm-up where no option names them, and its cache folders where they are on
    this host (the starts are then as warm as its later ones were). `kept`: its finished
    variants."""
    clients = [c for v in kept for c in v.clients]
    if overrides.repeats is None and len({c.repeats for c in clients}) == 1:
        overrides = replace(overrides, repeats=clients[0].repeats)  # as the earlier run did
    if overrides.warmup is None and clients and not any(c.warmup for c in clients):
        overrides = replace(overrides, warmup=False)
    # the folders of the run resumed, then of the runs its finished variants were measured in
    runs = dict.fromkeys([resumed.run_id, *(v.measured_in for v in kept if v.measured_in)])
    folders = [f"{ARTIFACTS_ROOT}/{resumed.runbook}/{run}/caches" for run in runs]
    return replace(overrides, done=frozenset(v.coords for v in kept),
                   caches_dir=next((f for f in folders if (root / f).is_dir()), None))


def _resume_checked(plan: Plan, where: str, kept: tuple[VariantResult, ...]) -> Plan:
    """The plan, once its clients run as they did in the variants taken over (`kept`, of the
    record at `where`), with a note."""
    check_same_runs(kept, {c.name: (c.repeats, c.warmup) for v in plan.variants
                           for c in v.clients}, where)
    names = ", ".join(str(v.name) for v in kept) or "none"
    note = f"resumes {where}: takes over the variants it finished ({names})"
    return replace(plan, notes=(*plan.notes, note))


def _find(runbooks: RunbookSet, selector: str, unread: list[Diagnostic]) -> Runbook:
    """The runbook `selector` names; an unknown one on a page that could not be read (a broken
    or looping link) says so."""
    try:
        return runbooks.get(selector)
    except UsageError as exc:
        page = selector.rpartition("#")[0].removeprefix("./")
        why = next((d for d in unread if page and d.path == page), None)
        if why is None:
            raise
        raise UsageError(f"{exc}; {why.format()}") from None


def unset_here(runbook: Runbook, pages: list[Page]) -> tuple[tuple[str, str], ...]:
    """(variable, which block reads it) for what the commands need and nothing here sets: the
    server's as `wiki check` refuses them (RB015), then the clients'."""
    server = [(name, "the server command") for r in runbook_unset(runbook, pages, os.environ)
              for name in r.variables]
    clients = [(name, where) for name, where in unset_variables(runbook, os.environ)
               if where != "the server command"]
    return tuple(dict.fromkeys(server + clients))


def block_errors(runbook: Runbook, diags: list[Diagnostic]) -> None:
    """Raise BlockErrors when the runbook's page has block errors: a client block with a typo
    is dropped by the reader, and a run without it would replace the table with no results."""
    errors = [d for d in sort_diagnostics(diags)
              if d.path == runbook.page and d.severity is Severity.ERROR]
    if errors:
        lines = "\n".join(d.format() for d in errors)
        raise BlockErrors(f"{runbook.page} has block errors; nothing was started:\n{lines}")


def run_prepared(
    prepared: Prepared,
    on_event: EventSink | None = None,
    *,
    handle_signals: bool = True,
) -> RunResult:
    """Hold the runbook and its port (RunLocked when another run has them; what a dead run
    left is stopped first), execute the plan, write the record and (unless options.render is
    False) re-render the pages holding a results region of this runbook. A run refused by
    preflight measured nothing: its record stays in the artifacts folder, never in runbooks/.
    A record that cannot be written is kept in the run's artifacts folder instead, and then no
    page is re-rendered (RunResult.record_error says why)."""
    root, options = prepared.root, prepared.options
    lock = RunLock(root, prepared.runbook.id, prepared.plan.server.port, prepared.run_id)
    leftovers = lock.acquire()
    try:
        removed = remove_temp_files(root, _written_targets(prepared))
        named = named_paths(prepared.plan)
        before, caches = snapshot(root, named), cache_state(prepared.plan, root)
        record = execute(prepared.plan, root=root, verdict=prepared.verdict, on_event=on_event,
                         started=prepared.started, handle_signals=handle_signals,
                         run_lock=lock)
        if prepared.resumed is not None:
            record = merged(record, carried(prepared.resumed),
                            prepared.runbook.server.variants.points())
        record = finish_record(record, prepared, before, caches, handle_signals, on_event)
    finally:
        lock.release()
    try:
        earlier = load_records(root, prepared.runbook.id)
    except RecordError:
        earlier = []
    previous = previous_comparable(earlier, record)
    base = RunResult(masked(record), None, (), (), tuple(leftovers), tuple(removed))
    if not options.write:  # a fleet node: the driver writes the record; the reference stays here
        try:
            with signals_ignored(handle_signals):
                keep_references(root, record)
        except OSError as exc:
            return replace(base, record_error=f"the KLD reference could not be kept: {exc}")
        return base
    if record.failed_step == "preflight":  # measured nothing: not history, only a local note
        return _kept(base, root / prepared.plan.artifacts_dir, None)
    try:
        with signals_ignored(handle_signals):  # the record and what it names, or nothing
            keep_references(root, record)
            path = write_record(root, record)
    except (RecordError, OSError) as exc:
        return _kept(base, root / prepared.plan.artifacts_dir, str(exc))
    rendered: tuple[str, ...] = ()
    diags: list[Diagnostic] = []
    if options.render and record.failed_step != "preflight":
        rendered, diags = render_runbook_pages([prepared.runbook.id], prepared.pages, root,
                                               prepared.runbooks)
    return RunResult(base.record, path, rendered, tuple(sort_diagnostics(diags)),
                     base.leftovers, base.removed, previous=previous,
                     comparisons=tuple(compare_variants(previous, record)
                                       if previous is not None and record.ok else ()))


# the steps after the last teardown, and what each does (the progress line, and the message of
# a record that stopped there)
FINISHING = {"kld scoring": "scoring the KLD captures",
             "receipt": "hashing the files for the receipt"}


def finish_record(record: Record, prepared: Prepared, before: dict[str, str],
                  caches: list[dict[str, object]], handle_signals: bool = True,
                  on_event: EventSink | None = None) -> Record:
    """The record with its KLD scores (captures against the reference, kept under runbooks/
    when the record is written) and its receipt (file hashes, model snapshot, cache folders).
    An interruption or an error while scoring or hashing ends there: the record keeps what
    was measured and is marked failed at that step, so that nothing measured is lost."""
    runbook = prepared.runbook
    refs = {c.name: c.reference for c in runbook.clients}
    emit = on_event or (lambda _e: None)
    step = "kld scoring"
    t0 = time.monotonic()
    try:
        with signals_raise(handle_signals):
            if any(c.kind == "kld" for v in record.each_variant() for c in v.clients):
                emit(Event("note", step, message=FINISHING[step]))
                record = score_record(record, prepared.root, lambda name: refs.get(name))
            step, t0 = "receipt", time.monotonic()
            emit(Event("note", step, message=FINISHING[step]))
            receipt = build_receipt(prepared.plan, prepared.root, before, caches)
            if prepared.resumed is not None:
                receipt["resumed_from"] = receipt_entry(prepared.root, prepared.resumed)
    except Interrupted as exc:
        return _unfinished(record, step, f"interrupted by {exc} while {FINISHING[step]}", t0)
    except Exception as exc:  # a failure here must not lose what was measured
        return _unfinished(record, step, f"failed while {FINISHING[step]}: "
                           f"{type(exc).__name__}: {exc}", t0)
    kept = sorted({str(p.metrics["kld_reference"]): str(p.metrics["kld_reference_sha256"])
                   for v in record.each_variant() for c in v.clients for p in c.points
                   if "kld_reference" in p.metrics}.items())
    files = receipt["files"] + [{"path": path, "sha256": sha, "role": "kld reference"}
                                for path, sha in kept]
    return replace(record, receipt={**receipt, "files": files})


def _unfinished(record: Record, step: str, message: str, t0: float) -> Record:
    """The record of a run whose finishing stopped at `step`: failed there (unless an earlier
    step failed first), with everything measured before."""
    done = Step(step, "failed", round(time.monotonic() - t0, 3), message)
    return replace(record, status="failed", failed_step=record.failed_step or step,
                   message=record.message or message, steps=(*record.steps, done))


def _kept(base: RunResult, folder: Path, error: str | None) -> RunResult:
    """The result of a run whose record is not written under runbooks/ (it could not be,
    `error` says why; or preflight refused the run): kept as `record.json` in the artifacts
    folder (nothing when that fails too: the caller prints the record)."""
    kept = folder / "record.json"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        kept.write_text(dumps(base.record), encoding="utf-8")
    except OSError:
        return RunResult(base.record, None, (), (), base.leftovers, base.removed, error, None)
    return RunResult(base.record, None, (), (), base.leftovers, base.removed, error, kept)


def _written_targets(prepared: Prepared) -> list[Path]:
    """What a run writes atomically: its record folder and the pages that show the runbook."""
    root = prepared.root
    needle = f"runbook={prepared.runbook.id}"
    pages = [p for p in prepared.pages if any(needle in c.text.split() for c in p.comments)]
    return [root / RECORDS_DIR / prepared.runbook.id, *(root / p.path for p in pages)]


def run_runbook(
    selector: str,
    root: Path,
    options: RunOptions | None = None,
    on_event: EventSink | None = None,
    *,
    handle_signals: bool = True,
) -> RunResult:
    """`prepare` then `run_prepared`, without asking: one runbook run on this host. Progress
    goes to `on_event`; signal handlers are installed only in the main thread."""
    prepared = prepare(selector, root, options)
    return run_prepared(prepared, on_event, handle_signals=handle_signals)


def option_sweep(option: str, text: str | None) -> Sweep | None:
    """`--sweep` / `--variant` in the one sweep grammar; UsageError naming the option."""
    if text is None:
        return None
    try:
        return parse_sweep(text)
    except SweepError as exc:
        where = f" (at character {exc.col + 1})" if exc.col else ""
        raise UsageError(f"{option} {text!r}: {exc.message}{where}; expected "
                         "VAR=v1,v2[;VAR2=…]") from None


def pages_showing(runbook_ids: Iterable[str], pages: Iterable[Page]) -> list[Page]:
    """The pages that hold a results region of one of these runbooks, in the given order."""
    needles = {f"runbook={i}" for i in runbook_ids}
    return [p for p in pages if any(needles & set(c.text.split()) for c in p.comments)]


@dataclass(frozen=True, slots=True)
class Rendered:
    changes: tuple[Change, ...]  # pages whose text changes
    written: tuple[str, ...]  # of those, the ones written (none under check)
    diagnostics: tuple[Diagnostic, ...]  # sorted


def _apply(root: Path, change: Change) -> bool:
    """Write a changed file, or remove a chart file that no region links to any more."""
    if change.new is not None:
        return write_if_changed(root / change.path, change.new)
    (root / change.path).unlink(missing_ok=True)
    return True


def render_into(pages: Iterable[Page], root: Path, runbooks: RunbookSet, *,
                check: bool = False) -> Rendered:
    """The one page renderer of `run`, `render` and `fleet`: regenerate the results regions of
    `pages` from the records and write the pages that changed (nothing under `check`)."""
    changes, diags = render_pages(list(pages), root, check=check, runbooks=runbooks)
    written = () if check else tuple(c.path for c in changes if _apply(root, c))
    return Rendered(tuple(changes), written, tuple(sort_diagnostics(diags)))


def render_runbook_pages(
    runbook_ids: Iterable[str], pages: tuple[Page, ...] | list[Page], root: Path,
    runbooks: RunbookSet,
) -> tuple[tuple[str, ...], list[Diagnostic]]:
    """Re-render, once, the pages that hold a region of these runbooks: (paths written,
    diagnostics)."""
    done = render_into(pages_showing(runbook_ids, pages), root, runbooks)
    return done.written, list(done.diagnostics)


def plan_elsewhere(runbook: Runbook, run_id: str) -> Plan:
    """The plan of a run made on another host (a fleet node lost before it said anything): the
    same plan as `prepare` makes, without this host's preflight."""
    return make_plan(runbook, artifacts_dir=artifacts_dir_for(runbook, run_id))
