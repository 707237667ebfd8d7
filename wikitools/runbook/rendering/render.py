"""Results regions of pages rendered from run records (each region's body from `views`) and the
measured badges (`status`); hand-edited, stale and out-of-date regions reported."""

from __future__ import annotations

import posixpath
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from wikitools.core.diagnostics import Diagnostic, Severity, did_you_mean
from wikitools.pages.dialect import detect_dialect
from wikitools.pages.parse import Page
from wikitools.runbook.blocks.declared import Runbook, RunbookSet
from wikitools.runbook.blocks.extract import extract_runbooks
from wikitools.runbook.blocks.regions import (
    Region,
    edited_diagnostic,
    find_regions,
    indent_body,
    replace_regions,
    unshown_runbooks,
)
from wikitools.runbook.records.record import Record, RecordError, load_records
from wikitools.runbook.rendering.chartfiles import (
    ChartFile,
    externalize,
    is_chart_of,
    prefix,
    referenced,
)
from wikitools.runbook.rendering.reported.region import is_data_region, render_data_region
from wikitools.runbook.rendering.views import for_region, render_region


@dataclass(frozen=True, slots=True)
class Change:
    path: str  # POSIX, relative to the root
    old: str
    new: str | None  # None: the file is removed (a chart no region links to any more)


