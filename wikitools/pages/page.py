"""The page model: what the parser (`wikitools.pages.parse`) produces for one Markdown file, with
1-based line and column (code points) for every element the tools report on."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from wikitools.core.diagnostics import Diagnostic

# The elements a page has by the hundred thousand (text spans, table cells, links, paragraphs)
# are named tuples: immutable like the frozen dataclasses beside them, and several times cheaper
# to make.
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9(\"'`*])")

@dataclass(frozen=True, slots=True)
class FenceAttrs:
    """Attributes of a fence info string. `bash { #id .cls key=val }` is the brace form
    (`lang_first`; the older `{ .bash #id … }` is read too); `bash` alone sets only `lang`."""

    lang: str | None = None
    id: str | None = None
    classes: tuple[str, ...] = ()
    options: tuple[tuple[str, str, int], ...] = ()  # (key, value, column of key in the line)
    brace: bool = False
    lang_first: bool = False  # `bash { … }`, not the older `{ .bash … }`
    error: str | None = None  # a malformed brace form, e.g. an unclosed quote

    def get(self, key: str, default: str | None = None) -> str | None:
        for k, v, _ in self.options:
            if k == key:
                return v
        return default


@dataclass(frozen=True, slots=True)
class CodeBlock:
    """A fenced or indented code block. `line`/`col` locate the opening fence (or the first
    code line); `content_line` is the first line of the body."""

    line: int
    col: int
    content: str
    content_line: int
    end_line: int
    fenced: bool
    closed: bool
    info: str = ""
    attrs: FenceAttrs = field(default_factory=FenceAttrs)


@dataclass(frozen=True, slots=True)
class Heading:
    level: int
    text: str  # plain text (inline markup removed)
    line: int
    col: int
    setext: bool


class TextSpan(NamedTuple):
    """A run of prose text that a reader sees, with its exact source position.
    `context` is one of: paragraph, heading, table, link_text, image_alt, admonition_title."""

    text: str
    line: int
    col: int
    context: str


class Link(NamedTuple):
    kind: str  # link | image | autolink | bare
    target: str
    line: int
    col: int


@dataclass(frozen=True, slots=True)
class Comment:
    """An HTML comment; `text` is the inside of `<!-- … -->`, stripped."""

    text: str
    line: int
    col: int
    end_line: int


class Cell(NamedTuple):
    text: str  # inline source of the cell, trimmed
    line: int
    col: int


@dataclass(frozen=True, slots=True)
class Table:
    line: int
    end_line: int
    header: tuple[Cell, ...]
    rows: tuple[tuple[Cell, ...], ...]


class Paragraph(NamedTuple):
    text: str  # plain text
    line: int


@dataclass(slots=True)
class Page:
    """Everything the tools know about one Markdown file."""

    path: str  # POSIX, relative to the wiki root
    text: str  # LF-normalised source
    front_matter: dict[str, Any] = field(default_factory=dict)
    front_matter_end: int = 0  # last line of the front matter block, 0 when absent
    headings: list[Heading] = field(default_factory=list)
    code_blocks: list[CodeBlock] = field(default_factory=list)
    spans: list[TextSpan] = field(default_factory=list)
    links: list[Link] = field(default_factory=list)
    comments: list[Comment] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    paragraphs: list[Paragraph] = field(default_factory=list)
    html_blocks: list[tuple[int, int]] = field(default_factory=list)  # (line, end_line)
    problems: list[Diagnostic] = field(default_factory=list)

    @property
    def lines(self) -> list[str]:
        return self.text.split("\n")

    @property
    def first_h1(self) -> Heading | None:
        return next((h for h in self.headings if h.level == 1), None)

    @property
    def title(self) -> str | None:
        """Front matter `title`, else the first H1; None when the page has neither."""
        fm_title = self.front_matter.get("title")
        if isinstance(fm_title, str) and fm_title.strip():
            return fm_title.strip()
        h1 = self.first_h1
        return h1.text if h1 and h1.text else None

    @property
    def description(self) -> str | None:
        """Front matter `description`, else the first sentence of the first paragraph."""
        desc = self.front_matter.get("description")
        if isinstance(desc, str) and desc.strip():
            return " ".join(desc.split())
        for para in self.paragraphs:
            text = " ".join(para.text.split())
            if text:
                return _SENTENCE_END.split(text, maxsplit=1)[0]
        return None
