"""Shell-correct understanding of launch and client commands (shapes from the community wiki)."""

from __future__ import annotations

import pytest

from wikitools.runbook.engines.command import (
    parse_client_command,
    parse_flags,
    parse_server_command,
)
from wikitools.runbook.engines.launcher import append_args, insertion_point
from wikitools.runbook.engines.shell import (
    ShellSyntaxError,
    env_assignments,
    expand,
    split_commands,
    tokenize,
)

# --------------------------------------------------------------------------- shell words


def argvs(text: str) -> list[list[str]]:
    return [c.argv for c in split_commands(text)]


def test_quotes_escapes_and_continuations() -> None:
    text = "vllm serve 'a b' \"c \\\"d\\\" $X\" e\\ f \\\n  --x=1"
    assert argvs(text) == [["vllm", "serve", "a b", 'c "d" $X', "e f", "--x=1"]]


def test_comments_and_separators() -> None:
    text = "# start\nexport A=1 # trailing\nB=2 cmd one; cmd two && cmd three || four | five &\n"
    assert argvs(text) == [["export", "A=1"], ["B=2", "cmd", "one"], ["cmd", "two"],
                           ["cmd", "three"], ["four"], ["five"]]


def test_hash_inside_word_is_not_a_comment() -> None:
    assert argvs("curl http://h/x#frag a#b") == [["curl", "http://h/x#frag", "a#b"]]


def test_redirections_are_dropped() -> None:
    assert argvs("vllm serve m > log.txt 2>&1 &> all.log < in") == [["vllm", "serve", "m"]]


def test_heredoc_body_is_skipped() -> None:
    text = "cat > /tmp/x.yaml <<'EOF'\nvllm serve not-this\nEOF\nvllm serve this\n"
    assert argvs(text) == [["cat"], ["vllm", "serve", "this"]]


def test_command_substitution_and_arrays_stay_one_word() -> None:
    text = 'SPEC_ARGS=(--speculative-config "$X") ; echo $(date +%s) "${A[@]}"'
    assert argvs(text) == [['SPEC_ARGS=(--speculative-config "$X")'],
                           ["echo", "$(date +%s)", "${A[@]}"]]


def test_unclosed_quote_raises() -> None:
    with pytest.raises(ShellSyntaxError):
        tokenize("vllm serve 'm")


def test_word_offsets_point_into_text() -> None:
    text = 'vllm serve "m x" --port 1'
    words = [w for w in tokenize(text) if not w.op]
    assert [text[w.start : w.end] for w in words] == ["vllm", "serve", '"m x"', "--port", "1"]


def test_expand() -> None:
    env = {"TP": "4", "EMPTY": ""}
    assert expand("${TP}", env) == "4"
    assert expand("$TP", env) == "4"
    assert expand("${DCP:-2}", env) == "2"
    assert expand("${EMPTY:-8}", env) == "8"
    assert expand("${EMPTY-8}", env) == ""
    assert expand("${NOPE}", env) == "${NOPE}"


def test_parse_flags_equals_and_space_and_booleans() -> None:
    pos, flags = parse_flags(["m", "--tp=2", "--trust-remote-code", "--port", "8000",
                              "--enable-prefix-caching", "--x", "-1", "--y"])
    assert pos == ["m"]
    assert flags == [("--tp", "2"), ("--trust-remote-code", None), ("--port", "8000"),
                     ("--enable-prefix-caching", None), ("--x", "-1"), ("--y", None)]


# --------------------------------------------------------------------------- servers


def test_vllm_serve_positional_model_and_env_prefix() -> None:
    c = parse_server_command(
        "NCCL_P2P_DISABLE=1 vllm serve openai/gpt-oss-120b \\\n"
        "  --tensor-parallel-size 2 --max-model-len 131072 --port 8000\n")
    assert c.engine == "vllm"
    assert c.launcher == "vllm serve"
    assert c.model == "openai/gpt-oss-120b"
    assert c.tp == 2
    assert c.port == 8000
    assert c.env == (("NCCL_P2P_DISABLE", "1"),)
    assert c.flags == (("--max-model-len", "131072"),)
    assert c.problems == ()


