"""`wiki runbook run PAGE#ID` (preflight, plan, execute, record, render) and
`wiki runbook render [PAGE…] [--check] [--diff]` (results regions from records)."""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from wikitools.cli.common import add_root
from wikitools.cli.runbook_options import add_run_options, run_options
from wikitools.core.config import load_config
from wikitools.core.diagnostics import Severity, summary
from wikitools.core.errors import UsageError
from wikitools.core.fsio import unified_diff
from wikitools.pages.load import load_pages
from wikitools.pages.parse import read_page
from wikitools.runbook.blocks.extract import extract_runbooks
from wikitools.runbook.engines.secrets import mask_text
from wikitools.runbook.execution.execute import Event
from wikitools.runbook.execution.plantext import format_plan, format_summary, format_verdict
from wikitools.runbook.records.compare import Comparison
from wikitools.runbook.records.record import Record, dumps
from wikitools.runbook.session import RunResult, prepare, render_into, run_prepared


def add_parsers(sub: Any) -> None:
    p = sub.add_parser(
        "run", help="run a runbook: start the server, run its clients, record, render",
        description="Preflight, show the plan, start the server in its own process group, wait "
        "until it is ready, run every client point, tear everything down, write the record "
        "runbooks/<id>/<run-id>.json and re-render the page's results regions. Exit 0 when "
        "every step passed, 1 when a step failed (the record says which), 2 on usage errors.",
    )
    add_run_options(p)
    p.add_argument("--yes", "-y", action="store_true", help="do not ask for confirmation")
    p.add_argument("--no-render", action="store_true",
                   help="write the record but leave the pages alone")
    p.set_defaults(handler=run_run)

    p = sub.add_parser(
        "render", help="regenerate results regions from the run records",
        description="Regenerate every results region (<!-- wiki:results … -->) from the records "
        "in runbooks/. Regions edited by hand are reported and left alone. With --check, write "
        "nothing and exit 1 when a region would change.",
    )
    p.add_argument("paths", nargs="*", type=Path, help="pages (default: every page)")
    p.add_argument("--check", action="store_true", help="write nothing; exit 1 on drift")
    p.add_argument("--diff", action="store_true", help="print a unified diff of the changes")
    add_root(p)
    p.set_defaults(handler=run_render)


# --------------------------------------------------------------------------- run


def _confirm(console: Console) -> bool:
    if not sys.stdin.isatty():
        raise UsageError("stdin is not a terminal; pass --yes to run without confirmation")
    console.print("Run this now? [y/N] ", end="")
    answer = sys.stdin.readline().strip().lower()
    return answer in ("y", "yes")


class _Progress:
    """Live status and a progress bar over client points, on stderr."""

    def __init__(self, console: Console, total: int) -> None:
        self.console = console
        self.live = console.is_terminal
        self.progress = Progress(
            TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
            TimeElapsedColumn(), console=console, transient=True,
        )
        self.task = self.progress.add_task("starting", total=max(total, 1))
        if self.live:
            self.progress.start()

    def __call__(self, e: Event) -> None:
        if e.kind == "waiting":
            self.progress.update(self.task, description=f"ready? {e.status} ({e.elapsed:.0f} s)")
        elif e.kind == "step-start":
            self.progress.update(self.task, description=e.step)
        elif e.kind == "point-start":
            self.progress.update(self.task, description=f"{e.step} ({e.index}/{e.total})")
        elif e.kind == "note":
            self.console.print(mask_text(f"{'':>7}  {e.message}"), markup=False,
                               highlight=False)
        elif e.kind in ("step-end", "point-end"):
            if e.kind == "point-end":
                self.progress.advance(self.task)
            mark = "ok" if e.status == "ok" else (e.status or "?")
            line = f"{mark:>7}  {e.step}" + (f": {e.message}" if e.message and mark != "ok"
                                              else "")
            self.console.print(mask_text(line), markup=False, highlight=False)

    def stop(self) -> None:
        if self.live:
            self.progress.stop()


def run_run(args: argparse.Namespace) -> int:
    err = Console(stderr=True, highlight=False)
    options = replace(run_options(args), render=not args.no_render)
    prepared = prepare(args.ref, args.root, options)
    print(format_summary(prepared.plan, prepared.unset), end="")
    print()
    print(format_plan(prepared.plan), end="")
    print()
    print(format_verdict(prepared.verdict), end="", flush=True)
    if not args.yes and not prepared.verdict.ok:
        err.print("not run: preflight refused this host (--force runs it anyway)")
        return 1
    if not args.yes and not _confirm(err):
        err.print("not run")
        return 1

    progress = _Progress(err, prepared.plan.runs)
    try:
        result = run_prepared(prepared, on_event=progress)
    finally:
        progress.stop()
    for item in result.leftovers:
        print(f"stopped, left by an earlier run that was killed: {item.describe()}",
              file=sys.stderr)
    for path in result.removed:
        print(f"removed a half-written file of an earlier run: {path}", file=sys.stderr)
    for d in result.diagnostics:
        print(d.format())
    record = result.record
    rel = result.record_path.relative_to(prepared.root).as_posix() if result.record_path else None
    _summary(record, rel, list(result.rendered), err)
    if result.record_error is not None:
        _not_written(result, prepared.root)
        return 2
    if result.record_path is None and result.kept_at is not None:
        print("refused at preflight: nothing written under runbooks/; the record is kept at "
              f"{_shown(result.kept_at, prepared.root)}", file=sys.stderr)
    _changes(result.previous, result.comparisons, record)
    if any(d.severity is Severity.ERROR for d in result.diagnostics):
        print("pages not fully re-rendered: see the errors above", file=sys.stderr)
        return 1
    return 0 if record.ok else 1


