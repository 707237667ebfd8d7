"""The page parser: one markdown-it-py parse per page into the model of `wikitools.page_model`
(re-exported here), positions mapped back to the source. Every other module reads `Page`,
never raw Markdown."""

from __future__ import annotations

import bisect
import os
import re
import stat
from pathlib import Path
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.token import Token

from wikitools.diagnostics import Diagnostic, Severity
from wikitools.fences import parse_fence_info
from wikitools.page_model import (
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
from wikitools.page_source import flatten_containers, indent, take_front_matter

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

_MD = MarkdownIt("commonmark", {"html": True}).enable("table")

_BARE_URL = re.compile(r"\b(?:https?|ftp)://[^\s<>()\[\]`]+|\bwww\.[^\s<>()\[\]`]+")
_URL_TRAILING = ".,;:!?'\")*_"
_QUOTE_PREFIX = re.compile(r"^(?:[ \t]*>)+")
_BREAK_TAG = re.compile(r"<br\s*/?>", re.IGNORECASE)
_ESCAPABLE = frozenset("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")  # CommonMark backslash escapes


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
    tokens = _MD.parse("\n".join(body_lines))
    _Walker(page, lines).walk(tokens)
    return page


# --------------------------------------------------------------------------- token walk


def _span(tok: Token) -> tuple[int, int]:
    """The 0-based [start, end) source lines of a block-level token (markdown-it always maps
    them; only inline children go unmapped)."""
    if tok.map is None:
        raise ValueError(f"markdown-it token {tok.type!r} has no source map")
    start, end = tok.map
    return start, end


def _plain(children: list[Token] | None, *, html: bool = False) -> str:
    """Inline text without markup. With `html`, inline tags such as `<think>` stay in the text
    (a heading's words); comments never do."""
    parts: list[str] = []
    for tok in children or []:
        keep_html = html and tok.type == "html_inline" and not tok.content.startswith("<!--")
        if tok.type in ("text", "code_inline") or keep_html:
            parts.append(tok.content)
        elif tok.type in ("softbreak", "hardbreak") or (
            tok.type == "html_inline" and _BREAK_TAG.fullmatch(tok.content)
        ):
            parts.append(" ")
        elif tok.type == "image":
            parts.append(_plain(tok.children))
    return "".join(parts).strip()


def _find_text(content: str, text: str, cursor: int) -> tuple[int, int] | None:
    """Where a text token's `text` stands in the source `content`, from `cursor` on: the source
    may carry a backslash before any punctuation that markdown-it unescaped (`\\!` reads `!`)."""
    if content.startswith(text, cursor):
        return cursor, cursor + len(text)
    if not any(ch in _ESCAPABLE for ch in text):
        found = content.find(text, cursor)
        return (found, found + len(text)) if found >= 0 else None
    pattern = "".join(
        "\\\\?" + re.escape(ch) if ch in _ESCAPABLE else re.escape(ch) for ch in text
    )
    match = re.compile(pattern).search(content, cursor)
    return match.span() if match else None


def _code_span_end(content: str, markup: str, cursor: int) -> int:
    """Offset just past the code span opened by the first `markup` run at or after `cursor`
    (the closing run has exactly the same number of backticks)."""
    opening = re.compile(rf"(?<!`){markup}(?!`)")
    start = opening.search(content, cursor)
    if start is None:
        return cursor
    end = opening.search(content, start.end())
    return end.end() if end else start.end()


class _Walker:
    """Turns the token stream into Page elements, mapping positions back to the source."""

    def __init__(self, page: Page, lines: list[str]) -> None:
        self.page = page
        self.lines = lines

    # positions -------------------------------------------------------------

    def _col_in_line(self, line_idx: int, needle: str, start_col0: int = 0) -> int:
        """0-based column of `needle` in source line `line_idx` at or after `start_col0`."""
        src = self.lines[line_idx] if line_idx < len(self.lines) else ""
        found = src.find(needle, start_col0) if needle else -1
        return found if found >= 0 else start_col0

    def walk(self, tokens: list[Token]) -> None:
        table: dict[str, Any] | None = None
        pending: dict[str, Any] = {}
        for i, tok in enumerate(tokens):
            if tok.type == "fence":
                self._fence(tok)
            elif tok.type == "code_block":
                self._indented(tok)
            elif tok.type == "html_block":
                self._html_block(tok)
            elif tok.type == "heading_open":
                pending = {"heading": tok}
            elif tok.type == "paragraph_open":
                pending = {"paragraph": tok}
            elif tok.type == "table_open":
                start, end = _span(tok)
                table = {"line": start + 1, "end": end, "header": [], "rows": []}
            elif tok.type == "tr_open" and table is not None:
                table["rows"].append([])
            elif tok.type == "thead_close" and table is not None:
                table["header"] = table["rows"].pop() if table["rows"] else []
            elif tok.type == "table_close" and table is not None:
                self._table(table)
                table = None
            elif tok.type == "inline":
                if table is not None and tokens[i - 1].type in ("th_open", "td_open"):
                    self._cell(tok, table)
                elif "heading" in pending:
                    self._heading(pending.pop("heading"), tok)
                elif "paragraph" in pending:
                    pending.pop("paragraph")
                    self._inline(tok, "paragraph")
                    self.page.paragraphs.append(Paragraph(_plain(tok.children), _span(tok)[0] + 1))
                else:
                    self._inline(tok, "paragraph")

    # blocks ----------------------------------------------------------------

    def _fence(self, tok: Token) -> None:
        start, end = _span(tok)
        src = self.lines[start]
        col0 = self._col_in_line(start, tok.markup)
        last = self.lines[end - 1] if end - 1 < len(self.lines) else ""
        last = _QUOTE_PREFIX.sub("", last).strip()  # a fence inside `> ` closes inside it too
        closed = end - 1 > start and last.startswith(tok.markup) and not last.strip(tok.markup[0])
        info_col = col0 + len(tok.markup) + 1
        attrs = parse_fence_info(src[col0 + len(tok.markup) :], info_col)
        block = CodeBlock(
            line=start + 1,
            col=col0 + 1,
            content=tok.content,
            content_line=start + 2,
            end_line=end,
            fenced=True,
            closed=closed,
            info=tok.info,
            attrs=attrs,
        )
        self.page.code_blocks.append(block)
        if not closed:
            self.page.problems.append(
                Diagnostic(
                    self.page.path,
                    start + 1,
                    col0 + 1,
                    "PG001",
                    f"code fence {tok.markup!r} is never closed; it runs to the end of the file",
                )
            )

    def _indented(self, tok: Token) -> None:
        start, end = _span(tok)
        col0 = indent(self.lines[start]) if start < len(self.lines) else 0
        self.page.code_blocks.append(
            CodeBlock(start + 1, col0 + 1, tok.content, start + 1, end, fenced=False, closed=True)
        )

    def _html_block(self, tok: Token) -> None:
        start, end = _span(tok)
        self.page.html_blocks.append((start + 1, end))
        self._comments(tok.content, start, 0)

    def _comments(self, content: str, line_idx: int, col_hint: int) -> None:
        for m in re.finditer(r"<!--(.*?)-->", content, re.DOTALL):
            before = content[: m.start()]
            line = line_idx + before.count("\n")
            prefix = before.rsplit("\n", 1)[-1]
            col0 = self._col_in_line(line, "<!--", col_hint if "\n" not in before else 0)
            if "\n" in before or not prefix:
                col0 = self._col_in_line(line, "<!--")
            end_line = line + m.group(0).count("\n") + 1
            self.page.comments.append(Comment(m.group(1).strip(), line + 1, col0 + 1, end_line))

    def _heading(self, open_tok: Token, inline: Token) -> None:
        setext = open_tok.markup in ("=", "-")
        line_idx = _span(inline)[0]
        text = _plain(inline.children, html=True)
        col0 = self._col_in_line(line_idx, inline.content.split("\n")[0][:20])
        self.page.headings.append(
            Heading(int(open_tok.tag[1]), text, line_idx + 1, col0 + 1, setext)
        )
        self._inline(inline, "heading")

    def _cell(self, tok: Token, table: dict[str, Any]) -> None:
        line_idx = _span(tok)[0]
        row: list[Cell] = table["rows"][-1] if table["rows"] else []
        # Cells are found left to right: search after the previous cell of the row.
        after = 0
        if row:
            prev = row[-1]
            after = prev.col - 1 + len(prev.text)
        if tok.content:
            col0 = self._col_in_line(line_idx, tok.content, after)
        else:  # an empty cell: just after its opening pipe; a padded cell: the end of the line
            line = self.lines[line_idx] if line_idx < len(self.lines) else ""
            pipe = line.find("|", after)
            col0 = pipe + 1 if pipe >= 0 else len(line.rstrip("\r\n"))
        row.append(Cell(tok.content, line_idx + 1, col0 + 1))
        self._inline(tok, "table", anchor=(line_idx, col0))

    def _table(self, table: dict[str, Any]) -> None:
        self.page.tables.append(
            Table(
                line=table["line"],
                end_line=table["end"],
                header=tuple(table["header"]),
                rows=tuple(tuple(r) for r in table["rows"]),
            )
        )

    # inline ----------------------------------------------------------------

    def _line_starts(self, tok: Token, anchor: tuple[int, int] | None) -> list[tuple[int, int]]:
        """For each line of the inline content: (source line index, 0-based column)."""
        if anchor is not None:
            return [anchor]
        starts: list[tuple[int, int]] = []
        first = _span(tok)[0]
        for k, content_line in enumerate(tok.content.split("\n")):
            idx = first + k
            src = self.lines[idx] if idx < len(self.lines) else ""
            body = src.rstrip()
            piece = content_line.rstrip()
            if piece and body.endswith(piece):
                col0 = len(body) - len(piece)
            else:
                col0 = self._col_in_line(idx, piece[:12]) if piece else 0
            starts.append((idx, col0))
        return starts

    def _inline(self, tok: Token, context: str, anchor: tuple[int, int] | None = None) -> None:
        content = tok.content
        starts = self._line_starts(tok, anchor)
        line_of_offset: list[int] = []  # content offset where each content line starts
        off = 0
        for piece in content.split("\n"):
            line_of_offset.append(off)
            off += len(piece) + 1

        def locate(offset: int) -> tuple[int, int]:
            k = min(bisect.bisect_right(line_of_offset, offset) - 1, len(starts) - 1)
            idx, col0 = starts[k]
            return idx + 1, col0 + (offset - line_of_offset[k]) + 1

        cursor = 0
        stack: list[str] = []  # enclosing link/image contexts
        for child in tok.children or []:
            kind = child.type
            if kind == "text":
                span = _find_text(content, child.content, cursor)
                at = span[0] if span else cursor
                cursor = span[1] if span else cursor
                ctx = stack[-1] if stack else context
                if ctx != "autolink":
                    self._text(child.content, locate(at), ctx)
            elif kind == "code_inline":
                cursor = _code_span_end(content, child.markup, cursor)
            elif kind in ("softbreak", "hardbreak"):
                nl = content.find("\n", cursor)
                cursor = nl + 1 if nl >= 0 else cursor
            elif kind == "html_inline":
                at = content.find(child.content, cursor)
                if at >= 0:
                    if child.content.startswith("<!--"):
                        line, col = locate(at)
                        self.page.comments.append(
                            Comment(child.content[4:-3].strip(), line, col, line)
                        )
                    cursor = at + len(child.content)
            elif kind == "link_open":
                at = content.find("<" if child.markup == "autolink" else "[", cursor)
                line, col = locate(max(at, cursor))
                href = str(child.attrs.get("href", ""))
                autolink = child.markup == "autolink"
                self.page.links.append(Link("autolink" if autolink else "link", href, line, col))
                stack.append("autolink" if autolink else "link_text")
                cursor = (at + 1) if at >= 0 else cursor
            elif kind == "link_close":
                ctx = stack.pop() if stack else ""
                cursor = self._skip_destination(content, cursor, ctx == "autolink")
            elif kind == "image":
                at = content.find("![", cursor)
                line, col = locate(max(at, cursor))
                self.page.links.append(Link("image", str(child.attrs.get("src", "")), line, col))
                alt_at = at + 2 if at >= 0 else cursor
                if child.content:
                    self._text(child.content, locate(alt_at), "image_alt")
                cursor = self._skip_destination(content, alt_at + len(child.content), False)

    @staticmethod
    def _skip_destination(content: str, cursor: int, autolink: bool) -> int:
        """Move past `](dest "title")`, `][ref]`, `]` or `>` that closes a link."""
        if autolink:
            end = content.find(">", cursor)
            return end + 1 if end >= 0 else cursor
        close = content.find("]", cursor)
        if close < 0:
            return cursor
        nxt = content[close + 1 : close + 2]
        if nxt == "(":
            depth, i = 0, close + 1
            while i < len(content):
                if content[i] == "(":
                    depth += 1
                elif content[i] == ")":
                    depth -= 1
                    if depth == 0:
                        return i + 1
                i += 1
            return close + 1
        if nxt == "[":
            end = content.find("]", close + 1)
            return end + 1 if end >= 0 else close + 1
        return close + 1

    def _text(self, text: str, where: tuple[int, int], context: str) -> None:
        """Record prose text, splitting out bare URLs as links."""
        line, col = where
        last = 0
        for m in _BARE_URL.finditer(text):
            url = m.group(0).rstrip(_URL_TRAILING)
            if m.start() > last:
                self.page.spans.append(TextSpan(text[last : m.start()], line, col + last, context))
            self.page.links.append(Link("bare", url, line, col + m.start()))
            last = m.start() + len(url)
        if last < len(text):
            self.page.spans.append(TextSpan(text[last:], line, col + last, context))
