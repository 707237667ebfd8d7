"""Properties of the page parser on any input: it never raises, and every position it reports
lies inside the file (1-based line within the file, column within that line or just past it)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from wikitools.pages.parse import parse_page

# Pieces that reach every branch of the parser: front matter, fences (closed or not, brace
# attributes, inside quotes), admonitions and tabs with indented bodies, tables, headings of
# both kinds, links, images, autolinks, bare URLs, comments and HTML.
PIECES = [
    "---\n", "title: T\n", "status: [x\n", "# Heading\n", "Title\n=====\n", "## H2 `code`\n",
    "```\n", "````markdown\n", "~~~\n", "```{ .bash #rb .runbook-server gpus=2 }\n",
    "```{ .bash key=\"unclosed }\n", "> ```\n", "> quoted\n", "!!! note \"Title\"\n",
    "??? tip\n", "=== \"Tab\"\n", "    indented body\n", "        deeper\n", "\t\n",
    "| a | b |\n", "|---|---|\n", "| 1 | `x|y` |\n", "| [l](p.md) | |\n", "- item\n",
    "1. item\n", "[link](a.md#x) ", "![alt](i.png) ", "<https://x.org> ", "see https://a.b/c. ",
    "<!-- wiki:results runbook=x -->\n", "<!-- wiki:end -->\n", "<!--\nmulti\n-->\n",
    "<div>\n", "</div>\n", "text with *emph* and **strong** ", "GPU-GPU-", "\n", "\n\n",
    "\r\n", "\r", "\ufeff", "\x00", "é ", "😀 ", "`", "``", "[", "]", "(", ")", "<", ">", "\\",
]


def _inside(text: str, line: int, col: int) -> bool:
    lines = text.removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n").split("\n")
    return 1 <= line <= len(lines) and 1 <= col <= len(lines[line - 1]) + 1


def _positions(page) -> list[tuple[str, int, int]]:
    out = [("heading", h.line, h.col) for h in page.headings]
    out += [("code", b.line, b.col) for b in page.code_blocks]
    out += [("span", s.line, s.col) for s in page.spans]
    out += [("link", lk.line, lk.col) for lk in page.links]
    out += [("comment", c.line, c.col) for c in page.comments]
    out += [("cell", c.line, c.col) for t in page.tables for c in (*t.header, *sum(t.rows, ()))]
    out += [("problem", p.line, p.col) for p in page.problems]
    return out


markdown = st.lists(st.one_of(st.sampled_from(PIECES), st.text(max_size=12)), max_size=40).map(
    "".join
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(markdown)
def test_parser_never_raises_and_positions_are_inside_the_file(text: str) -> None:
    page = parse_page(text, "p.md")
    for kind, line, col in _positions(page):
        assert _inside(text, line, col), (kind, line, col)
    for block in page.code_blocks:
        assert block.line <= block.end_line or not block.content


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=300))
def test_reading_any_bytes_never_raises(tmp_path_factory, data: bytes) -> None:
    from wikitools.pages.parse import read_page

    folder = tmp_path_factory.mktemp("bytes")
    (folder / "p.md").write_bytes(data)
    page = read_page(folder / "p.md", folder)
    text = data.decode("utf-8", errors="replace").replace("\x00", "\ufffd")
    for kind, line, col in _positions(page):
        assert _inside(text, line, col), (kind, line, col)
