"""Runbook extraction from pages: blocks, defaults, hash, located RB diagnostics, commands."""

from __future__ import annotations

from pathlib import Path

import pytest

from wikitools.cli import main
from wikitools.core.errors import UsageError
from wikitools.pages.parse import parse_page, read_page
from wikitools.runbook.blocks.extract import extract_runbooks, load_runbooks
from wikitools.runbook.blocks.scan import scan_pages

FIXTURES = Path(__file__).parent / "fixtures" / "runbook-pages"
GOOD = FIXTURES / "good"
BAD = FIXTURES / "bad"


def pages_of(root: Path) -> list:
    return [read_page(p, root) for p in sorted(root.rglob("*.md"))]


def test_good_pages_give_two_runbooks_without_diagnostics() -> None:
    runbooks, diags = extract_runbooks(pages_of(GOOD), None)
    assert diags == []
    assert runbooks.ids() == ["gptoss-120b-tp2", "qwen35-397b-nvfp4-tp4"]
    rb = runbooks.get("gptoss-120b-tp2")
    assert rb.page == "wiki/models/gpt-oss-120b.md"
    assert rb.ref == "wiki/models/gpt-oss-120b.md#gptoss-120b-tp2"
    s = rb.server
    assert (s.line, s.col, s.engine, s.port, s.ready_timeout, s.stop_timeout) == (
        10, 1, "vllm", 8000, 900.0, 20.0)
    assert (s.requirements.gpus, s.requirements.arch, s.requirements.min_mem_gib) == (
        2, ("sm120",), 90.0)
    assert s.extra_env == (("HF_TOKEN", "hf_not_a_real_token"), ("VLLM_LOGGING_LEVEL", "INFO"))
    assert [(c.name, c.kind, c.sweep.vars[0] if c.sweep else None,
             c.sweep.values(c.sweep.vars[0]) if c.sweep else (), c.timeout)
            for c in rb.clients] == [
        ("throughput", "serving", "CONCURRENCY", ("1", "8", "32"), 1800.0),
        ("client2", "smoke", None, (), 1800.0),
    ]
    sg = runbooks.get("wiki/models/qwen35-397b.md#qwen35-397b-nvfp4-tp4").server
    assert (sg.engine, sg.port, sg.command.image) == ("sglang", 30000, "voipmonitor/sglang:cu130")


def test_blocks_hash_covers_content_and_attributes_only() -> None:
    text = (GOOD / "wiki/models/gpt-oss-120b.md").read_text()
    base = extract_runbooks([parse_page(text, "p.md")], None)[0].get("gptoss-120b-tp2")
    assert base.blocks_hash.startswith("sha256:") and len(base.blocks_hash) == 71
    assert base.short_hash == base.blocks_hash[7:15]
    prose = text.replace("Measure throughput:", "Measure the throughput:")
    assert extract_runbooks([parse_page(prose, "p.md")], None)[0].get(
        "gptoss-120b-tp2").blocks_hash == base.blocks_hash
    for old, new in (("--num-prompts 200", "--num-prompts 100"), ("ready_timeout=900",
                                                                  "ready_timeout=600"),
                     ("curl -fsS", "curl -sS")):
        changed = extract_runbooks([parse_page(text.replace(old, new), "p.md")], None)[0]
        assert changed.get("gptoss-120b-tp2").blocks_hash != base.blocks_hash, old


