"""Honest mistakes a contributor makes in runbook blocks that read as valid blocks: each is
refused (an error in `wiki check`, and `plan` starts nothing) or hinted (a warning), located at
the block."""

from __future__ import annotations

from pathlib import Path

import pytest
from harness import make_tree

from wikitools.cli import main

SERVER = ("```bash { #m-tp2 .runbook-server engine=vllm gpus=GPUS }\n"
          "vllm serve org/Model-7B --tensor-parallel-size 2 --port 8000\n```\n")
CLIENT = ("```bash { .runbook-client for=m-tp2 name=bench sweep=\"CONC=1,8\" }\n"
          "vllm bench serve --model org/Model-7B --num-prompts 4 --max-concurrency MAXC\n```\n")
REGION = "<!-- wiki:results runbook=m-tp2 view=serving -->\n<!-- wiki:end -->\n"


def _wiki(tmp_path: Path, *, gpus: str = "2", maxc: str = '"${CONC:-1}"',
          region: bool = True) -> Path:
    text = ("# M\n\n" + SERVER.replace("GPUS", gpus) + "\n" + CLIENT.replace("MAXC", maxc)
            + "\n" + (REGION if region else ""))
    return make_tree(tmp_path / "w", {"wiki/m.md": text})


def _run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(args)
    out, err = capsys.readouterr()
    return code, out + err


def test_a_well_formed_page_has_none_of_these_findings(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _wiki(tmp_path)
    _code, out = _run(["check", "--root", str(root)], capsys)
    assert "RB004" not in out and "RGN007" not in out, out


MISTAKES = {
    "tp-2-on-gpus-1": ({"gpus": "1"}, "wiki/m.md:3:1: RB004 error: bad value for gpus: 1, but the "
                       "command needs 2 GPUs (tensor parallel 2); give gpus=2, or lower the "
                       "parallel size"),
    "sweep-never-read": ({"maxc": "4"}, "wiki/m.md:7:1: RB004 error: bad value for sweep: the "
                         "client command does not read $CONC (write ${CONC:-default} where the "
                         "setting goes)"),
}


@pytest.mark.parametrize("command", ["check", "plan"])
@pytest.mark.parametrize("mistake", list(MISTAKES))
def test_a_mistake_that_reads_as_a_valid_block_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str, mistake: str) -> None:
    """TP 2 on a block with gpus=1; a sweep variable the command never reads."""
    change, expected = MISTAKES[mistake]
    root = _wiki(tmp_path, **change)
    args = ["runbook", "plan", "m-tp2"] if command == "plan" else ["check"]
    code, out = _run([*args, "--root", str(root)], capsys)
    # check: findings (1); plan: the runbook's blocks are wrong (2), nothing starts
    assert code == (2 if command == "plan" else 1)
    assert expected in out
    if command == "plan":
        assert "nothing was started" in out


def test_a_sweep_variable_read_in_arithmetic_is_read(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _wiki(tmp_path, maxc='"$((CONC * 2))"')
    _code, out = _run(["check", "--root", str(root)], capsys)
    assert "RB004" not in out, out


@pytest.mark.parametrize("command", ["check", "plan"])
def test_a_page_with_runbooks_and_no_results_region_is_hinted(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str) -> None:
    root = _wiki(tmp_path, region=False)
    args = ["runbook", "plan", "m-tp2"] if command == "plan" else ["check"]
    _code, out = _run([*args, "--root", str(root)], capsys)
    assert ("wiki/m.md:3:1: RGN007 warning: runbook 'm-tp2' has no results region on any page, "
            "so its results would show nowhere: add `<!-- wiki:results runbook=m-tp2 "
            "view=serving -->` and `<!-- wiki:end -->` where the table belongs") in out


def test_a_results_region_on_another_page_counts(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _wiki(tmp_path, region=False)
    (root / "wiki" / "results.md").write_text("# Results\n\n" + REGION.replace(
        "runbook=m-tp2 view=serving", "runbook=other view=tradeoff with=m-tp2"))
    _code, out = _run(["check", "--root", str(root)], capsys)
    assert "RGN007 warning: runbook 'm-tp2'" not in out
