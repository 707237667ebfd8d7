"""The site extension `wikitools.site.extension` through Python-Markdown itself, as MkDocs and
Zensical call it: GitHub alerts drawn as admonitions, the page found from its body, the status
chip after the title, glossary tooltips."""

from __future__ import annotations

import re
from pathlib import Path

import markdown
import pytest
from harness import make_tree

EXTENSIONS = ["abbr", "admonition", "attr_list", "md_in_html", "tables",
              "pymdownx.superfences", "wikitools.site.extension"]


def render(text: str, **options: object) -> str:
    return markdown.markdown(text, extensions=EXTENSIONS,
                             extension_configs={"wikitools.site.extension": options})


def alerts_only(text: str) -> str:
    return render(text, glossary=False, status=False, results=False)


def test_an_alert_is_an_admonition_with_its_bold_line_as_title() -> None:
    html = alerts_only("> [!WARNING]\n> **Stale `x`**\n>\n> Body text.\n")
    assert html.startswith('<div class="admonition warning">')
    assert '<p class="admonition-title">Stale <code>x</code></p>' in html
    assert "<p>Body text.</p>" in html and "[!WARNING]" not in html and "<blockquote" not in html


@pytest.mark.parametrize(("marker", "kind", "title"), [
    ("NOTE", "note", "Note"), ("TIP", "tip", "Tip"), ("IMPORTANT", "info", "Important"),
    ("WARNING", "warning", "Warning"), ("CAUTION", "danger", "Caution"), ("note", "note", "Note"),
])
def test_each_github_alert_type(marker: str, kind: str, title: str) -> None:
    html = alerts_only(f"> [!{marker}]\n> Plain text, not a title.\n")
    assert html.startswith(f'<div class="admonition {kind}">'), html
    assert f'<p class="admonition-title">{title}</p>' in html
    assert "<p>Plain text, not a title.</p>" in html


def test_two_alerts_with_a_blank_line_between_stay_two_boxes() -> None:
    # Python-Markdown joins the two quotes into one; GitHub shows two alerts.
    html = alerts_only("> [!NOTE]\n> one\n\n> [!WARNING]\n> two\n")
    assert html.count('class="admonition ') == 2
    assert html.index("admonition note") < html.index("one") < html.index("admonition warning")


def test_a_nested_alert_and_a_fence_inside_an_alert() -> None:
    html = alerts_only("> [!TIP]\n> outer\n>\n> > [!CAUTION]\n> > inner\n>\n"
                       "> ```bash\n> echo hi\n> ```\n")
    assert html.count('class="admonition ') == 2 and "admonition danger" in html
    assert "<code>" in html and "echo" in html and "```" not in html


@pytest.mark.parametrize("text", ["> Just a quote.\n", "> [!FOO]\n> unknown type\n",
                                  "> [!NOTE] text on the marker line\n"])
def test_other_quotes_stay_quotes(text: str) -> None:
    assert alerts_only(text).startswith("<blockquote>")


def test_alerts_can_be_turned_off() -> None:
    assert render("> [!NOTE]\n> x\n", alerts=False, glossary=False, status=False,
                  results=False).startswith("<blockquote>")


@pytest.fixture
def wiki(tmp_path: Path) -> Path:
    return make_tree(tmp_path, {
        "wiki.yml": "docs_dir: docs\nglossary: docs/glossary.md\n",
        "docs/glossary.md":
            "# Glossary\n\n| Acronym | Expansion |\n|---|---|\n| KV | key-value |\n",
        "docs/page.md":
            "---\ntitle: A page\nstatus: experimental\n---\n\n# A page\n\nOpening text on the "
            "KV cache.\n\n> [!NOTE]\n> **About KV**\n>\n> body\n",
    })


def test_the_page_is_found_from_its_body_and_gets_chip_and_tooltips(wiki: Path) -> None:
    body = (wiki / "docs" / "page.md").read_text().split("---\n", 2)[2]
    html = render(body, root=str(wiki))
    # The chip right after the title: the search index files what comes before the first
    # heading as the page itself, so the opening text must stay first under the title.
    title_end = html.index("</h1>") + len("</h1>")
    assert html[title_end:].lstrip().startswith('<p class="wiki-status wiki-status--experimental"')
    assert html.index("wiki-status") < html.index("Opening text")
    assert '<abbr title="key-value">KV</abbr>' in html
    assert '<p class="admonition-title">About <abbr title="key-value">KV</abbr></p>' in html


def test_the_search_preview_opens_with_the_prose_not_the_chip(wiki: Path) -> None:
    # Material's search plugin files each page's text through this parser; a chip in the index
    # ran into the preview ("Reviewed 2026-12-01Reviewed - the prose ...").
    parser_module = pytest.importorskip("material.plugins.search.plugin")
    body = (wiki / "docs" / "page.md").read_text().split("---\n", 2)[2]
    parser = parser_module.Parser()
    parser.feed(render(body, root=str(wiki)))
    parser.close()
    text = "".join(parser.data[0].text)
    assert re.findall(r"<p>(.*?)</p>", text)[0].startswith("Opening text on the"), text
    assert "Works, with rough edges" not in text


def test_a_text_of_no_page_gets_tooltips_but_no_chip(wiki: Path) -> None:
    html = render("# Elsewhere\n\nThe KV cache.\n", root=str(wiki))
    assert "<abbr" in html and "wiki-status" not in html


def test_a_page_changed_after_the_first_read_is_found_again(wiki: Path) -> None:
    page = wiki / "docs" / "page.md"
    render(page.read_text().split("---\n", 2)[2], root=str(wiki))
    page.write_text("---\nstatus: historical\n---\n# New text\n")
    assert "wiki-status--historical" in render("# New text\n", root=str(wiki))
