"""The scripts work on the wiki around the current directory, exactly as `wiki` does: run from
another wiki's root (or a folder inside it) they index and check that wiki, never the
repository the scripts live in; outside any wiki they say so (exit 2)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from harness import make_tree

REPO = Path(__file__).resolve().parents[1]
INDEX = REPO / "scripts" / "generate-wiki-index.py"
ACRONYMS = REPO / "scripts" / "check-acronyms.py"


def _foreign_wiki(root: Path) -> Path:
    """A small MkDocs wiki: mkdocs.yml only (no wiki.yml), pages under docs/."""
    return make_tree(root, {
        "mkdocs.yml": "site_name: Other wiki\ndocs_dir: docs\n",
        "docs/index.md": "# Other wiki home\n\nWelcome.\n",
        "docs/glossary.md": "# Glossary\n\n| Term | Meaning |\n|---|---|\n| KV | key-value |\n",
        "docs/guides/cache.md": "# Cache guide\n\nThe KV cache fills up.\n",
    })


def _run(script: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run([sys.executable, str(script), *args], cwd=cwd, env=env,
                          capture_output=True, text=True, check=False, timeout=120)


def test_scripts_work_on_the_wiki_around_the_current_directory(tmp_path: Path) -> None:
    root = _foreign_wiki(tmp_path / "other")
    own_index = (REPO / "INDEX.md").read_bytes()

    done = _run(INDEX, root)
    assert done.returncode == 0, done.stderr
    index = (root / "INDEX.md").read_text()
    assert "Cache guide" in index and "Other wiki home" in index
    assert "RTX PRO 6000" not in index
    assert (REPO / "INDEX.md").read_bytes() == own_index

    # From a folder inside the other wiki: the same wiki, found by walking up.
    again = _run(INDEX, root / "docs" / "guides", "--check")
    assert again.returncode == 0, again.stdout + again.stderr

    checked = _run(ACRONYMS, root / "docs")
    assert checked.returncode == 1, checked.stdout + checked.stderr
    assert checked.stdout.startswith("docs/guides/cache.md:3:5: ACR"), checked.stdout
    assert "wiki/" not in checked.stdout  # nothing of this repository's wiki


def test_scripts_outside_any_wiki_refuse(tmp_path: Path) -> None:
    lone = tmp_path / "lone"
    lone.mkdir()
    for script in (INDEX, ACRONYMS):
        done = _run(script, lone)
        assert done.returncode == 2, done.stdout + done.stderr
        assert "not inside a wiki" in done.stderr
        assert "Traceback" not in done.stderr
