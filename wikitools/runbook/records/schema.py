"""The run record's schema: msgspec reads JSON data into the frozen dataclasses of `record.py` by
their type hints, which carry each field's pattern, bounds and description (`msgspec.Meta`), and
writes the same hints out as a JSON Schema for contributors (`runbooks/record.schema.json`). Every
error names the field (`clients[0].points[2].metrics.output_throughput`) and, through `locate`,
the line and column of the JSON text that holds it.

Why msgspec decoding into the existing dataclasses, rather than msgspec Structs or pydantic: the
records stay the frozen dataclasses the rest of the code builds, compares and `replace`s (STYLE),
so nothing outside this module and `record.py` changes; msgspec is one small compiled dependency
whose errors carry the field's path, and whose `Meta` gives the pattern, the bounds and the
description in one place, from which the JSON Schema is generated. pydantic would bring a larger
runtime (pydantic-core, typing-inspection) for the same checks.

What a type cannot say is read here: the free-form mappings of a record (host, engine, server,
GPU state, markers, metrics, timings) keep every key, a newer writer's additions included, so
they are not Structs: `FreeForm` reads them as any bounded JSON (no non-finite number, no number
beyond 1e18, no string over 1 MiB, at most 16 levels deep), its `fields` Struct checking the keys
it knows. msgspec's messages are translated into the reader's own (`expected a string, got a
number`), so a malformed record is reported as before."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import asdict
from functools import cache
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Self, TypeAlias

import msgspec
from msgspec import Meta

from wikitools.core.errors import InputError

MAX_NUMBER = 1e18  # no measured quantity comes near; 10**400 and Infinity are refused
MAX_STRING = 1 << 20  # one string (a log tail line, a command) at most 1 MiB
MAX_DEPTH = 16  # nesting of the free-form mappings
_MAX_INT = 10**18


def pattern(regex: str) -> Meta:
    """A string matching `regex` as a whole (not before a final newline, as `$` alone would)."""
    return Meta(pattern=f"^(?:{regex})$(?!\\n)")


Str = Annotated[str, Meta(max_length=MAX_STRING)]
Number = Annotated[float, Meta(ge=-MAX_NUMBER, le=MAX_NUMBER)]
Int = Annotated[int, Meta(ge=-_MAX_INT, le=_MAX_INT)]
Count = Annotated[int, Meta(ge=0, le=_MAX_INT)]


class SchemaError(InputError):
    """A value that does not fit the schema: `path` names the field (`host.gpus[1]`)."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"field {path or '(top)'}: {problem}")
        self.path = path
        self.problem = problem