EXPECTED_BAD = [
    "wiki/errors.md:7:33: RB004 error: bad value for gpus: 'abc' (expected a whole number)",
    "wiki/errors.md:11:12: RB001 error: duplicate runbook id 'dup' (first defined at "
    "wiki/errors.md:7)",
    "wiki/errors.md:15:12: RB005 error: runbook-server block without an #id (add "
    "`#my-runbook-id` to "
    "the attribute list)",
    "wiki/errors.md:19:38: RB003 error: unknown attribute 'gpu' on a runbook-server block; "
    "did you mean "
    "'gpus'?",
    "wiki/errors.md:20:1: RB007 error: server command not understood: docker compose up needs "
    "its compose file (compose.yaml) on the page, in a block marked "
    "`yaml { .runbook-file for=ID path=… }`",
    "wiki/errors.md:23:38: RB010 error: engine=sglang but the command starts vllm (vllm serve)",
    "wiki/errors.md:27:28: RB002 error: for=mismatc names no runbook; did you mean 'mismatch'?",
    "wiki/errors.md:35:41: RB008 error: duplicate client name 'a' in runbook 'mismatch' (first at "
    "wiki/errors.md:31)",
    "wiki/errors.md:40:1: RB007 error: client command not understood: no client command "
    "found (vllm "
    "bench serve, python -m sglang.bench_serving, lm_eval, curl, wiki kld capture, wiki probe, "
    "llm_decode_bench.py); name its kind with kind=serving|quality|smoke|kld|probe",
    "wiki/errors.md:43:4: RB006 error: malformed attribute list: cannot read attribute at "
    "column 36: "
    "'engine=\"vllm '",
    "wiki/errors.md:47:43: RB004 error: bad value for ready_timeout: '0' (expected a number "
    "above 0)",
    "wiki/errors.md:47:59: RB004 error: bad value for port: '70000' (expected 1-65535)",
    "wiki/errors.md:47:70: RB004 error: bad value for env: 'B' is not NAME=VALUE",
    "wiki/errors.md:51:36: RB004 error: bad value for kind: 'servng' (expected serving, quality, "
    "smoke, kld or probe); did you mean 'serving'?",
    "wiki/errors.md:51:59: RB004 error: bad value for sweep: C=1 is given twice (it would run "
    "the same point twice)",
    "wiki/errors.md:51:62: RB004 error: bad value for timeout: '-1' (expected a number above 0)",
]


def test_bad_page_diagnostics_are_located_exactly() -> None:
    runbooks, diags = extract_runbooks(pages_of(BAD), None)
    assert [d.format() for d in sorted(diags)] == EXPECTED_BAD
    assert len(runbooks) == 0
    # every column points at the attribute it names
    line = (BAD / "wiki/errors.md").read_text().split("\n")[46]
    assert line[42:].startswith("ready_timeout=0")
    assert line[58:].startswith("port=70000")


def test_client_defaults_and_unknown_class() -> None:
    page = parse_page(
        "```{ .bash #r1 .runbook-server }\nvllm serve m\n```\n\n"
        "```{ .bash .runbook-client for=r1 }\nvllm bench serve --model m\n```\n\n"
        "```{ .bash .runbook-client for=r1 kind=smoke }\n./check.sh\n```\n\n"
        "```{ .bash .runbook-serve #r2 }\nvllm serve m\n```\n\n"
        "```{ .bash .runbook-client for=r2 }\ncurl http://x\n```\n", "p.md")
    runbooks, diags = extract_runbooks([page], None)
    assert [d.format() for d in diags] == [
        "p.md:13:12: RB003 error: unknown runbook class '.runbook-serve'; did you mean "
        "'.runbook-server'?"]
    rb = runbooks.get("r1")
    assert [(c.name, c.kind, c.command.parser) for c in rb.clients] == [
        ("client1", "serving", "vllm-bench"), ("client2", "smoke", "text")]
    assert (rb.server.port, rb.server.requirements.gpus) == (8000, None)


def test_plain_and_non_runbook_brace_blocks_are_ignored() -> None:
    page = parse_page("```bash\nvllm serve m\n```\n\n```{ .python #x }\nprint(1)\n```\n", "p.md")
    assert extract_runbooks([page], None) == (extract_runbooks([], None)[0], [])


def test_duplicate_ids_across_pages() -> None:
    a = parse_page("```{ .bash #same .runbook-server }\nvllm serve m\n```\n", "a.md")
    b = parse_page("x\n\n```{ .bash #same .runbook-server }\nvllm serve m\n```\n", "b.md")
    runbooks, diags = extract_runbooks([b, a], None)
    assert [d.format() for d in diags] == [
        "b.md:3:12: RB001 error: duplicate runbook id 'same' (first defined at a.md:1)"]
    assert [r.page for r in runbooks] == ["a.md"]
    with pytest.raises(UsageError, match=r"'same' is defined 2 times: a\.md:1 and b\.md:3"):
        runbooks.get("same")  # ambiguous until the copy is renamed: plan and run refuse


