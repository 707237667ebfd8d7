"""Results regions: finding markers through the page model, checksums, replacement."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wikitools.pages.parse import parse_page
from wikitools.runbook.blocks.regions import checksum, find_regions, replace_regions


def regions_of(text: str):
    return find_regions(parse_page(text, "p.md"))


def codes(diags):
    return [(d.line, d.code) for d in diags]


def test_regions_found_with_attributes_and_body():
    text = ("# T\n\n<!-- wiki:results runbook=a view=history client=c -->\nold\n"
            "<!-- wiki:end sum=0000000000 -->\n")
    (r,), diags = regions_of(text)
    assert diags == []
    assert (r.start, r.end, r.runbook, r.view, r.client) == (3, 5, "a", "history", "c")
    assert r.body == "old\n"
    assert r.sum == "0000000000" and r.edited


def test_markers_in_code_blocks_are_ignored():
    text = "```\n<!-- wiki:results runbook=a -->\n<!-- wiki:end -->\n```\n"
    assert regions_of(text) == ([], [])


@pytest.mark.parametrize(("text", "expected"), [
    ("<!-- wiki:results runbook=a -->\nx\n", [(1, "RGN001")]),
    ("<!-- wiki:end -->\n", [(1, "RGN001")]),
    ("<!-- wiki:results runbook=a -->\n<!-- wiki:results runbook=b -->\n<!-- wiki:end -->\n",
     [(2, "RGN001")]),
    ("<!-- wiki:results view=serving -->\n<!-- wiki:end -->\n", [(1, "RGN005")]),
    ("<!-- wiki:results runbook=a view=chart -->\n<!-- wiki:end -->\n", [(1, "RGN005")]),
    ("<!-- wiki:results runbook=a colour=red -->\n<!-- wiki:end -->\n", [(1, "RGN005")]),
    ("<!-- wiki:results runbook=a stray -->\n<!-- wiki:end -->\n", [(1, "RGN005")]),
])
def test_marker_problems(text, expected):
    _regions, diags = regions_of(text)
    assert codes(diags) == expected


def test_replace_keeps_everything_else_and_sums():
    text = ("intro\n\n<!-- wiki:results runbook=a -->\nold\n<!-- wiki:end -->\n\nmiddle\n\n"
            "<!-- wiki:results runbook=b -->\n<!-- wiki:end -->\ntail\n")
    regions, _ = regions_of(text)
    new = replace_regions(text, {3: "\nnew a\n\n", 9: "\nnew b\n\n"}, regions)
    assert new == (
        "intro\n\n<!-- wiki:results runbook=a -->\n\nnew a\n\n"
        f"<!-- wiki:end sum={checksum(chr(10) + 'new a' + chr(10) + chr(10))} -->\n\nmiddle\n\n"
        "<!-- wiki:results runbook=b -->\n\nnew b\n\n"
        f"<!-- wiki:end sum={checksum(chr(10) + 'new b' + chr(10) + chr(10))} -->\ntail\n"
    )
    again, diags = regions_of(new)
    assert diags == [] and not any(r.edited for r in again)
    # A hand edit inside a summed region is detected.
    edited, _ = regions_of(new.replace("new a", "hand-made"))
    assert edited[0].edited and not edited[1].edited


def test_indented_region_inside_admonition():
    text = ('!!! note "Results"\n    <!-- wiki:results runbook=a -->\n    <!-- wiki:end -->\n')
    regions, diags = regions_of(text)
    assert diags == [] and regions[0].indent == "    "
    new = replace_regions(text, {2: "\n| a |\n|---|\n\n"}, regions)
    lines = new.split("\n")
    assert lines[2:6] == ["", "    | a |", "    |---|", ""]
    assert lines[6].startswith("    <!-- wiki:end sum=")
    again, _ = regions_of(new)
    assert not again[0].edited


# --------------------------------------------------------------------------- properties

# Indented markers only inside an admonition: indented four spaces anywhere else, Markdown reads
# a marker after a blank line as code, so no writer can keep such a region a region.
FRAGMENTS = st.sampled_from([
    "<!-- wiki:results runbook=a -->", "<!-- wiki:results runbook=b view=history -->",
    "<!-- wiki:end -->", "<!-- wiki:end sum=0123456789 -->",
    '!!! note "R"\n    <!-- wiki:results runbook=a -->\n    <!-- wiki:end -->',
    '!!! note "x"', "```", "~~~", "text", "| a |", "|---|", "# H",
    "---", "title: t", "<!-- wiki:results runbook=a", "-->", "<!-- other -->", "", " ",
    "\ufeff", "\t", "<!-- wiki:results runbook='a b -->", "<!-- wiki:end sum= -->",
])
EOLS = st.sampled_from(["\n", "\r\n", "\r"])


@st.composite
def pages(draw) -> str:
    lines = draw(st.lists(FRAGMENTS, max_size=30))
    eol = draw(EOLS)
    return eol.join(lines) + draw(st.sampled_from(["", eol]))


def _plain(text: str) -> str:
    return text.removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n")


@settings(max_examples=300, deadline=None)
@given(pages(), st.text(alphabet="ab|-\n ", max_size=30))
def test_regions_never_raise_and_render_is_idempotent(text: str, body: str) -> None:
    page = parse_page(text, "p.md")
    regions, diags = find_regions(page)
    n_lines = len(page.lines)
    for d in diags:
        assert 1 <= d.line <= n_lines and d.col >= 1
    for r in regions:
        assert 1 <= r.start < r.end <= n_lines
    if any(d.code == "RGN001" for d in diags):
        return  # broken markers: reported (RGN001, an error), no promise about the rest
    body = body if body.endswith("\n") or not body else body + "\n"
    bodies = {r.start: body for r in regions}
    once = replace_regions(text, bodies, regions)
    # Only region bytes change: the same line endings, the byte-order mark kept.
    assert once.startswith("\ufeff") == text.startswith("\ufeff")
    again_regions, _ = find_regions(parse_page(once, "p.md"))
    assert len(again_regions) == len(regions)
    assert not any(r.edited for r in again_regions)
    twice = replace_regions(once, {r.start: body for r in again_regions}, again_regions)
    assert twice == once
    if not regions:
        assert once == text
    else:
        first = regions[0].start  # everything up to the first opening marker is untouched
        head = _plain(text).split("\n")[:first]
        assert _plain(once).split("\n")[:first] == head
