"""The run record's schema as data, and the one reader that checks a record against it.

The frozen dataclasses of `record.py` *are* the schema: this module reads JSON data into them by
their type hints, field by field, so the dataclasses, the reader and the validator cannot drift
apart. A field's metadata adds what a type cannot say (a pattern, bounds); the free-form mappings
of a record (host, engine, GPU state, metrics, …) are described by `Shape` values below. Every
error names the field (`clients[0].points[2].metrics.output_throughput`) and, through
`locate`, the line and column of the JSON text that holds it.

Why dataclasses read by their hints rather than JSON Schema or pydantic: records are frozen
dataclasses everywhere else in the code (STYLE), both alternatives would add a dependency and a
second description of the same fields (a JSON Schema document beside the dataclasses, or pydantic
models replacing them and their `slots`), and neither rejects what this reader must reject by
default — non-finite numbers (`NaN`, `Infinity`) and integers too large for a float (`10**400`).
"""

from __future__ import annotations

import json
import math
import re
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import MISSING, asdict, fields, is_dataclass
from typing import Any, Self, TypeVar, Union

from wikitools.core.errors import InputError

MAX_NUMBER = 1e18  # no measured quantity comes near; 10**400 and Infinity are refused
MAX_STRING = 1 << 20  # one string (a log tail line, a command) at most 1 MiB
MAX_DEPTH = 16  # nesting of the free-form mappings

T = TypeVar("T")


class SchemaError(InputError):
    """A value that does not fit the schema: `path` names the field (`host.gpus[1]`)."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"field {path or '(top)'}: {problem}")
        self.path = path
        self.problem = problem


# --------------------------------------------------------------------------- shapes


@typing.final
class Shape:
    """What a free-form JSON value may hold. `kind`: "str", "int", "number", "bool", "scalar"
    (any of those or null), "metric" (a scalar or an object of metrics), "object" (with `keys`:
    known keys and their shapes; other keys are any bounded JSON value, so newer writers'
    additions still read), "map" (any keys, each value `item`), "list" (each item `item`),
    "json" (any bounded JSON value)."""

    __slots__ = ("high", "item", "keys", "kind", "low", "nullable", "pattern")

    def __init__(self, kind: str, *, keys: Mapping[str, Shape] | None = None,
                 item: Shape | None = None, pattern: str | None = None,
                 low: float = -MAX_NUMBER, high: float = MAX_NUMBER,
                 nullable: bool = True) -> None:
        self.kind = kind
        self.keys = dict(keys or {})
        self.item = item
        self.pattern = re.compile(pattern) if pattern else None
        self.low, self.high = low, high
        self.nullable = nullable


STR = Shape("str")
INT = Shape("int")
COUNT = Shape("int", low=0)
NUMBER = Shape("number")
BOOL = Shape("bool")
SCALAR = Shape("scalar")
JSON = Shape("json")

GPU = Shape("object", nullable=False, keys={
    "name": STR, "compute_capability": STR, "index": COUNT, "pci_bus_id": STR,
    "memory_total_mib": NUMBER, "memory_free_mib": NUMBER, "uuid": STR,
})
HOST = Shape("object", nullable=False, keys={
    "gpus": Shape("list", item=GPU), "gpu_count": Shape("int", low=0, high=4096),
    "driver": STR, "cuda": STR, "cpu_only": BOOL, "topology": STR, "hostname_hash": STR,
})
ENGINE = Shape("object", nullable=False, keys={
    "name": STR, "version": STR, "image": STR, "image_digest": STR,
})
GPU_SNAPSHOT = Shape("object", keys={
    "gpus": Shape("list", item=Shape("object", nullable=False, keys={
        "index": COUNT, "name": STR, "driver": STR, "pstate": STR, "uuid": STR,
        "clocks_event_reasons": STR,
    })),
    "processes": Shape("list", item=Shape("object", nullable=False, keys={
        "gpu": COUNT, "pid": COUNT, "name": STR, "used_mib": NUMBER,
    })),
    "error": STR,
})
GPU_STATE = Shape("object", nullable=False, keys={"before": GPU_SNAPSHOT, "after": GPU_SNAPSHOT})
SERVER = Shape("object", nullable=False, keys={
    "command": STR, "env": Shape("map", item=STR), "log_tail": Shape("list", item=STR),
    "model": STR, "port": Shape("int", low=0, high=65535), "run_tag": STR,
})
# A metric is a number, a string, a flag or null, or an object of those (quality clients nest
# scores per task, a smoke client keeps the server's `usage`); never a list.
METRIC = Shape("metric")
METRICS = Shape("map", nullable=False, item=METRIC)
TIMINGS = Shape("map", nullable=False, item=NUMBER)
MARKERS = Shape("object", nullable=False)



def shaped(shape: Shape) -> dict[str, Any]:
    """Field metadata: the shape a mapping field's value must have."""
    return {"shape": shape}