def _shown(path: Path, root: Path) -> str:
    return path.relative_to(root).as_posix() if path.is_relative_to(root) else path.as_posix()


def _not_written(result: RunResult, root: Path) -> None:
    """The record could not be written: say so, and where the results are instead."""
    def say(text: str) -> None:
        print(text, file=sys.stderr)

    say(f"wiki: error: {result.record_error}")
    if result.kept_at is not None:
        kept = _shown(result.kept_at, root)
        say(f"the record is kept in {kept}: copy it to runbooks/{result.record.runbook}/ once "
            "that folder can be written, then run `wiki runbook render`")
    else:
        say("the record could not be kept anywhere; here it is:")
        print(dumps(result.record), end="")
    say("pages not re-rendered: the record is not in runbooks/")


def _changes(previous: Record | None, comparisons: tuple[Comparison, ...],
             record: Record) -> None:
    """What changed since the last comparable record: what differs between the runs first,
    then the numbers that moved; "nothing comparable" is said as such, never as an all-clear."""
    if previous is None or not record.ok:
        return
    ref = f"runbooks/{previous.runbook}/{previous.run_id}.json"
    new_ref = f"runbooks/{record.runbook}/{record.run_id}.json"
    print(f"compared with {ref} (`wiki runbook compare {ref} {new_ref}` shows it all):")
    if not comparisons:
        print("  nothing comparable: the two runs share no server variant")
    for cmp in comparisons:
        pad = "  "
        if cmp.variant is not None:
            print(f"  variant {cmp.variant}:")
            pad = "    "
        for line in cmp.headline():
            print(pad + line)
        for row in cmp.changed:
            old, new = row.old, row.new
            assert old is not None and new is not None and row.ratio is not None
            print(f"{pad}{row.verdict}: {row.client} {row.point} {row.metric} "
                  f"{old.median:,.2f} -> {new.median:,.2f} ({row.ratio:.2f}x)")
        print(pad + cmp.verdict())


def _summary(record: Record, path: str | None, rendered: list[str], err: Console) -> None:
    out = []
    if record.ok:
        out.append(f"run {record.run_id}: ok")
    else:
        out.append(f"run {record.run_id}: FAILED at {record.failed_step}: {record.message}")
    for variant in record.each_variant():
        pad = "  "
        if variant.coords:
            state = "ok" if variant.ok else f"{variant.status}" + (
                f" at {variant.failed_step}: {variant.message}" if variant.failed_step else "")
            out.append(f"  variant {variant.name}: {state}")
            pad = "    "
        t = variant.timings
        if "ready_s" in t:
            out.append(f"{pad}ready after {t['ready_s']:.1f} s; teardown "
                       f"{t.get('teardown_s', 0):.1f} s")
        for client in variant.clients:
            for p in client.points:
                label = f"{client.name}" + (f"[{client.sweep_var}={p.value}]" if p.value
                                            else "")
                m = p.metrics
                if p.status == "ok" and "output_throughput" in m:
                    out.append(f"{pad}{label}: {m.get('completed')}/{m.get('num_prompts')} ok, "
                               f"{m['output_throughput']:,.1f} output tok/s, median TTFT "
                               f"{m.get('median_ttft_ms', float('nan')):,.1f} ms")
                else:
                    out.append(f"{pad}{label}: {p.status}"
                               + (f" ({p.message})" if p.message else ""))
    if path is not None:
        out.append(f"record: {path}")
    out += [f"rendered: {p}" for p in rendered]
    print("\n".join(out))
    for variant in record.each_variant():
        if not variant.ok and variant.server.get("log_tail"):
            where = f" (variant {variant.name})" if variant.coords else ""
            err.print(f"last log lines{where}:", markup=False)
            for line in variant.server["log_tail"][-15:]:
                err.print("  " + line, markup=False, highlight=False)


# --------------------------------------------------------------------------- render


def run_render(args: argparse.Namespace) -> int:
    config = load_config(args.root)
    root = config.root
    all_pages = load_pages(config)
    runbooks, _ = extract_runbooks(all_pages, root)
    if args.paths:
        pages = []
        for p in args.paths:
            path = (p if p.is_absolute() else Path.cwd() / p).resolve()
            if not path.is_file():
                raise UsageError(f"{p}: no such page")
            if not path.is_relative_to(root):
                raise UsageError(f"{p}: not inside the wiki root {root}")
            pages.append(read_page(path, root))
    else:
        pages = all_pages
    done = render_into(pages, root, runbooks, check=args.check)
    changes, diags = done.changes, list(done.diagnostics)
    for d in diags:
        print(d.format())
    for change in changes:
        if args.diff:
            print(unified_diff(change.path, change.old, change.new or ""), end="")
        gone = change.new is None  # a chart file no region links to any more
        if args.check:
            print(f"would {'remove' if gone else 'change'}: {change.path}", file=sys.stderr)
        elif change.path in done.written:
            print(f"{'removed' if gone else 'rendered'}: {change.path}", file=sys.stderr)
    if diags:
        print(summary(diags), file=sys.stderr)
    errors = any(d.severity is Severity.ERROR for d in diags)
    return 1 if errors or (args.check and changes) else 0