class RecordStore:
    """Records per runbook id, each folder read once."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._cache: dict[str, list[Record] | RecordError] = {}

    def get(self, runbook_id: str) -> list[Record]:
        if runbook_id not in self._cache:
            try:
                self._cache[runbook_id] = load_records(self.root, runbook_id)
            except RecordError as exc:
                self._cache[runbook_id] = exc
        got = self._cache[runbook_id]
        if isinstance(got, RecordError):
            raise got
        return got


def render_pages(
    pages: Iterable[Page],
    root: Path,
    *,
    check: bool = False,
    runbooks: RunbookSet | None = None,
    inline_charts: bool = False,
    store: RecordStore | None = None,
) -> tuple[list[Change], list[Diagnostic]]:
    """Render every results region of `pages`. Returns the pages whose text would change and the
    diagnostics: RGN001/RGN005 markers, RB009 unknown runbook, RGN002 hand-edited (left alone),
    RGN003 stale (warning), RGN007/RGN008 for data regions (a kept file changed, or cannot be
    used), and with `check` RGN004 for each region that would change. Charts are written as
    `.svg` files beside the page (`chartfiles`), or with `inline_charts` (the site at build
    time, which draws inline SVG) kept in the page's text; a data region's chart file comes
    after the pages, as a change of its own. `store`: the records read so far, for a caller
    that renders page after page."""
    pages = list(pages)
    dialect = detect_dialect(root)
    if runbooks is None:
        runbooks, _ = extract_runbooks(pages, root)
    by_id: Mapping[str, Runbook] = {r.id: r for r in runbooks}
    store = store or RecordStore(root)
    changes: list[Change] = []
    files: dict[str, str] = {}  # chart files of data regions
    diags: list[Diagnostic] = []
    for page in pages:
        regions, problems = find_regions(page)
        diags.extend(problems)
        bad_starts = {d.line for d in problems}
        bodies: dict[int, str] = {}
        charts: list[ChartFile] = []
        for region in regions:
            if region.start in bad_starts:
                continue
            if is_data_region(region):
                if region.edited:
                    diags.append(edited_diagnostic(region))
                    continue
                out = render_data_region(region, root)
                diags.extend(out.diagnostics)
                files.update(out.charts)
                if out.body is not None:
                    _changed(region, out.body, bodies, check, diags)
                continue
            runbook = by_id.get(region.runbook or "")
            if runbook is None:
                diags.append(_unknown_runbook(region, by_id, dict(runbooks.broken)))
                continue
            if region.edited:
                diags.append(edited_diagnostic(region))
                continue
            body = _region_body(region, runbook, store, by_id, runbooks, diags, dialect)
            if body is None:
                continue
            if not inline_charts:
                body, chart_files = externalize(body, page.path)
                charts.extend(chart_files)
            _changed(region, body, bodies, check, diags)
        stored = stored_text(root, page)
        new_text = replace_regions(stored, bodies, regions) if bodies else stored
        if new_text != stored:
            changes.append(Change(page.path, stored, new_text))
        chart_changes = [] if inline_charts else _chart_changes(root, page.path, charts, new_text)
        changes.extend(chart_changes)
        if check:
            diags.extend(Diagnostic(
                page.path, 1, 1, "RGN004",
                f"chart file {c.path} is {_what(c)} (run `wiki runbook render`)")
                for c in chart_changes)
    changes.extend(_file_changes(root, files, check, diags))
    return changes, diags


def _changed(region: Region, body: str, bodies: dict[int, str], check: bool,
             diags: list[Diagnostic]) -> bool:
    """Note `body` as the region's new body when it differs from the page's (RGN004 under
    `check`)."""
    if indent_body(body, region.indent) == region.body and region.sum is not None:
        return False
    bodies[region.start] = body
    if check:
        diags.append(Diagnostic(region.path, region.start, region.col, "RGN004",
                                "results region is out of date (run `wiki runbook render`)"))
    return True


def _file_changes(root: Path, files: Mapping[str, str], check: bool,
                  diags: list[Diagnostic]) -> list[Change]:
    out = []
    for path, new in sorted(files.items()):
        try:
            old = (root / path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            old = ""
        if old != new:
            out.append(Change(path, old, new))
            if check:
                diags.append(Diagnostic(path, 1, 1, "RGN004",
                                        "chart of a data region is out of date (run "
                                        "`wiki runbook render`)"))
    return out


def _what(change: Change) -> str:
    if change.new is None:
        return "linked from no region any more"
    return "missing" if not change.old else "out of date"


def _chart_changes(root: Path, page_path: str, charts: list[ChartFile],
                   text: str) -> list[Change]:
    """The chart files of a page to write, and those of its files that nothing links to."""
    out = []
    wanted = {c.path: c.text for c in charts}
    for path in sorted(wanted):
        old = _read(root / path)
        if old != wanted[path]:
            out.append(Change(path, old or "", wanted[path]))
    linked = referenced(text, page_path)
    folder = root / posixpath.dirname(prefix(page_path))
    if folder.is_dir():
        for file in sorted(folder.iterdir()):
            rel = posixpath.join(posixpath.dirname(prefix(page_path)), file.name)
            if is_chart_of(file.name, page_path) and rel not in linked and rel not in wanted:
                out.append(Change(rel, _read(file) or "", None))
    return out


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def _region_body(region: Region, runbook: Runbook, store: RecordStore,
                 by_id: Mapping[str, Runbook], runbooks: RunbookSet, diags: list[Diagnostic],
                 dialect: str) -> str | None:
    """The region's new body from the records; None (said why in `diags`) when a record
    cannot be read or a compared runbook is unknown. A stale latest record is a warning."""
    try:
        records = store.get(runbook.id)
    except RecordError as exc:
        diags.append(Diagnostic(region.path, region.start, region.col, "RGN006",
                                f"cannot read records: {exc}"))
        return None
    latest_ok = next((r for r in reversed(for_region(region, records)) if r.ok), None)
    if (region.view != "history" and latest_ok is not None
            and latest_ok.blocks_hash != runbook.blocks_hash):
        diags.append(Diagnostic(
            region.path, region.start, region.col, "RGN003",
            f"results of runbook '{runbook.id}' are stale: record "
            f"{latest_ok.run_id} was measured with other blocks than the page now has",
            Severity.WARNING,
        ))
    others = {}
    try:
        for rid in region.compared:
            others[rid] = store.get(rid)
    except RecordError as exc:
        diags.append(Diagnostic(region.path, region.start, region.col, "RGN006",
                                f"cannot read records: {exc}"))
        return None
    unknown = [rid for rid in region.compared if rid not in by_id]
    if unknown:
        diags.append(_unknown_runbook(replace(region, attrs=(("runbook", unknown[0]),)),
                                      by_id, dict(runbooks.broken)))
        return None
    return render_region(region, runbook, records, ref=runbook.ref, others=others,
                         hashes={rid: by_id[rid].blocks_hash for rid in region.compared},
                         dialect=dialect)


def stored_text(root: Path, page: Page) -> str:
    """The page's text as stored on disk (byte-order mark and CRLF kept), so that rendering
    changes the bytes of its regions only; the page model's text when the file is not there or
    no longer holds what was parsed."""
    try:
        text = (root / page.path).read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return page.text
    plain = text.removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n")
    return text if plain == page.text else page.text


def _unknown_runbook(region: Region, by_id: Mapping[str, Runbook],
                     broken: Mapping[str, str] | None = None) -> Diagnostic:
    name = region.runbook or ""
    where = (broken or {}).get(name)
    if where is not None:  # the runbook exists; its own block's errors say what is wrong
        return Diagnostic(region.path, region.start, region.col, "RB009",
                          f"results region of runbook '{name}' cannot be rendered: its server "
                          f"block ({where}) has errors")
    hint = did_you_mean(name, sorted(by_id), cutoff=0.5)
    return Diagnostic(region.path, region.start, region.col, "RB009",
                      f"results region names unknown runbook '{name}'{hint}")


def check_regions(pages: Iterable[Page], root: Path,
                  runbooks: RunbookSet | None = None) -> list[Diagnostic]:
    """For `wiki check`: every region problem, including RGN004 where a region would change,
    and RGN007 for a runbook that no region shows."""
    pages = list(pages)
    if runbooks is None:
        runbooks, _ = extract_runbooks(pages, root)
    _changes, diags = render_pages(pages, root, check=True, runbooks=runbooks)
    return [*diags, *unshown_runbooks(pages, runbooks)]
