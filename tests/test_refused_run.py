"""A run that preflight refuses measured nothing: with `--yes` its record stays in the
artifacts folder and nothing is written under runbooks/ (so `wiki check` stays clean and no page
shows a "failed at preflight" row); without `--yes` there is no "Run this now?" after
"verdict: refused"."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from harness import MKDOCS, free_port, make_tree

from wikitools.cli import main

H200 = Path(__file__).parent / "fixtures" / "gpu" / "h200-x1"
RB = "needs-sm120"
PAGE = f"""---
title: Needs SM120
status: experimental
---
# Needs SM120

```{{ .bash #{RB} .runbook-server engine=vllm gpus=1 arch=sm120 }}
vllm serve org/model --port 8000
```

```{{ .bash .runbook-client for={RB} name=throughput }}
vllm bench serve --model org/model --num-prompts 4
```

<!-- wiki:results runbook={RB} view=history -->
<!-- wiki:end -->
"""


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    make_tree(tmp_path, {
        **MKDOCS, "wiki/needs.md": PAGE,
        # an H200 (sm90): a runbook for sm120 is refused
        "bin/nvidia-smi": "#!/bin/sh\ncase \"$*\" in\n"
                          f'  *query-gpu*) cat "{H200}/query-gpu.csv";;\n'
                          f'  *query-compute-apps*) cat "{H200}/compute-apps-idle.csv";;\n'
                          f'  topo*) cat "{H200}/topo.txt";;\n'
                          f'  *) cat "{H200}/nvidia-smi.txt";;\nesac\n',
    })
    bin_dir = tmp_path / "bin"
    smi = bin_dir / "nvidia-smi"
    smi.chmod(smi.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    assert main(["runbook", "render", "--root", str(tmp_path)]) == 0
    assert main(["index", "--root", str(tmp_path)]) == 0
    assert main(["check", "--root", str(tmp_path)]) == 0
    return tmp_path


def test_refused_run_with_yes_writes_nothing_under_runbooks(
        tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    page_before = (tree / "wiki" / "needs.md").read_text()
    rc = main(["runbook", "run", RB, "--root", str(tree), "--yes", "--port", str(free_port())])
    out, err = capsys.readouterr()
    assert rc == 1, (out, err)
    assert "verdict: refused" in out
    assert not (tree / "runbooks").exists()
    kept = list((tree / ".artifacts").rglob("record.json"))
    assert len(kept) == 1, (out, err) and '"failed_step": "preflight"' in kept[0].read_text()
    assert "nothing written under runbooks/" in err
    assert (tree / "wiki" / "needs.md").read_text() == page_before
    assert main(["check", "--root", str(tree)]) == 0


def test_refused_run_without_yes_does_not_ask(
        tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["runbook", "run", RB, "--root", str(tree)])
    out, err = capsys.readouterr()
    assert rc == 1
    assert "verdict: refused" in out
    assert "Run this now?" not in out + err
    assert "not run: preflight refused this host" in err
    assert not (tree / "runbooks").exists() and not (tree / ".artifacts").exists()
