"""What GitHub shows: every page of this wiki, and a community-style tree after
`wiki runbook scan --write`, rendered with cmark-gfm (GitHub's own parser, `cmarkgfm`) and
sanitized with GitHub's allowlist (`nh3`), with no Material syntax shown as text, no prose as a
code block, no dropped SVG and no broken table (PG009, wikitools.github_view); and, for a tree
built by another generator, notes written in the syntax that generator renders."""

from __future__ import annotations

import posixpath
import re
import shutil
from pathlib import Path

import pytest
from harness import make_tree

from wikitools.checks.github_view import github_findings, github_html
from wikitools.cli import main
from wikitools.pages.dialect import detect_dialect

REPO = Path(__file__).resolve().parents[1]
PAGES = sorted((REPO / "wiki").rglob("*.md"))
COMMUNITY = REPO / "tests" / "fixtures" / "community"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(REPO).as_posix())
def test_every_page_of_this_wiki_reads_right_on_github(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    rel = page.relative_to(REPO).as_posix()
    assert [d.format() for d in github_findings(text, rel)] == []
    html = github_html(text)
    assert "<svg" not in html and not re.search(r"^(?:<p>)?(?:!!!|\?\?\?|=== &quot;)", html,
                                                re.MULTILINE)
    for src in re.findall(r'<img src="([^"]+)"', html):  # every chart is a file in the tree
        if "://" not in src:
            assert (page.parent / src).is_file(), src


def test_this_wiki_writes_github_syntax() -> None:
    assert detect_dialect(REPO) == "github"
    assert len(PAGES) > 80


@pytest.mark.parametrize(("text", "line", "words"), [
    ('# T\n\n!!! warning "Stale"\n    Body.\n', 3, "Material syntax shows as text"),
    ('# T\n\n??? abstract "Status"\n\n    Body.\n', 3, "Material syntax shows as text"),
    ('# T\n\n=== "vLLM"\n\n    ```bash\n    vllm serve m\n    ```\n', 3,
     "Material syntax shows as text"),
    ('# T\n\n=== "vLLM"\n\n    ```bash\n    vllm serve m\n    ```\n', 5, "code block"),
    ('# T\n\n<div markdown="0"><svg viewBox="0 0 1 1"></svg></div>\n', 3, "drops inline <svg>"),
    ("# T\n\n| a | b |\n\n|---|---|\n| 1 | 2 |\n", 5, "table does not render"),
    ('# T\n\n<div class="x">\n| a | b |\n|---|---|\n| 1 | 2 |\n</div>\n', 5,
     "table does not render"),
])
def test_the_check_finds_what_github_shows_wrong(text: str, line: int, words: str) -> None:
    found = github_findings(text, "p.md")
    assert any(d.line == line and words in d.message and d.code == "PG009" for d in found), [
        d.format() for d in found]


@pytest.mark.parametrize("text", [
    "---\ntitle: T\n---\n# T\n\n> [!WARNING]\n> **Stale**\n>\n> Body `!!! x`.\n",
    '# T\n\n<details class="abstract" markdown>\n<summary>S</summary>\n\n| a |\n|---|\n'
    "| 1 |\n\n</details>\n",
    "# T\n\n```text\n!!! note\n    indented in a fence\n```\n\nThe `<svg>` element.\n",
    "# T\n\n- item\n\n    ```bash\n    echo\n    ```\n\n> | a | b |\n> |---|---|\n> | 1 | 2 |\n",
])
def test_what_github_shows_right_is_not_reported(text: str) -> None:
    assert [d.format() for d in github_findings(text, "p.md")] == []


def test_lint_warns_for_a_github_read_wiki(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "wiki.yml").write_text("docs_dir: docs\n")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "index.md").write_text('# T\n\n!!! note "N"\n    Body.\n')
    assert main(["lint", "--root", str(tmp_path)]) == 0  # a warning, not an error
    out = capsys.readouterr().out
    assert "docs/index.md:3:1: PG009 warning: Material syntax shows as text" in out
    # A site written in Material's own syntax (MkDocs with admonition) reads it as meant.
    (tmp_path / "mkdocs.yml").write_text("site_name: x\ndocs_dir: docs\n"
                                         "markdown_extensions:\n  - admonition\n")
    assert main(["lint", "--root", str(tmp_path)]) == 0
    assert "PG009" not in capsys.readouterr().out


def _adopted(tmp_path: Path, marker: dict[str, str]) -> Path:
    root = tmp_path / "community"
    shutil.copytree(COMMUNITY, root)
    make_tree(root, {"GLOSSARY.md": "# Glossary\n", **marker})
    assert main(["runbook", "scan", "--write", "--root", str(root)]) == 0
    return root


def _regions(root: Path) -> list[str]:
    bodies = []
    for page in sorted(root.rglob("*.md")):
        bodies += re.findall(r"<!-- wiki:results[^\n]*-->\n(.*?)<!-- wiki:end",
                             page.read_text(), re.DOTALL)
    return bodies


def test_a_community_tree_after_scan_write_reads_right_on_github(tmp_path: Path) -> None:
    root = _adopted(tmp_path, {})
    assert detect_dialect(root) == "github"
    bodies = _regions(root)
    assert len(bodies) >= 3 and all("> [!NOTE]\n> **Not yet measured**" in b for b in bodies)
    found = [d.format() for p in sorted(root.rglob("*.md"))
             for d in github_findings(p.read_text(), posixpath.relpath(p, root))]
    assert found == []


@pytest.mark.parametrize(("marker", "dialect", "note"), [
    ({"docusaurus.config.js": "module.exports = {};\n"}, "docusaurus",
     ":::info[Not yet measured]\n\nNo run of runbook"),
    ({"docs/conf.py": "extensions = ['myst_parser']\n"}, "myst",
     "````{admonition} Not yet measured\n:class: info\nNo run of runbook"),
    ({"mkdocs.yml": "site_name: x\ndocs_dir: .\nmarkdown_extensions:\n  - admonition\n"},
     "material", '!!! info "Not yet measured"\n    No run of runbook'),
    ({"mkdocs.yml": "site_name: x\nmarkdown_extensions:\n  - admonition\n  - github-callouts\n"},
     "github", "> [!NOTE]\n> **Not yet measured**\n>\n> No run of runbook"),
])
def test_scan_write_speaks_the_generators_syntax(tmp_path: Path, marker: dict[str, str],
                                                 dialect: str, note: str) -> None:
    root = _adopted(tmp_path, marker)
    assert detect_dialect(root) == dialect
    bodies = _regions(root)
    assert bodies and all(note in b for b in bodies), bodies[0]
    others = {"> [!NOTE]", "!!! ", ":::", "````{admonition}"} - {note.split("[", 1)[0]
                                                                   if dialect == "github"
                                                                   else note[:4]}
    for body in bodies:
        assert not [o for o in others if o in body and not note.startswith(o)], body
