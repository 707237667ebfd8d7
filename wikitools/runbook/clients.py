"""Result parsers, one per client tool: each turns the tool's own result file into the record's
normalised `metrics` mapping. Numbers are copied exactly as the tool wrote them (no rounding)."""

from __future__ import annotations

import json
import math
import re
import shlex
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

# The serving metrics every serving row shows; both tools fill these under these names.
SERVING_KEYS = (
    "completed",
    "num_prompts",
    "failed",
    "duration",
    "total_input_tokens",
    "total_output_tokens",
    "request_throughput",
    "output_throughput",
    "total_token_throughput",
    "mean_ttft_ms",
    "median_ttft_ms",
    "p99_ttft_ms",
    "mean_tpot_ms",
    "median_tpot_ms",
    "p99_tpot_ms",
    "mean_itl_ms",
    "median_itl_ms",
    "p99_itl_ms",
    "mean_e2el_ms",
    "median_e2el_ms",
    "p99_e2el_ms",
)

# vllm bench serve keys copied as they are, beside SERVING_KEYS (reference 1.3).
_VLLM_EXTRA = (
    "max_concurrency",
    "request_rate",
    "request_goodput",
    "max_output_tokens_per_s",
    "max_concurrent_requests",
    "model_id",
    "backend",
    "spec_decode_acceptance_rate",
    "spec_decode_acceptance_length",
    "spec_decode_num_drafts",
    "spec_decode_draft_tokens",
    "spec_decode_accepted_tokens",
)

# SGLang bench_serving names → the record's names (reference 2.3 / 2.5).
_SGLANG_RENAMES = {
    "total_throughput": "total_token_throughput",
    "mean_e2e_latency_ms": "mean_e2el_ms",
    "median_e2e_latency_ms": "median_e2el_ms",
    "p99_e2e_latency_ms": "p99_e2el_ms",
}
_SGLANG_EXTRA = (
    "max_concurrency",
    "request_rate",
    "input_throughput",
    "concurrency",
    "accept_length",
    "total_output_tokens_retokenized",
    "max_output_tokens_per_s",
    "max_concurrent_requests",
    "backend",
    "dataset_name",
    "random_input_len",
    "random_output_len",
    "random_range_ratio",
)


class ResultError(Exception):
    """The client's result file is missing or cannot be read; the message says which."""


def parse_vllm_bench(path: Path, command: str = "") -> dict[str, Any]:
    """`vllm bench serve --save-result` JSON (one object; with --append-result the last line)."""
    data = _last_json_object(path)
    metrics = _pick(data, SERVING_KEYS + _VLLM_EXTRA)
    metrics["tool"] = "vllm-bench-serve"
    if "completed" not in data:
        raise ResultError(f"{path.name}: no 'completed' key; not a vllm bench serve result")
    return metrics


def parse_sglang_bench(path: Path, command: str = "") -> dict[str, Any]:
    """SGLang `bench_serving --output-file` JSONL: the file is appended to, so the last line is
    this run. SGLang writes no `num_prompts`/`failed`; they come from the command when given."""
    data = _last_json_object(path)
    if "completed" not in data:
        raise ResultError(f"{path.name}: no 'completed' key; not an SGLang bench_serving result")
    renamed = {_SGLANG_RENAMES.get(k, k): v for k, v in data.items()}
    metrics = _pick(renamed, SERVING_KEYS + _SGLANG_EXTRA)
    prompts = _flag_value(command, "--num-prompts")
    if "num_prompts" not in metrics and prompts is not None and prompts.isdigit():
        metrics["num_prompts"] = int(prompts)
    if "failed" not in metrics and isinstance(metrics.get("num_prompts"), int):
        metrics["failed"] = metrics["num_prompts"] - int(metrics["completed"])
    metrics["tool"] = "sglang-bench-serving"
    return metrics


