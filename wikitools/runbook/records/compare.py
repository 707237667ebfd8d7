"""Two run records side by side, honestly: what changed between the runs comes first (a changed
command, a changed engine, or, when commands and engine are the same, the likely cause of a
move — another card, other clocks, power or driver); then each sweep point's numbers with their
ratio and a verdict only where both runs measured it; then the provenance differences that are
real (not fields an older record lacks, not per-run ids). A run with server variants is compared
variant by variant."""

from __future__ import annotations

import difflib
import re
import shlex
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from wikitools.runbook.engines.catalog import RESULT_PATH_FLAGS
from wikitools.runbook.engines.shell import split_words
from wikitools.runbook.records.record import ClientResult, Record
from wikitools.runbook.records.stats import Spread, beyond_spread

# (label, metric key, True when higher is better)
METRICS: tuple[tuple[str, str, bool], ...] = (
    ("output tok/s", "output_throughput", True),
    ("TTFT median (ms)", "median_ttft_ms", False),
    ("TPOT median (ms)", "median_tpot_ms", False),
)

# Record fields that explain a difference; the GPU state and markers are compared key by key.
_PROVENANCE_ROOTS = ("engine", "host", "server", "markers", "gpu_state")
# Per-run identities, volatile readings and what the headline already says.
_IGNORED = ("server.log_tail", "server.run_tag", "server.containers", "server.command",
            "server.port", "engine.image_id", "host.gpus.memory_free_mib", "host.hostname_hash",
            "markers.init_engine_s", "markers.model_load_s", "markers.cuda_graph_capture_s",
            "markers.compile_s", "gpu_state.before.processes.pid",
            "gpu_state.after.processes.pid", "gpu_state.after.processes",
            *(f"gpu_state.{when}.gpus.{key}" for when in ("before", "after") for key in (
                "temperature_c", "power_draw_w", "utilization_gpu_pct", "fan_pct",
                "utilization_memory_pct", "memory_used_mib", "clocks_sm_mhz", "clocks_mem_mhz",
                "pstate", "index", "uuid", "driver")),
            "gpu_state.before.gpus.clocks_event_reasons")  # likely_causes names uuid, driver
_ENGINE_FIELDS = ("engine.name", "engine.version", "engine.image", "markers.engine_version")
# Flags the executor adds to a client command for each run: not part of what was measured.
_PER_RUN_FLAGS = RESULT_PATH_FLAGS | {"--base-url", "--port"}


@dataclass(frozen=True, slots=True)
class Row:
    client: str
    point: str  # "CONCURRENCY=8" or "run"
    metric: str
    old: Spread | None
    new: Spread | None
    higher_is_better: bool
    command_changed: bool = False  # the client's command differs between the runs
    same_setup: bool = False  # commands and engine are the same: a move is not a result

    @property
    def ratio(self) -> float | None:
        if self.old is None or self.new is None or self.old.median == 0:
            return None
        return self.new.median / self.old.median

    @property
    def comparable(self) -> bool:
        return self.ratio is not None

    @property
    def verdict(self) -> str:
        """not comparable | within spread | changed command | moved up | moved down |
        improvement | regression."""
        if self.old is None or self.new is None or self.ratio is None:
            return "not comparable"
        if not beyond_spread(self.old, self.new):
            return "within spread"
        if self.command_changed:
            return "changed command"
        if self.same_setup:
            return "moved up" if self.new.median > self.old.median else "moved down"
        better = (self.new.median > self.old.median) == self.higher_is_better
        return "improvement" if better else "regression"


@dataclass(frozen=True, slots=True)
class Difference:
    field: str  # dotted path, e.g. "engine.version", "gpu_state.before.gpus[0].power_limit_w"
    old: Any
    new: Any


