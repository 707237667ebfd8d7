"""One runbook run from start to finish, shared by `wiki runbook plan`, `wiki runbook run` and
anything else that runs runbooks (a fleet of hosts): find the runbook, check the host, make the
plan, execute it, write the record and re-render the pages that show it. Never prints."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from wikitools.config import load_config, load_pages
from wikitools.diagnostics import Diagnostic, sort_diagnostics
from wikitools.errors import UsageError
from wikitools.fsio import write_if_changed
from wikitools.pages import Page
from wikitools.runbook.execute import EventSink, execute
from wikitools.runbook.extract import extract_runbooks
from wikitools.runbook.host import HostFacts, gather_host
from wikitools.runbook.model import Plan, Runbook, RunbookSet, Verdict
from wikitools.runbook.plan import PlanOverrides, artifacts_dir_for, make_plan
from wikitools.runbook.preflight import preflight
from wikitools.runbook.record import Record, make_run_id, write_record
from wikitools.runbook.render import render_pages


@dataclass(frozen=True, slots=True)
class RunOptions:
    """How to run: the command-line options of `wiki runbook run` as data."""

    port: int | None = None  # serve on this port instead of the block's
    sweep: str | None = None  # "VAR=v1,v2": run these sweep values instead of the block's
    clients: tuple[str, ...] | None = None  # run only these clients
    force: bool = False  # run although preflight refuses
    render: bool = True  # re-render the pages that show this runbook's results


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


@dataclass(frozen=True, slots=True)
class RunResult:
    record: Record
    record_path: Path  # where the record was written
    rendered: tuple[str, ...]  # pages re-rendered (paths relative to the root)
    diagnostics: tuple[Diagnostic, ...]  # from rendering those pages


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
    config = load_config(root)
    pages = load_pages(config)
    runbooks, _diags = extract_runbooks(pages)
    if not selector.strip("#").strip():
        raise UsageError("name a runbook: ID or path/to/page.md#ID")
    runbook = runbooks.get(selector)
    sweep = parse_sweep(options.sweep, runbook)
    facts = facts if facts is not None else gather_host()
    verdict = preflight(runbook, force=options.force, port=options.port, facts=facts)
    started = datetime.now(UTC)
    run_id = make_run_id(started, runbook.blocks_hash)
    overrides = PlanOverrides(port=options.port, sweep_values=sweep, clients=options.clients)
    plan = make_plan(runbook, root=config.root, artifacts_dir=artifacts_dir_for(runbook, run_id),
                     overrides=overrides, verdict=verdict)
    return Prepared(config.root, options, runbook, runbooks, tuple(pages), verdict, plan,
                    started, run_id)


def run_prepared(
    prepared: Prepared,
    on_event: EventSink | None = None,
    *,
    handle_signals: bool = True,
) -> RunResult:
    """Execute the plan, write the record and (unless options.render is False or preflight
    refused) re-render the pages holding a results region of this runbook."""
    root, options = prepared.root, prepared.options
    record = execute(prepared.plan, root=root, verdict=prepared.verdict, on_event=on_event,
                     started=prepared.started, handle_signals=handle_signals)
    path = write_record(root, record)
    rendered: tuple[str, ...] = ()
    diags: list[Diagnostic] = []
    if options.render and record.failed_step != "preflight":
        rendered, diags = render_runbook_pages(prepared.runbook.id, prepared.pages, root,
                                               prepared.runbooks)
    return RunResult(record, path, rendered, tuple(sort_diagnostics(diags)))


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


def parse_sweep(text: str | None, runbook: Runbook) -> tuple[str, ...] | None:
    """`VAR=v1,v2` → ("v1", "v2"), checked against the variables the runbook sweeps."""
    if text is None:
        return None
    var, eq, values = text.partition("=")
    var = var.strip()
    vals = tuple(v.strip() for v in values.split(",") if v.strip())
    if not eq or not var or not vals:
        raise UsageError(f"--sweep {text!r}: expected VAR=v1,v2,…")
    swept = sorted({c.sweep_var for c in runbook.clients if c.sweep_var})
    if var not in swept:
        have = ", ".join(swept) or "none"
        raise UsageError(f"--sweep {var}: runbook '{runbook.id}' sweeps {have}")
    return vals


def render_runbook_pages(
    runbook_id: str, pages: tuple[Page, ...] | list[Page], root: Path, runbooks: RunbookSet
) -> tuple[tuple[str, ...], list[Diagnostic]]:
    """Re-render the pages that hold a region of this runbook: (paths written, diagnostics)."""
    needle = f"runbook={runbook_id}"
    mine = [p for p in pages if any(needle in c.text.split() for c in p.comments)]
    changes, diags = render_pages(mine, root, runbooks=runbooks)
    written = tuple(c.path for c in changes if write_if_changed(root / c.path, c.new))
    return written, diags
