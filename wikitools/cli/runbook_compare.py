"""`wiki runbook compare|history`: two records side by side with every provenance difference,
and the trend of a runbook's runs per hardware. Reads records only."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from wikitools.cli.common import add_root
from wikitools.core.config import load_config
from wikitools.core.errors import UsageError
from wikitools.runbook.blocks.extract import load_runbooks
from wikitools.runbook.records.compare import (
    Comparison,
    comparable,
    compare_variants,
    last_two,
)
from wikitools.runbook.records.record import (
    Record,
    RecordError,
    VariantResult,
    load_records,
    read_record,
)
from wikitools.runbook.records.stats import Spread
from wikitools.runbook.records.variance import card_of, point_variance
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
    comparisons = compare_variants(old, new)
    print("\n\n".join([format_comparison(c) for c in comparisons])
          if comparisons else _head(old, new) + "\n\nnothing comparable: the two runs share no "
          "server variant")
    return 0


def _spread(s: Spread | None) -> str:
    """`504.7 ±5.0 %` as the tables print it (median ± half the range), with n."""
    if s is None:
        return "–"
    text = f"{s.median:,.2f}" if s.median < 100 else f"{s.median:,.1f}"
    if s.count > 1:
        text += f" ±{s.half_range * 100:.1f} % (n={s.count})"
    return text


def _describe(label: str, record: Record) -> str:
    return (f"{label}: runbooks/{record.runbook}/{record.run_id}.json  {record.started_at[:10]}  "
            f"{short_hardware(record)}  {engine_text(record)}")


def _head(old: Record, new: Record) -> str:
    return _describe("old", old) + "\n" + _describe("new", new)


def format_comparison(cmp: Comparison) -> str:
    """What changed first, then the numbers, then the other real differences, then one line
    that says what the comparison found."""
    lines = []
    if cmp.variant is not None:
        lines.append(f"variant {cmp.variant}")
    lines += [_head(cmp.old, cmp.new), ""]
    lines += cmp.headline()
    lines.append("")
    table = [["client", "point", "metric", "old", "new", "new/old", "verdict"]]
    for r in cmp.rows:
        ratio = "–" if r.ratio is None else f"{r.ratio:.3f}"
        table.append([r.client, r.point, r.metric, _spread(r.old), _spread(r.new), ratio,
                      r.verdict])
    if len(table) > 1:
        widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
        for row in table:
            lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
        lines.append("(± is half the range between the lowest and the highest run, as in the "
                     "tables; a number moved when the two ± ranges do not overlap)")
    else:
        lines.append("no serving numbers to compare")
    lines.append("")
    if cmp.differences:
        lines.append(f"other differences ({len(cmp.differences)}):")
        for d in cmp.differences:
            unset = "unset" if d.field.startswith("server.env.") else "(none)"
            lines.append(f"  {d.field}: {_value(d.old, unset)} -> {_value(d.new, unset)}")
    else:
        lines.append("other differences: none")
    if cmp.only_new:
        lines.append("recorded only by the newer run (not compared): " + ", ".join(cmp.only_new))
    lines += ["", cmp.verdict()]
    return "\n".join(lines)


def _value(v: Any, none: str = "(none)") -> str:
    if v is None:
        return none
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
            for v in rec.each_variant():
                _history_line(rec, v, previous)
            previous = rec
        for coords in dict.fromkeys(v.coords for r in groups[hw] for v in r.each_variant()):
            _variance([f for r in groups[hw] if (f := _flat(r, coords)) is not None],
                      f" [{','.join(f'{k}={x}' for k, x in coords)}]" if coords else "")
    return 0


def _flat(rec: Record | None, coords: Any) -> Record | None:
    """The record as one server's (its variant at `coords`); None when it has none there."""
    v = rec.variant(coords) if rec is not None else None
    return rec.flat(v) if rec is not None and v is not None else None


def _history_line(rec: Record, variant: VariantResult, previous: Record | None) -> None:
    """One run (one server variant of it): date, run, engine, card and the median output
    tok/s of each serving point, with the change from the run before."""
    flat, before = rec.flat(variant), _flat(previous, variant.coords)
    cells = []
    for client in flat.clients:
        if client.kind != "serving":
            continue
        for p in client.points:
            sp = p.spread("output_throughput") if p.status == "ok" else None
            if sp is None:
                continue
            text = f"{p.value or 'run'}: {sp.median:,.0f}"
            old = _old_median(before, client.name, p.coords)
            if old:
                text += f" ({(sp.median - old) / old * 100:+.0f} %)"
            cells.append(text)
    card = card_of(flat)
    if previous is not None and previous.blocks_hash != rec.blocks_hash:
        cells.append("commands changed since the run before")
    label = f" [{variant.name}]" if variant.coords else ""
    print(f"  {rec.started_at[:10]}  {rec.run_id}{label}  {engine_text(flat)}  "
          f"card {card[:12] + '…' if card else '(not recorded)'}  output tok/s "
          + ("; ".join(cells) or "–"))


def _pct(value: float | None, why: str) -> str:
    return f"±{value * 100:.1f} %" if value is not None else why


def _variance(records: list[Record], label: str = "") -> None:
    """Per point: how far the same commands' output tok/s moves within a run, between runs on
    one card, between cards and between days (± half the range, as the tables print it)."""
    if not records:
        return
    newest = records[-1]
    same = [r for r in records if r.blocks_hash == newest.blocks_hash]
    rows = point_variance(same)
    if not rows:
        return
    print(f"  spread of output tok/s{label} over the {len(same)} run(s) of the newest commands "
          f"(blocks {newest.blocks_hash.split(':', 1)[-1][:8]}):")
    for v in rows:
        print(f"    {v.client} {v.point}: within a run {_pct(v.within_run, 'one run each')}; "
              f"between runs on one card {_pct(v.same_card, 'no card ran it twice')}; "
              f"between cards {_pct(v.between_cards, f'{v.cards} card(s) known')}; "
              f"between days {_pct(v.between_days, f'{v.days} day(s)')}")


def _old_median(previous: Record | None, client: str, coords: Any) -> float | None:
    if previous is None:
        return None
    c = previous.client(client)
    for p in c.points if c else ():
        if p.coords == coords and p.status == "ok":
            sp = p.spread("output_throughput")
            return sp.median if sp and sp.median else None
    return None
