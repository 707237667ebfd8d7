"""The Python-Markdown extension `wikitools` (in mkdocs.yml's `markdown_extensions:`), which
MkDocs and Zensical both run: GitHub alerts drawn as admonitions, glossary tooltips, the status
chip and "measured on" badge under the title, and results regions rendered from the run records.

A Markdown extension is not told which page it renders. The site's pages are read once per
build, and each text handed to the extension is matched to its page by its body (the text after
the front matter, as both builders pass it). A text that matches no page (a page changed while
`mkdocs serve` runs) makes the pages be read again."""

from __future__ import annotations

import xml.etree.ElementTree as etree
from dataclasses import dataclass, field
from typing import Any

from markdown import Extension, Markdown
from markdown.preprocessors import Preprocessor
from markdown.treeprocessors import Treeprocessor

from wikitools.site import alerts
from wikitools.site.chips import measured_line, status_chip
from wikitools.site.sitedata import SiteData, site_data


@dataclass
class _State:
    """What one conversion learned about its page, for the postprocessor."""

    page: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    text: str | None = None  # the page's text, when it has a runbook server block


class _Pages(Preprocessor):
    """Finds the page, renders its results regions, gives the abbr extension the glossary."""

    def __init__(self, md: Markdown, ext: WikiExtension, state: _State) -> None:
        super().__init__(md)
        self.ext, self.state = ext, state

    def run(self, lines: list[str]) -> list[str]:
        text = "\n".join(lines)
        data = self.ext.data(text)
        found = data.find(text)
        self.state.page, self.state.meta = found if found else (None, {})
        self.state.text = text if "runbook-server" in text else None
        if self.ext.getConfig("results") and self.state.page and "wiki:results" in text:
            text = data.render_results(text, self.state.page)
        if self.ext.getConfig("glossary") and data.abbr:
            self._glossary(data.abbr)
        return text.split("\n")

    def _glossary(self, terms: dict[str, str]) -> None:
        """The glossary's terms handed to the abbr extension as its own abbreviations (the
        page's own `*[X]: …` lines, read later, still win). Appending them to the page as
        definition lines would cost each page a pass of every block processor per line."""
        abbr = self.md.treeprocessors["abbr"] if "abbr" in self.md.treeprocessors else None
        known = getattr(abbr, "abbrs", None)
        if isinstance(known, dict):
            for term, title in terms.items():
                known.setdefault(term, title)


class _Chips(Treeprocessor):
    """The chip and badge right after the page's leading `<h1>`, else first. The search index
    splits a page at its headings and files what comes before the first one as the page
    itself: a chip placed above the title would stand in for the page's opening text, and a
    query matching that text would no longer find the page. (A tree step, not a text one:
    the table of contents runs the text steps over every heading's text.)"""

    def __init__(self, md: Markdown, ext: WikiExtension, state: _State) -> None:
        super().__init__(md)
        self.ext, self.state = ext, state

    def run(self, root: etree.Element) -> None:
        if self.state.page is None:
            return
        data = self.ext.data()
        html = status_chip(self.state.meta, data.status_texts)
        if self.state.text is not None:
            html += measured_line(data.measured(self.state.text, self.state.page))
        at = 1 if len(root) and root[0].tag == "h1" else 0
        for offset, element in enumerate(etree.fromstring(f"<div>{html}</div>")):
            root.insert(at + offset, element)


class WikiExtension(Extension):
    def __init__(self, **kwargs: Any) -> None:
        self.config = {
            "root": ["", "the wiki's top folder; default: found from the working folder"],
            "alerts": [True, "GitHub alerts (> [!NOTE]) as admonitions"],
            "glossary": [True, "tooltips (abbr) for every glossary term"],
            "status": [True, "the front matter status chip and the measured-on badge"],
            "results": [True, "results regions rendered from the run records"],
        }
        super().__init__(**kwargs)

    def data(self, text: str | None = None) -> SiteData:
        return site_data(str(self.getConfig("root") or ""), text)

    def extendMarkdown(self, md: Markdown) -> None:  # noqa: N802 (Python-Markdown's name)
        state = _State()
        if self.getConfig("alerts"):
            alerts.register(md)
        if self.getConfig("glossary") or self.getConfig("results") or self.getConfig("status"):
            # Before whitespace normalisation (30) and the fences (superfences: 31 and below),
            # so that a rendered region is read as Markdown like the rest of the page.
            md.preprocessors.register(_Pages(md, self, state), "wiki-pages", 35)
        if self.getConfig("status"):
            md.treeprocessors.register(_Chips(md, self, state), "wiki-status", 4)


def makeExtension(**kwargs: Any) -> WikiExtension:  # noqa: N802 (Python-Markdown's name)
    return WikiExtension(**kwargs)
