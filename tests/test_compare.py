"""`wiki runbook compare|history`: ratios, spread-aware verdicts and provenance differences, on
the committed H200 record and copies of it with known changes."""

from __future__ import annotations

import os
import shutil
from dataclasses import replace
from pathlib import Path

from wikitools.cli import main
from wikitools.runbook.records.compare import (
    compare_records,
    compare_variants,
    last_two,
    regressions,
)
from wikitools.runbook.records.record import (
    Point,
    Sample,
    VariantResult,
    read_record,
    write_record,
)
from wikitools.runbook.records.stats import beyond_spread, spread_of
from wikitools.runbook.records.variance import point_variance
from wikitools.runbook.rendering.serving import with_spread

REPO = Path(__file__).resolve().parents[1]
H200 = REPO / "runbooks" / "sm90-llama1b-shape-tp1" / "20261130T094228Z-28eb0ac9.json"
# The same runbook after its client command changed (--num-prompts 64 -> 32 per slot), with the
# GPU state of the card it ran on.
H200_NEW = REPO / "runbooks" / "sm90-llama1b-shape-tp1" / "20261130T205232.863Z-27621aed-7eb3.json"
H200_TP2_FAILED = REPO / "runbooks" / "sm90-llama1b-shape-tp2" / "20261130T094812Z-a051ec07.json"
H200_TP2 = REPO / "runbooks" / "sm90-llama1b-shape-tp2" / "20261130T202502Z-539f14d1.json"
KV_VARIANTS = (REPO / "runbooks" / "sm90-llama1b-kv-variants"
               / "20261201T153245.030Z-31e021aa-f9cac659.json")
SGLANG = REPO / "runbooks" / "sm90-llama1b-shape-sglang-tp1" / "20261130T201945Z-8374705f.json"


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
    assert cmp.headline()[0] == "the engine changed: vllm 0.26.0 -> vllm 0.26.1"
    fields = {d.field: (d.old, d.new) for d in cmp.differences}
    assert fields["host.driver"] == ("580.159.04", "580.200.01")
    assert "engine.version" not in fields  # the headline says it
    assert "server.log_tail" not in fields and "blocks_hash" not in fields
    assert cmp.only_new == ("gpu state",)  # the old record has none: not "(none) -> X" lines


def test_small_changes_stay_within_the_spread():
    old = read_record(H200)
    assert not regressions(old, _slower(old, 0.97))
    assert [r.verdict for r in regressions(old, _slower(old, 1.3))][:1] == ["improvement"]
    assert regressions(None, old) == []