def matching(pattern: str) -> dict[str, Any]:
    """Field metadata: the pattern a string field must match."""
    return {"pattern": pattern}


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
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _number(value: Any, path: str, low: float, high: float, integer: bool) -> float | int:
    if isinstance(value, bool) or not isinstance(value, int | float) or (
            integer and not isinstance(value, int)):
        raise SchemaError(path, f"expected {'an integer' if integer else 'a number'}, "
                                f"got {_kind(value)}")
    if isinstance(value, float) and not math.isfinite(value):
        raise SchemaError(path, f"{value} is not a finite number")
    if isinstance(value, int) and abs(value) > MAX_NUMBER:
        raise SchemaError(path, "the number is out of range")
    if not low <= value <= high:
        raise SchemaError(path, f"{value} is out of range ({low:g} to {high:g})")
    return value


def _string(value: Any, path: str, pattern: re.Pattern[str] | None) -> str:
    if not isinstance(value, str):
        raise SchemaError(path, f"expected a string, got {_kind(value)}")
    if len(value) > MAX_STRING:
        raise SchemaError(path, "the string is too long")
    if pattern is not None and not pattern.fullmatch(value):
        shown = value if len(value) <= 40 else value[:37] + "..."
        raise SchemaError(path, f"{json.dumps(shown)} does not match {pattern.pattern}")
    return value


def check_shape(value: Any, shape: Shape, path: str, depth: int = 0) -> None:
    """Raise SchemaError when `value` does not fit `shape`."""
    if depth > MAX_DEPTH:
        raise SchemaError(path, "nested too deeply")
    if value is None:
        if shape.nullable or shape.kind in ("scalar", "json"):
            return
        raise SchemaError(path, "expected an object, got null")
    check = _CHECKS.get(shape.kind)
    if check is None:  # pragma: no cover - a Shape with an unknown kind is a bug in this module
        raise AssertionError(shape.kind)
    check(value, shape, path, depth)


def _check_str(value: Any, shape: Shape, path: str, _depth: int) -> None:
    _string(value, path, shape.pattern)


def _check_number(value: Any, shape: Shape, path: str, _depth: int) -> None:
    _number(value, path, shape.low, shape.high, shape.kind == "int")


def _check_bool(value: Any, _shape: Shape, path: str, _depth: int) -> None:
    if not isinstance(value, bool):
        raise SchemaError(path, f"expected a boolean, got {_kind(value)}")


def _check_scalar(value: Any, _shape: Shape, path: str, _depth: int) -> None:
    if isinstance(value, str):
        _string(value, path, None)
    elif not isinstance(value, bool):
        if not isinstance(value, int | float):
            raise SchemaError(path, f"expected a number, string, boolean or null, got "
                                    f"{_kind(value)}")
        _number(value, path, -MAX_NUMBER, MAX_NUMBER, False)


def _check_object(value: Any, shape: Shape, path: str, depth: int) -> None:
    if not isinstance(value, dict):
        raise SchemaError(path, f"expected an object, got {_kind(value)}")
    for key, item in value.items():
        sub = shape.keys.get(key) or (shape.item if shape.kind == "map" else None) or JSON
        check_shape(item, sub, _at(path, key), depth + 1)


def _check_list(value: Any, shape: Shape, path: str, depth: int) -> None:
    if not isinstance(value, list):
        raise SchemaError(path, f"expected a list, got {_kind(value)}")
    for i, item in enumerate(value):
        check_shape(item, shape.item or JSON, _at(path, i), depth + 1)


def _check_metric(value: Any, _shape: Shape, path: str, depth: int) -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            check_shape(item, METRIC, _at(path, key), depth + 1)
    elif isinstance(value, list):
        raise SchemaError(path, "expected a number, string, boolean, null or object, got "
                                "a list")
    else:
        check_shape(value, SCALAR, path, depth)


def _check_json(value: Any, _shape: Shape, path: str, depth: int) -> None:
    if isinstance(value, dict | list):
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for key, item in items:
            check_shape(item, JSON, _at(path, key), depth + 1)
    else:
        check_shape(value, SCALAR, path, depth)


