"""`wiki lint` and `wiki check` through `main(argv)` on small trees."""

from __future__ import annotations

from pathlib import Path

import pytest
from harness import make_tree
from hypothesis import example, given, settings
from hypothesis import strategies as st

from wikitools.cli import main
from wikitools.core.config import iter_pages, load_config
from wikitools.core.diagnostics import closest


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str], str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out.splitlines(), err


def test_lint_clean_page(tmp_path: Path, capsys) -> None:
    make_tree(tmp_path, {"wiki/a.md": "---\ntitle: A\nstatus: unverified\n---\nSee [b](b.md).\n",
                         "wiki/b.md": "# B\n"})
    code, out, err = run(["lint", "--root", str(tmp_path)], capsys)
    assert (code, out) == (0, [])
    assert "no findings (2 pages)" in err


def test_lint_status_and_did_you_mean(tmp_path: Path, capsys) -> None:
    make_tree(tmp_path, {"wiki/a.md": "---\ntitle: A\nstatus: Reviwed\n---\n",
                         "wiki/b.md": "---\ntitle: B\nstatus: shipped\n---\n"})
    code, out, _ = run(["lint", "--root", str(tmp_path)], capsys)
    assert code == 1
    assert out == [
        "wiki/a.md:3:9: FM003 error: unknown status 'Reviwed' (allowed: measured, reviewed, "
        "experimental, historical, unverified); did you mean 'reviewed'?",
        "wiki/b.md:3:9: FM003 error: unknown status 'shipped' (allowed: measured, reviewed, "
        "experimental, historical, unverified)",
    ]


def test_lint_statuses_from_config(tmp_path: Path, capsys) -> None:
    make_tree(tmp_path, {"wiki.yml": "statuses: [draft, done]\n",
                         "wiki/a.md": "---\ntitle: A\nstatus: draft\n---\n"})
    assert run(["lint", "--root", str(tmp_path)], capsys)[0] == 0


def test_lint_front_matter_types(tmp_path: Path, capsys) -> None:
    make_tree(tmp_path, {"wiki/a.md": "---\ntitle: 3\ntags: nvfp4\nhub: yes please\n---\n# A\n"})
    _, out, _ = run(["lint", "--root", str(tmp_path)], capsys)
    assert out == [
        "wiki/a.md:2:8: FM004 error: front matter 'title' must be text",
        "wiki/a.md:3:7: FM004 error: front matter 'tags' must be a list",
        "wiki/a.md:4:6: FM004 error: front matter 'hub' must be true or false",
    ]


def test_lint_parser_problems(tmp_path: Path, capsys) -> None:
    make_tree(tmp_path, {
        "wiki/fm.md": "---\ntitle: [x\n---\n# T\n",
        "wiki/list.md": "---\n- a\n---\n# T\n",
        "wiki/fence.md": "# T\n\n~~~\nopen\n",
        "wiki/bytes.md": b"# T\n\xff\n",
    })
    code, out, _ = run(["lint", "--root", str(tmp_path)], capsys)
    assert code == 1
    codes = [line.split(": ", 1)[1].split()[0] for line in out]
    assert codes == ["PG002", "PG001", "FM001", "FM002"]  # the bytes page keeps its title
    assert out[1] == (
        "wiki/fence.md:3:1: PG001 error: code fence '~~~' is never closed; it runs to the "
        "end of the file"
    )


def test_lint_missing_title_and_second_h1(tmp_path: Path, capsys) -> None:
    make_tree(tmp_path, {"wiki/a.md": "Prose only.\n", "wiki/b.md": "# One\n\n# Two\n"})
    code, out, _ = run(["lint", "--root", str(tmp_path)], capsys)
    assert code == 0  # both are warnings
    assert out == [
        "wiki/a.md:1:1: IDX001 warning: no title (front matter 'title' or a level-1 heading);"
        " using file name 'a'",
        "wiki/b.md:3:3: PG003 warning: second level-1 heading 'Two'; the title is the one "
        "on line 1",
    ]


