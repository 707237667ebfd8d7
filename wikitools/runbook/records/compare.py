"""Two run records side by side: each sweep point's numbers with their ratio and whether the
difference is larger than the spread (a regression or an improvement), and every difference in
provenance (engine, commands, host, GPU state) that could explain it."""

from __future__ import annotations

import difflib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from wikitools.runbook.engines.catalog import RESULT_PATH_FLAGS
from wikitools.runbook.engines.shell import shell_quote, split_words
from wikitools.runbook.records.record import ClientResult, Record
from wikitools.runbook.records.stats import NOISY_SPREAD, Spread

# (label, metric key, True when higher is better)
METRICS: tuple[tuple[str, str, bool], ...] = (
    ("output tok/s", "output_throughput", True),
    ("TTFT median (ms)", "median_ttft_ms", False),
    ("TPOT median (ms)", "median_tpot_ms", False),
)

# Record fields that explain a difference; the GPU state and markers are compared key by key.
_PROVENANCE_ROOTS = ("blocks_hash", "engine", "host", "server", "markers", "gpu_state")
_IGNORED = ("server.log_tail", "host.gpus.memory_free_mib", "host.hostname_hash",
            "markers.init_engine_s", "markers.model_load_s", "markers.cuda_graph_capture_s",
            "markers.compile_s")


@dataclass(frozen=True, slots=True)
class Row:
    client: str
    point: str  # "CONCURRENCY=8" or "run"
    metric: str
    old: Spread | None
    new: Spread | None
    higher_is_better: bool

    @property
    def ratio(self) -> float | None:
        if self.old is None or self.new is None or self.old.median == 0:
            return None
        return self.new.median / self.old.median

    @property
    def verdict(self) -> str:
        """regression | improvement | within spread | not comparable."""
        if self.old is None or self.new is None or self.ratio is None:
            return "not comparable"
        if not beyond_spread(self.old, self.new):
            return "within spread"
        better = (self.new.median > self.old.median) == self.higher_is_better
        return "improvement" if better else "regression"


def beyond_spread(old: Spread, new: Spread) -> bool:
    """True when each median lies outside the other's min–max range, and the change is larger
    than the noise threshold when a side has a single sample (no range of its own)."""
    def band(s: Spread) -> tuple[float, float]:
        if s.count > 1:
            return s.low, s.high
        half = abs(s.median) * NOISY_SPREAD / 2
        return s.median - half, s.median + half

    lo_o, hi_o = band(old)
    lo_n, hi_n = band(new)
    return not (lo_o <= new.median <= hi_o) and not (lo_n <= old.median <= hi_n)


@dataclass(frozen=True, slots=True)
class Difference:
    field: str  # dotted path, e.g. "engine.version", "gpu_state.before.gpus[0].clocks_sm_mhz"
    old: Any
    new: Any


@dataclass(frozen=True, slots=True)
class Comparison:
    old: Record
    new: Record
    rows: tuple[Row, ...]
    differences: tuple[Difference, ...]

    @property
    def changed(self) -> tuple[Row, ...]:
        return tuple(r for r in self.rows if r.verdict in ("regression", "improvement"))


def _point_label(client: ClientResult, value: str | None,
                 coords: Sequence[tuple[str, str]]) -> str:
    if client.grid:
        return ",".join(f"{k}={v}" for k, v in coords)
    return f"{client.sweep_var}={value}" if client.sweep_var else "run"


def compare_records(old: Record, new: Record) -> Comparison:
    rows: list[Row] = []
    for nc in new.clients:
        if nc.kind != "serving":
            continue
        oc = old.client(nc.name)
        old_points = {p.coords or (("", p.value or ""),): p for p in oc.points} if oc else {}
        for np_ in nc.points:
            op = old_points.get(np_.coords or (("", np_.value or ""),))
            label = _point_label(nc, np_.value, np_.coords)
            for name, key, higher in METRICS:
                new_sp = np_.spread(key) if np_.status == "ok" else None
                old_sp = op.spread(key) if op is not None and op.status == "ok" else None
                if new_sp is None and old_sp is None:
                    continue
                rows.append(Row(nc.name, label, name, old_sp, new_sp, higher))
    return Comparison(old, new, tuple(rows), tuple(provenance_differences(old, new)))


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


def _ignored(path: str) -> bool:
    bare = "".join(part.split("[")[0] + "." for part in path.split(".")).rstrip(".")
    return any(bare == i or bare.startswith(i + ".") for i in _IGNORED)


def provenance_differences(old: Record, new: Record) -> list[Difference]:
    a = dict(flatten({k: old.to_dict().get(k) for k in _PROVENANCE_ROOTS}))
    b = dict(flatten({k: new.to_dict().get(k) for k in _PROVENANCE_ROOTS}))
    old_cmds = {c.name: c.command for c in old.clients}
    for c in new.clients:  # client commands differ in their result paths; compare the block
        if old_cmds.get(c.name) is not None and _strip_result(old_cmds[c.name]) != \
                _strip_result(c.command):
            a[f"clients.{c.name}.command"] = old_cmds[c.name]
            b[f"clients.{c.name}.command"] = c.command
    out = []
    for key in sorted(set(a) | set(b)):
        if _ignored(key):
            continue
        old_v, new_v = a.get(key), b.get(key)
        if old_v == new_v:
            continue
        if key.endswith("command") and isinstance(old_v, str) and isinstance(new_v, str):
            old_v, new_v = _word_diff(_strip_result(old_v), _strip_result(new_v))
            key += " (words that differ)"
        out.append(Difference(key, old_v, new_v))
    return out


def _word_diff(old: str, new: str) -> tuple[str, str]:
    """The words only one of two commands has, each side in order (`…` marks a gap)."""
    a, b = split_words(old), split_words(new)
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
    return _join(left), _join(right)


def _strip_result(command: str) -> str:
    """A client command without the flags the executor adds per run (result file names)."""
    keep: list[str] = []
    skip = False
    for w in split_words(command):
        if skip:
            skip = False
            continue
        if w in RESULT_PATH_FLAGS:
            skip = True
            continue
        keep.append(w)
    return _join(keep)


def _join(words: list[str]) -> str:
    return " ".join(w if w == "…" else shell_quote(w) for w in words)


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
    """Rows of `new` that differ from `previous` by more than the spread (empty when there is
    no previous comparable record)."""
    if previous is None or not new.ok:
        return []
    return list(compare_records(previous, new).changed)


__all__ = ["METRICS", "Comparison", "Difference", "Row", "beyond_spread", "comparable",
           "compare_records", "flatten", "last_two", "previous_comparable",
           "provenance_differences", "regressions"]
