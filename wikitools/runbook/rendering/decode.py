"""The matrix a run of the community's decode benchmark (`llm_decode_bench.py`) measured:
context length down, concurrency across, the summed output tok/s of each cell as the median of
the run's repeats with their range, the same shape as the community's own result files."""

from __future__ import annotations

import re
from typing import Any

from wikitools.runbook.records.record import ClientResult
from wikitools.runbook.records.stats import spread_of
from wikitools.runbook.rendering.charts import Heat, figure, render_heat
from wikitools.runbook.rendering.serving import with_spread

TOOL = "llm-decode-bench"
_CELL = re.compile(r"c(\d+)_ctx(\d+)")


def decode_grid(client: ClientResult) -> dict[str, Any] | None:
    """The grid the serving view shows for a decode-benchmark client (header, aligns, rows,
    chart), or None when the client is another tool or swept (one point per cell matrix)."""
    oks = [p for p in client.points if p.status == "ok"]
    if len(oks) != 1 or oks[0].metrics.get("tool") != TOOL:
        return None
    point = oks[0]
    runs = [s.metrics for s in point.samples if s.status == "ok"] or [point.metrics]
    values: dict[tuple[int, int], list[Any]] = {}
    for run in runs:
        cells = run.get("cells")
        for key, got in (cells.items() if isinstance(cells, dict) else ()):
            m = _CELL.fullmatch(key)
            if m and isinstance(got, dict):
                values.setdefault((int(m[2]), int(m[1])), []).append(got.get("aggregate_tps"))
    if not values:
        return None
    contexts = sorted({ctx for ctx, _ in values})
    concurrencies = sorted({c for _, c in values})
    rows, heat_rows = [], []
    for ctx in contexts:
        line, nums = [f"{ctx:,}"], []
        for c in concurrencies:
            sp = spread_of(values[(ctx, c)]) if (ctx, c) in values else None
            line.append(with_spread(sp, "{:,.1f}") if sp else "—")
            nums.append(sp.median if sp else None)
        rows.append(line)
        heat_rows.append(tuple(nums))
    heat = Heat("Summed output tok/s", "context tokens", "concurrency",
                tuple(f"{x:,}" for x in contexts), tuple(str(c) for c in concurrencies),
                tuple(heat_rows), " tok/s")
    return {
        "header": ["context \\\\ concurrency", *[f"C={c}" for c in concurrencies]],
        "aligns": ["--:"] * (len(concurrencies) + 1),
        "rows": rows,
        "chart": figure([render_heat(heat)]),
    }
