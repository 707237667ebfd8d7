"""The support bundle: everything a helper needs to answer a newcomer's question about one
runbook, as one Markdown paste (page, exact commands, parallelism settings, GPU layout, the
latest run record, and the telling lines of the newcomer's logs)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from wikitools.runbook.blocks.declared import Runbook
from wikitools.runbook.engines.catalog import engine
from wikitools.runbook.engines.secrets import mask_env, mask_text
from wikitools.runbook.execution.host import HostFacts, summarise_topology
from wikitools.runbook.records.record import RecordError, latest_record, record_rel_path

LOG_TAIL = 60
LOG_CONTEXT = 2  # lines shown before and after each telling line
# Lines worth a helper's attention beyond the engine's fatal patterns.
_NOTABLE = (
    r"\bERROR\b",
    r"\bWARNING\b.*(?:backend|kernel|fallback|not supported|unsupported)",
    r"Using \S+ (?:attention )?backend",
    r"GPU KV cache size",
    r"Maximum concurrency",
    r"NCCL (?:WARN|ERROR)",
)


@dataclass(frozen=True, slots=True)
class LogExcerpt:
    path: str
    notable: tuple[tuple[int, str], ...]  # (1-based line, text), context included
    tail: tuple[str, ...]
    total_lines: int


def read_log(path: Path, engine_name: str | None) -> LogExcerpt:
    """The telling lines of a log (fatal patterns, errors, backend choices) and its tail."""
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    eng = engine(engine_name)
    patterns = [*(eng.fatal_log if eng else ()), *_NOTABLE]
    rx = re.compile("|".join(f"(?:{p})" for p in patterns))
    keep: set[int] = set()
    for i, line in enumerate(lines):
        if rx.search(line):
            keep.update(range(max(0, i - LOG_CONTEXT), min(len(lines), i + LOG_CONTEXT + 1)))
    notable = tuple((i + 1, mask_text(lines[i])) for i in sorted(keep))
    tail = tuple(mask_text(line) for line in lines[-LOG_TAIL:])
    return LogExcerpt(path.as_posix(), notable, tail, len(lines))


def _settings(runbook: Runbook) -> list[tuple[str, str]]:
    cmd = runbook.server.command
    spec = cmd.speculative or {}
    method = str(spec.get("method", "")) if spec else ""
    engine_name = cmd.engine or runbook.server.engine or "?"
    rows = [
        ("engine", f"{engine_name} ({cmd.launcher or 'launcher not found'})"),
        ("model", cmd.model or "?"),
        ("image", cmd.image or "none (bare metal)"),
        ("tensor parallel (TP)", str(cmd.tp or 1)),
        ("pipeline parallel (PP)", str(cmd.pp or 1)),
        ("data parallel (DP)", str(cmd.dp or 1)),
        ("decode context parallel (DCP)", str(cmd.dcp or 1)),
        ("expert parallel (EP)", "on" if cmd.ep else "off"),
        ("speculative decoding (MTP / DSpark / DFlash)", _spec_text(spec, method)),
        ("quantization", cmd.quantization or "from the checkpoint"),
        ("KV-cache dtype", cmd.kv_cache_dtype or "auto"),
        ("port", str(runbook.server.port)),
    ]
    req = runbook.server.requirements
    rows.append(
        (
            "page requires",
            f"{req.gpus or 'any number of'} GPU(s), arch {', '.join(req.arch) or 'any'}"
            + (f", {req.min_mem_gib:g} GiB free each" if req.min_mem_gib else ""),
        )
    )
    return rows


def _spec_text(spec: dict[str, object], method: str) -> str:
    if not spec:
        return "off"
    tokens = spec.get("num_speculative_tokens")
    return f"{method or 'on'}" + (f", {tokens} speculative tokens" if tokens is not None else "")


def _gpu_section(facts: HostFacts | None) -> list[str]:
    if facts is None:
        return ["(not collected: --no-gpu)"]
    if not facts.smi_found:
        return ["nvidia-smi not found: no NVIDIA driver visible on this host."]
    if facts.smi_error:
        return [f"nvidia-smi failed: {facts.smi_error}"]
    out = [f"driver {facts.driver or '?'}, CUDA {facts.cuda or '?'}, {len(facts.gpus)} GPU(s)", ""]
    out += [
        "| GPU | name | compute capability | memory used / total (MiB) | PCI bus |",
        "|---|---|---|---|---|",
    ]
    for g in facts.gpus:
        out.append(
            f"| {g.index} | {g.name} | {g.compute_capability} | "
            f"{g.memory_used_mib} / {g.memory_total_mib} | {g.pci_bus_id} |"
        )
    every = tuple(g.index for g in facts.gpus)
    out += ["", f"topology between GPUs: {summarise_topology(facts.topology, every)}"]
    if facts.apps:
        out.append(f"processes holding GPU memory: {len(facts.apps)}")
    return out


def _latest(root: Path, runbook_id: str) -> str:
    try:
        rec = latest_record(root, runbook_id)
    except RecordError as exc:
        return f"unreadable: {exc}"
    if rec is None:
        return "none (never run)"
    failed = f", failed at {rec.failed_step}" if rec.failed_step else ""
    return f"`{record_rel_path(rec)}` ({rec.status}{failed})"


def build_bundle(
    runbook: Runbook,
    *,
    root: Path,
    title: str | None,
    status: str | None,
    facts: HostFacts | None,
    logs: list[LogExcerpt],
) -> str:
    """The bundle as Markdown, ready to paste into a chat or an issue."""
    s = runbook.server
    out = [
        f"# Support bundle: {runbook.ref}",
        "",
        f"- page: `{runbook.page}` — {title or 'untitled'} (status: {status or 'none'})",
        f"- runbook blocks hash: `{runbook.blocks_hash}`",
    ]
    out.append(f"- latest run record: {_latest(root, runbook.id)}")
    out += [
        "",
        "## Launch command (as on the page)",
        "",
        "```bash",
        mask_text(s.content.rstrip()),
        "```",
        "",
    ]
    if s.extra_env:
        masked = mask_env(dict(s.extra_env))
        out += [
            "Extra environment for runs: "
            + " ".join(f"{k}={v}" for k, v in sorted(masked.items())),
            "",
        ]
    out += ["## Settings understood from the command", "", "| setting | value |", "|---|---|"]
    out += [f"| {k} | {v} |" for k, v in _settings(runbook)]
    out += ["", "## Client commands", ""]
    if not runbook.clients:
        out.append("(none on the page)")
    for c in runbook.clients:
        sweep = f", sweep {c.sweep.text()}" if c.sweep else ""
        out += [
            f"`{c.name}` ({c.kind}{sweep}):",
            "",
            "```bash",
            mask_text(c.content.rstrip()),
            "```",
            "",
        ]
    out += ["## GPU layout", "", *_gpu_section(facts), ""]
    for log in logs:
        out += [f"## Log `{log.path}` ({log.total_lines} lines)", ""]
        if log.notable:
            out += ["Telling lines (with line numbers):", "", "```text"]
            out += [f"{n:>6}  {text}" for n, text in log.notable]
            out += ["```", ""]
        out += [f"Last {len(log.tail)} lines:", "", "```text", *log.tail, "```", ""]
    if not logs:
        out += ["## Logs", "", "(none attached: pass --log server.log)", ""]
    out += [
        "## Question",
        "",
        "- What I ran: (the commands above, or say what you changed)",
        "- What I expected:",
        "- What happened instead:",
        "- What I already tried:",
    ]
    return mask_text("\n".join(out) + "\n")
