"""Resuming a run (`wiki runbook run --resume`): a run of a runbook with server variants that
stopped part-way (interrupted, a device call's time limit, one variant failed) is continued by a
new run that measures only the variants the earlier record lacks, and takes over the finished
ones. The new record holds every variant: each taken over names the run it was measured in
(`measured_in`), and the receipt names the earlier record by path and SHA-256.

A run is resumed only where its numbers can stand beside the new ones: the page's blocks
unchanged (same blocks hash), the same GPUs, and the same repeats and warm-up per client."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from wikitools.core.errors import UsageError
from wikitools.runbook.records.record import (
    Record,
    RecordError,
    VariantResult,
    load_records,
    record_path,
    record_rel_path,
)

LATEST = "latest"


def resumed_record(root: Path, runbook_id: str, blocks_hash: str, which: str,
                   variants: Sequence[tuple[tuple[str, str], ...]]) -> Record:
    """The record `--resume` names (`latest`: the runbook's newest record), checked: it has
    variants, did not finish all of the runbook's `variants` (a run of some of them, with
    `--variant`, leaves the others), and was made from the page's blocks as they are now.
    UsageError says what does not fit."""
    try:
        records = load_records(root, runbook_id)
    except RecordError as exc:
        raise UsageError(f"--resume: {exc}") from None
    if which == LATEST:
        record = records[-1] if records else None
    else:
        record = next((r for r in records if r.run_id == which), None)
    if record is None:
        raise UsageError(f"--resume {which}: runbook '{runbook_id}' has no such record"
                         if which != LATEST else
                         f"--resume: runbook '{runbook_id}' has no record yet")
    where = record_rel_path(record)
    if not record.variants:
        raise UsageError(f"--resume: {where} has no server variants; run the runbook again")
    finished = {v.coords for v in record.variants if v.ok}
    if all(coords in finished for coords in variants):
        raise UsageError(f"--resume: {where} finished every variant; nothing is left to run")
    if record.blocks_hash != blocks_hash:
        raise UsageError(f"--resume: {where} was made from other blocks "
                         f"({_short(record.blocks_hash)}; the page's: {_short(blocks_hash)}); "
                         "run it again")
    return record


def _short(blocks_hash: str) -> str:
    return blocks_hash.split(":", 1)[-1][:8]


def carried(record: Record) -> tuple[VariantResult, ...]:
    """The variants a resumed run takes over: those that finished, each naming its run."""
    return tuple(v if v.measured_in else replace(v, measured_in=record.run_id)
                 for v in record.variants if v.ok)


def gpu_names(host: Mapping[str, Any]) -> list[str]:
    """The GPU models a record's host had (or this host has), sorted: one entry per GPU."""
    return sorted(str(g.get("name", "?")) for g in host.get("gpus") or [])


def check_same_gpus(record: Record, here: Sequence[str]) -> None:
    """UsageError when this host's GPUs are not those the earlier run measured on."""
    there = gpu_names(record.host)
    if there != sorted(here):
        raise UsageError(f"--resume: {record_rel_path(record)} was measured on "
                         f"{_gpus(there)}; this host has {_gpus(sorted(here))}")


def _gpus(names: Sequence[str]) -> str:
    if not names:
        return "no GPU"
    return ", ".join(f"{names.count(n)} × {n}" for n in dict.fromkeys(names))


def check_same_runs(kept: Sequence[VariantResult], repeats: Mapping[str, tuple[int, bool]],
                    where: str) -> None:
    """UsageError when a client would now run other repeats or warm-up than it did in the
    variants taken over (`repeats`: client name → (repeats, warm-up) of the new run)."""
    for v in kept:
        for c in v.clients:
            new = repeats.get(c.name)
            if new is not None and new != (c.repeats, c.warmup):
                raise UsageError(
                    f"--resume: {where} ran client '{c.name}' {_runs(c.repeats, c.warmup)}; "
                    f"this run would run it {_runs(*new)}: give the same --repeats and "
                    "--no-warmup")


def _runs(repeats: int, warmup: bool) -> str:
    return f"{repeats} time(s) {'after' if warmup else 'without'} a warm-up run"


def merged(record: Record, kept: Sequence[VariantResult],
           order: Sequence[tuple[tuple[str, str], ...]]) -> Record:
    """The new run's record with the variants taken over, every variant in the block's order
    (`order`: the coordinates of every variant). Its status stays the new run's: every
    variant taken over finished."""
    variants = sorted([*kept, *record.variants], key=lambda v: order.index(v.coords)
                      if v.coords in order else len(order))
    return replace(record, variants=tuple(variants))


def receipt_entry(root: Path, record: Record) -> dict[str, str]:
    """The earlier record as the new record's receipt names it: run id, path and SHA-256."""
    data = record_path(root, record.runbook, record.run_id).read_bytes()
    return {"run_id": record.run_id, "path": record_rel_path(record),
            "sha256": "sha256:" + hashlib.sha256(data).hexdigest()}


def _finished_part(record: Record) -> Record | None:
    """A failed run of server variants as far as it got: the record with its finished
    variants alone (None when it has none, or did not fail). A page shows it instead of an
    older successful run: it is newer, and `--resume` completes it."""
    if record.ok or not any(v.ok for v in record.variants):
        return None
    return replace(record, variants=tuple(v for v in record.variants if v.ok))


def newest_shown(records: Sequence[Record]) -> Record | None:
    """What a results table shows: the newest record's finished part when it failed part-way,
    else the newest successful record."""
    if records and (part := _finished_part(records[-1])) is not None:
        return part
    return next((r for r in reversed(records) if r.ok), None)
