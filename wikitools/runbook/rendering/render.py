"""Render results regions from run records (Jinja2 templates in wikitools/templates): the serving
table, the run history and quality scores, each with its provenance; report hand-edited, stale
and out-of-date regions."""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import jinja2

from wikitools.diagnostics import Diagnostic, Severity, did_you_mean
from wikitools.pages import Page
from wikitools.runbook.blocks.extract import extract_runbooks
from wikitools.runbook.blocks.model import Runbook, RunbookSet
from wikitools.runbook.blocks.regions import (
    Region,
    edited_diagnostic,
    find_regions,
    indent_body,
    replace_regions,
)
from wikitools.runbook.engines import catalog as engines
from wikitools.runbook.engines.failure import better_message
from wikitools.runbook.records.gpustate import describe_state
from wikitools.runbook.records.record import (
    ClientResult,
    Record,
    RecordError,
    load_records,
    record_rel_path,
)
from wikitools.runbook.rendering import serving
from wikitools.runbook.rendering.charts import XY, Chart, Series, figure, render_chart
from wikitools.runbook.rendering.escape import escaped, md_code, md_text

DASH = "–"


@dataclass(frozen=True, slots=True)
class Change:
    path: str  # POSIX, relative to the root
    old: str
    new: str


# --------------------------------------------------------------------------- formatting


def fmt(value: Any, pattern: str) -> str:
    """A number in an explicit format; a dash when missing, not a number or not finite."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return DASH
    return pattern.format(value)


def cell(text: str) -> str:
    """Text safe inside a Markdown table cell."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _date(stamp: str) -> str:
    return stamp[:10]


def hardware(record: Record) -> str:
    host = record.host
    gpus = host.get("gpus") or []
    if host.get("cpu_only") or not gpus:
        return "a CPU-only host (no GPU)"
    names = sorted({md_text(g.get("name", "?")) for g in gpus})
    ccs = sorted({md_text(g.get("compute_capability", "?")) for g in gpus})
    archs = ", ".join(f"sm{c.replace('.', '')} (compute capability {c})" for c in ccs)
    count = host.get("gpu_count") or len(gpus)
    parts = [f"{count} × {' + '.join(names)}, {archs}"]
    if host.get("driver"):
        parts.append(f"driver {md_text(host['driver'])}")
    if host.get("cuda"):
        parts.append(f"CUDA {md_text(host['cuda'])}")
    topo = host.get("topology")
    if topo and topo != "none" and count > 1:
        parts.append(f"GPU link {md_text(topo)}")
    return ", ".join(parts)


def engine_text(record: Record) -> str:
    eng = record.engine
    name = md_text(engines.display_name(eng.get("name")))
    text = (f"{name} {md_text(eng['version'])}" if eng.get("version")
            else f"{name} (version not reported)")
    if eng.get("image"):
        text += f", image {md_code(eng['image'])}"
        if eng.get("image_digest"):
            text += f" ({md_code(eng['image_digest'])})"
    return text


def server_facts(record: Record) -> str:
    m = escaped(record.markers)
    parts = []
    if m.get("attention_backend"):
        backend = f"attention backend {m['attention_backend']}"
        if m.get("flash_attn_version"):
            backend += f" (FlashAttention {m['flash_attn_version']})"
        parts.append(backend)
    tokens = m.get("kv_cache_tokens", m.get("metrics_kv_cache_tokens"))
    if isinstance(tokens, int):
        kv = f"KV cache {tokens:,} tokens"
        if isinstance(m.get("kv_cache_gib"), int | float):
            kv += f" ({m['kv_cache_gib']:,.2f} GiB)"
        parts.append(kv)
    if isinstance(m.get("max_concurrency"), int | float) and isinstance(
            m.get("max_concurrency_tokens"), int | float):
        parts.append(
            f"maximum concurrency {m['max_concurrency']:,.2f}× at "
            f"{m['max_concurrency_tokens']:,} tokens per request"
        )
    if m.get("moe_backend"):
        parts.append(f"MoE backend {m['moe_backend']}")
    if m.get("compiled") is True:
        parts.append("torch.compile on")
    elif m.get("compiled") is False:
        parts.append("eager (no torch.compile)")
    if m.get("cuda_graphs") is False:
        parts.append("CUDA graphs off")
    elif m.get("cuda_graphs") is True:
        parts.append("CUDA graphs on")
    return "; ".join(parts)


