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

from wikitools.pages.dialect import KINDS

_MARKER = re.compile(r"^[ \t]*\[!(?P<type>[A-Za-z]+)\][ \t]*(?:\n|$)")


class AlertProcessor(Treeprocessor):
    """Runs after the inline patterns, so a title in bold is already a `<strong>`.
    Python-Markdown joins two blockquotes with only a blank line between them into one, where
    GitHub keeps two: a paragraph that opens an alert starts a new box."""

    def run(self, root: etree.Element) -> None:
        for child in list(root):  # innermost first: a box may hold another
            self.run(child)
            if child.tag == "blockquote":
                _replace(root, child)


def _replace(parent: etree.Element, quote: etree.Element) -> None:
    groups: list[list[etree.Element]] = [[]]
    for item in quote:
        if groups[-1] and _marker(item) is not None:
            groups.append([])
        groups[-1].append(item)
    boxes = [_admonition(group) for group in groups]
    if all(box is None for box in boxes):
        return
    at = list(parent).index(quote)
    parent.remove(quote)
    for offset, (group, box) in enumerate(zip(groups, boxes, strict=True)):
        if box is None:
            box = etree.Element("blockquote")
            box.extend(group)
        box.tail = quote.tail if offset == len(groups) - 1 else "\n"
        parent.insert(at + offset, box)


def _marker(item: etree.Element) -> str | None:
    if item.tag != "p" or not item.text:
        return None
    match = _MARKER.match(item.text)
    return match["type"].upper() if match and match["type"].upper() in KINDS else None


def _admonition(items: list[etree.Element]) -> etree.Element | None:
    kind = _marker(items[0]) if items else None
    if kind is None:
        return None
    first = items[0]
    first.text = _MARKER.sub("", first.text or "", count=1)
    box = etree.Element("div", {"class": f"admonition {KINDS[kind]}"})
    title = etree.SubElement(box, "p", {"class": "admonition-title"})
    strong = _only_bold(first)
    rest = items[1:]
    if strong is not None:
        title.text = strong.text
        title.extend(list(strong))
    else:
        title.text = kind.capitalize()
        if (first.text or "").strip() or len(first):
            rest = items
    box.extend(rest)
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
