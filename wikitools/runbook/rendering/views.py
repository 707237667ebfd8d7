"""The views of a results region, each a template filled from records: serving and quality
tables, run history, trade-off charts; which records and which client a view shows."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from wikitools.runbook.blocks.declared import Runbook
from wikitools.runbook.blocks.regions import (
    Region,
)
from wikitools.runbook.engines.failure import better_message
from wikitools.runbook.records.gpustate import describe_state
from wikitools.runbook.records.record import (
    ClientResult,
    Record,
    record_rel_path,
)
from wikitools.runbook.records.resume import newest_shown
from wikitools.runbook.rendering import receipts, serving
from wikitools.runbook.rendering.charts import XY, Chart, Series, figure, render_chart
from wikitools.runbook.rendering.decode import decode_grid
from wikitools.runbook.rendering.describe import (
    DASH,
    day,
    engine_text,
    fmt,
    hardware,
    headline,
    pipeline_check,
    record_archs,
    server_facts,
    short_hardware,
    speculative,
)
from wikitools.runbook.rendering.escape import escaped, md_code, md_text
from wikitools.runbook.rendering.templates import environment


def _serving_client(runbook: Runbook | None, record: Record, wanted: str | None) -> str | None:
    return _client_of_kind(runbook, record, wanted, "serving")


def _client_of_kind(runbook: Runbook | None, record: Record, wanted: str | None,
                    kind: str) -> str | None:
    """The client a view shows: the one named, else the page's first of `kind`, else the
    record's first of `kind`."""
    if wanted:
        return wanted
    if runbook is not None:
        for block in sorted(runbook.clients, key=lambda c: c.line):
            if block.kind == kind:
                return block.name
    for variant in record.each_variant():
        for result in variant.clients:
            if result.kind == kind:
                return result.name
    return None


def _shown_common(record: Record) -> dict[str, Any]:
    return {
        "date": day(record.started_at),
        "hardware": hardware(record),
        "engine": engine_text(record),
        "server_facts": server_facts(record),
        "record_path": record_rel_path(record),
        "blocks_short": record.blocks_hash.split(":", 1)[-1][:8],
        "pipeline_check": pipeline_check(record),
        "gpu_before": describe_state(escaped(record.gpu_state.get("before")), "before the run"),
        "gpu_after": describe_state(escaped(record.gpu_state.get("after")), "after the clients"),
        "cpu_only": bool(record.host.get("cpu_only")),
        "variants": _variant_facts(record),
    }


def _variant_facts(record: Record) -> list[str]:
    """One line per server variant: its name, engine and what its server reported."""
    out = []
    for v in record.variants:
        flat = record.flat(v)
        facts = server_facts(flat)
        state = "" if v.ok else f" ({v.status}" + (f" at {md_code(v.failed_step)}"
                                                    if v.failed_step else "") + ")"
        taken = f" (measured in run {md_code(v.measured_in)}, resumed)" if v.measured_in else ""
        out.append(f"{md_code(v.name)}{state}{taken}: {engine_text(flat)}" + (
            f"; {facts}" if facts else ""))
    return out


def serving_table(record: Record, client_name: str | None) -> dict[str, Any]:
    shown = _shown_common(record.flat(record.each_variant()[0]))
    shown["variants"] = _variant_facts(record)
    client = serving.with_variants(record, client_name)
    if client is None:
        shown.update(header=[], aligns=[], rows=[], short=None, charts="", grid=None, note="")
        return shown
    spec = speculative(record)
    show_accept = bool(spec) or (shown["pipeline_check"] is None and any(
        isinstance(p.metrics.get("spec_decode_acceptance"), int | float) for p in client.points
    ))
    full = serving.full_table(client, show_accept)
    note = serving.repeats_note(client)
    if spec:
        note = (f"The server decodes speculatively ({spec}): each throughput stands beside the "
                "acceptance rate measured over the same run, and one without an acceptance "
                "rate is untrusted. " + note).strip()
    shown.update(full, short=serving.short_table(client, bool(spec)),
                 charts=serving.sweep_charts(client),
                 grid=serving.grid_view(client) or decode_grid(client), note=note)
    return shown


def quality_table(record: Record, client_name: str | None) -> dict[str, Any]:
    """One row per task and metric; with server variants, each task is named with its
    variant (`KV=fp8: gsm8k`)."""
    shown = _shown_common(record.flat(record.each_variant()[0]))
    rows: list[list[str]] = []
    for variant in record.each_variant():
        client = variant.client(client_name)
        prefix = f"{md_text(variant.name)}: " if variant.coords else ""
        for point in client.points if client else ():
            tasks = point.metrics.get("tasks") or {}
            for task in sorted(tasks):
                values = tasks[task]
                for key in sorted(values):
                    metric, _, flt = key.partition(",")
                    if metric.endswith("_stderr"):
                        continue
                    err = values.get(f"{metric}_stderr,{flt}" if flt else f"{metric}_stderr")
                    rows.append([prefix + md_text(task), md_text(metric),
                                 md_text(flt or DASH),
                                 fmt(values[key], "{:.4f}"), fmt(err, "{:.4f}")])
    shown["rows"] = rows
    return shown


def for_region(region: Region, records: list[Record]) -> list[Record]:
    """The records a region shows: all, or those measured on the region's `arch=`."""
    if not region.archs:
        return records
    wanted = set(region.archs)
    return [r for r in records if record_archs(r) & wanted]