def test_lookup_errors() -> None:
    runbooks, _ = extract_runbooks(pages_of(GOOD), None)
    with pytest.raises(UsageError, match="unknown runbook 'gptoss-120b'; did you mean "
                       "'gptoss-120b-tp2'"):
        runbooks.get("gptoss-120b")
    with pytest.raises(UsageError, match=r"is on wiki/models/gpt-oss-120b\.md, not other\.md"):
        runbooks.get("other.md#gptoss-120b-tp2")
    assert runbooks.get("models/gpt-oss-120b.md#gptoss-120b-tp2").id == "gptoss-120b-tp2"
    with pytest.raises(UsageError, match="no client 'thruput'; did you mean 'throughput'"):
        runbooks.get("gptoss-120b-tp2").client("thruput")
    broken, _ = extract_runbooks(pages_of(BAD), None)
    with pytest.raises(UsageError, match=r"runbook 'mismatch' \(wiki/errors.md:23\) has errors"):
        broken.get("mismatch")


def test_scan_suggests_brace_form() -> None:
    runbooks, _ = extract_runbooks(pages_of(GOOD), None)
    found = [s.format() for s in scan_pages(pages_of(GOOD), runbooks.ids())]
    assert found == [
        "wiki/models/gpt-oss-120b.md:31:1: server (vllm, openai/gpt-oss-20b); mark it: "
        "```bash { #gpt-oss-20b-tp1 .runbook-server engine=vllm gpus=1 }",
        "wiki/models/qwen35-397b.md:24:1: client (python -m sglang.bench_serving); mark it: "
        "```bash { .runbook-client for=qwen35-397b-nvfp4-tp4 kind=serving }",
    ]


def test_scan_suggested_ids_are_unique_and_include_parallel_sizes() -> None:
    page = parse_page("```bash\ndocker run img vllm serve org/Big-Model --tp 4 --pp 2\n```\n\n"
                      "```\nvllm serve org/big-model -tp 4 -pp 2\n```\n\n"
                      "```text\nvllm serve not/shell\n```\n", "p.md")
    assert [s.fence for s in scan_pages([page])] == [
        "```bash { #big-model-tp4-pp2 .runbook-server engine=vllm gpus=8 }",
        "```bash { #big-model-tp4-pp2-2 .runbook-server engine=vllm gpus=8 }",
    ]


# --------------------------------------------------------------------------- commands