@pytest.mark.parametrize("spelling", [
    "--tensor-parallel-size 4", "--tensor-parallel-size=4", "-tp 4", "--tp 4", "--tp=4",
    "--tp-size 4", "--tp_size 4",
])
def test_tensor_parallel_aliases(spelling: str) -> None:
    assert parse_server_command(f"vllm serve m {spelling}").tp == 4


@pytest.mark.parametrize(("spelling", "field", "value"), [
    ("--pipeline-parallel-size 2", "pp", 2), ("-pp 2", "pp", 2), ("--pp-size=2", "pp", 2),
    ("--data-parallel-size 2", "dp", 2), ("-dp 2", "dp", 2), ("--dp-size 2", "dp", 2),
    ("--decode-context-parallel-size 8", "dcp", 8), ("-dcp 8", "dcp", 8),
    ("--dcp-size 8", "dcp", 8), ("--enable-expert-parallel", "ep", True),
    ("--ep-size 4", "ep", True), ("--quantization modelopt_fp4", "quantization", "modelopt_fp4"),
    ("-q fp8", "quantization", "fp8"), ("--kv-cache-dtype fp8_e4m3", "kv_cache_dtype",
                                        "fp8_e4m3"),
    ("--host 0.0.0.0", "host", "0.0.0.0"), ("--port=8100", "port", 8100),
])
def test_parallel_and_other_aliases(spelling: str, field: str, value: object) -> None:
    assert getattr(parse_server_command(f"vllm serve m {spelling}"), field) == value


def test_variable_expansion_in_flag_values() -> None:
    c = parse_server_command("export TP=4\nvllm serve \"${MODEL:-org/m}\" --tp ${TP} "
                             "--port ${PORT:-8123}")
    assert (c.model, c.tp, c.port) == ("org/m", 4, 8123)
    assert ("TP", "4") in c.env


def test_extra_env_expands_values() -> None:
    c = parse_server_command("vllm serve m --tp $TP", {"TP": "2"})
    assert c.tp == 2


def test_python_api_server_with_env_prefix_lines() -> None:
    c = parse_server_command(
        "VLLM_LOG_STATS_INTERVAL=1 \\\nNCCL_P2P_LEVEL=4 \\\nSAFETENSORS_FAST_GPU=1 \\\n"
        "python3 -m vllm.entrypoints.openai.api_server --model nvidia/Qwen3.5-397B-A17B-NVFP4 "
        "--speculative-config '{\"method\":\"mtp\",\"num_speculative_tokens\":2}' "
        "--enable-prefix-caching  # a comment\n")
    assert c.engine == "vllm"
    assert c.launcher == "python3 -m vllm.entrypoints.openai.api_server"
    assert c.model == "nvidia/Qwen3.5-397B-A17B-NVFP4"
    assert c.speculative == {"method": "mtp", "num_speculative_tokens": 2}
    assert [k for k, _ in c.env] == ["VLLM_LOG_STATS_INTERVAL", "NCCL_P2P_LEVEL",
                                     "SAFETENSORS_FAST_GPU"]
    assert c.flags == (("--enable-prefix-caching", None),)


def test_venv_cli_main_serve() -> None:
    c = parse_server_command("/opt/venv/bin/python -m vllm.entrypoints.cli.main serve "
                             "/models/x --tp 2")
    assert (c.engine, c.launcher, c.model, c.tp) == (
        "vllm", "/opt/venv/bin/python -m vllm.entrypoints.cli.main serve", "/models/x", 2)
    c = parse_server_command("/opt/venv/bin/vllm serve /models/x")
    assert (c.engine, c.launcher) == ("vllm", "/opt/venv/bin/vllm serve")


