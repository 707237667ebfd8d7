"""Result readers, one per result format (the formats and which tool writes which are in
`engines`): each turns a tool's own result file into the record's normalised `metrics`
mapping. Numbers are copied exactly as the tool wrote them (no rounding)."""

from __future__ import annotations

import ast
import hashlib
import json
import math
import operator
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from wikitools.core.errors import InputError
from wikitools.runbook.engines import catalog as engines
from wikitools.runbook.engines.shell import ShellSyntaxError, tokenize

SERVING_KEYS = engines.SERVING_KEYS


class ResultError(InputError):
    """The client's result file is missing or cannot be read; the message says which."""


def read_serving(path: Path, fmt: engines.ResultFormat, command: str = "",
                 env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """A serving benchmark's JSON result: one object, or the last line of a file appended to
    (JSONL, or --append-result). Keys are renamed to the record's names and picked; a count of
    prompts the result lacks comes from the command when given (literally, or as `${VAR:-d}` or
    `$(( ${VAR:-d} * N ))` over the point's environment `env`)."""
    data = _last_json_object(path)
    if "completed" not in data:
        raise ResultError(f"{path.name}: no 'completed' key; not {fmt.what} result")
    renamed = {fmt.renames.get(k, k): v for k, v in data.items()}
    metrics = _pick(renamed, SERVING_KEYS + fmt.extra_keys)
    if fmt.prompts_flag:
        prompts = count_value(_flag_value(command, fmt.prompts_flag), env or {})
        if "num_prompts" not in metrics and prompts is not None:
            metrics["num_prompts"] = prompts
        if "failed" not in metrics and isinstance(metrics.get("num_prompts"), int):
            metrics["failed"] = metrics["num_prompts"] - int(metrics["completed"])
    metrics["tool"] = fmt.label
    return metrics


def read_task_scores(path: Path, fmt: engines.ResultFormat, command: str = "") -> dict[str, Any]:
    """Evaluation results JSON: `results.<task>.<metric>,<filter>`. `path` may be the output
    folder; then the newest `results_*.json` below it is read."""
    file = _newest_results_file(path) if path.is_dir() else path
    data = _load_json(file)
    results = data.get("results")
    if not isinstance(results, dict) or not results:
        raise ResultError(f"{file.name}: no 'results' mapping; not {fmt.what}")
    tasks: dict[str, dict[str, Any]] = {}
    for task, values in sorted(results.items()):
        if not isinstance(values, dict):
            continue
        tasks[task] = {
            k: v
            for k, v in sorted(values.items())
            if k != "alias" and isinstance(v, int | float) and not isinstance(v, bool)
        }
    metrics: dict[str, Any] = {"tool": fmt.label, "tasks": tasks}
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


def read_text(path: Path, fmt: engines.ResultFormat = engines.TEXT_RESULT,
              command: str = "") -> dict[str, Any]:
    """Smoke clients: the output is kept as text; an OpenAI-style JSON answer also gives its
    token usage."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise ResultError(f"cannot read {path.name}: {exc.strerror}") from None
    metrics: dict[str, Any] = {"tool": fmt.label, "output_chars": len(text)}
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if isinstance(data, dict) and isinstance(data.get("usage"), dict):
        metrics["usage"] = {
            k: v for k, v in sorted(data["usage"].items()) if isinstance(v, int | float)
        }
    return metrics


def read_kld_capture(path: Path, fmt: engines.ResultFormat = engines.TEXT_RESULT,
                     command: str = "") -> dict[str, Any]:
    """A `wiki kld capture` file: what was captured (the divergence from the reference is
    scored once every run of the record is in)."""
    data = _load_json(path)
    if not isinstance(data, dict) or not isinstance(data.get("positions"), list):
        raise ResultError(f"{path.name}: no 'positions' list; not {fmt.what}")
    digest = "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()
    return {"tool": fmt.label, "capture_sha256": digest, "positions": len(data["positions"]),
            "top_k": data.get("top_k"), "input_sha256": data.get("input_sha256"),
            "input_source": data.get("input_source"), "model": data.get("model")}


def read_probe(path: Path, fmt: engines.ResultFormat = engines.TEXT_RESULT,
               command: str = "") -> dict[str, Any]:
    """A `wiki probe` result: n/N correct at concurrency C (the failures stay in the file)."""
    data = _load_json(path)
    if not isinstance(data, dict) or "correct" not in data or "total" not in data:
        raise ResultError(f"{path.name}: no 'correct'/'total'; not {fmt.what}")
    return {"tool": fmt.label, "correct": data["correct"], "total": data["total"],
            "concurrency": data.get("concurrency"), "failures": len(data.get("failures") or ()),
            "probe_file": data.get("probe_file")}


# A decode-benchmark cell's values kept in the record (the file keeps the rest); the names are
# the tool's own, from its 0.4 output (`results_*.json`, `vllm_*_mtp.json`, `decode-matrix.json`).
DECODE_CELL_KEYS = (
    "aggregate_tps", "per_request_avg_tps", "ttft_avg", "ttft_p50", "ttft_p99",
    "total_tokens", "wall_time", "num_completed", "num_errors", "server_gen_throughput",
    "server_spec_accept_rate", "request_latency_avg", "inter_token_latency_avg",
    "output_tps_per_user_avg", "avg_running_reqs", "max_running_reqs", "queue_fraction",
)
DECODE_META_KEYS = (
    "version", "engine", "model", "duration_per_test", "max_tokens", "max_total_tokens",
    "dcp_size", "decode_mode",
)


def read_decode_matrix(path: Path, fmt: engines.ResultFormat = engines.TEXT_RESULT,
                       command: str = "") -> dict[str, Any]:
    """`llm_decode_bench.py --output` JSON: one metrics object per cell under `cells`, keyed
    `c<concurrency>_ctx<context tokens>`, the prefill runs under `prefill` keyed by prompt
    tokens, the run's settings beside them, and `completed`/`failed` summed over the cells."""
    data = _load_json(path)
    if not isinstance(data, dict) or not isinstance(data.get("metadata"), dict) or \
            not isinstance(data.get("results"), list):
        raise ResultError(f"{path.name}: no 'metadata' object and 'results' list; "
                          f"not {fmt.what} result")
    cells: dict[str, Any] = {}
    for i, cell in enumerate(data["results"]):
        if not isinstance(cell, dict) or not all(
                isinstance(cell.get(k), int) for k in ("concurrency", "context_tokens")):
            raise ResultError(f"{path.name}: results[{i}] has no integer 'concurrency' and "
                              "'context_tokens'")
        key = f"c{cell['concurrency']}_ctx{cell['context_tokens']}"
        cells[key] = {k: _finite(cell[k]) for k in DECODE_CELL_KEYS if _scalar(cell.get(k))}
    prefill = data.get("prefill")
    if not isinstance(prefill, dict):
        prefill = {}
    runs = {str(k): {n: _finite(x) for n, x in sorted(v.items()) if _scalar(x)}
            for k, v in prefill.items() if isinstance(v, dict)}
    meta = data["metadata"]
    metrics: dict[str, Any] = {k: _finite(meta[k]) for k in DECODE_META_KEYS
                               if _scalar(meta.get(k))}
    metrics.update({"tool": fmt.label, "cells": cells, "prefill": runs,
                    "completed": _total(cells, "num_completed"),
                    "failed": _total(cells, "num_errors")})
    return metrics


def _total(cells: Mapping[str, Any], key: str) -> int:
    return sum(v for c in cells.values() if isinstance(v := c.get(key), int))


def _scalar(value: Any) -> bool:
    return value is not None and isinstance(value, str | int | float)


READERS: Mapping[str, Callable[[Path, engines.ResultFormat, str], dict[str, Any]]] = {
    "serving": read_serving,
    "task-scores": read_task_scores,
    "text": read_text,
    "kld-capture": read_kld_capture,
    "probe": read_probe,
    "decode-matrix": read_decode_matrix,
}


def parse_result(parser: str, path: Path, command: str = "",
                 env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Parse one client result: `parser` is a client tool's name (its result format) or
    "text"; `env` is the point's own environment (its sweep variable). ResultError when it
    cannot."""
    tool = engines.client_tool(parser)
    if tool is None and parser != "text":
        raise ResultError(f"no parser named {parser!r}")
    fmt = tool.result if tool is not None else engines.TEXT_RESULT
    if fmt.kind == "serving":
        return read_serving(path, fmt, command, env)
    return READERS[fmt.kind](path, fmt, command)


# --------------------------------------------------------------------------- helpers


def _pick(data: Mapping[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    return {k: _finite(data[k]) for k in keys if k in data}


def _finite(value: Any) -> Any:
    """JSON has no Infinity/NaN (some tools write `"request_rate": Infinity`): keep them as
    text."""
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


_PARAM = re.compile(r"\$\{(\w+)(?::-([^}]*))?\}|\$(\w+)")
_ARITH = re.compile(r"^\$\(\((.*)\)\)$", re.DOTALL)
_ARITH_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
              ast.FloorDiv: operator.floordiv, ast.Div: operator.floordiv}


def count_value(word: str | None, env: Mapping[str, str]) -> int | None:
    """A count written as a number, `${VAR:-default}`, or shell arithmetic of those
    (`$(( ${CONCURRENCY:-8} * 32 ))`), with variables from `env`; None for anything else.
    Nothing is run: the arithmetic is read, never given to a shell."""
    if word is None:
        return None
    text = _PARAM.sub(lambda m: env.get(m[1] or m[3]) or (m[2] or ""), word).strip()
    arith = _ARITH.match(text)
    if arith:
        text = arith[1]
    try:
        value = _arith(ast.parse(text.strip(), mode="eval").body)
    except (SyntaxError, ValueError, ZeroDivisionError):
        return None
    return value if value >= 0 else None


def _arith(node: ast.AST) -> int:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _ARITH_OPS:
        return _ARITH_OPS[type(node.op)](_arith(node.left), _arith(node.right))
    raise ValueError("not integer arithmetic")


def _flag_value(command: str, flag: str) -> str | None:
    try:
        words = [w.value for w in tokenize(command) if not w.op]
    except ShellSyntaxError:
        return None
    for i, word in enumerate(words):
        if word == flag and i + 1 < len(words):
            return words[i + 1]
        if word.startswith(flag + "="):
            return word.split("=", 1)[1]
    return None
