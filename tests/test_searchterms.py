"""The code words the browser search check asks for (wikitools.site.searchterms): what counts
as a flag or a name, where on a page it is read from, which pages hold it, and how a page maps to
its address on the site. The search itself is checked in Chromium by scripts/check-browser.py."""

from __future__ import annotations

import re
from pathlib import Path

from wikitools.core.config import load_config
from wikitools.pages.load import load_pages
from wikitools.pages.parse import parse_page, read_page
from wikitools.site.searchterms import code_words, holds, page_text, search_terms, site_path

ROOT = Path(__file__).resolve().parent.parent


def _words(rel: str) -> set[str]:
    return code_words(page_text(read_page(ROOT / "wiki" / rel, ROOT)))


def test_a_runbook_page_owns_its_flags_and_environment() -> None:
    words = _words("models/minimax-m2.5/fp8-tp4.md")
    assert {"SAFETENSORS_FAST_GPU", "VLLM_SLEEP_WHEN_IDLE", "--tensor-parallel-size"} <= words
    assert all(w.startswith("--") or re.fullmatch(r"[A-Z][A-Z0-9_]*", w) for w in words)


def test_flags_with_stop_word_parts_are_words_of_their_page() -> None:
    # Each part of a flag must be searchable, "on" and "only" included (mkdocs.yml pipeline).
    assert "--sleep-on-idle" in _words("models/qwen3.5/397b-a17b.md")
    assert "NCCL_P2P_LEVEL" in _words("hardware/multi-gpu-nccl.md")


def test_only_what_a_reader_sees_is_read() -> None:
    page = parse_page(
        "---\ntitle: T\ndescription: --in-front-matter HIDDEN_FM\n---\n\n"
        "# Heading with `--in-heading`\n\n"
        "Prose with `--in-code` and NAME_IN_PROSE, a [link](https://x.test/--in-address) and\n"
        "<!-- --in-comment COMMENT_NAME --> a dash -- between words.\n\n"
        "!!! note \"Set `BOX_TITLE_NAME`\"\n    Body with --in-box.\n\n"
        "| Flag | Use |\n|---|---|\n| `--in-table` | x |\n\n"
        "```bash\nexport IN_BLOCK=1\nvllm serve m --in-block\n```\n", "p.md")
    assert code_words(page_text(page)) == {
        "--in-heading", "--in-code", "NAME_IN_PROSE", "BOX_TITLE_NAME", "--in-box",
        "--in-table", "IN_BLOCK", "--in-block"}


def test_what_is_not_a_code_word() -> None:
    text = "a -- b, ---, -x, --Capital, NCCL alone, Mixed_Case, $HOME_DIR, x--y, A_b"
    assert code_words(text) == set()
    assert code_words("--max-model-len=8192 --gen_kwargs x NCCL_P2P_LEVEL=SYS") == {
        "--max-model-len", "--gen_kwargs", "NCCL_P2P_LEVEL"}


def test_holds_is_whole_and_ignores_letter_case() -> None:
    assert holds("set gpu_memory_utilization=0.9", "GPU_MEMORY_UTILIZATION")
    assert holds("`--port 8000`", "--port")
    assert not holds("--port-range 1-2", "--port")
    assert not holds("NCCL_P2P_LEVELS", "NCCL_P2P_LEVEL")
    assert not holds("MY_NCCL_P2P_LEVEL", "NCCL_P2P_LEVEL")
    assert not holds("attention and backend", "--attention-backend")


def test_the_search_script_uses_the_same_boundary() -> None:
    # search-flags.js lists first the pages that hold a code word; the check expects the pages
    # `holds` finds, so both must read "not part of a longer name" the same way.
    script = (ROOT / "wiki" / "assets" / "javascripts" / "search-flags.js").read_text()
    assert '"(?:^|[^A-Za-z0-9_-])" + escaped + "(?![A-Za-z0-9_-])", "i"' in script


def test_site_paths() -> None:
    assert site_path("index.md") == ""
    assert site_path("hardware/index.md") == "hardware/"
    assert site_path("glossary.md") == "glossary/"
    assert site_path("models/qwen3.5/122b-tp2.md") == "models/qwen3.5/122b-tp2/"


def test_only_pages_under_the_docs_folder() -> None:
    pages = [parse_page("Run `--outside`.\n", "README.md"),
             parse_page("Run `--inside` and `--outside`.\n", "wiki/topics/x.md")]
    terms = search_terms(pages, "wiki")
    assert terms.owners == {"--inside": ("topics/x/",), "--outside": ("topics/x/",)}
    assert terms.pages == ("topics/x/",) and terms.pairs == 2


def test_every_page_of_the_wiki() -> None:
    config = load_config(ROOT)
    terms = search_terms(load_pages(config), config.docs_dir)
    site = {site_path(p.relative_to(ROOT / "wiki").as_posix())
            for p in (ROOT / "wiki").rglob("*.md")}
    assert set(terms.pages) <= site and len(terms.pages) >= 50
    for word, owners in terms.owners.items():
        assert set(owners) <= set(terms.holders[word]), word
    # Lower-case `gpu_memory_utilization=` on other pages holds the upper-case name too.
    assert len(terms.holders["GPU_MEMORY_UTILIZATION"]) > len(
        terms.owners["GPU_MEMORY_UTILIZATION"])
    assert terms.pairs == sum(len(h) for h in terms.holders.values())
