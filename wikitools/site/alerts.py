"""GitHub alerts (`> [!NOTE]`, `> [!WARNING]`, …) as admonitions on the site: the one note
syntax that reads right on GitHub, where the community reads its pages, and on the site.

A blockquote whose first line is `[!TYPE]` becomes `<div class="admonition KIND">`. GitHub gives
an alert no title of its own; a first paragraph that is only bold text (`> **Stale**`) is shown
on GitHub as a bold line and taken here as the admonition's title."""

from __future__ import annotations

import re
import xml.etree.ElementTree as etree

from markdown import Markdown
from markdown.treeprocessors import Treeprocessor

# GitHub's five alert types, and the Material admonition each is drawn as.
KINDS = {"NOTE": "note", "TIP": "tip", "IMPORTANT": "info", "WARNING": "warning",
         "CAUTION": "danger"}
# Material's admonition types, and the GitHub alert each is written as.
ALERT_OF = {
    "note": "NOTE", "abstract": "NOTE", "summary": "NOTE", "tldr": "NOTE", "info": "NOTE",
    "todo": "NOTE", "question": "NOTE", "help": "NOTE", "faq": "NOTE", "example": "NOTE",
    "quote": "NOTE", "cite": "NOTE", "tip": "TIP", "hint": "TIP", "success": "TIP",
    "check": "TIP", "done": "TIP", "important": "IMPORTANT", "warning": "WARNING",
    "caution": "WARNING", "attention": "WARNING", "danger": "CAUTION", "error": "CAUTION",
    "failure": "CAUTION", "fail": "CAUTION", "missing": "CAUTION", "bug": "CAUTION",
}
_MARKER = re.compile(r"^[ \t]*\[!(?P<type>[A-Za-z]+)\][ \t]*(?:\n|$)")


def alert_type(kind: str) -> str:
    """The GitHub alert type for a Material admonition type (NOTE for one it does not know)."""
    return ALERT_OF.get(kind.lower(), "NOTE")


class AlertProcessor(Treeprocessor):
    """Runs after the inline patterns, so a title in bold is already a `<strong>`."""

    def run(self, root: etree.Element) -> None:
        for parent in root.iter():
            for index, child in enumerate(list(parent)):
                if child.tag == "blockquote":
                    admonition = _admonition(child)
                    if admonition is not None:
                        parent.remove(child)
                        parent.insert(index, admonition)


def _admonition(quote: etree.Element) -> etree.Element | None:
    first = quote[0] if len(quote) else None
    if first is None or first.tag != "p" or not first.text:
        return None
    match = _MARKER.match(first.text)
    if match is None or match["type"].upper() not in KINDS:
        return None
    kind = match["type"].upper()
    first.text = first.text[match.end():]
    box = etree.Element("div", {"class": f"admonition {KINDS[kind]}"})
    title = etree.SubElement(box, "p", {"class": "admonition-title"})
    strong = _only_bold(first)
    if strong is not None:
        title.text, title[:] = strong.text, list(strong)
        quote.remove(first)
    else:
        title.text = kind.capitalize()
        if not (first.text or "").strip() and not len(first):
            quote.remove(first)
    box.extend(list(quote))
    return box


def _only_bold(paragraph: etree.Element) -> etree.Element | None:
    """The `<strong>` that is the paragraph's whole content, else None."""
    if (paragraph.text or "").strip() or len(paragraph) != 1:
        return None
    strong = paragraph[0]
    if strong.tag != "strong" or (strong.tail or "").strip():
        return None
    return strong


def register(md: Markdown) -> None:
    md.treeprocessors.register(AlertProcessor(md), "wiki-alerts", 15)
