"""The one sweep grammar (`parse_sweep`) behind `sweep=`, `variants=`, `--sweep` and
`--variant`, its bounds, and `plan` previewing what `run` does with the same options."""

from __future__ import annotations

from pathlib import Path

import pytest
from harness import make_tree

from wikitools.cli import main
from wikitools.pages.parse import parse_page
from wikitools.runbook.blocks.extract import extract_runbooks
from wikitools.runbook.blocks.sweep import MAX_POINTS, Sweep, SweepError, parse_sweep

PAGE = """---
title: Sweeps
---

# Sweeps

```{ .bash #sw .runbook-server engine=vllm gpus=0 }
vllm serve m --port 18123
```

```{ .bash .runbook-client for=sw name=bench sweep="C=1,8" }
vllm bench serve --model m --max-concurrency "${C:-1}"
```
"""


def test_one_variable_and_a_grid_parse_to_points_in_order() -> None:
    assert parse_sweep("C=1,8,32").points() == ((("C", "1"),), (("C", "8"),), (("C", "32"),))
    grid = parse_sweep(" KV = auto , fp8 ; MTP=0,3")
    assert grid.axes == (("KV", ("auto", "fp8")), ("MTP", ("0", "3")))
    assert len(grid) == 4 and grid.text() == "KV=auto,fp8;MTP=0,3"
    assert grid.points()[1] == (("KV", "auto"), ("MTP", "3"))
    assert Sweep().points() == ((),) and len(Sweep()) == 0


@pytest.mark.parametrize(("text", "message", "col"), [
    ("C=1,1", "C=1 is given twice (it would run the same point twice)", 4),
    ("C", "'C' is not VAR=v1,v2,… (variables separated by ';')", 0),
    ("1C=1", "'1C' is not a variable name", 0),
    ("C=1,,2", "C has an empty value", 4),
    ("C=1;C=2", "C is named twice", 4),
    ("C=$(rm -rf ~)", "C value '$(rm -rf ~)' has characters other than letters, digits and "
     ". _ : + / @ -", 2),
])
def test_a_bad_sweep_is_refused_at_the_character_at_fault(text: str, message: str,
                                                          col: int) -> None:
    with pytest.raises(SweepError) as exc:
        parse_sweep(text)
    assert (exc.value.message, exc.value.col) == (message, col)


def test_a_sweep_beyond_the_bound_is_refused_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    text = "C=" + ",".join(str(i) for i in range(1_000_000))
    with pytest.raises(SweepError, match=f"more than {MAX_POINTS} values") as exc:
        parse_sweep(text)
    # refused at the first value past the bound, not after reading the million
    assert exc.value.col == text.index(f",{MAX_POINTS},") + 1
    monkeypatch.setattr(Sweep, "points", lambda self: pytest.fail("points made"))
    with pytest.raises(SweepError, match=f"10,000 points \\(at most {MAX_POINTS}\\)"):
        parse_sweep("A=" + ",".join(str(i) for i in range(100)) + ";B="
                    + ",".join(str(i) for i in range(100)))
    monkeypatch.undo()
    assert len(parse_sweep("C=" + ",".join(str(i) for i in range(MAX_POINTS)))) == MAX_POINTS


def test_page_sweep_beyond_the_bound_is_a_located_error() -> None:
    big = ",".join(str(i) for i in range(10_000))
    page = parse_page(PAGE.replace('sweep="C=1,8"', f'sweep="C={big}"'), "wiki/p.md")
    _runbooks, diags = extract_runbooks([page], None)
    (d,) = diags
    assert (d.path, d.line, d.code) == ("wiki/p.md", 11, "RB004")
    assert d.message == f"bad value for sweep: C has more than {MAX_POINTS} values (at most " \
                        f"{MAX_POINTS} points)"


def test_variant_selection_keeps_the_named_values() -> None:
    variants = parse_sweep("KV=auto,fp8;MTP=0,3")
    picked = variants.selected(parse_sweep("KV=fp8"))
    assert picked.points() == ((("KV", "fp8"), ("MTP", "0")), (("KV", "fp8"), ("MTP", "3")))
    with pytest.raises(SweepError, match="KV=nvfp4 is not one of KV=auto,fp8"):
        variants.selected(parse_sweep("KV=nvfp4"))
    with pytest.raises(SweepError, match="DCP is not one of KV, MTP"):
        variants.selected(parse_sweep("DCP=4"))


@pytest.fixture
def wiki(tmp_path: Path) -> Path:
    return make_tree(tmp_path, {"wiki/p.md": PAGE})


def test_plan_takes_sweep_and_client_like_run(wiki: Path, capsys) -> None:
    assert main(["runbook", "plan", "sw", "--root", str(wiki), "--sweep", "C=2,4",
                 "--client", "bench", "--repeats", "1", "--no-warmup"]) == 0
    out = capsys.readouterr().out
    assert "client bench (serving): 2 points (C=2,4), each 1 run" in out
    assert "client bench (serving) [C=2]:" in out and "client bench (serving) [C=8]" not in out


def test_sweep_option_that_repeats_a_point_is_refused(wiki: Path, capsys) -> None:
    assert main(["runbook", "plan", "sw", "--root", str(wiki), "--sweep", "C=1,1"]) == 2
    err = capsys.readouterr().err
    assert "--sweep 'C=1,1': C=1 is given twice (it would run the same point twice)" in err
    assert main(["runbook", "run", "sw", "--root", str(wiki), "--yes", "--sweep", "C=1,1"]) == 2
    assert not (wiki / "runbooks").exists()


def test_sweep_option_for_a_variable_no_client_sweeps_is_refused(wiki: Path, capsys) -> None:
    assert main(["runbook", "plan", "sw", "--root", str(wiki), "--sweep", "N=1"]) == 2
    assert "--sweep N: runbook 'sw' sweeps C" in capsys.readouterr().err
