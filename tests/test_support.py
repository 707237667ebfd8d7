"""`wiki support-bundle`: the paste a newcomer sends, built from a real page tree, a fake
nvidia-smi that replays real H200 captures, and a log file."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from harness import make_tree

from wikitools.cli import main

H200 = Path(__file__).parent / "fixtures" / "gpu" / "h200-x1"

PAGE = """---
title: Tiny TP2 page
status: experimental
---
# Tiny TP2 page

```{ .bash #tiny-tp2 .runbook-server engine=vllm gpus=2 arch=sm120 }
HF_TOKEN=hf_secret123 NCCL_P2P_DISABLE=1 vllm serve org/model --tp 2 \\
  --decode-context-parallel-size 2 --kv-cache-dtype fp8 \\
  --speculative-config '{"method": "mtp", "num_speculative_tokens": 3}'
```

```{ .bash .runbook-client for=tiny-tp2 name=throughput sweep="CONCURRENCY=1,4" }
vllm bench serve --model org/model --max-concurrency "${CONCURRENCY:-1}"
```
"""


def _fake_smi(bin_dir: Path) -> None:
    script = bin_dir / "nvidia-smi"
    script.write_text(
        "#!/bin/sh\n"
        f'case "$*" in\n'
        f'  *query-gpu*) cat "{H200}/query-gpu.csv";;\n'
        f'  *query-compute-apps*) cat "{H200}/compute-apps-idle.csv";;\n'
        f'  topo*) cat "{H200}/topo.txt";;\n'
        f'  *) cat "{H200}/nvidia-smi.txt";;\n'
        "esac\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    make_tree(tmp_path, {"wiki/tiny.md": PAGE})
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _fake_smi(bin_dir)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return tmp_path


def test_bundle_has_the_support_contract(tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tree / "server.log"
    lines = [f"INFO line {i}" for i in range(100)]
    lines[50] = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"
    log.write_text("\n".join(lines) + "\n")
    rc = main(["support-bundle", "wiki/tiny.md#tiny-tp2", "--log", str(log), "--root", str(tree)])
    out = capsys.readouterr().out
    assert rc == 0
    assert "# Support bundle: wiki/tiny.md#tiny-tp2" in out
    assert "(status: experimental)" in out
    assert "hf_secret123" not in out and "HF_TOKEN=***" in out
    assert "| tensor parallel (TP) | 2 |" in out
    assert "| decode context parallel (DCP) | 2 |" in out
    assert "| speculative decoding (MTP / DSpark / DFlash) | mtp, 3 speculative tokens |" in out
    assert "| KV-cache dtype | fp8 |" in out
    assert "`throughput` (serving, sweep CONCURRENCY=1,4)" in out
    # GPU layout from the replayed real nvidia-smi output.
    assert "driver 580.159.04, CUDA 13.0, 1 GPU(s)" in out
    assert "| 0 | NVIDIA H200 | 9.0 | 0 / 143771 | 00000000:00:06.0 |" in out
    # The OOM line is found with its line number and context; the tail is the last 60 lines.
    assert "    51  torch.OutOfMemoryError: CUDA out of memory." in out
    assert "    50  INFO line 49" in out
    assert "Last 60 lines:" in out and "INFO line 39" not in out.split("Last 60 lines:")[1]
    assert "- latest run record: none (never run)" in out
    assert "## Question" in out


def test_bundle_without_nvidia_smi(
    tree: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    rc = main(["support-bundle", "tiny-tp2", "--root", str(tree)])
    out = capsys.readouterr().out
    assert rc == 0
    assert "nvidia-smi not found" in out
    assert "(none attached: pass --log server.log)" in out


def test_unknown_runbook_suggests(tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["support-bundle", "tiny-tp3", "--root", str(tree), "--no-gpu"])
    err = capsys.readouterr().err
    assert rc == 2
    assert "unknown runbook 'tiny-tp3'; did you mean 'tiny-tp2'?" in err


def test_missing_log_is_usage_error(tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["support-bundle", "tiny-tp2", "--root", str(tree), "--no-gpu", "--log", "nope.log"])
    assert rc == 2
    assert "log file not found: nope.log" in capsys.readouterr().err


def test_bundle_with_unreadable_record_names_it_without_traceback(
    tree: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tree / "runbooks" / "tiny-tp2"
    folder.mkdir(parents=True)
    (folder / "20261130T100000Z-00000000.json").write_text('{"schema_version": 1,')
    rc = main(["support-bundle", "tiny-tp2", "--root", str(tree), "--no-gpu"])
    out, err = capsys.readouterr()
    assert rc == 0 and "Traceback" not in err
    assert ("- latest run record: unreadable: runbooks/tiny-tp2/20261130T100000Z-00000000.json:"
            "1:22: not valid JSON") in out


def test_bundle_masks_secrets_in_logs(tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    key = "sk-proj-Zx81LmQpW0rTy7Vb2Nc4Kd9Qe"
    log = tree / "server.log"
    log.write_text(f"INFO non-default args: {{'api_key': '{key}'}}\n"
                   f"vllm: error: unrecognized arguments: --api_key {key}\n"
                   "ERROR couldn't log in with password: hunter2-x\n")
    assert main(["support-bundle", "tiny-tp2", "--root", str(tree), "--no-gpu",
                 "--log", str(log)]) == 0
    out = capsys.readouterr().out
    assert key not in out and "hunter2-x" not in out
    assert "unrecognized arguments: --api_key ***" in out