def parse_lm_eval(path: Path, command: str = "") -> dict[str, Any]:
    """lm-evaluation-harness results JSON: `results.<task>.<metric>,<filter>`. `path` may be the
    `--output_path` folder; then the newest `results_*.json` below it is read."""
    file = _newest_results_file(path) if path.is_dir() else path
    data = _load_json(file)
    results = data.get("results")
    if not isinstance(results, dict) or not results:
        raise ResultError(f"{file.name}: no 'results' mapping; not an lm-eval results file")
    tasks: dict[str, dict[str, Any]] = {}
    for task, values in sorted(results.items()):
        if not isinstance(values, dict):
            continue
        tasks[task] = {
            k: v
            for k, v in sorted(values.items())
            if k != "alias" and isinstance(v, int | float) and not isinstance(v, bool)
        }
    metrics: dict[str, Any] = {"tool": "lm-eval", "tasks": tasks}
    n_shot = data.get("n-shot")
    if isinstance(n_shot, dict):
        metrics["n_shot"] = {k: n_shot[k] for k in sorted(n_shot)}
    samples = data.get("n-samples")
    if isinstance(samples, dict):
        metrics["n_samples"] = {
            k: samples[k].get("effective")
            for k in sorted(samples)
            if isinstance(samples[k], dict)
        }
    return metrics


def parse_text(path: Path, command: str = "") -> dict[str, Any]:
    """Smoke clients (curl …): the output is kept as text; an OpenAI-style JSON answer also
    gives its token usage."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise ResultError(f"cannot read {path.name}: {exc.strerror}") from None
    metrics: dict[str, Any] = {"tool": "text", "output_chars": len(text)}
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if isinstance(data, dict) and isinstance(data.get("usage"), dict):
        metrics["usage"] = {
            k: v for k, v in sorted(data["usage"].items()) if isinstance(v, int | float)
        }
    return metrics


PARSERS: Mapping[str, Callable[[Path, str], dict[str, Any]]] = {
    "vllm-bench": parse_vllm_bench,
    "sglang-bench": parse_sglang_bench,
    "lm-eval": parse_lm_eval,
    "text": parse_text,
}


def parser_for_command(command: str) -> str:
    """The parser kind a client command needs, from its launcher."""
    if re.search(r"\bvllm\s+bench\s+serve\b|benchmark_serving\.py|vllm\.benchmarks\.serve",
                 command):
        return "vllm-bench"
    if re.search(r"sglang\.bench_serving|sglang\.benchmark\.serving", command):
        return "sglang-bench"
    if re.search(r"\blm[-_]eval\b", command):
        return "lm-eval"
    return "text"


def parse_result(parser: str, path: Path, command: str = "") -> dict[str, Any]:
    """Parse one client result with the named parser; ResultError when it cannot."""
    try:
        fn = PARSERS[parser]
    except KeyError:
        raise ResultError(f"no parser named {parser!r}") from None
    return fn(path, command)


# --------------------------------------------------------------------------- helpers


def _pick(data: Mapping[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    return {k: _finite(data[k]) for k in keys if k in data}


def _finite(value: Any) -> Any:
    """JSON has no Infinity/NaN (SGLang writes `"request_rate": Infinity`): keep them as text."""
    if isinstance(value, float) and not math.isfinite(value):
        return "inf" if value > 0 else "-inf" if value < 0 else "nan"
    return value


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ResultError(f"result file {path.name} was not written") from None
    except OSError as exc:
        raise ResultError(f"cannot read {path.name}: {exc.strerror}") from None


def _load_json(path: Path) -> Any:
    text = _read_text(path)
    try:
        return json.loads(text)
    except ValueError as exc:
        raise ResultError(f"{path.name}: not JSON ({exc})") from None


def _last_json_object(path: Path) -> dict[str, Any]:
    """The whole file as one JSON object, else its last non-empty line (JSONL / appended)."""
    text = _read_text(path)
    try:
        data = json.loads(text)
    except ValueError:
        lines = [line for line in text.splitlines() if line.strip()]
        if not lines:
            raise ResultError(f"result file {path.name} is empty") from None
        try:
            data = json.loads(lines[-1])
        except ValueError as exc:
            raise ResultError(f"{path.name}: last line is not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ResultError(f"{path.name}: expected a JSON object")
    return data


def _newest_results_file(folder: Path) -> Path:
    found = sorted(folder.rglob("results_*.json"), key=lambda p: (p.stat().st_mtime, p.name))
    if not found:
        raise ResultError(f"no results_*.json under {folder.name}")
    return found[-1]


def _flag_value(command: str, flag: str) -> str | None:
    try:
        words = shlex.split(command.replace("\\\n", " "), comments=True)
    except ValueError:
        return None
    for i, word in enumerate(words):
        if word == flag and i + 1 < len(words):
            return words[i + 1]
        if word.startswith(flag + "="):
            return word.split("=", 1)[1]
    return None
