"""What a page's runbooks have really been measured on, from the records: on their target
architecture (SM120 for this wiki: date, engine), only on other hardware, or not at all. Feeds
the measured badge beside each page's status chip (drawn by the MkDocs plugin at build time)
and the lint that keeps `status: measured` honest: only records can make a page `measured`."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from wikitools.core.diagnostics import Diagnostic
from wikitools.pages.parse import Page
from wikitools.runbook.blocks.declared import Runbook, RunbookSet
from wikitools.runbook.engines import catalog as engines
from wikitools.runbook.records.record import Record, RecordError, load_records
from wikitools.runbook.rendering.describe import record_archs

HOME_ARCH = "sm120"  # the cards this wiki is about


@dataclass(frozen=True, slots=True)
class Measured:
    """One runbook's best evidence. state: target | other | none."""

    runbook: str
    target: str  # the architecture the runbook is for (sm120 unless its arch= excludes it)
    state: str
    date: str = ""  # of the newest successful record on the target (or elsewhere)
    engine: str = ""
    archs: tuple[str, ...] = ()  # where it was measured when not on the target


def target_arch(runbook: Runbook) -> str:
    archs = runbook.server.requirements.arch
    return HOME_ARCH if not archs or HOME_ARCH in archs else archs[0]


def _engine(record: Record) -> str:
    engine = record.each_variant()[0].engine
    name = engines.display_name(engine.get("name"), default="")
    version = engine.get("version")
    return f"{name} {version}".strip() if version else name


def measure(runbook: Runbook, records: Iterable[Record]) -> Measured:
    target = target_arch(runbook)
    oks = [r for r in records if r.ok]
    on_target = [r for r in oks if target in record_archs(r)]
    if on_target:
        latest = on_target[-1]
        return Measured(runbook.id, target, "target", latest.started_at[:10], _engine(latest))
    gpu_runs = [r for r in oks if "cpu" not in record_archs(r)]
    if gpu_runs:
        latest = gpu_runs[-1]
        archs = tuple(sorted({a for r in gpu_runs for a in record_archs(r)}))
        return Measured(runbook.id, target, "other", latest.started_at[:10], _engine(latest),
                        archs)
    return Measured(runbook.id, target, "none")


def measurements(runbooks: RunbookSet, root: Path,
                 load: Callable[[Path, str], list[Record]] = load_records,
                 ) -> dict[str, list[Measured]]:
    """Per page path (POSIX, relative to the root): each runbook's evidence, in page order.
    Unreadable record folders count as not measured (`wiki check` reports them). `load` reads
    a runbook's records (the site build reads each folder once for all its uses)."""
    out: dict[str, list[Measured]] = {}
    for rb in runbooks:
        try:
            records = load(root, rb.id)
        except RecordError:
            records = []
        out.setdefault(rb.page, []).append(measure(rb, records))
    return out


def badge(items: list[Measured]) -> tuple[str, str]:
    """(state, text) of a page's badge: the best state among its runbooks."""
    best = next((m for m in items if m.state == "target"), None)
    if best is not None:
        n = sum(m.state == "target" for m in items)
        part = "" if n == len(items) else f" ({n} of {len(items)} runbooks)"
        return "target", f"Measured on {best.target.upper()}{part}: {best.date}, {best.engine}"
    other = next((m for m in items if m.state == "other"), None)
    if other is not None:
        where = ", ".join(a.upper() for a in other.archs)
        return "other", (f"Measured only on {where} ({other.date}, {other.engine}); not yet on "
                         f"{other.target.upper()}")
    return "none", f"Not measured on {items[0].target.upper()}: no run recorded"


def check_runbook_claims(
    pages: Iterable[Page], runbooks: RunbookSet, root: Path,
    position: Callable[[Page, str], tuple[int, int]],
) -> list[Diagnostic]:
    """FM006 for a page with runbooks whose status claims more than its records prove:
    `measured` while a runbook has no successful record on its target architecture, or
    `reviewed` (a review of prose says nothing about a recipe that nobody has run)."""
    per_page = measurements(runbooks, root)
    out = []
    for page in pages:
        status = page.front_matter.get("status")
        if status not in ("measured", "reviewed") or page.path not in per_page:
            continue
        items = per_page[page.path]
        missing = [m for m in items if m.state != "target"]
        line, col = position(page, "status")
        if status == "reviewed":
            want = "measured" if not missing else "unverified"
            out.append(Diagnostic(
                page.path, line, col, "FM006",
                f"page holds runbooks, so its status comes from their run records, not from a "
                f"review of its prose: use '{want}'",
            ))
            continue
        if not missing:
            continue
        names = ", ".join(f"'{m.runbook}'" for m in missing)
        elsewhere = [m for m in missing if m.state == "other"]
        note = (f" (measured only on {', '.join(sorted({a for m in elsewhere for a in m.archs}))})"
                if elsewhere else "")
        out.append(Diagnostic(
            page.path, line, col, "FM006",
            f"page is marked 'measured' but runbook{'s' * (len(missing) > 1)} {names} "
            f"{'have' if len(missing) > 1 else 'has'} no successful record on "
            f"{missing[0].target}{note}; use status 'unverified' until one is committed",
        ))
    return out


__all__ = [
    "HOME_ARCH",
    "Measured",
    "badge",
    "check_runbook_claims",
    "measure",
    "measurements",
    "target_arch",
]
