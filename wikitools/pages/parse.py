"""The page parser: markdown-it-pyrs's syntax tree of a page (`page_source`) turned into the model
of `wikitools.pages.page` (re-exported here), positions mapped back to the source. Every other
module reads `Page`, never raw Markdown."""

from __future__ import annotations

import html
import os
import re
import stat
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate
from pathlib import Path

from markdown_it_pyrs import Node

from wikitools.core.diagnostics import Diagnostic, Severity
from wikitools.pages.fences import parse_fence_info
from wikitools.pages.page import (
    Cell,
    CodeBlock,
    Comment,
    FenceAttrs,
    Heading,
    Link,
    Page,
    Paragraph,
    Table,
    TextSpan,
)
from wikitools.pages.source import flatten_containers, indent, syntax_tree, take_front_matter

__all__ = [
    "Cell",
    "CodeBlock",
    "Comment",
    "FenceAttrs",
    "Heading",
    "Link",
    "Page",
    "Paragraph",
    "Table",
    "TextSpan",
    "parse_fence_info",
    "parse_page",
    "read_page",
]


# A character that may start inline markup (an escape, code, emphasis, a link or image, HTML,
# an entity, a line break): text without any is one text node holding the source as written.
_INLINE_MARKUP = re.compile(r"[\\`*_\[\]!<&~\n]")
_BARE_URL = re.compile(r"\b(?:https?|ftp)://[^\s<>()\[\]`]+|\bwww\.[^\s<>()\[\]`]+")
_URL_TRAILING = ".,;:!?'\")*_"
_QUOTE_PREFIX = re.compile(r"^(?:[ \t]*>)+")
_BREAK_TAG = re.compile(r"<br\s*/?>", re.IGNORECASE)
_COMMENT = re.compile(r"<!--(.*?)-->", re.DOTALL)
_ALERT = re.compile(r"^\[!(?:NOTE|TIP|IMPORTANT|WARNING|CAUTION)\]$", re.IGNORECASE)
_SUMMARY = re.compile(r"<summary\b[^>]*>(.*?)</summary>", re.DOTALL)

_TEXT = frozenset(("text", "text_special"))  # text_special: an escaped character or an entity
_BREAKS = frozenset(("softbreak", "hardbreak"))
_LEAF = _BREAKS | {"code_inline"}
_INLINE = _TEXT | _LEAF | {"html_inline", "link", "autolink", "image", "em", "strong"}


@dataclass(frozen=True, slots=True)
class _Rest:
    """The blocks of a node after its first, walked as a node of their own."""

    children: Sequence[Node]


# --------------------------------------------------------------------------- reading


def read_page(path: Path, root: Path) -> Page:
    """Read and parse one file. Bytes that are not UTF-8 become U+FFFD with a located PG002
    error, a NUL byte a located PG006 error; the page is parsed all the same, so nothing in it
    disappears. The file is opened without blocking and must be a regular file."""
    rel = path.relative_to(root).as_posix() if path.is_absolute() else path.as_posix()
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            page = Page(path=rel, text="")
            page.problems.append(Diagnostic(
                rel, 1, 1, "PG004", "not a regular file (a FIFO, device or folder); skipped",
                Severity.WARNING))
            return page
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read()
    finally:
        os.close(fd)
    problems: list[Diagnostic] = []
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        text = data.decode("utf-8", errors="replace")
        line, col = _position(data[: exc.start].decode("utf-8", errors="replace"))
        bad = text.count("\ufffd") - data.count("\ufffd".encode())
        more = f"; {bad - 1} more such byte sequence{'s' * (bad != 2)} after it" if bad > 1 else ""
        problems.append(Diagnostic(
            rel, line, col, "PG002",
            f"byte 0x{data[exc.start]:02x} is not valid UTF-8 ({exc.reason}); read as U+FFFD"
            f"{more}"))
    if "\0" in text:
        line, col = _position(text[: text.index("\0")])
        count = text.count("\0")
        problems.append(Diagnostic(
            rel, line, col, "PG006",
            f"NUL byte in the page{f' ({count} in all)' if count > 1 else ''}; read as U+FFFD"))
        text = text.replace("\0", "\ufffd")
    page = parse_page(text, rel)
    page.problems[:0] = problems
    return page