def pipeline_check(record: Record) -> str | None:
    """Why a record is a plumbing check rather than a measurement, or None."""
    command = str(record.server.get("command", ""))
    dummy = "--load-format dummy" in command or "--load-format=dummy" in command
    cpu = bool(record.host.get("cpu_only"))
    if dummy and cpu:
        return "This run served dummy weights (`--load-format dummy`) on a CPU-only host."
    if dummy:
        return "This run served dummy weights (`--load-format dummy`)."
    if cpu:
        return "This run used a CPU-only host."
    return None


# --------------------------------------------------------------------------- views


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
    for result in record.clients:
        if result.kind == kind:
            return result.name
    return None


def _shown_common(record: Record) -> dict[str, Any]:
    return {
        "date": _date(record.started_at),
        "hardware": hardware(record),
        "engine": engine_text(record),
        "server_facts": server_facts(record),
        "record_path": record_rel_path(record),
        "blocks_short": record.blocks_hash.split(":", 1)[-1][:8],
        "pipeline_check": pipeline_check(record),
        "gpu_before": describe_state(escaped(record.gpu_state.get("before")), "before the run"),
        "gpu_after": describe_state(escaped(record.gpu_state.get("after")), "after the clients"),
        "cpu_only": bool(record.host.get("cpu_only")),
    }


def serving_table(record: Record, client_name: str | None) -> dict[str, Any]:
    shown = _shown_common(record)
    client = record.client(client_name)
    if client is None:
        shown.update(header=[], aligns=[], rows=[], short=None, charts="", grid=None, note="")
        return shown
    show_accept = shown["pipeline_check"] is None and any(
        isinstance(p.metrics.get("spec_decode_acceptance"), int | float) for p in client.points
    )
    full = serving.full_table(client, show_accept)
    shown.update(full, short=serving.short_table(client), charts=serving.sweep_charts(client),
                 grid=serving.grid_view(client), note=serving.repeats_note(client))
    return shown


def quality_table(record: Record, client_name: str | None) -> dict[str, Any]:
    shown = _shown_common(record)
    client = record.client(client_name)
    rows: list[list[str]] = []
    for point in client.points if client else ():
        tasks = point.metrics.get("tasks") or {}
        for task in sorted(tasks):
            values = tasks[task]
            for key in sorted(values):
                metric, _, flt = key.partition(",")
                if metric.endswith("_stderr"):
                    continue
                err = values.get(f"{metric}_stderr,{flt}" if flt else f"{metric}_stderr")
                rows.append([cell(md_text(task)), cell(md_text(metric)), cell(md_text(flt or DASH)),
                             fmt(values[key], "{:.4f}"), fmt(err, "{:.4f}")])
    shown["rows"] = rows
    return shown


def headline(record: Record) -> str:
    if not record.ok:
        msg = record.message or ""
        msg = msg if len(msg) <= 80 else msg[:77] + "..."
        return cell(f"failed at {md_code(record.failed_step)}: {md_text(msg)}")
    best: tuple[float, str, str] | None = None
    for client in record.clients:
        if client.kind != "serving":
            continue
        for p in client.points:
            v = p.metrics.get("output_throughput")
            if isinstance(v, int | float) and (best is None or v > best[0]):
                where = (f" at {md_text(client.sweep_var)}={md_text(p.value)}"
                         if client.sweep_var else "")
                best = (v, md_text(client.name), where)
    if best is None:
        return "ok"
    return cell(f"best output {best[0]:,.1f} tok/s ({best[1]}{best[2]})")


# --------------------------------------------------------------------------- templates


@functools.cache
def _env() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.PackageLoader("wikitools", "templates"),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )


def record_archs(record: Record) -> set[str]:
    """`sm120`-style architectures of the GPUs a record ran on; {"cpu"} for a CPU-only host."""
    gpus = record.host.get("gpus") or []
    if record.host.get("cpu_only") or not gpus:
        return {"cpu"}
    return {"sm" + str(g.get("compute_capability", "")).replace(".", "") for g in gpus}


def for_region(region: Region, records: list[Record]) -> list[Record]:
    """The records a region shows: all, or those measured on the region's `arch=`."""
    if not region.archs:
        return records
    wanted = set(region.archs)
    return [r for r in records if record_archs(r) & wanted]


