"""The `wiki` MkDocs plugin on a foreign tree shaped like the community wiki (pages at the top of
the repository, GLOSSARY.md, a hand-kept INDEX.md, attachments in images/): after `wiki init`,
a minimal mkdocs.yml (Material and the plugin) builds it strictly, and the HTML has glossary
tooltips, the status chip, the "measured on" badge and the results table rendered from a run
record, while nothing generated is written into the tree."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from harness import record

from wikitools.cli import main
from wikitools.pages.parse import read_page
from wikitools.runbook.blocks.extract import extract_runbooks

MKDOCS = Path(sys.executable).parent / "mkdocs"

MINIMAL = """site_name: Community wiki
docs_dir: ..
site_dir: ../../site-out
theme:
  name: material
plugins:
  - wiki
"""

RUNBOOK_PAGE = """---
title: Fake model
status: experimental
---
# Fake model

The KV cache holds 1,274,576 tokens.

```bash { #fake-rb .runbook-server engine=vllm gpus=1 }
vllm serve fake-model --port 8000
```

```bash { .runbook-client for=fake-rb name=bench sweep="C=1,2" }
vllm bench serve --model fake-model --num-prompts 4 --max-concurrency "${C:-1}"
```

<!-- wiki:results runbook=fake-rb view=serving -->
<!-- wiki:end -->
"""

TREE = {
    "README.md": "# Community wiki\n\nThe [model](models/fake.md), the [index](INDEX.md) and "
                 "the [glossary](GLOSSARY.md).\n",
    "INDEX.md": "# Index\n\n- [Fake model](models/fake.md)\n",
    "GLOSSARY.md": "# Glossary\n\n| Acronym | Meaning |\n|---|---|\n| KV | key-value |\n"
                   "| TP | tensor parallelism |\n",
    "models/fake.md": RUNBOOK_PAGE,
    "models/README.md": "# Model pages\n\nThe [fake model](fake.md).\n",
    ".mkdocs/mkdocs.yml": MINIMAL,
}


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*")
            if p.is_file() and ".git" not in p.parts}


def test_minimal_mkdocs_yml_with_the_plugin_builds_a_foreign_wiki(tmp_path: Path,
                                                                  capsys) -> None:
    root = tmp_path / "community"
    for rel, text in TREE.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    (root / "images").mkdir()
    (root / "images" / "pic.png").write_bytes(b"\x89PNG\r\n")
    (root / ".git").mkdir()
    assert main(["init", "--root", str(root)]) == 0
    runbooks, _ = extract_runbooks([read_page(root / "models" / "fake.md", root)], root)
    record(root, blocks=runbooks.get("fake-rb").blocks_hash)
    capsys.readouterr()
    before = _files(root)

    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    done = subprocess.run([str(MKDOCS), "build", "--strict", "-f", ".mkdocs/mkdocs.yml"],
                          cwd=root, env=env, capture_output=True, text=True, timeout=300,
                          check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert _files(root) == before  # no generated file in the tree
    site = tmp_path / "site-out"
    page = (site / "models" / "fake" / "index.html").read_text()
    assert '<abbr title="key-value">KV</abbr>' in page
    assert "*[KV]" not in page
    assert '<p class="wiki-status wiki-status--experimental"' in page
    assert 'wiki-measured-badge--target">Measured on SM120' in page
    # The results region, empty in the page, rendered from the record at build time.
    assert re.search(r"<td[^>]*>435\.8</td>", page), re.findall(r"<td[^>]*>[^<]*</td>", page)
    assert "<details" in page and "???" not in page  # "All metrics", folded
    # The runbook fences: highlighted bash with their id, no fence header left in the text.
    # language-first fences keep their language as a class, as this wiki's own build and
    # GitHub give it, with no highlight settings in the site's mkdocs.yml
    server = page[page.index('<div id="fake-rb" class="language-bash runbook-server highlight">'):]
    assert '<div class="language-bash runbook-client highlight">' in page
    assert '<span class="m">8000</span>' in server[:server.index("</pre>")]  # bash lexer
    assert "```" not in page
    assert 'href="../../assets/stylesheets/wikitools.css"' in page
    assert (site / "assets" / "stylesheets" / "wikitools.css").is_file()
    home = (site / "index.html").read_text()
    assert "Community wiki" in home and (site / "images" / "pic.png").is_file()
    # The models section is named after its index page, not its folder ("Models").
    labels = re.findall(r'<span class="md-ellipsis">\s*([^<]+?)\s*</span>', home)
    assert "Model pages" in labels and "Models" not in labels, labels