def _position(prefix: str) -> tuple[int, int]:
    """1-based line and column (code points) just after `prefix`, the text before a character,
    counting line breaks as the parser does (CRLF, CR and LF) and not counting a leading BOM."""
    prefix = prefix.removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n")
    start = prefix.rfind("\n") + 1
    return prefix.count("\n") + 1, len(prefix) - start + 1


def parse_page(text: str, path: str = "<string>") -> Page:
    """Parse Markdown source into a Page. Never raises on bad Markdown: problems are listed."""
    text = text.removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n")
    page = Page(path=path, text=text)
    lines = text.split("\n")
    body_lines = take_front_matter(page, lines)
    body_lines = flatten_containers(page, body_lines)
    tree, body, mark = syntax_tree(page, lines, body_lines)
    _Walker(page, lines, body.split("\n"), body, mark).blocks(tree)
    return page


# --------------------------------------------------------------------------- tree walk


def _plain(nodes: Sequence[Node], html: bool = False) -> str:
    """Inline text without markup. With `html`, inline tags such as `<think>` stay in the text
    (a heading's words); comments never do."""
    parts: list[str] = []
    _plain_parts(nodes, html, parts)
    return "".join(parts).strip()


def _plain_parts(nodes: Sequence[Node], html: bool, parts: list[str]) -> None:
    for node in nodes:
        name = node.name
        if name in _TEXT:
            parts.append(node.meta["content"])
        elif name == "html_inline":
            content = node.meta["content"]
            if html and not content.startswith("<!--"):
                parts.append(content)
            elif _BREAK_TAG.fullmatch(content):
                parts.append(" ")
        elif name in ("softbreak", "hardbreak"):
            parts.append(" ")
        elif name == "image":
            parts.append(_plain(node.children))
        else:  # emphasis, links, code spans: their text
            _plain_parts(node.children, html, parts)


def _label_end(data: bytes, start: int) -> int:
    """Offset of the `]` that closes the link label opened just before `start`."""
    depth, i = 0, start
    while i < len(data):
        ch = data[i]
        if ch == 0x5C:  # a backslash escapes the next byte
            i += 2
            continue
        if ch == 0x5B:
            depth += 1
        elif ch == 0x5D:
            if depth == 0:
                return i
            depth -= 1
        i += 1
    return len(data)


