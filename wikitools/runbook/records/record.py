"""The run record (`runbooks/<runbook-id>/<run-id>.json`): frozen dataclasses, deterministic JSON
with secrets masked, atomic writes that never replace another run's record, loading sorted by
start time.

Schema 2 adds the repeats of each sweep point (`samples`, every one kept; `metrics` is their
median), grid-sweep coordinates, and the GPU state before and after the run (`gpu_state`).
Schema 1 records are read as points of one sample each.

Schema 3 adds server variants: a runbook whose server block names `variants=` records every
variant in `variants` (its coordinates, status, engine facts, server, markers, timings, GPU state
and clients), and the top-level `engine`, `server`, `markers`, `timings`, `gpu_state` and
`clients` stay empty. A record without variants is written as schema 2, unchanged; readers see
every record through `Record.each_variant()`."""

from __future__ import annotations

import json
import os
import re
import secrets
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from wikitools.core.fsio import open_temp
from wikitools.runbook.engines.secrets import mask_data
from wikitools.runbook.records.schema import (
    ENGINE,
    GPU_STATE,
    HOST,
    MARKERS,
    METRICS,
    SERVER,
    TIMINGS,
    RecordData,
    RecordError,
    locate,
    matching,
    shaped,
)
from wikitools.runbook.records.stats import Spread, median_metrics, spread_of

SCHEMA_VERSION = 2  # a record without variants
VARIANTS_VERSION = 3  # a record with server variants
READABLE_VERSIONS = (1, 2, 3)
# What each variant has of its own; at the top level only in a record without variants.
PER_VARIANT = ("engine", "server", "markers", "timings", "gpu_state", "clients")
RECORDS_DIR = "runbooks"



STAMP = r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?Z"
RUN_ID_PATTERN = r"\d{8}T\d{6}(?:\.\d{3})?Z-[0-9a-f]{8}(?:-[0-9a-f]{4}|-[0-9a-f]{8})?"
RUNBOOK_ID_PATTERN = r"[a-z0-9][a-z0-9._-]*"
RUN_STATUS = r"ok|failed"
VARIANT_STATUS = r"ok|failed|skipped"
STEP_STATUS = r"ok|failed|timeout|skipped"


@dataclass(frozen=True, slots=True)
class Step(RecordData):
    name: str
    status: str = field(metadata=matching(STEP_STATUS))
    seconds: float = 0.0
    message: str | None = None


@dataclass(frozen=True, slots=True)
class Sample(RecordData):
    """One measurement of a sweep point (one client run)."""

    status: str = field(default="ok", metadata=matching(STEP_STATUS))
    metrics: Mapping[str, Any] = field(default_factory=dict, metadata=shaped(METRICS))
    seconds: float = 0.0
    result_file: str | None = None
    message: str | None = None


@dataclass(frozen=True, slots=True)
class Point(RecordData):
    """One client sweep point (or the single run of a client without a sweep: value None).
    `metrics` is the median over the successful `samples`; `coords` names the value of each
    swept variable (one for a plain sweep, two for a grid)."""

    value: str | None = None
    status: str = field(default="ok", metadata=matching(STEP_STATUS))
    metrics: Mapping[str, Any] = field(default_factory=dict, metadata=shaped(METRICS))
    result_file: str | None = None
    message: str | None = None
    seconds: float = 0.0
    samples: tuple[Sample, ...] = ()
    coords: tuple[tuple[str, str], ...] = ()

    def spread(self, key: str) -> Spread | None:
        """Median, min and max of metric `key` over the successful samples (the point's own
        value when it has no samples)."""
        oks = [s.metrics.get(key) for s in self.samples if s.status == "ok"]
        return spread_of(oks if oks else [self.metrics.get(key)])

    @property
    def repeats(self) -> int:
        """How many successful samples the point's numbers come from."""
        return sum(s.status == "ok" for s in self.samples) if self.samples else int(
            self.status == "ok")

    def coord(self, var: str) -> str | None:
        return dict(self.coords).get(var)


