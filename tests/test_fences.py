"""Fence info strings: `bash { #id … }` (canonical) and `{ .bash #id … }` (older) read alike;
the canonical form keeps its language in a plain CommonMark render (GitHub's reading); a form
change keeps the runbook's block hash; `scan --write` writes the canonical form."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from markdown_it_pyrs import MarkdownIt

from wikitools.cli import main
from wikitools.pages.fences import block_hash_info, modernise_info, parse_fence_info
from wikitools.pages.parse import parse_page, read_page
from wikitools.runbook.blocks.extract import extract_runbooks, is_runbook_block

ROOT = Path(__file__).resolve().parents[1]

NEW = 'bash { #qwen-tp2 .runbook-server engine=vllm gpus=2 env="A=1 B=2" }'
OLD = '{ .bash #qwen-tp2 .runbook-server engine=vllm gpus=2 env="A=1 B=2" }'


def test_both_forms_read_alike() -> None:
    new, old = parse_fence_info(NEW), parse_fence_info(OLD)
    for attrs in (new, old):
        assert attrs.brace and attrs.error is None
        assert attrs.lang == "bash"
        assert attrs.id == "qwen-tp2"
        assert attrs.classes == ("bash", "runbook-server")
        assert [(k, v) for k, v, _ in attrs.options] == [
            ("engine", "vllm"), ("gpus", "2"), ("env", "A=1 B=2")]
    assert new.lang_first and not old.lang_first


def test_option_columns_point_into_the_line() -> None:
    line = "```" + NEW
    attrs = parse_fence_info(line[3:], 4)
    for key, _value, col in attrs.options:
        assert line[col - 1:].startswith(key + "="), key
    assert "column 14" in (parse_fence_info("yaml { .x ~bad }", 4).error or "")


@pytest.mark.parametrize("info, lang", [
    ("bash", "bash"), ("python title=x", "python"), ("", None),
    ("yaml{ .runbook-file for=a path=compose.yaml }", "yaml"),
    ("shell-session { .x }", "shell-session"),
])
def test_language(info: str, lang: str | None) -> None:
    assert parse_fence_info(info).lang == lang


def test_unclosed_list_is_an_error_in_both_forms() -> None:
    assert parse_fence_info("bash { #a .runbook-server gpus=2").error
    assert parse_fence_info("{ .bash #a .runbook-server gpus=2").error


def test_modernise_and_hash() -> None:
    assert modernise_info(OLD) == NEW
    assert modernise_info(NEW) is None
    assert modernise_info("bash") is None
    assert block_hash_info(NEW) == block_hash_info(OLD) == OLD
    page_old = parse_page(f"```{OLD}\nvllm serve m --tensor-parallel-size 2\n```\n", "p.md")
    page_new = parse_page(f"```{NEW}\nvllm serve m --tensor-parallel-size 2\n```\n", "p.md")
    (rb_old,), _ = extract_runbooks([page_old], None)
    (rb_new,), _ = extract_runbooks([page_new], None)
    assert rb_old.blocks_hash == rb_new.blocks_hash
    assert rb_new.server.command.tp == 2


@pytest.mark.parametrize("info, cls", [
    ("bash { #a .runbook-server engine=vllm gpus=2 }", "language-bash"),
    ("yaml { .runbook-file for=a path=compose.yaml }", "language-yaml"),
    ("{ .bash #a .runbook-server engine=vllm gpus=2 }", "language-{"),
])
def test_plain_commonmark_takes_the_first_word(info: str, cls: str) -> None:
    """A CommonMark renderer with no plugins: the reading of GitHub and the others."""
    out = MarkdownIt("commonmark").render(f"```{info}\nvllm serve m\n```\n")
    assert out == f'<pre><code class="{cls}">vllm serve m\n</code></pre>\n'


def test_this_wikis_runbook_fences_keep_the_language_first() -> None:
    old = []
    for path in sorted((ROOT / "wiki").rglob("*.md")):
        page = read_page(path, ROOT)
        old += [f"{page.path}:{b.line}" for b in page.code_blocks
                if is_runbook_block(b) and not b.attrs.lang_first]
    assert old == []


def test_scan_write_rewrites_old_fences_and_marks_new_ones(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "wiki").mkdir()
    (tmp_path / "wiki.yml").write_text("docs_dir: wiki\n")
    page = tmp_path / "wiki" / "p.md"
    page.write_text(
        "# P\n\n"
        "```{ .bash #old-tp1 .runbook-server engine=vllm gpus=1 }\n"
        "vllm serve org/old-model --port 8000\n```\n\n"
        "```bash\nvllm serve org/new-model --tensor-parallel-size 2 --port 8001\n```\n")
    assert main(["runbook", "scan", "--check", "--root", str(tmp_path)]) == 1
    assert main(["runbook", "scan", "--write", "--root", str(tmp_path)]) == 0
    lines = page.read_text().split("\n")
    assert lines[2] == "```bash { #old-tp1 .runbook-server engine=vllm gpus=1 }"
    assert re.fullmatch(r"```bash \{ #new-model-tp2 \.runbook-server engine=vllm gpus=2 \}",
                        lines[6]), lines[6]
    assert main(["runbook", "scan", "--check", "--root", str(tmp_path)]) == 0
    capsys.readouterr()
