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
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from wikitools.errors import InputError
from wikitools.runbook.engines.secrets import mask_data
from wikitools.runbook.records.stats import Spread, median_metrics, spread_of

SCHEMA_VERSION = 2  # a record without variants
VARIANTS_VERSION = 3  # a record with server variants
READABLE_VERSIONS = (1, 2, 3)
# What each variant has of its own; at the top level only in a record without variants.
PER_VARIANT = ("engine", "server", "markers", "timings", "gpu_state", "clients")
RECORDS_DIR = "runbooks"



def _fields(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """`asdict`'s mapping of a record dataclass; a point's coords are stored as a mapping."""
    return {k: (dict(v) if k == "coords" else v) for k, v in pairs}


def plain(value: Any) -> Any:
    """JSON-ready data: mappings as dicts, tuples and lists as lists (after `asdict`)."""
    if isinstance(value, Mapping):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value


@dataclass(frozen=True, slots=True)
class Step:
    name: str
    status: str  # ok | failed | timeout | skipped
    seconds: float = 0.0
    message: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return plain(asdict(self, dict_factory=_fields))


@dataclass(frozen=True, slots=True)
class Sample:
    """One measurement of a sweep point (one client run)."""

    status: str  # ok | failed | timeout
    metrics: Mapping[str, Any] = field(default_factory=dict)
    seconds: float = 0.0
    result_file: str | None = None
    message: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return plain(asdict(self, dict_factory=_fields))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Sample:
        return cls(data.get("status", "ok"), data.get("metrics") or {}, data.get("seconds", 0.0),
                   data.get("result_file"), data.get("message"))


@dataclass(frozen=True, slots=True)
class Point:
    """One client sweep point (or the single run of a client without a sweep: value None).
    `metrics` is the median over the successful `samples`; `coords` names the value of each
    swept variable (one for a plain sweep, two for a grid)."""

    value: str | None
    status: str
    metrics: Mapping[str, Any] = field(default_factory=dict)
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

    def to_dict(self) -> dict[str, Any]:
        return plain(asdict(self, dict_factory=_fields))


@dataclass(frozen=True, slots=True)
class ClientResult:
    name: str
    kind: str
    command: str
    sweep_var: str | None
    points: tuple[Point, ...] = ()
    sweep_vars: tuple[str, ...] = ()  # every swept variable; two for a grid sweep
    repeats: int = 1  # samples asked for per point
    warmup: bool = False  # an unrecorded run preceded each point

    def __post_init__(self) -> None:
        if not self.sweep_vars and self.sweep_var:
            object.__setattr__(self, "sweep_vars", (self.sweep_var,))

    @property
    def grid(self) -> bool:
        return len(self.sweep_vars) > 1

    def to_dict(self) -> dict[str, Any]:
        return plain(asdict(self, dict_factory=_fields))


@dataclass(frozen=True, slots=True)
class VariantResult:
    """One server configuration of a run and what was measured against it. A record without
    variants has one, with no coordinates, made from its top-level fields."""

    coords: tuple[tuple[str, str], ...] = ()  # (variable, value), in the block's order
    status: str = "ok"  # ok | failed | skipped (not started: an earlier variant failed hard)
    failed_step: str | None = None
    message: str | None = None
    engine: Mapping[str, Any] = field(default_factory=dict)
    server: Mapping[str, Any] = field(default_factory=dict)
    markers: Mapping[str, Any] = field(default_factory=dict)
    timings: Mapping[str, Any] = field(default_factory=dict)
    gpu_state: Mapping[str, Any] = field(default_factory=dict)
    clients: tuple[ClientResult, ...] = ()

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
        data = plain(asdict(self, dict_factory=_fields))
        data["coords"] = [list(kv) for kv in self.coords]  # ordered: the block's order
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> VariantResult:
        maps = {k: data.get(k) or {} for k in ("engine", "server", "markers", "timings",
                                                "gpu_state")}
        return cls(coords=tuple((str(k), str(v)) for k, v in data.get("coords") or ()),
                   status=data.get("status", "ok"), failed_step=data.get("failed_step"),
                   message=data.get("message"), **maps,
                   clients=tuple(_client(c) for c in data.get("clients", ())))


@dataclass(frozen=True, slots=True)
class Record:
    runbook: str
    page: str
    blocks_hash: str
    run_id: str
    started_at: str
    finished_at: str
    status: str  # ok | failed
    failed_step: str | None = None
    message: str | None = None
    host: Mapping[str, Any] = field(default_factory=dict)
    engine: Mapping[str, Any] = field(default_factory=dict)
    server: Mapping[str, Any] = field(default_factory=dict)
    markers: Mapping[str, Any] = field(default_factory=dict)
    timings: Mapping[str, Any] = field(default_factory=dict)
    steps: tuple[Step, ...] = ()
    clients: tuple[ClientResult, ...] = ()
    artifacts_dir: str | None = None
    gpu_state: Mapping[str, Any] = field(default_factory=dict)  # {"before": …, "after": …}
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

    def variant(self, coords: tuple[tuple[str, str], ...]) -> VariantResult | None:
        """The variant at `coords` (order of the pairs does not matter)."""
        want = sorted(coords)
        return next((v for v in self.each_variant() if sorted(v.coords) == want), None)

    def client(self, name: str | None) -> ClientResult | None:
        return next((c for c in self.clients if c.name == name), None)

    def to_dict(self) -> dict[str, Any]:
        data = plain(asdict(self, dict_factory=_fields))
        if self.variants:
            data["variants"] = [v.to_dict() for v in self.variants]
            for key in PER_VARIANT:
                del data[key]
        else:
            del data["variants"]
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Record:
        version = data.get("schema_version")
        if version not in READABLE_VERSIONS:
            known = " or ".join(str(v) for v in READABLE_VERSIONS)
            raise RecordError(f"schema_version {version!r} is not {known}")
        try:
            clients = tuple(_client(c) for c in data.get("clients", ()))
            steps = tuple(
                Step(s["name"], s["status"], s.get("seconds", 0.0), s.get("message"))
                for s in data.get("steps", ())
            )
            return cls(
                runbook=data["runbook"],
                page=data.get("page", ""),
                blocks_hash=data.get("blocks_hash", ""),
                run_id=data["run_id"],
                started_at=data["started_at"],
                finished_at=data.get("finished_at", data["started_at"]),
                status=data["status"],
                failed_step=data.get("failed_step"),
                message=data.get("message"),
                host=data.get("host") or {},
                engine=data.get("engine") or {},
                server=data.get("server") or {},
                markers=data.get("markers") or {},
                timings=data.get("timings") or {},
                steps=steps,
                clients=clients,
                artifacts_dir=data.get("artifacts_dir"),
                gpu_state=data.get("gpu_state") or {},
                schema_version=version,
                variants=tuple(VariantResult.from_dict(v) for v in data.get("variants") or ()),
            )
        except (KeyError, TypeError, AttributeError) as exc:
            raise RecordError(f"missing or malformed field {exc}") from None


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


def _client(c: Mapping[str, Any]) -> ClientResult:
    return ClientResult(
        name=c["name"],
        kind=c.get("kind", "serving"),
        command=c.get("command", ""),
        sweep_var=c.get("sweep_var"),
        points=tuple(_point(p, c.get("sweep_var")) for p in c.get("points", ())),
        sweep_vars=tuple(c.get("sweep_vars") or ([c["sweep_var"]] if c.get("sweep_var") else [])),
        repeats=c.get("repeats", 1),
        warmup=c.get("warmup", False),
    )


def _point(p: Mapping[str, Any], sweep_var: str | None) -> Point:
    value = p.get("value")
    coords = p.get("coords")
    if not coords:  # schema 1 (and an early schema 2 writer): the one swept variable's value
        coords = {sweep_var: value} if sweep_var and value is not None else {}
    return Point(
        value=value,
        status=p.get("status", "ok"),
        metrics=p.get("metrics") or {},
        result_file=p.get("result_file"),
        message=p.get("message"),
        seconds=p.get("seconds", 0.0),
        samples=tuple(Sample.from_dict(s) for s in p.get("samples") or ()),
        coords=tuple(sorted((str(k), str(v)) for k, v in coords.items())),
    )


class RecordError(InputError):
    """A record file that cannot be read (unknown schema version, missing fields, broken JSON),
    or cannot be written."""


# --------------------------------------------------------------------------- ids and times


def utc_stamp(moment: datetime) -> str:
    """ISO 8601 UTC with a `Z`, whole seconds: 2026-11-30T10:00:00Z."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


RUN_ID = re.compile(r"^\d{8}T\d{6}(?:\.\d{3})?Z-[0-9a-f]{8}(?:-[0-9a-f]{4}|-[0-9a-f]{8})?$")


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
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
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


def read_record(path: Path, name: str | None = None) -> Record:
    """One record, secrets masked (records written before masking covered a case included).
    Raises RecordError located at the file (`name`, default its file name), and at the line and
    column when the JSON itself is broken."""
    where = name or path.name
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise RecordError(f"{where}: cannot read the record: {exc.strerror or exc}") from None
    except json.JSONDecodeError as exc:
        raise RecordError(f"{where}:{exc.lineno}:{exc.colno}: not valid JSON: {exc.msg}") from None
    except ValueError as exc:
        raise RecordError(f"{where}: cannot read the record: {exc}") from None
    if not isinstance(data, dict):
        raise RecordError(f"{where}: not a JSON object")
    try:
        return Record.from_dict(mask_data(data))
    except RecordError as exc:
        raise RecordError(f"{where}: {exc}") from None


def read_records(root: Path, runbook_id: str) -> tuple[list[Record], list[RecordError]]:
    """Every readable record of a runbook, oldest first (by started_at, then run id), and a
    located error for each file that cannot be read."""
    folder = root / RECORDS_DIR / runbook_id
    if not folder.is_dir():
        return [], []
    records, errors = [], []
    for path in sorted(folder.glob("*.json")):
        try:
            records.append(read_record(path, _rel(root, path)))
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
    "point_from_samples",
    "read_record",
    "read_records",
    "record_path",
    "record_rel_path",
    "utc_stamp",
    "write_record",
]