@dataclass(frozen=True, slots=True)
class ClientResult(RecordData):
    name: str
    kind: str = "serving"
    command: str = ""
    sweep_var: str | None = None
    points: tuple[Point, ...] = ()
    sweep_vars: tuple[str, ...] = ()  # every swept variable; two for a grid sweep
    repeats: int = field(default=1, metadata={"low": 0, "high": 1_000_000})  # samples per point
    warmup: bool = False  # an unrecorded run preceded each point

    def __post_init__(self) -> None:
        if not self.sweep_vars and self.sweep_var:
            object.__setattr__(self, "sweep_vars", (self.sweep_var,))

    @property
    def grid(self) -> bool:
        return len(self.sweep_vars) > 1


@dataclass(frozen=True, slots=True)
class VariantResult(RecordData):
    """One server configuration of a run and what was measured against it. A record without
    variants has one, with no coordinates, made from its top-level fields. Its coordinates are
    stored as a list of pairs: the block's order."""

    coords: tuple[tuple[str, str], ...] = ()  # (variable, value), in the block's order
    # ok | failed | skipped (not started: an earlier variant failed hard)
    status: str = field(default="ok", metadata=matching(VARIANT_STATUS))
    failed_step: str | None = None
    message: str | None = None
    engine: Mapping[str, Any] = field(default_factory=dict, metadata=shaped(ENGINE))
    server: Mapping[str, Any] = field(default_factory=dict, metadata=shaped(SERVER))
    markers: Mapping[str, Any] = field(default_factory=dict, metadata=shaped(MARKERS))
    timings: Mapping[str, Any] = field(default_factory=dict, metadata=shaped(TIMINGS))
    gpu_state: Mapping[str, Any] = field(default_factory=dict, metadata=shaped(GPU_STATE))
    clients: tuple[ClientResult, ...] = ()
    # the run it was measured in, when a resumed run (`--resume`) took it over from that run
    measured_in: str | None = field(default=None, metadata=matching(RUN_ID_PATTERN))

    @property
    def name(self) -> str | None:
        """`KV=fp8,MTP=3`; None for the one variant of a server without variants."""
        return ",".join(f"{k}={v}" for k, v in self.coords) if self.coords else None

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def client(self, name: str | None) -> ClientResult | None:
        return next((c for c in self.clients if c.name == name), None)

    def to_dict(self) -> dict[str, Any]:
        data = RecordData.to_dict(self)
        data["coords"] = [list(kv) for kv in self.coords]  # ordered: the block's order
        return data


