"""The receipt views of results regions: `kld` (KL divergence of each configuration from one
reference capture), `capacity` (the engine's own KV-cache figures and which request lengths
fit), `probes` (n/N correct at cC) and `receipt` (the hashes and versions that reproduce a
run). Each row is one server configuration: the runbook's latest successful run, and those of
the runbooks named by `with=`."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from wikitools.runbook.records.record import (
    ClientResult,
    Point,
    Record,
    VariantResult,
    record_rel_path,
)
from wikitools.runbook.records.resume import newest_shown
from wikitools.runbook.rendering.escape import md_code, md_text

VIEWS = ("kld", "capacity", "probes", "receipt")
DASH = "–"


@dataclass(frozen=True, slots=True)
class Config:
    """One server configuration in a receipt table: a label, its record and, for a record of
    several server variants, which one (None: the record's only configuration)."""

    label: str
    record: Record
    variant: VariantResult | None = None

    @property
    def part(self) -> VariantResult:
        return self.variant if self.variant is not None else self.record.each_variant()[0]


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def fmt_small(value: Any) -> str:
    """KLD-sized numbers: 4 significant digits, scientific below 0.001, exactly 0 as 0."""
    v = _num(value)
    if v is None:
        return DASH
    if v == 0:
        return "0"
    return f"{v:.3e}" if abs(v) < 1e-3 else f"{v:.4g}"


_PARAM = re.compile(r"\$\{(\w+)(?::-([^}]*))?\}|\$(\w+)")


def expand(text: str, env: Mapping[str, str]) -> str:
    """`${VAR:-default}` and `$VAR` in a command as written, from a variant's values."""
    return _PARAM.sub(lambda m: env.get(m[1] or m[3]) or (m[2] or ""), text)


def flag_value(command: str, *flags: str) -> str | None:
    for flag in flags:
        m = re.search(rf"(?:^|\s){re.escape(flag)}(?:=|\s+)(['\"]?)([^\s'\"]+)\1", command)
        if m:
            return m[2]
    return None


def configs(records: Sequence[Record], others: Mapping[str, Sequence[Record]],
            compared: Sequence[str]) -> list[Config]:
    """The latest successful record of the runbook and of each runbook of `with=` (or the
    finished variants of a newer run that stopped part-way)."""
    out = []
    for rid, recs in [("", records), *[(r, others.get(r, ())) for r in compared]]:
        ok = newest_shown(list(recs))
        if ok is None:
            continue
        if ok.variants:
            out += [Config(v.name or ok.runbook, ok, v) for v in ok.variants]
        else:
            out.append(Config(rid or ok.runbook, ok))
    return out


def _clients(cfg: Config, kind: str) -> list[ClientResult]:
    return [c for c in cfg.part.clients if c.kind == kind]


def _point_label(client: ClientResult, point: Point) -> str:
    return f"{client.name} [{point.value}]" if point.value is not None else client.name


# --------------------------------------------------------------------------- kld


def kld_rows(cfgs: Sequence[Config],
             notes: list[str] | None = None) -> tuple[list[list[str]], list[str]]:
    """The table's rows and the reference captures named; `notes` collects, per configuration,
    how many reference tokens fell outside the candidate's top-k."""
    rows: list[list[str]] = []
    refs: list[str] = []
    notes = notes if notes is not None else []
    for cfg in cfgs:
        for client in _clients(cfg, "kld"):
            for p in client.points:
                m = p.metrics
                if m.get("kld_reference_sha256"):
                    ref = f"{md_code(m['kld_reference'])} ({md_code(m['kld_reference_sha256'])})"
                    refs.append(ref) if ref not in refs else None
                k = m.get("kld_top_k", m.get("top_k"))
                top_k = "all" if k == -1 else (md_text(k) if k is not None else DASH)
                if "kld_mean" not in m or m.get("kld_not_exercised"):
                    note = (m.get("kld_not_exercised") or m.get("kld_problem")
                            or m.get("kld_note") or p.message or p.status)
                    rows.append([md_text(cfg.label), md_text(note), DASH, DASH, DASH,
                                 md_text(m.get("positions", DASH)), top_k, DASH])
                    continue
                est = m.get("kld_estimated")
                if isinstance(est, int) and est > 0:
                    slots = m.get("kld_positions", 0) * m.get("kld_runs", 0) * (k or 0)
                    notes.append(f"{md_text(cfg.label)}: {est:,} of {slots:,} reference tokens "
                                 "were outside the candidate's top-k, their probabilities "
                                 "estimated")
                agree = _num(m.get("kld_top1_agreement"))
                rows.append([
                    md_text(cfg.label), fmt_small(m["kld_mean"]), fmt_small(m.get("kld_run_sd")),
                    fmt_small(m.get("kld_position_sd")), md_text(m.get("kld_runs", DASH)),
                    md_text(m.get("kld_positions", DASH)), top_k,
                    f"{agree * 100:.1f} %" if agree is not None else DASH,
                ])
    return rows, refs


# --------------------------------------------------------------------------- capacity


def _gib(value: Any) -> str:
    v = _num(value)
    return DASH if v is None else f"{v:,.2f}"


def fits(length: int, kv_tokens: int | None, max_len: int | None) -> str:
    if max_len is not None and length > max_len:
        return f"no (max model length {max_len:,})"
    if kv_tokens is None:
        return DASH
    return "yes" if length <= kv_tokens else f"no (KV cache holds {kv_tokens:,})"


def capacity_rows(cfgs: Sequence[Config], lengths: Sequence[int]) -> list[list[str]]:
    rows = []
    for cfg in cfgs:
        m = cfg.part.markers
        cmd = expand(str(cfg.part.server.get("command", "")), dict(cfg.part.coords))
        engine_cfg = m.get("cache_config") or {}
        kv_fmt = (engine_cfg.get("cache_dtype") or m.get("kv_cache_dtype")
                  or flag_value(cmd, "--kv-cache-dtype") or "auto")
        mem = (engine_cfg.get("gpu_memory_utilization")
               or flag_value(cmd, "--gpu-memory-utilization", "--mem-fraction-static") or DASH)
        tokens = m.get("kv_cache_tokens", m.get("metrics_kv_cache_tokens"))
        tokens = tokens if isinstance(tokens, int) else None
        max_len = m.get("max_model_len")
        if not isinstance(max_len, int):
            flagged = flag_value(cmd, "--max-model-len", "--context-length")
            max_len = int(flagged) if flagged and flagged.isdigit() else None
        conc = _num(m.get("max_concurrency"))
        at = m.get("max_concurrency_tokens")
        rows.append([
            md_text(cfg.label), md_text(kv_fmt), md_text(mem), _gib(m.get("model_load_gib")),
            _gib(m.get("kv_cache_gib")), f"{tokens:,}" if tokens is not None else DASH,
            f"{conc:,.2f}× at {at:,}" if conc is not None and isinstance(at, int) else DASH,
            *[fits(n, tokens, max_len) for n in lengths],
        ])
    return rows


# --------------------------------------------------------------------------- probes


def probe_rows(cfgs: Sequence[Config]) -> list[list[str]]:
    rows = []
    for cfg in cfgs:
        for client in _clients(cfg, "probe"):
            for p in client.points:
                m = p.metrics
                if "correct" not in m:
                    rows.append([md_text(cfg.label), md_text(p.message or p.status), DASH, DASH])
                    continue
                result = md_text(f"{m['correct']}/{m['total']} correct at "
                                 f"c{m.get('concurrency', '?')}")
                failures = (f"{md_text(m.get('failures', 0))} kept in {md_code(p.result_file)}"
                            if m.get("failures") else "none")
                rows.append([md_text(cfg.label), result, md_text(m.get("probe_file") or DASH),
                             failures])
    return rows


# --------------------------------------------------------------------------- receipt


def receipt_lines(rec: Record) -> list[str]:
    """One record's receipt: engine, image, model snapshot, file hashes, cache folders."""
    receipt = rec.receipt or {}
    eng = rec.each_variant()[0].engine
    lines = [f"Record {md_code(record_rel_path(rec))}, blocks {md_code(rec.blocks_hash)}:", ""]
    lines.append(f"- engine: {md_text(eng.get('name') or DASH)} "
                 f"{md_text(eng.get('version') or '(version not reported)')}")
    if eng.get("image"):
        lines.append(f"- image: {md_code(eng['image'])} digest "
                     f"{md_code(eng['image_digest']) if eng.get('image_digest') else DASH}")
    else:
        lines.append("- image: none (the engine ran from the host's Python)")
    model = receipt.get("model") or {}
    if model:
        snap = model.get("snapshot")
        lines.append(f"- model: {md_code(model.get('model'))}, snapshot "
                     f"{md_code(snap) if snap else DASH} ({md_text(model.get('from'))})")
    files = list(receipt.get("files") or ())
    kept = [f for f in files if not str(f.get("path", "")).startswith(".artifacts/")]
    for f in kept:
        digest = (md_code(f.get("sha256")) if f.get("sha256") is not None
                  else f"not hashed ({md_text(f.get('not_hashed'))})")
        lines.append(f"- {md_text(f.get('role'))}: {md_code(f.get('path'))} {digest}")
    if len(kept) < len(files):
        results = {s.result_file for v in rec.each_variant() for c in v.clients
                   for p in c.points for s in p.samples if s.result_file}
        n = sum(1 for f in files if f.get("path") in results)
        others = len(files) - len(kept) - n
        also = f" and {others} other file{'s' if others != 1 else ''}" if others else ""
        lines.append(f"- {n} result file{'s' if n != 1 else ''}{also} of the run under "
                     f"{md_code(f'{rec.artifacts_dir}/')} (kept on the host that ran it; their "
                     "hashes are in the record)")
    spec = receipt.get("speculative")
    if spec:
        conf = ", ".join(f"{k}={v}" for k, v in spec.items())
        lines.append(f"- speculative decoding as configured: {md_text(conf)}")
    for c in receipt.get("caches") or ():
        state = "warm" if c.get("warm") else "cold (empty or absent)"
        where = ", the run's own, shared by its server starts" if c.get("shared") else ""
        lines.append(f"- cache {md_text(c.get('name'))}: {md_code(c.get('path'))}{where} — "
                     f"{state} at the first start")
    lines += start_lines(rec)
    if not receipt:
        lines.append("- this record predates receipts: no file hashes were kept")
    return [*lines, ""]


def start_lines(rec: Record) -> list[str]:
    """Per server start: warm (which of its caches already held something) or cold, and how
    long it took to be ready; nothing for a record made before starts were noted."""
    out = []
    for v in rec.each_variant():
        warm = v.markers.get("caches_warm_at_start")
        if not isinstance(warm, Mapping) or v.status == "skipped":
            continue
        filled = [str(name) for name, full in warm.items() if full is True]
        state = f"warm ({', '.join(filled)})" if filled else "cold (every cache empty)"
        ready = _num(v.timings.get("ready_s"))
        took = f", ready in {ready:,.1f} s" if ready is not None else ""
        label = md_code(v.name) if v.name else "the server"
        out.append(f"- start of {label}: {md_text(state)}{took}")
    return out


def render(view: str, cfgs: Sequence[Config], attrs: Callable[[str], str | None],
           template: Callable[[dict[str, Any]], str]) -> str:
    paths = list(dict.fromkeys(md_code(record_rel_path(c.record)) for c in cfgs))
    ctx: dict[str, Any] = {"view": view, "configs": cfgs, "rows": [], "refs": [], "lines": [],
                           "lengths": [], "records": paths, "notes": []}
    if view == "kld":
        ctx["notes"] = []
        ctx["rows"], ctx["refs"] = kld_rows(cfgs, ctx["notes"])
    elif view == "capacity":
        raw = attrs("lengths") or ""
        ctx["lengths"] = [int(x) for x in raw.split(",") if x.strip().isdigit()]
        ctx["rows"] = capacity_rows(cfgs, ctx["lengths"])
    elif view == "probes":
        ctx["rows"] = probe_rows(cfgs)
    else:
        recs = list({id(c.record): c.record for c in cfgs}.values())
        ctx["lines"] = [line for rec in recs for line in receipt_lines(rec)]
    ctx["random_weights"] = any(_random_weights(c.part) for c in cfgs)
    return template(ctx)


def _random_weights(part: VariantResult) -> bool:
    cmd = str(part.server.get("command", ""))
    return "--load-format dummy" in cmd or "--random-weights" in cmd or \
        "--load-format=dummy" in cmd