@pytest.mark.parametrize("py", ["python", "python3", "python3.12", "/usr/bin/python3"])
def test_sglang_launchers(py: str) -> None:
    c = parse_server_command(f"{py} -m sglang.launch_server --model-path org/m --tp-size 2 "
                             "--port 30001")
    assert (c.engine, c.model, c.tp, c.port) == ("sglang", "org/m", 2, 30001)
    assert c.launcher == f"{py} -m sglang.launch_server"


def test_sglang_serve_cli() -> None:
    c = parse_server_command("sglang serve --model-path org/m")
    assert (c.engine, c.model) == ("sglang", "org/m")


def test_sglang_in_docker_run() -> None:
    c = parse_server_command(
        "docker run --gpus '\"device=0,1,2,3\"' \\\n"
        "  --ipc=host --shm-size=8g --network=host \\\n"
        "  -v ~/.cache/huggingface:/root/.cache/huggingface -v jit-cache:/cache/jit \\\n"
        "  -e NCCL_P2P_LEVEL=SYS -e SGLANG_ENABLE_SPEC_V2=True --env \"A=b c\" \\\n"
        "  voipmonitor/sglang:cu130 \\\n"
        "  python3 -m sglang.launch_server --model lukealonso/Qwen3.5-397B-A17B-NVFP4 \\\n"
        "    --tensor-parallel-size 4 --quantization modelopt_fp4 --kv-cache-dtype fp8_e4m3 \\\n"
        "    --speculative-algo NEXTN --speculative-num-steps 4 --speculative-eagle-topk 1\n")
    assert c.docker and c.image == "voipmonitor/sglang:cu130"
    assert c.docker_gpus == '"device=0,1,2,3"'
    assert c.docker_env == (("NCCL_P2P_LEVEL", "SYS"), ("SGLANG_ENABLE_SPEC_V2", "True"),
                            ("A", "b c"))
    assert (c.engine, c.tp, c.quantization, c.kv_cache_dtype) == (
        "sglang", 4, "modelopt_fp4", "fp8_e4m3")
    assert c.speculative == {"algorithm": "NEXTN", "num_steps": 4, "eagle_topk": 1}
    assert ("--speculative-algorithm", "NEXTN") in c.flags
    assert c.wrappers == ("docker run",)


def test_docker_entrypoint_bash_lc_with_escaped_json() -> None:
    c = parse_server_command(
        'docker run -d --name kimi --gpus all --ipc host --ulimit memlock=-1 \\\n'
        '  --entrypoint /bin/bash voipmonitor/vllm:tag -lc "VLLM_ENABLE_PCIE_ALLREDUCE=1 '
        'NCCL_P2P_LEVEL=SYS NCCL_GRAPH_FILE=/mnt/nccl_graph_opt.xml vllm serve '
        'moonshotai/Kimi-K2.6 --tensor-parallel-size 8 -dcp \\${DCP:-1} --speculative-config '
        '\'{\\"model\\":\\"lightseekorg/kimi-k2.5-eagle3-mla\\",\\"method\\":\\"eagle3\\",'
        '\\"num_speculative_tokens\\":3}\'"\n')
    assert c.engine == "vllm" and c.docker and c.image == "voipmonitor/vllm:tag"
    assert c.wrappers == ("docker run", "bash -lc")
    assert c.model == "moonshotai/Kimi-K2.6"
    assert (c.tp, c.dcp) == (8, 1)
    assert c.speculative == {"model": "lightseekorg/kimi-k2.5-eagle3-mla", "method": "eagle3",
                             "num_speculative_tokens": 3}
    assert dict(c.env)["NCCL_GRAPH_FILE"] == "/mnt/nccl_graph_opt.xml"
    assert c.docker_gpus == "all"


