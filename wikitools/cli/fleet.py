"""`wiki fleet plan|run`: many runbooks on a Ray cluster, one Ray task per runbook. The driver
writes every record under runbooks/ and renders the pages once at the end."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from wikitools.cli.common import add_root
from wikitools.core.config import load_config
from wikitools.core.errors import UsageError
from wikitools.fleet.select import demand, select
from wikitools.pages.load import load_pages
from wikitools.runbook.blocks.declared import Runbook
from wikitools.runbook.blocks.extract import extract_runbooks
from wikitools.runbook.records.record import RecordError, write_record
from wikitools.runbook.session import render_runbook_pages

LOG_LINES = 10  # of a failed run's server log tail, echoed with the node's prefix
INSTALL_HINT = "Ray is not installed here: pip install -e '.[fleet]'"


def add_parser(sub: Any) -> None:
    parser = sub.add_parser("fleet", help="run many runbooks across the hosts of a Ray cluster")
    parser.set_defaults(handler=lambda _a: _help(parser))
    fleet_sub = parser.add_subparsers(dest="fleet_command", metavar="SUBCOMMAND")

    p = fleet_sub.add_parser(
        "plan", help="list the selected runbooks and what each asks of the cluster",
        description="Print the runbooks a fleet run would take, with the GPUs, CPU and "
        "architecture resource each Ray task asks for. Contacts no cluster; starts nothing.")
    _selection(p)
    p.set_defaults(handler=run_plan)

    p = fleet_sub.add_parser(
        "run", help="run the selected runbooks on a Ray cluster; write records, render pages",
        description="Submit one Ray task per selected runbook, asking for its GPUs and a "
        "custom resource named after its architecture (nodes carry it from `ray start "
        "--resources '{\"sm120\": 1}'`). Each node runs the runbook with the same preflight, "
        "executor and teardown as `wiki runbook run`; progress comes back prefixed by node; "
        "the driver writes each record under runbooks/ and renders the pages once at the end. "
        "Ctrl-C cancels the tasks and waits for every node's teardown. Exit 0 when every "
        "runbook passed, 1 when one failed, was lost or could not be placed, 130 when "
        "interrupted.")
    _selection(p)
    p.add_argument("--address", metavar="ADDR",
                   help="the cluster: HOST:PORT of the head, ray://HOST:PORT, or auto "
                   "(default: $RAY_ADDRESS, else the cluster this host belongs to)")
    p.add_argument("--workdir", metavar="DIR",
                   help="the wiki checkout on every node (default: this root's absolute path)")
    p.add_argument("--force", action="store_true",
                   help="run although a node's preflight refuses (as `wiki runbook run --force`)")
    p.add_argument("--retries", type=int, default=0, metavar="N",
                   help="let Ray run a runbook again when its node dies (default 0: a lost node "
                   "is a failed run)")
    p.add_argument("--no-render", action="store_true",
                   help="write the records but leave the pages alone")
    p.add_argument("--yes", "-y", action="store_true", help="do not ask for confirmation")
    p.set_defaults(handler=run_run)


def _selection(p: argparse.ArgumentParser) -> None:
    p.add_argument("refs", nargs="*", metavar="REF",
                   help="runbook ID, path/to/page.md#ID, or path/to/page.md (its runbooks)")
    p.add_argument("--stale", action="store_true",
                   help="add the runbooks whose newest record was measured with other blocks")
    p.add_argument("--never-run", action="store_true", help="add the runbooks with no record")
    p.add_argument("--all", action="store_true", help="every runbook of the wiki")
    add_root(p)


def _help(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return 2


def _load(args: argparse.Namespace) -> tuple[Path, list[Any], Any, list[Runbook]]:
    config = load_config(args.root)
    pages = load_pages(config)
    runbooks, _diags = extract_runbooks(pages, config.root)
    chosen = select(runbooks, config.root, args.refs, stale=args.stale,
                    unrun=args.never_run, every=args.all)
    return config.root, pages, runbooks, chosen


def _table(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() + "\n"
                   for r in rows)


# --------------------------------------------------------------------------- plan


def run_plan(args: argparse.Namespace) -> int:
    _root, _pages, _runbooks, chosen = _load(args)
    if not chosen:
        print("no runbook selected", file=sys.stderr)
        return 0
    rows = [["runbook", "page", "asks for"]]
    rows += [[rb.id, rb.page, demand(rb).describe()] for rb in chosen]
    print(_table(rows), end="")
    return 0


# --------------------------------------------------------------------------- run


def run_run(args: argparse.Namespace) -> int:
    if args.retries < 0:
        raise UsageError(f"--retries {args.retries}: expected 0 or more")
    root, pages, runbooks, chosen = _load(args)
    if not chosen:
        print("no runbook selected", file=sys.stderr)
        return 0
    try:
        from wikitools.fleet import driver
    except ImportError:
        raise UsageError(INSTALL_HINT) from None
    workdir = str(Path(args.workdir).resolve() if args.workdir else root)
    print(f"{len(chosen)} runbook{'s' * (len(chosen) != 1)} to run on the cluster "
          f"(nodes work in {workdir}):", file=sys.stderr)
    print(_table([[rb.ref, demand(rb).describe()] for rb in chosen]), end="", file=sys.stderr)
    if not args.yes and not _confirm():
        print("not run", file=sys.stderr)
        return 1

    written: list[str] = []
    unwritten: list[str] = []

    def on_line(node: str, runbook_id: str, text: str) -> None:
        print(f"[{node}] {runbook_id}: {text}", file=sys.stderr, flush=True)

    def on_outcome(o: Any) -> None:
        if o.record is not None:
            try:
                path = write_record(root, o.record)
            except RecordError as exc:
                unwritten.append(o.runbook.id)
                on_line("driver", o.runbook.id, f"{o.status}; record NOT written: {exc}")
                return
            written.append(o.runbook.id)
            on_line(o.node or "driver", o.runbook.id,
                    f"{o.status}; record {path.relative_to(root).as_posix()}")
            for line in o.record.server.get("log_tail", [])[-LOG_LINES:]:
                on_line(o.node or "driver", o.runbook.id, f"| {line}")
        else:
            on_line(o.node or "driver", o.runbook.id, f"{o.status}: {o.message}")

    with driver.connect(args.address, on_line):
        outcomes, interrupted = driver.run_fleet(chosen, workdir=workdir, force=args.force,
                                                 retries=args.retries, on_line=on_line,
                                                 on_outcome=on_outcome)
    rendered: list[str] = []
    if written and not args.no_render:
        rendered = _render(written, pages, root, runbooks)
    print(summary_table(outcomes), end="")
    for path in rendered:
        print(f"rendered: {path}")
    code = 130 if interrupted else (
        0 if all(o.status == "ok" for o in outcomes) and not unwritten else 1)
    if _is_program():
        # After a node was lost, Ray's own threads can abort the interpreter at exit (a glibc
        # assertion); everything is written and printed by now, so leave with our exit code.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


def _is_program() -> bool:
    """True when this process is the `wiki` command itself (not a caller of cli.main)."""
    argv0 = Path(sys.argv[0]) if sys.argv and sys.argv[0] else Path()
    return argv0.name == "wiki" or argv0.parts[-2:] == ("wikitools", "__main__.py")


def _confirm() -> bool:
    if not sys.stdin.isatty():
        raise UsageError("stdin is not a terminal; pass --yes to run without confirmation")
    print("Run these now? [y/N] ", end="", file=sys.stderr, flush=True)
    return sys.stdin.readline().strip().lower() in ("y", "yes")


def _render(ids: list[str], pages: list[Any], root: Path, runbooks: Any) -> list[str]:
    """Render, once, every page that holds a results region of one of these runbooks."""
    written, diags = render_runbook_pages(ids, pages, root, runbooks)
    for d in diags:
        print(d.format())
    return list(written)


def summary_table(outcomes: list[Any]) -> str:
    """runbook | node | status | headline number | duration, one row per runbook."""
    rows = [["runbook", "node", "status", "headline", "duration"]]
    notes = []
    for o in outcomes:
        rec = o.record
        status = o.status
        if rec is not None and not rec.ok:
            status = f"{o.status} at {rec.failed_step}"
        seconds = rec.timings.get("total_s") if rec is not None else None
        if not isinstance(seconds, int | float) and o.began is not None:
            seconds = o.ended - o.began
        rows.append([o.runbook.id, o.node or "-", status, _headline(rec),
                     f"{seconds:.1f} s" if isinstance(seconds, int | float) else "-"])
        if o.status != "ok" and o.message:
            notes.append(f"{o.runbook.id}: {o.message}")
    out = _table(rows)
    ok = sum(o.status == "ok" for o in outcomes)
    out += f"{ok}/{len(outcomes)} ok\n"
    return out + "".join(n + "\n" for n in notes)


def _headline(rec: Any) -> str:
    """The best output throughput of the run's serving clients, or '-'."""
    if rec is None or not rec.ok:
        return "-"
    best = None
    for client in rec.clients:
        for p in client.points:
            v = p.metrics.get("output_throughput")
            if client.kind == "serving" and isinstance(v, int | float):
                best = v if best is None else max(best, v)
    return "-" if best is None else f"{best:,.1f} output tok/s"