def test_lint_links(tmp_path: Path, capsys) -> None:
    make_tree(tmp_path, {
        "wiki/models/qwen.md": (
            "# Q\n\n[ok](../hardware/pcie.md#lanes) [typo](../hardware/pcei.md)"
            " [gone](nothere.md) [ext](https://x.org/a.md) [anchor](#top)"
            " ![img](img/missing.png) [dir](../hardware/) [enc](../hardware/with%20space.md)"
            " [out](../../README.md) [mail](mailto:a@b.c)\n"
        ),
        "wiki/hardware/pcie.md": "# P\n\n## Lanes\n",
        "wiki/hardware/with space.md": "# S\n",
    })
    code, out, _ = run(["lint", "--root", str(tmp_path)], capsys)
    assert code == 1
    assert out == [
        "wiki/models/qwen.md:3:33: LNK001 error: link to missing page '../hardware/pcei.md';"
        " did you mean '../hardware/pcie.md'?",
        "wiki/models/qwen.md:3:61: LNK001 error: link to missing page 'nothere.md'",
        "wiki/models/qwen.md:3:121: LNK001 error: link to missing image 'img/missing.png'",
        "wiki/models/qwen.md:3:200: LNK001 error: link to missing page '../../README.md'",
    ]


@pytest.mark.parametrize(("config", "name", "generator"), [
    ("docs/conf.py", "sphinx", "sphinx"),  # Sphinx with MyST
    ("docusaurus.config.js", "docusaurus", "docusaurus"),
])
def test_links_without_a_suffix_follow_the_generators_rule(tmp_path: Path, capsys, config: str,
                                                          name: str, generator: str) -> None:
    make_tree(tmp_path, {
        "wiki.yml": "docs_dir: docs\n",
        config: "# configuration\n",
        "docs/index.md": "# Home\n\n[engine](design/transfer-engine) [gone](design/nothere)\n",
        "docs/design/transfer-engine.md": "# T\n\n[back](../index) [home](../)\n",
    })
    assert load_config(tmp_path).generator == generator
    code, out, _ = run(["lint", "--root", str(tmp_path)], capsys)
    assert out == [
        "docs/index.md:3:34: LNK001 error: link to missing page 'design/nothere'"], name
    assert code == 1


def test_mkdocs_links_name_the_file(tmp_path: Path, capsys) -> None:
    make_tree(tmp_path, {
        "mkdocs.yml": "site_name: X\n",
        "docs/index.md": "# Home\n\n[engine](transfer-engine)\n",
        "docs/transfer-engine.md": "# T\n",
    })
    code, out, _ = run(["lint", "--root", str(tmp_path)], capsys)
    assert code == 1
    assert out[0] == "docs/index.md:3:1: LNK001 error: link to missing page 'transfer-engine'"
    (tmp_path / "wiki.yml").write_text("docs_dir: docs\ngenerator: sphinx\n")
    assert load_config(tmp_path).generator == "sphinx"  # wiki.yml says which rules
    (tmp_path / "wiki.yml").write_text("docs_dir: docs\ngenerator: hugo\n")
    code, _out, err = run(["lint", "--root", str(tmp_path)], capsys)
    assert code == 2 and "generator must be one of mkdocs, sphinx, docusaurus" in err


def test_missing_link_suggests_a_page_whose_name_contains_it(tmp_path: Path, capsys) -> None:
    make_tree(tmp_path, {
        "wiki/topics/kv-cache-sessions.md": "# KV\n",
        "wiki/topics/quantization.md": "# Q\n",
        "wiki/models/m.md": "# M\n\n[kv](../topics/kv-cache.md) [q](../topics/quant.md)"
        " [far](kv-cache.md)\n",
    })
    code, out, _ = run(["lint", "--root", str(tmp_path)], capsys)
    assert code == 1
    assert out == [
        "wiki/models/m.md:3:1: LNK001 error: link to missing page '../topics/kv-cache.md';"
        " did you mean '../topics/kv-cache-sessions.md'?",
        "wiki/models/m.md:3:29: LNK001 error: link to missing page '../topics/quant.md';"
        " did you mean '../topics/quantization.md'?",
        "wiki/models/m.md:3:53: LNK001 error: link to missing page 'kv-cache.md';"
        " did you mean '../topics/kv-cache-sessions.md'?",
    ]


def test_links_in_code_are_ignored(tmp_path: Path, capsys) -> None:
    make_tree(tmp_path, {"wiki/a.md": "# A\n\n```\n[x](missing.md)\n```\n\n`[y](gone.md)`\n"})
    assert run(["lint", "--root", str(tmp_path)], capsys)[:2] == (0, [])


def test_bad_config_is_exit_2(tmp_path: Path, capsys) -> None:
    make_tree(tmp_path, {"wiki.yml": "index: [\n", "wiki/a.md": "# A\n"})
    code, _, err = run(["lint", "--root", str(tmp_path)], capsys)
    assert code == 2
    assert err.startswith("wiki: error: wiki.yml:2:1: malformed YAML")
    assert "Traceback" not in err


