"""What the contributor guide and the README tell a newcomer to do works when done: examples
pasted into a copy of the real wiki, then the documented commands."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from wikitools.cli import main

ROOT = Path(__file__).resolve().parent.parent
COPY = ("wiki", "runbooks", "includes", "overrides", "INDEX.md", "README.md", "mkdocs.yml",
        "wiki.yml")


@pytest.fixture
def wiki_copy(tmp_path: Path) -> Path:
    for name in COPY:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, tmp_path / name)
        elif src.exists():
            shutil.copy2(src, tmp_path / name)
    return tmp_path


def _section(text: str, heading: str) -> str:
    start = text.index(f"\n{heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def test_results_region_example_passes_check_once_rendered(
    wiki_copy: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    guide = (ROOT / "wiki" / "contributing.md").read_text(encoding="utf-8")
    section = _section(guide, "## Results regions")
    example = re.search(r"````markdown\n(.*?)````", section, re.S)
    assert example, "the guide shows a results region"
    command = re.search(r"```bash\n(wiki runbook render \S+)\n```", section)
    assert command, "the guide names the command that fills the region"
    page = wiki_copy / "wiki" / "models" / "gpt-oss-120b" / "tp2.md"
    rc_before = main(["check", "--root", str(wiki_copy)])
    before = capsys.readouterr().out
    page.write_text(page.read_text(encoding="utf-8") + "\n" + example[1], encoding="utf-8")

    # Pasted as shown, the region is reported as the guide says (RGN004), nothing else.
    assert main(["check", "--root", str(wiki_copy)]) == 1
    out = capsys.readouterr().out
    new = [line for line in out.splitlines() if line not in before.splitlines()]
    assert [re.search(r": (\w+) ", line)[1] for line in new] == ["RGN004"]

    argv = command[1].split()[1:]
    assert main([*argv[:2], str(wiki_copy / argv[2]), "--root", str(wiki_copy)]) == 0
    capsys.readouterr()
    assert main(["check", "--root", str(wiki_copy)]) == rc_before
    assert capsys.readouterr().out == before
    assert "Not yet measured" in page.read_text(encoding="utf-8").rsplit("wiki:results", 1)[1]