def render_region(
    region: Region, runbook: Runbook | None, records: list[Record], *, ref: str,
    others: Mapping[str, list[Record]] | None = None,
) -> str:
    """The Markdown body of one region (each line ending in LF; a blank line first and last).
    `others`: the records of the runbooks a trade-off region compares with (`with=`)."""
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
    }
    if region.view == "history":
        rows = [
            [_date(r.started_at), md_code(r.run_id), r.status, cell(engine_text(r)),
             cell(hardware(r)), headline(r)]
            for r in reversed(records)
        ]
        return _finish(_env().get_template("history.md.j2").render(
            ctx, rows=rows, trend=history_trend(records, runbook, region.client)))
    if region.view == "tradeoff":
        return _finish(_tradeoff(region, runbook, records, others or {}, ctx))
    # A run refused by preflight measured nothing and says only that a host lacked something.
    records = [r for r in records if r.failed_step != "preflight"]
    ctx["current"] = records[-1] if records else None
    if records:
        latest = records[-1]
        ok = next((r for r in reversed(records) if r.ok), None)
        if not latest.ok:
            ctx["failed"] = {
                "date": _date(latest.started_at),
                "record_path": record_rel_path(latest),
                "step": md_code(latest.failed_step),
                "message": md_text(better_message(
                    latest.message, latest.server.get("log_tail") or ()) or "no message"),
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
    return _finish(_env().get_template(template).render(ctx))


def _latest_ok_serving(runbook: Runbook | None, records: list[Record], wanted: str | None,
                       ) -> tuple[Record, ClientResult] | None:
    ok = next((r for r in reversed(records) if r.ok and r.failed_step != "preflight"), None)
    if ok is None:
        return None
    client = ok.client(_serving_client(runbook, ok, wanted))
    return (ok, client) if client is not None else None


def _tradeoff(region: Region, runbook: Runbook | None, records: list[Record],
              others: Mapping[str, list[Record]], ctx: dict[str, Any]) -> str:
    entries = []
    missing = []
    ids = [region.runbook or "", *region.compared]
    for rid in ids:
        recs = records if rid == region.runbook else for_region(region, list(others.get(rid, [])))
        got = _latest_ok_serving(runbook if rid == region.runbook else None, recs, region.client)
        if got is None:
            missing.append(rid)
        else:
            entries.append((rid, got[0], got[1]))
    shown = serving.tradeoff(entries)
    sources = [f"`{record_rel_path(r)}` ({_date(r.started_at)}, {cell(hardware(r))}; "
               f"{cell(engine_text(r))})" for _, r, _ in entries]
    return _env().get_template("tradeoff.md.j2").render(
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
        dates.append(f"{_date(rec.started_at)[5:]} #{i + 1}")
        by_hw.setdefault(short_hardware(rec), []).append((len(dates) - 1, max(nums)))
    if len(dates) < 2:
        return ""
    chart = Chart("Best output throughput per run", "run (month-day #)", "tok/s",
                  tuple(Series(hw, tuple(XY(float(x), y) for x, y in pts))
                        for hw, pts in sorted(by_hw.items())), x_ticks=tuple(dates))
    return figure([render_chart(chart)])


def short_hardware(record: Record) -> str:
    """`1 × NVIDIA H200` style label of a record's GPUs; `CPU` for a CPU-only host."""
    gpus = record.host.get("gpus") or []
    if record.host.get("cpu_only") or not gpus:
        return "CPU"
    names = sorted({str(g.get("name", "?")).removeprefix("NVIDIA ") for g in gpus})
    return f"{len(gpus)} × {' + '.join(names)}"


def _finish(text: str) -> str:
    """One blank line after the start marker and before the end marker; no trailing spaces."""
    lines = [line.rstrip() for line in text.strip("\n").split("\n")]
    return "\n" + "\n".join(lines) + "\n\n"


# --------------------------------------------------------------------------- pages


class _Records:
    """Records per runbook id, each folder read once."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._cache: dict[str, list[Record] | RecordError] = {}

    def get(self, runbook_id: str) -> list[Record]:
        if runbook_id not in self._cache:
            try:
                self._cache[runbook_id] = load_records(self.root, runbook_id)
            except RecordError as exc:
                self._cache[runbook_id] = exc
        got = self._cache[runbook_id]
        if isinstance(got, RecordError):
            raise got
        return got


def render_pages(
    pages: Iterable[Page],
    root: Path,
    *,
    check: bool = False,
    runbooks: RunbookSet | None = None,
) -> tuple[list[Change], list[Diagnostic]]:
    """Render every results region of `pages`. Returns the pages whose text would change and the
    diagnostics: RGN001/RGN005 markers, RB009 unknown runbook, RGN002 hand-edited (left alone),
    RGN003 stale (warning), and with `check` RGN004 for each region that would change."""
    pages = list(pages)
    explicit_runbooks = runbooks is not None  # the whole wiki's runbooks: badges can be drawn
    if runbooks is None:
        runbooks, _ = extract_runbooks(pages)
    by_id: Mapping[str, Runbook] = {r.id: r for r in runbooks}
    store = _Records(root)
    changes: list[Change] = []
    diags: list[Diagnostic] = []
    for page in pages:
        regions, problems = find_regions(page)
        diags.extend(problems)
        bad_starts = {d.line for d in problems}
        bodies: dict[int, str] = {}
        for region in regions:
            if region.start in bad_starts:
                continue
            runbook = by_id.get(region.runbook or "")
            if runbook is None:
                diags.append(_unknown_runbook(region, by_id, dict(runbooks.broken)))
                continue
            if region.edited:
                diags.append(edited_diagnostic(region))
                continue
            try:
                records = store.get(runbook.id)
            except RecordError as exc:
                diags.append(Diagnostic(region.path, region.start, region.col, "RGN006",
                                        f"cannot read records: {exc}"))
                continue
            latest_ok = next((r for r in reversed(for_region(region, records)) if r.ok), None)
            if (region.view != "history" and latest_ok is not None
                    and latest_ok.blocks_hash != runbook.blocks_hash):
                diags.append(Diagnostic(
                    region.path, region.start, region.col, "RGN003",
                    f"results of runbook '{runbook.id}' are stale: record "
                    f"{latest_ok.run_id} was measured with other blocks than the page now has",
                    Severity.WARNING,
                ))
            others = {}
            try:
                for rid in region.compared:
                    others[rid] = store.get(rid)
            except RecordError as exc:
                diags.append(Diagnostic(region.path, region.start, region.col, "RGN006",
                                        f"cannot read records: {exc}"))
                continue
            unknown = [rid for rid in region.compared if rid not in by_id]
            if unknown:
                diags.append(_unknown_runbook(replace(region, attrs=(("runbook", unknown[0]),)),
                                              by_id, dict(runbooks.broken)))
                continue
            body = render_region(region, runbook, records, ref=runbook.ref, others=others)
            new_body = indent_body(body, region.indent)
            if new_body != region.body or region.sum is None:
                bodies[region.start] = body
                if check:
                    diags.append(Diagnostic(
                        region.path, region.start, region.col, "RGN004",
                        "results region is out of date (run `wiki runbook render`)",
                    ))
        if bodies:
            stored = stored_text(root, page)
            new_text = replace_regions(stored, bodies, regions)
            if new_text != stored:
                changes.append(Change(page.path, stored, new_text))
    if explicit_runbooks:
        from wikitools.runbook.rendering.status import badges_change  # status builds on this module

        badge = badges_change(root, runbooks)
        if badge is not None:
            changes.append(Change(*badge))
            if check:
                diags.append(Diagnostic(badge[0], 1, 1, "RGN007", "measured badges are out of "
                                        "date (run `wiki runbook render`)"))
    return changes, diags


def stored_text(root: Path, page: Page) -> str:
    """The page's text as stored on disk (byte-order mark and CRLF kept), so that rendering
    changes the bytes of its regions only; the page model's text when the file is not there or
    no longer holds what was parsed."""
    try:
        text = (root / page.path).read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return page.text
    plain = text.removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n")
    return text if plain == page.text else page.text


def _unknown_runbook(region: Region, by_id: Mapping[str, Runbook],
                     broken: Mapping[str, str] | None = None) -> Diagnostic:
    name = region.runbook or ""
    where = (broken or {}).get(name)
    if where is not None:  # the runbook exists; its own block's errors say what is wrong
        return Diagnostic(region.path, region.start, region.col, "RB009",
                          f"results region of runbook '{name}' cannot be rendered: its server "
                          f"block ({where}) has errors")
    hint = did_you_mean(name, sorted(by_id), cutoff=0.5)
    return Diagnostic(region.path, region.start, region.col, "RB009",
                      f"results region names unknown runbook '{name}'{hint}")


def check_regions(pages: Iterable[Page], root: Path,
                  runbooks: RunbookSet | None = None) -> list[Diagnostic]:
    """For `wiki check`: every region problem, including RGN004 where a region would change."""
    _changes, diags = render_pages(pages, root, check=True, runbooks=runbooks)
    return diags
