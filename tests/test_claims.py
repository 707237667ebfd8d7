"""The unverified tag and the Sources page agree: every page that tags a claim as unverified
is listed under "What still lacks a source", and every page listed there still has a tag."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WIKI = ROOT / "wiki"
TAG = "{ .wiki-unverified }"
# Pages that show the tag to explain it, not to mark a claim.
EXPLAINS = {"contributing.md", "sources.md", "index.md"}


def tagged_pages() -> set[str]:
    out = set()
    for path in WIKI.rglob("*.md"):
        rel = path.relative_to(WIKI).as_posix()
        if rel not in EXPLAINS and TAG in path.read_text(encoding="utf-8"):
            out.add(rel)
    return out


def listed_pages() -> set[str]:
    text = (WIKI / "sources.md").read_text(encoding="utf-8")
    section = text.split("{ #still-unverified }", 1)[1]
    return set(re.findall(r"^\| \[[^\]]+\]\(([^)#]+)\)", section, re.MULTILINE))


def test_every_tagged_page_is_listed_and_every_listed_page_is_tagged() -> None:
    tagged, listed = tagged_pages(), listed_pages()
    assert tagged, "no page carries the unverified tag: the check would pass vacuously"
    assert tagged == listed


def test_tag_links_to_the_rule() -> None:
    for path in WIKI.rglob("*.md"):
        for m in re.finditer(r"\[unverified\]\(([^)]*)\)\{ \.wiki-unverified \}", path.read_text()):
            target = m.group(1)
            rule = r"(?:[./]*contributing\.md)?#marking-an-unverified-claim"
            assert re.fullmatch(rule, target), path
