"""A page as GitHub shows it, and what reads wrong there (PG009, a warning): GitHub renders
Markdown with cmark-gfm (the `cmarkgfm` package is its parser) and then sanitizes the HTML with
an allowlist, so Material syntax shows as text, an indented body as a code block, inline
`<svg>` not at all, and a table cut by a blank line or wrapped in HTML as a row of pipes.

The allowlist is html-pipeline's SanitizationFilter (github/html-pipeline, then
gjtorikian/html-pipeline, lib/html/pipeline/sanitization_filter.rb), the filter GitHub built
its rendering on; `nh3` applies it."""

from __future__ import annotations

import ctypes
import re
from dataclasses import dataclass
from html import unescape

import nh3
from cmarkgfm import _cmark, cmark
from cmarkgfm.cmark import Options

from wikitools.core.diagnostics import Diagnostic, Severity

CODE = "PG009"
EXTENSIONS = ["table", "strikethrough", "autolink", "tagfilter", "tasklist"]
TAGS = frozenset((
    "h1", "h2", "h3", "h4", "h5", "h6", "h7", "h8", "br", "b", "i", "strong", "em", "a", "pre",
    "code", "img", "tt", "div", "ins", "del", "sup", "sub", "p", "ol", "ul", "table", "thead",
    "tbody", "tfoot", "blockquote", "dl", "dt", "dd", "kbd", "q", "samp", "var", "hr", "ruby",
    "rt", "rp", "li", "tr", "td", "th", "s", "strike", "summary", "details",
))
_ALL = frozenset((
    "abbr", "accept", "accept-charset", "accesskey", "action", "align", "alt", "axis", "border",
    "cellpadding", "cellspacing", "char", "charoff", "charset", "checked", "clear", "cols",
    "colspan", "color", "compact", "coords", "datetime", "dir", "disabled", "enctype", "for",
    "frame", "headers", "height", "hreflang", "hspace", "ismap", "label", "lang", "maxlength",
    "media", "method", "multiple", "name", "nohref", "noshade", "nowrap", "open", "prompt",
    "readonly", "rel", "rev", "rows", "rowspan", "rules", "scope", "selected", "shape", "size",
    "span", "start", "summary", "tabindex", "target", "title", "type", "usemap", "valign", "value",
    "vspace", "width", "itemprop",
))
ATTRIBUTES = {"a": {"href"}, "img": {"src", "longdesc"}, "div": {"itemscope", "itemtype"},
              "blockquote": {"cite"}, "del": {"cite"}, "ins": {"cite"}, "q": {"cite"},
              "*": set(_ALL)}

_MARKER = re.compile(r"^(?:!!!|\?\?\?\+?)[ \t]+[\w-]+|^===[!+]?[ \t]+[\"']")
_FENCE = re.compile(r"^[ \t]*(?:`{3,}|~{3,})")
_QUOTES = re.compile(r"^(?:[ \t]{0,3}>[ \t]?)+")
_DELIMITER_ROW = re.compile(r"^[ \t]*\|?[ \t]*:?-+:?[ \t]*(?:\|[ \t]*:?-+:?[ \t]*)+\|?[ \t]*$")
_CODE_SPAN = re.compile(r"(`+).*?\1")


def _blank_front_matter(text: str) -> str:
    """The page without its front matter, lines kept (GitHub draws front matter as a table)."""
    lines = text.split("\n")
    if lines and lines[0].rstrip() == "---":
        end = next((i for i in range(1, len(lines)) if lines[i].rstrip() in ("---", "...")), None)
        if end is not None:
            lines[: end + 1] = [""] * (end + 1)
    return "\n".join(lines)


# cmarkgfm's own markdown_to_html_with_extensions frees neither the document tree nor the
# HTML that cmark-gfm returns to it (about 140 KB a page: 300 MB over 2,000 pages), so the
# render is done here with the same calls and both are freed (cmark_node_free is exported by
# its library, and cmark-gfm's default allocator is the C library's).
_LIBRARY = ctypes.CDLL(_cmark.__file__)
_LIBRARY.cmark_node_free.argtypes = [ctypes.c_void_p]
_LIBC = ctypes.CDLL(None)
_LIBC.free.argtypes = [ctypes.c_void_p]
_OPTIONS = Options.CMARK_OPT_SOURCEPOS | Options.CMARK_OPT_UNSAFE


def _address(pointer: object) -> int:
    return int(_cmark.ffi.cast("uintptr_t", pointer))


