"""The serving view of a record: a narrow table of medians with their spread, the full table one
click away, charts against the swept variable, the matrix and heat map of a grid sweep, and the
throughput/interactivity trade-off of several runbooks."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from wikitools.runbook.blocks.declared import DEFAULT_MIN_DURATION
from wikitools.runbook.execution.plan import DEFAULT_REPEATS
from wikitools.runbook.records.record import ClientResult, Point, Record
from wikitools.runbook.records.stats import NOISY_SPREAD, Spread, number
from wikitools.runbook.rendering.charts import (
    XY,
    Chart,
    Heat,
    Series,
    figure,
    render_chart,
    render_heat,
)
from wikitools.runbook.rendering.describe import DASH, fmt
from wikitools.runbook.rendering.escape import md_text

MIN_BAND_RUNS = DEFAULT_REPEATS["serving"]  # fewer runs per point: a range, not a spread

# (header, metric key, format) of the full table, after the swept variable(s).
FULL_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("req/s", "request_throughput", "{:,.2f}"),
    ("output tok/s", "output_throughput", "{:,.1f}"),
    ("total tok/s", "total_token_throughput", "{:,.1f}"),
    ("TTFT median (ms)", "median_ttft_ms", "{:,.1f}"),
    ("TTFT p99 (ms)", "p99_ttft_ms", "{:,.1f}"),
    ("TPOT median (ms)", "median_tpot_ms", "{:,.2f}"),
    ("TPOT p99 (ms)", "p99_tpot_ms", "{:,.2f}"),
    ("ITL median (ms)", "median_itl_ms", "{:,.2f}"),
    ("ITL p99 (ms)", "p99_itl_ms", "{:,.2f}"),
)

# The visible table: few columns, each a median with its spread.
SHORT_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("output tok/s", "output_throughput", "{:,.1f}"),
    ("TTFT (ms)", "median_ttft_ms", "{:,.1f}"),
    ("TPOT (ms)", "median_tpot_ms", "{:,.2f}"),
)


def with_spread(spread: Spread | None, pattern: str) -> str:
    """`561.2 ±1.7 %` (half the min–max range over the median); `noisy` past the threshold."""
    if spread is None:
        return DASH
    text = pattern.format(spread.median)
    if spread.count > 1:
        half = spread.half_range * 100
        # a narrow no-break space keeps "%" with its number when the cell wraps
        text += f" ±{half:.1f}\u202f%" if half < 10 else f" ±{half:.0f}\u202f%"
        if spread.noisy:
            text += " noisy"
    return text


def throughput_cell(point: Point, spread: Spread | None) -> str:
    """The output tok/s of a point with its band; `too short` instead of a band when its runs
    were shorter than the minimum (they measured no steady state)."""
    if spread is None or too_short(point) is None:
        return with_spread(spread, "{:,.1f}")
    return f"{spread.median:,.1f} too short"


def _label(client: ClientResult, point: Point) -> list[str]:
    if client.grid:
        return [md_text(point.coord(v) or DASH) for v in client.sweep_vars]
    return [md_text(point.value if point.value is not None else DASH)]


def _status_cell(point: Point) -> str:
    m = point.metrics
    if point.status != "ok":
        return point.status
    return f"{fmt(m.get('completed'), '{:d}')}/{fmt(m.get('num_prompts'), '{:d}')}"


def short_table(client: ClientResult, speculative: bool = False) -> dict[str, Any]:
    """The headline table. For a speculative-decoding server the acceptance rate stands beside
    the throughput, and a throughput without one is marked untrusted."""
    vars_ = list(client.sweep_vars) if client.grid else [client.sweep_var or "run"]
    header = [md_text(v) for v in vars_] + [h for h, _, _ in SHORT_COLUMNS]
    if speculative:
        header.insert(len(vars_) + 1, "spec acceptance")
    rows = []
    for point in client.points:
        row = _label(client, point)
        if point.status == "ok":
            cells = [with_spread(point.spread(key), pattern) for _, key, pattern in SHORT_COLUMNS]
            cells[0] = throughput_cell(point, point.spread(SHORT_COLUMNS[0][1]))
            if speculative:
                acc = number(point.metrics.get("spec_decode_acceptance"))
                if acc is None:
                    cells[0] += " untrusted"
                cells.insert(1, _acceptance(point.metrics, acc))
            row += cells
        else:
            row += [point.status] + [DASH] * (len(header) - len(vars_) - 1)
        rows.append(row)
    return {"header": header, "aligns": ["---"] * len(vars_) + ["--:"] * (len(header) - len(vars_)),
            "rows": rows}


def _acceptance(metrics: Mapping[str, Any], acc: float | None) -> str:
    """The acceptance cell: the rate; "0 drafts" when the counters were read and the drafter
    made none; "none captured" when there were no counters to read."""
    if acc is not None:
        return f"{acc * 100:.1f} %"
    return "0 drafts" if metrics.get("spec_decode_draft_tokens_delta") == 0 else "none captured"


def full_table(client: ClientResult, show_accept: bool) -> dict[str, Any]:
    vars_ = list(client.sweep_vars) if client.grid else [client.sweep_var or "run"]
    many = any(len(p.samples) > 1 for p in client.points)
    header = [md_text(v) for v in vars_] + [h for h, _, _ in FULL_COLUMNS]
    if show_accept:
        header.append("spec acceptance")
    header += ["ok/total", "runs"]
    if many:
        header.append("output tok/s of each run")
    rows = []
    for point in client.points:
        m = point.metrics
        row = _label(client, point) + [fmt(m.get(key), pat) for _, key, pat in FULL_COLUMNS]
        if show_accept:
            acc = number(m.get("spec_decode_acceptance"))
            row.append(DASH if acc is None else f"{acc * 100:.1f} %")
        row += [_status_cell(point), str(point.repeats)]
        if many:
            row.append(", ".join(
                fmt(s.metrics.get("output_throughput"), "{:,.1f}") if s.status == "ok"
                else s.status for s in point.samples) or DASH)
        rows.append(row)
    return {"header": header, "aligns": ["---"] * len(vars_) + ["--:"] * (len(header) - len(vars_)),
            "rows": rows}


def minimum_duration(point: Point) -> float:
    """The shortest run the point was held to: the block's `min_duration=` as recorded, else
    the default (records made before the rule)."""
    least = number(point.metrics.get("min_duration_s"))
    return least if least is not None else DEFAULT_MIN_DURATION


def too_short(point: Point) -> float | None:
    """The median run length (s) of a point whose runs were shorter than its minimum."""
    sp = point.spread("duration") if point.status == "ok" else None
    return sp.median if sp is not None and sp.median < minimum_duration(point) else None


def short_runs(client: ClientResult) -> str:
    """A sentence naming the points whose runs were too short to mean much; '' when none."""
    short = []
    for p in client.points:
        took = too_short(p)
        if took is not None:
            where = p.value if p.value is not None else "the run"
            short.append(f"{where} ({took:.1f} s, under {minimum_duration(p):g} s)")
    if not short:
        return ""
    var = f"{client.sweep_var} = " if client.sweep_var and not client.grid else ""
    return (f" Runs shorter than the block's minimum (`min_duration=`, {DEFAULT_MIN_DURATION:g} s "
            "unless it says otherwise) measure start-up and tail rather than a steady state; "
            f"their points show no ± and read `too short`: {var}{', '.join(short)}.")


def run_lengths(client: ClientResult) -> str:
    """` of 31.2–35.0 s each` (the measured runs' durations); '' when none was recorded."""
    took = [d for p in client.points if p.status == "ok" for s in p.samples
            if s.status == "ok" and (d := number(s.metrics.get("duration"))) is not None]
    if not took:
        return ""
    low, high = min(took), max(took)
    return f" of {low:.1f} s each" if f"{low:.1f}" == f"{high:.1f}" else (
        f" of {low:.1f}–{high:.1f} s each")


def repeats_note(client: ClientResult) -> str:
    counts = sorted({p.repeats for p in client.points if p.status == "ok"})
    if not counts or counts == [1]:
        return (f"Each point is one run{run_lengths(client)}: there is no spread to show, so "
                "small differences between rows or records may be noise." + short_runs(client))
    runs = "–".join(str(c) for c in (counts[0], counts[-1])) if len(counts) > 1 else str(counts[0])
    warm = " after an unrecorded warm-up run" if client.warmup else ""
    few = (f" Two runs make a range, not a band: {MIN_BAND_RUNS} or more (the default) show "
           "how far a number moves." if counts[0] < MIN_BAND_RUNS else "")
    return (f"Each number is the median of {runs} runs{run_lengths(client)}{warm}; ± is half "
            f"the range between the lowest and the highest run, relative to the median, and "
            f"`noisy` marks a range wider than {NOISY_SPREAD * 100:.0f} % of the median. "
            "Latencies are medians over the requests of a run." + few + short_runs(client))


# --------------------------------------------------------------------------- charts


def _x_axis(values: Sequence[str | None]) -> tuple[list[float], tuple[str, ...], bool]:
    """x positions for sweep values: numbers on a log axis when they span ≥ 4×, else evenly
    spaced in order."""
    nums = [number(_to_float(v)) for v in values]
    if all(n is not None and n > 0 for n in nums) and len(set(nums)) == len(nums):
        xs = [float(n) for n in nums if n is not None]
        if max(xs) / min(xs) >= 4:
            return xs, (), True
    return [float(i) for i in range(len(values))], tuple(str(v) for v in values), False


def _to_float(text: str | None) -> float | None:
    try:
        return float(text) if text is not None else None
    except ValueError:
        return None


def _series(name: str, client: ClientResult, key: str, xs: list[float]) -> Series:
    pts = []
    for x, point in zip(xs, client.points, strict=True):
        sp = point.spread(key) if point.status == "ok" else None
        if sp is None:
            continue
        pts.append(XY(x, sp.median, sp.low if sp.count > 1 else None,
                      sp.high if sp.count > 1 else None,
                      label=f"{client.sweep_var}={point.value}" if client.sweep_var else "",
                      noisy=sp.noisy))
    return Series(name, tuple(pts))


def sweep_charts(client: ClientResult) -> str:
    """Throughput, TTFT and TPOT against the swept variable; '' when fewer than two points."""
    oks = [p for p in client.points if p.status == "ok"]
    if client.grid or not client.sweep_var or len(oks) < 2:
        return ""
    xs, ticks, log = _x_axis([p.value for p in client.points])
    var = client.sweep_var
    charts = [
        Chart("Output throughput", var, "tok/s",
              (_series(client.name, client, "output_throughput", xs),), ticks, log),
        Chart("Time to first token (median)", var, "ms",
              (_series(client.name, client, "median_ttft_ms", xs),), ticks, log),
        Chart("Time per output token (median)", var, "ms",
              (_series(client.name, client, "median_tpot_ms", xs),), ticks, log),
    ]
    repeated = any(p.repeats > 1 for p in oks)
    return figure([render_chart(c) for c in charts],
                  "Bars: lowest to highest run. Hollow markers: noisy points." if repeated else "")


def grid_view(client: ClientResult) -> dict[str, Any] | None:
    """Matrix (first variable down, second across) of median output tok/s, and its heat map;
    None unless exactly two variables vary (more: one row per combination)."""
    if len(client.sweep_vars) != 2:
        return None
    row_var, col_var = client.sweep_vars[0], client.sweep_vars[1]
    rows = _ordered(p.coord(row_var) for p in client.points)
    cols = _ordered(p.coord(col_var) for p in client.points)
    at = {(p.coord(row_var), p.coord(col_var)): p for p in client.points}
    matrix, values = [], []
    for r in rows:
        line, nums = [md_text(r)], []
        for c in cols:
            point = at.get((r, c))
            sp = point.spread("output_throughput") if point and point.status == "ok" else None
            line.append(throughput_cell(point, sp) if point and point.status == "ok"
                        else (point.status if point else DASH))
            nums.append(sp.median if sp else None)
        matrix.append(line)
        values.append(tuple(nums))
    heat = Heat("Output throughput (tok/s)", row_var, col_var, tuple(rows), tuple(cols),
                tuple(values), " tok/s")
    return {
        "header": [f"{md_text(row_var)} \\\\ {md_text(col_var)}",
                   *[md_text(c) for c in cols]],
        "aligns": ["---"] + ["--:"] * len(cols),
        "rows": matrix,
        "chart": figure([render_heat(heat)]),
    }


def _ordered(values: Any) -> list[str]:
    seen: list[str] = []
    for v in values:
        if v is not None and v not in seen:
            seen.append(v)
    return seen


def with_variants(record: Record, name: str | None) -> ClientResult | None:
    """Client `name` across the record's server variants as one client whose variables are the
    variant variables, then its own swept ones: one row per variant and point; a matrix when
    two variables vary in all (two variant variables, or one and a swept one)."""
    found = [(v, c) for v in record.each_variant() if (c := v.client(name)) is not None]
    if not found:
        return None
    base = found[0][1]
    if not record.variants:
        return base
    names = record.variant_vars + base.sweep_vars
    points = []
    for variant, client in found:
        for p in client.points:
            coords = variant.coords + tuple(
                (k, v) for k, v in sorted(p.coords, key=lambda kv: base.sweep_vars.index(kv[0])
                                          if kv[0] in base.sweep_vars else 0))
            value = coords[0][1] if len(coords) == 1 else ",".join(f"{k}={v}" for k, v in coords)
            points.append(replace(p, value=value, coords=tuple(sorted(coords))))
    return replace(base, sweep_var=names[0] if names else None, sweep_vars=names,
                   points=tuple(points))


# --------------------------------------------------------------------------- trade-off


def short_names(names: Sequence[str]) -> list[str]:
    """Legend labels: the names without the part they all share at the start (up to a dash),
    `sm90-llama1b-shape-tp1`, `…-tp2` → `tp1`, `tp2`; the names as they are when that leaves
    nothing or there is one."""
    if len(names) < 2:
        return list(names)
    common = names[0]
    for n in names[1:]:
        while not n.startswith(common):
            common = common[:-1]
    cut = common.rfind("-") + 1
    out = [n[cut:] for n in names]
    return out if all(out) and len(set(out)) == len(out) else list(names)


def gpu_count(record: Record) -> int:
    host = record.host
    n = host.get("gpu_count") or len(host.get("gpus") or ())
    return int(n) if isinstance(n, int) and n > 0 else 1


def tradeoff(entries: Sequence[tuple[str, Record, ClientResult, bool]]) -> dict[str, Any]:
    """Output tok/s per GPU against tok/s per user (1000 / median TPOT), one line per runbook.
    Each entry: runbook id, its latest good record, the client shown, and whether that record
    is stale (measured with other blocks than the page has). A stale line, or lines measured
    with different numbers of runs per point, are named on the chart itself."""
    series, rows = [], []
    short = short_names([name for name, _, _, _ in entries])
    runs = {label: max((len(p.samples) for p in client.points), default=0) or 1
            for (_, _, client, _), label in zip(entries, short, strict=True)}
    notes = [f"{label}: stale, measured with commands the page no longer has; re-run it "
             "before comparing."
             for (_, _, _, stale), label in zip(entries, short, strict=True) if stale]
    if len(set(runs.values())) > 1:
        notes.append("Runs per point differ: " + ", ".join(
            f"{label} {n} run{'s' * (n != 1)}" for label, n in runs.items()) + ".")
    for (name, record, client, stale), label in zip(entries, short, strict=True):
        gpus = gpu_count(record)
        pts = []
        for point in client.points:
            if point.status != "ok":
                continue
            tput = number(point.metrics.get("output_throughput"))
            tpot = number(point.metrics.get("median_tpot_ms"))
            if tput is None or tpot is None or tpot <= 0:
                continue
            per_user, per_gpu = 1000.0 / tpot, tput / gpus
            pts.append(XY(per_user, per_gpu, label=f"{client.sweep_var}={point.value}"
                          if client.sweep_var else ""))
            rows.append([md_text(name), str(gpus), md_text(point.value or DASH),
                         f"{per_user:,.1f}", f"{per_gpu:,.1f}"])
        series.append(Series(label + (" (stale)" if stale else ""), tuple(pts)))
    var = next((c.sweep_var for _, _, c, _ in entries if c.sweep_var), None) or "point"
    chart = Chart("Throughput per GPU vs speed per user", "tok/s per user (1000 / TPOT)",
                  "output tok/s per GPU", tuple(series), notes=tuple(notes))
    has_points = any(s.points for s in series)
    return {
        "chart": figure([render_chart(chart)], f"Each marker is one {var} value; up and to the "
                        "right is better.") if has_points else "",
        "header": ["runbook", "GPUs", var, "tok/s per user", "output tok/s per GPU"],
        "aligns": ["---", "--:", "--:", "--:", "--:"],
        "rows": rows,
    }


__all__ = ["FULL_COLUMNS", "SHORT_COLUMNS", "fmt", "full_table", "gpu_count",
           "grid_view", "repeats_note", "short_table", "sweep_charts", "tradeoff",
           "with_spread", "with_variants"]
