"""Data regions: `<!-- wiki:results data=FILE sha256=HEX … -->` renders a table (and, when asked,
a chart file) from kept result files. The region records each file's sha256: a file whose bytes
no longer match is reported (RGN007), a file or column that cannot be used is located (RGN008).

Attributes: `data` (kept files, comma-separated), `sha256` (one per file), `labels` (one per
file: the `file` column), `table` (the part of a JSON document), `where` (`col=value,…`, all
must hold; `*` in a value matches any text), `columns` (`col`, `col:Label` or `col:`,
comma-separated), `pivot` (`row,column,value`: a matrix; the row may join columns,
`model+mtp`), `chart` (a name: `wiki/assets/data/NAME.svg`), `title` (the chart's)."""

from __future__ import annotations

import decimal
import fnmatch
import math
import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from wikitools.core.diagnostics import Diagnostic, did_you_mean
from wikitools.core.errors import InputError
from wikitools.runbook.blocks.regions import Region
from wikitools.runbook.rendering.escape import md_code, md_text
from wikitools.runbook.rendering.reported.chart import LineChart, render_svg
from wikitools.runbook.rendering.reported.sources import Pinned, load_pinned
from wikitools.runbook.rendering.reported.tables import DataError, RequestError, Row, read_table

KEYS = ("data", "sha256", "labels", "table", "where", "columns", "pivot", "chart", "title")
FILE = "file"  # the column naming which file a row came from
CHARTS = "wiki/assets/data"
CHART_NAME = re.compile(r"[a-z0-9][a-z0-9-]{0,79}")  # a file name, never a path
DASH = "—"


def is_data_region(region: Region) -> bool:
    return region.get("data") is not None


@dataclass(frozen=True, slots=True)
class Output:
    body: str | None  # None when the region cannot be rendered (see the diagnostics)
    charts: Mapping[str, str] = field(default_factory=dict)  # path → SVG text
    diagnostics: tuple[Diagnostic, ...] = ()


class _Problem(InputError):
    def __init__(self, code: str, message: str, where: tuple[str, int, int] | None = None):
        super().__init__(message)
        self.code, self.message, self.where = code, message, where


def render_data_region(region: Region, root: Path) -> Output:
    """The body of a data region and its chart, or the diagnostics that say why not."""
    try:
        files = _files(region, root)
        rows = _rows(region, files)
        shaped = _shape(region, rows, files)
    except _Problem as p:
        path, line, col = p.where or (region.path, region.start, region.col)
        return Output(None, {}, (Diagnostic(path, line, col, p.code, p.message),))
    stale = tuple(
        Diagnostic(region.path, region.start, region.col, "RGN007",
                   f"{pin.rel} changed since this region recorded it: sha256 is now "
                   f"{pin.sha256} (kept files stay as their source published them)")
        for pin, want in files if pin.sha256 != want.lower())
    charts: dict[str, str] = {}
    image = ""
    name = region.get("chart")
    if name is not None and not CHART_NAME.fullmatch(name):
        return Output(None, {}, (Diagnostic(
            region.path, region.start, region.col, "RGN005",
            f"chart name '{name}' is not lower-case letters, digits and hyphens "
            f"(it names {CHARTS}/NAME.svg)"),))
    if name:
        chart_path = f"{CHARTS}/{name}.svg"
        charts[chart_path] = render_svg(_chart(region, shaped))
        link = posixpath.relpath(chart_path, posixpath.dirname(region.path) or ".")
        image = f"![{md_text(region.get('title') or name)}]({link})\n\n"
    body = _markdown(shaped) + "\n" + image + _provenance([p for p, _ in files])
    return Output(body, charts, stale)


def _split(value: str | None) -> list[str]:
    return [v.strip() for v in (value or "").split(",") if v.strip()]


def _files(region: Region, root: Path) -> list[tuple[Pinned, str]]:
    for key, _ in region.attrs:
        if key not in KEYS:
            raise _Problem("RGN005", f"unknown data region attribute '{key}'"
                                     f"{did_you_mean(key, KEYS)} (known: {', '.join(KEYS)})")
    paths, sums = _split(region.get("data")), _split(region.get("sha256"))
    if not paths:
        raise _Problem("RGN005", "data region names no file (data=data/<source>/<commit>/…)")
    labels = _split(region.get("labels"))
    if labels and len(labels) != len(paths):
        raise _Problem("RGN005", f"{len(labels)} labels for {len(paths)} files")
    pins = []
    for i, rel in enumerate(paths):
        try:
            pin = load_pinned(root, rel)
        except DataError as exc:
            raise _Problem("RGN008", exc.message) from None
        if i >= len(sums):
            raise _Problem("RGN005", f"data region records no sha256 for {rel} (add it to "
                                     f"sha256=; the file's is {pin.sha256})")
        pins.append((pin, sums[i]))
    if len(sums) > len(paths):
        raise _Problem("RGN005", f"{len(sums)} sha256 values for {len(paths)} files")
    return pins