def raw_html(text: str) -> str:
    """cmark-gfm's HTML of the page with GitHub's extensions, raw HTML kept, positions on."""
    cmark.core_extensions_ensure_registered()
    parser = cmark.parser_new(options=_OPTIONS)
    try:
        for name in EXTENSIONS:
            cmark.parser_attach_syntax_extension(parser, cmark.find_syntax_extension(name))
        cmark.parser_feed(parser, _blank_front_matter(text))
        root = cmark.parser_finish(parser)
        try:
            html = _cmark.lib.cmark_render_html(root, _OPTIONS,
                                                cmark.parser_get_syntax_extensions(parser))
            try:
                return str(_cmark.ffi.string(html).decode("utf-8"))
            finally:
                _LIBC.free(_address(html))
        finally:
            _LIBRARY.cmark_node_free(_address(root))
    finally:
        cmark.parser_free(parser)


def github_html(text: str) -> str:
    """The page's HTML as GitHub would serve it: rendered, then sanitized."""
    return nh3.clean(raw_html(text), tags=set(TAGS), attributes=ATTRIBUTES,
                     link_rel=None, strip_comments=True)


@dataclass(frozen=True, slots=True)
class _Block:
    tag: str
    line: int
    col: int
    end: int
    text: str


# cmark-gfm's own blocks, as it writes them with source positions: a paragraph or a code
# block never holds another of its kind, so each ends at the first closing tag of its kind.
_BLOCK = re.compile(r'<(p|pre|table) data-sourcepos="(\d+):(\d+)-(\d+):\d+"[^>]*>')
_CLOSE = {"p": "</p>", "pre": "</pre>", "table": "</table>"}
_TAG = re.compile(r"<[^>]*>")


def _blocks(html: str) -> list[_Block]:
    """The paragraphs, code blocks and tables cmark-gfm wrote, with their source positions and
    their text (tags removed; a table's text is not needed)."""
    out = []
    for m in _BLOCK.finditer(html):
        tag = m.group(1)
        text = ""
        if tag != "table":
            close = html.find(_CLOSE[tag], m.end())
            text = _TAG.sub("", html[m.end() : close if close >= 0 else len(html)])
        out.append(_Block(tag, int(m.group(2)), int(m.group(3)), int(m.group(4)), text))
    return out


def github_findings(text: str, path: str) -> list[Diagnostic]:
    """PG009 warnings for what GitHub would show wrong on this page (one per place)."""
    html = raw_html(text)
    blocks = _blocks(html)
    lines = text.split("\n")
    out: list[tuple[int, int, str]] = []
    code = [(b.line, b.end) for b in blocks if b.tag == "pre"]
    tables = [(b.line, b.end) for b in blocks if b.tag == "table"]
    for block in blocks:
        if block.tag == "p" and _MARKER.match(unescape(block.text)):
            out.append((block.line, block.col, "Material syntax shows as text on GitHub: write "
                        "a GitHub alert (> [!NOTE]), a <details> block or a heading "
                        "(scripts/github-syntax.py rewrites a page)"))
        elif block.tag == "pre" and _indented(lines, block):
            out.append((block.line, block.col, "indented text shows as a code block on GitHub "
                        "(a Material container's body?): fence code, and dedent prose"))
    out.extend(_dropped_svg(lines, code, html))
    for number, line in enumerate(lines, 1):
        if _DELIMITER_ROW.match(_QUOTES.sub("", line)) and not _inside(number, code + tables):
            out.append((number, 1, "this table does not render on GitHub: a table needs its "
                        "header row right above this line, outside HTML blocks"))
    return [Diagnostic(path, line, col, CODE, message, Severity.WARNING)
            for line, col, message in sorted(set(out))]


def _indented(lines: list[str], block: _Block) -> bool:
    """An indented code block: its first line of code is its first line in the source (a
    fenced block's code starts after the fence)."""
    source = lines[block.line - 1][block.col - 1:] if 0 < block.line <= len(lines) else ""
    first = unescape(block.text).split("\n", 1)[0]
    return not _FENCE.match(source) or first.strip() == _QUOTES.sub("", source).strip()


def _inside(line: int, ranges: list[tuple[int, int]]) -> bool:
    return any(start <= line <= end for start, end in ranges)


def _dropped_svg(lines: list[str], code: list[tuple[int, int]],
                 html: str) -> list[tuple[int, int, str]]:
    if "<svg" not in html:
        return []
    out = []
    for number, line in enumerate(lines, 1):
        col = _CODE_SPAN.sub(lambda m: " " * len(m.group(0)), line).find("<svg")
        if col >= 0 and not _inside(number, code):
            out.append((number, col + 1, "GitHub drops inline <svg>: write the chart to a .svg "
                        "file and link it as an image"))
    return out
