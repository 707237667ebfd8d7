"""The community's decode benchmark (`llm_decode_bench.py`) as a client of a runbook: found in a
client block, given `--output` by the plan, its JSON read into the record. The result files are
the community's own, kept under data/."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from wikitools.pages import parse_page
from wikitools.runbook.blocks.extract import extract_runbooks
from wikitools.runbook.engines import clients
from wikitools.runbook.engines.command import parse_client_command
from wikitools.runbook.execution.plan import PlanOverrides, make_plan
from wikitools.runbook.records.schema import METRICS, check_shape

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
    check_shape(m, METRICS, "metrics")  # raises when the record could not hold it


def test_a_real_glm_matrix_of_the_newer_version_reads_too() -> None:
    m = clients.parse_result("llm-decode-bench", GLM)
    assert (m["version"], m["dcp_size"], m["max_tokens"]) == ("0.4.17", 4, 2048)
    assert m["cells"]["c1_ctx0"]["aggregate_tps"] == pytest.approx(74.7, abs=0.05)
    assert m["prefill"] == {}  # prefill was skipped: its part holds no runs
    check_shape(m, METRICS, "metrics")  # raises when the record could not hold it


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
