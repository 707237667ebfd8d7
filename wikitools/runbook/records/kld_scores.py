"""KLD scores of a finished run: every `kind=kld` client's captures (one per run of each
configuration) are scored against one reference capture, which is kept under
`runbooks/<runbook-id>/kld/<hash>.json` and named by its SHA-256 in the record.

The reference is the capture a block's `reference=` names (a file under runbooks/, or another
runbook whose latest successful run's reference is taken, e.g. the BF16 runbook beside an FP8
one), else the first run of the first configuration measured.
That configuration's own row then compares its later runs with its first: its KLD is the
engine's run-to-run noise, zero when the engine is deterministic."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from wikitools.core.errors import InputError
from wikitools.quality import capture as cap
from wikitools.quality import divergence
from wikitools.runbook.engines import catalog as engines
from wikitools.runbook.engines.command import parse_server_command
from wikitools.runbook.records.record import (
    RECORDS_DIR,
    Point,
    Record,
    RecordError,
    Sample,
    VariantResult,
    load_records,
)

KLD_DIR = "kld"


@dataclass(frozen=True, slots=True)
class Reference:
    path: str  # relative to the root, POSIX
    sha256: str
    capture: cap.Capture
    source: str | None  # the artifacts file it was copied from (None: given by the block)
    settings: Mapping[str, str] | None = None  # output settings of the server that made it


def reference_path(runbook_id: str, sha256: str) -> str:
    return f"{RECORDS_DIR}/{runbook_id}/{KLD_DIR}/{sha256.split(':', 1)[-1][:16]}.json"


def _store(root: Path, runbook_id: str, source: str) -> Reference:
    """The reference taken from a run's capture: named by where `keep_references` will keep
    it, read from where the run wrote it (nothing is written until the record is)."""
    src = root / source
    digest = cap.file_hash(src)
    return Reference(reference_path(runbook_id, digest), digest, cap.load(src, source), source)


def keep_references(root: Path, record: Record) -> list[str]:
    """Copy each reference capture the record names from the run's artifacts to its place
    under runbooks/ (the record is about to be written): the paths written."""
    named = {str(p.metrics["kld_reference"]) for v in record.each_variant() for c in v.clients
             for p in c.points if c.kind == "kld" and "kld_reference" in p.metrics}
    written = []
    for v in record.each_variant():
        for c in v.clients if not v.measured_in else ():  # a variant taken over: kept there
            for p in c.points if c.kind == "kld" else ():
                for s in p.samples:
                    if not s.metrics.get("kld_reference_run") or not s.result_file:
                        continue
                    src = root / s.result_file
                    rel = reference_path(record.runbook, cap.file_hash(src))
                    if rel in named and not (root / rel).is_file():
                        (root / rel).parent.mkdir(parents=True, exist_ok=True)
                        shutil.copyfile(src, root / rel)
                        written.append(rel)
    return written


def _given(root: Path, path: str) -> Reference:
    file = root / path
    if not file.is_file():
        raise InputError(f"reference={path}: no such capture")
    return Reference(path, cap.file_hash(file), cap.load(file, path), None)


def score_points(root: Path, runbook_id: str, points: Sequence[Point],
                 reference: str | None) -> tuple[tuple[Point, ...], Reference | None, str | None]:
    """Every point (one configuration each, its samples the runs) scored against the
    reference: (points with KLD metrics, the reference, a problem that stopped the scoring).
    The reference comes from `reference` (a file, another runbook) or from the first point."""
    try:
        ref = _reference(root, runbook_id, points, reference)
    except InputError as exc:
        return tuple(points), None, str(exc)
    if ref is None:
        return tuple(points), None, "no capture to take as the reference"
    return tuple(_scored(root, p, ref) for p in points), ref, None


def _of_runbook(root: Path, other: str) -> Reference:
    """The reference the latest successful run of runbook `other` scored against."""
    try:
        records = load_records(root, other)
    except RecordError as exc:
        raise InputError(f"reference={other}: {exc}") from None
    for rec in reversed(records):
        for v in rec.each_variant() if rec.ok else ():
            for c in v.clients:
                for p in c.points if c.kind == "kld" else ():
                    path = p.metrics.get("kld_reference")
                    if isinstance(path, str):
                        return replace(_given(root, path), settings=output_settings(v))
    raise InputError(f"reference={other}: that runbook has no successful KLD run yet; run it "
                     "first")


def _reference(root: Path, runbook_id: str, points: Sequence[Point],
               reference: str | None) -> Reference | None:
    if reference and reference.endswith(".json"):
        return _given(root, reference)
    if reference and (root / RECORDS_DIR / reference).is_dir():
        return _of_runbook(root, reference)
    for p in points:
        for s in p.samples:
            if s.status == "ok" and s.result_file and (root / s.result_file).is_file():
                return _store(root, runbook_id, s.result_file)
    return None


def _scored(root: Path, point: Point, ref: Reference) -> Point:
    runs: list[divergence.Divergence] = []
    samples: list[Sample] = []
    problem: str | None = None
    identical = 0
    for s in point.samples:
        if s.status != "ok" or not s.result_file:
            samples.append(s)
            continue
        if ref.source is not None and s.result_file == ref.source:
            samples.append(replace(s, metrics={**s.metrics, "kld_reference_run": True}))
            continue
        try:
            div = divergence.divergence(ref.capture, cap.load(root / s.result_file, s.result_file))
            same = cap.file_hash(root / s.result_file) == ref.sha256
        except (InputError, OSError) as exc:
            problem = problem or str(exc)
            samples.append(s)
            continue
        runs.append(div)
        identical += same
        samples.append(replace(s, metrics={**s.metrics, "kld_mean": div.mean}))
    metrics: dict[str, Any] = {**point.metrics, "kld_reference": ref.path,
                               "kld_reference_sha256": ref.sha256}
    if runs:
        metrics.update(divergence.summarise(runs, ref.capture.top_k).to_dict())
        metrics["kld_identical_runs"] = identical  # captures byte for byte the reference
    elif problem is None:
        metrics["kld_note"] = "the reference run; no other run to compare with it"
    if problem is not None:
        metrics["kld_problem"] = problem
    return replace(point, metrics=metrics, samples=tuple(samples))


def _ordered(variants: Sequence[VariantResult], reference: str | None) -> list[int]:
    """Variant indices, the reference variant first (`reference` naming one, e.g. `KV=auto`,
    in any order of its pairs), else in run order."""
    order = list(range(len(variants)))
    if reference and "=" in reference and not reference.endswith(".json"):
        want = sorted(tuple(kv.split("=", 1)) for kv in reference.split(","))
        for i, v in enumerate(variants):
            if sorted(v.coords) == want:
                order.remove(i)
                return [i, *order]
    return order


def output_settings(variant: VariantResult) -> dict[str, str]:
    """The settings of a variant's server that change the model's outputs (engines'
    OUTPUT_SETTINGS), its variant values filled in; "default" where the command sets none."""
    cmd = parse_server_command(str(variant.server.get("command", "")), dict(variant.coords))
    out = {}
    for name, label in engines.OUTPUT_SETTINGS:
        value = cmd.flag(name) if name.startswith("-") else getattr(cmd, name)
        out[label] = str(value) if value else "default"
    return out


def not_exercised(point: Point, settings: Mapping[str, str],
                  reference: Mapping[str, str] | None) -> str | None:
    """Why a KLD of 0 would mislead: every capture of a server whose output settings differ
    from the reference's is byte for byte the reference (None when it is not so)."""
    runs, same = point.metrics.get("kld_runs"), point.metrics.get("kld_identical_runs")
    if reference is None or not runs or same != runs:
        return None
    differ = [f"{k} {settings[k]} (the reference: {reference[k]})" for k in settings
              if k in reference and reference[k] != settings[k]]
    if not differ:
        return None
    return ("not exercised: the capture equals the reference, although " + " and ".join(differ)
            + " must change the outputs")


