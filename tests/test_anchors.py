"""Broken anchors (`page.md#no-such-anchor`) are reported by `wiki check` and `wiki lint` as
LNK003, with the ids the site's build gives (the toc extension's slugs, checked here against
Python-Markdown itself)."""

from __future__ import annotations

import re
from pathlib import Path

import markdown
import pytest

from wikitools.checks.anchors import page_anchors
from wikitools.cli import main
from wikitools.pages.parse import parse_page

TARGET = """---
title: Target
---
# Target

## The FP8 `MoE` backend cascade (vLLM 0.26, TP=2)

## Setup

## Setup

### Custom heading {#my-id}

### Spaced — em dash & ampersand

```{ .bash #a-runbook .runbook-server engine=vllm }
vllm serve m
```

<div id="raw-html-id"></div>

A footnote.[^note]

[^note]: The note.
"""

SOURCE = """---
title: Source
---
# Source

See [cascade](target.md#the-fp8-moe-backend-cascade-vllm-026-tp2), [second](target.md#setup_1),
[custom](target.md#my-id), [dash](target.md#spaced-em-dash-ampersand),
[block](target.md#a-runbook), [raw](target.md#raw-html-id), [here](#source),
[note](target.md#fn:note), [broken](target.md#no-such-anchor) and [typo](target.md#setpu)
and [self](#nowhere).
"""


def test_page_anchors_match_the_toc_extension() -> None:
    html = markdown.markdown(TARGET.split("---\n", 2)[2], extensions=["toc", "attr_list"])
    built = set(re.findall(r'<h\d id="([^"]+)"', html))
    ours = set(page_anchors(parse_page(TARGET, "wiki/target.md")))
    assert built and built <= ours, (built, ours)
    assert {"setup", "setup_1", "my-id", "a-runbook", "raw-html-id", "fn:note"} <= ours


@pytest.mark.parametrize("command", ["check", "lint"])
def test_broken_anchor_is_reported_by_wiki_check_and_lint(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str) -> None:
    (tmp_path / "mkdocs.yml").write_text("site_name: t\ndocs_dir: wiki\n")
    (tmp_path / "wiki").mkdir()
    (tmp_path / "wiki" / "index.md").write_text(
        "---\ntitle: Home\n---\n# Home\n\n[s](source.md) [t](target.md)\n")
    (tmp_path / "wiki" / "target.md").write_text(TARGET)
    (tmp_path / "wiki" / "source.md").write_text(SOURCE)
    rc = main([command, "--root", str(tmp_path)])
    out = capsys.readouterr().out
    found = [line for line in out.splitlines() if " LNK003 " in line]
    assert found == [
        "wiki/source.md:9:28: LNK003 error: link to missing anchor '#no-such-anchor' in "
        "'wiki/target.md'",
        "wiki/source.md:9:67: LNK003 error: link to missing anchor '#setpu' in "
        "'wiki/target.md'; did you mean 'setup'?",
        "wiki/source.md:10:5: LNK003 error: link to missing anchor '#nowhere' in this page",
    ], out
    assert rc == 1