@dataclass(frozen=True, slots=True)
class Record(RecordData):
    runbook: str = field(metadata=matching(RUNBOOK_ID_PATTERN))
    page: str
    blocks_hash: str
    run_id: str = field(metadata=matching(RUN_ID_PATTERN))
    started_at: str = field(metadata=matching(STAMP))
    finished_at: str = field(metadata=matching(STAMP))
    status: str = field(metadata=matching(RUN_STATUS))  # ok | failed
    failed_step: str | None = None
    message: str | None = None
    host: Mapping[str, Any] = field(default_factory=dict, metadata=shaped(HOST))
    engine: Mapping[str, Any] = field(default_factory=dict, metadata=shaped(ENGINE))
    server: Mapping[str, Any] = field(default_factory=dict, metadata=shaped(SERVER))
    markers: Mapping[str, Any] = field(default_factory=dict, metadata=shaped(MARKERS))
    timings: Mapping[str, Any] = field(default_factory=dict, metadata=shaped(TIMINGS))
    steps: tuple[Step, ...] = ()
    clients: tuple[ClientResult, ...] = ()
    artifacts_dir: str | None = None
    gpu_state: Mapping[str, Any] = field(  # {"before": …, "after": …}
        default_factory=dict, metadata=shaped(GPU_STATE))
    receipt: Mapping[str, Any] = field(  # file hashes, model snapshot, caches
        default_factory=dict, metadata=shaped(MARKERS))
    schema_version: int = SCHEMA_VERSION
    variants: tuple[VariantResult, ...] = ()  # schema 3: every server variant, in run order

    def __post_init__(self) -> None:
        if self.variants and self.schema_version < VARIANTS_VERSION:
            object.__setattr__(self, "schema_version", VARIANTS_VERSION)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def variant_vars(self) -> tuple[str, ...]:
        """The server's variant variables (none for a record without variants)."""
        return tuple(k for k, _ in self.variants[0].coords) if self.variants else ()

    def each_variant(self) -> tuple[VariantResult, ...]:
        """Every server variant of the run; one without coordinates, made from the top-level
        fields, for a record without variants."""
        if self.variants:
            return self.variants
        return (VariantResult((), self.status, self.failed_step, self.message, self.engine,
                              self.server, self.markers, self.timings, self.gpu_state,
                              self.clients),)

    def variant(self, coords: tuple[tuple[str, str], ...]) -> VariantResult | None:
        """The variant at `coords` (order of the pairs does not matter)."""
        want = sorted(coords)
        return next((v for v in self.each_variant() if sorted(v.coords) == want), None)

    def flat(self, variant: VariantResult) -> Record:
        """The record as if its run had had only `variant` (a record without variants: itself):
        what a reader of one server's results (a table, a comparison) reads."""
        if not self.variants:
            return self
        return replace(self, status=variant.status if variant.status != "skipped" else "failed",
                       failed_step=variant.failed_step, message=variant.message,
                       engine=variant.engine, server=variant.server, markers=variant.markers,
                       timings=variant.timings, gpu_state=variant.gpu_state,
                       clients=variant.clients, variants=(), schema_version=SCHEMA_VERSION)

    def client(self, name: str | None) -> ClientResult | None:
        return next((c for c in self.clients if c.name == name), None)

    def to_dict(self) -> dict[str, Any]:
        data = RecordData.to_dict(self)
        if self.variants:
            data["variants"] = [v.to_dict() for v in self.variants]
            for key in PER_VARIANT:
                del data[key]
        else:
            del data["variants"]
        return data

    @classmethod
    def from_dict(cls, data: Any) -> Record:
        """Read and check a record of any readable schema version; raises RecordError naming
        the field that does not fit."""
        if not isinstance(data, dict):
            raise RecordError("not a JSON object")
        version = data.get("schema_version")
        if isinstance(version, bool) or version not in READABLE_VERSIONS:
            known = " or ".join(str(v) for v in READABLE_VERSIONS)
            raise RecordError(f"field schema_version: {version!r} is not {known}",
                              field="schema_version")
        data = {"page": "", "blocks_hash": "", **data}
        if "finished_at" not in data and "started_at" in data:
            data["finished_at"] = data["started_at"]
        data["clients"] = _clients_with_coords(data.get("clients", []))
        if isinstance(data.get("variants"), list):
            data["variants"] = [{**v, "clients": _clients_with_coords(v.get("clients", []))}
                                if isinstance(v, dict) else v for v in data["variants"]]
        return super(Record, cls).from_dict(data)


def _clients_with_coords(clients: Any) -> Any:
    """Schema 1 (and an early schema 2 writer) kept a point's one swept value only as `value`:
    its coords are that value."""
    if not isinstance(clients, list):
        return clients
    return [{**c, "points": [
        {**p, "coords": {c["sweep_var"]: p["value"]}} if isinstance(p, dict)
        and not p.get("coords") and isinstance(c.get("sweep_var"), str)
        and p.get("value") is not None else p for p in c["points"]]}
        if isinstance(c, dict) and isinstance(c.get("points"), list) else c for c in clients]


