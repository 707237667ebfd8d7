"""Facts on the wiki's own pages that were once wrong: repository addresses that no source
gives, glossary rows that drifted from the source they name, and hub version maps that call a
page something its own front matter does not."""

from __future__ import annotations

import posixpath
import re
from functools import cache
from pathlib import Path

import pytest

from wikitools.core.config import load_config
from wikitools.pages.glossary import load_glossary
from wikitools.pages.load import load_pages
from wikitools.pages.parse import Page

ROOT = Path(__file__).resolve().parent.parent
WIKI = ROOT / "wiki"
# owner/name after github.com/; a trailing `.git` or sentence punctuation is not part of it.
_REPO = re.compile(r"github\.com/([A-Za-z0-9_.-]+)/([A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*)")
_PLACEHOLDER = re.compile(r"^[A-Z_]+$")  # OWNER/REPO in a configuration example


@cache
def pages() -> dict[str, Page]:
    config = load_config(ROOT)
    return {page.path: page for page in load_pages(config)}


def repositories(text: str) -> set[str]:
    out = set()
    for owner, name in _REPO.findall(text):
        name = name.removesuffix(".git")
        if _PLACEHOLDER.match(owner) and _PLACEHOLDER.match(name):
            continue
        out.add(f"{owner}/{name}".casefold())
    return out


def test_every_repository_address_is_on_the_sources_page() -> None:
    listed = repositories((WIKI / "sources.md").read_text(encoding="utf-8"))
    assert "voipmonitor/rtx6kpro" in listed
    unlisted = {
        (path, repo)
        for path, page in pages().items()
        for repo in repositories(page.text)
        if repo not in listed
    }
    assert not unlisted, f"repository addresses that wiki/sources.md does not list: {unlisted}"


def test_the_address_check_sees_an_invented_one() -> None:
    text = "See [it](https://github.com/local-inference-lab/rtx6kpro) and github.com/OWNER/REPO."
    assert repositories(text) == {"local-inference-lab/rtx6kpro"}


# Rows whose definition comes from the community wiki's GLOSSARY.md (last changed 2026-07-19):
# the wiki's expansion must say what the community's says; `notes` lists facts from the named
# source that the row's notes must keep.
COMMUNITY_GLOSSARY = "community wiki GLOSSARY.md, last changed 2026-07-19"
SOURCED: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "DSpark": ("DeepSeek DSpark speculative decoding", COMMUNITY_GLOSSARY,
               ("DeepSeek-V4-Flash", "#46995")),
    "DCP": ("Decode Context Parallelism", COMMUNITY_GLOSSARY, ()),
    "MTP": ("Multi-Token Prediction", COMMUNITY_GLOSSARY, ()),
    "MLA": ("Multi-head Latent Attention", COMMUNITY_GLOSSARY, ()),
    "MoE": ("Mixture of Experts", COMMUNITY_GLOSSARY, ()),
    "KLD": ("Kullback-Leibler Divergence", COMMUNITY_GLOSSARY, ()),
    "NCCL": ("NVIDIA Collective Communications Library", COMMUNITY_GLOSSARY, ()),
    "P2P": ("Peer-to-Peer", COMMUNITY_GLOSSARY, ()),
    "PCIe": ("Peripheral Component Interconnect Express", COMMUNITY_GLOSSARY, ()),
    "CUDA": ("Compute Unified Device Architecture", COMMUNITY_GLOSSARY, ()),
    "TMA": ("Tensor Memory Accelerator", COMMUNITY_GLOSSARY, ()),
    "TTFT": ("Time To First Token", COMMUNITY_GLOSSARY, ()),
    "TPOT": ("Time Per Output Token", COMMUNITY_GLOSSARY, ()),
    "TP": ("Tensor Parallelism", COMMUNITY_GLOSSARY, ()),
    "HF": ("Hugging Face", COMMUNITY_GLOSSARY, ()),
}


def _norm(text: str) -> str:
    return " ".join(text.replace("-", " ").casefold().split())


@pytest.mark.parametrize("term", sorted(SOURCED))
def test_glossary_rows_say_what_their_source_says(term: str) -> None:
    expansion, source, facts = SOURCED[term]
    entry = load_glossary(WIKI / "glossary.md", ROOT).terms.get(term)
    assert entry is not None, f"{term}: no glossary row ({source} defines it)"
    assert _norm(entry.expansion) == _norm(expansion), (
        f"{term}: glossary says {entry.expansion!r}, {source} says {expansion!r}")
    for fact in facts:
        assert fact in entry.notes, f"{term}: the notes lost {fact!r} ({source})"


