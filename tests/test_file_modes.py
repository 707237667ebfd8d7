"""Files the tools rewrite (pages, INDEX.md, wiki.yml, records) keep their permission bits, and
a file they create has the mode the umask gives, not a temporary file's 0600."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from fakes.site_tree import site_tree
from fakes.sweep_page import sweep_page

from wikitools.cli import main
from wikitools.core.fsio import write_if_changed
from wikitools.runbook.records.record import Record, write_record

RB = "modes-rb"


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def umask() -> Iterator[None]:
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def test_a_rewritten_file_keeps_its_mode_and_a_new_file_gets_the_umask_default(
        tmp_path: Path, umask: None) -> None:
    new = tmp_path / "new.md"
    assert write_if_changed(new, "a\n")
    assert _mode(new) == 0o644
    os.umask(0o027)
    other = tmp_path / "other.md"
    assert write_if_changed(other, "a\n")
    assert _mode(other) == 0o640
    os.umask(0o077)  # a rewrite takes the file's own mode, not the umask
    new.chmod(0o664)
    assert write_if_changed(new, "b\n")
    assert _mode(new) == 0o664 and new.read_text() == "b\n"
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def test_a_new_record_gets_the_umask_default_mode(tmp_path: Path, umask: None) -> None:
    rec = Record(RB, "wiki/x.md", "sha256:b", "20261201T000000Z-abcdef12",
                 "2026-12-01T00:00:00Z", "2026-12-01T00:01:00Z", "ok")
    assert _mode(write_record(tmp_path, rec)) == 0o644


def test_render_and_index_keep_the_mode_of_the_page_and_index_they_rewrite(
        tmp_path: Path, umask: None) -> None:
    tree = site_tree(tmp_path)
    page = tree / "wiki" / "modes.md"
    page.write_text(sweep_page(RB, "Modes"))
    record = {"schema_version": 2, "runbook": RB, "run_id": "20261130T100000Z-abcdef12",
              "page": "wiki/modes.md", "blocks_hash": "sha256:abcdef12",
              "started_at": "2026-11-30T10:00:00Z", "finished_at": "2026-11-30T10:05:00Z",
              "status": "ok"}
    (tree / "runbooks" / RB).mkdir(parents=True)
    (tree / "runbooks" / RB / f"{record['run_id']}.json").write_text(json.dumps(record))
    assert main(["index", "--root", str(tree)]) == 0
    index = tree / "INDEX.md"
    assert _mode(index) == 0o644  # created under umask 022
    os.umask(0o077)
    page.chmod(0o644)
    index.chmod(0o644)
    before = page.read_text()
    assert main(["runbook", "render", "--root", str(tree)]) == 0
    assert page.read_text() != before and _mode(page) == 0o644
    page.write_text(page.read_text().replace("title: Modes", "title: Modes renamed"))
    assert main(["index", "--root", str(tree)]) == 0
    assert "Modes renamed" in index.read_text() and _mode(index) == 0o644