def _rows(region: Region, files: list[tuple[Pinned, str]]) -> list[Row]:
    labels = _split(region.get("labels"))
    rows: list[Row] = []
    for i, (pin, _want) in enumerate(files):
        try:
            table = read_table(pin.text, pin.rel, region.get("table"))
        except RequestError as exc:
            raise _Problem("RGN008", exc.message) from None
        except DataError as exc:
            raise _Problem("RGN008", exc.message, (pin.rel, exc.line, exc.col)) from None
        label = labels[i] if labels else posixpath.basename(pin.path)
        for row in table.rows:
            rows.append({FILE: label, **row})
    columns = {FILE, *(k for row in rows for k in row)}
    for cond in _split(region.get("where")):
        name, eq, want = cond.partition("=")
        if not eq:
            raise _Problem("RGN005", f"'where={cond}' is not column=value")
        _known(name, columns, files)
        rows = [r for r in rows if _same(r.get(name), want)]
    if not rows:
        raise _Problem("RGN008", f"no row of {_names(files)} matches where={region.get('where')}")
    return rows


def _names(files: list[tuple[Pinned, str]]) -> str:
    return ", ".join(p.rel for p, _ in files)


def _known(name: str, columns: set[str], files: list[tuple[Pinned, str]]) -> None:
    if name not in columns:
        raise _Problem("RGN008", f"column '{name}' is not in {_names(files)}"
                                 f"{did_you_mean(name, sorted(columns))} "
                                 f"(columns: {', '.join(sorted(columns))})")


def _same(value: Any, want: str) -> bool:
    """`want` as the file spells the value: a number equal as a number, text equal ignoring
    case, or a pattern with `*` (`case=nvfp4-*`)."""
    if "*" in want:
        return fnmatch.fnmatchcase(str(value).lower(), want.lower())
    try:
        return float(value) == float(want)
    except (TypeError, ValueError):
        return str(value).lower() == want.lower()


def _named(spec: str) -> tuple[str, str]:
    """`col` (labelled with its name), `col:Label`, or `col:` (no label)."""
    name, colon, label = spec.partition(":")
    return name.strip(), (label.strip() if colon else name.strip())


@dataclass(frozen=True, slots=True)
class _Shaped:
    """The table before formatting: header texts, raw cell values, and for a pivot the raw
    column keys (the chart's x ticks) and the label of those keys."""

    header: list[str]
    rows: list[list[Any]]
    x_label: str = ""
    x_keys: list[Any] = field(default_factory=list)
    y_label: str = ""


def _shape(region: Region, rows: list[Row], files: list[tuple[Pinned, str]]) -> _Shaped:
    """The named columns, or the pivot's matrix."""
    columns = {FILE, *(k for row in rows for k in row)}
    pivot = region.get("pivot")
    if pivot is not None:
        specs = [_named(s) for s in _split(pivot)]
        if len(specs) != 3:
            raise _Problem("RGN005", f"'pivot={pivot}' is not row,column,value")
        for name, _ in specs:
            for part in name.split("+"):
                _known(part, columns, files)
        return _pivot(rows, specs)
    specs = [_named(s) for s in _split(region.get("columns"))]
    if not specs:
        raise _Problem("RGN005", "data region names no columns (columns=a,b or "
                                 "pivot=row,column,value)")
    for name, _ in specs:
        _known(name, columns, files)
    return _Shaped([label for _, label in specs], [[r.get(n) for n, _ in specs] for r in rows])


