"""Put the top level of the sidebar in reading order instead of alphabetical order.

Without a hand-written `nav:`, MkDocs lists top-level pages alphabetically before the
folders, so "Contributing" would sit right after "Home" and be the home page's "Next". This
hook reorders the top level only (a newcomer's path first: onboarding, then hardware, engines,
models, topics; pages about the wiki itself last) and recomputes the previous/next links
that follow the sidebar. Entries not named here keep their relative order, before the
trailing group. Cosmetic only: an engine that skips hooks shows the alphabetical order, and
nothing else changes.
"""

from __future__ import annotations

from typing import Any

from mkdocs.structure.nav import Navigation, Section
from mkdocs.structure.pages import Page

LEADING = ("index.md", "onboarding.md", "community.md", "hardware/", "engines/", "models/",
           "topics/", "reference/")
TRAILING = ("glossary.md", "sources.md", "contributing.md")


def _key(item: Any) -> str:
    """`name.md` for a page, `folder/` for a section (from its first page)."""
    if isinstance(item, Page):
        return item.file.src_uri
    if isinstance(item, Section):
        for child in item.children:
            if isinstance(child, Page):
                return child.file.src_uri.split("/", 1)[0] + "/"
            if isinstance(child, Section):
                return _key(child)
    return ""


def _pages(items: list[Any]) -> list[Page]:
    out: list[Page] = []
    for item in items:
        if isinstance(item, Page):
            out.append(item)
        elif isinstance(item, Section):
            out.extend(_pages(item.children))
    return out


def on_nav(nav: Navigation, **kwargs: Any) -> Navigation:
    keyed = [(_key(item), item) for item in nav.items]
    lead = [item for name in LEADING for key, item in keyed if key == name]
    tail = [item for name in TRAILING for key, item in keyed if key == name]
    rest = [item for key, item in keyed if key not in LEADING and key not in TRAILING]
    nav.items = [*lead, *rest, *tail]
    pages = _pages(nav.items)
    for prev, page, nxt in zip([None, *pages[:-1]], pages, [*pages[1:], None], strict=True):
        page.previous_page = prev
        page.next_page = nxt
    nav.pages = pages
    return nav