class _Walker:
    """Turns the syntax tree into Page elements. Every node carries its byte offsets in the
    parsed body, which has the source's lines, some with leading columns taken off
    (`flatten_containers`): an offset maps back to an exact source line and column."""

    def __init__(
        self, page: Page, lines: list[str], body_lines: list[str], body: str, mark: str | None
    ) -> None:
        self.page = page
        self.mark = mark
        self.lines = lines
        self.body_lines = body_lines
        self.ascii = body.isascii()  # then byte offsets are character offsets
        self.data = body if self.ascii else body.encode()
        sizes = (len(line) if self.ascii or line.isascii() else len(line.encode())
                 for line in body_lines)
        self.starts = list(accumulate((size + 1 for size in sizes), initial=0))
        # per line, the columns `flatten_containers` took off its start
        self.shift = [len(line) - len(body) for line, body in zip(lines, body_lines, strict=False)]
        self.k = 0  # the line of the last offset looked up: the next is mostly on it

    # positions -------------------------------------------------------------

    def at(self, offset: int) -> tuple[int, int]:
        """0-based source line and column (code points) of a byte offset in the body."""
        starts, k = self.starts, self.k
        if not starts[k] <= offset < starts[k + 1]:
            k = self.k = bisect_right(starts, offset) - 1
        col = offset - starts[k]
        if not self.ascii:
            line = self.body_lines[k]
            if not line.isascii():
                col = len(line.encode()[:col].decode("utf-8", errors="ignore"))
        return k, self.shift[k] + col

    def line_of(self, offset: int) -> int:
        return bisect_right(self.starts, offset) - 1

    def last_line(self, node: Node) -> int:
        """The 1-based last source line of a block."""
        start, end = node.srcmap or (0, 0)
        return self.line_of(max(end - 1, start)) + 1

    def source(self, start: int, end: int) -> str:
        piece = self.data[start:end]
        return self.unmark(piece if isinstance(piece, str) else piece.decode("utf-8", "replace"))

    def unmark(self, text: str) -> str:
        """The text with the stand-in for a backtick (`page_source.syntax_tree`) read back."""
        return text if self.mark is None else text.replace(self.mark, "`")

    # blocks ----------------------------------------------------------------

    def blocks(self, node: Node | _Rest) -> None:
        run: list[Node] = []  # the inline content of a tight list item's paragraph
        for child in node.children:
            name = child.name
            if name in _INLINE:
                run.append(child)
                continue
            if run:
                self._paragraph(run, run[0])
                run = []
            if name == "paragraph":
                self._paragraph(child.children, child)
            elif name == "fence":
                self._fence(child)
            elif name == "code_block":
                self._indented(child)
            elif name == "html_block":
                self._html_block(child)
            elif name in ("heading", "lheading"):
                self._heading(child)
            elif name == "table":
                self._table(child)
            elif name == "blockquote" and self._alert_title(child):
                self.blocks(_Rest(child.children[1:]))
            else:
                self.blocks(child)
        if run:
            self._paragraph(run, run[0])

    def _alert_title(self, quote: Node) -> bool:
        """A GitHub alert (`> [!NOTE]`): its title, the bold line after the marker, is a label
        as an admonition's title is; the marker itself is no text. False for other quotes."""
        first = quote.children[0] if quote.children else None
        parts = first.children if first is not None and first.name == "paragraph" else []
        if not parts or parts[0].name != "text" or not _ALERT.match(parts[0].meta["content"]):
            return False
        rest = [n for n in parts[1:] if n.name not in ("softbreak", "hardbreak")]
        if len(rest) == 1 and rest[0].name == "strong":
            self._inline(rest[0].children, "admonition_title")
        elif rest:
            self._paragraph(rest, rest[0])
        return True

    def _paragraph(self, nodes: Sequence[Node], first: Node) -> None:
        plain: list[str] = []
        self._inline(nodes, "paragraph", plain)
        line = self.line_of(first.srcmap[0] if first.srcmap else 0) + 1
        self.page.paragraphs.append(Paragraph(self.unmark("".join(plain).strip()), line))

    def _fence(self, node: Node) -> None:
        meta = node.meta
        markup = meta["marker"] * meta["marker_len"]
        start, col0 = self.at(node.srcmap[0] if node.srcmap else 0)
        end = self.last_line(node)
        last = _QUOTE_PREFIX.sub("", self.lines[end - 1]).strip()  # `> ` closes inside it too
        closed = end - 1 > start and last.startswith(markup) and not last.strip(markup[0])
        info_col = col0 + len(markup) + 1
        attrs = parse_fence_info(self.lines[start][col0 + len(markup) :], info_col)
        self.page.code_blocks.append(CodeBlock(
            line=start + 1, col=col0 + 1, content=self.unmark(meta["content"]),
            content_line=start + 2, end_line=end, fenced=True, closed=closed,
            info=self.unmark(meta["info"]), attrs=attrs))
        if not closed:
            self.page.problems.append(Diagnostic(
                self.page.path, start + 1, col0 + 1, "PG001",
                f"code fence {markup!r} is never closed; it runs to the end of the file"))

    def _indented(self, node: Node) -> None:
        start = self.line_of(node.srcmap[0] if node.srcmap else 0)
        col0 = indent(self.lines[start])
        self.page.code_blocks.append(CodeBlock(
            start + 1, col0 + 1, self.unmark(node.meta["content"]), start + 1, self.last_line(node),
            fenced=False, closed=True))

    def _html_block(self, node: Node) -> None:
        start = self.line_of(node.srcmap[0] if node.srcmap else 0)
        self.page.html_blocks.append((start + 1, self.last_line(node)))
        content = self.unmark(node.meta["content"])
        for m in _SUMMARY.finditer(content):  # a <details> title: a label, as a box title is
            line = start + content[: m.start()].count("\n")
            src = self.lines[line] if line < len(self.lines) else ""
            col = src.find(m.group(0).split(">", 1)[0])
            if col >= 0:
                title = html.unescape(m.group(1))
                start = col + len(m.group(0).split(">", 1)[0]) + 2  # 1-based, after the tag
                self.page.spans.append(TextSpan(title, line + 1, start, "admonition_title"))
        for m in _COMMENT.finditer(content):
            before = content[: m.start()]
            line = start + before.count("\n")
            prefix = before.rsplit("\n", 1)[-1]
            piece = content[m.start() - len(prefix) :].split("\n", 1)[0]
            src = self.lines[line]
            col0 = len(src) - len(piece) + len(prefix) if src.endswith(piece) else src.find("<!--")
            end_line = line + m.group(0).count("\n") + 1
            self.page.comments.append(Comment(m.group(1).strip(), line + 1, col0 + 1, end_line))

    def _heading(self, node: Node) -> None:
        children = node.children
        line = self.line_of(node.srcmap[0] if node.srcmap else 0)
        col0 = self.at(children[0].srcmap[0])[1] if children and children[0].srcmap else 0
        plain: list[str] = []
        self._inline(children, "heading", plain, html=True)
        text = self.unmark("".join(plain).strip())
        setext = node.name == "lheading"
        self.page.headings.append(Heading(node.meta["level"], text, line + 1, col0 + 1, setext))

    def _table(self, node: Node) -> None:
        header: tuple[Cell, ...] = ()
        rows: list[tuple[Cell, ...]] = []
        for section in node.children:
            for trow in section.children:
                row: list[Cell] = []
                line = self.line_of(trow.srcmap[0] if trow.srcmap else 0)
                for tcell in trow.children:
                    self._cell(tcell, line, row)
                if section.name == "thead":
                    header = tuple(row)
                else:
                    rows.append(tuple(row))
        start = self.line_of(node.srcmap[0] if node.srcmap else 0)
        self.page.tables.append(Table(start + 1, self.last_line(node), header, tuple(rows)))

    def _cell(self, node: Node, line: int, row: list[Cell]) -> None:
        start, end = node.srcmap or (0, 0)
        pos: tuple[int, int] | None
        if end > start:  # the cell's trimmed source; `\|` is a pipe in it
            text = self.source(start, end).replace("\\|", "|")
            found = self.at(start)
            if not _INLINE_MARKUP.search(text):  # one text node holding just the source
                row.append(Cell(text, line + 1, found[1] + 1))
                self._text(text, start, "table", found)
                return
            col0, pos = found[1], found
        else:  # an empty cell: just after its opening pipe; a padded cell: the end of the line
            text, pos = "", None
            after = row[-1].col - 1 + len(row[-1].text) if row else 0
            src = self.lines[line]
            pipe = src.find("|", after)
            col0 = pipe + 1 if pipe >= 0 else len(src)
        row.append(Cell(text, line + 1, col0 + 1))
        children = node.children
        if len(children) == 1:  # mostly one text node: each attribute read builds an object
            child = children[0]
            srcmap = child.srcmap
            if srcmap and child.name == "text":
                self._text(self.unmark(child.meta["content"]), srcmap[0], "table",
                           pos if srcmap[0] == start else None)
                return
        self._inline(children, "table")

    # inline ----------------------------------------------------------------

    def _inline(
        self, nodes: Sequence[Node], context: str, plain: list[str] | None = None,
        html: bool = False,
    ) -> None:
        """Text spans, links and comments of inline content. Adjacent text nodes (an escape or
        an entity splits them) make one span, located where the first starts. With `plain`,
        the text without markup is gathered into it in the same walk (see `_plain`)."""
        texts: list[str] = []
        first = 0
        for node in nodes:
            name = node.name
            if name in _TEXT:
                if not texts:
                    first = node.srcmap[0] if node.srcmap else 0
                content = node.meta["content"]
                texts.append(content)
                if plain is not None:
                    plain.append(content)
                continue
            if texts:
                self._text(self.unmark("".join(texts)), first, context)
                texts = []
            self._inline_node(node, name, context, plain, html)
        if texts:
            self._text(self.unmark("".join(texts)), first, context)

    def _inline_node(self, node: Node, name: str, context: str, plain: list[str] | None,
                     html: bool) -> None:
        """One inline node that is not text: a link, image, raw HTML, code, a break or
        emphasis (whose children are walked)."""
        if name == "link":
            self._link("link", node)
            self._inline(node.children, "link_text", plain, html)
        elif name == "autolink":
            self._link("autolink", node)
            if plain is not None:
                _plain_parts(node.children, html, plain)
        elif name == "image":
            start = self._link("image", node)
            data = self.data if isinstance(self.data, bytes) else self.data.encode()
            alt = self.source(start + 2, _label_end(data, start + 2))
            if alt:
                self._text(alt, start + 2, "image_alt")
            if plain is not None:
                plain.append(_plain(node.children))
        elif name == "html_inline":
            self._html_inline(node, plain, html)
        elif name == "code_inline":
            if plain is not None:
                _plain_parts(node.children, html, plain)
        elif name in _BREAKS:
            if plain is not None:
                plain.append(" ")
        else:  # emphasis
            self._inline(node.children, context, plain, html)

    def _html_inline(self, node: Node, plain: list[str] | None, html: bool) -> None:
        raw = node.meta["content"]
        content = self.unmark(raw)
        if content.startswith("<!--") and node.srcmap:
            line, col0 = self.at(node.srcmap[0])
            text = content[4:-3].strip()
            self.page.comments.append(Comment(text, line + 1, col0 + 1, line + 1))
        if plain is not None:
            if html and not raw.startswith("<!--"):
                plain.append(raw)
            elif _BREAK_TAG.fullmatch(raw):
                plain.append(" ")

    def _link(self, kind: str, node: Node) -> int:
        start = node.srcmap[0] if node.srcmap else 0
        line, col0 = self.at(start)
        url = str(node.meta.get("url", ""))
        if self.mark is not None:  # percent-encoded in a link's address
            encoded = "".join(f"%{byte:02X}" for byte in self.mark.encode())
            url = self.unmark(url.replace(encoded, "%60"))
        self.page.links.append(Link(kind, url, line + 1, col0 + 1))
        return start

    def _text(
        self, text: str, offset: int, context: str, at: tuple[int, int] | None = None
    ) -> None:
        """Record prose text, splitting out bare URLs as links. `at`: the 0-based line and
        column of `offset` when the caller already has them."""
        if not text:
            return
        line, col = at or self.at(offset)
        line, col = line + 1, col + 1
        if "://" not in text and "www." not in text:  # no bare URL: the common case, quickly
            self.page.spans.append(TextSpan(text, line, col, context))
            return
        last = 0
        for m in _BARE_URL.finditer(text):
            url = m.group(0).rstrip(_URL_TRAILING)
            if m.start() > last:
                self.page.spans.append(TextSpan(text[last : m.start()], line, col + last, context))
            self.page.links.append(Link("bare", url, line, col + m.start()))
            last = m.start() + len(url)
        if last < len(text):
            self.page.spans.append(TextSpan(text[last:], line, col + last, context))
