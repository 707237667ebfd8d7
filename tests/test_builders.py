"""The site built by both builders that read mkdocs.yml, MkDocs and Zensical (which runs the
Markdown extensions but no MkDocs plugin): both strict builds pass, and every page has the same
glossary tooltips, status chips, "measured on" badges and rendered results in both."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
COPIED = ("wiki", "runbooks", "overrides", "mkdocs.yml", "wiki.yml")
FEATURES = {
    "tooltips": r"<abbr title=",
    "chips": r'<p class="wiki-status wiki-status--',
    "badges": r'<span class="wiki-measured-badge wiki-measured-badge--',
    "alerts": r'<div class="admonition ',
    "folded": r"<details class=",
    "results tables": r'<div class="wiki-measured">',
    "charts": r'<svg class="wiki-svg"',
    "not measured": r">Not yet measured</p>",
}


def _counts(site: Path, pages: list[str]) -> dict[str, dict[str, int]]:
    out = {}
    for rel in pages:
        stem = rel.removesuffix(".md")
        folder = "" if stem == "index" else stem.removesuffix("/index") if stem.endswith(
            "/index") else stem
        html = (site / folder / "index.html").read_text(encoding="utf-8")
        body = html[html.index('<article'):html.index("</article>")]
        out[rel] = {name: len(re.findall(pattern, body)) for name, pattern in FEATURES.items()}
    return out


@pytest.fixture(scope="module")
def builds(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, dict]:
    root = tmp_path_factory.mktemp("builders") / "wiki-copy"
    root.mkdir()
    for name in COPIED:
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, root / name)  # links followed: the stylesheet is one
        else:
            shutil.copy(source, root / name)
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    for command in ([str(BIN / "mkdocs"), "build", "--strict", "--site-dir", "site-mkdocs"],
                    [str(BIN / "zensical"), "build", "--strict", "-f", "mkdocs.yml"]):
        done = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True,
                              timeout=600, check=False)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    pages = sorted(p.relative_to(root / "wiki").as_posix() for p in (root / "wiki").rglob("*.md"))
    return _counts(root / "site-mkdocs", pages), _counts(root / "site", pages)


def test_both_builders_give_every_page_the_same_features(builds: tuple[dict, dict]) -> None:
    mkdocs, zensical = builds
    differ = {page: (mkdocs[page], zensical[page]) for page in mkdocs
              if mkdocs[page] != zensical[page]}
    assert differ == {}


def test_the_features_are_there(builds: tuple[dict, dict]) -> None:
    mkdocs, _ = builds
    total = {name: sum(page[name] for page in mkdocs.values()) for name in FEATURES}
    # Every page has a status; the glossary's terms are all over the wiki; the reference
    # runs are rendered from their records at build time (tables and inline charts).
    assert total["chips"] == len(mkdocs)
    assert total["tooltips"] > 1000
    assert total["badges"] > 0 and total["not measured"] > 0
    assert total["results tables"] > 0 and total["charts"] > 0 and total["alerts"] > 0
    assert total["folded"] >= 79  # the status boxes
    assert mkdocs["glossary.md"]["tooltips"] > 0
