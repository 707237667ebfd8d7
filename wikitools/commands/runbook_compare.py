"""`wiki runbook compare|history`: two records side by side with every provenance difference,
and the trend of a runbook's runs per hardware. Reads records only."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from wikitools.commands import add_root
from wikitools.config import load_config
from wikitools.errors import UsageError
from wikitools.runbook.blocks.extract import load_runbooks
from wikitools.runbook.records.compare import Comparison, comparable, compare_records, last_two
from wikitools.runbook.records.record import Record, RecordError, load_records, read_record
from wikitools.runbook.records.stats import Spread
from wikitools.runbook.rendering.describe import engine_text, short_hardware


def add_parsers(sub: Any) -> None:
    p = sub.add_parser(
        "compare", help="two run records side by side, with ratios and provenance differences",
        description="Compare two run records (two paths), or the last two comparable runs of a "
        "runbook (PAGE#ID: successful runs on the same GPUs). Prints each sweep point's median "
        "and spread, the ratio new/old and whether the change is beyond the spread, then every "
        "difference in engine, commands, host, GPU state and server facts.")
    p.add_argument("first", metavar="RECORD|PAGE#ID", help="older record path, or a runbook")
    p.add_argument("second", metavar="RECORD", nargs="?", help="newer record path")
    _root(p)
    p.set_defaults(handler=run_compare)

    p = sub.add_parser(
        "history", help="a runbook's runs per hardware, with the change from run to run",
        description="Every successful run of a runbook, grouped by hardware, oldest first: "
        "engine, the median output tok/s of each sweep point and its change from the run "
        "before on the same hardware.")
    p.add_argument("ref", metavar="PAGE#ID", help="runbook id, or path/to/page.md#id")
    _root(p)
    p.set_defaults(handler=run_history)


def _root(p: argparse.ArgumentParser) -> None:
    add_root(p)


def _read(root: Path, text: str) -> Record:
    path = Path(text)
    if not path.is_absolute() and not path.exists():
        path = root / text
    try:
        return read_record(path)
    except RecordError as exc:
        raise UsageError(f"{text}: {exc}") from None


def _records_of(root: Path, ref: str) -> tuple[str, list[Record]]:
    runbooks, _diags, _pages = load_runbooks(root)
    rid = runbooks.get(ref).id
    try:
        return rid, load_records(root, rid)
    except RecordError as exc:
        raise UsageError(str(exc)) from None


def run_compare(args: argparse.Namespace) -> int:
    root = load_config(args.root).root
    if args.second is not None:
        old, new = _read(root, args.first), _read(root, args.second)
    elif args.first.endswith(".json"):
        raise UsageError("compare needs two records, or one runbook (PAGE#ID)")
    else:
        rid, records = _records_of(root, args.first)
        pair = last_two(records)
        if pair is None:
            raise UsageError(f"runbook '{rid}' has fewer than two successful runs on the same "
                             "GPUs; name two record files instead")
        old, new = pair
    print(format_comparison(compare_records(old, new)))
    return 0


def _spread(s: Spread | None) -> str:
    if s is None:
        return "–"
    text = f"{s.median:,.2f}" if s.median < 100 else f"{s.median:,.1f}"
    if s.count > 1:
        text += f" ({s.low:,.4g}–{s.high:,.4g}, n={s.count})"
    return text


def _describe(label: str, record: Record) -> str:
    return (f"{label}: runbooks/{record.runbook}/{record.run_id}.json  {record.started_at[:10]}  "
            f"{short_hardware(record)}  {engine_text(record)}")


def format_comparison(cmp: Comparison) -> str:
    lines = [_describe("old", cmp.old), _describe("new", cmp.new), ""]
    table = [["client", "point", "metric", "old", "new", "new/old", "verdict"]]
    for r in cmp.rows:
        ratio = "–" if r.ratio is None else f"{r.ratio:.3f}"
        table.append([r.client, r.point, r.metric, _spread(r.old), _spread(r.new), ratio,
                      r.verdict])
    if len(table) > 1:
        widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
        for row in table:
            lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    else:
        lines.append("no serving numbers to compare")
    lines.append("")
    if cmp.differences:
        lines.append(f"provenance differences ({len(cmp.differences)}):")
        for d in cmp.differences:
            lines.append(f"  {d.field}: {_value(d.old)} -> {_value(d.new)}")
    else:
        lines.append("provenance: no differences")
    changed = cmp.changed
    lines.append("")
    if changed:
        worse = sum(r.verdict == "regression" for r in changed)
        lines.append(f"{len(changed)} number(s) changed beyond the spread: {worse} regression(s), "
                     f"{len(changed) - worse} improvement(s)")
    else:
        lines.append("no number changed beyond the spread")
    return "\n".join(lines)


def _value(v: Any) -> str:
    if v is None:
        return "(none)"
    text = " ".join(str(v).split())
    return text if len(text) <= 160 else text[:157] + "..."


def run_history(args: argparse.Namespace) -> int:
    root = load_config(args.root).root
    rid, records = _records_of(root, args.ref)
    groups: dict[str, list[Record]] = {}
    for rec in records:
        if rec.ok:
            groups.setdefault(short_hardware(rec), []).append(rec)
    if not groups:
        print(f"runbook '{rid}': no successful run recorded")
        return 0
    for hw in sorted(groups):
        print(f"{rid} on {hw}")
        previous: Record | None = None
        for rec in comparable(groups[hw]) or groups[hw]:
            cells = []
            for client in rec.clients:
                if client.kind != "serving":
                    continue
                for p in client.points:
                    sp = p.spread("output_throughput") if p.status == "ok" else None
                    if sp is None:
                        continue
                    text = f"{p.value or 'run'}: {sp.median:,.0f}"
                    old = _old_median(previous, client.name, p.coords)
                    if old:
                        text += f" ({(sp.median - old) / old * 100:+.0f} %)"
                    cells.append(text)
            print(f"  {rec.started_at[:10]}  {rec.run_id}  {engine_text(rec)}  output tok/s "
                  + ("; ".join(cells) or "–"))
            previous = rec
    return 0


def _old_median(previous: Record | None, client: str, coords: Any) -> float | None:
    if previous is None:
        return None
    c = previous.client(client)
    for p in c.points if c else ():
        if p.coords == coords and p.status == "ok":
            sp = p.spread("output_throughput")
            return sp.median if sp and sp.median else None
    return None
