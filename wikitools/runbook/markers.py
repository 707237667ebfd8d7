"""Facts an engine states about itself: startup log lines (attention backend, KV-cache size,
CUDA graphs, versions) and Prometheus `/metrics` samples (spec-decode counters, cache config)."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

# Startup facts worth keeping, first match wins (reference/engines-and-benchmarks.md §3.3, §3.5).
_MARKERS: tuple[tuple[str, re.Pattern[str], Callable[[re.Match[str]], dict[str, Any]]], ...] = (
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
)


def _sglang_kv_gib(m: re.Match[str]) -> dict[str, float]:
    if m[2] and m[3]:
        return {"kv_cache_gib": round(float(m[2]) + float(m[3]), 2)}
    return {"kv_cache_gib": float(m[4])} if m[4] else {}


def _int(text: str) -> int:
    return int(text.replace(",", ""))


def scan_markers(lines: list[str] | tuple[str, ...]) -> dict[str, Any]:
    """Backend and capacity facts from server log lines; the first match of each marker wins."""
    found: dict[str, Any] = {}
    pending = list(_MARKERS)
    for line in lines:
        if not pending:
            break
        keep = []
        for name, pattern, convert in pending:
            m = pattern.search(line)
            if m:
                for k, v in convert(m).items():
                    found.setdefault(k, v)
            else:
                keep.append((name, pattern, convert))
        pending = keep
    return found


# --------------------------------------------------------------------------- prometheus

_PROM_LINE = re.compile(r"^(?P<name>[a-zA-Z_:][\w:]*)(?:\{(?P<labels>.*)\})?\s+(?P<value>\S+)")
_PROM_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')
SPEC_COUNTERS = {
    "accepted": "vllm:spec_decode_num_accepted_tokens_total",
    "draft_tokens": "vllm:spec_decode_num_draft_tokens_total",
    "drafts": "vllm:spec_decode_num_drafts_total",
}


_CACHE_KEYS = frozenset({
    "block_size", "cache_dtype", "enable_prefix_caching", "gpu_memory_utilization",
    "kv_cache_max_concurrency", "kv_cache_size_tokens", "num_gpu_blocks",
})


def parse_prometheus(text: str) -> list[tuple[str, dict[str, str], float]]:
    samples = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = _PROM_LINE.match(line)
        if not m:
            continue
        try:
            value = float(m["value"])
        except ValueError:
            continue
        labels = dict(_PROM_LABEL.findall(m["labels"] or ""))
        samples.append((m["name"], labels, value))
    return samples


def spec_counters(text: str) -> dict[str, float]:
    """Totals of the spec-decode counters (summed over engines); empty when not exposed."""
    totals: dict[str, float] = {}
    names = {v: k for k, v in SPEC_COUNTERS.items()}
    for name, _labels, value in parse_prometheus(text):
        if name in names:
            totals[names[name]] = totals.get(names[name], 0.0) + value
    return totals


def spec_acceptance(before: Mapping[str, float], after: Mapping[str, float]) -> dict[str, Any]:
    """Acceptance = Δaccepted / Δdraft tokens; mean acceptance length = 1 + Δaccepted / Δdrafts."""
    if "accepted" not in after or "draft_tokens" not in after:
        return {}
    d_acc = after["accepted"] - before.get("accepted", 0.0)
    d_draft = after["draft_tokens"] - before.get("draft_tokens", 0.0)
    d_drafts = after.get("drafts", 0.0) - before.get("drafts", 0.0)
    out: dict[str, Any] = {
        "spec_decode_acceptance": (d_acc / d_draft) if d_draft > 0 else None,
        "spec_decode_accepted_delta": int(d_acc),
        "spec_decode_draft_tokens_delta": int(d_draft),
    }
    if d_drafts > 0:
        out["spec_decode_acceptance_length"] = 1 + d_acc / d_drafts
    return out


def metrics_markers(text: str) -> dict[str, Any]:
    """KV-cache facts from vLLM's `/metrics` (`vllm:cache_config_info` labels)."""
    out: dict[str, Any] = {}
    for name, labels, _value in parse_prometheus(text):
        if name == "vllm:cache_config_info" and "cache_config" not in out:
            out["cache_config"] = {k: labels[k] for k in sorted(labels) if k in _CACHE_KEYS}
        elif name == "vllm:num_gpu_blocks" and "num_gpu_blocks" not in out:
            out["num_gpu_blocks"] = int(_value)
    cfg = out.get("cache_config", {})
    for key in ("kv_cache_size_tokens", "num_gpu_blocks", "block_size"):
        if key in cfg and cfg[key].isdigit():
            out.setdefault(key if key != "kv_cache_size_tokens" else "metrics_kv_cache_tokens",
                           int(cfg[key]))
    return out


def server_info_markers(data: Mapping[str, Any]) -> dict[str, Any]:
    """SGLang `/server_info`: backends, KV capacity and version."""
    out: dict[str, Any] = {}
    for key in ("attention_backend", "moe_runner_backend", "kv_cache_dtype",
                "speculative_algorithm", "max_total_num_tokens", "version"):
        if data.get(key) is not None:
            out[key if key != "version" else "engine_version"] = data[key]
    return out
