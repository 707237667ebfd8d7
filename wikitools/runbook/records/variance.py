"""How far the same measurement moves: within one run (its repeats), between runs on one card,
between cards and between days — per sweep point, over the records that ran the same commands,
so that a reader can tell run-to-run noise from card-to-card differences."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from wikitools.runbook.records.record import Record
from wikitools.runbook.records.stats import spread_of

METRIC = "output_throughput"


@dataclass(frozen=True, slots=True)
class PointVariance:
    """Half-ranges relative to the median (0.05 for ±5 %), None where there is nothing to
    compare (one run, one card, one day)."""

    client: str
    point: str
    runs: int  # records that measured the point
    cards: int  # distinct cards among them (records without GPU state count as unknown)
    days: int
    within_run: float | None  # the median of the records' own ± (their repeats)
    same_card: float | None  # ± of the medians of runs on one card (the widest card)
    between_cards: float | None  # ± of the cards' medians
    between_days: float | None  # ± of the days' medians


def card_of(record: Record) -> str | None:
    """The GPUs a record ran on, by UUID (None when the record did not note them)."""
    state = record.gpu_state.get("before") or record.gpu_state.get("after") or {}
    uuids = [str(g.get("uuid")) for g in state.get("gpus") or () if g.get("uuid")]
    return ",".join(uuids) if uuids else None


def _half(values: Sequence[float]) -> float | None:
    sp = spread_of(list(values))
    return sp.half_range if sp is not None and sp.count > 1 else None


def point_variance(records: Sequence[Record]) -> list[PointVariance]:
    """Per serving point of the records (meant to be runs of the same commands)."""
    per: dict[tuple[str, str], list[tuple[Record, float, float | None]]] = {}
    for rec in records:
        for client in rec.clients:
            if client.kind != "serving":
                continue
            for p in client.points:
                sp = p.spread(METRIC) if p.status == "ok" else None
                if sp is None:
                    continue
                label = ",".join(f"{k}={v}" for k, v in p.coords) or "run"
                per.setdefault((client.name, label), []).append(
                    (rec, sp.median, sp.half_range if sp.count > 1 else None))
    out = []
    for (client_name, label), items in per.items():
        cards: dict[str, list[float]] = {}
        days: dict[str, list[float]] = {}
        for rec, median, _half_range in items:
            cards.setdefault(card_of(rec) or "?", []).append(median)
            days.setdefault(rec.started_at[:10], []).append(median)
        own = [h for _r, _m, h in items if h is not None]
        same = [h for vals in cards.values() if len(vals) > 1 and (h := _half(vals)) is not None]
        known = {k: v for k, v in cards.items() if k != "?"}
        out.append(PointVariance(
            client_name, label, len(items), len(known) + ("?" in cards), len(days),
            statistics.median(own) if own else None,
            max(same) if same else None,
            _half([statistics.median(v) for v in known.values()]) if len(known) > 1 else None,
            _half([statistics.median(v) for v in days.values()]) if len(days) > 1 else None))
    return out


__all__ = ["PointVariance", "card_of", "point_variance"]