@dataclass(frozen=True, slots=True)
class Comparison:
    old: Record
    new: Record
    rows: tuple[Row, ...]
    differences: tuple[Difference, ...]  # real provenance differences, beyond the headline
    commands: tuple[Difference, ...] = ()  # server and client commands that differ (words)
    engine: Difference | None = None  # engine name/version/image when they differ
    causes: tuple[str, ...] = ()  # what else differs that moves numbers (card, clocks, …)
    only_new: tuple[str, ...] = ()  # fields the older record does not have at all
    variant: str | None = None  # the server variant compared (None without variants)

    @property
    def same_setup(self) -> bool:
        return not self.commands and self.engine is None

    @property
    def changed(self) -> tuple[Row, ...]:
        """Rows whose numbers differ by more than their spreads."""
        return tuple(r for r in self.rows if r.comparable and r.verdict != "within spread")

    @property
    def comparable_rows(self) -> tuple[Row, ...]:
        return tuple(r for r in self.rows if r.comparable)

    def headline(self) -> list[str]:
        """What differs between the two runs, most important first."""
        out = []
        for d in self.commands:
            out.append(f"the {d.field} changed: {d.old} -> {d.new}")
        if self.engine is not None:
            out.append(f"the engine changed: {self.engine.old} -> {self.engine.new}")
        if self.same_setup and self.changed:
            why = "; ".join(self.causes) if self.causes else (
                "nothing recorded differs (run-to-run variation)" if not self.only_new else
                "the older record lacks " + ", ".join(self.only_new)
                + ", so a change of card, clocks or power cannot be ruled out")
            out.append("same commands and engine: a number that moved is a difference between "
                       f"the runs, not an improvement or a regression; likely cause: {why}")
        elif self.causes:
            out.append("also different: " + "; ".join(self.causes))
        return out

    def verdict(self) -> str:
        """One closing line; never an all-clear when nothing could be compared."""
        rows = self.comparable_rows
        if not rows:
            return ("nothing comparable: no point was measured by both runs"
                    + (f" ({_why_none(self)})" if _why_none(self) else ""))
        changed = self.changed
        n = len({(r.client, r.point) for r in rows})
        if not changed:
            return f"no number moved beyond the spread at the {n} point(s) both runs measured"
        counts: dict[str, int] = {}
        for r in changed:
            counts[r.verdict] = counts.get(r.verdict, 0) + 1
        parts = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
        return f"{len(changed)} number(s) moved beyond the spread: {parts}"


def _why_none(cmp: Comparison) -> str:
    old_pts = {r.point for r in cmp.rows if r.old is not None}
    new_pts = {r.point for r in cmp.rows if r.new is not None}
    if not cmp.rows:
        return "neither run has serving numbers"
    if not old_pts:
        return "the old run has no measured point of these clients"
    if not new_pts:
        return "the new run has no measured point of these clients"
    return f"old points {', '.join(sorted(old_pts))}; new points {', '.join(sorted(new_pts))}"


def _point_label(client: ClientResult, coords: Sequence[tuple[str, str]]) -> str:
    if coords:
        order = {v: i for i, v in enumerate(client.sweep_vars)}
        return ",".join(f"{k}={v}" for k, v in sorted(coords, key=lambda kv: order.get(kv[0], 0)))
    return "run"


def compare_records(old: Record, new: Record) -> Comparison:
    """`old` and `new` as one server each (see compare_variants for records with variants)."""
    commands = tuple(_command_changes(old, new))
    changed_clients = {d.field.split(" ", 2)[1] for d in commands if d.field.startswith("client ")}
    eng = _engine_change(old, new)
    same = not commands and eng is None
    rows: list[Row] = []
    for nc in new.clients:
        if nc.kind != "serving":
            continue
        oc = old.client(nc.name)
        old_points = {p.coords: p for p in oc.points} if oc else {}
        for np_ in nc.points:
            op = old_points.get(np_.coords)
            label = _point_label(nc, np_.coords)
            for name, key, higher in METRICS:
                new_sp = np_.spread(key) if np_.status == "ok" else None
                old_sp = op.spread(key) if op is not None and op.status == "ok" else None
                if new_sp is None and old_sp is None:
                    continue
                rows.append(Row(nc.name, label, name, old_sp, new_sp, higher,
                                nc.name in changed_clients, same))
    diffs, only_new = provenance_differences(old, new)
    if eng is not None:  # the headline says it
        diffs = [d for d in diffs if not d.field.startswith(_ENGINE_FIELDS)]
    return Comparison(old, new, tuple(rows), tuple(diffs), commands, eng,
                      tuple(likely_causes(old, new)), tuple(only_new))


def compare_variants(old: Record, new: Record) -> list[Comparison]:
    """One Comparison per server variant of `new` that `old` also ran (by coordinates); one
    in all for records without variants."""
    out = []
    for variant in new.each_variant():
        before = old.variant(variant.coords)
        if before is None:
            continue
        cmp = compare_records(old.flat(before), new.flat(variant))
        out.append(Comparison(cmp.old, cmp.new, cmp.rows, cmp.differences, cmp.commands,
                              cmp.engine, cmp.causes, cmp.only_new, variant.name))
    return out


# --------------------------------------------------------------------------- what changed


