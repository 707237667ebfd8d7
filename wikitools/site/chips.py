"""The HTML the plugin puts above a page's content: the front matter status chip, and the
"measured on" badge that says what the run records hold, whatever the prose claims. Both are
left out of the search index (Material's `data-search-exclude`), so that a result's preview
starts with the page's own text, not with the chip's words run together."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from html import escape

from wikitools.runbook.rendering.measured import Measured, badge

# Said for each status when the site's mkdocs.yml gives no `extra.status` texts of its own.
DEFAULT_STATUS_TEXT = {
    "measured": "Measured: every runbook on the page has a successful run record",
    "reviewed": "Reviewed: the prose was checked against its sources",
    "experimental": "Works, with rough edges; expect changes",
    "historical": "Kept for reference; superseded",
    "unverified": "Not yet reproduced",
}
HUB_NOTE = ". A hub takes the least proven status of its family's pages."


def status_chip(meta: Mapping[str, Any], texts: Mapping[str, str]) -> str:
    """The chip for a page's front matter `status:` (with the date of `reviewed:` for a
    reviewed page, and a note on hubs); empty for a value the site does not describe."""
    status = meta.get("status")
    if not isinstance(status, str) or status not in texts:
        return ""
    title = escape(str(texts[status]))
    label = status.capitalize()
    if status == "reviewed" and meta.get("reviewed"):
        label += f" {meta['reviewed']}"
    text = title + (escape(HUB_NOTE) if meta.get("hub") else "")
    return (f'<p class="wiki-status wiki-status--{escape(status)}" title="{title}" '
            'data-search-exclude="">'
            '<span class="wiki-status__icon" aria-hidden="true"></span>'
            f'<span class="wiki-status__label">{escape(label)}</span>'
            f'<span class="wiki-status__text">{text}</span></p>\n')


def measured_line(items: list[Measured] | None) -> str:
    """The badge line for a page with runbooks; empty for a page without."""
    if not items:
        return ""
    state, text = badge(items)
    return (f'<p class="wiki-measured-line" data-search-exclude=""><span class="wiki-measured-badge '
            f'wiki-measured-badge--{state}">{escape(text)}</span></p>\n')