class _Located(ValueError):
    """Raised inside a msgspec hook: msgspec adds where the hook's value sits."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(problem)
        self.path = path
        self.problem = problem


# --------------------------------------------------------------------------- free-form values


def _at(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list | tuple):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _range(value: float, low: float = -MAX_NUMBER, high: float = MAX_NUMBER) -> str | None:
    if isinstance(value, float) and not math.isfinite(value):
        return f"{value} is not a finite number"
    if isinstance(value, int) and abs(value) > MAX_NUMBER:
        return "the number is out of range"
    return None if low <= value <= high else f"{value} is out of range ({low:g} to {high:g})"


def _text(value: Any, path: str) -> str:
    if not isinstance(value, str):
        raise _Located(path, f"expected a string, got {_kind(value)}")
    if len(value) > MAX_STRING:
        raise _Located(path, "the string is too long")
    return value


def _scalar(value: Any, path: str, leaf: str) -> None:
    """A leaf of a free-form value or null: `leaf` "str" or "number", else any scalar."""
    if value is None:
        return
    if leaf == "str" or (leaf != "number" and isinstance(value, str)):
        _text(value, path)
        return
    if isinstance(value, bool) and leaf != "number":
        return
    if isinstance(value, bool) or not isinstance(value, int | float):
        wanted = "a number" if leaf == "number" else "a number, string, boolean or null"
        raise _Located(path, f"expected {wanted}, got {_kind(value)}")
    problem = _range(value)
    if problem:
        raise _Located(path, problem)


def _bounded(value: Any, path: str, leaf: str, depth: int) -> None:
    """Check a free-form value: `leaf` "json" (any JSON), "metric" (a scalar or an object of
    metrics, never a list), "str" or "number"."""
    if depth > MAX_DEPTH:
        raise _Located(path, "nested too deeply")
    if isinstance(value, dict) and leaf in ("json", "metric"):
        for key, item in value.items():
            _bounded(item, _at(path, key), leaf, depth + 1)
    elif isinstance(value, list) and leaf == "json":
        for i, item in enumerate(value):
            _bounded(item, _at(path, i), leaf, depth + 1)
    elif isinstance(value, list) and leaf == "metric":
        raise _Located(path, "expected a number, string, boolean, null or object, got a list")
    else:
        _scalar(value, path, leaf)


class FreeForm(dict[str, Any]):
    """A free-form mapping as msgspec reads it (through `decode_hook`): null reads as empty;
    each value is `leaf` (see `_bounded`); the keys `fields` names are checked against it.
    Record fields name the subclasses below for msgspec; type checkers see Mapping[str, Any]."""

    fields: ClassVar[type[msgspec.Struct] | None] = None
    leaf: ClassVar[str] = "json"

    @classmethod
    def read(cls, value: Any) -> Self:
        if value is None:
            return cls()
        if not isinstance(value, dict):
            raise _Located("", f"expected an object, got {_kind(value)}")
        if cls.fields is not None:
            try:
                msgspec.convert(value, cls.fields, dec_hook=decode_hook)
            except msgspec.ValidationError as exc:
                raise _Located(*located(exc, value, cls.fields)) from None
        for key, item in value.items():
            _bounded(item, key, cls.leaf, 1)
        return cls(value)


class _Pairs(tuple[tuple[str, str], ...]):
    """(name, value) pairs, read from an object (sorted by name) or a list of [name, value]
    pairs when their order matters."""

    __slots__ = ()

    @classmethod
    def read(cls, value: Any) -> _Pairs:
        if isinstance(value, list):
            return cls(_pair(item, _at("", i)) for i, item in enumerate(value))
        if not isinstance(value, dict):
            raise _Located("", f"expected an object, got {_kind(value)}")
        return cls(sorted((str(k), _text(v, str(k))) for k, v in value.items()))


def _pair(item: Any, path: str) -> tuple[str, str]:
    if not isinstance(item, list) or len(item) != 2:
        raise _Located(path, f"expected a [name, value] pair, got {_kind(item)}")
    return _text(item[0], _at(path, 0)), _text(item[1], _at(path, 1))


def decode_hook(kind: type, value: Any) -> Any:
    """msgspec's hook for the types it does not know: the free-form mappings and the pairs."""
    if issubclass(kind, FreeForm | _Pairs):
        return kind.read(value)
    raise NotImplementedError  # pragma: no cover - every custom type of the schema is above


# --------------------------------------------------------------------------- the mappings


def _d(text: str) -> Meta:
    return Meta(description=text)


class Gpu(msgspec.Struct):
    """One GPU of the host."""

    name: Annotated[Str | None, _d("the GPU's name (NVIDIA RTX PRO 6000 ...)")] = None
    compute_capability: Annotated[Str | None, _d("major.minor, e.g. 12.0")] = None
    index: Annotated[Count | None, _d("the driver's index of the GPU")] = None
    pci_bus_id: Annotated[Str | None, _d("the PCI bus id")] = None
    memory_total_mib: Annotated[Number | None, _d("memory in MiB")] = None
    memory_free_mib: Annotated[Number | None, _d("free memory in MiB at the start")] = None
    uuid: Annotated[Str | None, _d("the GPU's UUID")] = None


class Host(msgspec.Struct):
    """What the run's host is (other keys: any JSON)."""

    gpus: Annotated[list[Gpu] | None, _d("every GPU of the host")] = None
    gpu_count: Annotated[Annotated[int, Meta(ge=0, le=4096)] | None, _d("how many GPUs")] = None
    driver: Annotated[Str | None, _d("the NVIDIA driver version")] = None
    cuda: Annotated[Str | None, _d("the CUDA version the driver supports")] = None
    cpu_only: Annotated[bool | None, _d("true on a host without a GPU")] = None
    topology: Annotated[Str | None, _d("`nvidia-smi topo -m`")] = None
    hostname_hash: Annotated[Str | None, _d("a hash of the host name, never the name")] = None


