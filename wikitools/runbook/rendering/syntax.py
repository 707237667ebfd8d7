"""Notes and folded sections in the Markdown dialect of the wiki being written to
(wikitools.dialect), as the Jinja filters `note`, `folded` and `boxed` of the region templates:
`{% filter note("warning", "Stale") %}…{% endfilter %}`."""

from __future__ import annotations

from html import escape
from typing import Any

import jinja2

from wikitools.pages.dialect import alert_type

# Docusaurus has five admonition types; Material's others are drawn as the nearest.
_DOCUSAURUS = {"note": "note", "info": "info", "tip": "tip", "warning": "warning",
               "failure": "danger", "danger": "danger"}


def _lines(body: str) -> list[str]:
    return body.strip("\n").split("\n")


def note(dialect: str, body: str, kind: str, title: str) -> str:
    """A titled note of `kind` (a Material admonition type: info, note, warning, failure…)."""
    lines = _lines(body)
    if dialect == "material":
        return "\n".join([f'!!! {kind} "{title}"', *(f"    {x}" if x else "" for x in lines)])
    if dialect == "docusaurus":
        return "\n".join([f":::{_DOCUSAURUS.get(kind, 'note')}[{title}]", "", *lines, "", ":::"])
    if dialect == "myst":
        return "\n".join([f"````{{admonition}} {title}", f":class: {kind}", *lines, "````"])
    return "\n".join([f"> [!{alert_type(kind)}]", f"> **{title}**", ">",
                      *(f"> {x}" if x else ">" for x in lines)])


def folded(dialect: str, body: str, title: str) -> str:
    """A section shown folded, opened by a click on its title."""
    lines = _lines(body)
    if dialect == "material":
        return "\n".join([f'??? note "{title}"', "", *(f"    {x}" if x else "" for x in lines)])
    if dialect == "myst":
        return "\n".join([f"````{{admonition}} {title}", ":class: note dropdown", *lines, "````"])
    if dialect == "github":  # the site reads the Markdown inside, and its tooltips in the title
        head = ['<details class="note" markdown>',
                f'<summary markdown="span">{escape(title)}</summary>']
    else:
        head = ["<details>", f"<summary>{escape(title)}</summary>"]
    return "\n".join([*head, "", *lines, "", "</details>"])


def boxed(dialect: str, body: str, css_class: str) -> str:
    """`body` in a `<div>` of the site's class, where the renderer keeps such a div's Markdown
    (GitHub, MkDocs, Zensical); elsewhere (MDX, MyST) as it is."""
    if dialect in ("github", "material"):
        return "\n".join([f'<div class="{css_class}" markdown>', "", *_lines(body), "", "</div>"])
    return body.strip("\n")


def _dialect(context: Any) -> str:
    return str(context.get("dialect") or "github")


# Each ends its text with a line break: the template's `{% endfilter %}` line takes its own.
@jinja2.pass_context
def _note(context: Any, body: str, kind: str, title: str) -> str:
    return note(_dialect(context), body, kind, title) + "\n"


@jinja2.pass_context
def _folded(context: Any, body: str, title: str) -> str:
    return folded(_dialect(context), body, title) + "\n"


@jinja2.pass_context
def _boxed(context: Any, body: str, css_class: str) -> str:
    return boxed(_dialect(context), body, css_class) + "\n"


FILTERS = {"note": _note, "folded": _folded, "boxed": _boxed}