_CHECKS: dict[str, Callable[[Any, Shape, str, int], None]] = {
    "str": _check_str, "int": _check_number, "number": _check_number, "bool": _check_bool,
    "scalar": _check_scalar, "object": _check_object, "map": _check_object,
    "list": _check_list, "metric": _check_metric, "json": _check_json,
}


# --------------------------------------------------------------------------- dataclasses


def _strip_optional(hint: Any) -> tuple[Any, bool]:
    args = typing.get_args(hint)
    if typing.get_origin(hint) in (Union, types.UnionType) and type(None) in args:
        rest = [a for a in args if a is not type(None)]
        return (rest[0] if len(rest) == 1 else Union[tuple(rest)]), True  # noqa: UP007
    return hint, False


def _value(hint: Any, value: Any, path: str, meta: Mapping[str, Any]) -> Any:
    hint, optional = _strip_optional(hint)
    if value is None and optional:
        return None
    origin = typing.get_origin(hint)
    if is_dataclass(hint) and isinstance(hint, type):
        return read_dataclass(hint, value, path)
    if hint is str:
        return _string(value, path, re.compile(meta["pattern"]) if "pattern" in meta else None)
    if hint is int:
        return _number(value, path, meta.get("low", -MAX_NUMBER), meta.get("high", MAX_NUMBER),
                       True)
    if hint is float:
        return float(_number(value, path, meta.get("low", -MAX_NUMBER),
                             meta.get("high", MAX_NUMBER), False))
    if hint is bool:
        if not isinstance(value, bool):
            raise SchemaError(path, f"expected a boolean, got {_kind(value)}")
        return value
    if origin is tuple:
        args = typing.get_args(hint)
        if args == (tuple[str, str], Ellipsis):  # (name, value) pairs: an object, or a list
            if isinstance(value, list):  # of pairs when their order matters
                return tuple(_pair(item, _at(path, i)) for i, item in enumerate(value))
            if not isinstance(value, dict):
                raise SchemaError(path, f"expected an object, got {_kind(value)}")
            return tuple(sorted((str(k), _string(v, _at(path, str(k)), None))
                                for k, v in value.items()))
        if not isinstance(value, list):
            raise SchemaError(path, f"expected a list, got {_kind(value)}")
        return tuple(_value(args[0], item, _at(path, i), meta) for i, item in enumerate(value))
    if origin is Mapping or hint is Mapping:
        check_shape(value, meta.get("shape", JSON), path)
        return value if value is not None else {}
    if hint is Any:
        check_shape(value, JSON, path)
        return value
    raise AssertionError(f"no reader for {hint!r} at {path}")  # pragma: no cover


def _pair(item: Any, path: str) -> tuple[str, str]:
    if not isinstance(item, list) or len(item) != 2:
        raise SchemaError(path, f"expected a [name, value] pair, got {_kind(item)}")
    return _string(item[0], _at(path, 0), None), _string(item[1], _at(path, 1), None)


def read_dataclass(cls: type[T], data: Any, path: str = "") -> T:
    """An instance of the dataclass `cls` from JSON data, every field checked against its type
    hint and metadata; missing fields take their defaults, unknown keys are ignored (a newer
    writer's additions). Raises SchemaError naming the first field that does not fit."""
    if not isinstance(data, dict):
        raise SchemaError(path, f"expected an object, got {_kind(data)}")
    hints = typing.get_type_hints(cls)
    values: dict[str, Any] = {}
    for f in fields(cls):  # type: ignore[arg-type]
        if not f.init:
            continue
        where = _at(path, f.name)
        if f.name not in data:
            if f.default is MISSING and f.default_factory is MISSING:
                raise SchemaError(where, "missing")
            continue
        raw = data[f.name]
        if raw is None and f.default is None:
            values[f.name] = None
            continue
        if raw is None and f.default_factory is not MISSING:  # an empty mapping or list
            values[f.name] = f.default_factory()
            continue
        values[f.name] = _value(hints[f.name], raw, where, f.metadata)
    return cls(**values)


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
    dataclass's fields (see schema.py, which reads them back checking every field)."""

    __slots__ = ()

    def to_dict(self) -> dict[str, Any]:
        return plain(asdict(self, dict_factory=_fields))  # type: ignore[call-overload]

    @classmethod
    def from_dict(cls, data: Any) -> Self:
        """Read and check; raises RecordError naming the field that does not fit."""
        try:
            return read_dataclass(cls, data)
        except SchemaError as exc:
            raise RecordError(str(exc), field=exc.path) from None




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


# --------------------------------------------------------------------------- locations


_PATH_PART = re.compile(r"\.?([^.\[\]]+)|\[(\d+)\]")


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