def test_bash_lc_single_quoted_with_unset_and_exec() -> None:
    c = parse_server_command(
        "bash -lc 'unset NCCL_GRAPH_FILE NCCL_GRAPH_DUMP_FILE; export TP=2; exec vllm serve "
        "zai/GLM-5.2 --tp $TP --hf-overrides \"{\\\"use_index_cache\\\":true}\"'")
    assert (c.engine, c.model, c.tp) == ("vllm", "zai/GLM-5.2", 2)
    assert c.flag("--hf-overrides") == '{"use_index_cache":true}'
    assert c.wrappers == ("bash -lc",)


def test_dotted_speculative_config_and_dotted_flags() -> None:
    c = parse_server_command(
        "vllm serve m --speculative-config.method mtp "
        "--speculative-config.num_speculative_tokens=3 "
        "--kernel-config.moe_backend flashinfer --default-chat-template-kwargs.thinking true")
    assert c.speculative == {"method": "mtp", "num_speculative_tokens": 3}
    assert c.flag("--kernel-config.moe_backend") == "flashinfer"
    assert c.flag("--default-chat-template-kwargs.thinking") == "true"


def test_image_entrypoint_serve() -> None:
    c = parse_server_command("docker run --gpus all -p 8000:8000 vllm/vllm-openai:v0.11.0 "
                             "serve /model --tp 2 --reasoning-config.reasoning_start_str '<think>'")
    assert (c.engine, c.launcher, c.model, c.tp) == (
        "vllm", "vllm/vllm-openai:v0.11.0 serve", "/model", 2)


@pytest.mark.parametrize("text", [
    "CUDA_VISIBLE_DEVICES=0,1 nohup vllm serve m --tp 2 > log &",
    "CUDA_VISIBLE_DEVICES=0,1 sudo nohup vllm serve m --tp 2 > log &",
    "sudo CUDA_VISIBLE_DEVICES=0,1 nohup vllm serve m --tp 2 > log &",
])
def test_cuda_visible_devices_prefix_and_sudo_nohup(text: str) -> None:
    c = parse_server_command(text)
    assert c.env == (("CUDA_VISIBLE_DEVICES", "0,1"),)
    assert (c.engine, c.launcher, c.model, c.tp, c.problems) == ("vllm", "vllm serve", "m", 2, ())


def test_first_launcher_wins_and_exports_before_it_count() -> None:
    c = parse_server_command(
        "set -e\nexport HF_HOME=/cache\ncd /work\nvllm serve a\nvllm serve b\n")
    assert c.model == "a"
    assert c.env == (("HF_HOME", "/cache"),)


def test_no_launcher_is_a_problem_not_a_crash() -> None:
    for text in ("docker compose up -d", "MOE_MODE=a16 docker compose up -d", "echo hi", ""):
        c = parse_server_command(text)
        assert c.engine is None and c.problems
    c = parse_server_command("vllm serve 'unclosed")
    assert c.engine is None and "unclosed" in c.problems[0]


def test_bad_speculative_json_is_reported() -> None:
    c = parse_server_command("vllm serve m --speculative-config '{method: mtp}'")
    assert c.speculative is None and "not a JSON object" in c.problems[0]


# --------------------------------------------------------------------------- clients


def test_vllm_bench_serve() -> None:
    c = parse_client_command(
        "vllm bench serve --model openai/gpt-oss-120b --dataset-name random \\\n"
        "  --random-input-len 512 --num-prompts 200 --request-rate inf \\\n"
        "  --max-concurrency \"${CONCURRENCY:-8}\" --base-url http://127.0.0.1:8000\n")
    assert (c.tool, c.default_kind, c.parser) == ("vllm-bench", "serving", "vllm-bench")
    assert (c.model, c.dataset, c.num_prompts, c.max_concurrency, c.request_rate, c.base_url) == (
        "openai/gpt-oss-120b", "random", "200", "${CONCURRENCY:-8}", "inf",
        "http://127.0.0.1:8000")


def test_legacy_and_module_vllm_bench() -> None:
    assert parse_client_command("python3 benchmarks/benchmark_serving.py --port 8001").tool == (
        "vllm-bench")
    c = parse_client_command("python -m vllm.entrypoints.cli.main bench serve --port 8001")
    assert (c.tool, c.port) == ("vllm-bench", 8001)


