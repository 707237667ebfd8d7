"""`--root` must name a wiki (wiki.yml, mkdocs.yml, a `wiki/` folder of pages or the
community wiki's top-level GLOSSARY.md there):
`wiki check --root /` is refused at once as a usage error instead of reading the whole file
system."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from wikitools.cli import main


@pytest.mark.parametrize("command", [["check"], ["lint"], ["index", "--check"], ["acronyms"],
                                     ["runbook", "list"]])
def test_root_that_is_not_a_wiki_is_a_usage_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], command: list[str]) -> None:
    (tmp_path / "notes.md").write_text("# Notes\n")
    rc = main([*command, "--root", str(tmp_path)])
    err = capsys.readouterr().err
    assert rc == 2
    assert err.startswith(f"wiki: error: {tmp_path}: --root is not a wiki (no wiki.yml, "
                          "mkdocs.yml, wiki/ folder or GLOSSARY.md there)"), err


def test_root_of_the_file_system_is_refused_at_once() -> None:
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "wikitools", "check", "--root", "/"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 2, proc.stderr
    assert "/: --root is not a wiki" in proc.stderr and "Traceback" not in proc.stderr
    assert time.monotonic() - started < 30


@pytest.mark.parametrize("marker", ["wiki.yml", "mkdocs.yml", "wiki"])
def test_root_with_a_wiki_marker_is_accepted(tmp_path: Path, marker: str) -> None:
    (tmp_path / "wiki").mkdir()
    (tmp_path / "wiki" / "index.md").write_text("---\ntitle: Home\n---\n# Home\n")
    if marker != "wiki":
        (tmp_path / marker).write_text("docs_dir: wiki\n" if marker == "wiki.yml"
                                       else "site_name: t\ndocs_dir: wiki\n")
    assert main(["lint", "--root", str(tmp_path)]) == 0
