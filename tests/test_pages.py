"""Page model positions, as markdown-it-style fixture files in tests/fixtures/pages/*.md.

Each case is `title` / `.` / input / `.` / expected dump / `.`; the test id carries the file and
line. A title containing `[crlf]` feeds the input with CRLF line endings. `pytest
--update-goldens` rewrites the expected dumps.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from harness import Case, read_cases

from wikitools.pages.parse import Page, parse_fence_info, parse_page, read_page

FIXTURES = Path(__file__).parent / "fixtures" / "pages"


def _all_cases() -> list[Case]:
    return read_cases(FIXTURES)


def dump(page: Page) -> str:
    """A line per element, with 1-based positions."""
    out: list[str] = []
    if page.front_matter:
        items = sorted(page.front_matter.items())
        out.append(f"front_matter {items!r} end={page.front_matter_end}")
    for h in page.headings:
        setext = " setext" if h.setext else ""
        out.append(f"heading h{h.level} {h.line}:{h.col}{setext} {h.text!r}")
    for b in page.code_blocks:
        kind = "fence" if b.fenced else "indented"
        state = "" if b.closed else " unclosed"
        info = f" info={b.info!r}" if b.info else ""
        out.append(
            f"code {kind} {b.line}:{b.col}-{b.end_line} body@{b.content_line}{state}{info}"
            f" {b.content!r}"
        )
        if b.attrs.brace:
            a = b.attrs
            out.append(
                f"  attrs id={a.id} classes={list(a.classes)} options={list(a.options)}"
                f"{' error=' + repr(a.error) if a.error else ''}"
            )
    for s in page.spans:
        out.append(f"span {s.context} {s.line}:{s.col} {s.text!r}")
    for link in page.links:
        out.append(f"link {link.kind} {link.line}:{link.col} {link.target!r}")
    for c in page.comments:
        out.append(f"comment {c.line}:{c.col}-{c.end_line} {c.text!r}")
    for start, end in page.html_blocks:
        out.append(f"html_block {start}-{end}")
    for t in page.tables:
        cells = " | ".join(f"{c.text}@{c.line}:{c.col}" for c in t.header)
        out.append(f"table {t.line}-{t.end_line} header: {cells}")
        out.extend(
            "  row: " + " | ".join(f"{c.text}@{c.line}:{c.col}" for c in row) for row in t.rows
        )
    for p in page.problems:
        out.append(f"problem {p.format()}")
    out.append(f"title={page.title!r} description={page.description!r}")
    return "\n".join(out)


def _source(case: Case) -> str:
    text = case.source
    return text.replace("\n", "\r\n") if "[crlf]" in case.title else text


CASES = _all_cases()
_UPDATED: dict[Path, dict[int, str]] = {}


@pytest.mark.parametrize(
    "case", CASES, ids=[f"{c.file.stem}:{c.line}:{c.title[:40]}" for c in CASES]
)
def test_fixture(case: Case, update_goldens: bool) -> None:
    got = dump(parse_page(_source(case), "page.md"))
    if update_goldens:
        _rewrite(case, got)
        return
    assert got == case.expected


def _rewrite(case: Case, got: str) -> None:
    """Replace the expected block of one case in its file (cases are found by title line)."""
    lines = case.file.read_text(encoding="utf-8").split("\n")
    i = case.line - 1
    j = i + 2
    while lines[j] != ".":
        j += 1
    start = j + 1
    end = start
    while lines[end] != ".":
        end += 1
    lines[start:end] = got.split("\n")
    case.file.write_text("\n".join(lines), encoding="utf-8")
    # Later cases in this file moved; re-read positions for them.
    delta = len(got.split("\n")) - (end - start)
    for other in CASES:
        if other.file == case.file and other.line > case.line:
            other.line += delta


def test_fixture_files_exist() -> None:
    assert len(CASES) >= 40


def test_non_utf8_is_located(tmp_path: Path) -> None:
    path = tmp_path / "bad.md"
    path.write_bytes(b"# Title\n\nok line\ncaf\xe9\n")
    page = read_page(path, tmp_path)
    assert [p.format() for p in page.problems] == [
        "bad.md:4:4: PG002 error: byte 0xe9 is not valid UTF-8 (invalid continuation byte); "
        "read as U+FFFD"
    ]


def test_bom_and_cr_only(tmp_path: Path) -> None:
    page = parse_page("\ufeff# Title\r\rText `x` here.\r", "p.md")
    assert page.title == "Title"
    assert [(s.text, s.line, s.col) for s in page.spans] == [
        ("Title", 1, 3),
        ("Text ", 3, 1),
        (" here.", 3, 9),
    ]


def test_parse_fence_info_columns() -> None:
    attrs = parse_fence_info(' { .bash #id .runbook-server gpus=2 env="A=1 B=2" }', 4)
    assert attrs.lang == "bash"
    assert attrs.id == "id"
    assert attrs.classes == ("bash", "runbook-server")
    assert attrs.options == (("gpus", "2", 33), ("env", "A=1 B=2", 40))
    assert parse_fence_info("{ .bash gpus=2", 4).error
    assert parse_fence_info("python title=x", 4).lang == "python"


def test_text_after_an_escaped_character_is_located_where_it_stands() -> None:
    page = parse_page("[link](a.md#x) \\![alt](i.png) ![alt](i.png) 0\n", "p.md")
    assert [(s.text, s.col) for s in page.spans] == [
        ("link", 2), (" !", 15), ("alt", 19), (" ", 30), ("alt", 33), (" 0", 44)]
