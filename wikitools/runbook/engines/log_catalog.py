"""What engines say, as data: the start-up log lines worth keeping (first match wins), the
prefix engines put before a log line, and the names of the metrics and server-info keys read
after a run. The engine catalog (`catalog`) says how engines start; this module, what they print.

Sources: reference/engines-and-benchmarks.md §3.3 (log anchors) and §3.5 (metrics)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

# Startup facts worth keeping, first match wins (reference/engines-and-benchmarks.md §3.3, §3.5).
LOG_MARKERS: tuple[tuple[str, re.Pattern[str], Callable[[re.Match[str]], dict[str, Any]]], ...] = (
    (
        "attention_backend",
        re.compile(
            r"Using (\S+) attention backend out of potential backends"
            r"|Using AttentionBackendEnum\.(\w+) backend"
            r"|Using ([\w ]+?) backend on V1 engine"
            r"|Attention backend not explicitly specified\. Use (\w+) backend by default"
        ),
        lambda m: {"attention_backend": next(g for g in m.groups() if g)},
    ),
    (
        "flash_attn_version",
        re.compile(r"Using FlashAttention version (\d+)"),
        lambda m: {"flash_attn_version": int(m[1])},
    ),
    (
        "kv_cache_tokens",
        re.compile(r"(\w+)(?: \+ host)? KV cache size: ([\d,]+) tokens"),
        lambda m: {"kv_cache_device": m[1], "kv_cache_tokens": _int(m[2])},
    ),
    (
        "max_concurrency",
        re.compile(r"Maximum concurrency for ([\d,]+) tokens per request: ([\d.]+)x"),
        lambda m: {"max_concurrency_tokens": _int(m[1]), "max_concurrency": float(m[2])},
    ),
    (
        "kv_cache_gib",
        re.compile(r"Available KV cache memory: (-?[\d.]+) GiB"),
        lambda m: {"kv_cache_gib": float(m[1])},
    ),
    (
        "engine_version",
        re.compile(
            r"vLLM API server version ([0-9][\w.+-]*)|Starting vLLM .*?version ([0-9][\w.+-]*)"
            r"|Initializing a V1 LLM engine \(v([0-9][\w.+-]*)\)"
        ),
        lambda m: {"engine_version": next(g for g in m.groups() if g)},
    ),
    (
        "cuda_graph",
        re.compile(r"Graph capturing finished in ([\d.]+) secs?, took ([-\d.]+) GiB"),
        lambda m: {"cuda_graph_capture_s": float(m[1]), "cuda_graph_gib": float(m[2])},
    ),
    (
        "model_load",
        re.compile(r"Model loading took ([\d.]+) GiB(?: memory)? and ([\d.]+) seconds"),
        lambda m: {"model_load_gib": float(m[1]), "model_load_s": float(m[2])},
    ),
    (
        "init_engine_s",
        re.compile(r"init engine \(profile, create kv cache, warmup model\) took ([\d.]+) s"),
        lambda m: {"init_engine_s": float(m[1])},
    ),
    (
        "max_model_len",
        re.compile(r"Using max model len (\d+)"),
        lambda m: {"max_model_len": int(m[1])},
    ),
    (
        "moe_backend",
        re.compile(r"Using '?([\w ]+?)'? (\w+) MoE backend"),
        lambda m: {"moe_backend": f"{m[1]} ({m[2]})"},
    ),
    (
        "nvfp4_gemm",
        re.compile(r"Using (\S+) for NVFP4 GEMM"),
        lambda m: {"nvfp4_gemm": m[1]},
    ),
    (
        "marlin_fallback",
        re.compile(r"leveraging the Marlin kernel"),
        lambda m: {"marlin_fallback": True},
    ),
    (
        # SGLang 0.5.17: "KV Cache is allocated. dtype: torch.bfloat16, #tokens: 2201189,
        # K size: 33.59 GB, V size: 33.59 GB" (its GB are GiB); older releases omit the dtype.
        "sglang_kv_tokens",
        re.compile(r"KV Cache is allocated\.(?: dtype: \S+,)? #tokens: (\d+)"
                   r"(?:, K size: ([\d.]+) GB, V size: ([\d.]+) GB|, KV size: ([\d.]+) GB)?"),
        lambda m: {"kv_cache_tokens": int(m[1]), **_sglang_kv_gib(m)},
    ),
    (
        # SGLang: "Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=…
        # GB, mem usage=2.38 GB." (reference §3.4; its GB are GiB)
        "sglang_model_load",
        re.compile(r"Load weight end\..*?mem usage=([\d.]+) GB"),
        lambda m: {"model_load_gib": float(m[1])},
    ),
    (
        "sglang_cuda_graph",
        re.compile(r"Capture (?:target )?(?:decode )?cuda graph end\. (?:Time )?elapsed[=:] ?"
                   r"([\d.]+) s", re.IGNORECASE),
        lambda m: {"cuda_graph_capture_s": float(m[1]), "cuda_graphs": True},
    ),
    (
        "sglang_max_total_tokens",
        re.compile(r"max_total_num_tokens=(\d+)"),
        lambda m: {"max_total_num_tokens": int(m[1])},
    ),
    (
        "cuda_graphs_disabled",
        re.compile(r"enforce_eager[\"']?[:=] ?True|disabling torch\.compile and CUDAGraphs"),
        lambda m: {"cuda_graphs": False, "compiled": False},
    ),
    (
        "torch_compile",
        re.compile(r"torch\.compile took ([\d.]+) s in total"),
        lambda m: {"compiled": True, "compile_s": float(m[1])},
    ),
    (
        "cuda_graphs_captured",
        re.compile(r"Capturing CUDA graphs \((\w+)\)|Graph capturing finished in"),
        lambda m: {"cuda_graphs": True},
    ),
    (
        "llama_build",
        re.compile(r"\bbuild: (\d+) \((\w+)\)"),
        lambda m: {"engine_version": f"b{m[1]}"},
    ),
    (
        "llama_offload",
        re.compile(r"offloaded (\d+)/(\d+) layers to GPU"),
        lambda m: {"gpu_layers": int(m[1]), "model_layers": int(m[2])},
    ),
)


def _int(text: str) -> int:
    return int(text.replace(",", ""))


def _sglang_kv_gib(m: re.Match[str]) -> dict[str, float]:
    if m[2] and m[3]:
        return {"kv_cache_gib": round(float(m[2]) + float(m[3]), 2)}
    return {"kv_cache_gib": float(m[4])} if m[4] else {}


# What engines put before a log line's text, e.g. "(Worker_TP0 pid=1165) ERROR 11-30 09:50:52
# [multiproc_executor.py:1007] " (vLLM and SGLang workers).
# How a Python process says a signal killed it. faulthandler (PYTHONFAULTHANDLER=1, which the
# executor sets for every server it starts) prints "Fatal Python error: <what>" with these names;
# vLLM's multiprocess executor logs a worker's death with its exit code, negative for a signal.
FAULTHANDLER_LINE = (r"Fatal Python error: (Illegal instruction|Segmentation fault"
                     r"|Floating-point exception|Aborted|Bus error)")
FAULTHANDLER_SIGNALS = {
    "Illegal instruction": "SIGILL",
    "Segmentation fault": "SIGSEGV",
    "Floating-point exception": "SIGFPE",
    "Aborted": "SIGABRT",
    "Bus error": "SIGBUS",
}
WORKER_DIED_LINE = r"died unexpectedly \(exit code: -(\d+)\)"

LOG_LINE_PREFIX = (
    r"^(?:\([^)]*\)\s+)?(?:(?:DEBUG|INFO|WARNING|ERROR|CRITICAL)\s+\d\d-\d\d\s+[\d:.]+\s+"
    r"\[[^\]]*\]\s+)?"
)


# Prometheus names of the spec-decode counters, summed over engines (reference §3.5).
SPEC_COUNTERS = {
    "accepted": "vllm:spec_decode_num_accepted_tokens_total",
    "draft_tokens": "vllm:spec_decode_num_draft_tokens_total",
    "drafts": "vllm:spec_decode_num_drafts_total",
}


CACHE_CONFIG_METRIC = "vllm:cache_config_info"  # its labels describe the KV cache


GPU_BLOCKS_METRIC = "vllm:num_gpu_blocks"


CACHE_CONFIG_KEYS = frozenset({
    "block_size", "cache_dtype", "enable_prefix_caching", "gpu_memory_utilization",
    "kv_cache_max_concurrency", "kv_cache_size_tokens", "num_gpu_blocks",
})


# `/server_info` keys kept as markers ("version" is kept as engine_version)
SERVER_INFO_KEYS = ("attention_backend", "moe_runner_backend", "kv_cache_dtype",
                    "speculative_algorithm", "max_total_num_tokens", "version")


SERVER_INFO_SPEC_LENGTH = ("internal_states", "avg_spec_accept_length")
