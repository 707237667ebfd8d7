"""What a page's `status:` may claim, one meaning per word. `measured`: every runbook on the
page has a successful run record on its target architecture (only records can prove it).
`reviewed`: the prose was checked against its sources on the date in `reviewed:`; nothing on
the page is a measurement. `experimental`, `unverified` and `historical` keep their plain
meaning. A hub does not choose its status: it takes the least proven status of its family's
pages (a hub holding runbooks of its own counts among them), and lint says when the front
matter disagrees.

Codes: FM006 `measured` on a page that has no runbook to be measured (the record checks are in
`runbook.rendering.status`), FM008 a hub whose status is not the one its pages give it.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable

from wikitools.checks.index import Entry
from wikitools.core.diagnostics import Diagnostic

MEASURED = "measured"
REVIEWED = "reviewed"
HISTORICAL = "historical"
# From the most proven to the least; a page without a status counts as unverified.
ORDER = (MEASURED, REVIEWED, "experimental", "unverified")
STATUSES = (*ORDER, HISTORICAL)
# Values that are no longer allowed, and what to write instead (FM003 hint).
RETIRED = {
    "current": "'current' mixed up 'checked' and 'measured': write 'reviewed' with a "
    "'reviewed: YYYY-MM-DD' date when the prose was checked against its sources, or "
    "'measured' when run records on sm120 prove every runbook on the page",
}


def hub_members(entries: Iterable[Entry]) -> dict[str, list[Entry]]:
    """Per hub path: its family's pages (same `family`), or, for a hub without a family, the
    other pages in its folder and below. Hubs with no pages are left out."""
    entries = list(entries)
    out: dict[str, list[Entry]] = {}
    for hub in entries:
        if not hub.hub:
            continue
        if hub.family:
            members = [e for e in entries if e.family == hub.family and e.path != hub.path]
        else:
            folder = posixpath.dirname(hub.path) + "/"
            members = [e for e in entries if e.path.startswith(folder) and e.path != hub.path]
        if members:
            out[hub.path] = sorted(members, key=lambda e: e.path)
    return out


def derive(members: list[Entry]) -> tuple[str, list[Entry]]:
    """A hub's status from its pages, and the pages that set it: the least proven status
    among the pages that are not historical; `historical` when all of them are."""
    live = [m for m in members if m.status != HISTORICAL]
    if not live:
        return HISTORICAL, list(members)

    worst = max(_rank(m.status) for m in live)
    return ORDER[worst], [m for m in live if _rank(m.status) == worst]


def _rank(status: str | None) -> int:
    return ORDER.index(status) if status in ORDER else len(ORDER) - 1


def entry_findings(entries: Iterable[Entry], with_runbooks: Iterable[str]) -> list[Diagnostic]:
    """FM008 for hubs whose status is not derived from their pages; FM006 for `measured` on a
    page (not a hub with pages) that holds no runbook."""
    entries = list(entries)
    members = hub_members(entries)
    runbook_pages = set(with_runbooks)
    out: list[Diagnostic] = []
    for entry in entries:
        line, col = entry.status_at
        if entry.path in members:
            want, setters = derive(members[entry.path])
            # A hub that holds runbooks of its own is also one of its pages: it may be less
            # proven than the rest (its runbooks not yet run), never more.
            own_runbooks_lower = (entry.path in runbook_pages and entry.status != HISTORICAL
                                  and _rank(entry.status) > _rank(want))
            if entry.status != want and not own_runbooks_lower:
                names = ", ".join(s.path.rsplit("/", 1)[-1] for s in setters[:4])
                more = f" and {len(setters) - 4} more" if len(setters) > 4 else ""
                out.append(Diagnostic(
                    entry.path, line, col, "FM008",
                    f"a hub's status comes from its pages: 'status: {want}' (the least proven "
                    f"of its {len(members[entry.path])} pages, set by {names}{more}), "
                    f"not {entry.status!r}",
                ))
        elif entry.status == MEASURED and entry.path not in runbook_pages:
            out.append(Diagnostic(
                entry.path, line, col, "FM006",
                "page is marked 'measured' but holds no runbook, so no run record can prove "
                "it; use 'reviewed' with a 'reviewed: YYYY-MM-DD' date",
            ))
    return out


__all__ = [
    "HISTORICAL",
    "MEASURED",
    "ORDER",
    "RETIRED",
    "REVIEWED",
    "STATUSES",
    "derive",
    "entry_findings",
    "hub_members",
]
