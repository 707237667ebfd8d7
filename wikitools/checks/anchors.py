"""Anchors a page offers and links to anchors that do not exist (LNK003).

The ids are the ones the site's build gives: each heading's id as the `toc` extension of
Python-Markdown makes it (mkdocs.yml: `toc` with its default `slugify` and separator `-`,
duplicates numbered `_1`, `_2`, …), or its attribute list's `{#id}`; ids written in attribute
lists on code blocks and other elements (`{ .bash #id }`, `{: #id }`) and in raw HTML
(`id="…"`, `name="…"`); footnote ids (`fn:x`, `fnref:x`)."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING
from urllib.parse import unquote

from wikitools.core.diagnostics import Diagnostic, did_you_mean

if TYPE_CHECKING:
    from wikitools.pages.parse import Page

LinkFact = tuple[str, str, int, int]  # a link on a page: kind (link or image), target, line, col
SEPARATOR = "-"  # toc's default; mkdocs.yml sets no other
_HEADING_ATTRS = re.compile(r"\s*\{:?([^{}]*)\}\s*$")
_ATTR_ID = re.compile(r"(?:^|\s)#([^\s}#]+)")
_BRACE_ID = re.compile(r"\{:?[^{}\n]*?(?<![\w&])#([A-Za-z][\w.:-]*)")
# `id="…"` / `name="…"`, found by its `=` (see `_html_ids`)
_QUOTED_VALUE = re.compile(r"""=\s*["']([^"'\n]+)["']""")
_WORD = re.compile(r"\w")
_FOOTNOTE = re.compile(r"\[\^([^\]\s]+)\]")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def page_anchors(page: Page) -> tuple[str, ...]:
    """Every id a reader can link to on `page`, sorted."""
    # Python-Markdown is the site's parser: imported here, so that the commands (which a run
    # on a GPU host imports) do not need it until a page's anchors are asked for.
    from markdown.extensions.toc import slugify, unique

    used: set[str] = set()
    for heading in page.headings:
        text = heading.text
        attrs = _HEADING_ATTRS.search(text)
        explicit = _ATTR_ID.search(attrs.group(1)) if attrs else None
        if explicit:
            used.add(explicit.group(1))
            continue
        if attrs:
            text = text[: attrs.start()]
        unique(slugify(text, SEPARATOR), used)
    used.update(_BRACE_ID.findall(page.text))
    used.update(_html_ids(page.text))
    for label in _FOOTNOTE.findall(page.text):
        used.update((f"fn:{label}", f"fnref:{label}"))
    return tuple(sorted(used))


def _html_ids(text: str) -> Iterator[str]:
    """The values of `id="…"` and `name="…"` (the name a whole word). Found from the `=`, which
    the pattern can look for quickly, then the name is read back before it."""
    m = _QUOTED_VALUE.search(text)
    while m is not None:
        k = m.start()
        while k and text[k - 1].isspace():
            k -= 1
        name = 2 if text.endswith("id", 0, k) else 4 if text.endswith("name", 0, k) else 0
        if not name or (k > name and _WORD.match(text, k - name - 1)):
            m = _QUOTED_VALUE.search(text, m.start() + 1)
            continue
        yield m.group(1)
        m = _QUOTED_VALUE.search(text, m.end())


def _anchor_of(raw: str, path: str) -> tuple[str, str] | None:
    """(page the link points at, anchor) for a link with a fragment to a page of the wiki; None
    for external links, links without a fragment and links to files that are not pages."""
    if "#" not in raw or raw.startswith(("/", "//")) or _SCHEME.match(raw):
        return None
    target, _, fragment = raw.partition("#")
    target = unquote(target.split("?", 1)[0])
    if not fragment:
        return None
    if not target:
        return path, unquote(fragment)
    resolved = posixpath.normpath(posixpath.join(posixpath.dirname(path), target))
    if target.endswith("/") or not resolved.endswith(".md"):
        resolved = posixpath.join(resolved, "index.md")
    return resolved, unquote(fragment)


def check_anchors(links: Mapping[str, tuple[LinkFact, ...]],
                  anchors: Mapping[str, tuple[str, ...]]) -> Iterator[Diagnostic]:
    """LNK003 for each link whose fragment names no anchor of the page it points at (pages
    outside `anchors`, and missing pages, which LNK001 reports, are not judged)."""
    for path in sorted(links):
        for kind, raw, line, col in links[path]:
            if kind != "link":
                continue
            found = _anchor_of(raw, path)
            if found is None or found[0] not in anchors:
                continue
            page, fragment = found
            if fragment in anchors[page] or fragment.lower() == "top":  # `#top`: the page's top
                continue
            where = "this page" if page == path else f"'{page}'"
            hint = did_you_mean(fragment, anchors[page], cutoff=0.6)
            yield Diagnostic(path, line, col, "LNK003",
                             f"link to missing anchor '#{fragment}' in {where}{hint}")
