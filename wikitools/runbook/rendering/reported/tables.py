"""Reading a result file (CSV, TSV, JSON, JSONL) into rows of named cells. JSON files are the
community's own shapes: a list of objects, an object whose named part is a list of objects
(`results` of the decode benchmark), an object of objects keyed by a value (`prefill`, keyed
by context length), or one object (a summary: one row, nested names dotted). Every problem is
a `DataError` at the file's line and column."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from wikitools.core.errors import InputError

FORMATS = ("csv", "tsv", "json", "jsonl")
KEY = "key"  # the column that holds an object's key when a part is an object of objects


class DataError(InputError):
    """A result file that cannot be read as the region asks: where, and what is wrong."""

    def __init__(self, line: int, col: int, message: str) -> None:
        super().__init__(message)
        self.line = line
        self.col = col
        self.message = message


class RequestError(DataError):
    """The file is sound but lacks what the region asks of it (a part, a format): the region is
    where to fix it."""


Row = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Table:
    columns: tuple[str, ...]  # in the order the file first names them
    rows: tuple[Row, ...]


def format_of(path: str) -> str:
    suffix = path.rsplit(".", 1)[-1].lower() if "." in path else ""
    if suffix not in FORMATS:
        raise RequestError(1, 1, f"unknown data format '.{suffix}' (known: {', '.join(FORMATS)})")
    return suffix


def read_table(text: str, path: str, part: str | None = None) -> Table:
    """The rows of `text`, the contents of the file at `path`; `part` names the piece of a JSON
    document to read (dotted keys), the whole document when None."""
    fmt = format_of(path)
    if fmt in ("csv", "tsv"):
        if part:
            raise RequestError(1, 1, f"'table={part}' names a part, but a {fmt.upper()} file "
                                     "has none")
        return _delimited(text, "," if fmt == "csv" else "\t")
    if fmt == "jsonl":
        if part:
            raise RequestError(1, 1, f"'table={part}' names a part, but a JSONL file has none")
        return _table(list(_json_lines(text)), "the file")
    doc = _json(text, 1)
    return _table(_part(doc, part), f"'{part}'" if part else "the document")


def _delimited(text: str, delimiter: str) -> Table:
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, strict=True)
    try:
        header = next(reader, None)
        if not header or not any(h.strip() for h in header):
            raise DataError(1, 1, "the file has no header row")
        _unique(header)
        rows = []
        for fields in reader:
            if not fields:
                continue
            if len(fields) != len(header):
                raise DataError(reader.line_num, 1,
                                f"row has {len(fields)} fields, the header {len(header)}")
            rows.append({h: _scalar(v) for h, v in zip(header, fields, strict=True)})
    except csv.Error as exc:
        raise DataError(reader.line_num or 1, 1, f"not valid CSV: {exc}") from None
    return Table(tuple(header), tuple(rows))


def _unique(header: list[str]) -> None:
    seen: set[str] = set()
    for i, name in enumerate(header):
        if name in seen:
            raise DataError(1, i + 1, f"column '{name}' is named twice in the header")
        seen.add(name)


def _scalar(text: str) -> Any:
    """A CSV field as the number it spells, else the text."""
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            continue
    return text


def _json(text: str, line: int) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataError(line + exc.lineno - 1, exc.colno, f"not valid JSON: {exc.msg}") from None


def _json_lines(text: str) -> Iterator[Any]:
    for n, line in enumerate(text.splitlines(), 1):
        if line.strip():
            yield _LineDoc(n, _json(line, n))


@dataclass(frozen=True, slots=True)
class _LineDoc:
    line: int
    value: Any


def _part(doc: Any, part: str | None) -> Any:
    for key in (part.split(".") if part else []):
        if not isinstance(doc, dict) or key not in doc:
            have = ", ".join(sorted(doc)) if isinstance(doc, dict) else type(doc).__name__
            raise RequestError(1, 1, f"the document has no part '{part}' (it has: {have})")
        doc = doc[key]
    return doc


def _table(items: Any, what: str) -> Table:
    if isinstance(items, dict) and items and all(isinstance(v, dict) for v in items.values()):
        items = [{KEY: _scalar(k), **v} for k, v in items.items()]
    elif isinstance(items, dict) and items:  # one summary object: one row
        items = [items]
    if not isinstance(items, list) or not items:
        raise DataError(1, 1, f"{what} is not a list of objects, an object of objects or an "
                              "object")
    rows: list[Row] = []
    columns: dict[str, None] = {}
    for item in items:
        line, value = (item.line, item.value) if isinstance(item, _LineDoc) else (1, item)
        if not isinstance(value, dict):
            raise DataError(line, 1, f"{what} holds a {type(value).__name__} where objects are")
        row = dict(_flat(value))
        columns.update(dict.fromkeys(row))
        rows.append(row)
    return Table(tuple(columns), tuple(rows))


def _flat(obj: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    """Nested objects as dotted names (`selected_summary.correct`)."""
    for key, value in obj.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            yield from _flat(value, name + ".")
        else:
            yield name, value