def _words(command: str) -> list[str]:
    """The command's words as the shell reads them (the one shell reader), without the flags
    the executor adds per run."""
    keep: list[str] = []
    skip = False
    for w in split_words(command):
        if skip:
            skip = False
            continue
        flag, eq, _ = w.partition("=")
        if flag in _PER_RUN_FLAGS:
            skip = not eq
            continue
        keep.append(w)
    return keep


def _command_changes(old: Record, new: Record) -> Iterator[Difference]:
    a, b = _words(str(old.server.get("command", ""))), _words(str(new.server.get("command", "")))
    if a != b:
        yield Difference("server command", *_word_diff(a, b))
    old_cmds = {c.name: c.command for c in old.clients}
    for c in new.clients:
        if c.name not in old_cmds:
            continue
        a, b = _words(old_cmds[c.name]), _words(c.command)
        if a != b:
            yield Difference(f"client {c.name} command", *_word_diff(a, b))


def _engine_change(old: Record, new: Record) -> Difference | None:
    def text(r: Record) -> str:
        e = r.engine
        parts = [str(e.get("name") or "?"), str(e.get("version") or "(version not reported)")]
        if e.get("image_digest") or e.get("image"):
            parts.append(str(e.get("image_digest") or e.get("image")))
        return " ".join(parts)
    a, b = text(old), text(new)
    return None if a == b else Difference("engine", a, b)


def _gpus(record: Record) -> list[Mapping[str, Any]]:
    state = record.gpu_state.get("before") or record.gpu_state.get("after") or {}
    gpus = state.get("gpus") if isinstance(state, Mapping) else None
    return [g for g in gpus or () if isinstance(g, Mapping)]


def likely_causes(old: Record, new: Record) -> list[str]:
    """What differs between the runs' hosts and GPUs that moves numbers, most likely first:
    another physical card, driver, power limit, maximum clocks, PCIe link, ECC, throttling,
    other processes on the GPUs."""
    out: list[str] = []
    a, b = _gpus(old), _gpus(new)
    ua = [str(g.get("uuid")) for g in a if g.get("uuid")]
    ub = [str(g.get("uuid")) for g in b if g.get("uuid")]
    if ua and ub and ua != ub:
        out.append(f"a different physical GPU ({', '.join(ua)} -> {', '.join(ub)})")
    da, db = old.host.get("driver"), new.host.get("driver")
    if da and db and da != db:
        out.append(f"another driver ({da} -> {db})")
    for key, what, unit in (("power_limit_w", "power limit", " W"),
                            ("clocks_max_sm_mhz", "maximum SM clock", " MHz"),
                            ("clocks_max_mem_mhz", "maximum memory clock", " MHz"),
                            ("pcie_link_gen", "PCIe generation", ""),
                            ("pcie_link_width", "PCIe width x", ""),
                            ("ecc_mode", "ECC", "")):
        va = [g.get(key) for g in a if g.get(key) is not None]
        vb = [g.get(key) for g in b if g.get(key) is not None]
        if va and vb and va != vb:
            out.append(f"{what} {'/'.join(map(str, va))}{unit} -> {'/'.join(map(str, vb))}{unit}")
    for record, when in ((old, "old"), (new, "new")):
        after = record.gpu_state.get("after") or {}
        for g in after.get("gpus") or () if isinstance(after, Mapping) else ():
            reasons = _throttle(g.get("clocks_event_reasons"))
            if reasons:
                out.append(f"clocks held back in the {when} run ({reasons})")
        before = record.gpu_state.get("before") or {}
        procs = before.get("processes") if isinstance(before, Mapping) else None
        if procs:
            names = sorted({str(p.get("name")) for p in procs if isinstance(p, Mapping)})
            out.append(f"other processes on the GPUs before the {when} run ({', '.join(names)})")
    return out


# nvidia-smi clocks_event_reasons bits that mean a slow-down (idle, 0x1, does not).
_THROTTLE_BITS = {0x4: "power cap", 0x8: "hardware slowdown", 0x20: "thermal (software)",
                  0x40: "thermal (hardware)", 0x80: "power brake", 0x100: "display clock",
                  0x2: "application clocks"}


def _throttle(value: Any) -> str:
    try:
        bits = int(str(value), 16)
    except ValueError:
        return ""
    return ", ".join(name for bit, name in sorted(_THROTTLE_BITS.items()) if bits & bit)


# --------------------------------------------------------------------------- provenance