class Engine(msgspec.Struct):
    """The inference engine that served the run (other keys: any JSON)."""

    name: Annotated[Str | None, _d("vllm, sglang, ...")] = None
    version: Annotated[Str | None, _d("the engine's version")] = None
    image: Annotated[Str | None, _d("the container image, when it ran in one")] = None
    image_digest: Annotated[Str | None, _d("the image's digest")] = None


class GpuProcess(msgspec.Struct):
    """A process holding GPU memory."""

    gpu: Annotated[Count | None, _d("the GPU's index")] = None
    pid: Annotated[Count | None, _d("the process id")] = None
    name: Annotated[Str | None, _d("the process name")] = None
    used_mib: Annotated[Number | None, _d("GPU memory it holds, MiB")] = None


class GpuSnapshot(msgspec.Struct):
    """The GPUs at one moment (other keys: any JSON)."""

    gpus: Annotated[list[GpuStatus] | None, _d("each GPU's state")] = None
    processes: Annotated[list[GpuProcess] | None, _d("processes holding GPU memory")] = None
    error: Annotated[Str | None, _d("why the state could not be read")] = None


class GpuStatus(msgspec.Struct):
    """One GPU's state."""

    index: Annotated[Count | None, _d("the driver's index of the GPU")] = None
    name: Annotated[Str | None, _d("the GPU's name")] = None
    driver: Annotated[Str | None, _d("the driver version")] = None
    pstate: Annotated[Str | None, _d("the performance state, P0 ... P12")] = None
    uuid: Annotated[Str | None, _d("the GPU's UUID")] = None
    clocks_event_reasons: Annotated[Str | None, _d("why clocks were held back")] = None


class GpuState(msgspec.Struct):
    """The GPU state before and after the run (other keys: any JSON)."""

    before: Annotated[GpuSnapshot | None, _d("before the server started")] = None
    after: Annotated[GpuSnapshot | None, _d("after the server stopped")] = None


class Env(FreeForm):
    leaf = "str"


class Server(msgspec.Struct):
    """The server as it ran (other keys: any JSON)."""

    command: Annotated[Str | None, _d("the server command, secrets masked")] = None
    env: Annotated[Env, _d("its environment, secrets masked")] = msgspec.field(
        default_factory=Env)
    log_tail: Annotated[list[Str | None] | None, _d("the last lines of its log")] = None
    model: Annotated[Str | None, _d("the model it served")] = None
    port: Annotated[Annotated[int, Meta(ge=0, le=65535)] | None, _d("its port")] = None
    run_tag: Annotated[Str | None, _d("the tag naming the run's containers")] = None


if TYPE_CHECKING:  # what a reader of a record sees; msgspec sees the classes below
    HostMap: TypeAlias = Mapping[str, Any]
    EngineMap: TypeAlias = Mapping[str, Any]
    ServerMap: TypeAlias = Mapping[str, Any]
    GpuStateMap: TypeAlias = Mapping[str, Any]
    MarkersMap: TypeAlias = Mapping[str, Any]
    MetricsMap: TypeAlias = Mapping[str, Any]
    TimingsMap: TypeAlias = Mapping[str, Any]
    Pairs: TypeAlias = tuple[tuple[str, str], ...]
else:
    Pairs = _Pairs

    class HostMap(FreeForm):
        fields = Host

    class EngineMap(FreeForm):
        fields = Engine

    class ServerMap(FreeForm):
        fields = Server

    class GpuStateMap(FreeForm):
        fields = GpuState

    class MarkersMap(FreeForm):
        pass

    class MetricsMap(FreeForm):
        leaf = "metric"  # quality clients nest scores per task; a smoke client keeps `usage`

    class TimingsMap(FreeForm):
        leaf = "number"


# --------------------------------------------------------------------------- errors


_EXPECTED = {"str": "a string", "int": "an integer", "float": "a number", "bool": "a boolean",
             "array": "a list", "object": "an object"}
