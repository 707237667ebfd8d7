"""The second-expansion rule (ACR003): a term written out twice on one page is reported at the
second expansion; one expansion, plain later uses, code and generated regions are not."""

from __future__ import annotations

from pathlib import Path

import pytest

from wikitools.checks.acronyms import check_pages
from wikitools.checks.expansions import check_page
from wikitools.cli import main
from wikitools.core.diagnostics import Severity
from wikitools.pages.glossary import Entry, Glossary
from wikitools.pages.parse import parse_page

GLOSSARY = Glossary(
    "wiki/glossary.md",
    [
        Entry("MoE", "Mixture of Experts", "", 1, 3),
        Entry("LLM", "large language model", "", 2, 3),
        Entry("vLLM", "vLLM inference engine", "", 3, 3),
    ],
)


def findings(text: str) -> list[tuple[int, int, str]]:
    diags = check_pages([parse_page(text, "wiki/p.md")], GLOSSARY, rule=check_page)
    return [(d.line, d.col, d.message) for d in diags]


def test_second_expansion_is_reported_where_it_is() -> None:
    text = (
        "# T\n\nA Mixture of Experts (MoE) model.\n\n"
        "Later, the MoE (Mixture of Experts) again.\n"
    )
    assert findings(text) == [
        (5, 12, '"MoE" is expanded again (first expanded on line 3): write "MoE" alone')
    ]


def test_one_expansion_then_plain_uses_is_clean() -> None:
    text = "# T\n\nA Mixture of Experts (MoE) model.\n\nThe MoE routes tokens. MoE again.\n"
    assert findings(text) == []


def test_status_box_then_body_is_reported() -> None:
    text = (
        "# T\n\n!!! abstract \"Status\"\n    Served as a large language model (LLM) here.\n\n"
        "The large language model (LLM) answers.\n"
    )
    assert [f[0] for f in findings(text)] == [6]


def test_every_repeat_is_reported_and_terms_are_separate() -> None:
    text = (
        "# T\n\nMixture of Experts (MoE), large language model (LLM).\n\n"
        "MoE (Mixture of Experts) and LLM (large language model).\n\n"
        "Mixture of Experts (MoE).\n"
    )
    assert [(line, msg.split()[0]) for line, _, msg in findings(text)] == [
        (5, '"MoE"'), (5, '"LLM"'), (7, '"MoE"')
    ]


def test_code_and_generated_regions_do_not_count() -> None:
    text = (
        "# T\n\nMixture of Experts (MoE).\n\n`Mixture of Experts (MoE)` in code.\n\n"
        "```text\nMixture of Experts (MoE)\n```\n\n"
        "<!-- wiki:results runbook=x -->\nMixture of Experts (MoE)\n<!-- wiki:end -->\n"
    )
    assert findings(text) == []


def test_names_are_never_reported() -> None:
    assert findings("# T\n\nvLLM (vLLM inference engine) and vLLM (vLLM inference engine).\n") == []


def test_it_is_a_warning() -> None:
    diags = check_pages(
        [parse_page("MoE (Mixture of Experts). MoE (Mixture of Experts).\n", "wiki/p.md")],
        GLOSSARY, rule=check_page,
    )
    assert [d.code for d in diags] == ["ACR003"]
    assert diags[0].severity is Severity.WARNING


# The finding is a warning: `acronyms` passes, `check` fails only on the stale INDEX.md.
@pytest.mark.parametrize(("command", "code", "errors"),
                         [("acronyms", 0, []), ("check", 1, ["IDX100"])])
def test_wired_into_cli(command: str, code: int, errors: list[str], wiki_tree,
                        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    wiki_tree({"wiki/glossary.md": "# Glossary\n\n| Term | Expansion | Notes |\n|---|---|---|\n"
                                   "| MoE | Mixture of Experts | routing |\n",
               "wiki/index.md": "# Home\n\nMoE (Mixture of Experts).\n\n"
                                "Mixture of Experts (MoE).\n"})
    assert main([command, "--root", str(tmp_path)]) == code
    out = capsys.readouterr().out
    assert "wiki/index.md:5:21: ACR003 warning" in out
    assert [line.split()[1] for line in out.splitlines() if " error: " in line] == errors
