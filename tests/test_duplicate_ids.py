"""A server block copied to another page with its id unchanged: RB001 blames the copy (the block
git has not seen, or saw later), `runbook list` keeps the original, `plan ID` exits 2 naming
both places, and `run ID` refuses before anything runs, writing no record anywhere."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from harness import MKDOCS, make_tree

from wikitools.cli import main

RB = "dup-rb"
SERVER = ("```{ .bash #" + RB + " .runbook-server engine=vllm gpus=1 }\n"
          "vllm serve org/MODEL --port 8000\n```\n")
CLIENT = ("```{ .bash .runbook-client for=" + RB + " name=throughput }\n"
          "vllm bench serve --model org/MODEL --num-prompts 4\n```\n")


def _page(title: str, model: str) -> str:
    return (f"---\ntitle: {title}\nstatus: experimental\n---\n# {title}\n\n"
            + SERVER.replace("MODEL", model) + "\n" + CLIENT.replace("MODEL", model))


def _git(tree: Path, *args: str) -> None:
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.invalid",
               GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.invalid")
    subprocess.run(["git", "-C", str(tree), *args], check=True, capture_output=True, env=env)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    make_tree(tmp_path, {**MKDOCS, "wiki/models/original.md": _page("Original", "first")})
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", "-A")
    _git(tmp_path, "commit", "-qm", "original")
    # the copy sorts before the original: page order alone would keep the copy
    (tmp_path / "wiki" / "a-copy.md").write_text(_page("Copy", "second"))
    return tmp_path


def test_duplicate_runbook_id_blames_the_copy(tree: Path, capsys: pytest.CaptureFixture[str]
                                              ) -> None:
    rc = main(["check", "--root", str(tree)])
    out = capsys.readouterr().out
    rb001 = [line for line in out.splitlines() if " RB001 " in line]
    assert rb001 == [f"wiki/a-copy.md:7:12: RB001 error: duplicate runbook id '{RB}' (first "
                     f"defined at wiki/models/original.md:7)"]
    assert rc == 1


def test_duplicate_runbook_id_list_keeps_the_original(
        tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    main(["runbook", "list", "--root", str(tree)])
    out = capsys.readouterr().out
    assert f"wiki/models/original.md#{RB}" in out and "org/first" in out
    assert "a-copy.md" not in out and "org/second" not in out


def test_duplicate_runbook_id_plan_exits_2_naming_both_places(
        tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["runbook", "plan", RB, "--root", str(tree), "--force"])
    err = capsys.readouterr().err
    assert rc == 2
    assert (f"runbook id '{RB}' is defined 2 times: wiki/models/original.md:7 and "
            "wiki/a-copy.md:7") in err


def test_duplicate_runbook_id_run_refuses_and_writes_no_record(
        tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["runbook", "run", RB, "--root", str(tree), "--yes", "--force"])
    err = capsys.readouterr().err
    assert rc == 2 and "is defined 2 times" in err
    assert not (tree / "runbooks").exists()
    assert not list(tree.rglob("*.json"))