_MESSAGE = re.compile(r"(?s)(.*?)(?: - at `\$(.*)`)?")
_PATH_PART = re.compile(r"\.?([^.\[\]]+)|\[(\d+)\]")


def located(exc: msgspec.ValidationError, data: Any, kind: Any) -> tuple[str, str]:
    """The (field path, problem) of msgspec's error reading `data` as `kind`, in the words of
    the reader's own errors."""
    message, where = _MESSAGE.fullmatch(str(exc)).groups()  # type: ignore[union-attr]
    path = (where or "").lstrip(".")
    cause = exc.__cause__
    if isinstance(cause, _Located):
        return _join(path, cause.path), cause.problem
    missing = re.fullmatch(r"Object missing required field `(.*)`", message)
    if missing:
        return _at(path, missing.group(1)), "missing"
    return path, _problem(message, _value_at(data, path), _info_at(kind, path))


def _join(path: str, sub: str) -> str:
    return f"{path}{sub}" if sub.startswith("[") else _at(path, sub) if sub else path


def _problem(message: str, value: Any, info: Any) -> str:
    got = re.fullmatch(r"Expected `([a-z]+)(?: \| null)?`, got `.*`", message)
    if got:
        return f"expected {_EXPECTED.get(got.group(1), got.group(1))}, got {_kind(value)}"
    if " matching regex " in message:
        shown = value if len(value) <= 40 else value[:37] + "..."
        regex = info.pattern.removeprefix("^(?:").removesuffix(")$(?!\\n)")
        return f"{json.dumps(shown)} does not match {regex}"
    if " of length <= " in message:
        return "the string is too long"
    if message == "Number out of range" or re.search(r"` [<>]=", message):
        low = -MAX_NUMBER if info.ge is None else info.ge
        high = MAX_NUMBER if info.le is None else info.le
        return _range(value, low, high) or message  # pragma: no branch
    return message[:1].lower() + message[1:]  # pragma: no cover - every message msgspec gives


def _value_at(data: Any, path: str) -> Any:
    for m in _PATH_PART.finditer(path):
        data = data[m.group(1)] if m.group(2) is None else data[int(m.group(2))]
    return data


def _info_at(kind: Any, path: str) -> Any:
    """The msgspec type information of the value at `path` in `kind` (None when unknown)."""
    info = _unwrap(_type_info(kind))
    for m in _PATH_PART.finditer(path):
        if m.group(2) is not None:
            info = _unwrap(getattr(info, "item_type", None))
        else:
            info = _unwrap(next((f.type for f in getattr(info, "fields", ())
                                 if f.name == m.group(1)), None))
    return info


@cache
def _type_info(kind: Any) -> Any:
    return msgspec.inspect.type_info(kind)


def _unwrap(info: Any) -> Any:
    while isinstance(info, msgspec.inspect.Metadata | msgspec.inspect.UnionType):
        if isinstance(info, msgspec.inspect.Metadata):
            info = info.type
        else:
            info = next(t for t in info.types if not isinstance(t, msgspec.inspect.NoneType))
    return info


# --------------------------------------------------------------------------- record data


