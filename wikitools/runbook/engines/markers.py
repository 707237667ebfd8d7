"""Facts an engine states about itself: startup log lines (attention backend, KV-cache size,
CUDA graphs, versions) and Prometheus `/metrics` samples (spec-decode counters, cache config)."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from typing import Any

from wikitools.core.errors import InputError
from wikitools.runbook.engines import log_catalog

_SHOWN = 120  # characters of an unreadable line quoted in the message


class MarkerError(InputError):
    """A log line that names a fact (a KV-cache size, a concurrency) whose value cannot be
    read: `line` is its 1-based number in the log."""

    def __init__(self, line: int, name: str, text: str) -> None:
        shown = text.strip()
        if len(shown) > _SHOWN:
            shown = shown[:_SHOWN] + f"… ({len(shown):,} characters)"
        super().__init__(f"cannot read {name} from the engine's log line {shown!r}")
        self.line = line


def _convert(name: str, convert: Callable[[re.Match[str]], dict[str, Any]],
             m: re.Match[str], number: int, line: str) -> dict[str, Any]:
    try:
        return convert(m)
    except (ValueError, ArithmeticError):  # "per request: .x", an int of 5,000 digits
        raise MarkerError(number, name, line) from None


def scan_markers(lines: list[str] | tuple[str, ...]) -> dict[str, Any]:
    """Backend and capacity facts from server log lines; the first match of each marker wins.
    A matching line whose value cannot be read is a MarkerError naming the line."""
    found: dict[str, Any] = {}
    pending = list(log_catalog.LOG_MARKERS)
    for number, line in enumerate(lines, 1):
        if not pending:
            break
        keep = []
        for name, pattern, convert in pending:
            m = pattern.search(line)
            if m:
                for k, v in _convert(name, convert, m, number, line).items():
                    found.setdefault(k, v)
            else:
                keep.append((name, pattern, convert))
        pending = keep
    return found


# --------------------------------------------------------------------------- prometheus

_PROM_LINE = re.compile(r"^(?P<name>[a-zA-Z_:][\w:]*)(?:\{(?P<labels>.*)\})?\s+(?P<value>\S+)")
_PROM_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


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
    names = {v: k for k, v in log_catalog.SPEC_COUNTERS.items()}
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
    """KV-cache facts from a Prometheus `/metrics` (the cache-config metric's labels)."""
    out: dict[str, Any] = {}
    for name, labels, _value in parse_prometheus(text):
        if name == log_catalog.CACHE_CONFIG_METRIC and "cache_config" not in out:
            out["cache_config"] = {k: labels[k] for k in sorted(labels)
                                   if k in log_catalog.CACHE_CONFIG_KEYS}
        elif (name == log_catalog.GPU_BLOCKS_METRIC and "num_gpu_blocks" not in out
              and math.isfinite(_value)):  # an engine's NaN is no number of blocks
            out["num_gpu_blocks"] = int(_value)
    cfg = out.get("cache_config", {})
    for key in ("kv_cache_size_tokens", "num_gpu_blocks", "block_size"):
        if key in cfg and cfg[key].isdigit():
            out.setdefault(key if key != "kv_cache_size_tokens" else "metrics_kv_cache_tokens",
                           int(cfg[key]))
    return out


def server_info_markers(data: Mapping[str, Any]) -> dict[str, Any]:
    """A `/server_info` answer: backends, KV capacity and version."""
    out: dict[str, Any] = {}
    for key in log_catalog.SERVER_INFO_KEYS:
        if data.get(key) is not None:
            out[key if key != "version" else "engine_version"] = data[key]
    return out