def score_record(record: Record, root: Path, reference_of: Callable[[str], str | None]) -> Record:
    """The record with every kld client's points scored, in every variant, against one
    reference (`reference_of(client name)` gives the block's `reference=`); unchanged when it
    has none."""
    variants = list(record.each_variant())
    names = list(dict.fromkeys(c.name for v in variants for c in v.clients if c.kind == "kld"))
    for name in names:
        reference = reference_of(name)
        order = [vi for vi in _ordered(variants, reference) if not variants[vi].measured_in]
        where = [(vi, ci, pi) for vi in order
                 for ci, c in enumerate(variants[vi].clients) if c.name == name
                 for pi in range(len(c.points))]
        points = [variants[vi].clients[ci].points[pi] for vi, ci, pi in where]
        if any(v.measured_in for v in variants):  # a resumed run: the earlier run's reference
            scored, ref, problem = _against_carried(root, variants, name, points)
        else:
            scored, ref, problem = score_points(root, record.runbook, points,
                                                None if reference and "=" in reference
                                                else reference)
        ref_settings = _reference_settings(ref, variants, order)
        for (vi, ci, pi), point in zip(where, scored, strict=True):
            if problem is not None:
                point = replace(point, metrics={**point.metrics, "kld_problem": problem})
            why = not_exercised(point, output_settings(variants[vi]), ref_settings)
            if why is not None:
                point = replace(point, metrics={**point.metrics, "kld_not_exercised": why})
            v = variants[vi]
            c = v.clients[ci]
            pts = list(c.points)
            pts[pi] = point
            clients = list(v.clients)
            clients[ci] = replace(c, points=tuple(pts))
            variants[vi] = replace(v, clients=tuple(clients))
    if record.variants:
        return replace(record, variants=tuple(variants))
    return replace(record, clients=variants[0].clients)


def _against_carried(root: Path, variants: Sequence[VariantResult], name: str,
                     points: Sequence[Point],
                     ) -> tuple[tuple[Point, ...], Reference | None, str | None]:
    """A resumed run's points scored against the reference the variants it took over were
    scored against (kept under runbooks/), with the settings of the server that made it."""
    made_by = next((v for v in variants if v.measured_in and (c := v.client(name))
                    and any(s.metrics.get("kld_reference_run") for p in c.points
                            for s in p.samples)), None)
    path = next((p.metrics["kld_reference"] for v in variants if v.measured_in
                 for c in v.clients if c.name == name for p in c.points
                 if isinstance(p.metrics.get("kld_reference"), str)), None)
    if path is None:
        return tuple(points), None, "the run it resumes kept no KLD reference"
    try:
        ref = _given(root, str(path))
    except InputError as exc:
        return tuple(points), None, str(exc)
    ref = replace(ref, settings=output_settings(made_by) if made_by else None)
    return tuple(_scored(root, p, ref) for p in points), ref, None


def _reference_settings(ref: Reference | None, variants: Sequence[VariantResult],
                        order: Sequence[int]) -> Mapping[str, str] | None:
    """The output settings of the server that made the reference: another runbook's (as its
    record says), this run's first variant in `order`, or unknown (a capture file given)."""
    if ref is None:
        return None
    if ref.settings is not None:
        return ref.settings
    return output_settings(variants[order[0]]) if ref.source is not None else None