def _fields(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """`asdict`'s mapping of a record dataclass; a point's coords are stored as a mapping."""
    return {k: (dict(v) if k == "coords" else v) for k, v in pairs}


def plain(value: Any) -> Any:
    """JSON-ready data: mappings as dicts, tuples and lists as lists (after `asdict`); a
    non-finite number (a client's NaN) as null, so that no record holds one."""
    if isinstance(value, Mapping):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


class RecordData:
    """The one `to_dict` and `from_dict` of every record dataclass: the JSON data is the
    dataclass's fields, read back by msgspec checking every field."""

    __slots__ = ()

    def to_dict(self) -> dict[str, Any]:
        return plain(asdict(self, dict_factory=_fields))  # type: ignore[call-overload]

    @classmethod
    def from_dict(cls, data: Any) -> Self:
        """Read and check; raises RecordError naming the field that does not fit. Missing
        fields take their defaults, unknown keys are ignored (a newer writer's additions)."""
        try:
            return msgspec.convert(data, cls, dec_hook=decode_hook)
        except msgspec.ValidationError as exc:
            path, problem = located(exc, data, cls)
            raise RecordError(str(SchemaError(path, problem)), field=path) from None


class RecordError(InputError):
    """A record file that cannot be read (unknown schema version, a field that does not fit the
    schema, broken JSON), or cannot be written. `path`, `line`, `col` and `field` locate it
    when known."""

    def __init__(self, message: str, *, path: str | None = None, line: int = 1, col: int = 1,
                 field: str | None = None, detail: str | None = None) -> None:
        super().__init__(message)
        self.path = path
        self.line = line
        self.col = col
        self.field = field
        self.detail = detail if detail is not None else message


# --------------------------------------------------------------------------- JSON Schema


_METRIC = {"anyOf": [{"type": ["number", "string", "boolean", "null"]},
                     {"type": "object", "additionalProperties": {"$ref": "#/$defs/Metric"}}],
           "description": "a number, string, flag or null, or an object of metrics"}
_LEAVES: dict[str, dict[str, Any]] = {"json": {}, "metric": {"$ref": "#/$defs/Metric"},
                                      "number": {"type": ["number", "null"]},
                                      "str": {"type": ["string", "null"]}}


def _schema_hook(kind: type) -> dict[str, Any]:
    if issubclass(kind, FreeForm):
        if kind.fields is not None:
            return {"$ref": f"#/$defs/{kind.fields.__name__}"}
        return {"type": "object", "additionalProperties": _LEAVES[kind.leaf]}
    pair = {"type": "array", "prefixItems": [{"type": "string"}] * 2, "minItems": 2,
            "maxItems": 2}
    return {"anyOf": [{"type": "object", "additionalProperties": {"type": "string"}},
                      {"type": "array", "items": pair}]}


def json_schema(record: type, title: str) -> str:
    """The JSON Schema of `record` (the Record dataclass) and of the mappings it holds, as
    stable text."""
    (top, *_), defs = msgspec.json.schema_components(
        [record, Host, Engine, Server, GpuState], schema_hook=_schema_hook,
        ref_template="#/$defs/{name}")
    schema = {"$schema": "https://json-schema.org/draft/2020-12/schema", "title": title,
              **top, "$defs": {**defs, "Metric": _METRIC}}
    return json.dumps(schema, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


# --------------------------------------------------------------------------- locations


def locate(text: str, path: str) -> tuple[int, int]:
    """1-based (line, column) of the value at `path` (as SchemaError names it) in the JSON
    `text`, or of the deepest part of the path that exists; (1, 1) when nothing matches."""
    decoder = json.JSONDecoder()
    ws = re.compile(r"[ \t\n\r]*")
    pos = ws.match(text, 0).end()  # type: ignore[union-attr]
    best = pos
    try:
        for m in _PATH_PART.finditer(path):
            key, index = m.group(1), m.group(2)
            pos = _child(text, pos, key, None if index is None else int(index), decoder, ws)
            if pos < 0:
                break
            best = pos
    except (ValueError, IndexError, RecursionError):
        pass
    line = text.count("\n", 0, best) + 1
    col = best - (text.rfind("\n", 0, best) + 1) + 1
    return line, col


def _child(text: str, pos: int, key: str | None, index: int | None,
           decoder: json.JSONDecoder, ws: re.Pattern[str]) -> int:
    """Position of the member `key` (of the object at `pos`) or the item `index` (of the list
    at `pos`); -1 when absent."""
    opening, closing = ("{", "}") if index is None else ("[", "]")
    if text[pos] != opening:
        return -1
    pos = ws.match(text, pos + 1).end()  # type: ignore[union-attr]
    count = 0
    while text[pos] != closing:
        if index is None:
            name, pos = json.decoder.scanstring(text, pos + 1)  # type: ignore[attr-defined]
            pos = ws.match(text, pos).end() + 1  # type: ignore[union-attr]  # the colon
            pos = ws.match(text, pos).end()  # type: ignore[union-attr]
            if name == key:
                return pos
        elif count == index:
            return pos
        pos = decoder.raw_decode(text, pos)[1]
        pos = ws.match(text, pos).end()  # type: ignore[union-attr]
        if text[pos] == ",":
            pos = ws.match(text, pos + 1).end()  # type: ignore[union-attr]
        count += 1
    return -1
