"""The HTML the plugin puts above a page's content: the front matter status chip, and the
"measured on" badge that says what the run records hold, whatever the prose claims."""

from __future__ import annotations

from collections.abc import Mapping
from html import escape

from wikitools.runbook.rendering.status import Measured, badge

# Said for each status when the site's mkdocs.yml gives no `extra.status` texts of its own.
DEFAULT_STATUS_TEXT = {
    "current": "Checked against current engines and drivers",
    "experimental": "Works, with rough edges; expect changes",
    "historical": "Kept for reference; superseded",
    "unverified": "Not yet reproduced",
}


def status_chip(status: object, texts: Mapping[str, str]) -> str:
    """The chip for a page's `status:`; empty for a value the site does not describe."""
    if not isinstance(status, str) or status not in texts:
        return ""
    text = escape(str(texts[status]))
    return (f'<p class="wiki-status wiki-status--{escape(status)}" title="{text}">'
            '<span class="wiki-status__icon" aria-hidden="true"></span>'
            f'<span class="wiki-status__label">{escape(status.capitalize())}</span>'
            f'<span class="wiki-status__text">{text}</span></p>\n')


def measured_line(items: list[Measured] | None) -> str:
    """The badge line for a page with runbooks; empty for a page without."""
    if not items:
        return ""
    state, text = badge(items)
    return (f'<p class="wiki-measured-line"><span class="wiki-measured-badge '
            f'wiki-measured-badge--{state}">{escape(text)}</span></p>\n')