def _pivot(rows: list[Row], specs: list[tuple[str, str]]) -> _Shaped:
    (rname, rlabel), (cname, clabel), (vname, vlabel) = specs
    rparts = rname.split("+")  # `model+mtp`: rows keyed by both columns

    def row_key(r: Row) -> Any:
        return r.get(rname) if len(rparts) == 1 else ", ".join(plain(r.get(p)) for p in rparts)

    rkeys = _ordered(row_key(r) for r in rows)
    ckeys = _ordered(r.get(cname) for r in rows)
    cells: dict[tuple[Any, Any], Any] = {}
    for r in rows:
        key = (row_key(r), r.get(cname))
        if key in cells:
            raise _Problem("RGN008", f"two rows have {rname}={plain(key[0])} and "
                                     f"{cname}={plain(key[1])}: narrow them with where=")
        cells[key] = r.get(vname)
    # `concurrency:C=` heads the columns C=1, C=2; a plain label is followed by a space
    sep = "" if clabel.endswith("=") or not clabel else " "
    header = [rlabel] + [f"{clabel}{sep}{plain(c)}" for c in ckeys]
    body = [[rk] + [cells.get((rk, ck)) for ck in ckeys] for rk in rkeys]
    return _Shaped(header, body, clabel.rstrip("="), ckeys, vlabel)


def _ordered(values: Any) -> list[Any]:
    """Distinct values: ascending when all are numbers, else in the order first seen."""
    seen = list(dict.fromkeys(values))
    if all(isinstance(v, int | float) and not isinstance(v, bool) for v in seen):
        return sorted(seen)
    return seen


def plain(value: Any) -> str:
    """A value as text: integers grouped, other numbers to three significant digits (at least
    the units), lists joined, an empty value as a dash."""
    if value is None:
        return DASH
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if not math.isfinite(value) or value == 0:
            return str(value) if value else "0"
        places = max(0, 2 - math.floor(math.log10(abs(value))))
        # half away from zero, on the decimal the file wrote (5,912.5 shows as 5,913)
        exact = decimal.Decimal(repr(value)).quantize(decimal.Decimal(1).scaleb(-places),
                                                     rounding=decimal.ROUND_HALF_UP)
        return f"{exact:,.{places}f}"
    if isinstance(value, list):
        return ", ".join(plain(v) for v in value) or DASH
    return " ".join(str(value).split())


def _markdown(shaped: _Shaped) -> str:
    numeric = [all(_number(r[i]) is not None or r[i] is None for r in shaped.rows)
               for i in range(len(shaped.header))]
    lines = ["| " + " | ".join(md_text(h) for h in shaped.header) + " |",
             "|" + "".join("---:|" if n else "---|" for n in numeric)]
    lines += ["| " + " | ".join(md_text(plain(v)) for v in r) + " |" for r in shaped.rows]
    return "\n".join(lines) + "\n"


def _provenance(pins: list[Pinned]) -> str:
    """One line per date and commit: the files linked at the commit they were read at (their
    sha256 is in the region's marker)."""
    groups: dict[tuple[str, str, str, str], list[Pinned]] = {}
    for p in pins:
        key = (p.reported_by, p.reported, p.short, posixpath.dirname(p.path))
        groups.setdefault(key, []).append(p)
    lines = []
    for (_by, reported, short, folder), group in groups.items():
        if len(group) == 1:
            files = f"[{md_code(group[0].path)}]({group[0].url})"
        else:
            links = ", ".join(f"[{md_code(posixpath.basename(p.path))}]({p.url})" for p in group)
            files = f"{links} in {md_code(folder + '/')}"
        lines.append(f"Reported by {group[0].reported_by} on {reported}, from {files} at "
                     f"{md_code(short)}; not re-run here.")
    return "\n\n".join(lines) + "\n"


def _number(value: Any) -> float | None:
    """A value on the chart's y axis: numbers, and text such as `450W` read as its number."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    try:
        return float(str(value).replace(",", "").rstrip("Ww"))
    except ValueError:
        return None


def _chart(region: Region, shaped: _Shaped) -> LineChart:
    """With a pivot, one line per row across the columns; else the first column is the x axis
    and each other column a line."""
    title = region.get("title") or region.get("chart") or ""
    if region.get("pivot") is not None:
        series = [(plain(r[0]), [_number(v) for v in r[1:]]) for r in shaped.rows]
        return LineChart(title, shaped.x_label, [plain(k) for k in shaped.x_keys], series,
                         y_label=shaped.y_label)
    h = shaped.header
    series = [(h[i], [_number(r[i]) for r in shaped.rows]) for i in range(1, len(h))]
    return LineChart(title, h[0], [plain(r[0]) for r in shaped.rows], series,
                     y_label=h[1] if len(h) == 2 else "")
