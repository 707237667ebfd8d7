"""Name each nav section after its index page instead of its folder.

Without a hand-written `nav:`, MkDocs names a section after its folder (`gpt-oss` becomes
"Gpt oss"). With `navigation.indexes` the folder's index.md is the section page, so its
title (front matter `title:`, else the first `# ` heading) is the better label for the
sidebar, the tabs and the breadcrumbs. Cosmetic only: an engine that skips hooks shows the
folder names instead, and nothing else changes.
"""

from __future__ import annotations

import re
from typing import Any

from mkdocs.structure.nav import Navigation, Section
from mkdocs.structure.pages import Page
from mkdocs.utils.meta import get_data

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_H1 = re.compile(r"^ {0,3}#[ \t]+(.+?)[ \t#]*$")


def _index_title(page: Page) -> str | None:
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


def _retitle(items: list[Any]) -> None:
    for item in items:
        if not isinstance(item, Section):
            continue
        first = item.children[0] if item.children else None
        if isinstance(first, Page) and first.is_index and (title := _index_title(first)):
            item.title = title
        _retitle(item.children)


def on_nav(nav: Navigation, **kwargs: Any) -> Navigation:
    _retitle(nav.items)
    return nav
