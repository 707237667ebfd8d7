"""The community's decode benchmark (`llm_decode_bench.py`) as a client of a runbook: found in a
client block, given `--output` by the plan, its JSON read into the record. The result files are
the community's own, kept under data/."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from harness import make_tree

from wikitools.pages.parse import parse_page
from wikitools.runbook.blocks.extract import extract_runbooks
from wikitools.runbook.engines import clients
from wikitools.runbook.engines.command import parse_client_command
from wikitools.runbook.execution.plan import PlanOverrides, make_plan
from wikitools.runbook.records.record import Sample

KEPT = Path(__file__).resolve().parent.parent / "data/voipmonitor-rtx6kpro/738985b"
QWEN = KEPT / "benchmarks/inference-throughput/vllm_awq_mtp.json"
GLM = KEPT / ("models/glm5.1/benchmarks/glm51-v2-full-68b3569f-20260514/glm-dcp4-mtp1/"
              "decode-matrix.json")
COMMAND = ("python3 /root/llm-inference-bench/llm_decode_bench.py --port 8000 --model m "
           "--concurrency 1,2,4 --contexts 0,16k --duration 30 --skip-prefill")


def test_the_command_is_recognised_as_the_decode_benchmark() -> None:
    cmd = parse_client_command(COMMAND)
    assert cmd.problems == ()
    assert (cmd.parser, cmd.port, cmd.model) == ("llm-decode-bench", 8000, "m")
    assert parse_client_command("python llm_decode_bench.py --port 5264").parser == \
        "llm-decode-bench"


def test_the_plan_asks_it_for_its_json_result() -> None:
    text = ("```{ .bash #r .runbook-server }\nvllm serve m --port 8000\n```\n\n"
            f"```{{ .bash .runbook-client for=r name=decode }}\n{COMMAND}\n```\n")
    runbooks, diags = extract_runbooks([parse_page(text, "p.md")], None)
    assert diags == []
    plan = make_plan(runbooks.get("r"), artifacts_dir="a",
                     overrides=PlanOverrides(repeats=1, warmup=False))
    (client,) = plan.variants[0].clients
    run = client.points[0].runs[0]
    assert (client.kind, client.parser) == ("serving", "llm-decode-bench")
    assert run.command == COMMAND + " --output a/decode.json"
    assert run.result_path == "a/decode.json"


def test_a_real_qwen_result_is_read_cell_by_cell_exactly() -> None:
    raw = json.loads(QWEN.read_text())
    m = clients.parse_result("llm-decode-bench", QWEN)
    assert m["tool"] == "llm-decode-bench"
    assert (m["engine"], m["model"], m["duration_per_test"]) == (
        "vllm", "Qwen3_5-397B-A17B-AWQ", 30.0)
    assert len(m["cells"]) == len(raw["results"]) == 40
    first = raw["results"][0]
    cell = m["cells"]["c1_ctx0"]
    assert cell["per_request_avg_tps"] == first["per_request_avg_tps"] == 147.2414917810489
    assert m["cells"]["c128_ctx131072"]["aggregate_tps"] == next(
        r["aggregate_tps"] for r in raw["results"]
        if (r["concurrency"], r["context_tokens"]) == (128, 131072))
    assert m["prefill"]["131072"] == {"tok_per_sec": 15260.0, "ttft_seconds": 8.619}
    assert m["completed"] == sum(r["num_completed"] for r in raw["results"])
    assert m["failed"] == 0
    Sample.from_dict({"metrics": m})  # raises when the record could not hold it


def test_a_real_glm_matrix_of_the_newer_version_reads_too() -> None:
    m = clients.parse_result("llm-decode-bench", GLM)
    assert (m["version"], m["dcp_size"], m["max_tokens"]) == ("0.4.17", 4, 2048)
    assert m["cells"]["c1_ctx0"]["aggregate_tps"] == pytest.approx(74.7, abs=0.05)
    assert m["prefill"] == {}  # prefill was skipped: its part holds no runs
    Sample.from_dict({"metrics": m})  # raises when the record could not hold it


@pytest.mark.parametrize(("content", "message"), [
    ("[]", "no 'metadata' object and 'results' list"),
    ('{"metadata": {}, "results": {}}', "no 'metadata' object and 'results' list"),
    ('{"metadata": {}, "results": [{"concurrency": "1", "context_tokens": 0}]}',
     r"results\[0\] has no integer 'concurrency'"),
    ("{", "not JSON"),
])
def test_a_file_that_is_not_its_result_is_a_result_error(tmp_path: Path, content: str,
                                                          message: str) -> None:
    f = tmp_path / "r.json"
    f.write_text(content)
    with pytest.raises(clients.ResultError, match=message):
        clients.parse_result("llm-decode-bench", f)


PAGE = """# P

