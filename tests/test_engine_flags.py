"""A misspelled engine flag (`--tensor-paralel-size 2`) is caught before anything runs: check,
show and plan name it where the block writes it, with the flag it misspells, judged against the
flags each engine's own argument parser defines (flag_lists.py) and the spellings it accepts."""

from __future__ import annotations

from pathlib import Path

import pytest
from harness import MKDOCS, make_tree

from wikitools.cli import main
from wikitools.runbook.engines import catalog as engines
from wikitools.runbook.engines import flag_lists

RB = "typo-rb"
PAGE = f"""---
title: Typo
status: experimental
---
# Typo

```{{ .bash #{RB} .runbook-server engine=vllm gpus=1 }}
vllm serve org/model \\
  --tensor-paralel-size 2 --max_model_len 4096 -O3 \\
  --compilation-config.pass_config.fuse_allreduce_rms false --enforce-eager \\
  -cc.mode=3 --gpu-memory-util 0.9 --some-fork-flag
```

```{{ .bash .runbook-client for={RB} name=throughput }}
vllm bench serve --model org/model --num-prompts 4
```
"""
TYPO = ("wiki/typo.md:9:3: RB017 error: unknown flag '--tensor-paralel-size': vLLM "
        f"{flag_lists.VLLM_VERSION} has no such server flag; did you mean "
        "'--tensor-parallel-size'?")


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    return make_tree(tmp_path, {**MKDOCS, "wiki/typo.md": PAGE})


def test_flag_lists_come_from_the_engines_own_parsers() -> None:
    vllm, sglang = engines.engine("vllm"), engines.engine("sglang")
    assert vllm is not None and sglang is not None
    assert vllm.flags is not None and sglang.flags is not None
    assert vllm.flags.version == flag_lists.VLLM_VERSION == "0.32.0"
    assert sglang.flags.version == flag_lists.SGLANG_VERSION == "0.5.23"
    for flag in ("--tensor-parallel-size", "-tp", "--max-model-len", "--enforce-eager",
                 "--no-enforce-eager", "--optimization-level"):
        assert flag in flag_lists.VLLM_FLAGS, flag
    for flag in ("--tp-size", "--model-path", "--mem-fraction-static"):
        assert flag in flag_lists.SGLANG_FLAGS, flag
    # what argparse itself accepts: a unique prefix; what vLLM's parser rewrites
    assert vllm.flags.accepts("--gpu-memory-util")
    assert vllm.flags.accepts("--max_model_len") and not sglang.flags.accepts("--tp_size")
    assert vllm.flags.accepts("-O3") and vllm.flags.accepts("-cc.mode=3")
    assert not vllm.flags.accepts("--tensor-paralel-size")


def test_misspelled_engine_flag_is_reported_by_check(
        tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["check", "--root", str(tree)])
    out = capsys.readouterr().out
    # a flag far from every real one (a fork's, another version's) is not judged
    assert [line for line in out.splitlines() if " RB017 " in line] == [TYPO]
    assert rc == 1


def test_misspelled_engine_flag_is_reported_by_show(
        tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["runbook", "show", RB, "--root", str(tree)])
    err = capsys.readouterr().err
    assert TYPO in err and "--some-fork-flag" not in err and rc == 1


def test_misspelled_engine_flag_stops_plan_naming_the_line(
        tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["runbook", "plan", RB, "--root", str(tree), "--force"])
    err = capsys.readouterr().err
    assert rc == 2 and TYPO in err and "nothing was started" in err
