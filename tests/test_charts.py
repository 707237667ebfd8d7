"""Charts, spreads, grid sweeps and the trade-off view rendered from records."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import replace

from harness import apply, make_wiki, record, render

from wikitools.runbook.records.record import ClientResult, Point, Sample, record_path, write_record
from wikitools.runbook.rendering.charts import (
    XY,
    Chart,
    Heat,
    Series,
    nice_ticks,
    render_chart,
    render_heat,
)
from wikitools.runbook.rendering.serving import tradeoff

SVG = "{http://www.w3.org/2000/svg}"


def rewrite(root, rec) -> None:
    """Replace the record the test helper wrote with an edited copy (records never overwrite)."""
    record_path(root, rec.runbook, rec.run_id).unlink()
    write_record(root, rec)


def _svgs(text: str, root) -> list[ET.Element]:
    """The charts a page links to (files beside it; the page holds no inline SVG)."""
    assert "<svg" not in text
    return [ET.parse(root / "wiki" / link).getroot()
            for link in re.findall(r"!\[[^\]]*\]\((charts/[^)]+\.svg)\)", text)]


def _point(value: str, tputs: list[float], tpot: float = 2.0) -> Point:
    samples = tuple(Sample("ok", {"output_throughput": t, "median_ttft_ms": 10.0 + i,
                                  "median_tpot_ms": tpot, "completed": 64, "num_prompts": 64})
                    for i, t in enumerate(tputs))
    tputs_sorted = sorted(tputs)
    median = {"output_throughput": tputs_sorted[len(tputs) // 2], "median_ttft_ms": 11.0,
              "median_tpot_ms": tpot, "completed": 64, "num_prompts": 64}
    return Point(value, "ok", median, samples=samples, coords=(("C", value),))


def test_repeats_show_median_spread_noisy_and_every_run(tmp_path):
    root = make_wiki(tmp_path)
    base = record(root)
    client = ClientResult("bench", "serving", "vllm bench serve", "C", (
        _point("1", [452.0, 499.0, 541.0]), _point("2", [6451.0, 6443.0, 6460.0], 3.0),
    ), ("C",), 3, True)
    rewrite(root, replace(base, clients=(client,)))
    text = apply(root)
    assert "| 1 | 499.0 ±8.9\u202f% noisy | 11.0 ±9.1\u202f% noisy | 2.00 ±0.0\u202f% |" in text
    assert "| 2 | 6,451.0 ±0.1\u202f% |" in text
    assert "| 64/64 | 3 | 452.0, 499.0, 541.0 |" in text  # the full table keeps every run
    assert "median of 3 runs after an unrecorded warm-up run" in text
    svgs = _svgs(text, root)
    titles = [s.find(f"{SVG}title").text for s in svgs]
    assert titles == ["Output throughput", "Time to first token (median)",
                      "Time per output token (median)"]
    # min–max bar of the noisy point, hollow marker class
    assert svgs[0].findall(f".//{SVG}line[@class='wiki-bar']")
    assert svgs[0].findall(f".//{SVG}circle[@class='wiki-noisy']")
    assert apply(root) == text  # same records, same bytes


def test_single_sample_points_say_there_is_no_spread(tmp_path):
    root = make_wiki(tmp_path)
    record(root)
    text = apply(root)
    assert "Each point is one run: there is no spread to show" in text
    assert "| C | output tok/s | TTFT (ms) | TPOT (ms) |" in text


def test_grid_sweep_gives_matrix_and_heat_map(tmp_path):
    root = make_wiki(tmp_path)
    base = record(root)
    points = []
    for c in ("1", "8"):
        for n in ("512", "2048"):
            if (c, n) == ("8", "2048"):
                points.append(Point(f"C={c},N={n}", "failed", coords=(("C", c), ("N", n))))
                continue
            tput = float(int(c) * 100 + int(n) // 512)
            points.append(Point(f"C={c},N={n}", "ok", {"output_throughput": tput},
                                coords=(("C", c), ("N", n))))
    client = ClientResult("bench", "serving", "cmd", "C", tuple(points), ("C", "N"))
    rewrite(root, replace(base, clients=(client,)))
    text = apply(root)
    assert "| C \\\\ N | 512 | 2048 |" in text
    assert "| 1 | 101.0 | 104.0 |" in text and "| 8 | 801.0 | failed |" in text
    heat = _svgs(text, root)[0]
    assert heat.find(f"{SVG}title").text == "Output throughput (tok/s)"
    classes = [g.get("class") for g in heat.findall(f"{SVG}g") if g.get("class")]
    assert classes == ["wiki-heat0", "wiki-heat0", "wiki-heat4", "wiki-heat-na"]
    assert 'All metrics</summary>\n\n| C | N | req/s |' in text  # one click away


def test_tradeoff_draws_one_line_per_runbook(tmp_path):
    root = make_wiki(tmp_path)
    page = (root / "wiki/fake.md").read_text()
    page += ("\n<!-- wiki:results runbook=fake-rb view=tradeoff with=other-rb -->\n"
             "<!-- wiki:end -->\n\n"
             "```{ .bash #other-rb .runbook-server engine=vllm gpus=0 }\nvllm serve m2\n```\n")
    (root / "wiki/fake.md").write_text(page)
    base = record(root)
    client = ClientResult("bench", "serving", "cmd", "C",
                          (_point("1", [500.0], 2.0), _point("8", [3000.0], 4.0)))
    rewrite(root, replace(base, clients=(client,)))
    text = apply(root)
    assert "| fake-rb | 1 | 1 | 500.0 | 500.0 |" in text
    assert "| fake-rb | 1 | 8 | 250.0 | 3,000.0 |" in text
    assert "Not yet measured: `other-rb`." in text
    chart = _svgs(text.split("view=tradeoff")[1], root)[0]
    assert chart.find(f"{SVG}title").text == "Throughput per GPU vs speed per user"
    assert len(chart.findall(f".//{SVG}polyline")) == 1  # the unmeasured one draws nothing


def test_history_trend_after_two_runs(tmp_path):
    root = make_wiki(tmp_path)
    record(root)
    record(root, started="2026-12-01T10:00:00Z")
    text = apply(root)
    hist = text.split("view=history")[1]
    assert _svgs(hist, root)[0].find(f"{SVG}title").text == "Best output throughput per run"


def test_chart_text_cannot_be_touched_by_markdown():
    svg = render_chart(Chart("TTFT per GPU", "INPUT_LEN", "ms",
                             (Series("a", (XY(1, 2.0), XY(4, 3.0))),), log_x=True))
    assert "&#84;TFT per &#71;PU" in svg and "INPUT&#95;LEN" in svg and "\n" not in svg
    root = ET.fromstring(svg)
    assert root.find(f"{SVG}title").text == "TTFT per GPU"


def test_heat_and_ticks():
    assert nice_ticks(8640.4) == [0.0, 2500.0, 5000.0, 7500.0, 10000.0]
    assert nice_ticks(3.45) == [0.0, 1.0, 2.0, 3.0, 4.0]
    svg = render_heat(Heat("t", "A", "B", ("1",), ("x", "y"), ((1.0, None),)))
    assert ET.fromstring(svg).find(f"{SVG}title").text == "t"


def test_tradeoff_chart_says_on_the_image_when_a_line_is_stale(tmp_path):
    """A trade-off that puts a run measured with older blocks (one run per point) beside a
    fresh three-run line names both problems inside the SVG, not only in the page text."""
    root = make_wiki(tmp_path)
    page = (root / "wiki/fake.md").read_text()
    page += ("\n<!-- wiki:results runbook=fake-rb view=tradeoff with=other-rb -->\n"
             "<!-- wiki:end -->\n\n"
             "```{ .bash #other-rb .runbook-server engine=vllm gpus=0 }\nvllm serve m2\n```\n")
    (root / "wiki/fake.md").write_text(page)
    base = record(root)
    fresh = ClientResult("bench", "serving", "cmd", "C",
                         (_point("1", [500.0, 510.0, 490.0]), _point("8", [3000.0] * 3, 4.0)))
    rewrite(root, replace(base, clients=(fresh,)))
    old_hash = "sha256:" + "0" * 64
    once = ClientResult("bench", "serving", "cmd", "C", (_point("1", [400.0]),))
    write_record(root, replace(base, runbook="other-rb", blocks_hash=old_hash,
                               run_id="20261130T100000Z-00000000", clients=(once,)))
    chart = _svgs(apply(root).split("view=tradeoff")[1], root)[0]
    notes = [t.text for t in chart.iter(f"{SVG}text") if t.get("class") == "wiki-chart-note"]
    said = " ".join(notes).replace("&#", "")
    assert "stale" in said and "Runs per point differ" in said, notes
    legend = [t.text for t in chart.iter(f"{SVG}text") if t.text and "(stale)" in t.text]
    assert len(legend) == 1
    # Two fresh lines with equal runs per point carry no note.
    shown = tradeoff([("fake-rb", base, fresh, False), ("other-rb", base, fresh, False)])
    assert "wiki-chart-note" not in shown["chart"] and "(stale)" not in shown["chart"]


def test_charts_are_files_beside_the_page_and_old_ones_go(tmp_path):
    # GitHub drops inline <svg>: a chart is a file behind an image link, with its own size
    # and colours (the page's stylesheet does not reach into an image).
    root = make_wiki(tmp_path)
    record(root)
    text = apply(root)
    first = sorted(p.name for p in (root / "wiki" / "charts").iterdir())
    assert first and all(f"(charts/{name})" in text for name in first)
    chart = (root / "wiki" / "charts" / first[0]).read_text()
    assert chart.startswith('<svg width="320" height="220" ') and "<style>" in chart
    assert "prefers-color-scheme: dark" in chart
    (root / "wiki" / "charts" / first[0]).unlink()
    _changes, diags = render(root, check=True)
    assert [d.code for d in diags] == ["RGN004"] and "missing" in diags[0].message
    charts = root / "wiki" / "charts"
    (charts / "fake-0123456789.svg").write_text("<svg/>")  # a chart no region links to now
    (charts / "diagram.svg").write_text("<svg/>")  # a file of someone else's
    (charts / "fake-sub-0123456789.svg").write_text("<svg/>")  # another page's (fake-sub.md)
    record(root, started="2026-12-02T10:00:00Z")  # a second run: the history gets a chart
    text = apply(root)
    now = {p.name for p in charts.iterdir()}
    linked = set(re.findall(r"\(charts/([^)]+)\)", text))
    assert linked - set(first) and linked <= now
    assert now - linked == {"diagram.svg", "fake-sub-0123456789.svg"}
