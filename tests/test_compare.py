"""`wiki runbook compare|history`: ratios, spread-aware verdicts and provenance differences, on
the committed H200 record and copies of it with known changes."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

from wikitools.cli import main
from wikitools.runbook.records.compare import beyond_spread, compare_records, last_two, regressions
from wikitools.runbook.records.record import Point, Sample, read_record, write_record
from wikitools.runbook.records.stats import spread_of

REPO = Path(__file__).resolve().parents[1]
H200 = REPO / "runbooks" / "sm90-llama1b-shape-tp1" / "20261130T094228Z-28eb0ac9.json"


def _slower(record, factor: float, samples: int = 3):
    """The record re-measured with `samples` runs per point, throughput × factor."""
    client = record.clients[0]
    points = []
    for p in client.points:
        runs = tuple(Sample("ok", {**p.metrics, "output_throughput":
                                   p.metrics["output_throughput"] * factor * (1 + d)})
                     for d in (-0.01, 0.0, 0.01)[:samples])
        points.append(replace(p, samples=runs, metrics={
            **p.metrics, "output_throughput": p.metrics["output_throughput"] * factor}))
    return replace(record, run_id="20261130T200000Z-28eb0ac9", started_at="2026-11-30T20:00:00Z",
                   engine={**record.engine, "version": "0.26.1"},
                   host={**record.host, "driver": "580.200.01"},
                   gpu_state={"before": {"gpus": [{"index": 0, "clocks_sm_mhz": 1980,
                                                   "pcie_link_gen": 5}]}},
                   clients=(replace(client, points=tuple(points), repeats=samples),))


def test_real_record_against_a_slower_copy():
    old = read_record(H200)
    new = _slower(old, 0.6)
    cmp = compare_records(old, new)
    tput = [r for r in cmp.rows if r.metric == "output tok/s"]
    assert [r.point for r in tput] == ["CONCURRENCY=1", "CONCURRENCY=8", "CONCURRENCY=32"]
    assert all(round(r.ratio, 3) == 0.6 and r.verdict == "regression" for r in tput)
    assert {r.verdict for r in cmp.rows if r.metric != "output tok/s"} == {"within spread"}
    fields = {d.field: (d.old, d.new) for d in cmp.differences}
    assert fields["engine.version"] == ("0.26.0", "0.26.1")
    assert fields["host.driver"] == ("580.159.04", "580.200.01")
    assert fields["gpu_state.before.gpus[0].clocks_sm_mhz"] == (None, 1980)
    assert "server.log_tail" not in fields and "blocks_hash" not in fields


def test_small_changes_stay_within_the_spread():
    old = read_record(H200)
    assert not regressions(old, _slower(old, 0.97))
    assert [r.verdict for r in regressions(old, _slower(old, 1.3))][:1] == ["improvement"]
    assert regressions(None, old) == []


def test_beyond_spread_needs_both_medians_outside_the_other_range():
    assert not beyond_spread(spread_of([452, 499, 541]), spread_of([520, 530, 560]))
    assert beyond_spread(spread_of([452, 499, 541]), spread_of([600, 610, 620]))
    assert not beyond_spread(spread_of([100.0]), spread_of([104.0]))  # one sample: ±5 %
    assert beyond_spread(spread_of([100.0]), spread_of([120.0]))


def test_cli_compare_two_files_and_a_runbook(tmp_path, capsys):
    shutil.copytree(REPO / "wiki", tmp_path / "wiki")
    shutil.copy(REPO / "wiki.yml", tmp_path / "wiki.yml")
    shutil.copy(REPO / "mkdocs.yml", tmp_path / "mkdocs.yml")
    old = read_record(H200)
    write_record(tmp_path, old)
    new_path = write_record(tmp_path, _slower(old, 0.6))
    assert main(["runbook", "compare", str(H200), str(new_path), "--root", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "CONCURRENCY=32  output tok/s" in out and "0.600" in out and "regression" in out
    assert "engine.version: 0.26.0 -> 0.26.1" in out
    assert "3 number(s) changed beyond the spread: 3 regression(s)" in out
    assert main(["runbook", "compare", "sm90-llama1b-shape-tp1", "--root", str(tmp_path)]) == 0
    assert "new: runbooks/sm90-llama1b-shape-tp1/20261130T200000Z-28eb0ac9.json" in (
        capsys.readouterr().out)
    assert main(["runbook", "history", "sm90-llama1b-shape-tp1", "--root", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "sm90-llama1b-shape-tp1 on 1 × H200" in out and "32: 5,184 (-40 %)" in out
    assert main(["runbook", "compare", "sm90-llama1b-shape-tp2", "--root", str(tmp_path)]) == 2
    assert "fewer than two successful runs" in capsys.readouterr().err


def test_last_two_keeps_to_the_same_hardware():
    old = read_record(H200)
    other = replace(old, run_id="x", started_at="2026-12-01T00:00:00Z",
                    host={**old.host, "gpus": [{"index": 0, "name": "NVIDIA RTX PRO 6000"}]})
    assert last_two([old, other]) is None
    third = replace(old, run_id="y", started_at="2026-12-02T00:00:00Z")
    assert last_two([old, other, third]) == (old, third)
    assert Point("1", "ok").repeats == 1
