"""Parsers on real outputs captured on NVIDIA H200 hosts (tests/fixtures/gpu): they keep
passing here, without a GPU."""

from __future__ import annotations

from pathlib import Path

from wikitools.runbook.engines.catalog import SGLANG, VLLM
from wikitools.runbook.engines.clients import parse_result
from wikitools.runbook.engines.markers import scan_markers
from wikitools.runbook.execution.host import HostFacts, parse_topology, summarise_topology
from wikitools.runbook.execution.logwatch import LogWatcher

GPU = Path(__file__).parent / "fixtures" / "gpu"


def test_cuda_graph_log_markers() -> None:
    lines = (GPU / "h200-x1" / "vllm-server-cudagraphs.log").read_text().splitlines()
    markers = scan_markers(lines)
    assert markers["attention_backend"] == "FLASH_ATTN"
    assert markers["flash_attn_version"] == 3
    assert markers["kv_cache_tokens"] == 2_188_848
    assert markers["kv_cache_gib"] == 66.8
    assert markers["max_concurrency"] == 534.39
    assert markers["cuda_graph_gib"] == 0.44
    assert markers["engine_version"] == "0.26.0"
    # graphs were captured and the model compiled (no "disabled" line)
    assert (markers["cuda_graphs"], markers["compiled"], markers["compile_s"]) == (
        True, True, 14.84)


def test_failed_tp2_start_names_the_cuda_error() -> None:
    watcher = LogWatcher(GPU / "h200-x2" / "vllm-server-tp2-failed.log", VLLM.fatal_log)
    watcher.poll()
    assert watcher.fatal_line is not None and "Traceback" in watcher.fatal_line
    cause = watcher.cause()
    assert cause is not None
    assert cause.endswith(
        "RuntimeError: CUDA error: CUBLAS_STATUS_INTERNAL_ERROR when calling `cublasCreate(handle)`"
    )


def test_two_gpu_topology_is_nvlink() -> None:
    links = parse_topology((GPU / "h200-x2" / "topo.txt").read_text())
    assert links[(0, 1)] == "NV18"
    assert summarise_topology(links, (0, 1)) == "NV18"


def test_two_gpu_banner() -> None:
    facts = HostFacts.from_outputs(
        "0, NVIDIA H200, 9.0, 143771, 0, 143156, 580.159.04, 00000000:00:06.0, GPU-a\n"
        "1, NVIDIA H200, 9.0, 143771, 0, 143156, 580.159.04, 00000000:00:07.0, GPU-b\n",
        (GPU / "h200-x2" / "nvidia-smi.txt").read_text(),
        (GPU / "h200-x2" / "topo.txt").read_text(),
    )
    assert (facts.driver, facts.cuda) == ("580.159.04", "13.0")
    assert [g.arch for g in facts.gpus] == ["sm90", "sm90"]


def test_sglang_start_up_log_markers() -> None:
    """SGLang 0.5.17 on one H200 (dummy Llama 3.2 1B shape, Triton attention)."""
    lines = (GPU / "h200-sglang" / "sglang-server.log").read_text().splitlines()
    markers = scan_markers(lines)
    assert markers["kv_cache_tokens"] == 2_201_189
    assert markers["kv_cache_gib"] == 67.18  # K 33.59 + V 33.59
    assert markers["max_total_num_tokens"] == 2_201_189
    assert markers["cuda_graph_capture_s"] == 77.33 and markers["cuda_graphs"] is True


def test_sglang_log_has_no_fatal_line_and_says_ready() -> None:
    """Warnings about optional modules it could not import are not failures."""
    path = GPU / "h200-sglang" / "sglang-server.log"
    watcher = LogWatcher(path, SGLANG.fatal_log)
    watcher.poll()
    assert watcher.fatal_line is None
    text = path.read_text()
    assert any(marker in text for marker in SGLANG.ready_log)
    assert "Ignore import error" in text


def test_sglang_bench_serving_result() -> None:
    path = GPU / "h200-sglang" / "bench-serving-1.jsonl"
    metrics = parse_result("sglang-bench", path, "python3 -m sglang.bench_serving --num-prompts 64")
    assert metrics["completed"] == 64 and metrics["num_prompts"] == 64
    assert metrics["failed"] == 0
    assert round(metrics["output_throughput"], 1) == 595.2
    assert round(metrics["mean_ttft_ms"], 2) == 11.28
    # The client's own median: 0.00 ms, because it starts the clock at the first chunk with text
    # and most ids of this stand-in model decode to no text with its 512-token tokenizer.
    assert metrics["median_ttft_ms"] == 0.0
    assert metrics["tool"] == "sglang-bench-serving"


def test_a_warning_that_quotes_an_exception_is_not_the_cause(tmp_path: Path) -> None:
    """vLLM's start-up warning about the open-files limit names `OSError: …` as advice. When
    the streams interleave so that it lands after the traceback began (as on a loaded host), the
    cause is still the exception the traceback ends with."""
    log = tmp_path / "server.log"
    log.write_text(
        "Traceback (most recent call last):\n"
        "(APIServer pid=1) WARNING 12-01 18:45:25 [system_utils.py:255] Found ulimit of 20000 and "
        "failed to automatically increase with error current limit exceeds maximum limit. This "
        "can cause fd limit errors like `OSError: [Errno 24] Too many open files`. Consider "
        "increasing with ulimit -n\n"
        '  File "/opt/venv/bin/vllm", line 10, in <module>\n'
        "huggingface_hub.errors.HFValidationError: Repo id must be in the form 'repo_name' or "
        "'namespace/repo_name': '/nonexistent/tiny-model'.\n")
    watcher = LogWatcher(log, VLLM.fatal_log)
    watcher.poll()
    assert watcher.fatal_line == "Traceback (most recent call last):"
    assert watcher.cause() == (
        "huggingface_hub.errors.HFValidationError: Repo id must be in the form 'repo_name' or "
        "'namespace/repo_name': '/nonexistent/tiny-model'.")