def test_cli_list(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["runbook", "list", "--root", str(GOOD)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == [
        "RUNBOOK                                           ENGINE  MODEL                     "
        "          GPUS    ARCH   LAST RUN",
        "wiki/models/gpt-oss-120b.md#gptoss-120b-tp2       vllm    openai/gpt-oss-120b       "
        "          2 GPUs  sm120  never run",
        "wiki/models/qwen35-397b.md#qwen35-397b-nvfp4-tp4  sglang  "
        "lukealonso/Qwen3.5-397B-A17B-NVFP4  4 GPUs  sm120  never run",
    ]


def test_list_has_a_header_and_reports_an_unreadable_record(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    import shutil

    from wikitools.runbook.records.record import Record, write_record

    root = tmp_path / "w"
    shutil.copytree(GOOD, root)
    for started, status in (("2026-11-30T10:00:00Z", "ok"), ("2026-12-02T08:00:00Z", "failed")):
        stamp = started.replace("-", "").replace(":", "")
        write_record(root, Record(runbook="gptoss-120b-tp2", page="p.md", blocks_hash="sha256:0",
                                  run_id=f"{stamp}-00000000", started_at=started,
                                  finished_at=started, status=status))
    (root / "runbooks" / "gptoss-120b-tp2" / "junk.json").write_text("{not json")
    assert main(["runbook", "list", "--root", str(root)]) == 1
    out, err = capsys.readouterr()
    header, first = out.splitlines()[:2]
    assert header.split() == ["RUNBOOK", "ENGINE", "MODEL", "GPUS", "ARCH", "LAST", "RUN"]
    assert first.endswith("2026-12-02 (failed), 1 unreadable record")
    assert ("runbooks/gptoss-120b-tp2/junk.json:1:2: not valid JSON: Expecting property name "
            "enclosed in double quotes (unreadable record)") in err


def test_cli_list_reports_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["runbook", "list", "--root", str(BAD)]) == 1
    err = capsys.readouterr().err
    assert "wiki/errors.md:11:12: RB001 error: duplicate runbook id 'dup'" in err
    assert "16 errors, 0 warnings in 1 file" in err


def test_cli_show(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["runbook", "show", "qwen35-397b-nvfp4-tp4", "--root", str(GOOD)]) == 0
    out = capsys.readouterr().out
    assert "    launcher:                python3 -m sglang.launch_server\n" in out
    assert "    wrapped in:              docker run\n" in out
    assert '    speculative:             {"algorithm": "NEXTN", "num_steps": 4}\n' in out
    assert "  requires: 4 GPUs, arch sm120; ready within 900 s, stop grace 20 s\n" in out
    assert main(["runbook", "show", "gptoss-120b-tp2", "--root", str(GOOD)]) == 0
    out = capsys.readouterr().out
    assert "run-only env:            HF_TOKEN=*** VLLM_LOGGING_LEVEL=INFO" in out
    assert "hf_not_a_real_token" not in out.split("understood:")[1]


def test_cli_unknown_runbook_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["runbook", "show", "gptoss", "--root", str(GOOD)]) == 2
    assert capsys.readouterr().err == (
        "wiki: error: unknown runbook 'gptoss'; did you mean 'gptoss-120b-tp2'?\n")


def test_cli_scan_paths(capsys: pytest.CaptureFixture[str]) -> None:
    page = GOOD / "wiki/models/qwen35-397b.md"
    assert main(["runbook", "scan", "--root", str(GOOD), str(page)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == ["wiki/models/qwen35-397b.md:24:1: client (python -m sglang.bench_serving); "
                   "mark it: ```bash { .runbook-client for=qwen35-397b-nvfp4-tp4 kind=serving }"]


def test_load_runbooks_uses_config(tmp_path: Path) -> None:
    runbooks, diags, pages = load_runbooks(GOOD)
    assert len(runbooks) == 2 and diags == [] and len(pages) == 2


GRID_PAGE = """# Grid

```{ .bash #g .runbook-server engine=vllm gpus=1 }
vllm serve m
```

```{ .bash .runbook-client for=g name=grid sweep="CONCURRENCY=1,8;INPUT_LEN=512,2048" }
vllm bench serve --model m --random-input-len "${INPUT_LEN:-512}" \
  --max-concurrency "${CONCURRENCY:-8}"
```

```{ .bash .runbook-client for=g name=plain sweep="C=1,2" }
vllm bench serve --model m --max-concurrency "${C:-1}"
```

```{ .bash .runbook-client for=g name=bad sweep="A=1;B=2;C=3" }
vllm bench serve --model m
```

```{ .bash .runbook-client for=g name=twice sweep="A=1;A=2" }
vllm bench serve --model m
```
"""


def test_grid_sweep_of_two_variables() -> None:
    page = parse_page(GRID_PAGE, "wiki/grid.md")
    runbooks, diags = extract_runbooks([page], None)
    grid = runbooks.get("g").client("grid")
    assert grid.sweep.axes == (("CONCURRENCY", ("1", "8")), ("INPUT_LEN", ("512", "2048")))
    assert grid.sweep.vars == ("CONCURRENCY", "INPUT_LEN")
    assert grid.sweep.points() == (
        (("CONCURRENCY", "1"), ("INPUT_LEN", "512")), (("CONCURRENCY", "1"), ("INPUT_LEN", "2048")),
        (("CONCURRENCY", "8"), ("INPUT_LEN", "512")), (("CONCURRENCY", "8"), ("INPUT_LEN", "2048")),
    )
    plain = runbooks.get("g").client("plain")
    assert plain.sweep.points() == ((("C", "1"),), (("C", "2"),))
    assert [d.message for d in diags] == [
        "bad value for sweep: 3 variables (at most 2)",
        "bad value for sweep: A is named twice",
    ]


def test_min_duration_is_the_shortest_steady_run_of_a_serving_client() -> None:
    page = parse_page(
        "```bash { #r1 .runbook-server }\nvllm serve m\n```\n\n"
        "```bash { .runbook-client for=r1 name=long min_duration=30 }\n"
        "vllm bench serve --model m\n```\n\n"
        "```bash { .runbook-client for=r1 name=plain }\nvllm bench serve --model m\n```\n\n"
        "```bash { .runbook-client for=r1 name=k kind=kld min_duration=5 }\n"
        "wiki kld capture --seed 0\n```\n\n"
        "```bash { .runbook-client for=r1 name=z min_duration=0 }\n"
        "vllm bench serve --model m\n```\n", "p.md")
    runbooks, diags = extract_runbooks([page], None)
    rb = runbooks.get("r1")
    assert rb.client("long").min_duration == 30.0 and rb.client("plain").min_duration is None
    assert [d.format() for d in diags] == [
        "p.md:13:50: RB004 error: min_duration= belongs to serving clients",
        "p.md:17:41: RB004 error: bad value for min_duration: '0' (expected a number above 0)"]
