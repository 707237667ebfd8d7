"""Result parsers on real and realistic client outputs: numbers are copied exactly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from wikitools.runbook.engines import clients
from wikitools.runbook.engines.command import parse_client_command

FIX = Path(__file__).parent / "fixtures"
H200 = FIX / "gpu" / "h200-x1"


def test_vllm_bench_real_h200_output_copied_exactly():
    raw = json.loads((H200 / "bench.json").read_text())
    m = clients.parse_result("vllm-bench", H200 / "bench.json")
    for key in clients.SERVING_KEYS:
        if key in raw:
            assert m[key] == raw[key], key
            assert type(m[key]) is type(raw[key])
    assert m["completed"] == 16 and m["num_prompts"] == 16
    assert m["tool"] == "vllm-bench-serve"
    assert "latencies" not in m  # per-request arrays stay in the artifact


def test_vllm_bench_appended_file_reads_last_object(tmp_path):
    f = tmp_path / "r.json"
    f.write_text(json.dumps({"completed": 1}) + "\n" + json.dumps({"completed": 2}) + "\n")
    assert clients.parse_result("vllm-bench", f)["completed"] == 2


def test_sglang_last_line_and_renames():
    path = FIX / "clients" / "sglang-bench.jsonl"
    last = json.loads(path.read_text().splitlines()[-1])
    m = clients.parse_result("sglang-bench", path,
                             "python -m sglang.bench_serving --num-prompts 16")
    assert m["completed"] == 16  # the last run, not the first (8)
    assert m["total_token_throughput"] == last["total_throughput"]
    assert m["p99_e2el_ms"] == last["p99_e2e_latency_ms"]
    assert m["median_ttft_ms"] == last["median_ttft_ms"]
    assert m["num_prompts"] == 16 and m["failed"] == 0
    assert m["concurrency"] == last["concurrency"]
    assert m["tool"] == "sglang-bench-serving"


def test_sglang_num_prompts_from_the_points_environment():
    """SGLang's result has no prompt count: it is read from the command, with the variables the
    point ran with, and never by running anything."""
    jsonl = FIX / "clients" / "sglang-bench.jsonl"
    cmd = 'python -m sglang.bench_serving --num-prompts "${N:-16}"'
    assert clients.parse_result("sglang-bench", jsonl, cmd)["num_prompts"] == 16
    assert clients.parse_result("sglang-bench", jsonl, cmd, {"N": "20"})["num_prompts"] == 20
    arith = 'python -m sglang.bench_serving --num-prompts "$(( ${CONCURRENCY:-8} * 32 ))"'
    m = clients.parse_result("sglang-bench", jsonl, arith, {"CONCURRENCY": "32"})
    assert m["num_prompts"] == 1024 and m["failed"] == 1024 - m["completed"]
    for opaque in ('"$(cat n.txt)"', '"$(( $(nproc) * 2 ))"', '"${N:-x}"', "many"):
        m = clients.parse_result("sglang-bench", jsonl,
                                 f"python -m sglang.bench_serving --num-prompts {opaque}")
        assert "num_prompts" not in m and "failed" not in m, opaque


def test_count_value():
    env = {"C": "8", "EMPTY": ""}
    assert clients.count_value("64", env) == 64
    assert clients.count_value("$C", env) == 8
    assert clients.count_value("${EMPTY:-3}", env) == 3
    assert clients.count_value("$(( (${C:-1} + 2) * 4 / 2 ))", env) == 20
    assert clients.count_value("$(( 1 - 5 ))", env) is None
    assert clients.count_value("2**40", env) is None
    assert clients.count_value(None, env) is None


def test_lm_eval_results_file_and_folder(tmp_path):
    m = clients.parse_result("lm-eval", FIX / "clients" / "lm-eval-results.json")
    assert m["tasks"]["gsm8k"]["exact_match,strict-match"] == 0.75
    assert "alias" not in m["tasks"]["gsm8k"]
    assert m["n_shot"] == {"gsm8k": 5}
    assert m["n_samples"] == {"gsm8k": 128}
    sub = tmp_path / "out" / "model"
    sub.mkdir(parents=True)
    (sub / "results_2026-11-30T10-00-00.json").write_text(
        (FIX / "clients" / "lm-eval-results.json").read_text())
    assert clients.parse_result("lm-eval", tmp_path / "out")["tasks"] == m["tasks"]


def test_text_smoke_with_usage(tmp_path):
    f = tmp_path / "out.txt"
    f.write_text(json.dumps({"usage": {"prompt_tokens": 3, "completion_tokens": 5}}))
    m = clients.parse_result("text", f)
    assert m["usage"] == {"completion_tokens": 5, "prompt_tokens": 3}
    f.write_text("plain words\n")
    assert clients.parse_result("text", f) == {"tool": "text", "output_chars": 12}


@pytest.mark.parametrize(("content", "message"), [
    (None, "was not written"),
    ("", "is empty"),
    ("not json\n", "not JSON"),
    ("[1, 2]", "expected a JSON object"),
    ('{"foo": 1}', "no 'completed' key"),
])
def test_bad_results(tmp_path, content, message):
    f = tmp_path / "r.json"
    if content is not None:
        f.write_text(content)
    with pytest.raises(clients.ResultError, match=message):
        clients.parse_result("vllm-bench", f)


def test_parser_for_command():
    assert parse_client_command("vllm bench serve --model m").parser == "vllm-bench"
    assert parse_client_command("python3 -m sglang.bench_serving --x").parser == "sglang-bench"
    assert parse_client_command("lm_eval --model local-completions").parser == "lm-eval"
    assert parse_client_command("curl -s http://x").parser == "text"
    with pytest.raises(clients.ResultError, match="no parser"):
        clients.parse_result("nope", Path("x"))


ENGINES = FIX / "engines"


def test_real_sglang_client_output_has_no_infinity():
    m = clients.parse_result("sglang-bench", ENGINES / "sglang-bench-serving.jsonl",
                             "--num-prompts 16")
    raw = json.loads((ENGINES / "sglang-bench-serving.jsonl").read_text().splitlines()[-1])
    assert m["request_rate"] == "inf"  # the file says Infinity, which JSON cannot hold
    assert m["output_throughput"] == raw["output_throughput"]
    assert m["total_token_throughput"] == raw["total_throughput"]
    json.dumps(m, allow_nan=False)


def test_real_vllm_cpu_bench_output():
    raw = json.loads((ENGINES / "vllm-bench-serve.json").read_text())
    m = clients.parse_result("vllm-bench", ENGINES / "vllm-bench-serve.json")
    assert m["output_throughput"] == raw["output_throughput"]
    assert m["p99_itl_ms"] == raw["p99_itl_ms"]
    json.dumps(m, allow_nan=False)