def test_beyond_spread_means_the_tables_plus_minus_ranges_do_not_overlap():
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
    assert out.split("\n\n")[1].startswith("the engine changed: vllm 0.26.0 -> vllm 0.26.1")
    assert out.rstrip().endswith("3 number(s) moved beyond the spread: regression 3")
    assert main(["runbook", "compare", "sm90-llama1b-shape-tp1", "--root", str(tmp_path)]) == 0
    assert "new: runbooks/sm90-llama1b-shape-tp1/20261130T200000Z-28eb0ac9.json" in (
        capsys.readouterr().out)
    assert main(["runbook", "history", "sm90-llama1b-shape-tp1", "--root", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "sm90-llama1b-shape-tp1 on 1 × H200" in out and "32: 5,184 (-40 %)" in out
    assert "throughput CONCURRENCY=32: within a run ±1.0 %" in out
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


# --------------------------------------------------------------------------- honest compare


def _on_card(record, uuid: str, factor: float, run_id: str, day: str = "2026-12-01"):
    """`record` measured again with the same commands and engine on the card `uuid`."""
    client = record.clients[0]
    points = tuple(replace(p, samples=tuple(replace(s, metrics={
        **s.metrics, "output_throughput": s.metrics["output_throughput"] * factor})
        for s in p.samples), metrics={**p.metrics, "output_throughput":
                                      p.metrics["output_throughput"] * factor})
        for p in client.points)
    state = {when: {**record.gpu_state[when], "gpus": [
        {**g, "uuid": uuid} for g in record.gpu_state[when]["gpus"]]}
        for when in ("before", "after")}
    return replace(record, run_id=run_id, started_at=f"{day}T10:00:00Z", gpu_state=state,
                   server={**record.server, "run_tag": run_id},
                   clients=(replace(client, points=points),))


def test_same_commands_and_engine_on_another_card_say_moved_and_name_the_card_first():
    old = read_record(H200_NEW)
    new = _on_card(old, "GPU-11111111-2222-3333-4444-555555555555", 1.2, "r2")
    cmp = compare_records(old, new)
    assert cmp.same_setup
    assert cmp.headline() == [
        "same commands and engine: a number that moved is a difference between the runs, not "
        "an improvement or a regression; likely cause: a different physical GPU "
        "(GPU-00a38a08-0441-86a6-6f1c-a90b1d3b8372 -> "
        "GPU-11111111-2222-3333-4444-555555555555)"]
    verdicts = {r.point: r.verdict for r in cmp.rows if r.metric == "output tok/s"}
    assert verdicts == {"CONCURRENCY=1": "moved up", "CONCURRENCY=8": "moved up",
                        "CONCURRENCY=32": "moved up"}
    assert not any(r.verdict in ("improvement", "regression") for r in cmp.rows)
    # per-run ids are not differences
    assert [d.field for d in cmp.differences] == []


def test_a_changed_client_command_is_the_headline_not_a_regression():
    cmp = compare_records(read_record(H200), read_record(H200_NEW))
    assert cmp.headline()[0] == ("the client throughput command changed: --num-prompts 64 -> "
                                 "--num-prompts '$(( ${CONCURRENCY:-8} * 32 ))'")
    assert {r.verdict for r in cmp.changed} == {"changed command"}
    assert cmp.verdict() == "4 number(s) moved beyond the spread: changed command 4"


def test_provenance_shows_only_real_differences():
    cmp = compare_records(read_record(H200), read_record(H200_NEW))
    assert [(d.field, d.old, d.new) for d in cmp.differences] == [
        ("server.env.NCCL_NVLS_ENABLE", None, "0"),
        ("server.env.NVSHMEM_DISABLE_NVLS", None, "1"),
        ("server.env.TORCH_SYMM_MEM_DISABLE_MULTICAST", None, "1"),
        ("server.env.VLLM_FLASHINFER_ALLREDUCE_BACKEND", None, "trtllm")]
    assert cmp.only_new == ("gpu state", "markers.compiled", "markers.cuda_graphs")


def test_nothing_comparable_is_never_an_all_clear(tmp_path, capsys):
    cmp = compare_records(read_record(H200_TP2_FAILED), read_record(H200_TP2))
    assert cmp.comparable_rows == () and cmp.changed == ()
    assert cmp.verdict() == ("nothing comparable: no point was measured by both runs (the old "
                             "run has no measured point of these clients)")
    assert main(["runbook", "compare", str(H200_TP2_FAILED), str(H200_TP2)]) == 0
    out = capsys.readouterr().out
    assert "no number" not in out and out.rstrip().endswith(cmp.verdict())


def test_points_of_an_early_schema_2_record_without_coordinates_are_compared():
    old = read_record(SGLANG)  # its points were written with empty coordinates
    assert [p.coords for p in old.clients[0].points] == [
        (("CONCURRENCY", "1"),), (("CONCURRENCY", "8"),), (("CONCURRENCY", "32"),)]
    cmp = compare_records(old, read_record(H200_NEW))
    tput = [r for r in cmp.rows if r.metric == "output tok/s"]
    assert [r.comparable for r in tput] == [True, True, True]
    assert cmp.headline()[-1] == "the engine changed: sglang 0.5.17 -> vllm 0.26.0"


def test_tables_and_compare_print_one_spread():
    sp = spread_of([490.0, 504.7, 520.0])
    assert with_spread(sp, "{:,.1f}") == "504.7 ±3.0\u202f%"
    assert f"±{sp.half_range * 100:.1f} %" == "±3.0 %"
    assert sp.band == (489.7, 519.7)


def test_compare_works_per_variant():
    base = read_record(H200_NEW)
    slow = _on_card(base, "GPU-00a38a08-0441-86a6-6f1c-a90b1d3b8372", 0.5, "r3")

    def variants(a, b):
        return replace(base, variants=(
            VariantResult((("KV", "auto"),), "ok", None, None, a.engine, a.server, a.markers,
                          a.timings, a.gpu_state, a.clients),
            VariantResult((("KV", "fp8"),), "ok", None, None, b.engine, b.server, b.markers,
                          b.timings, b.gpu_state, b.clients)))

    old, new = variants(base, base), variants(base, slow)
    auto, fp8 = compare_variants(old, new)
    assert (auto.variant, fp8.variant) == ("KV=auto", "KV=fp8")
    assert auto.changed == () and {r.verdict for r in fp8.changed} == {"moved down"}
    assert [r.verdict for r in regressions(old, new)] == ["moved down"] * 3


def test_history_tells_run_to_run_from_card_to_card_spread():
    base = read_record(H200_NEW)
    card_a, card_b = ("GPU-00a38a08-0441-86a6-6f1c-a90b1d3b8372",
                      "GPU-11111111-2222-3333-4444-555555555555")
    runs = [base, _on_card(base, card_a, 1.02, "a2", "2026-12-01"),
            _on_card(base, card_b, 1.30, "b1", "2026-12-02"),
            _on_card(base, card_b, 1.28, "b2", "2026-12-02")]
    by_point = {v.point: v for v in point_variance(runs)}
    one = by_point["CONCURRENCY=1"]
    assert (one.runs, one.cards, one.days) == (4, 2, 3)
    assert round(one.within_run * 100, 1) == 5.0  # each run's own repeats
    assert round(one.same_card * 100, 1) == 1.0  # 1.00 vs 1.02 on card A
    assert round(one.between_cards * 100, 1) == 12.2  # medians 1.01 vs 1.29


def test_run_closing_line_says_nothing_comparable_instead_of_an_all_clear(
        tmp_path, capsys, monkeypatch):
    from harness import FAKE_BIN, free_port, make_wiki

    monkeypatch.setenv("PATH", f"{FAKE_BIN}:{os.environ['PATH']}")
    root = make_wiki(tmp_path, free_port())
    args = ["runbook", "run", "fake-rb", "--root", str(root), "--yes", "--repeats", "1",
            "--no-warmup"]
    assert main([*args, "--sweep", "C=1"]) == 0
    capsys.readouterr()
    assert main([*args, "--sweep", "C=2"]) == 0
    out = capsys.readouterr().out
    tail = out[out.index("compared with"):]
    assert "nothing comparable: no point was measured by both runs" in tail
    assert "no number moved" not in out


def test_history_reads_each_variant_of_a_variant_record(tmp_path, capsys):
    shutil.copytree(REPO / "wiki", tmp_path / "wiki")
    shutil.copy(REPO / "wiki.yml", tmp_path / "wiki.yml")
    shutil.copy(REPO / "mkdocs.yml", tmp_path / "mkdocs.yml")
    rec = read_record(KV_VARIANTS)
    write_record(tmp_path, rec)

    def halved(c):
        if c.kind != "serving":
            return c
        return replace(c, points=tuple(replace(p, samples=tuple(
            replace(s, metrics={**s.metrics, "output_throughput":
                                s.metrics["output_throughput"] / 2}) for s in p.samples))
            for p in c.points))

    write_record(tmp_path, replace(rec, run_id="20261202T000000Z-31e021aa",
                                   started_at="2026-12-02T00:00:00Z", variants=tuple(
        replace(v, clients=tuple(halved(c) for c in v.clients)) for v in rec.variants)))
    assert main(["runbook", "history", "sm90-llama1b-kv-variants", "--root", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    runs = [ln for ln in lines if "output tok/s" in ln and "spread" not in ln]
    assert len(runs) == 8  # two runs of four variants
    first = next(ln for ln in runs if "[KV=auto,MEM=0.5]" in ln)
    assert "vLLM 0.26.0" in first and "card GPU-" in first and "run: 7,841" in first
    second = [ln for ln in runs if "[KV=fp8,MEM=0.3]" in ln][1]
    assert "20261202T000000Z-31e021aa" in second and "(-50 %)" in second
    assert "(not recorded)" not in "\n".join(runs) and "version not reported" not in (
        "\n".join(runs))
    assert any(ln.startswith("  spread of output tok/s [KV=fp8,MEM=0.5] over the 2 run(s)")
               for ln in lines)
