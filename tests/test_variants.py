"""Server variants: `variants="A=1,2;B=x,y"` on a server block starts one server per variant,
runs the page's clients against it and stops it before the next; one record holds them all."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from harness import free_port, make_tree

from wikitools.cli import main
from wikitools.pages.parse import parse_page
from wikitools.runbook.blocks.extract import extract_runbooks
from wikitools.runbook.blocks.sweep import parse_sweep
from wikitools.runbook.execution.host import port_free
from wikitools.runbook.execution.plan import PlanOverrides, make_plan
from wikitools.runbook.records.record import Record, read_record
from wikitools.runbook.rendering import receipts

FAKE_BIN = Path(__file__).parent / "fakes" / "bin"

PAGE = """---
title: Fake variants
---

# Fake variants

```{{ .bash #fake-var .runbook-server engine=vllm gpus=0 stop_timeout=3 variants="{variants}" }}
vllm serve fake-model --port {port} --kv-tokens "${{KV:-100}}"{extra}
```

```{{ .bash .runbook-client for=fake-var name=bench sweep="C=1,2" timeout=30 }}
vllm bench serve --model fake-model --num-prompts 4 --max-concurrency "${{C:-1}}"
```

<!-- wiki:results runbook=fake-var view=serving -->
<!-- wiki:end -->
"""


def make_wiki(root: Path, variants: str = "KV=1000,2000", extra: str = "",
              port: int | None = None) -> Path:
    return make_tree(root, {"wiki/v.md": PAGE.format(variants=variants, port=port or free_port(),
                                                     extra=extra)})


@pytest.fixture
def fake_path(monkeypatch):
    monkeypatch.setenv("PATH", f"{FAKE_BIN}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("FAKE_SERVER_ARGS", raising=False)
    monkeypatch.delenv("FAKE_BENCH_ARGS", raising=False)


def runbook(text: str):
    runbooks, diags = extract_runbooks([parse_page(text, "wiki/v.md")], None)
    return runbooks, diags


def test_a_variant_variable_the_command_does_not_read_is_a_located_error() -> None:
    page = PAGE.format(variants="KV=1,2;DT=a,b", port=18000, extra="")
    _runbooks, diags = runbook(page)
    (d,) = diags
    assert (d.line, d.code) == (7, "RB004")
    assert d.message == ("bad value for variants: the server command does not read $DT (write "
                         "${DT:-default} where the setting goes)")


def test_variants_plan_one_server_per_grid_point_with_its_own_folder_and_env() -> None:
    runbooks, diags = runbook(PAGE.format(variants="KV=1,2", port=18000,
                                          extra=' --delay "${D:-0}"').replace(
        'variants="KV=1,2"', 'variants="KV=1,2;D=0,1"'))
    assert diags == []
    plan = make_plan(runbooks.get("fake-var"), artifacts_dir="a",
                     overrides=PlanOverrides(repeats=1, warmup=False))
    assert plan.variant_vars == ("KV", "D")
    assert [(v.name, v.artifacts_dir, v.server.env["KV"], v.server.env["D"])
            for v in plan.variants] == [
        ("KV=1,D=0", "a/KV_1_D_0", "1", "0"), ("KV=1,D=1", "a/KV_1_D_1", "1", "1"),
        ("KV=2,D=0", "a/KV_2_D_0", "2", "0"), ("KV=2,D=1", "a/KV_2_D_1", "2", "1")]
    v = plan.variants[3]
    assert v.server.log_path == "a/KV_2_D_1/server.log"
    run = v.clients[0].points[1].runs[0]
    assert (run.label, run.result_path) == ("client:bench[2]", "a/KV_2_D_1/bench-2.json")
    assert v.clients[0].points[1].env == {"KV": "2", "D": "1", "C": "2"}
    assert v.step("start") == "[KV=2,D=1] start"
    only = make_plan(runbooks.get("fake-var"), artifacts_dir="a",
                     overrides=PlanOverrides(variants=parse_sweep("KV=2;D=1")))
    assert [x.name for x in only.variants] == ["KV=2,D=1"]


def test_plan_shows_every_variants_exact_command_first(tmp_path: Path, capsys) -> None:
    root = make_wiki(tmp_path, port=18077)
    assert main(["runbook", "plan", "fake-var", "--root", str(root)]) == 0
    out = capsys.readouterr().out
    head = out.split("\ndetails:\n")[0].splitlines()
    assert head[:3] == ["runbook wiki/v.md#fake-var", "verdict: ok", (
        "runs: 2 server variants one after the other, each started, measured and stopped "
        "(port free, GPU memory back) before the next; 16 client runs in all")]
    assert head[3:7] == [
        "server, variant KV=1000:",
        '    vllm serve fake-model --port 18077 --kv-tokens "1000"',
        "server, variant KV=2000:",
        '    vllm serve fake-model --port 18077 --kv-tokens "2000"']
    assert main(["runbook", "plan", "fake-var", "--root", str(root), "--variant",
                 "KV=2000"]) == 0
    out = capsys.readouterr().out
    assert "variant KV=2000" in out and "variant KV=1000" not in out
    assert main(["runbook", "plan", "fake-var", "--root", str(root), "--variant",
                 "KV=3000"]) == 2
    assert "--variant KV=3000: KV=3000 is not one of KV=1000,2000" in capsys.readouterr().err


def test_each_variant_runs_its_own_server_and_one_record_holds_them_all(
        tmp_path: Path, capsys, fake_path) -> None:
    port = free_port()
    root = make_wiki(tmp_path, port=port)
    assert main(["runbook", "run", "fake-var", "--root", str(root), "--yes", "--repeats", "1",
                 "--no-warmup"]) == 0, capsys.readouterr()
    out = capsys.readouterr().out
    assert "  variant KV=1000: ok" in out and "  variant KV=2000: ok" in out
    (path,) = (root / "runbooks" / "fake-var").glob("*.json")
    data = json.loads(path.read_text())
    assert data["schema_version"] == 3 and "clients" not in data and "engine" not in data
    assert [v["coords"] for v in data["variants"]] == [[["KV", "1000"]], [["KV", "2000"]]]
    # each variant's own engine facts: the KV cache size its server logged
    assert [v["markers"]["kv_cache_tokens"] for v in data["variants"]] == [1000, 2000]
    assert [v["server"]["env"]["KV"] for v in data["variants"]] == ["1000", "2000"]
    assert [[p["status"] for p in v["clients"][0]["points"]] for v in data["variants"]] == [
        ["ok", "ok"], ["ok", "ok"]]
    # the first server stopped (teardown checked) before the second started
    names = [s["name"] for s in data["steps"]]
    assert names.index("[KV=1000] teardown") < names.index("[KV=2000] start")
    assert names[0] == "preflight" and names[-1] == "[KV=2000] teardown"
    assert all(s["status"] == "ok" for s in data["steps"])
    assert port_free(port, "127.0.0.1")
    # the page: one row per variant and point, a matrix of variant by swept variable, and
    # each variant's own server facts
    text = (root / "wiki" / "v.md").read_text()
    assert "| KV \\\\ C | 1 | 2 |" in text and "| 2000 | 41.0 too short | 82.0 too short |" in text
    assert "\n| 1000 | 2 | 20.25 | 82.0 |" in text
    assert "- `KV=1000`: vLLM 0.0.0+fake; " in text and "KV cache 2,000 tokens" in text
    record = read_record(path)
    assert record.variant_vars == ("KV",)
    assert [v.name for v in record.each_variant()] == ["KV=1000", "KV=2000"]
    assert Record.from_dict(record.to_dict()) == record
    # one set of compile and kernel caches for the run, new with it: the first start finds
    # them empty, the second finds what the first compiled
    caches = {c["name"]: c for c in data["receipt"]["caches"]}
    compiled = caches["vllm torch.compile"]
    assert compiled["shared"] is True and compiled["warm"] is False
    assert compiled["path"] == (root / data["artifacts_dir"] / "caches/vllm_torch.compile"
                                / "torch_compile_cache").resolve().as_posix()
    assert [v["markers"]["caches_warm_at_start"]["vllm torch.compile"]
            for v in data["variants"]] == [False, True]
    assert not any(data["variants"][0]["markers"]["caches_warm_at_start"].values())
    lines = receipts.start_lines(record)
    assert lines[0].startswith("- start of `KV=1000`: cold (every cache empty), ready in ")
    assert lines[1].startswith("- start of `KV=2000`: warm (vllm torch.compile), ready in ")


def test_a_failed_variant_is_recorded_and_the_next_still_runs(tmp_path: Path, capsys,
                                                               fake_path) -> None:
    root = make_wiki(tmp_path, variants="CODE=0,4",
                     extra=' $([ "$CODE" = 0 ] || echo --exit-code "$CODE")')
    assert main(["runbook", "run", "fake-var", "--root", str(root), "--yes", "--repeats", "1",
                 "--no-warmup"]) == 1
    (path,) = (root / "runbooks" / "fake-var").glob("*.json")
    record = read_record(path)
    ok, bad = record.each_variant()
    assert (ok.name, ok.status) == ("CODE=0", "ok")
    assert (bad.name, bad.status, bad.failed_step) == ("CODE=4", "failed", "[CODE=4] ready")
    assert "server exited with code 4" in (bad.message or "")
    assert [p.status for p in bad.clients[0].points] == ["skipped", "skipped"]
    assert (record.status, record.failed_step) == ("failed", "[CODE=4] ready")


def test_a_record_without_variants_is_still_schema_2(tmp_path: Path, capsys,
                                                     fake_path) -> None:
    root = make_wiki(tmp_path)
    page = root / "wiki" / "v.md"
    page.write_text(page.read_text().replace(' variants="KV=1000,2000"', ""))
    assert main(["runbook", "run", "fake-var", "--root", str(root), "--yes", "--repeats", "1",
                 "--no-warmup", "--sweep", "C=1"]) == 0, capsys.readouterr()
    (path,) = (root / "runbooks" / "fake-var").glob("*.json")
    data = json.loads(path.read_text())
    assert data["schema_version"] == 2 and "variants" not in data
    assert data["clients"][0]["points"][0]["status"] == "ok"
    (only,) = read_record(path).each_variant()
    assert only.coords == () and only.clients[0].name == "bench"


def test_quality_rows_name_their_variant() -> None:
    from wikitools.runbook.records.record import ClientResult, Point, VariantResult
    from wikitools.runbook.rendering.views import quality_table

    def variant(kv: str, acc: float) -> VariantResult:
        point = Point(None, "ok", {"tasks": {"gsm8k": {"exact_match,strict": acc,
                                                        "exact_match_stderr,strict": 0.01}}})
        return VariantResult((("KV", kv),), "ok", clients=(
            ClientResult("q", "quality", "lm_eval", None, (point,)),))

    record = Record(runbook="r", page="wiki/v.md", blocks_hash="sha256:00", run_id="x",
                    started_at="2026-12-01T00:00:00Z", finished_at="2026-12-01T00:00:00Z",
                    status="ok", variants=(variant("auto", 0.5), variant("fp8", 0.25)))
    assert quality_table(record, "q")["rows"] == [
        ["KV=auto: gsm8k", "exact_match", "strict", "0.5000", "0.0100"],
        ["KV=fp8: gsm8k", "exact_match", "strict", "0.2500", "0.0100"]]