def test_iter_pages_excludes(tmp_path: Path) -> None:
    make_tree(tmp_path, {
        "README.md": "# R\n", "INDEX.md": "x", "includes/abbreviations.md": "x",
        "wiki/a.md": "# A\n", "wiki/_partial.md": "x", "wiki/sub/_b.md": "x",
        "wiki/snippets/s.md": "x", "wiki/.hidden/h.md": "x", "wiki/c.txt": "x",
    })
    config = load_config(tmp_path)
    rel = [p.relative_to(tmp_path).as_posix() for p in iter_pages(config)]
    assert rel == ["README.md", "wiki/a.md"]


GLOSSARY = "# Glossary\n\n| Acronym | Meaning |\n|---|---|\n| TP | Tensor Parallelism |\n"


def _fresh_tree(root: Path, capsys) -> Path:
    make_tree(root, {
        "wiki/glossary.md": GLOSSARY,
        "wiki/a.md": "---\ntitle: A\nstatus: unverified\n---\nUse Tensor Parallelism (TP) here.\n",
    })
    assert main(["index", "--root", str(root)]) == 0
    capsys.readouterr()
    return root


def test_check_clean_then_findings(tmp_path: Path, capsys) -> None:
    root = _fresh_tree(tmp_path, capsys)
    code, out, err = run(["check", "--root", str(root)], capsys)
    assert (code, out) == (0, []), err
    (root / "wiki" / "b.md").write_text("---\nstatus: nope\n---\nTP is used [x](y.md).\n")
    code, out, err = run(["check", "--root", str(root)], capsys)
    assert code == 1
    codes = [line.split(": ", 1)[1].split()[0] for line in out]
    assert codes == ["IDX100", "IDX001", "FM003", "ACR001", "LNK001"]
    assert out[0] == (
        "INDEX.md:1:1: IDX100 error: would change: INDEX.md (run `wiki index` to regenerate it)"
    )
    assert "errors" in err


def test_check_reports_runbook_block_and_region_findings(tmp_path: Path, capsys) -> None:
    root = _fresh_tree(tmp_path, capsys)
    (root / "wiki" / "b.md").write_text(
        "# B\n\n```{ .bash .runbook-client for=nowhere }\nvllm bench serve --model m\n```\n\n"
        "<!-- wiki:results runbook=ghost view=serving -->\n<!-- wiki:end -->\n"
    )
    code, out, _ = run(["check", "--root", str(root)], capsys)
    assert code == 1
    found = [line for line in out if line.startswith("wiki/b.md")]
    assert found[0].startswith("wiki/b.md:3:") and " RB002 " in found[0]
    assert any(line.startswith("wiki/b.md:7:1: RB009 error: ") for line in found), found


def test_check_demands_no_generated_abbreviations_file(tmp_path: Path, capsys) -> None:
    """Tooltips come from the MkDocs plugin at build time: no file for `wiki check` to police."""
    root = _fresh_tree(tmp_path, capsys)
    (root / "includes").mkdir(exist_ok=True)
    (root / "includes" / "abbreviations.md").write_text("stale\n")
    code, out, _ = run(["check", "--root", str(root)], capsys)
    assert (code, out) == (0, [])


def _count_parses(monkeypatch) -> list[str]:
    import wikitools.checks.facts
    import wikitools.pages.parse

    calls: list[str] = []
    real = wikitools.pages.parse.read_page

    def counting(path: Path, base: Path):
        calls.append(path.name)
        return real(path, base)

    monkeypatch.setattr(wikitools.pages.parse, "read_page", counting)
    monkeypatch.setattr(wikitools.checks.facts, "read_page", counting)
    return calls


def test_check_parses_each_page_once(tmp_path: Path, capsys, monkeypatch) -> None:
    root = _fresh_tree(tmp_path, capsys)
    calls = _count_parses(monkeypatch)
    run(["check", "--root", str(root)], capsys)
    assert sorted(calls) == ["a.md", "glossary.md"]


def test_lint_yaml_comment_cuts_value(tmp_path: Path, capsys) -> None:
    make_tree(tmp_path, {"wiki/a.md": (
        "---\ntitle: \"Fine #1 in quotes\"\ndescription: Uses PR #31089 here\n"
        "status: unverified  # a real comment after a value\ntags: [a, b] # ok\n---\n# A\n"
    )})
    code, out, _ = run(["lint", "--root", str(tmp_path)], capsys)
    assert code == 0
    assert out == [
        "wiki/a.md:3:22: FM005 warning: front matter 'description' is cut short at ' #' "
        "(YAML reads the"
        " rest as a comment); put the value in quotes",
    ]


