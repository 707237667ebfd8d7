"""Material containers rewritten as syntax GitHub renders (wikitools.pages.github_syntax, run
by scripts/github-syntax.py): each case as written and as rewritten, the rewrite reads right on
GitHub (no PG009) and a second rewrite changes nothing."""

from __future__ import annotations

import pytest

from wikitools.checks.github_view import github_findings
from wikitools.pages.github_syntax import convert

CASES = {
    "titled admonition": (
        '# T\n\n!!! warning "Stale"\n    Body text.\n\n    More.\n',
        "# T\n\n> [!WARNING]\n> **Stale**\n>\n> Body text.\n>\n> More.\n"),
    "untitled admonition": (
        "# T\n\n!!! tip\n    Body.\n", "# T\n\n> [!TIP]\n> Body.\n"),
    "danger is a caution": (
        '# T\n\n!!! danger "Never"\n    x\n', "# T\n\n> [!CAUTION]\n> **Never**\n>\n> x\n"),
    "collapsed box": (
        '# T\n\n??? abstract "Status: a & b"\n    The [source](s.md).\n',
        '# T\n\n<details class="abstract" markdown>\n<summary markdown="span">Status: a &amp; b'
        '</summary>\n\n'
        "The [source](s.md).\n\n</details>\n"),
    "box shown open": (
        '# T\n\n???+ note "Open"\n    x\n',
        '# T\n\n<details class="note" open markdown>\n<summary markdown="span">Open</summary>\n\n'
        "x\n\n"
        "</details>\n"),
    "tabs under a section": (
        '# T\n\n## Run\n\n=== "vLLM"\n\n    ```bash\n    vllm serve m\n    ```\n\n'
        '=== "SGLang"\n\n    text\nafter\n',
        "# T\n\n## Run\n\n### vLLM\n\n```bash\nvllm serve m\n```\n\n### SGLang\n\ntext\n\n"
        "after\n"),
    "a box in a list item": (
        "# T\n\n- item\n\n    !!! note\n        inner\n",
        "# T\n\n- item\n\n    > [!NOTE]\n    > inner\n"),
    "a fence shows the syntax": (
        '# T\n\n```markdown\n!!! note "x"\n    body\n```\n',
        '# T\n\n```markdown\n!!! note "x"\n    body\n```\n'),
    "a region moved out of a tab loses its sum": (
        '# T\n\n=== "H200"\n\n    <!-- wiki:results runbook=r view=serving -->\n    body\n'
        "    <!-- wiki:end sum=0123456789 -->\n",
        "# T\n\n## H200\n\n<!-- wiki:results runbook=r view=serving -->\nbody\n"
        "<!-- wiki:end -->\n"),
}


@pytest.mark.parametrize("name", CASES)
def test_rewrite(name: str) -> None:
    before, after = CASES[name]
    assert convert(before) == after
    assert convert(after) == after
    assert [d.format() for d in github_findings(after, "p.md")] == []


@pytest.mark.parametrize(("dialect", "note", "fold"), [
    ("github", "> [!WARNING]\n> **Stale**\n>\n> a\n>\n> b",
     '<details class="note" markdown>\n<summary markdown="span">All metrics</summary>\n\n| x |\n\n'
     "</details>"),
    ("material", '!!! warning "Stale"\n    a\n\n    b', '??? note "All metrics"\n\n    | x |'),
    ("docusaurus", ":::warning[Stale]\n\na\n\nb\n\n:::",
     "<details>\n<summary>All metrics</summary>\n\n| x |\n\n</details>"),
    ("myst", "````{admonition} Stale\n:class: warning\na\n\nb\n````",
     "````{admonition} All metrics\n:class: note dropdown\n| x |\n````"),
])
def test_notes_the_tools_write_in_each_dialect(dialect: str, note: str, fold: str) -> None:
    from wikitools.runbook.rendering.syntax import boxed, folded
    from wikitools.runbook.rendering.syntax import note as write_note

    assert write_note(dialect, "a\n\nb\n", "warning", "Stale") == note
    assert folded(dialect, "| x |\n", "All metrics") == fold
    box = boxed(dialect, "| x |\n", "wiki-measured")
    assert box == ('<div class="wiki-measured" markdown>\n\n| x |\n\n</div>'
                   if dialect in ("github", "material") else "| x |")