def test_sglang_bench_serving() -> None:
    c = parse_client_command("python3 -m sglang.bench_serving --backend sglang --host 127.0.0.1 "
                             "--port 30000 --num-prompts 64 --max-concurrency 16")
    assert (c.tool, c.backend, c.host, c.port, c.num_prompts) == (
        "sglang-bench", "sglang", "127.0.0.1", 30000, "64")


def test_lm_eval_model_args() -> None:
    c = parse_client_command(
        "lm_eval --model local-completions --tasks gsm8k "
        "--model_args model=org/m,base_url=http://127.0.0.1:8000/v1/completions,num_concurrent=8")
    assert (c.tool, c.default_kind, c.model, c.base_url) == (
        "lm-eval", "quality", "org/m", "http://127.0.0.1:8000/v1/completions")


def test_curl_smoke() -> None:
    c = parse_client_command("curl -fsS http://127.0.0.1:8000/v1/completions \\\n"
                             "  -H 'Content-Type: application/json' "
                             "-d '{\"prompt\": \"hi\"}' | jq .")
    assert (c.tool, c.default_kind, c.url, c.parser) == (
        "curl", "smoke", "http://127.0.0.1:8000/v1/completions", "text")


def test_unknown_client() -> None:
    c = parse_client_command("/root/bench/throughput_probe.py --port 8000")
    assert c.tool is None and c.default_kind is None and c.problems
    # the community's decode benchmark is a known client (tests/test_decode_bench.py)
    assert parse_client_command("/root/llm-inference-bench/llm_decode_bench.py").tool == \
        "llm-decode-bench"


# --------------------------------------------------------------------------- additions


def test_append_args_at_end_of_command_before_pipe_and_comment() -> None:
    text = "vllm bench serve --model m \\\n  --num-prompts 10 | tee out.txt  # keep\n"
    assert append_args(text, ["--save-result", "--result-dir", "a b"]) == (
        "vllm bench serve --model m \\\n  --num-prompts 10 --save-result --result-dir 'a b' "
        "| tee out.txt  # keep\n")


def test_append_args_after_exports_and_in_docker_cmd() -> None:
    assert append_args("export A=1\nvllm serve m\n", ["--port", "9"]) == (
        "export A=1\nvllm serve m --port 9\n")
    assert append_args("docker run --gpus all img vllm serve m", ["--port", "9"]) == (
        "docker run --gpus all img vllm serve m --port 9")


def test_no_insertion_inside_quoted_script() -> None:
    assert insertion_point("bash -lc 'vllm serve m'") is None
    assert append_args("docker run --entrypoint vllm img serve m", ["--port", "9"]) is None
    assert append_args("echo nothing", ["--x"]) is None


# --------------------------------------------------------------------------- env rules


def test_env_assignments_find_every_empty_nccl_graph_file_shape() -> None:
    shapes = [
        "NCCL_GRAPH_FILE= vllm serve m",
        "NCCL_GRAPH_FILE=\"\" vllm serve m",
        "NCCL_GRAPH_FILE='' \\\n  vllm serve m",
        "export NCCL_GRAPH_FILE=\nvllm serve m",
        "docker run -e NCCL_GRAPH_FILE= \\\n  img vllm serve m",
        "docker run --env NCCL_GRAPH_FILE= img vllm serve m",
        "bash -lc 'NCCL_GRAPH_FILE= vllm serve m'",
    ]
    for text in shapes:
        pairs = [(k, v) for k, v, _ in env_assignments(text)]
        assert ("NCCL_GRAPH_FILE", "") in pairs, text
    ok = env_assignments("NCCL_GRAPH_FILE=/x.xml vllm serve m\nunset NCCL_GRAPH_FILE")
    assert [(k, v) for k, v, _ in ok] == [("NCCL_GRAPH_FILE", "/x.xml")]