def test_pages_unreachable_from_home_are_reported(tmp_path: Path, capsys) -> None:
    make_tree(tmp_path, {
        "wiki/index.md": "# Home\n\nSee [models](models/) and [a](a.md#part).\n",
        "wiki/a.md": "# A\n\n## Part\n",
        "wiki/models/index.md": "# Models\n\n[x](x.md)\n",
        "wiki/models/x.md": "# X\n\nBack [home](../index.md).\n",
        "wiki/orphan.md": "# Orphan\n\nLinks out to [a](a.md) but nothing links here.\n",
        "wiki/models/stray.md": "# Stray\n",
    })
    code, out, _ = run(["lint", "--root", str(tmp_path)], capsys)
    assert code == 0  # warnings only
    assert [line.split(" LNK002 ")[0] for line in out if " LNK002 " in line] == [
        "wiki/models/stray.md:1:1:",
        "wiki/orphan.md:1:1:",
    ]


TYPO_PAGE = """# Page

```{{ .bash #{rid} .runbook-server engine=vllm {attrs} }}
vllm serve org/model --port 8011
```

<!-- wiki:results runbook={rid} view=serving -->
<!-- wiki:end -->
"""


def test_typo_in_a_server_attribute_does_not_point_at_another_pages_runbook(
    tmp_path: Path, capsys
) -> None:
    make_tree(tmp_path, {
        "wiki/a.md": TYPO_PAGE.format(rid="qwen-tp2", attrs="gpu=2"),
        "wiki/b.md": TYPO_PAGE.format(rid="qwen-tp1", attrs="gpus=1"),
    })
    code, out, _ = run(["check", "--root", str(tmp_path)], capsys)
    assert code == 1
    mine = [line for line in out if line.startswith("wiki/a.md")]
    assert any("RB003 error: unknown attribute 'gpu'" in line for line in mine)
    rb009 = [line for line in mine if " RB009 " in line]
    assert rb009 == [
        "wiki/a.md:7:1: RB009 error: results region of runbook 'qwen-tp2' cannot be rendered: "
        "its server block (wiki/a.md:3) has errors"
    ]
    assert not any("qwen-tp1" in line for line in mine)


def test_a_line_starting_with_a_hash_is_flagged_outside_fences(tmp_path: Path, capsys) -> None:
    """Python-Markdown makes `#31782.` at a line start a heading, inside an admonition too;
    a `#` comment in a fenced block (also one nested in an admonition) is code."""
    make_tree(tmp_path, {"wiki/a.md": (
        "---\ntitle: A\n---\n\n# A\n\n!!! note\n    Read vLLM issue\n    #31782. Then go on.\n\n"
        "```bash\n#!/bin/sh\n# a comment\n```\n\n!!! tip\n    ```bash\n    #no-space comment\n"
        "    ```\n\nThe ## heading and a #tag inside a line are fine.\n"
    )})
    code, out, _ = run(["lint", "--root", str(tmp_path)], capsys)
    assert code == 1
    # A wiki read on GitHub: the two `!!!` boxes are PG009 warnings besides.
    assert [line for line in out if "PG009" not in line] == [
        "wiki/a.md:9:5: PG007 error: line starts with '#' and no space: the site renders it as "
        "a heading (GitHub does not); rewrap the sentence so the '#' is not first on its line"]
    assert [line.split(" PG009")[0] for line in out if "PG009" in line] == [
        "wiki/a.md:7:1:", "wiki/a.md:16:1:"]


@settings(max_examples=300, deadline=None)
@given(
    st.text(alphabet="abcde-_", max_size=12),
    st.lists(st.text(alphabet="abcde-_", max_size=12), max_size=12),
    st.sampled_from([0.0, 0.3, 0.6, 0.9]),
)
@example("ab", ["ac", "ad"], 0.3)  # equal ratios: the last in sort order, as difflib
def test_closest_is_difflibs_best_close_match(
    word: str, choices: list[str], cutoff: float
) -> None:
    import difflib

    expected = difflib.get_close_matches(word, choices, n=1, cutoff=cutoff)
    assert closest(word, choices, cutoff) == (expected[0] if expected else None)