```{ .bash #d .runbook-server engine=vllm gpus=4 }
vllm serve m --port 8000
```

```{ .bash .runbook-client for=d name=decode }
python3 llm_decode_bench.py --port 8000 --concurrency 1,128 --contexts 0,128k --duration 30
```

<!-- wiki:results runbook=d view=serving -->
<!-- wiki:end -->
"""


def _rendered_with(tmp_path: Path, *files: Path) -> str:
    from wikitools.pages.parse import read_page
    from wikitools.runbook.records.record import (
        ClientResult,
        Point,
        Record,
        Sample,
        Step,
        write_record,
    )
    from wikitools.runbook.rendering.render import render_pages

    make_tree(tmp_path, {"wiki/p.md": PAGE})
    page = read_page(tmp_path / "wiki/p.md", tmp_path)
    runbook = extract_runbooks([page], tmp_path)[0].get("d")
    samples = tuple(Sample("ok", clients.parse_result("llm-decode-bench", f)) for f in files)
    rec = Record(
        runbook="d", page="wiki/p.md", blocks_hash=runbook.blocks_hash,
        run_id=f"20261204T100000Z-{runbook.blocks_hash[7:15]}",
        started_at="2026-12-04T10:00:00Z", finished_at="2026-12-04T10:00:00Z", status="ok",
        host={"gpus": [{"index": i, "name": "NVIDIA RTX PRO 6000 Blackwell Server Edition",
                        "compute_capability": "12.0"} for i in range(4)], "gpu_count": 4,
              "driver": "580.95.05", "cuda": "13.0", "topology": "none", "cpu_only": False},
        engine={"name": "vllm", "version": "0.17.0", "image": None, "image_digest": None},
        server={"command": "vllm serve m --port 8000", "env": {}, "port": 8000,
                "log_tail": []},
        steps=(Step("ready", "ok", 1.0),),
        clients=(ClientResult("decode", "serving", "python3 llm_decode_bench.py", None, (
            Point(None, "ok", dict(samples[0].metrics), samples=samples),), repeats=len(files)),),
    )
    write_record(tmp_path, rec)
    changes, diags = render_pages([page], tmp_path)
    assert [d for d in diags if d.severity.name == "ERROR"] == []
    return changes[0].new


def test_a_recorded_run_shows_the_matrix_the_community_files_show(tmp_path: Path) -> None:
    body = _rendered_with(tmp_path, QWEN)
    raw = json.loads(QWEN.read_text())
    at = {(r["context_tokens"], r["concurrency"]): r["aggregate_tps"] for r in raw["results"]}
    assert "| context \\\\ concurrency | C=1 | C=2 | C=4 |" in body
    assert f"| 0 | {at[(0, 1)]:,.1f} | {at[(0, 2)]:,.1f} |" in body
    assert f"| 131,072 | {at[(131072, 1)]:,.1f} |" in body
    assert f"{at[(131072, 128)]:,.1f} |" in body  # the 646 tok/s collapse, cell for cell


def test_repeats_show_their_median_and_range(tmp_path: Path) -> None:
    other = KEPT / "benchmarks/inference-throughput/vllm_awq_nomtp.json"
    body = _rendered_with(tmp_path, QWEN, QWEN, other)
    raw = json.loads(QWEN.read_text())
    first = raw["results"][0]["aggregate_tps"]  # two of three runs: the median
    assert f"| 0 | {first:,.1f} ±" in body