def point_from_samples(value: str | None, samples: Sequence[Sample],
                       coords: tuple[tuple[str, str], ...] = ()) -> Point:
    """One sweep point from its runs: ok when every run is; metrics are the median over the
    successful runs; the first failing run's status and message otherwise."""
    oks = [s for s in samples if s.status == "ok"]
    bad = next((s for s in samples if s.status != "ok"), None)
    status = "ok" if samples and bad is None else (bad.status if bad else "skipped")
    return Point(
        value=value,
        status=status,
        metrics=median_metrics([s.metrics for s in oks]),
        result_file=samples[0].result_file if samples else None,
        message=bad.message if bad else None,
        seconds=round(sum(s.seconds for s in samples), 3),
        samples=tuple(samples),
        coords=tuple(sorted(coords)),
    )


# --------------------------------------------------------------------------- ids and times


def utc_stamp(moment: datetime) -> str:
    """ISO 8601 UTC with a `Z`, whole seconds: 2026-11-30T10:00:00Z."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


RUN_ID = re.compile(f"^{RUN_ID_PATTERN}$")


def make_run_id(started: datetime, blocks_hash: str) -> str:
    """`YYYYMMDDTHHMMSS.mmmZ-<first 8 hex of the blocks hash>-<8 random hex>`: milliseconds and
    32 random bits, so two runs started in the same second do not share an id (and the record
    writer never replaces a file if they did). Older records have ids with 4 random hex digits
    or without the last two parts."""
    hex_part = blocks_hash.split(":", 1)[-1][:8]
    moment = started.astimezone(UTC)
    stamp = f"{moment.strftime('%Y%m%dT%H%M%S')}.{moment.microsecond // 1000:03d}Z"
    return f"{stamp}-{hex_part}-{secrets.token_hex(4)}"


# --------------------------------------------------------------------------- files


def dumps(record: Record) -> str:
    """Deterministic JSON: sorted keys, indent 2, UTF-8 text, LF, one trailing newline; every
    secret masked."""
    data = mask_data(record.to_dict())
    return json.dumps(data, sort_keys=True, indent=2, ensure_ascii=False) + "\n"


def masked(record: Record) -> Record:
    """The record as it is stored: every secret masked (what may be printed or rendered)."""
    return Record.from_dict(mask_data(record.to_dict()))


def record_path(root: Path, runbook_id: str, run_id: str) -> Path:
    return root / RECORDS_DIR / runbook_id / f"{run_id}.json"


def write_record(root: Path, record: Record) -> Path:
    """Write the record under `root/runbooks/<id>/<run-id>.json` and return its path. The file
    appears whole or not at all, and an existing record is never replaced: a second run that
    got the same id fails here instead of overwriting the first."""
    path = record_path(root, record.runbook, record.run_id)
    rel = _rel(root, path)
    data = dumps(record).encode("utf-8")
    tmp: str | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = open_temp(path)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.link(tmp, path)  # fails when the name exists: never replace another run's record
    except FileExistsError:
        raise RecordError(f"{rel}: a record with this run id already exists") from None
    except OSError as exc:
        raise RecordError(f"{rel}: cannot write the record: {exc.strerror or exc}") from None
    finally:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
    return path


def _rel(root: Path, path: Path) -> str:
    return path.relative_to(root).as_posix() if path.is_relative_to(root) else path.as_posix()


MAX_RECORD_BYTES = 64 << 20  # the largest real records are well under 1 MiB


def _read_bounded(path: Path, where: str) -> str:
    """The file's text: a regular file (not a FIFO that would block, not /dev/zero) of at most
    MAX_RECORD_BYTES, UTF-8."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        raise RecordError(f"{where}: cannot read the record: {exc.strerror or exc}",
                          path=where, detail=f"cannot read the record: {exc.strerror or exc}",
                          ) from None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise RecordError(f"{where}: not a regular file", path=where,
                              detail="not a regular file")
        data = f.read(MAX_RECORD_BYTES + 1)
    if len(data) > MAX_RECORD_BYTES:
        detail = f"larger than {MAX_RECORD_BYTES >> 20} MiB: not a run record"
        raise RecordError(f"{where}: {detail}", path=where, detail=detail)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        detail = f"not UTF-8 text (byte {exc.start})"
        raise RecordError(f"{where}: {detail}", path=where, detail=detail) from None


