"""Navigation helpers: sections named after their index page, and a chosen reading order of
the top level, with the previous/next links recomputed to follow the sidebar."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from mkdocs.structure.nav import Navigation, Section
from mkdocs.structure.pages import Page
from mkdocs.utils.meta import get_data

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_H1 = re.compile(r"^ {0,3}#[ \t]+(.+?)[ \t#]*$")


def index_title(page: Page) -> str | None:
    """Front matter `title:`, else the first `# ` heading outside code fences."""
    try:
        text = page.file.content_string
    except (OSError, UnicodeDecodeError):
        return None
    body, meta = get_data(text)
    title = meta.get("title")
    if isinstance(title, str) and title.strip():
        return title.strip()
    fence: str | None = None
    for line in body.splitlines():
        m = _FENCE.match(line)
        if m:
            marker = m.group(1)
            if fence is None:
                fence = marker
            elif marker[0] == fence[0] and len(marker) >= len(fence):
                fence = None
            continue
        if fence is None and (h1 := _H1.match(line)):
            return h1.group(1)
    return None


def retitle(items: list[Any]) -> None:
    """Name each section after its index page (`gpt-oss` would otherwise read "Gpt oss")."""
    for item in items:
        if not isinstance(item, Section):
            continue
        first = item.children[0] if item.children else None
        if isinstance(first, Page) and first.is_index and (title := index_title(first)):
            item.title = title
        retitle(item.children)


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


def reorder(nav: Navigation, first: Sequence[str], last: Sequence[str]) -> None:
    """Top level: the entries named in `first`, the others in their order, then `last`
    (`page.md` names a page, `folder/` a section)."""
    if not first and not last:
        return
    keyed = [(_key(item), item) for item in nav.items]
    lead = [item for name in first for key, item in keyed if key == name]
    tail = [item for name in last for key, item in keyed if key == name]
    rest = [item for key, item in keyed if key not in first and key not in last]
    nav.items = [*lead, *rest, *tail]
    pages = _pages(nav.items)
    for prev, page, nxt in zip([None, *pages[:-1]], pages, [*pages[1:], None], strict=True):
        page.previous_page = prev
        page.next_page = nxt
    nav.pages = pages