def flatten(value: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """Dotted paths to the leaves of nested mappings and lists (GPU lists by their index)."""
    if isinstance(value, Mapping):
        for key in sorted(value, key=str):
            yield from flatten(value[key], f"{prefix}.{key}" if prefix else str(key))
    elif isinstance(value, list | tuple) and value and all(isinstance(v, Mapping) for v in value):
        for i, item in enumerate(value):
            yield from flatten(item, f"{prefix}[{item.get('index', i)}]")
    else:
        yield prefix, list(value) if isinstance(value, tuple) else value


def _bare(path: str) -> str:
    return re.sub(r"\[[^\]]*\]", "", path)


def _ignored(path: str) -> bool:
    bare = _bare(path)
    return any(bare == i or bare.startswith(i + ".") for i in _IGNORED)


def provenance_differences(old: Record, new: Record) -> tuple[list[Difference], list[str]]:
    """(real differences, fields the older record has none of). A whole section or marker
    that only the newer record has (its schema or scanner is newer) is named once, not as
    "(none) -> X" lines; a variable in the server's environment that one run set and the other
    did not is a real difference."""
    od, nd = old.to_dict(), new.to_dict()
    only_new: list[str] = []
    a: dict[str, Any] = {}
    b: dict[str, Any] = {}
    for root in _PROVENANCE_ROOTS:
        ov, nv = od.get(root) or {}, nd.get(root) or {}
        if not ov and nv:
            only_new.append(root.replace("_", " "))
            continue
        a.update(flatten(ov, root))
        b.update(flatten(nv, root))
    out = []
    for key in sorted(set(a) | set(b)):
        if _ignored(key):
            continue
        old_v, new_v = a.get(key, _ABSENT), b.get(key, _ABSENT)
        if old_v == new_v:
            continue
        if old_v is _ABSENT and not key.startswith("server.env."):
            only_new.append(key)
            continue
        out.append(Difference(key, None if old_v is _ABSENT else old_v,
                              None if new_v is _ABSENT else new_v))
    return out, _grouped(only_new)


def _grouped(fields: list[str]) -> list[str]:
    """Field names, those of one section taken together when there are more than three."""
    sections: dict[str, list[str]] = {}
    for f in fields:
        sections.setdefault(f.split(".", 1)[0], []).append(f)
    out = []
    for section, items in sections.items():
        out += [f"{section} ({len(items)} fields)"] if len(items) > 3 else items
    return out


_ABSENT = object()


def _word_diff(a: list[str], b: list[str]) -> tuple[str, str]:
    """The words only one of two commands has, each side in order (`…` marks a gap)."""
    left: list[str] = []
    right: list[str] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        if left or right:
            left.append("…")
            right.append("…")
        if i1 > 0 and a[i1 - 1].startswith("-"):  # name the flag whose value changed
            left.append(a[i1 - 1])
            right.append(a[i1 - 1])
        left += a[i1:i2]
        right += b[j1:j2]
    return _join(left) or "(nothing)", _join(right) or "(nothing)"


def _join(words: list[str]) -> str:
    return " ".join(w if w == "…" else shlex.quote(w) for w in words)


# --------------------------------------------------------------------------- which records


def comparable(records: Sequence[Record]) -> list[Record]:
    """Successful records of the newest one's hardware (GPU names and count), oldest first."""
    oks = [r for r in records if r.ok]
    if not oks:
        return []
    key = _hardware_key(oks[-1])
    return [r for r in oks if _hardware_key(r) == key]


def _hardware_key(record: Record) -> tuple[Any, ...]:
    gpus = record.host.get("gpus") or []
    return (bool(record.host.get("cpu_only")), len(gpus),
            tuple(sorted(str(g.get("name")) for g in gpus)))


def previous_comparable(records: Sequence[Record], new: Record) -> Record | None:
    """The newest successful record before `new` on the same GPUs (names and count)."""
    key = _hardware_key(new)
    same = [r for r in records if r.ok and r.run_id != new.run_id and _hardware_key(r) == key
            and (r.started_at, r.run_id) <= (new.started_at, new.run_id)]
    return same[-1] if same else None


def last_two(records: Sequence[Record]) -> tuple[Record, Record] | None:
    same = comparable(records)
    return (same[-2], same[-1]) if len(same) >= 2 else None


def regressions(previous: Record | None, new: Record) -> list[Row]:
    """Rows of `new` that moved beyond the spread since `previous`, variant by variant (empty
    when there is no previous comparable record)."""
    if previous is None or not new.ok:
        return []
    return [row for cmp in compare_variants(previous, new) for row in cmp.changed]


__all__ = ["METRICS", "Comparison", "Difference", "Row", "beyond_spread", "comparable",
           "compare_records", "compare_variants", "flatten", "last_two", "likely_causes",
           "previous_comparable", "provenance_differences", "regressions"]
