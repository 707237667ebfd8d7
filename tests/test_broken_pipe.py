"""`wiki … | head -1`: a reader that goes away ends the command quietly (exit 141, as a process
killed by SIGPIPE), never with "internal error … BrokenPipeError"."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("argv", [
    ["runbook", "list"],
    ["runbook", "show", "wiki/reference/sm90-h200.md#sm90-llama1b-shape-tp1"],
    ["runbook", "plan", "wiki/reference/sm90-h200.md#sm90-llama1b-shape-tp1", "--force"],
])
def test_closed_stdout_ends_the_command_quietly(argv: list[str]) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "wikitools", *argv, "--root", str(ROOT)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the reader is gone before the first line is written
    err = proc.stderr.read().decode()
    rc = proc.wait(timeout=120)
    assert "BrokenPipe" not in err and "internal error" not in err and "Traceback" not in err
    assert "Exception ignored" not in err
    assert rc == 141, (rc, err)