def render_region(
    region: Region, runbook: Runbook | None, records: list[Record], *, ref: str,
    others: Mapping[str, list[Record]] | None = None,
    hashes: Mapping[str, str] | None = None, dialect: str = "github",
) -> str:
    """The Markdown body of one region (each line ending in LF; a blank line first and last),
    its notes in `dialect` (wikitools.dialect).
    `others`: the records of the runbooks a trade-off region compares with (`with=`);
    `hashes`: their blocks hashes on the page, to tell a stale record."""
    records = for_region(region, records)
    runbook_id = region.runbook or ""
    page_hash = runbook.blocks_hash if runbook is not None else ""
    ctx: dict[str, Any] = {
        "runbook_id": runbook_id,
        "on_arch": " on " + ", ".join(region.archs) if region.archs else "",
        "ref": ref,
        "client": region.client,
        "page_blocks_short": page_hash.split(":", 1)[-1][:8],
        "current": records[-1] if records else None,
        "failed": None,
        "shown": None,
        "stale": False,
        "dialect": dialect,
    }
    if region.view == "history":
        rows = [
            [day(r.started_at), md_code(r.run_id), r.status, engine_text(r),
             hardware(r), headline(r)]
            for r in reversed(records)
        ]
        return _finish(environment().get_template("history.md.j2").render(
            ctx, rows=rows, trend=history_trend(records, runbook, region.client)))
    if region.view == "tradeoff":
        return _finish(_tradeoff(region, runbook, records, others or {}, hashes or {}, ctx))
    if region.view in receipts.VIEWS:
        cfgs = receipts.configs(records, others or {}, region.compared)
        tmpl = environment().get_template("receipts.md.j2")
        return _finish(receipts.render(region.view, cfgs, region.get,
                                       lambda own: tmpl.render({**ctx, **own})))
    # A run refused by preflight measured nothing and says only that a host lacked something.
    records = [r for r in records if r.failed_step != "preflight"]
    ctx["current"] = records[-1] if records else None
    if records:
        latest = records[-1]
        ok = newest_shown(records)
        partial = ok is not None and ok.run_id == latest.run_id and not latest.ok
        if not latest.ok:
            tail = next((v.server.get("log_tail") for v in latest.each_variant()
                         if v.status == "failed" and v.server.get("log_tail")), ())
            ctx["failed"] = {
                "date": day(latest.started_at),
                "record_path": record_rel_path(latest),
                "step": md_code(latest.failed_step),
                "message": md_text(better_message(latest.message, tail or ()) or "no message"),
                "partial": ", ".join(md_code(v.name) for v in ok.variants)
                if partial and ok else "",
            }
        if ok is not None:
            if region.view == "quality":
                name = _client_of_kind(runbook, ok, region.client, "quality")
                ctx["client"] = name
                ctx["shown"] = quality_table(ok, name)
            else:
                name = _serving_client(runbook, ok, region.client)
                ctx["client"] = name
                ctx["shown"] = serving_table(ok, name)
            ctx["stale"] = bool(page_hash) and ok.blocks_hash != page_hash
    template = "quality.md.j2" if region.view == "quality" else "serving.md.j2"
    return _finish(environment().get_template(template).render(ctx))


def _latest_ok_serving(runbook: Runbook | None, records: list[Record], wanted: str | None,
                       ) -> tuple[Record, ClientResult] | None:
    ok = next((r for r in reversed(records) if r.ok and r.failed_step != "preflight"), None)
    if ok is None:
        return None
    client = ok.client(_serving_client(runbook, ok, wanted))
    return (ok, client) if client is not None else None


def _tradeoff(region: Region, runbook: Runbook | None, records: list[Record],
              others: Mapping[str, list[Record]], hashes: Mapping[str, str],
              ctx: dict[str, Any]) -> str:
    entries = []
    missing = []
    ids = [region.runbook or "", *region.compared]
    for rid in ids:
        recs = records if rid == region.runbook else for_region(region, list(others.get(rid, [])))
        got = _latest_ok_serving(runbook if rid == region.runbook else None, recs, region.client)
        if got is None:
            missing.append(rid)
        else:
            own = runbook.blocks_hash if rid == region.runbook and runbook else ""
            page_hash = own or hashes.get(rid, "")
            stale = bool(page_hash) and got[0].blocks_hash != page_hash
            entries.append((rid, got[0], got[1], stale))
    shown = serving.tradeoff(entries)
    sources = [f"{md_code(record_rel_path(r))} ({day(r.started_at)}, {hardware(r)}; "
               f"{engine_text(r)})" for _, r, _, _ in entries]
    return environment().get_template("tradeoff.md.j2").render(
        ctx, tradeoff=shown, sources=sources, missing=missing)


def history_trend(records: list[Record], runbook: Runbook | None, wanted: str | None) -> str:
    """Best median output tok/s of each successful run, one line per hardware; '' when fewer
    than two runs have a number."""
    by_hw: dict[str, list[tuple[int, float]]] = {}
    dates: list[str] = []
    oks = [r for r in records if r.ok]
    for i, rec in enumerate(oks):
        client = rec.client(_serving_client(runbook, rec, wanted))
        values = [p.metrics.get("output_throughput") for p in client.points
                  if p.status == "ok"] if client else []
        nums = [v for v in values if isinstance(v, int | float) and not isinstance(v, bool)]
        if not nums:
            continue
        dates.append(f"{day(rec.started_at)[5:]} #{i + 1}")
        by_hw.setdefault(short_hardware(rec), []).append((len(dates) - 1, max(nums)))
    if len(dates) < 2:
        return ""
    chart = Chart("Best output throughput per run", "run (month-day #)", "tok/s",
                  tuple(Series(hw, tuple(XY(float(x), y) for x, y in pts))
                        for hw, pts in sorted(by_hw.items())), x_ticks=tuple(dates))
    return figure([render_chart(chart)])


def _finish(text: str) -> str:
    """One blank line after the start marker and before the end marker; no trailing spaces."""
    lines = [line.rstrip() for line in text.strip("\n").split("\n")]
    return "\n" + "\n".join(lines) + "\n\n"