def parse_record(text: str, where: str, expect: tuple[str, str] | None = None) -> Record:
    """A record from its JSON text, every field checked (schema.py); secrets masked. Raises
    RecordError located at `where`, the line and column, and the field. `expect`: the
    (runbook id, run id) its place under runbooks/ says it holds."""
    def fail(detail: str, line: int = 1, col: int = 1, fld: str | None = None) -> RecordError:
        return RecordError(f"{where}:{line}:{col}: {detail}", path=where, line=line, col=col,
                           field=fld, detail=detail)

    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise fail(f"not valid JSON: {exc.msg}", exc.lineno, exc.colno) from None
    except RecursionError:
        raise fail("not a run record: nested too deeply") from None
    except ValueError as exc:  # e.g. an integer literal with too many digits
        raise fail(f"not a run record: {exc}") from None
    try:
        record = Record.from_dict(data)
    except RecordError as exc:
        line, col = locate(text, exc.field or "")
        raise fail(str(exc), line, col, exc.field) from None
    except RecursionError:
        raise fail("not a run record: nested too deeply") from None
    if expect is not None:
        for name, want in zip(("runbook", "run_id"), expect, strict=True):
            got = getattr(record, name)
            if got != want:
                line, col = locate(text, name)
                raise fail(f"field {name}: {json.dumps(got)} does not match the record's place "
                           f"(expected {json.dumps(want)})", line, col, name)
    return Record.from_dict(mask_data(record.to_dict()))


def read_record(path: Path, name: str | None = None, *, placed: bool | None = None) -> Record:
    """One record, checked and secrets masked (records written before masking covered a case
    included). Raises RecordError located at the file (`name`, default its file name), the line
    and column, and the field. `placed`: the file is `runbooks/<runbook>/<run_id>.json`, and
    the record must say so (default: when the file sits in such a folder)."""
    where = name or path.name
    if placed is None:
        placed = path.parent.parent.name == RECORDS_DIR
    text = _read_bounded(path, where)
    return parse_record(text, where, (path.parent.name, path.stem) if placed else None)


def read_records(root: Path, runbook_id: str) -> tuple[list[Record], list[RecordError]]:
    """Every readable record of a runbook, oldest first (by started_at, then run id), and a
    located error for each file that cannot be read."""
    folder = root / RECORDS_DIR / runbook_id
    if not folder.is_dir():
        return [], []
    records, errors = [], []
    for path in sorted(folder.glob("*.json")):
        try:
            records.append(read_record(path, _rel(root, path), placed=True))
        except RecordError as exc:
            errors.append(exc)
    records.sort(key=lambda r: (r.started_at, r.run_id))
    return records, errors


def load_records(root: Path, runbook_id: str) -> list[Record]:
    """Every record of a runbook, oldest first. An unreadable file raises RecordError naming
    it: a table is never rendered from part of the history."""
    records, errors = read_records(root, runbook_id)
    if errors:
        raise errors[0]
    return records


def latest_record(root: Path, runbook_id: str) -> Record | None:
    records = load_records(root, runbook_id)
    return records[-1] if records else None


def record_rel_path(record: Record) -> str:
    """The record's path relative to the repository root, POSIX."""
    return f"{RECORDS_DIR}/{record.runbook}/{record.run_id}.json"


__all__ = [
    "RUN_ID",
    "ClientResult",
    "Point",
    "Record",
    "RecordError",
    "Sample",
    "Step",
    "VariantResult",
    "dumps",
    "latest_record",
    "load_records",
    "make_run_id",
    "masked",
    "parse_record",
    "point_from_samples",
    "read_record",
    "read_records",
    "record_path",
    "record_rel_path",
    "utc_stamp",
    "write_record",
]
