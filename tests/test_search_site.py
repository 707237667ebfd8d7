"""Search for flags and code names on a small site built with the wiki's own configuration, in
Chromium, through the check that `make test` runs on the whole wiki (scripts/check-browser.py):
a flag whose parts include a stop word is found, and the page that holds a flag is listed
before a page that only uses its words, even one with those words in its title."""

from __future__ import annotations

import shutil
from pathlib import Path
from types import ModuleType

import pytest
from fakes.site_tree import site_tree
from harness import load_script

from wikitools.core.config import load_config
from wikitools.pages.load import load_pages
from wikitools.site.searchterms import search_terms

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

HOLDER = """---
title: Launch flags
---
# Launch flags

Start the server with `--attention-backend TRITON_ATTN` and `--disable-custom-all-reduce`.
"""
WORDS = """---
title: Attention backend choices
---
# Attention backend choices

Which attention backend serves a model depends on the attention layout. One backend per
attention kind: the backend for sparse attention, the backend for dense attention, and a
fallback backend when no attention backend fits. Reduce nothing; all of it is custom.
"""


def _check_browser() -> ModuleType:
    return load_script(ROOT / "scripts" / "check-browser.py", "check_browser")


def test_flags_find_the_pages_that_hold_them_first(tmp_path: Path) -> None:
    playwright = pytest.importorskip("playwright.sync_api")
    if CHROMIUM is None:
        pytest.skip("Chromium is not installed (scripts/setup-browser.sh)")
    check = _check_browser()
    tree = site_tree(tmp_path)
    (tree / "wiki" / "holder.md").write_text(HOLDER)
    (tree / "wiki" / "words.md").write_text(WORDS)
    config = load_config(tree)
    terms = search_terms(load_pages(config), config.docs_dir)
    assert terms.holders == {"--attention-backend": ("holder/",),
                             "--disable-custom-all-reduce": ("holder/",),
                             "TRITON_ATTN": ("holder/",)}
    site = tmp_path / "site"
    check.build(site, tree)
    server, base = check.serve(site)
    try:
        with playwright.sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM,
                                         args=check.CHROMIUM_FLAGS[1:], headless=True)
            try:
                found = check.search_code_words(browser, base, {
                    **terms.holders,
                    "attention backend": ("holder/", "words/"),  # plain words: engine order
                })
            finally:
                browser.close()
    finally:
        server.shutdown()
        server.server_close()
    # The engine alone ranks the page with the words in its title first ...
    assert found["attention backend"]["paths"] == ["words/", "holder/"]
    # ... the flag lists the page that holds it first, the other still below it.
    assert found["--attention-backend"]["paths"] == ["holder/", "words/"]
    # "all" is a stop word: it must be in the index for the flag's parts to match.
    assert found["--disable-custom-all-reduce"]["paths"][0] == "holder/"
    assert found["TRITON_ATTN"] == {"total": 1, "paths": ["holder/"]}
    problems, first, later = check.code_word_failures(terms, found)
    assert (problems, first, later) == ([], 3, 0)


def test_every_query_expects_a_page_of_the_wiki() -> None:
    # A query whose page was renamed or removed would fail in the browser only, after a build.
    check = _check_browser()
    pages = set(check.site_pages())
    expected = {**check.QUERIES, **check.LANDING}
    assert sorted(q for q, page in expected.items() if page not in pages) == []
    assert check.LANDS == 1  # the landing queries must put their page first
