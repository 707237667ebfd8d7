"""A record told in words: numbers in their formats, table-safe text, the hardware, engine and
server facts a provenance line names, the headline of a run."""
from __future__ import annotations

import re
from typing import Any

from wikitools.runbook.engines import catalog as engines
from wikitools.runbook.records.record import (
    Record,
)
from wikitools.runbook.records.stats import number
from wikitools.runbook.rendering.escape import escaped, md_code, md_text

DASH = "–"


def fmt(value: Any, pattern: str) -> str:
    """A number in an explicit format; a dash when missing or not a number."""
    return DASH if number(value) is None else pattern.format(value)


def day(stamp: str) -> str:
    return stamp[:10]


def hardware(record: Record) -> str:
    host = record.host
    gpus = host.get("gpus") or []
    if host.get("cpu_only") or not gpus:
        return "a CPU-only host (no GPU)"
    names = sorted({md_text(g.get("name", "?")) for g in gpus})
    ccs = sorted({md_text(g.get("compute_capability", "?")) for g in gpus})
    archs = ", ".join(f"sm{c.replace('.', '')} (compute capability {c})" for c in ccs)
    count = host.get("gpu_count") or len(gpus)
    parts = [f"{count} × {' + '.join(names)}, {archs}"]
    if host.get("driver"):
        parts.append(f"driver {md_text(host['driver'])}")
    if host.get("cuda"):
        parts.append(f"CUDA {md_text(host['cuda'])}")
    topo = host.get("topology")
    if topo and topo != "none" and count > 1:
        parts.append(f"GPU link {md_text(topo)}")
    return ", ".join(parts)


def engine_text(record: Record) -> str:
    eng = record.engine
    name = md_text(engines.display_name(eng.get("name")))
    text = (f"{name} {md_text(eng['version'])}" if eng.get("version")
            else f"{name} (version not reported)")
    if eng.get("image"):
        text += f", image {md_code(eng['image'])}"
        if eng.get("image_digest"):
            text += f" ({md_code(eng['image_digest'])})"
    return text


def server_facts(record: Record) -> str:
    m = escaped(record.markers)
    parts = []
    if m.get("attention_backend"):
        backend = f"attention backend {m['attention_backend']}"
        if m.get("flash_attn_version"):
            backend += f" (FlashAttention {m['flash_attn_version']})"
        parts.append(backend)
    tokens = m.get("kv_cache_tokens", m.get("metrics_kv_cache_tokens"))
    if isinstance(tokens, int):
        kv = f"KV cache {tokens:,} tokens"
        if isinstance(m.get("kv_cache_gib"), int | float):
            kv += f" ({m['kv_cache_gib']:,.2f} GiB)"
        parts.append(kv)
    if isinstance(m.get("max_concurrency"), int | float) and isinstance(
            m.get("max_concurrency_tokens"), int | float):
        parts.append(
            f"maximum concurrency {m['max_concurrency']:,.2f}× at "
            f"{m['max_concurrency_tokens']:,} tokens per request"
        )
    if m.get("moe_backend"):
        parts.append(f"MoE backend {m['moe_backend']}")
    if m.get("compiled") is True:
        parts.append("torch.compile on")
    elif m.get("compiled") is False:
        parts.append("eager (no torch.compile)")
    if m.get("cuda_graphs") is False:
        parts.append("CUDA graphs off")
    elif m.get("cuda_graphs") is True:
        parts.append("CUDA graphs on")
    return "; ".join(parts)


_SPEC = re.compile(r"--speculative[-_](?:config|algorithm|algo)\b|\b(?:mtp|dspark|dflash)\b",
                   re.IGNORECASE)


def speculative(record: Record) -> str | None:
    """What makes the server decode speculatively (a flag or a method named in its command),
    or None; such a run's throughput is trusted only beside its acceptance rate."""
    commands = [str(v.server.get("command", "")) for v in record.each_variant()]
    for command in commands:
        m = _SPEC.search(command)
        if m:
            return m.group(0)
    return None


def pipeline_check(record: Record) -> str | None:
    """Why a record is a plumbing check rather than a measurement, or None."""
    command = " ".join(str(v.server.get("command", "")) for v in record.each_variant())
    dummy = "--load-format dummy" in command or "--load-format=dummy" in command
    cpu = bool(record.host.get("cpu_only"))
    if "--random-weights" in command and not dummy:
        where = " on a CPU-only host" if cpu else ""
        return f"This run served saved random weights (`--random-weights`){where}."
    if dummy and cpu:
        return "This run served dummy weights (`--load-format dummy`) on a CPU-only host."
    if dummy:
        return "This run served dummy weights (`--load-format dummy`)."
    if cpu:
        return "This run used a CPU-only host."
    return None


def headline(record: Record) -> str:
    if not record.ok:
        msg = record.message or ""
        msg = msg if len(msg) <= 80 else msg[:77] + "..."
        return f"failed at {md_code(record.failed_step)}: {md_text(msg)}"
    best: tuple[float, str, str] | None = None
    for variant in record.each_variant():
        for client in variant.clients:
            if client.kind != "serving":
                continue
            for p in client.points:
                v = p.metrics.get("output_throughput")
                if isinstance(v, int | float) and (best is None or v > best[0]):
                    where = ([f"{md_text(client.sweep_var)}={md_text(p.value)}"]
                             if client.sweep_var else [])
                    if variant.coords:
                        where.insert(0, f"variant {md_text(variant.name)}")
                    best = (v, md_text(client.name), f" at {', '.join(where)}" if where else "")
    if best is None:
        return "ok"
    return f"best output {best[0]:,.1f} tok/s ({best[1]}{best[2]})"


def record_archs(record: Record) -> set[str]:
    """`sm120`-style architectures of the GPUs a record ran on; {"cpu"} for a CPU-only host."""
    gpus = record.host.get("gpus") or []
    if record.host.get("cpu_only") or not gpus:
        return {"cpu"}
    return {"sm" + str(g.get("compute_capability", "")).replace(".", "") for g in gpus}


def short_hardware(record: Record) -> str:
    """`1 × NVIDIA H200` style label of a record's GPUs; `CPU` for a CPU-only host."""
    gpus = record.host.get("gpus") or []
    if record.host.get("cpu_only") or not gpus:
        return "CPU"
    names = sorted({str(g.get("name", "?")).removeprefix("NVIDIA ") for g in gpus})
    return f"{len(gpus)} × {' + '.join(names)}"
