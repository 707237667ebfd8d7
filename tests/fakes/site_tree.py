"""A project of its own for a test that builds the site: the repository's site configuration,
theme overrides and assets, and a home page; the test adds its pages under `wiki/`."""

from __future__ import annotations

import shutil
from pathlib import Path

from harness import make_tree

ROOT = Path(__file__).resolve().parents[2]


def site_tree(tmp: Path) -> Path:
    """A new project folder under `tmp` that `mkdocs build --strict` builds like the wiki."""
    tree = tmp / "project"
    tree.mkdir()
    for name in ("mkdocs.yml", "wiki.yml"):
        shutil.copy(ROOT / name, tree / name)
    for name in ("hooks", "overrides", "includes"):  # whichever the site's build uses
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, tree / name)
    shutil.copytree(ROOT / "wiki" / "assets", tree / "wiki" / "assets")
    return make_tree(tree, {"wiki/index.md": "---\ntitle: Home\n---\n# Home\n"})
