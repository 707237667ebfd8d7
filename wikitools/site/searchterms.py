"""The code words each page of the site owns, for the search check in the browser
(scripts/check-browser.py): command-line flags (`--kv-cache-dtype`) and upper-case names with an
underscore (environment variables such as `NCCL_P2P_LEVEL`, backend names such as `TRITON_MLA`),
wherever a reader sees them on the page: prose, headings, tables, box titles and code blocks.
Front matter, HTML comments and link addresses are not part of what a reader sees and are left
out.

A page *holds* a word when its text has it in any letter case and not as part of a longer name
(`--port` is not held by a page that has only `--port-range`). That is the rule the site's search
script (wiki/assets/javascripts/search-flags.js) applies when it lists the pages that hold a code
word first, so the check can expect exactly those pages at the top of the result list."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from wikitools.pages.page import Page

FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9]*(?:[-_][a-z0-9]+)*(?![\w-])")
NAME = re.compile(r"(?<![\w$-])[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+(?![\w-])")
_NAME_CHAR = "A-Za-z0-9_-"  # what continues a name: the holds() boundary, as in search-flags.js


def page_text(page: Page) -> str:
    """The text a reader sees on the page, one block a line: paragraphs (inline code kept),
    headings, table cells, box titles and code blocks."""
    parts = [p.text for p in page.paragraphs]
    parts += [h.text for h in page.headings]
    parts += [c.text for t in page.tables for row in (t.header, *t.rows) for c in row]
    parts += [s.text for s in page.spans if s.context == "admonition_title"]
    parts += [b.content for b in page.code_blocks]
    return "\n".join(parts)


def code_words(text: str) -> set[str]:
    """The flags and upper-case underscore names in `text`, as written."""
    return set(FLAG.findall(text)) | set(NAME.findall(text))


def holds(text: str, word: str) -> bool:
    """Whether `text` has `word` in any letter case, not as part of a longer name."""
    pattern = rf"(?:^|[^{_NAME_CHAR}]){re.escape(word)}(?![{_NAME_CHAR}])"
    return re.search(pattern, text, re.IGNORECASE) is not None


def site_path(rel: str) -> str:
    """The address of a page on the site, relative to its root, for a path under the docs
    folder: `index.md` -> "", `hardware/index.md` -> "hardware/", `glossary.md` -> "glossary/"."""
    stem = rel.removesuffix(".md")
    if stem == "index":
        return ""
    if stem.endswith("/index"):
        return stem.removesuffix("index")
    return stem + "/"


@dataclass(frozen=True, slots=True)
class SearchTerms:
    """`owners`: code word -> the site paths of the pages it was found on, as written;
    `holders`: code word -> the site paths of every page that holds it (see `holds`), a superset
    of its owners. Both sorted, words in sorted order."""

    owners: Mapping[str, tuple[str, ...]]
    holders: Mapping[str, tuple[str, ...]]

    @property
    def pages(self) -> tuple[str, ...]:
        """The pages that own at least one code word."""
        return tuple(sorted({p for paths in self.owners.values() for p in paths}))

    @property
    def pairs(self) -> int:
        """How many (word, page that holds it) pairs there are to check."""
        return sum(len(paths) for paths in self.holders.values())


def search_terms(pages: Iterable[Page], docs_dir: str) -> SearchTerms:
    """The code words of every page under `docs_dir` (a path prefix such as "wiki") and the pages
    that hold each."""
    texts: dict[str, str] = {}
    for page in pages:
        if page.path.startswith(docs_dir.rstrip("/") + "/"):
            texts[site_path(page.path[len(docs_dir.rstrip("/")) + 1 :])] = page_text(page)
    owners: dict[str, set[str]] = {}
    for path, text in texts.items():
        for word in code_words(text):
            owners.setdefault(word, set()).add(path)
    lowered = {path: text.lower() for path, text in texts.items()}
    holders = {word: tuple(sorted(p for p, text in texts.items()
                                  if word.lower() in lowered[p] and holds(text, word)))
               for word in owners}
    return SearchTerms({w: tuple(sorted(owners[w])) for w in sorted(owners)},
                       {w: holders[w] for w in sorted(holders)})