def test_no_name_is_expanded_with_its_own_name() -> None:
    """A glossary row whose expansion holds the term names a product; writing that expansion
    beside it on a page reads in circles ("DSpark (DeepSeek DSpark speculative decoding)")."""
    names = [e for e in load_glossary(WIKI / "glossary.md", ROOT).entries if e.name]
    assert any(e.term == "DSpark" for e in names)
    circular = set()
    for path, page in pages().items():
        prose = " ".join(" ".join(span.text for span in page.spans).split())
        for entry in names:
            expansion = r"\W+".join(map(re.escape, entry.expansion.split()))
            term = re.escape(entry.term)
            if re.search(rf"\b{term}\s*\(\s*{expansion}\s*\)|{expansion}\s*\(\s*{term}\s*\)",
                         prose, re.IGNORECASE):
                circular.add((path, entry.term))
    assert not circular, f"names written out with themselves: {sorted(circular)}"


def test_the_home_page_links_every_engine_page_and_model_hub() -> None:
    """Its "What is where" row for engines once named two of the eight engine pages, and its
    "Start here" table lacked the large models' hubs."""
    home = (WIKI / "index.md").read_text(encoding="utf-8")
    wanted = [f"engines/{p.name}" for p in sorted((WIKI / "engines").glob("*.md"))]
    wanted += [f"models/{p.parent.name}/index.md"
               for p in sorted((WIKI / "models").glob("*/index.md"))
               if pages()[p.relative_to(ROOT).as_posix()].front_matter.get("hub") is True]
    assert [w for w in wanted if f"]({w})" not in home] == []


def test_version_maps_give_each_page_its_own_status() -> None:
    """A hub's table with a Status column must say, for each page it links, the status that
    page's front matter gives (the gpt-oss hub once called an unverified page current)."""
    all_pages = pages()
    checked = 0
    for path, page in all_pages.items():
        if page.front_matter.get("hub") is not True:
            continue
        for table in page.tables:
            heads = [c.text.strip().casefold() for c in table.header]
            if "status" not in heads:
                continue
            col = heads.index("status")
            for row in table.rows:
                said = row[col].text.strip().strip("`")
                m = re.search(r"\]\(([^)#]+\.md)[^)]*\)", row[0].text)
                if m:
                    target = posixpath.normpath(posixpath.join(posixpath.dirname(path),
                                                               m.group(1)))
                elif row[0].text.strip().casefold() == "this page":
                    target = path
                else:
                    continue
                assert target in all_pages, f"{path}: version map links {target}"
                actual = all_pages[target].front_matter.get("status")
                assert said == actual, (
                    f"{path}: version map says {said!r} for {target}, whose status is {actual!r}")
                checked += 1
    assert checked >= 5, "no version map rows were checked"


def _sections(page: Page, prefix: str) -> list[tuple[int, str]]:
    """(heading line, section text) of each heading starting with `prefix`, up to the next
    heading of the same or a higher level."""
    lines = page.text.split("\n")
    out = []
    heads = sorted(page.headings, key=lambda h: h.line)
    for i, head in enumerate(heads):
        if not head.text.startswith(prefix):
            continue
        end = next((h.line for h in heads[i + 1:] if h.level <= head.level), len(lines) + 1)
        out.append((head.line, "\n".join(lines[head.line:end - 1])))
    return out


def test_reported_numbers_name_their_source_and_date_and_stay_apart() -> None:
    """The contributing guide's format for numbers this wiki did not measure: each "Reported
    by" section names a source and a date, and holds no results region of a run record (data
    regions, which show the source's own files as reported, belong there)."""
    found = 0
    for path, page in pages().items():
        for line, text in _sections(page, "Reported by"):
            found += 1
            where = f"{path}:{line}"
            assert re.search(r"\b20\d\d-\d\d-\d\d\b", text), f"{where}: no date (YYYY-MM-DD)"
            assert re.search(r"community|\]\(|`[\w./-]+\.md`", text), f"{where}: no source"
            measured = re.search(r"<!-- wiki:results (?![^>]*\bdata=)", text)
            assert not measured, f"{where}: a results region in reported numbers"
    assert found >= 1, "no reported-numbers section to check"
